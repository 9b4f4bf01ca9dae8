//! The cumulative ops `cumprod`, `cummax`, `cummin`, `logcumsumexp` (`src/ops/scan.rs`),
//! `quantile` and `mode` (`src/ops/quantile.rs`), `unfold` (`src/ops/unfold.rs`),
//! `masked_scatter` (`src/ops/masked_scatter.rs`) and `repeat_interleave` by a tensor of
//! repeats (`src/ops/reorder.rs`): values and gradients against PyTorch's (from
//! tests/fixtures/scan.safetensors, written by scripts/fixtures_scan.py), f64 finite-difference
//! gradients (first and second order, zeros in `cumprod`'s input included), errors naming the
//! op and the caller's line, and inside `kiln::compile` the same values and gradients as eager
//! with no graph break (`repeat_interleave` reads its repeats: a graph break when the step
//! computes them).

use kiln::ops::QuantileInterpolation;
use kiln::prelude::*;
use std::path::PathBuf;

#[path = "common/op_checks.rs"]
mod op_checks;
use op_checks::{check_gradients, compiled_equals_eager, leaf, GradCase};

#[path = "common/seeded.rs"]
mod seeded;
use seeded::seeded;

fn fixture() -> StateDict {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/scan.safetensors");
    kiln::load(path).expect("tests/fixtures/scan.safetensors (python3 scripts/fixtures_scan.py)")
}

/// The fixture's tensor `key`.
fn get(fx: &StateDict, key: &str) -> Tensor {
    fx.get(key).unwrap_or_else(|| panic!("{key} missing from the fixture")).clone()
}

/// Panics unless `got` has the dtype, shape and values (NaN where NaN, within `tol`) of the
/// fixture's `key`.
fn assert_matches(fx: &StateDict, key: &str, got: &Tensor, tol: f64) {
    let want = get(fx, key);
    assert_eq!((got.dtype(), got.shape()), (want.dtype(), want.shape()), "{key}");
    let (g, w) = (got.to_dtype(DType::F64).to_vec::<f64>(), want.to_dtype(DType::F64).to_vec::<f64>());
    for (i, (g, w)) in g.iter().zip(&w).enumerate() {
        let same = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= tol * (1.0 + w.abs());
        assert!(same, "{key}: element {i}: {g} vs {w}");
    }
}

/// The gradient of `sum(f(x…) * w)` for each of the fixture's inputs `xs`, with `w` its `w_key`.
fn grads_of(fx: &StateDict, xs: &[&str], w_key: &str, f: impl Fn(&[Tensor]) -> Tensor) -> Vec<Tensor> {
    let leaves: Vec<Tensor> = xs.iter().map(|k| get(fx, k).detach().requires_grad_(true)).collect();
    (f(&leaves) * get(fx, w_key)).sum().backward();
    leaves.iter().map(|t| t.grad().expect("a gradient")).collect()
}

#[test]
fn cumulative_ops_match_pytorch() {
    let _seeded = seeded();
    let fx = fixture();
    let x = get(&fx, "cumprod/x");
    for d in [0, 1] {
        assert_matches(&fx, &format!("cumprod/dim{d}"), &x.cumprod(d), 1e-15);
        // Zeros in the input (two in one row): the gradient is PyTorch's.
        let g = grads_of(&fx, &["cumprod/x"], &format!("cumprod/w{d}"), |t| t[0].cumprod(d));
        assert_matches(&fx, &format!("cumprod/grad{d}"), &g[0], 1e-14);
    }
    let ints = Tensor::new(&[[3i64, -2, 5], [0, 7, 1]]);
    assert_matches(&fx, "cumprod/int", &ints.cumprod(1), 0.0);
    assert_eq!(Tensor::new(&[true, false]).cumprod(0).dtype(), DType::I64);

    let e = get(&fx, "cummax/x");
    for (op, f) in [("cummax", Tensor::cummax as fn(&Tensor, i64) -> _), ("cummin", Tensor::cummin)] {
        for d in [0, 1] {
            let (v, i) = f(&e, d);
            assert_matches(&fx, &format!("{op}/values{d}"), &v, 0.0);
            assert_matches(&fx, &format!("{op}/indices{d}"), &i, 0.0);
        }
        let ties = e.index_select(0, &Tensor::new(&[0i64, 2])).requires_grad_(true);
        (f(&ties, 1).0 * get(&fx, &format!("{op}/w"))).sum().backward();
        assert_matches(&fx, &format!("{op}/grad"), &ties.grad().unwrap(), 1e-15);
        let (v, i) = f(&Tensor::new(&[[3i64, 1, 3, 0], [2, 2, 5, 1]]), 1);
        assert_matches(&fx, &format!("{op}/int_values"), &v, 0.0);
        assert_matches(&fx, &format!("{op}/int_indices"), &i, 0.0);
    }

    let l = get(&fx, "logcumsumexp/x");
    assert_matches(&fx, "logcumsumexp/dim1", &l.logcumsumexp(1), 1e-15);
    assert_matches(&fx, "logcumsumexp/dim0", &l.logcumsumexp(0), 1e-15);
    let g = grads_of(&fx, &["logcumsumexp/finite"], "logcumsumexp/w", |t| t[0].logcumsumexp(1));
    assert_matches(&fx, "logcumsumexp/grad", &g[0], 1e-13);
}

#[test]
fn edge_shapes_and_dtypes() {
    let _seeded = seeded();
    // 0-dim tensors scan as one element; empty dims give empty results.
    let s = Tensor::scalar(2.5f64);
    assert_eq!(s.cumprod(0).item::<f64>(), 2.5);
    assert_eq!((s.cummax(-1).0.item::<f64>(), s.cummin(0).1.item::<i64>()), (2.5, 0));
    assert_eq!(s.logcumsumexp(0).item::<f64>(), 2.5);
    let empty = Tensor::zeros([0, 3]);
    assert_eq!(empty.cumprod(0).shape(), &[0, 3]);
    assert_eq!(empty.cummax(0).1.shape(), &[0, 3]);
    assert_eq!(empty.logcumsumexp(1).shape(), &[0, 3]);
    // f32 accumulates in f64, as PyTorch's CPU kernels.
    let f = Tensor::new(&[1e30f32, 1e10, 1e-35]);
    assert_eq!(f.cumprod(0).to_vec::<f32>(), [1e30, f32::INFINITY, 1e5]);
    let half = Tensor::new(&[1.0f32, 2.0, 3.0]).to_dtype(DType::F16).logcumsumexp(0);
    assert_eq!(half.dtype(), DType::F16);
    assert!((half.to_vec::<f64>()[2] - 3.4076059644443806).abs() < 2e-3);
    let b = Tensor::new(&[false, true, false]).cummax(0);
    assert_eq!((b.0.to_vec::<bool>(), b.1.to_vec::<i64>()), (vec![false, true, true], vec![0, 1, 1]));
}

#[test]
fn quantile_and_mode_match_pytorch() {
    let _seeded = seeded();
    let fx = fixture();
    let q = get(&fx, "quantile/x");
    let rows = q.narrow(0, 0, 2);
    let modes = [
        ("linear", QuantileInterpolation::Linear),
        ("lower", QuantileInterpolation::Lower),
        ("higher", QuantileInterpolation::Higher),
        ("midpoint", QuantileInterpolation::Midpoint),
        ("nearest", QuantileInterpolation::Nearest),
    ];
    for (name, interp) in modes {
        for (k, p) in [0.0, 0.375, 0.4, 0.625, 1.0].into_iter().enumerate() {
            assert_matches(&fx, &format!("quantile/{name}/dim1/{k}"), &q.quantile(p, Some(1), false, interp), 1e-15);
            assert_matches(&fx, &format!("quantile/{name}/dim0/{k}"), &q.quantile(p, Some(0), true, interp), 1e-15);
            assert_matches(&fx, &format!("quantile/{name}/all/{k}"), &rows.quantile(p, None, false, interp), 1e-15);
        }
    }
    let q32 = get(&fx, "quantile/x_f32");
    assert_matches(&fx, "quantile/linear_f32", &q32.quantile(0.3, Some(1), false, Default::default()), 1e-7);
    let nearest = q32.quantile(0.125, Some(-1), false, QuantileInterpolation::Nearest);
    assert_matches(&fx, "quantile/nearest_f32", &nearest, 0.0);
    assert_eq!(rows.quantile(0.5, None, true, Default::default()).shape(), &[1, 1]);
    assert_eq!(Tensor::scalar(2.0f64).quantile(0.3, Some(0), false, Default::default()).item::<f64>(), 2.0);
    let g = grads_of(&fx, &["quantile/x"], "quantile/w", |t| {
        t[0].narrow(0, 0, 2).quantile(0.3, Some(1), false, Default::default())
    });
    assert_matches(&fx, "quantile/grad", &g[0].narrow(0, 0, 2), 1e-15);

    let m = get(&fx, "mode/x");
    let (v, i) = m.mode(1);
    assert_matches(&fx, "mode/values1", &v, 0.0);
    assert_matches(&fx, "mode/indices1", &i, 0.0);
    let (v, i) = m.mode_keepdim(0);
    assert_matches(&fx, "mode/values0", &v, 0.0);
    assert_matches(&fx, "mode/indices0", &i, 0.0);
    let no_nan = m.index_select(0, &Tensor::new(&[0i64, 1, 3])).requires_grad_(true);
    (no_nan.mode(1).0 * get(&fx, "mode/w")).sum().backward();
    assert_matches(&fx, "mode/grad", &no_nan.grad().unwrap(), 0.0);
    let (v, i) = Tensor::new(&[[1i64, 2, 2, 1, 3]]).mode(-1);
    assert_eq!((v.to_vec::<i64>(), i.to_vec::<i64>()), (vec![1], vec![3]));
    assert_eq!(Tensor::zeros([0, 3]).mode(1).0.shape(), &[0]);
}

#[test]
fn unfold_and_masked_scatter_match_pytorch() {
    let _seeded = seeded();
    let fx = fixture();
    let u = get(&fx, "unfold/x");
    let windows = u.unfold(1, 3, 2);
    assert!(windows.shares_storage_with(&u), "unfold is a view");
    assert_matches(&fx, "unfold/out", &windows, 0.0);
    assert_matches(&fx, "unfold/out0", &u.unfold(0, 2, 1), 0.0);
    let g = grads_of(&fx, &["unfold/x"], "unfold/w", |t| t[0].unfold(1, 3, 2));
    assert_matches(&fx, "unfold/grad", &g[0], 1e-15);
    let g = grads_of(&fx, &["unfold/x"], "unfold/w0", |t| t[0].unfold(0, 2, 1));
    assert_matches(&fx, "unfold/grad0", &g[0], 1e-15);
    assert_eq!(Tensor::scalar(5.0f32).unfold(0, 1, 1).to_vec::<f32>(), [5.0]);
    assert_eq!(Tensor::arange(10).unfold(0, 0, 1).shape(), &[11, 0]);
    assert_eq!(Tensor::arange(10).unfold(0, 10, 3).shape(), &[1, 10]);

    let (x, mask, src) =
        (get(&fx, "masked_scatter/x"), get(&fx, "masked_scatter/mask"), get(&fx, "masked_scatter/source"));
    assert_matches(&fx, "masked_scatter/out", &x.masked_scatter(&mask, &src), 0.0);
    assert_matches(&fx, "masked_scatter/row_out", &x.masked_scatter(&get(&fx, "masked_scatter/row_mask"), &src), 0.0);
    let g = grads_of(&fx, &["masked_scatter/x", "masked_scatter/source"], "masked_scatter/w", |t| {
        t[0].masked_scatter(&mask, &t[1])
    });
    assert_matches(&fx, "masked_scatter/grad_x", &g[0], 0.0);
    assert_matches(&fx, "masked_scatter/grad_source", &g[1], 0.0);
    let y = x.deep_clone();
    y.masked_scatter_(&mask, &src);
    assert_matches(&fx, "masked_scatter/out", &y, 0.0);
    // An empty source with nothing to write.
    let none = Tensor::zeros([2]).masked_scatter(&Tensor::new(&[false, false]), &Tensor::zeros([0]));
    assert_eq!(none.to_vec::<f32>(), [0.0, 0.0]);
}

#[test]
fn gradients_match_finite_differences() {
    let _seeded = seeded();
    kiln::manual_seed(11);
    let with_zeros = |v: &[f64], shape: &[usize]| Tensor::from_vec(v.to_vec(), shape).requires_grad_(true);
    let cases: [GradCase; 14] = [
        ("cumprod", |t| t[0].cumprod(1), vec![leaf(&[2, 4])]),
        ("cumprod dim 0", |t| t[0].cumprod(0), vec![leaf(&[3, 2])]),
        // One zero, two zeros in a row, a zero first and last.
        (
            "cumprod with zeros",
            |t| t[0].cumprod(1),
            vec![with_zeros(&[0.5, 0.0, 2.0, -1.5, 0.0, 0.7, 0.0, 0.0, -0.4], &[3, 3])],
        ),
        ("cumprod zeros far apart", |t| t[0].cumprod(0), vec![with_zeros(&[0.0, 1.2, -0.6, 0.0, 0.8], &[5])]),
        ("cummax", |t| t[0].cummax(1).0, vec![leaf(&[2, 5])]),
        ("cummin", |t| t[0].cummin(0).0, vec![leaf(&[4, 2])]),
        ("logcumsumexp", |t| t[0].logcumsumexp(1), vec![leaf(&[2, 4])]),
        ("quantile linear", |t| t[0].quantile(0.3, Some(1), false, QuantileInterpolation::Linear), vec![leaf(&[2, 5])]),
        ("quantile midpoint", |t| t[0].quantile(0.5, None, true, QuantileInterpolation::Midpoint), vec![leaf(&[2, 2])]),
        ("mode", |t| t[0].mode(0).0, vec![leaf(&[3, 2])]),
        ("unfold", |t| t[0].unfold(1, 3, 2).unfold(0, 2, 1), vec![leaf(&[3, 6])]),
        (
            "masked_scatter",
            |t| t[0].masked_scatter(&Tensor::new(&[[true, false, true], [false, true, true]]), &t[1]),
            vec![leaf(&[2, 3]), leaf(&[5])],
        ),
        (
            "repeat_interleave along a dim",
            |t| t[0].repeat_interleave_tensor(&Tensor::from_slice(&[0i64, 3, 1]), Some(-1)),
            vec![leaf(&[2, 3])],
        ),
        (
            "repeat_interleave flattened",
            |t| t[0].repeat_interleave_tensor(&Tensor::from_slice(&[1i64, 2, 0, 2]), None),
            vec![leaf(&[2, 2])],
        ),
    ];
    check_gradients(cases);
}

#[test]
fn compiled_step_equals_eager() {
    let _seeded = seeded();
    kiln::manual_seed(12);
    let inputs = [Tensor::randn([3, 6]), Tensor::randn([8])];
    compiled_equals_eager(&inputs, |t| {
        let (x, s) = (&t[0], &t[1]);
        let mask = x.gt(0.3);
        let y = x.cumprod(1) + x.cummax(0).0 - x.cummin(1).0 + x.logcumsumexp(1);
        let z = x.unfold(1, 3, 2).sum_dim(-1).quantile(0.4, Some(1), true, Default::default());
        let w = y.masked_scatter(&mask, &s.repeat([3])) * z + x.mode_keepdim(1).0;
        let loss = w.pow(2.0).sum();
        loss.backward();
        loss
    });
}

#[test]
fn bad_arguments_are_errors_naming_the_op_and_the_caller() {
    let _seeded = seeded();
    let x = Tensor::zeros([2, 3]);
    let ints = Tensor::arange(4);
    let mask = Tensor::new(&[true, true, false]);
    let cases: [(&str, kiln::Result<Tensor>, &str); 19] = [
        ("cumprod", x.try_cumprod(2), "out of range"),
        ("cummax", x.try_cummax(-3).map(|r| r.0), "out of range"),
        ("logcumsumexp", ints.try_logcumsumexp(0), "expected a floating-point input, got int64"),
        ("quantile", x.try_quantile(1.5, None, false, Default::default()), "q must be in the range [0, 1] but got 1.5"),
        ("quantile", ints.try_quantile(0.5, None, false, Default::default()), "must be either float or double"),
        ("quantile", Tensor::zeros([0]).try_quantile(0.5, None, false, Default::default()), "must be non-empty"),
        ("mode", Tensor::zeros([0, 2]).try_mode(0).map(|r| r.0), "dim 0 to have non-zero size"),
        ("unfold", x.try_unfold(1, 4, 1), "maximum size for tensor at dimension 1 is 3 but size is 4"),
        ("unfold", x.try_unfold(0, 1, 0), "step is 0 but must be > 0"),
        ("masked_scatter", x.try_masked_scatter(&mask, &Tensor::zeros([3])), "source < number of ones in mask (3 < 4"),
        ("masked_scatter", x.try_masked_scatter(&x, &x), "only supports boolean masks"),
        ("masked_scatter", x.try_masked_scatter(&mask, &ints), "same dtypes"),
        (
            "repeat_interleave",
            x.try_repeat_interleave_tensor(&Tensor::from_slice(&[1.0f32, 2.0, 1.0]), Some(1)),
            "must be an integer tensor, got float32",
        ),
        (
            "repeat_interleave",
            x.try_repeat_interleave_tensor(&Tensor::from_slice(&[1i64, -1, 2]), Some(1)),
            "repeats can not be negative, got -1",
        ),
        (
            "repeat_interleave",
            x.try_repeat_interleave_tensor(&Tensor::from_slice(&[1i64, 2]), Some(1)),
            "repeats.size(0) = 2 and input.size(1) = 3",
        ),
        (
            "repeat_interleave",
            x.try_repeat_interleave_tensor(&Tensor::ones([1, 2]).to_dtype(DType::I64), Some(0)),
            "0-dim or 1-dim",
        ),
        ("repeat_interleave", x.try_repeat_interleave_tensor(&Tensor::from_slice(&[1i64]), Some(2)), "out of range"),
        ("repeat_interleave", Tensor::try_repeat_interleave_indices(&Tensor::scalar(2i64)), "only accept 1D vector"),
        (
            "repeat_interleave",
            Tensor::try_repeat_interleave_indices(&Tensor::from_slice(&[true])),
            "must be an integer tensor, got bool",
        ),
    ];
    for (op, r, words) in cases {
        let e = r.unwrap_err();
        assert_eq!(e.op, op, "{e}");
        assert!(e.to_string().contains(words), "{e}");
        assert!(e.to_string().contains("tests/scan_ops.rs"), "{e}");
    }
    let e = Tensor::zeros([3]).try_masked_scatter_(&Tensor::ones([2, 3]).gt(0.0), &x).unwrap_err();
    assert!(e.to_string().contains("does not broadcast") && e.to_string().contains("tests/scan_ops.rs"), "{e}");
}

#[test]
fn repeat_interleave_by_a_tensor_matches_pytorch() {
    let _seeded = seeded();
    let fx = fixture();
    let x = get(&fx, "repeat_interleave/x");
    let counts = |v: &[i64]| Tensor::from_slice(v);
    assert_matches(&fx, "repeat_interleave/dim1", &x.repeat_interleave_tensor(&counts(&[1, 0, 2]), Some(1)), 0.0);
    assert_matches(&fx, "repeat_interleave/dim0_one", &x.repeat_interleave_tensor(&counts(&[2]), Some(0)), 0.0);
    assert_matches(&fx, "repeat_interleave/flat", &x.repeat_interleave_tensor(&counts(&[1, 2, 0, 3, 1, 1]), None), 0.0);
    assert_matches(&fx, "repeat_interleave/flat_scalar", &x.repeat_interleave_tensor(&Tensor::scalar(2i64), None), 0.0);
    let int32 = Tensor::from_slice(&[3i32, 1]);
    assert_matches(&fx, "repeat_interleave/int32", &x.repeat_interleave_tensor(&int32, Some(-2)), 0.0);
    // The gradient sums each copy's back into its element (none for a count of 0).
    let g = grads_of(&fx, &["repeat_interleave/x"], "repeat_interleave/w", |t| {
        t[0].repeat_interleave_tensor(&counts(&[2, 0, 3]), Some(1))
    });
    assert_matches(&fx, "repeat_interleave/grad", &g[0], 0.0);
    assert_matches(&fx, "repeat_interleave/indices", &Tensor::repeat_interleave_indices(&counts(&[2, 0, 1, 3])), 0.0);
    // A number of repeats as a tensor gives what the number gives.
    let by_number = x.repeat_interleave(3, Some(1));
    assert_eq!(x.repeat_interleave_tensor(&Tensor::scalar(3i64), Some(1)).to_vec::<f64>(), by_number.to_vec::<f64>());
}

#[test]
fn repeat_interleave_edge_shapes() {
    let _seeded = seeded();
    let five = Tensor::scalar(5.0f32);
    // A 0-dim input is flattened; empty repeats of an empty dim, and all-zero counts, are empty.
    assert_eq!(five.repeat_interleave_tensor(&Tensor::from_slice(&[3i64]), Some(0)).to_vec::<f32>(), [5.0; 3]);
    let empty = Tensor::zeros([0, 2]).repeat_interleave_tensor(&Tensor::zeros([0]).to_dtype(DType::I64), Some(0));
    assert_eq!(empty.shape(), &[0, 2]);
    let zeros = Tensor::ones([2, 3]).repeat_interleave_tensor(&Tensor::from_slice(&[0i64]), Some(0));
    assert_eq!(zeros.shape(), &[0, 3]);
    let none = Tensor::repeat_interleave_indices(&Tensor::zeros([0]).to_dtype(DType::I64));
    assert_eq!((none.shape(), none.dtype()), (&[0][..], DType::I64));
    // u8 counts are counts too, as PyTorch's.
    let u8s = Tensor::from_slice(&[2u8, 1]);
    assert_eq!(Tensor::arange(2).repeat_interleave_tensor(&u8s, None).to_vec::<i64>(), [0, 0, 1]);
}

#[test]
fn repeat_interleave_compiled_equals_eager_with_an_honest_graph_break() {
    let _seeded = seeded();
    kiln::manual_seed(22);
    let x = Tensor::randn([3, 4]);
    let repeats = Tensor::from_slice(&[2i64, 0, 1, 3]);
    let eager = |x: &Tensor, r: &Tensor| x.repeat_interleave_tensor(r, Some(1)).exp().sum_dim(0);
    // Repeats given to the step: read as an input, no graph break.
    let mut given = kiln::compile(|(x, r): (&Tensor, &Tensor)| eager(x, r));
    assert_eq!(given.call((&x, &repeats)).to_vec::<f32>(), eager(&x, &repeats).to_vec::<f32>());
    assert_eq!(given.stats().graph_breaks, 0);
    // New counts of the same total: the cached plan reads the new index, not the old one.
    let other = Tensor::from_slice(&[0i64, 3, 2, 1]);
    assert_eq!(given.call((&x, &other)).to_vec::<f32>(), eager(&x, &other).to_vec::<f32>());
    // Repeats computed in the step: reading them realizes the trace first, one graph break.
    let mut computed = kiln::compile(|(x, r): (&Tensor, &Tensor)| eager(x, &(r + 1)));
    let want = eager(&x, &(&repeats + 1));
    assert_eq!(computed.call((&x, &repeats)).to_vec::<f32>(), want.to_vec::<f32>());
    assert_eq!(computed.stats().graph_breaks, 1);
}
