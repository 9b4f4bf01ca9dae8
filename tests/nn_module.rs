//! The Module trait and #[derive(Module)]: names, order, printing, state dicts, modes.

use kiln::nn::{self, Module};
use kiln::{DType, StateDict, Tensor};

#[derive(Module)]
struct Block {
    fc: nn::Linear,
    act: nn::ReLU,
    #[module(buffer)]
    scale: Tensor,
}

impl Module for Block {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.act.forward(&self.fc.forward(x)) * &self.scale
    }
}

#[derive(Module)]
struct Net {
    first: nn::Linear,
    blocks: Vec<Block>,
    head: Option<nn::Linear>,
    gain: Tensor,
    hidden: usize,
    training: bool,
}

impl Net {
    fn new() -> Net {
        kiln::manual_seed(0);
        Net {
            first: nn::Linear::new(4, 3),
            blocks: (0..2).map(|_| Block { fc: nn::Linear::new(3, 3), act: nn::ReLU, scale: Tensor::ones(&[3]) }).collect(),
            head: Some(nn::Linear::with_bias(3, 2, false)),
            gain: Tensor::ones(&[1]).requires_grad_(true),
            hidden: 3,
            training: true,
        }
    }
}

impl Module for Net {
    fn forward(&self, x: &Tensor) -> Tensor {
        let mut h = self.first.forward(x);
        for b in &self.blocks {
            h = b.forward(&h);
        }
        assert_eq!(h.size(-1), self.hidden);
        self.head.as_ref().unwrap().forward(&h) * &self.gain
    }
}

#[test]
fn names_follow_pytorch_order_own_parameters_first() {
    let net = Net::new();
    let names: Vec<String> = net.named_parameters().into_iter().map(|(n, _)| n).collect();
    // PyTorch: a module's own parameters come before its children's.
    assert_eq!(
        names,
        ["gain", "first.weight", "first.bias", "blocks.0.fc.weight", "blocks.0.fc.bias", "blocks.1.fc.weight", "blocks.1.fc.bias", "head.weight"]
    );
    let buffers: Vec<String> = net.named_buffers().into_iter().map(|(n, _)| n).collect();
    assert_eq!(buffers, ["blocks.0.scale", "blocks.1.scale"]);
    assert!(net.parameters().iter().all(|p| p.requires_grad() && p.is_leaf()));
    let modules: Vec<String> = net.named_modules().into_iter().map(|(n, _)| n).collect();
    assert_eq!(modules, ["", "first", "blocks.0", "blocks.0.fc", "blocks.0.act", "blocks.1", "blocks.1.fc", "blocks.1.act", "head"]);
    assert_eq!(net.children().len(), 4);
}

#[test]
fn display_matches_pytorch_print() {
    kiln::manual_seed(0);
    let seq = nn::Sequential::new()
        .add(nn::Linear::new(784, 128))
        .add(nn::ReLU)
        .add(nn::Dropout::new(0.25))
        .add(nn::Sequential::new().add(nn::LeakyReLU::default()).add(nn::Flatten::new()))
        .add(nn::LogSoftmax::new(1));
    // print(nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Dropout(0.25),
    //       nn.Sequential(nn.LeakyReLU(), nn.Flatten()), nn.LogSoftmax(dim=1)))
    let want = "Sequential(
  (0): Linear(in_features=784, out_features=128, bias=True)
  (1): ReLU()
  (2): Dropout(p=0.25, inplace=False)
  (3): Sequential(
    (0): LeakyReLU(negative_slope=0.01)
    (1): Flatten(start_dim=1, end_dim=-1)
  )
  (4): LogSoftmax(dim=1)
)";
    assert_eq!(seq.to_string(), want);
    let named: Vec<String> = seq.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(named, ["0.weight", "0.bias"]);
}

#[test]
fn linear_init_uses_pytorch_bounds_and_forward_is_affine() {
    kiln::manual_seed(1);
    let fc = nn::Linear::new(100, 50);
    let w: Vec<f32> = fc.weight.to_vec();
    let b: Vec<f32> = fc.bias.as_ref().unwrap().to_vec();
    assert!(w.iter().chain(&b).all(|x| x.abs() <= 0.1 + 1e-7), "U(±1/√100)");
    assert!(w.iter().any(|x| x.abs() > 0.09));
    let x = Tensor::randn(&[7, 100]);
    let y = fc.forward(&x);
    let want = x.matmul(&fc.weight.t()) + fc.bias.as_ref().unwrap();
    assert_eq!(y.to_vec::<f32>(), want.to_vec::<f32>());
}

#[test]
fn state_dict_round_trip_and_strict_errors() {
    let a = Net::new();
    kiln::manual_seed(9);
    let mut b = Net { first: nn::Linear::new(4, 3), ..Net::new() };
    let sd = a.state_dict();
    assert_eq!(sd.len(), 10);
    let keep = b.first.weight.clone();
    b.load_state_dict(&sd).unwrap();
    // Loaded in place: the old handle (an optimizer's) sees the new values.
    assert_eq!(keep.to_vec::<f32>(), a.first.weight.to_vec::<f32>());
    let x = Tensor::randn(&[2, 4]);
    assert_eq!(a.forward(&x).to_vec::<f32>(), b.forward(&x).to_vec::<f32>());

    let mut partial: StateDict = sd.iter().filter(|(n, _)| *n != "head.weight").map(|(n, t)| (n, t.clone())).collect();
    partial.insert("extra.weight", Tensor::zeros(&[1]));
    let err = b.load_state_dict(&partial).unwrap_err().to_string();
    assert!(err.contains("missing keys [\"head.weight\"]") && err.contains("unexpected keys [\"extra.weight\"]"), "{err}");
    let report = b.load_state_dict_non_strict(&partial).unwrap();
    assert_eq!(report.missing_keys, ["head.weight"]);
    assert_eq!(report.unexpected_keys, ["extra.weight"]);

    let mut wrong = sd.clone();
    wrong.insert("first.weight", Tensor::zeros(&[3, 5]));
    let err = b.load_state_dict(&wrong).unwrap_err().to_string();
    assert!(err.contains("size mismatch for first.weight") && err.contains("[3, 5]") && err.contains("[3, 4]"), "{err}");
}

#[test]
fn save_and_load_a_module_through_safetensors() {
    let a = Net::new();
    let path = std::env::temp_dir().join(format!("kiln-nn-module-{}.safetensors", std::process::id()));
    kiln::save(&a.state_dict(), &path).unwrap();
    kiln::manual_seed(5);
    let mut b = Net { first: nn::Linear::new(4, 3), ..Net::new() };
    b.load_state_dict(&kiln::load(&path).unwrap()).unwrap();
    std::fs::remove_file(&path).unwrap();
    let x = Tensor::randn(&[3, 4]);
    assert_eq!(a.forward(&x).to_vec::<f32>(), b.forward(&x).to_vec::<f32>());
}

#[test]
fn train_eval_zero_grad_and_freezing() {
    let mut net = Net::new();
    assert!(net.is_training());
    net.eval();
    assert!(!net.is_training() && !net.training);
    let mut seq = nn::Sequential::new().add(nn::Dropout::new(0.5)).add(nn::Linear::new(2, 2));
    seq.eval();
    assert!(!seq.is_training());
    seq.train();
    assert!(seq.is_training());

    let loss = net.forward(&Tensor::randn(&[5, 4])).sum();
    loss.backward();
    assert!(net.parameters().iter().all(|p| p.grad().is_some()));
    net.zero_grad();
    assert!(net.parameters().iter().all(|p| p.grad().is_none()));

    net.first.requires_grad_(false);
    net.forward(&Tensor::randn(&[5, 4])).sum().backward();
    assert!(net.first.weight.grad().is_none());
    assert!(net.head.as_ref().unwrap().weight.grad().is_some());
}

#[test]
fn to_dtype_converts_parameters_and_keeps_them_trainable() {
    let mut net = Net::new();
    net.to_dtype(DType::F64);
    assert!(net.parameters().iter().all(|p| p.dtype() == DType::F64 && p.requires_grad() && p.is_leaf()));
    assert!(net.buffers().iter().all(|b| b.dtype() == DType::F64 && !b.requires_grad()));
    let y = net.forward(&Tensor::randn(&[2, 4]).to_dtype(DType::F64));
    assert_eq!(y.dtype(), DType::F64);
    net.to(&kiln::Device::Cpu);
    let err = net.try_to(&kiln::Device::Cuda(0)).unwrap_err();
    assert_eq!(err.kind, kiln::ErrorKind::Device);
}

#[test]
fn a_small_regression_trains_with_plain_sgd() {
    kiln::manual_seed(3);
    let model = nn::Sequential::new().add(nn::Linear::new(2, 8)).add(nn::Tanh).add(nn::Linear::new(8, 1));
    let x = Tensor::randn(&[64, 2]);
    let y = (x.i((.., 0..1)) * 2.0 - x.i((.., 1..2))).tanh();
    let mse = |m: &nn::Sequential| (m.forward(&x) - &y).square().mean();
    let first = mse(&model).item::<f32>();
    for _ in 0..300 {
        model.zero_grad();
        mse(&model).backward();
        let _guard = kiln::no_grad();
        for p in model.parameters() {
            p.sub_(&(p.grad().unwrap() * 0.2));
        }
    }
    let last = mse(&model).item::<f32>();
    assert!(last < first * 0.1, "loss {first} -> {last}");
}
