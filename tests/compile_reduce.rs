//! kiln::compile of reductions: sum/mean/prod/amax/amin become generated kernels that
//! recompute the elementwise work they reduce (their prologue), over any dims and layouts,
//! equal to eager within a stated tolerance, with the kernel counts the fusion rules promise.
//!
//! Tolerance: float sums accumulate in f64 in both, in a different order, so f32 results
//! agree to about one f32 ulp (checked at `2e-6` relative); max/min and integer sums are
//! exact.

use kiln::prelude::*;

#[path = "common/seeded.rs"]
mod seeded;
use seeded::seeded;

fn close(a: &Tensor, b: &Tensor, tol: f64) {
    assert_eq!(a.shape(), b.shape());
    assert_eq!(a.dtype(), b.dtype());
    let (a, b) = (a.to_dtype(DType::F64).to_vec::<f64>(), b.to_dtype(DType::F64).to_vec::<f64>());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()) || (x.is_nan() && y.is_nan()), "element {i}: {x} vs {y}");
    }
}

/// Runs `f` eagerly and compiled on `x`; returns (eager, compiled, kernels, eager ops).
fn both(x: &Tensor, f: impl Fn(&Tensor) -> Tensor) -> (Tensor, Tensor, usize, usize) {
    let eager = f(x);
    let mut step = kiln::compile(|x: &Tensor| f(x));
    let compiled = step.call(x);
    let stats = step.stats();
    (eager, compiled, stats.kernels_launched, stats.eager_ops)
}

#[test]
fn a_sum_of_an_elementwise_chain_is_one_kernel() {
    let _seeded = seeded();
    kiln::manual_seed(1);
    let x = Tensor::randn([33, 70]);
    let (e, c, kernels, eager) = both(&x, |x| ((x * 1.5 + 0.25).exp() - x).sum());
    close(&c, &e, 2e-6);
    assert_eq!((kernels, eager), (1, 0));
    let (e, c, kernels, _) = both(&x, |x| (x * x).mean_dim_keepdim(1));
    close(&c, &e, 2e-6);
    assert_eq!(kernels, 1);
}

#[test]
fn reductions_over_any_dims_and_views_equal_eager() {
    let _seeded = seeded();
    kiln::manual_seed(2);
    let x = Tensor::randn([4, 5, 6]);
    // (name, op, generated): reductions over trailing dims are generated kernels; the others
    // run the eager kernel, which walks memory in order.
    let cases: Vec<(&str, Box<dyn Fn(&Tensor) -> Tensor>, bool)> = vec![
        ("sum dim 0", Box::new(|x| (x + 1.0).sum_dim(0)), false),
        ("sum dims 0,2 keepdim", Box::new(|x| x.abs().sum_dim_keepdim(vec![0, 2])), false),
        ("mean dim 1", Box::new(|x| (x * 2.0).mean_dim(1)), false),
        ("mean of a transpose", Box::new(|x| x.transpose(0, 2).mean_dim(-1)), true),
        ("amax dim 2", Box::new(|x| x.neg().amax_keepdim(2)), true),
        ("amin dims 0,1", Box::new(|x| x.amin(vec![0, 1])), false),
        ("prod dims 1,2", Box::new(|x| (x * 0.5 + 1.0).prod_dim(vec![1, 2])), true),
        ("max of all", Box::new(|x| x.sin().max()), true),
        ("sum of a broadcast", Box::new(|x| x.narrow(2, 0, 1).expand([4, 5, 6]).sum_dim(2)), true),
        ("sum of a narrow", Box::new(|x| x.narrow(1, 1, 3).sum_dim(vec![1, 2])), true),
        ("sum over a size-1 leading dim", Box::new(|x| x.narrow(0, 0, 1).sum_dim(vec![0, 2])), true),
    ];
    for (name, f, generated) in cases {
        let (e, c, kernels, eager) = both(&x, &f);
        let expected_eager = if generated { 0 } else { 1 };
        assert_eq!(eager, expected_eager, "{name}: {kernels} kernels, {eager} eager ops");
        close(&c, &e, 2e-6);
    }
}

#[test]
fn integer_and_f64_reductions_are_exact() {
    let _seeded = seeded();
    kiln::manual_seed(3);
    let i = Tensor::randint(-50, 50, [7, 9]);
    let (e, c, kernels, _) = both(&i, |x| (x * 3).sum_dim(1));
    assert_eq!((c.to_vec::<i64>(), kernels), (e.to_vec::<i64>(), 1));
    let (e, c, _, _) = both(&i, |x| x.amax(0));
    assert_eq!(c.to_vec::<i64>(), e.to_vec::<i64>());
    let i32s = i.to_dtype(DType::I32);
    let (e, c, _, _) = both(&i32s, |x| x.sum_dim_keepdim(0));
    assert_eq!((c.dtype(), c.to_vec::<i64>()), (DType::I64, e.to_vec::<i64>()));
    let (e, c, _, _) = both(&i32s, |x| x.amin(1));
    assert_eq!((c.dtype(), c.to_vec::<i32>()), (DType::I32, e.to_vec::<i32>()));
    let d = Tensor::randn([6, 50]).to_dtype(DType::F64);
    let (e, c, _, _) = both(&d, |x| (x * x).mean_dim(1));
    close(&c, &e, 1e-14);
}

#[test]
fn a_value_read_elsewhere_is_loaded_not_recomputed_and_empty_sums_are_zero() {
    let _seeded = seeded();
    kiln::manual_seed(4);
    let x = Tensor::randn([16, 8]);
    // `y` leaves the step, so it is written once and the sum loads it: 2 kernels.
    let mut step = kiln::compile(|x: &Tensor| {
        let y = x.exp();
        let s = y.sum_dim_keepdim(1);
        (y, s)
    });
    let (y, s) = step.call(&x);
    close(&y, &x.exp(), 1e-6);
    close(&s, &x.exp().sum_dim_keepdim(1), 2e-6);
    assert_eq!(step.stats().kernels_launched, 2);
    let empty = Tensor::zeros([3, 0]);
    let (e, c, _, _) = both(&empty, |x| (x + 1.0).sum_dim(1));
    assert_eq!(c.to_vec::<f32>(), e.to_vec::<f32>());
    assert_eq!(c.to_vec::<f32>(), vec![0.0; 3]);
}

/// Softmax written with primitives: max, then a sum of exponentials that recomputes
/// `exp(x - max)`, then the division.
#[test]
fn softmax_from_primitives_fuses_its_reductions() {
    let _seeded = seeded();
    kiln::manual_seed(5);
    let x = Tensor::randn([64, 100]);
    let softmax = |x: &Tensor| {
        let z = x - x.amax_keepdim(1);
        let e = z.exp();
        &e / e.sum_dim_keepdim(1)
    };
    let (e, c, kernels, eager) = both(&x, softmax);
    close(&c, &e, 1e-5);
    close(&c, &x.softmax(1), 1e-5);
    assert_eq!(
        (kernels, eager),
        (1, 0),
        "the max, then the sum as its second stage, with the division as its epilogue"
    );
    let log_softmax = |x: &Tensor| {
        let z = x - x.amax_keepdim(-1);
        &z - z.exp().sum_dim_keepdim(-1).log()
    };
    let x3 = Tensor::randn([3, 5, 37]);
    let (e, c, kernels, _) = both(&x3, log_softmax);
    close(&c, &e, 1e-5);
    assert_eq!(kernels, 1);
}

/// softmax, log_softmax and layer norm, as the library computes them: one kernel forward (two
/// reduction stages and the epilogue).
#[test]
fn softmax_log_softmax_and_layer_norm_are_one_kernel() {
    let _seeded = seeded();
    kiln::manual_seed(7);
    let x = Tensor::randn([24, 96]);
    let (w, b) = (Tensor::randn([96]), Tensor::randn([96]));
    let cases: Vec<(&str, Box<dyn Fn(&Tensor) -> Tensor>)> = vec![
        ("softmax", Box::new(|x| x.softmax(-1))),
        ("log_softmax", Box::new(|x| x.log_softmax(1))),
        ("layer_norm", Box::new(|x| kiln::nn::functional::layer_norm(x, &[96], Some(&w), Some(&b), 1e-5))),
    ];
    for (name, f) in cases {
        let (e, c, kernels, eager) = both(&x, &f);
        close(&c, &e, 1e-5);
        assert_eq!((kernels, eager), (1, 0), "{name}");
    }
}

/// The native routines the kernels of `step`'s last call call.
fn calls<F>(step: &kiln::CompiledStep<F>) -> Vec<String> {
    step.kernels().iter().flat_map(|k| k.native_calls.clone()).collect()
}

/// The native row routines run where the fast paths are meant to: the kernels of softmax,
/// log_softmax, layer norm and cross-entropy (forward and backward) call them, so a change that
/// silently drops a fast path fails here even though the values would still match.
#[test]
fn softmax_layer_norm_and_cross_entropy_kernels_call_the_native_row_routines() {
    let _seeded = seeded();
    kiln::manual_seed(12);
    let x = Tensor::randn([24, 96]);
    let (w, b) = (Tensor::randn([96]), Tensor::randn([96]));
    let target = Tensor::randint(0, 96, [24]);
    let expect = |name: &str, calls: Vec<String>, routines: &[&str]| {
        for r in routines {
            assert!(calls.iter().any(|c| c == r), "{name}: its kernels call {calls:?}, not {r}");
        }
    };
    let mut softmax = kiln::compile(|x: &Tensor| x.softmax(-1));
    softmax.call(&x);
    expect("softmax", calls(&softmax), &["kiln_row_max_f32", "kiln_row_exp_sum_f32"]);
    let mut log_softmax = kiln::compile(|x: &Tensor| x.log_softmax(-1));
    log_softmax.call(&x);
    expect("log_softmax", calls(&log_softmax), &["kiln_row_max_f32", "kiln_row_exp_sum_f32"]);
    let mut layer_norm =
        kiln::compile(|x: &Tensor| kiln::nn::functional::layer_norm(x, &[96], Some(&w), Some(&b), 1e-5));
    layer_norm.call(&x);
    expect(
        "layer_norm",
        calls(&layer_norm),
        &["kiln_row_sum_f32", "kiln_row_sq_dev_sum_f32", "kiln_row_norm_affine_f32"],
    );
    let logits = x.detach().requires_grad_(true);
    let mut ce = kiln::compile(|(x, t): (&Tensor, &Tensor)| {
        let loss = kiln::nn::functional::cross_entropy(x, t);
        loss.backward();
        loss.detach()
    });
    ce.call((&logits, &target));
    let routines = ["kiln_row_max_f32", "kiln_row_exp_sum_f32", "kiln_row_count_eq_f32", "kiln_row_onehot_sub_f32"];
    expect("cross_entropy forward and backward", calls(&ce), &routines);
}

/// Layer norm with an output of 16 MiB, from which the CPU epilogue writes with non-temporal
/// stores (`codegen/src/cpu/epilogue.rs`, `STREAM_BYTES`), and rows whose starts are not all
/// 64-byte aligned (1000 f32): still the eager values.
#[test]
fn layer_norm_with_a_streamed_output_matches_eager() {
    let _seeded = seeded();
    kiln::manual_seed(9);
    for cols in [1024, 1000] {
        let x = Tensor::randn([(4 << 20) / cols + 1, cols]);
        let (w, b) = (Tensor::randn([cols]), Tensor::randn([cols]));
        let (e, c, kernels, _) = both(&x, |x| kiln::nn::functional::layer_norm(x, &[cols], Some(&w), Some(&b), 1e-5));
        close(&c, &e, 1e-5);
        assert_eq!(kernels, 1, "{cols} columns");
    }
}

/// The MSE loss and its gradient: the loss is one kernel over the difference.
#[test]
fn mse_loss_and_backward_match_eager() {
    let _seeded = seeded();
    kiln::manual_seed(6);
    let (x, t) = (Tensor::randn([32, 10]), Tensor::randn([32, 10]));
    let run = |compiled: bool| {
        let w = Tensor::ones([10]).requires_grad_(true);
        let mut f = |(x, t): (&Tensor, &Tensor)| {
            let loss = kiln::nn::functional::mse_loss(&(x * &w), t);
            loss.backward();
            loss.detach()
        };
        let (loss, kernels) = if compiled {
            let mut step = kiln::compile(&mut f);
            let l = step.call((&x, &t));
            (l, step.stats().kernels_launched)
        } else {
            (f((&x, &t)), 0)
        };
        (loss, w.grad().expect("w has a gradient"), kernels)
    };
    let (le, ge, _) = run(false);
    let (lc, gc, kernels) = run(true);
    close(&lc, &le, 2e-6);
    close(&gc, &ge, 2e-6);
    assert!(kernels <= 4, "{kernels} kernels");
}

/// Cross-entropy forward and backward on logits: compiled equals eager, and nothing runs
/// eagerly: the class pick is a masked sum over the log-probabilities' producer and its
/// gradient is elementwise (`ops/pick.rs`); every reduction over the logits' rows and the
/// gradient are one kernel. The second shape's gradient (over 16 MiB) is written with
/// non-temporal stores (`codegen/src/cpu/epilogue.rs`, `STREAM_BYTES`), its rows of 1000 f32
/// starting at every 64-byte phase.
#[test]
fn cross_entropy_forward_backward_match_eager() {
    let _seeded = seeded();
    kiln::manual_seed(8);
    for (rows, cols) in [(32, 10), ((4 << 20) / 1000 + 1, 1000)] {
        cross_entropy_matches_eager(rows, cols);
    }
}

/// [`cross_entropy_forward_backward_match_eager`] on logits `[rows, cols]`.
fn cross_entropy_matches_eager(rows: usize, cols: usize) {
    let logits = Tensor::randn([rows, cols]);
    let target = Tensor::randint(0, cols as i64, [rows]);
    let run = |compiled: bool| {
        let x = logits.detach().requires_grad_(true);
        let f = |(x, t): (&Tensor, &Tensor)| {
            let loss = kiln::nn::functional::cross_entropy(x, t);
            loss.backward();
            loss.detach()
        };
        let (loss, stats) = if compiled {
            let mut step = kiln::compile(f);
            let l = step.call((&x, &target));
            let s = step.stats();
            let over_logits = step.kernels().iter().filter(|k| k.ops.contains("exp")).count();
            (l, (s.kernels_launched, s.eager_ops, over_logits))
        } else {
            (f((&x, &target)), (0, 0, 0))
        };
        (loss, x.grad().expect("x has a gradient"), stats)
    };
    let (le, ge, _) = run(false);
    let (lc, gc, (kernels, eager_ops, over_logits)) = run(true);
    close(&lc, &le, 1e-5);
    close(&gc, &ge, 1e-5);
    assert_eq!(eager_ops, 0, "[{rows}, {cols}]: {eager_ops} eager ops");
    // The max, Σ exp, the pick, the gradient's Σ and the gradient itself: one sweep of the
    // logits (`passes/stages.rs`); the mean and the gradient's `-g/n` per row are the others.
    assert!(kernels <= 3, "[{rows}, {cols}]: {kernels} kernels");
    assert_eq!(over_logits, 1, "[{rows}, {cols}]: {over_logits} kernels compute exp over the logits");
}

/// Cross-entropy's forward alone is at most two kernels when no target is ignored: the one
/// over the logits (max, `Σ exp`, the pick) and the mean. With an ignored target (or class
/// weights) the mask and the weights' sum add kernels, and the value still equals eager.
#[test]
fn cross_entropy_forward_is_two_kernels() {
    let _seeded = seeded();
    kiln::manual_seed(10);
    let logits = Tensor::randn([16, 7]);
    for ignored in [false, true] {
        let mut t: Vec<i64> = (0..16).map(|i| (i * 5 + 2) % 7).collect();
        if ignored {
            t[3] = -100;
        }
        let target = Tensor::from_vec(t, [16]);
        let eager = kiln::nn::functional::cross_entropy(&logits, &target);
        let mut step = kiln::compile(|(x, t): (&Tensor, &Tensor)| kiln::nn::functional::cross_entropy(x, t));
        let loss = step.call((&logits, &target));
        close(&loss, &eager, 1e-6);
        let (kernels, eager_ops) = (step.stats().kernels_launched, step.stats().eager_ops);
        assert_eq!(eager_ops, 0, "ignored {ignored}");
        if ignored {
            assert!(kernels > 2, "the mask and the weights' sum are kernels: {kernels}");
        } else {
            assert_eq!(kernels, 2, "{:?}", step.kernels().iter().map(|k| &k.ops).collect::<Vec<_>>());
        }
    }
}

/// Label smoothing inside a compiled step, with and without an ignored target (the fast
/// path without the mask, and the masked graph), for every reduction: == eager within 1e-6.
#[test]
fn cross_entropy_with_label_smoothing_equals_eager() {
    use kiln::nn::functional::{try_cross_entropy_opts, CrossEntropyOpts, Reduction};
    let _seeded = seeded();
    kiln::manual_seed(12);
    let logits = Tensor::randn([12, 6]);
    for ignored in [false, true] {
        let mut t: Vec<i64> = (0..12).map(|i| (i * 5 + 1) % 6).collect();
        if ignored {
            t[7] = -100;
        }
        let target = Tensor::from_vec(t, [12]);
        for reduction in [Reduction::Mean, Reduction::Sum, Reduction::None] {
            let opts = CrossEntropyOpts { label_smoothing: 0.1, reduction, ..Default::default() };
            let eager = try_cross_entropy_opts(&logits, &target, &opts).unwrap();
            let mut step = kiln::compile(|(x, t): (&Tensor, &Tensor)| try_cross_entropy_opts(x, t, &opts).unwrap());
            close(&step.call((&logits, &target)), &eager, 1e-6);
            assert_eq!(step.stats().eager_ops, 0, "ignored {ignored}, {reduction:?}");
        }
    }
}

/// A gather of one element per row along the last dim, captured as a masked sum: the value
/// and the gradient equal eager, for f32 and f64, on a transposed input; an index out of
/// range is the eager error; a gather along another dim still runs the index kernel.
#[test]
fn a_captured_pick_equals_gather() {
    let _seeded = seeded();
    kiln::manual_seed(9);
    for dtype in [DType::F32, DType::F64] {
        let base = Tensor::randn([7, 5]).to_dtype(dtype);
        let index = Tensor::new(&[[4i64], [0], [2], [2], [1]]);
        let run = |compiled: bool| {
            let x = base.detach().requires_grad_(true);
            let f = |(x, i): (&Tensor, &Tensor)| {
                let picked = x.t().gather(1, i) * 3.0;
                (picked.exp() * Tensor::arange(5).to_dtype(x.dtype()).unsqueeze(1)).sum().backward();
                picked.detach()
            };
            let (out, eager_ops) = if compiled {
                let mut step = kiln::compile(f);
                let out = step.call((&x, &index));
                (out, step.stats().eager_ops)
            } else {
                (f((&x, &index)), 0)
            };
            (out, x.grad().expect("x has a gradient"), eager_ops)
        };
        let (pe, ge, _) = run(false);
        let (pc, gc, eager_ops) = run(true);
        assert_eq!(pc.shape(), &[5, 1]);
        close(&pc, &pe, 0.0);
        close(&gc, &ge, 1e-6);
        assert_eq!(eager_ops, 0, "{dtype}: {eager_ops} eager ops");
    }
    let x = Tensor::randn([3, 4]);
    let mut step = kiln::compile(|(x, i): (&Tensor, &Tensor)| x.try_gather(1, i).map(|t| t * 2.0));
    let err = step.call((&x, &Tensor::new(&[[1i64], [4], [0]]))).expect_err("index 4 of 4 classes");
    assert!(err.to_string().contains("index 4 is out of bounds for dimension 1 with size 4"), "{err}");
    let along_rows = Tensor::new(&[[2i64, 0, 1, 1]]);
    let mut step = kiln::compile(|(x, i): (&Tensor, &Tensor)| (x * 1.0).gather(0, i));
    assert!(step.call((&x, &along_rows)).equal(&x.gather(0, &along_rows)));
}

/// A later reduction over the same rows joins an earlier one's kernel as a stage unless it
/// waits for that kernel: one that reads a value the first kernel writes (here its epilogue's
/// output `z`, which leaves the step) gets its own; reductions that read nothing of each other
/// share one sweep of the rows.
#[test]
fn later_reductions_join_as_stages_unless_they_wait_for_the_kernel() {
    let _seeded = seeded();
    kiln::manual_seed(9);
    let x = Tensor::randn([12, 40]);
    let mut step = kiln::compile(|x: &Tensor| {
        let z = x - x.amax_keepdim(1);
        let s = z.exp().sum_dim_keepdim(1);
        (z, s)
    });
    let (z, s) = step.call(&x);
    let ez = &x - x.amax_keepdim(1);
    close(&z, &ez, 1e-6);
    close(&s, &ez.exp().sum_dim_keepdim(1), 2e-6);
    assert_eq!(step.stats().kernels_launched, 2, "the max with z as its epilogue, then the sum loading z");
    let (e, c, kernels, eager) = both(&x, |x| x.amax_keepdim(1) + (x * x).sum_dim_keepdim(1));
    close(&c, &e, 2e-6);
    assert_eq!((kernels, eager), (2, 0), "the max and the sum as two stages, the addition of the two rows");
}

/// Softmax of a softmax over a dim of size 1 (found by the property tests): when a reduction
/// reduces nothing, a value over its result is one over its input, an epilogue member and no
/// row value, so every output is stored.
#[test]
fn chained_softmax_over_a_size_one_dim_keeps_every_output() {
    let x = Tensor::new(&[[0.5f32], [-2.0]]);
    let f = |x: &Tensor| {
        let y = x + x;
        let s1 = y.softmax(-1);
        let s2 = s1.softmax(-1);
        vec![y, s1, s2]
    };
    let want = f(&x);
    let got = kiln::compile(f).call(&x);
    for (g, w) in got.iter().zip(&want) {
        close(g, w, 0.0);
    }
}

#[test]
fn softmax_of_an_empty_tensor_is_empty_as_eager() {
    // An empty reduced dim ([3, 0] along 1) and an empty batch ([0, 4] along 1), with backward.
    for (shape, dim) in [([3usize, 0], 1i64), ([0, 4], 1), ([0, 4], 0)] {
        for log in [false, true] {
            let x = Tensor::zeros(shape).requires_grad_(true);
            let mut step = kiln::compile(|x: &Tensor| {
                let y = if log { x.log_softmax(dim) } else { x.softmax(dim) };
                y.sum().backward();
                y
            });
            let y = step.call(&x);
            assert_eq!(y.shape(), &shape, "{shape:?} dim {dim} log {log}");
            assert_eq!(x.grad().expect("a gradient").shape(), &shape);
        }
    }
}
