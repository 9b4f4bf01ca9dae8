//! `batch_norm` (train and eval, running-stat updates with momentum), `layer_norm`,
//! `group_norm` and `embedding` (with `padding_idx`) of `kiln::nn::functional`: values, running
//! statistics and gradients against PyTorch (tests/fixtures/norm.txt, made by
//! scripts/fixtures_loss.py), gradcheck in f64, gradgradcheck for layer_norm, errors; and
//! `nn::LayerNorm` without a bias (`bias(false)`) against PyTorch's `LayerNorm(..., bias=False)`
//! (tests/fixtures/layers.safetensors, made by scripts/fixtures_layers.py).

mod common;

#[path = "common/seeded.rs"]
mod seeded;

use common::{assert_covers, assert_errors_named, run_fixture, Arg, Case, Expect, Outcome};
use kiln::autograd::{gradcheck, gradgradcheck, GradcheckOpts};
use kiln::nn::functional as F;
use kiln::nn::{self, Module};
use kiln::{DType, StateDict, Tensor};
use seeded::seeded;

const OPS: &[&str] = &["batch_norm", "layer_norm", "group_norm", "embedding"];

/// The fixture's cotangent `((i % 5) + 1) / 4` over the flat index of `out`.
fn cot(out: &Tensor) -> Tensor {
    let v: Vec<f64> = (0..out.numel()).map(|i| ((i % 5) + 1) as f64 / 4.0).collect();
    Tensor::from_vec(v, out.shape()).to_dtype(out.dtype())
}

fn arg<'a>(case: &Case, args: &'a [Arg], name: &str) -> Option<&'a Tensor> {
    case.args.iter().position(|(n, _)| n == name).map(|i| args[i].tensor())
}

fn usizes(case: &Case, key: &str) -> Vec<usize> {
    case.attr_i64s(key).into_iter().map(|v| v as usize).collect()
}

/// Runs a case: the result, then (batch_norm) the running statistics after the call, then the
/// gradients of the input (of the weight for embedding), weight and bias, as the fixture
/// records them.
fn run(case: &Case, args: &[Arg]) -> Outcome {
    if !OPS.contains(&case.op.as_str()) {
        return None;
    }
    let wants_grads = matches!(&case.expect, Expect::Outputs(o) if o.len() > 1);
    let input = arg(case, args, "input");
    let weight = arg(case, args, "weight");
    let bias = arg(case, args, "bias");
    let (rm, rv) = (arg(case, args, "running_mean"), arg(case, args, "running_var"));
    if wants_grads {
        for t in [input, weight, bias].into_iter().flatten() {
            t.requires_grad_(true);
        }
    }
    let eps = case.attr_opt("eps").unwrap_or(1e-5);
    let result = match case.op.as_str() {
        "batch_norm" => F::try_batch_norm(
            input.unwrap(),
            rm,
            rv,
            weight,
            bias,
            case.attr_flag("training"),
            case.attr_as("momentum"),
            eps,
        ),
        "layer_norm" => F::try_layer_norm(input.unwrap(), &usizes(case, "normalized_shape"), weight, bias, eps),
        "group_norm" => F::try_group_norm(input.unwrap(), case.attr_as("num_groups"), weight, bias, eps),
        "embedding" => {
            F::try_embedding(arg(case, args, "indices").unwrap(), weight.unwrap(), case.attr_opt("padding_idx"))
        }
        _ => unreachable!(),
    };
    let out = match result {
        Ok(o) => o,
        Err(e) => return Some(Err(e.to_string())),
    };
    // Layer norm's output is also computed without autograd (f32: the row kernel of
    // `fused_rows.rs`; the recorded composition gives the gradients) and checked in its place.
    let out0 = match case.op.as_str() {
        "layer_norm" if wants_grads => {
            let _no_grad = kiln::no_grad_guard();
            F::layer_norm(input.unwrap(), &usizes(case, "normalized_shape"), weight, bias, eps)
        }
        _ => out.detach(),
    };
    let mut outs = vec![out0];
    outs.extend([rm, rv].into_iter().flatten().cloned());
    if wants_grads {
        (&out * cot(&out)).sum().backward();
        for t in [input, weight, bias].into_iter().flatten() {
            outs.push(t.grad().expect("a gradient"));
        }
    }
    Some(Ok(outs))
}

#[test]
fn norms_and_embedding_match_pytorch() {
    let _seeded = seeded();
    let cases = run_fixture("norm.txt", run);
    assert_covers(&cases, OPS);
}

#[test]
fn errors_name_the_op_and_the_callers_line() {
    let _seeded = seeded();
    let n = assert_errors_named("norm.txt", file!(), run, |c| c.op.clone());
    assert!(n >= 5, "{n} error cases");
}

fn leaf(shape: &[usize]) -> Tensor {
    Tensor::randn(shape).to_dtype(DType::F64).requires_grad_(true)
}

fn check(what: &str, inputs: &[Tensor], f: impl Fn(&[Tensor]) -> Tensor) {
    if let Err(e) = gradcheck(&f, inputs, GradcheckOpts::default()) {
        panic!("{what}: {e}");
    }
}

#[test]
fn gradcheck_norms() {
    let _seeded = seeded();
    kiln::manual_seed(4);
    let (x, w, b) = (leaf(&[3, 2, 2]), leaf(&[2]), leaf(&[2]));
    check("batch_norm train", &[x.clone(), w.clone(), b.clone()], |v| {
        F::batch_norm(&v[0], None, None, Some(&v[1]), Some(&v[2]), true, 0.1, 1e-5)
    });
    let (rm, rv) = (Tensor::new(&[0.5f64, -0.5]), Tensor::new(&[2.0f64, 0.5]));
    check("batch_norm eval", &[x.clone(), w.clone(), b.clone()], |v| {
        F::batch_norm(&v[0], Some(&rm), Some(&rv), Some(&v[1]), Some(&v[2]), false, 0.1, 1e-5)
    });
    let (lw, lb) = (leaf(&[2, 2]), leaf(&[2, 2]));
    check("layer_norm", &[x.clone(), lw.clone(), lb.clone()], |v| {
        F::layer_norm(&v[0], &[2, 2], Some(&v[1]), Some(&v[2]), 1e-5)
    });
    check("layer_norm without bias", &[x.clone(), lw.clone()], |v| {
        F::layer_norm(&v[0], &[2, 2], Some(&v[1]), None, 1e-5)
    });
    let (g, gw, gb) = (leaf(&[2, 4, 3]), leaf(&[4]), leaf(&[4]));
    check("group_norm", &[g, gw, gb], |v| F::group_norm(&v[0], 2, Some(&v[1]), Some(&v[2]), 1e-5));
    let idx = Tensor::new(&[[0i64, 2], [2, 1]]);
    // (without padding_idx: the padding row's zero gradient is by design not the numeric one)
    check("embedding", &[leaf(&[3, 2])], |v| F::embedding(&idx, &v[0], None));
    if let Err(e) = gradgradcheck(
        |v| F::layer_norm(&v[0], &[2, 2], Some(&v[1]), Some(&v[2]), 1e-5),
        &[x, lw, lb],
        GradcheckOpts::default(),
    ) {
        panic!("layer_norm gradgradcheck: {e}");
    }
}

#[test]
fn batch_norm_running_stats_update_in_place_without_history() {
    let _seeded = seeded();
    // input (N=2, C=2): channel 0 is [1, 3], channel 1 is [2, 6]
    let x = Tensor::new(&[[1.0f32, 2.0], [3.0, 6.0]]).requires_grad_(true);
    let (rm, rv) = (Tensor::zeros([2]), Tensor::ones([2]));
    let y = F::batch_norm(&x, Some(&rm), Some(&rv), None, None, true, 0.25, 0.0);
    // batch means 2 and 4; unbiased variances 2 and 8 (the biased ones, 1 and 4, normalise)
    assert_eq!(rm.to_vec::<f32>(), vec![0.5, 1.0]);
    assert_eq!(rv.to_vec::<f32>(), vec![0.75 + 0.5, 0.75 + 2.0]);
    assert_eq!(y.to_vec::<f32>(), vec![-1.0, -1.0, 1.0, 1.0]);
    assert!(!rm.requires_grad() && rm.grad_fn().is_none());
    // eval uses the running statistics and leaves them alone
    let e = F::batch_norm(&x, Some(&rm), Some(&rv), None, None, false, 0.25, 0.0);
    let want: Vec<f32> = [(1.0f32, 0.5f32, 1.25f32), (2.0, 1.0, 2.75), (3.0, 0.5, 1.25), (6.0, 1.0, 2.75)]
        .iter()
        .map(|(v, m, s)| (v - m) / s.sqrt())
        .collect();
    let got = e.to_vec::<f32>();
    assert!(got.iter().zip(&want).all(|(a, b)| (a - b).abs() < 1e-6), "{got:?} vs {want:?}");
    assert_eq!(rm.to_vec::<f32>(), vec![0.5, 1.0]);
}

#[test]
fn half_precision_normalises_in_f32() {
    let _seeded = seeded();
    let x = Tensor::new(&[[1.0f32, 2.0, 3.0, 4.0], [10.0, 20.0, 30.0, 50.0]]);
    let want = F::layer_norm(&x, &[4], None, None, 1e-5);
    let got = F::layer_norm(&x.to_dtype(DType::BF16), &[4], None, None, 1e-5);
    assert_eq!(got.dtype(), DType::BF16);
    assert!(got.to_dtype(DType::F32).allclose(&want, 1e-2, 1e-2), "{got} vs {want}");
}

#[test]
fn embedding_padding_row_gets_no_gradient() {
    let _seeded = seeded();
    let w = Tensor::new(&[[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0]]).requires_grad_(true);
    let idx = Tensor::new(&[1i64, 2, 1, 0]);
    let out = F::embedding(&idx, &w, Some(1));
    assert_eq!(out.to_vec2::<f32>(), vec![vec![3.0, 4.0], vec![5.0, 6.0], vec![3.0, 4.0], vec![1.0, 2.0]]);
    out.sum().backward();
    assert_eq!(w.grad().unwrap().to_vec2::<f32>(), vec![vec![1.0, 1.0], vec![0.0, 0.0], vec![1.0, 1.0]]);
    let e = F::try_embedding(&Tensor::new(&[0i64, 3]), &w, None).unwrap_err().to_string();
    assert!(e.starts_with("embedding: index 3 is out of range for 3 embeddings"), "{e}");
    let e = F::try_embedding(&Tensor::new(&[0.0f32]), &w, None).unwrap_err().to_string();
    assert!(e.starts_with("embedding: ") && e.contains("float32"), "{e}");
    // 0-dim indices give one row
    assert_eq!(F::embedding(&Tensor::scalar(2i64), &w, None).shape(), &[2]);
}

#[test]
fn batch_norm_of_an_empty_batch_in_training_is_empty_and_keeps_the_statistics() {
    let _seeded = seeded();
    // PyTorch returns an empty output (still connected to weight and bias) and leaves the
    // running statistics alone; only num_batches_tracked counts the call.
    let bn = kiln::nn::BatchNorm1d::new(4);
    let x = Tensor::zeros([0, 4]).requires_grad_(true);
    let y = kiln::nn::Module::forward(&bn, &x);
    assert_eq!(y.shape(), &[0, 4]);
    assert_eq!(bn.running_mean.as_ref().expect("tracked").to_vec::<f32>(), [0.0; 4]);
    assert_eq!(bn.running_var.as_ref().expect("tracked").to_vec::<f32>(), [1.0; 4]);
    y.sum().backward();
    assert_eq!(bn.weight.as_ref().expect("affine").grad().expect("a gradient").to_vec::<f32>(), [0.0; 4]);
    assert_eq!(x.grad().expect("a gradient").shape(), &[0, 4]);
    // One value per channel is still refused, as PyTorch refuses it.
    let e = F::try_batch_norm(&Tensor::zeros([1, 4]), None, None, None, None, true, 0.1, 1e-5).unwrap_err();
    assert!(e.to_string().contains("more than 1 value per channel"), "{e}");
}

#[test]
fn layer_norm_without_bias_matches_pytorch() {
    let _seeded = seeded();
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/layers.safetensors");
    let fx = kiln::load(path).expect("tests/fixtures/layers.safetensors (python3 scripts/fixtures_layers.py)");
    let get = |k: &str| fx.get(&format!("ln_no_bias/{k}")).unwrap_or_else(|| panic!("ln_no_bias/{k}")).clone();
    let close = |what: &str, got: &Tensor, want: &Tensor| {
        assert_eq!(got.shape(), want.shape(), "{what}");
        let (g, w) = (got.to_vec::<f64>(), want.to_vec::<f64>());
        assert!(g.iter().zip(&w).all(|(a, b)| (a - b).abs() <= 1e-12 * (1.0 + b.abs())), "{what}: {g:?} vs {w:?}");
    };
    // PyTorch's state dict holds the weight alone, and loads.
    let mut ln = nn::LayerNorm::new([3, 4]).bias(false);
    ln.to_dtype(DType::F64);
    let mut sd = StateDict::new();
    sd.insert("weight", get("weight"));
    ln.load_state_dict(&sd).expect("a weight-only state dict loads");
    assert!(ln.bias.is_none() && ln.state_dict().keys().eq(["weight"]));
    let x = get("x").requires_grad_(true);
    let out = ln.forward(&x);
    close("out", &out, &get("out"));
    (&out * &get("gy")).sum().backward();
    close("grad x", &x.grad().unwrap(), &get("grad/x"));
    close("grad weight", &ln.weight.as_ref().unwrap().grad().unwrap(), &get("grad/weight"));
    // Printed and named as PyTorch's LayerNorm(4, bias=False).
    let small = nn::LayerNorm::new([4]).bias(false);
    assert_eq!(small.to_string(), fx.metadata("layer_norm_no_bias:repr").unwrap());
    assert_eq!(
        small.state_dict().keys().collect::<Vec<_>>().join(","),
        fx.metadata("layer_norm_no_bias:keys").unwrap()
    );
    // A state dict with a bias is refused; bias(true) brings back a zero shift; a layer
    // without elementwise affine has no shift either way.
    let mut with_bias = StateDict::new();
    with_bias.insert("weight", Tensor::ones([4]));
    with_bias.insert("bias", Tensor::zeros([4]));
    let mut m = nn::LayerNorm::new([4]).bias(false);
    let e = m.load_state_dict(&with_bias).unwrap_err();
    assert!(e.to_string().contains("bias"), "{e}");
    let back = nn::LayerNorm::new([4]).bias(false).bias(true);
    assert_eq!(back.bias.as_ref().map(|b| (b.to_vec::<f32>(), b.requires_grad())), Some((vec![0.0; 4], true)));
    assert!(nn::LayerNorm::with_opts([4], 1e-5, false).bias(true).bias.is_none());
    assert!(nn::LayerNorm::new([4]).bias(true).bias.is_some());
}
