//! The program of `docs/api.md` (the user-facing contract), written with nothing but
//! `use kiln::prelude::*;` and the paths docs/api.md itself spells (`kiln::set_num_threads`,
//! `kiln::vision::datasets::MNIST`, …): if a name it uses is not exported, this file does not
//! compile (the blitz `Net` it trains is the shared `tests/common/blitz_net.rs`). The parts
//! that need no files run (tiny shapes); the data and checkpoint lines are in a function that
//! is compiled but only run against a temporary directory.

use kiln::prelude::*;

// docs/api.md's `#[derive(Module)] struct Net` is the blitz's CIFAR-10 net, shared with the
// checkpoint test and the benches.
#[path = "common/blitz_net.rs"]
mod blitz_net;
use blitz_net::Net;

struct BinaryActive;

impl kiln::autograd::Function for BinaryActive {
    fn forward(&self, ctx: &mut kiln::autograd::FunctionCtx, inputs: &[Tensor]) -> Tensor {
        ctx.save_for_backward(&[&inputs[0]]);
        inputs[0].sign()
    }

    fn backward(&self, ctx: &kiln::autograd::FunctionCtx, grad_output: &Tensor) -> Vec<Option<Tensor>> {
        let x = &ctx.saved_tensors()[0];
        vec![Some(Tensor::where_cond(&x.abs().le(1.0), grad_output, 0.0))]
    }
}

#[test]
fn settings_tensors_and_autograd() {
    kiln::set_num_threads(kiln::get_num_threads());
    kiln::use_deterministic_algorithms(true);
    assert!(kiln::are_deterministic_algorithms_enabled());
    kiln::use_deterministic_algorithms(false);

    kiln::manual_seed(0);
    let x = Tensor::empty([5, 3]);
    assert_eq!(x.shape(), &[5, 3]);
    let x = Tensor::rand([5, 3]);
    let _ = (
        Tensor::randn([2]),
        Tensor::zeros([2]),
        Tensor::ones([2]),
        Tensor::full([2], 7),
        Tensor::arange(3),
        Tensor::linspace(0.0, 1.0, 3),
        Tensor::eye(2),
    );
    let z = Tensor::zeros([5, 3]).to_dtype(DType::I64);
    assert_eq!(z.dtype(), DType::I64);
    let _dtypes = [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::I32, DType::U8, DType::Bool];
    let _ = Tensor::from_slice(&[5.5f32, 3.0]);
    let _ = Tensor::from_vec(vec![1.0f32; 6], [2, 3]);
    let _m = Tensor::new(&[[1.0f32, 2.0], [3.0, 4.0]]);
    let y = x.ones_like();
    let _r = Tensor::randn_like(&x);
    let _ = (x.shape(), x.size(1), x.dtype(), x.device(), x.numel(), x.dim());
    let w = Tensor::rand([3, 2]);
    let s = &x + &y;
    let p = &x * 2.0;
    let q = x.matmul(&w);
    let e = x.exp().sum_dim_keepdim(1);
    assert_eq!(
        (s.shape(), p.shape(), q.shape(), e.shape()),
        (&[5usize, 3][..], &[5usize, 3][..], &[5usize, 2][..], &[5usize, 1][..])
    );
    x.add_(&y);
    let _c = x.i((.., 1));
    let _n = x.narrow(0, 1, 2);
    let _ = (
        x.select(0, 1),
        x.index_select(0, &Tensor::new(&[0i64, 2])),
        x.gather(1, &Tensor::zeros([5, 1]).to_dtype(DType::I64)),
    );
    let v = Tensor::rand([4, 4]).view([-1, 8]);
    assert_eq!(v.shape(), &[2, 8]);
    // Shapes: any IntoShape, in creations and views alike (docs/api.md, "Shapes").
    let shape = x.shape().to_vec();
    for z in [Tensor::zeros((5, 3)), Tensor::zeros([5, 3]), Tensor::zeros(vec![5i64, 3]), Tensor::zeros(&shape)] {
        assert_eq!(z.shape(), &[5, 3]);
    }
    assert_eq!(Tensor::zeros(x.shape()).shape(), x.shape());
    assert_eq!((x.view(-1).shape(), x.reshape((3, -1)).shape()), (&[15usize][..], &[3usize, 5][..]));
    assert_eq!((Tensor::zeros(()).dim(), Tensor::ones(4).shape()), (0, &[4usize][..]));
    assert!(Tensor::try_zeros([-1, 3]).unwrap_err().message.contains("negative size -1 in shape [-1, 3]"));
    // Reductions drop the reduced dims (keepdim=False) unless `_keepdim`; var/std are unbiased.
    assert_eq!((x.sum_dim(1).shape(), x.sum_dim_keepdim(1).shape()), (&[5usize][..], &[5usize, 1][..]));
    assert_eq!((x.max_dim(0).0.shape(), x.mean_dim_keepdim([0, 1]).shape()), (&[3usize][..], &[1usize, 1][..]));
    let four = Tensor::new(&[1.0f64, 2.0, 3.0, 4.0]);
    assert_eq!((four.var().item::<f64>(), four.var_correction([], 0, false).item::<f64>()), (5.0 / 3.0, 1.25));
    let t = x.transpose(0, 1);
    assert!(!t.is_contiguous() && t.contiguous().is_contiguous());
    let (a, b) = (Tensor::ones([2]), Tensor::zeros([2]));
    let _k = Tensor::cat(&[&a, &b], 0);
    let _st = Tensor::stack(&[&a, &b], 0);
    let loss = x.sum();
    let _f: f32 = loss.item();
    let _data: Vec<f32> = x.to_vec();
    let _ = (Tensor::rand([2, 2]).to_vec2::<f32>(), Tensor::rand([1, 2, 2]).to_vec3::<f32>());
    let d = Device::cuda_if_available(0);
    let _g = x.to(&d);
    let _cpu = [Device::Cpu, Device::Cuda(0)];
    assert!(!format!("{x}").is_empty());

    let x = Tensor::ones([2, 2]).requires_grad_(true);
    let y = &x + 2.0;
    assert_eq!(y.grad_fn().unwrap().name(), "AddBackward0");
    let out = (&y * &y * 3.0).mean();
    out.backward();
    assert_eq!(x.grad().unwrap().to_vec::<f32>(), vec![4.5; 4]);
    let y2 = &x * 2.0;
    y2.backward_with(&Tensor::ones([2, 2]));
    let loss = (&x * &x).sum();
    loss.backward_opts(BackwardOpts { retain_graph: true, create_graph: true });
    let frozen = x.detach();
    assert!(!frozen.requires_grad());
    {
        let _guard = kiln::no_grad_guard();
        assert!(!(&x * 2.0).requires_grad());
    }
    assert!(!y.grad_fn().unwrap().next_functions().is_empty());
    use kiln::autograd::Function;
    let ba = BinaryActive.apply(&[Tensor::new(&[-2.0f32, 0.5]).requires_grad_(true)]);
    assert_eq!(ba.to_vec::<f32>(), vec![-1.0, 1.0]);
}

#[test]
fn nn_optim_and_compile() {
    kiln::manual_seed(0);
    let mut net = Net::new();
    assert!(format!("{net}").starts_with("Net("));
    assert!(nn::summary(&net, &[1, 3, 32, 32]).to_string().contains("Total params: 62,006"));
    let d = Device::Cpu;
    let _ = (net.parameters(), net.named_parameters());
    net.zero_grad();
    net.train();
    net.eval();
    net.to(&d);
    let criterion = nn::CrossEntropyLoss::new();
    let _others = (nn::MSELoss::new(), nn::NLLLoss::new(), nn::BCEWithLogitsLoss::new());
    let lstm = nn::LSTM::with_opts(10, 20, nn::RNNOpts { num_layers: 2, batch_first: true, ..Default::default() });
    let _recurrent = (nn::RNN::new(10, 20), nn::GRU::new(10, 20), nn::LSTMCell::new(10, 20));
    let seq = Tensor::randn([2, 5, 10]);
    let (out, (h_n, c_n)) = lstm.forward_with_state(&seq, None);
    assert_eq!((out.shape(), h_n.shape(), c_n.shape()), (&[2, 5, 20][..], &[2, 2, 20][..], &[2, 2, 20][..]));
    assert_eq!(lstm.forward(&seq).shape(), &[2, 5, 20]);
    let mha = nn::MultiheadAttention::with_opts(8, 2, nn::MhaOpts { batch_first: true, ..Default::default() });
    let (q, k, v) = (Tensor::randn([2, 3, 8]), Tensor::randn([2, 5, 8]), Tensor::randn([2, 5, 8]));
    let pad = Tensor::new(&[[false, false, false, false, true], [false; 5]]);
    let (attn, weights) = mha.forward_with(&q, &k, &v, nn::MhaArgs::default().key_padding_mask(&pad));
    assert_eq!((attn.shape(), weights.unwrap().shape()), (&[2, 3, 8][..], &[2, 3, 5][..]));
    let enc = nn::TransformerEncoder::new(nn::TransformerEncoderLayer::new(8, 2), 2, None);
    assert_eq!(enc.forward(&Tensor::randn([5, 2, 8])).shape(), &[5, 2, 8]);
    let y = F::scaled_dot_product_attention(&q, &k, &v, None, 0.0, true, None);
    assert_eq!(y.shape(), &[2, 3, 8]);
    let up = nn::ConvTranspose2d::with_opts(
        8,
        4,
        [3, 3],
        F::ConvTransposeOpts { stride: [2, 2], padding: [1, 1], output_padding: [1, 1], ..Default::default() },
        true,
    );
    let _more_convs = (nn::ConvTranspose1d::new(2, 2, 3), nn::Conv3d::new(2, 2, 3));
    let img = Tensor::randn([1, 8, 4, 4]);
    assert_eq!(up.forward(&img).shape(), &[1, 4, 8, 8]);
    let (p, idx) = F::adaptive_max_pool2d_with_indices(&img, [2, 2]);
    assert_eq!((p.shape(), idx.shape()), (&[1, 8, 2, 2][..], &[1, 8, 2, 2][..]));
    let _pools =
        (nn::MaxPool1d::new(2), nn::AvgPool1d::new(2), nn::MaxPool3d::new(2), nn::AdaptiveMaxPool2d::new([2, 2]));
    let _ = (F::max_pool1d(&seq, 2), F::avg_pool1d(&seq, 2), F::max_pool3d(&img, 2));
    let (x1, x2) = (Tensor::randn([2, 3]), Tensor::randn([2, 4]));
    let y = nn::Bilinear::new(3, 4, 5).forward_with(&x1, &x2);
    assert_eq!(y.shape(), &[2, 5]);
    assert_eq!(nn::Identity.forward(&y).shape(), &[2, 5]);
    let mut opt =
        optim::SGD::new(net.parameters(), optim::SGDConfig { lr: 0.001, momentum: 0.9, ..Default::default() });
    let inputs = Tensor::randn([2, 3, 32, 32]);
    let labels = Tensor::new(&[1i64, 7]);
    opt.zero_grad();
    let loss = criterion.forward(&net.forward(&inputs), &labels);
    loss.backward();
    opt.step();
    let mut sched = optim::lr_scheduler::StepLR::new(&mut opt, 30, 0.1);
    sched.step(&mut opt);
    let sd = opt.state_dict();
    opt.load_state_dict(&sd).unwrap();

    let w = Tensor::randn([8, 4]).requires_grad_(true);
    let x = Tensor::randn([16, 8]);
    let y = Tensor::randn([16, 4]);
    let mut step = kiln::compile(|(x, y): (&Tensor, &Tensor)| {
        w.set_grad(None);
        let loss = (x.matmul(&w) - y).square().mean();
        loss.backward();
        loss
    });
    let loss = step.call((&x, &y));
    assert!(loss.item::<f32>() > 0.0);
    let _kernels = step.kernels();
    assert!(!step.graph_nodes().is_empty());
    let dir = std::env::temp_dir().join(format!("kiln-api-surface-runs-{}", std::process::id()));
    let mut writer = kiln::tensorboard::SummaryWriter::new(&dir).unwrap();
    writer.add_graph(&step).unwrap();
    writer.close().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The data and checkpoint lines of docs/api.md, against files made in a temporary directory.
fn data_and_checkpoints(dir: &std::path::Path) -> kiln::Result<()> {
    let mut net = Net::new();
    let path = dir.join("cifar_net.safetensors");
    kiln::save(&net.state_dict(), &path)?;
    net.load_state_dict(&kiln::load(&path)?)?;
    let missing = kiln::vision::datasets::MNIST::new(dir.join("no-mnist-here"), Split::Train);
    assert!(missing.is_err(), "a missing dataset is an error, not a panic");
    use kiln::vision::transforms::{
        CenterCrop, ColorJitter, Compose, Normalize, RandomHorizontalFlip, RandomResizedCrop, Resize, ToTensor,
    };
    let (mean, std) = ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]);
    let folder = kiln::vision::datasets::ImageFolder::new(dir.join("no-train-here"));
    assert!(folder.is_err(), "a missing image folder is an error, not a panic");
    let _train_tf = Compose::new((
        RandomResizedCrop::new(224),
        RandomHorizontalFlip::default(),
        ColorJitter::new().brightness(0.4).contrast(0.4).saturation(0.4).hue(0.1),
        ToTensor,
        Normalize::new(&mean, &std),
    ));
    let _val_tf = Compose::new((Resize::new(256), CenterCrop::new(224), ToTensor));
    let p = kiln::vision::Pixels::new(vec![9; 3 * 2 * 2], 3, 2, 2)?;
    let _y = kiln::vision::transforms::functional::adjust_hue(kiln::vision::Image::Pixels(p), 0.1)?;
    let train = kiln::data::TensorDataset::new(vec![Tensor::rand([4, 1, 2, 2]), Tensor::new(&[0i64, 1, 2, 3])])?;
    let loader =
        kiln::data::DataLoader::new(train).batch_size(2).shuffle(true).num_workers(2).pin_memory(true).drop_last(false);
    let mut batches = 0;
    for batch in &loader {
        assert_eq!(batch[0].shape(), &[2, 1, 2, 2]);
        batches += 1;
    }
    assert_eq!(batches, 2);
    let mut writer = kiln::tensorboard::SummaryWriter::new(dir.join("runs/mnist"))?;
    writer.add_scalar("loss/train", Tensor::new(&[0.5f32]).item::<f64>(), 1)?;
    writer.add_scalars("loss", &[("train", 0.5), ("test", 0.6)], 1)?;
    writer.add_histogram("fc1.weight", &net.parameters()[0], 1)?;
    writer.add_images("batch", &Tensor::rand([2, 1, 2, 2]), 0, "NCHW")?;
    writer.add_image("one", &Tensor::rand([3, 2, 2]), 0, "CHW")?;
    writer.add_text("notes", "**lr** 0.1", 0)?;
    writer.add_hparams(&[("lr", 0.1.into())], &[("hparam/accuracy", 0.9)], None)?;
    writer.close()?;
    Ok(())
}

#[test]
fn data_and_checkpoint_lines() {
    let dir = std::env::temp_dir().join(format!("kiln-api-surface-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let r = data_and_checkpoints(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    r.unwrap();
}
