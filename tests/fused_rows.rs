//! The eager row kernels of CPU f32 `layer_norm` (no autograd) and class-index `cross_entropy`
//! (`src/nn/functional/fused_rows.rs`) against the op-by-op composition they stand in for, run
//! in f64: values, first and second-order gradients, ignored targets, every reduction,
//! non-contiguous inputs. (Against PyTorch: `nn_loss`'s f32 cross-entropy fixtures and
//! `nn_norm`'s layer norm outputs run these kernels.)

#[path = "common/seeded.rs"]
mod seeded;

use kiln::autograd::{self, GradOpts};
use kiln::nn::functional::{self as F, CrossEntropyOpts, Reduction};
use kiln::{DType, Tensor};
use seeded::seeded;

/// Asserts `got` (f32) is within `tol·(1 + |want|)` of `want` (f64) everywhere.
fn assert_near(what: &str, got: &Tensor, want: &Tensor, tol: f64) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    assert_eq!(got.dtype(), DType::F32, "{what}: dtype");
    let (g, w) = (got.to_vec::<f64>(), want.to_vec::<f64>());
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!((a - b).abs() <= tol * (1.0 + b.abs()), "{what}[{i}]: {a} vs {b}");
    }
}

#[test]
fn layer_norm_without_autograd_equals_the_composition() {
    let _seeded = seeded();
    kiln::manual_seed(7);
    for (shape, normalized) in [(vec![3, 5, 7], vec![7]), (vec![4, 6, 9], vec![6, 9]), (vec![2, 1000], vec![1000])] {
        let x = Tensor::randn(&shape) * 3.0 + 1.5;
        let w = Tensor::randn(&normalized);
        let b = Tensor::randn(&normalized);
        let x64 = x.to_dtype(DType::F64);
        let (w64, b64) = (w.to_dtype(DType::F64), b.to_dtype(DType::F64));
        for (weight, bias) in [(None, None), (Some(&w), Some(&b)), (Some(&w), None), (None, Some(&b))] {
            let got = F::layer_norm(&x, &normalized, weight, bias, 1e-5);
            let want = F::layer_norm(&x64, &normalized, weight.map(|_| &w64), bias.map(|_| &b64), 1e-5);
            assert_near(&format!("{shape:?} over {normalized:?}"), &got, &want, 2e-6);
            assert!(got.grad_fn().is_none());
        }
        // A transposed (non-contiguous) input normalizes its logical rows.
        let t = x.transpose(0, -1).contiguous().transpose(0, -1);
        assert!(!t.is_contiguous());
        assert_near(
            "transposed",
            &F::layer_norm(&t, &normalized, None, None, 1e-5),
            &F::layer_norm(&x64, &normalized, None, None, 1e-5),
            2e-6,
        );
    }
    // With autograd recorded the composition runs, and agrees with the row kernel.
    let x = Tensor::randn([8, 33]).requires_grad_(true);
    let recorded = F::layer_norm(&x, &[33], None, None, 1e-5);
    assert!(recorded.grad_fn().is_some());
    let plain = {
        let _no_grad = kiln::no_grad_guard();
        F::layer_norm(&x, &[33], None, None, 1e-5)
    };
    assert_near("no_grad", &plain, &recorded.detach().to_dtype(DType::F64), 2e-6);
}

/// Logits `[rows, classes]` and targets with every third row ignored (-100) when `ignore`.
fn logits_and_targets(rows: usize, classes: usize, ignore: bool) -> (Tensor, Tensor) {
    let x = Tensor::randn([rows, classes]) * 4.0;
    let t: Vec<i64> =
        (0..rows).map(|r| if ignore && r % 3 == 1 { -100 } else { ((r * 7 + 3) % classes) as i64 }).collect();
    (x, Tensor::from_vec(t, [rows]))
}

/// The loss, its gradient for cotangent `cot`, and the gradient of `Σ grad·v` (second order)
/// for `x` of any float dtype.
fn loss_and_grads(x: &Tensor, t: &Tensor, r: Reduction, cot: &Tensor, v: &Tensor) -> (Tensor, Tensor, Tensor) {
    let x = x.detach().requires_grad_(true);
    let loss = F::cross_entropy_opts(&x, t, &CrossEntropyOpts { reduction: r, ..Default::default() });
    let cot = cot.to_dtype(x.dtype());
    let g = autograd::grad(&[&loss], &[&x], Some(&[&cot]), GradOpts { create_graph: true, ..Default::default() })
        .unwrap()[0]
        .clone()
        .unwrap();
    let gg = autograd::grad(&[&(&g * &v.to_dtype(x.dtype())).sum()], &[&x], None, GradOpts::default()).unwrap()[0]
        .clone()
        .unwrap();
    // The first-order gradient without create_graph (the row kernel).
    let x2 = x.detach().requires_grad_(true);
    let loss2 = F::cross_entropy_opts(&x2, t, &CrossEntropyOpts { reduction: r, ..Default::default() });
    (&loss2 * &cot).sum().backward();
    assert_near_any(&g, &x2.grad().unwrap());
    (loss.detach(), x2.grad().unwrap(), gg)
}

/// `create_graph`'s first-order gradient equals the row kernel's within f32 rounding.
fn assert_near_any(a: &Tensor, b: &Tensor) {
    let (a, b) = (a.to_vec::<f64>(), b.to_vec::<f64>());
    assert!(a.iter().zip(&b).all(|(x, y)| (x - y).abs() <= 1e-6 * (1.0 + y.abs())), "{a:?} vs {b:?}");
}

#[test]
fn cross_entropy_rows_equal_the_composition_in_every_reduction() {
    let _seeded = seeded();
    kiln::manual_seed(7);
    for (rows, classes, ignore) in [(5, 4, false), (12, 37, true), (70, 300, true)] {
        let (x, t) = logits_and_targets(rows, classes, ignore);
        let v = Tensor::randn([rows, classes]);
        for r in [Reduction::Mean, Reduction::Sum, Reduction::None] {
            let cot = if r == Reduction::None { Tensor::randn([rows]) } else { Tensor::scalar(0.75f32) };
            let (loss, grad, second) = loss_and_grads(&x, &t, r, &cot, &v);
            let (loss64, grad64, second64) = loss_and_grads(&x.to_dtype(DType::F64), &t, r, &cot, &v);
            let what = format!("[{rows}, {classes}] {r:?}");
            assert_near(&format!("{what} loss"), &loss, &loss64, 2e-6);
            assert_near(&format!("{what} grad"), &grad, &grad64, 2e-6);
            assert_near(&format!("{what} second order"), &second, &second64, 2e-5);
        }
    }
}

#[test]
fn cross_entropy_rows_record_one_node_and_read_views() {
    let _seeded = seeded();
    kiln::manual_seed(7);
    let (x, t) = logits_and_targets(6, 10, false);
    let leaf = x.detach().requires_grad_(true);
    let loss = F::cross_entropy(&leaf, &t);
    assert_eq!(loss.grad_fn().unwrap().name(), "CrossEntropyBackward0");
    // Logits seen through a transpose: the gradient comes back in the view's layout.
    let xt = x.t().contiguous().detach().requires_grad_(true);
    let loss_t = F::cross_entropy(&xt.t(), &t);
    loss_t.backward();
    loss.backward();
    assert_near("transposed loss", &loss_t, &loss.detach().to_dtype(DType::F64), 1e-7);
    assert_near("transposed grad", &xt.grad().unwrap().t(), &leaf.grad().unwrap().to_dtype(DType::F64), 1e-7);
    // Every target ignored: a NaN mean (0/0, as PyTorch) and a zero gradient.
    let all = Tensor::full([6], -100i64);
    let x = x.detach().requires_grad_(true);
    let loss = F::cross_entropy(&x, &all);
    assert!(loss.item::<f32>().is_nan());
    loss.backward();
    assert!(x.grad().unwrap().to_vec::<f32>().iter().all(|&g| g == 0.0));
    // Bad targets are still refused, naming the op.
    let e = F::try_cross_entropy(&x, &Tensor::new(&[0i64, 1, 2, 3, 4, 10])).unwrap_err().to_string();
    assert!(e.starts_with("cross_entropy: target 10 is out of bounds"), "{e}");
}
