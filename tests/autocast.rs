//! `kiln::autocast` against `torch.autocast("cpu")`: the dtype of every op of
//! tests/fixtures/autocast.txt (scripts/fixtures_autocast.py) under bf16 and f16 regions, for
//! the input dtypes given; then gradients through the casts, the weight cache inside a compiled
//! step, and a compiled autocast step equal to the eager one.

use kiln::nn::functional::{Conv1dOpts, Conv2dOpts, Conv3dOpts, ConvTranspose1dOpts, ConvTranspose2dOpts, PadMode};
use kiln::ops::QuantileInterpolation;
use kiln::optim::{SGDConfig, SGD};
use kiln::prelude::*;
use kiln::AutocastOptions;

#[path = "common/seeded.rs"]
mod seeded;
use seeded::seeded;

fn dtype(name: &str) -> DType {
    match name {
        "f32" => DType::F32,
        "f64" => DType::F64,
        "bf16" => DType::BF16,
        "f16" => DType::F16,
        other => panic!("unknown dtype {other}"),
    }
}

fn r(shape: &[usize], d: DType) -> Tensor {
    Tensor::randn(shape).to_dtype(d)
}

/// Op `op` of the fixture on inputs of dtypes `d`, as scripts/fixtures_autocast.py calls it;
/// `None` for the ops kiln does not have.
fn run(op: &str, d: &[DType]) -> Option<kiln::Result<Tensor>> {
    let targets = || Tensor::from_slice(&[0i64, 4, 2, 1]);
    Some(match op {
        "matmul" => r(&[3, 4], d[0]).try_matmul(&r(&[4, 5], d[1])),
        "mm" => r(&[3, 4], d[0]).try_mm(&r(&[4, 5], d[1])),
        "bmm" => r(&[2, 3, 4], d[0]).try_bmm(&r(&[2, 4, 5], d[1])),
        "linear" => F::try_linear(&r(&[3, 4], d[0]), &r(&[5, 4], d[1]), Some(&r(&[5], d[2]))),
        "addmm" => r(&[3, 5], d[0]).try_addmm(&r(&[3, 4], d[1]), &r(&[4, 5], d[2]), 1.0, 1.0),
        "baddbmm" => r(&[2, 3, 5], d[0]).try_baddbmm(&r(&[2, 3, 4], d[1]), &r(&[2, 4, 5], d[2]), 1.0, 1.0),
        "einsum" => Tensor::try_einsum("ij,jk->ik", &[&r(&[3, 4], d[0]), &r(&[4, 5], d[1])]),
        "conv1d" => {
            F::try_conv1d(&r(&[1, 2, 8], d[0]), &r(&[3, 2, 3], d[1]), Some(&r(&[3], d[2])), &Conv1dOpts::default())
        }
        "conv2d" => F::try_conv2d(
            &r(&[1, 2, 6, 6], d[0]),
            &r(&[3, 2, 3, 3], d[1]),
            Some(&r(&[3], d[2])),
            &Conv2dOpts::default(),
        ),
        "conv3d" => F::try_conv3d(
            &r(&[1, 2, 4, 4, 4], d[0]),
            &r(&[3, 2, 3, 3, 3], d[1]),
            Some(&r(&[3], d[2])),
            &Conv3dOpts::default(),
        ),
        "conv_transpose1d" => F::try_conv_transpose1d(
            &r(&[1, 2, 5], d[0]),
            &r(&[2, 3, 3], d[1]),
            Some(&r(&[3], d[2])),
            &ConvTranspose1dOpts::default(),
        ),
        "conv_transpose2d" => F::try_conv_transpose2d(
            &r(&[1, 2, 4, 4], d[0]),
            &r(&[2, 3, 3, 3], d[1]),
            Some(&r(&[3], d[2])),
            &ConvTranspose2dOpts::default(),
        ),
        "scaled_dot_product_attention" => F::try_scaled_dot_product_attention(
            &r(&[1, 2, 4, 8], d[0]),
            &r(&[1, 2, 4, 8], d[1]),
            &r(&[1, 2, 4, 8], d[2]),
            None,
            0.0,
            false,
            None,
        ),
        "prelu" => F::try_prelu(&r(&[2, 3], d[0]), &r(&[3], d[1]).abs()),
        "mse_loss" => F::try_mse_loss_opts(&r(&[4, 3], d[0]), &r(&[4, 3], d[1]), Default::default()),
        "l1_loss" => F::try_l1_loss_opts(&r(&[4, 3], d[0]), &r(&[4, 3], d[1]), Default::default()),
        "smooth_l1_loss" => F::try_smooth_l1_loss(&r(&[4, 3], d[0]), &r(&[4, 3], d[1]), Default::default(), 1.0),
        "cross_entropy" => F::try_cross_entropy(&r(&[4, 5], d[0]), &targets()),
        "nll_loss" => F::try_nll_loss_opts(&r(&[4, 5], d[0]).log_softmax(1), &targets(), &Default::default()),
        "binary_cross_entropy_with_logits" => F::try_binary_cross_entropy_with_logits_opts(
            &r(&[4, 3], d[0]),
            &r(&[4, 3], d[1]).sigmoid(),
            &Default::default(),
        ),
        "binary_cross_entropy" => F::try_binary_cross_entropy_opts(
            &r(&[4, 3], d[0]).sigmoid(),
            &r(&[4, 3], d[1]).sigmoid(),
            &Default::default(),
        ),
        "kl_div" => F::try_kl_div(
            &r(&[4, 3], d[0]).log_softmax(1),
            &r(&[4, 3], d[1]).softmax(1),
            kiln::nn::functional::KlDivReduction::BatchMean,
            false,
        ),
        "softmax" => Ok(F::softmax(&r(&[4, 5], d[0]), 1)),
        "log_softmax" => Ok(F::log_softmax(&r(&[4, 5], d[0]), 1)),
        "sum" => Ok(r(&[4, 5], d[0]).sum()),
        "prod" => r(&[4, 5], d[0]).try_prod(),
        "cumsum" => Ok(r(&[4, 5], d[0]).cumsum(1)),
        "exp" => Ok(r(&[4, 5], d[0]).exp()),
        "layer_norm" => F::try_layer_norm(&r(&[4, 5], d[0]), &[5], None, None, 1e-5),
        "relu" => Ok(F::relu(&r(&[4, 5], d[0]))),
        "add" => r(&[4, 5], d[0]).try_add(r(&[4, 5], d[1])),
        "cat" => Tensor::try_cat(&[r(&[2, 5], d[0]), r(&[3, 5], d[1])], 0),
        "stack" => Tensor::try_stack(&[r(&[2, 5], d[0]), r(&[2, 5], d[1])], 0),
        // The script casts a non-f32 input to f32 first (torch.quantile takes f32/f64 only).
        "quantile" => r(&[4, 5], DType::F32).try_quantile(0.3, None, false, QuantileInterpolation::Linear),
        "trace" => r(&[4, 4], d[0]).try_trace(),
        "max_pool3d" => {
            F::try_max_pool3d_opts(&r(&[1, 1, 4, 4, 4], d[0]), &kiln::nn::functional::MaxPool3dOpts::new([2; 3]))
        }
        "pad_reflect" => F::try_pad(&r(&[1, 2, 5], d[0]), &[2, 2], PadMode::Reflect),
        "pad_replicate" => F::try_pad(&r(&[1, 2, 5], d[0]), &[2, 2], PadMode::Replicate),
        "pad_constant" => F::try_pad(&r(&[1, 2, 5], d[0]), &[2, 2], PadMode::Constant(0.0)),
        "addcmul" => Ok(r(&[3], d[0]).addcmul(&r(&[3], d[1]), &r(&[3], d[2]), 1.0)),
        "dot" => r(&[3], d[0]).try_dot(&r(&[3], d[1])),
        _ => return None,
    })
}

/// The fixture's ops kiln does not have yet (their lines are skipped, and must be exactly these).
const NOT_IN_KILN: [&str; 3] = ["huber_loss", "cdist", "avg_pool3d"];

#[test]
fn op_dtypes_match_torch_autocast_cpu() {
    let _seeded = seeded();
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/autocast.txt"))
        .expect("tests/fixtures/autocast.txt (python3 scripts/fixtures_autocast.py)");
    let (mut checked, mut skipped) = (0, std::collections::BTreeSet::new());
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let w: Vec<&str> = line.split_whitespace().collect();
        let (region, op, inputs, want) = (dtype(w[0]), w[1], w[2], w[4]);
        let d: Vec<DType> = inputs.split(',').map(dtype).collect();
        let Some(got) = kiln::autocast("cpu", region, || run(op, &d)) else {
            skipped.insert(op);
            continue;
        };
        match (got, want) {
            (Err(e), _) => panic!("{line}: kiln failed: {e}"),
            // PyTorch refuses a bf16 operand of `cat`/`stack` in an f16 region; kiln promotes
            // as outside a region (see the module docs of `kiln::amp::autocast`).
            (Ok(t), "error") => {
                assert!(["cat", "stack"].contains(&op), "{line}");
                let widest = if d.contains(&DType::F32) { DType::F32 } else { DType::BF16 };
                assert_eq!(t.dtype(), widest, "{line}");
            }
            (Ok(t), want) => assert_eq!(t.dtype(), dtype(want), "{line}"),
        }
        checked += 1;
    }
    assert!(checked >= 160, "{checked} lines checked");
    for op in &skipped {
        assert!(NOT_IN_KILN.contains(op), "{op} has no case in this test");
    }
}

#[test]
fn outside_a_region_nothing_is_cast() {
    let _seeded = seeded();
    let y = r(&[3, 4], DType::F32).matmul(&r(&[4, 2], DType::F32));
    assert_eq!(y.dtype(), DType::F32);
    let (inner, off) = kiln::autocast("cpu", DType::BF16, || {
        let off = kiln::autocast_with("cpu", AutocastOptions { enabled: false, ..Default::default() }, || {
            r(&[3, 4], DType::F32).matmul(&r(&[4, 2], DType::F32))
        });
        (r(&[3, 4], DType::F32).matmul(&r(&[4, 2], DType::F32)), off)
    });
    assert_eq!((inner.dtype(), off.dtype()), (DType::BF16, DType::F32));
}

/// Gradients reach f32 weights through the casts in f32; a loss inside a region is f32 and
/// its backward (run outside or inside the region) gives the same gradients.
#[test]
fn gradients_flow_to_f32_weights_through_the_casts() {
    let _seeded = seeded();
    kiln::manual_seed(4);
    let net = nn::Linear::new(6, 3);
    let x = Tensor::randn([5, 6]);
    let t = Tensor::randn([5, 3]);
    let grads = |inside: bool| {
        net.weight.set_grad(None);
        kiln::autocast("cpu", DType::BF16, || {
            let loss = F::mse_loss(&net.forward(&x), &t);
            assert_eq!(loss.dtype(), DType::F32);
            if inside {
                loss.backward();
            }
            loss
        });
        net.weight.grad().expect("a gradient")
    };
    let inside = grads(true);
    net.weight.set_grad(None);
    let outside = {
        let loss = kiln::autocast("cpu", DType::BF16, || F::mse_loss(&net.forward(&x), &t));
        loss.backward();
        net.weight.grad().expect("a gradient")
    };
    assert_eq!(inside.dtype(), DType::F32);
    assert_eq!(inside.to_vec::<f32>(), outside.to_vec::<f32>(), "backward inside a region runs without autocast");
    // The gradient is the f32 gradient of the bf16 forward: close to the f32 one.
    net.weight.set_grad(None);
    F::mse_loss(&net.forward(&x), &t).backward();
    let exact = net.weight.grad().unwrap().to_vec::<f32>();
    for (a, b) in inside.to_vec::<f32>().iter().zip(&exact) {
        assert!((a - b).abs() <= 0.05 * (1.0 + b.abs()), "{a} vs {b}");
    }
}

/// A compiled training step under autocast: bf16 products, f32 loss and SGD on f32 weights,
/// equal to the eager step bit for bit, with the casts and the bf16 elementwise work in
/// generated kernels.
#[test]
fn a_compiled_autocast_step_equals_eager() {
    let _seeded = seeded();
    let train = |compiled: bool| {
        kiln::manual_seed(9);
        let net = nn::Sequential::new().add(nn::Linear::new(8, 16)).add(nn::ReLU).add(nn::Linear::new(16, 4));
        let mut opt = SGD::new(net.parameters(), SGDConfig { lr: 0.05, momentum: 0.9, ..Default::default() });
        let x = Tensor::randn([12, 8]);
        let t = Tensor::randn([12, 4]);
        let mut body = |(x, t): (&Tensor, &Tensor)| {
            opt.zero_grad();
            let loss = kiln::autocast("cpu", DType::BF16, || F::mse_loss(&net.forward(x), t));
            loss.backward();
            opt.step();
            loss
        };
        let mut losses = Vec::new();
        let mut kernels = 0;
        if compiled {
            let mut step = kiln::compile(&mut body);
            for _ in 0..3 {
                losses.push(step.call((&x, &t)).item::<f32>());
                kernels = step.stats().kernels_launched;
            }
        } else {
            for _ in 0..3 {
                losses.push(body((&x, &t)).item::<f32>());
            }
        }
        let params: Vec<Vec<f32>> = net.parameters().iter().map(|p| p.to_vec::<f32>()).collect();
        (losses, params, kernels)
    };
    let (eager_losses, eager_params, _) = train(false);
    let (losses, params, kernels) = train(true);
    assert_eq!(losses, eager_losses);
    assert_eq!(params, eager_params);
    assert!(eager_losses[2] < eager_losses[0], "training lowers the loss: {eager_losses:?}");
    assert!(kernels >= 3, "{kernels} generated kernels");
}
