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
            blocks: (0..2)
                .map(|_| Block { fc: nn::Linear::new(3, 3), act: nn::ReLU, scale: Tensor::ones([3]) })
                .collect(),
            head: Some(nn::Linear::with_bias(3, 2, false)),
            gain: Tensor::ones([1]).requires_grad_(true),
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
        [
            "gain",
            "first.weight",
            "first.bias",
            "blocks.0.fc.weight",
            "blocks.0.fc.bias",
            "blocks.1.fc.weight",
            "blocks.1.fc.bias",
            "head.weight"
        ]
    );
    let buffers: Vec<String> = net.named_buffers().into_iter().map(|(n, _)| n).collect();
    assert_eq!(buffers, ["blocks.0.scale", "blocks.1.scale"]);
    assert!(net.parameters().iter().all(|p| p.requires_grad() && p.is_leaf()));
    let modules: Vec<String> = net.named_modules().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        modules,
        ["", "first", "blocks.0", "blocks.0.fc", "blocks.0.act", "blocks.1", "blocks.1.fc", "blocks.1.act", "head"]
    );
    assert_eq!(net.children().len(), 4);
}

#[test]
fn vec_fields_print_as_pytorch_module_lists() {
    // class Net(nn.Module): first = Linear(4, 3); blocks = ModuleList([Block(), Block()]);
    // head = Linear(3, 2, bias=False); print(Net()) with Block = (fc: Linear(3, 3), act: ReLU)
    let want = "Net(
  (first): Linear(in_features=4, out_features=3, bias=True)
  (blocks): ModuleList(
    (0-1): 2 x Block(
      (fc): Linear(in_features=3, out_features=3, bias=True)
      (act): ReLU()
    )
  )
  (head): Linear(in_features=3, out_features=2, bias=False)
)";
    let mut net = Net::new();
    assert_eq!(net.to_string(), want);
    // Items that differ print one by one, runs of equal ones collapse (PyTorch 2's repr).
    net.blocks.push(Block { fc: nn::Linear::new(3, 3), act: nn::ReLU, scale: Tensor::ones([3]) });
    net.blocks[1].fc = nn::Linear::with_bias(3, 3, false);
    let text = net.to_string();
    assert!(text.contains("  (blocks): ModuleList(\n    (0): Block(\n"), "{text}");
    assert!(
        text.contains("\n    (1): Block(\n      (fc): Linear(in_features=3, out_features=3, bias=False)"),
        "{text}"
    );
    assert!(text.contains("\n    (2): Block(\n"), "{text}");
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
    let x = Tensor::randn([7, 100]);
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
    let x = Tensor::randn([2, 4]);
    assert_eq!(a.forward(&x).to_vec::<f32>(), b.forward(&x).to_vec::<f32>());

    let mut partial: StateDict = sd.iter().filter(|(n, _)| *n != "head.weight").map(|(n, t)| (n, t.clone())).collect();
    partial.insert("extra.weight", Tensor::zeros([1]));
    let err = b.load_state_dict(&partial).unwrap_err().to_string();
    assert!(
        err.contains("missing keys [\"head.weight\"]") && err.contains("unexpected keys [\"extra.weight\"]"),
        "{err}"
    );
    let report = b.load_state_dict_non_strict(&partial).unwrap();
    assert_eq!(report.missing_keys, ["head.weight"]);
    assert_eq!(report.unexpected_keys, ["extra.weight"]);

    let mut wrong = sd.clone();
    wrong.insert("first.weight", Tensor::zeros([3, 5]));
    let err = b.load_state_dict(&wrong).unwrap_err().to_string();
    assert!(
        err.contains("size mismatch for first.weight") && err.contains("[3, 5]") && err.contains("[3, 4]"),
        "{err}"
    );
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
    let x = Tensor::randn([3, 4]);
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

    let loss = net.forward(&Tensor::randn([5, 4])).sum();
    loss.backward();
    assert!(net.parameters().iter().all(|p| p.grad().is_some()));
    net.zero_grad();
    assert!(net.parameters().iter().all(|p| p.grad().is_none()));

    net.first.requires_grad_(false);
    net.forward(&Tensor::randn([5, 4])).sum().backward();
    assert!(net.first.weight.grad().is_none());
    assert!(net.head.as_ref().unwrap().weight.grad().is_some());
}

#[test]
fn to_dtype_converts_parameters_and_keeps_them_trainable() {
    let mut net = Net::new();
    net.to_dtype(DType::F64);
    assert!(net.parameters().iter().all(|p| p.dtype() == DType::F64 && p.requires_grad() && p.is_leaf()));
    assert!(net.buffers().iter().all(|b| b.dtype() == DType::F64 && !b.requires_grad()));
    let y = net.forward(&Tensor::randn([2, 4]).to_dtype(DType::F64));
    assert_eq!(y.dtype(), DType::F64);
    net.to(&kiln::Device::Cpu);
    if !kiln::Device::cuda_is_available() {
        let err = net.try_to(&kiln::Device::Cuda(0)).unwrap_err();
        assert_eq!(err.kind, kiln::ErrorKind::Device);
    }
}

#[test]
fn a_small_regression_trains_with_plain_sgd() {
    kiln::manual_seed(3);
    let model = nn::Sequential::new().add(nn::Linear::new(2, 8)).add(nn::Tanh).add(nn::Linear::new(8, 1));
    let x = Tensor::randn([64, 2]);
    let y = (x.i((.., 0..1)) * 2.0 - x.i((.., 1..2))).tanh();
    let mse = |m: &nn::Sequential| (m.forward(&x) - &y).square().mean();
    let first = mse(&model).item::<f32>();
    for _ in 0..300 {
        model.zero_grad();
        mse(&model).backward();
        let _guard = kiln::no_grad_guard();
        for p in model.parameters() {
            p.sub_(&(p.grad().unwrap() * 0.2));
        }
    }
    let last = mse(&model).item::<f32>();
    assert!(last < first * 0.1, "loss {first} -> {last}");
}

#[test]
fn every_layer_prints_like_pytorch() {
    use kiln::nn::functional::{ConvOpts, MaxPool2dOpts, Padding};
    let seq = nn::Sequential::new()
        .add(nn::Conv2d::with_opts(
            3,
            8,
            [3, 3],
            ConvOpts { stride: [2, 2], padding: Padding::Explicit([1, 1]), ..Default::default() },
            false,
        ))
        .add(nn::Conv2d::with_opts(
            8,
            8,
            [3, 3],
            ConvOpts { padding: Padding::Same, dilation: [2, 2], groups: 4, ..Default::default() },
            true,
        ))
        .add(nn::Conv1d::new(4, 6, 5))
        .add(nn::MaxPool2d::new(2))
        .add(nn::MaxPool2d::with_opts(MaxPool2dOpts {
            stride: Some([1, 1]),
            ceil_mode: true,
            ..MaxPool2dOpts::new([2, 3])
        }))
        .add(nn::AvgPool2d::with_opts(kiln::nn::functional::AvgPool2dOpts {
            stride: Some([2, 2]),
            padding: [1, 1],
            ..kiln::nn::functional::AvgPool2dOpts::new([3, 3])
        }))
        .add(nn::AdaptiveAvgPool2d::new([1, 1]))
        .add(nn::BatchNorm2d::new(8))
        .add(nn::BatchNorm1d::with_opts(4, 1e-5, None, false, true))
        .add(nn::LayerNorm::new([10]))
        .add(nn::GroupNorm::new(2, 8))
        .add(nn::Dropout2d::new(0.5))
        .add(nn::Embedding::with_padding(10, 3, Some(0)))
        .add(nn::GELU::tanh())
        .add(nn::Softmax::new(-1))
        .add(nn::Identity);
    // print(nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False),
    //   nn.Conv2d(8, 8, 3, padding='same', dilation=2, groups=4), nn.Conv1d(4, 6, 5), nn.MaxPool2d(2),
    //   nn.MaxPool2d((2, 3), stride=1, ceil_mode=True), nn.AvgPool2d(3, stride=2, padding=1),
    //   nn.AdaptiveAvgPool2d((1, 1)), nn.BatchNorm2d(8), nn.BatchNorm1d(4, momentum=None, affine=False),
    //   nn.LayerNorm(10), nn.GroupNorm(2, 8), nn.Dropout2d(0.5), nn.Embedding(10, 3, padding_idx=0),
    //   nn.GELU(approximate='tanh'), nn.Softmax(dim=-1), nn.Identity()))       (PyTorch 2.15)
    let want = "Sequential(
  (0): Conv2d(3, 8, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), bias=False)
  (1): Conv2d(8, 8, kernel_size=(3, 3), stride=(1, 1), padding=same, dilation=(2, 2), groups=4)
  (2): Conv1d(4, 6, kernel_size=(5,), stride=(1,))
  (3): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
  (4): MaxPool2d(kernel_size=(2, 3), stride=1, padding=0, dilation=1, ceil_mode=True)
  (5): AvgPool2d(kernel_size=3, stride=2, padding=1)
  (6): AdaptiveAvgPool2d(output_size=(1, 1))
  (7): BatchNorm2d(8, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)
  (8): BatchNorm1d(4, eps=1e-05, momentum=None, affine=False, bias=False, track_running_stats=True)
  (9): LayerNorm((10,), eps=1e-05, elementwise_affine=True, bias=True)
  (10): GroupNorm(2, 8, eps=1e-05, affine=True, bias=True)
  (11): Dropout2d(p=0.5, inplace=False)
  (12): Embedding(10, 3, padding_idx=0)
  (13): GELU(approximate='tanh')
  (14): Softmax(dim=-1)
  (15): Identity()
)";
    assert_eq!(seq.to_string(), want);
    // Buffers follow PyTorch's names; BatchNorm's counter stays int64 through to_dtype.
    let names: Vec<String> = seq.named_buffers().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "7.running_mean",
            "7.running_var",
            "7.num_batches_tracked",
            "8.running_mean",
            "8.running_var",
            "8.num_batches_tracked"
        ]
    );
}

#[test]
fn batch_norm_layer_tracks_batches_and_uses_running_stats_in_eval() {
    kiln::manual_seed(4);
    let mut bn = nn::BatchNorm2d::new(3);
    let x = Tensor::randn([4, 3, 2, 2]) * 2.0 + 1.0;
    let y = bn.forward(&x);
    assert_eq!(bn.num_batches_tracked.as_ref().unwrap().item::<i64>(), 1);
    // Train mode normalises with the batch statistics: per-channel mean ≈ 0.
    let m: Vec<f32> = y.mean_dim([0, 2, 3]).to_vec();
    assert!(m.iter().all(|v| v.abs() < 1e-5), "{m:?}");
    // running_mean = 0.9·0 + 0.1·batch mean
    let want: Vec<f32> = (x.mean_dim([0, 2, 3]) * 0.1).to_vec();
    let got: Vec<f32> = bn.running_mean.as_ref().unwrap().to_vec();
    assert!(got.iter().zip(&want).all(|(a, b)| (a - b).abs() < 1e-6));
    bn.eval();
    let before = bn.running_mean.as_ref().unwrap().to_vec::<f32>();
    let _ = bn.forward(&x);
    assert_eq!(bn.running_mean.as_ref().unwrap().to_vec::<f32>(), before, "eval mode leaves the running stats alone");
    assert_eq!(bn.num_batches_tracked.as_ref().unwrap().item::<i64>(), 1);
}
