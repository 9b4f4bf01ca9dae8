//! The fused attention kernel (`F::scaled_dot_product_attention` on CPU without an explicit
//! mask) against the decomposition it replaces (forced by an explicit Bool mask meaning the
//! same), values and gradients in f64 and f32, with the causal mask and dropout (the same mask
//! from the same seed), and at empty sizes (no queries, keys, features or problems);
//! finite-difference first and second derivatives; and inside `kiln::compile`, where it
//! must equal eager and keep the `[…, L, S]` weights out of the step's memory.

use kiln::autograd::{grad, gradcheck, gradgradcheck, GradOpts, GradcheckOpts};
use kiln::nn::functional as F;
use kiln::{DType, Tensor};

/// Random leaves of `shape` and `dtype`.
fn leaf_of(shape: &[usize], dtype: DType) -> Tensor {
    Tensor::randn(shape).to_dtype(dtype).requires_grad_(true)
}

/// Random f64 leaves of `shape`.
fn leaf(shape: &[usize]) -> Tensor {
    leaf_of(shape, DType::F64)
}

/// The additive form of the Bool mask `keep` (0 where it attends, −∞ elsewhere), as `dtype`;
/// `grad` makes it require grad, which sends attention to the decomposition.
fn additive(keep: &Tensor, dtype: DType, grad: bool) -> Tensor {
    Tensor::zeros_opts(keep.shape(), dtype, keep.device())
        .masked_fill(&keep.logical_not(), f64::NEG_INFINITY)
        .requires_grad_(grad)
}

/// The attention of `(q, k, v)`, seeded before (for the dropout mask), masked by `keep` (Bool)
/// when given, else causal or not: fused (`keep` as given, or `is_causal`) or decomposed (the
/// same mask spelled as an additive mask that requires grad, which the fused kernel leaves to
/// the decomposition).
fn attend_masked(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    keep: Option<&Tensor>,
    causal: bool,
    p: f64,
    fused: bool,
) -> Tensor {
    kiln::manual_seed(7);
    if fused {
        return F::scaled_dot_product_attention(q, k, v, keep, p, causal, Some(0.3));
    }
    let (l, s) = (q.shape()[q.dim() - 2], k.shape()[k.dim() - 2]);
    let causal_keep = Tensor::ones_opts([l, s], DType::Bool, q.device()).tril(0);
    let keep =
        keep.cloned().unwrap_or(if causal { causal_keep } else { Tensor::ones_opts([l, s], DType::Bool, q.device()) });
    F::scaled_dot_product_attention(q, k, v, Some(&additive(&keep, q.dtype(), true)), p, false, Some(0.3))
}

/// [`attend_masked`] without a Bool mask.
fn attend(q: &Tensor, k: &Tensor, v: &Tensor, causal: bool, p: f64, fused: bool) -> Tensor {
    attend_masked(q, k, v, None, causal, p, fused)
}

/// The largest difference between two tensors, relative to 1 + |b|.
fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.shape(), b.shape());
    let (a, b) = (a.to_dtype(DType::F64).to_vec::<f64>(), b.to_dtype(DType::F64).to_vec::<f64>());
    a.iter().zip(&b).map(|(x, y)| (x - y).abs() / (1.0 + y.abs())).fold(0.0, f64::max)
}

/// Asserts that `run(true)` (fused) and `run(false)` (decomposed) give outputs and gradients
/// of `q`, `k`, `v` (for one random output gradient) within `tolerance` of each other.
fn assert_fused_equals_decomposed(
    what: &str,
    (q, k, v): (&Tensor, &Tensor, &Tensor),
    tolerance: f64,
    run: impl Fn(bool) -> Tensor,
) {
    let g = Tensor::randn(run(true).shape()).to_dtype(q.dtype());
    let [fused, decomposed] = [true, false].map(|fused| {
        let out = run(fused);
        out.backward_with(&g);
        let grads = [q, k, v].map(|t| t.grad().unwrap());
        for t in [q, k, v] {
            t.set_grad(None);
        }
        [out.detach(), grads[0].clone(), grads[1].clone(), grads[2].clone()]
    });
    for (i, name) in ["output", "dq", "dk", "dv"].iter().enumerate() {
        let d = max_diff(&fused[i], &decomposed[i]);
        assert!(d < tolerance, "{what}: {name} differs by {d}");
    }
}

#[test]
fn fused_attention_equals_the_decomposition_in_values_and_gradients() {
    let _alone = alone();
    // 2048 keys make blocks of 64 query rows: 70 queries are a whole block and a partial one
    // (backward adds both blocks into dK and dV); broadcast batch dims; L > S so the causal
    // rows past S see every key; 2-dim inputs.
    let shapes: [(&[usize], &[usize], &[usize]); 4] = [
        (&[1, 70, 4], &[1, 2048, 4], &[1, 2048, 3]),
        (&[2, 3, 70, 8], &[3, 50, 8], &[1, 50, 5]),
        (&[4, 6], &[9, 6], &[9, 3]),
        (&[2, 1, 5, 4], &[2, 3, 80, 4], &[2, 3, 80, 4]),
    ];
    for ((qs, ks, vs), (dtype, tolerance)) in
        shapes.into_iter().flat_map(|s| [(s, (DType::F64, 1e-12)), (s, (DType::F32, 1e-5))])
    {
        for causal in [false, true] {
            for p in [0.0, 0.3] {
                let (q, k, v) = (leaf_of(qs, dtype), leaf_of(ks, dtype), leaf_of(vs, dtype));
                let what = format!("{dtype} {qs:?} {ks:?} {vs:?} causal {causal} p {p}");
                assert_fused_equals_decomposed(&what, (&q, &k, &v), tolerance, |fused| {
                    attend(&q, &k, &v, causal, p, fused)
                });
            }
        }
    }
}

#[test]
fn masked_fused_attention_equals_the_decomposition() {
    let _alone = alone();
    let (q, k, v) = (leaf(&[2, 3, 70, 8]), leaf(&[2, 3, 2048, 8]), leaf(&[2, 3, 2048, 5]));
    // A key-padding mask [2, 1, 1, S] broadcast over heads and queries (the first sequence's
    // keys past 1500 are padding), a query-by-key mask [L, S] broadcast over the batch with
    // row 5 masked out entirely (zero output, no gradient), and a full [2, 3, L, S] one.
    let pad =
        Tensor::cat(&[Tensor::arange(2048).lt(1500), Tensor::ones_opts([2048], DType::Bool, kiln::Device::Cpu)], 0)
            .reshape([2, 1, 1, 2048]);
    let rows = Tensor::rand([70, 2048]).ge(0.3).logical_and(Tensor::arange(70).ne(5).reshape([70, 1]));
    let full = Tensor::rand([2, 3, 70, 2048]).ge(0.5);
    // One value per query, broadcast over the keys (row 5 masked out).
    let per_query = Tensor::arange(70).ne(5).reshape([70, 1]);
    for (what, keep) in [("key padding", &pad), ("rows", &rows), ("full", &full), ("per query", &per_query)] {
        for p in [0.0, 0.3] {
            assert_fused_equals_decomposed(&format!("{what} mask, p {p}"), (&q, &k, &v), 1e-12, |fused| {
                attend_masked(&q, &k, &v, Some(keep), false, p, fused)
            });
        }
    }
}

#[test]
fn empty_sizes_give_what_the_decomposition_gives() {
    let _alone = alone();
    // No queries, no keys, no features, no problems.
    let shapes: [(&[usize], &[usize], &[usize]); 4] = [
        (&[2, 0, 4], &[2, 3, 4], &[2, 3, 5]),
        (&[2, 3, 4], &[2, 0, 4], &[2, 0, 5]),
        (&[2, 3, 0], &[2, 4, 0], &[2, 4, 5]),
        (&[0, 3, 4], &[0, 2, 4], &[0, 2, 5]),
    ];
    for (qs, ks, vs) in shapes {
        for causal in [false, true] {
            let (q, k, v) = (leaf(qs), leaf(ks), leaf(vs));
            let what = format!("{qs:?} {ks:?} {vs:?} causal {causal}");
            let [fused, decomposed] = [true, false].map(|f| {
                let out = attend(&q, &k, &v, causal, 0.0, f);
                out.sum().backward();
                let [dq, dk, dv] = [&q, &k, &v].map(|t| t.grad().unwrap());
                for t in [&q, &k, &v] {
                    t.set_grad(None);
                }
                [out.detach(), dq, dk, dv]
            });
            for (i, (a, b)) in fused.iter().zip(&decomposed).enumerate() {
                // `max_diff` asserts the shapes are equal.
                assert!(max_diff(a, b) < 1e-12, "{what}: result {i} (output, dq, dk, dv)");
            }
        }
    }
}

#[test]
fn fused_attention_passes_first_and_second_derivative_checks() {
    let _alone = alone();
    // A Bool mask with row 2 masked out entirely.
    let keep = Tensor::new(&[true, false, true, true])
        .reshape([1, 4])
        .expand([5, 4])
        .logical_and(Tensor::arange(5).ne(2).reshape([5, 1]));
    for (causal, p, mask) in [(false, 0.0, None), (true, 0.0, None), (true, 0.4, None), (false, 0.4, Some(&keep))] {
        let (q, k, v) = (leaf(&[2, 5, 3]), leaf(&[2, 4, 3]), leaf(&[2, 4, 2]));
        let f = |x: &[Tensor]| attend_masked(&x[0], &x[1], &x[2], mask, causal, p, true);
        let what = format!("causal {causal} dropout {p} mask {}", mask.is_some());
        gradcheck(f, &[q.clone(), k.clone(), v.clone()], GradcheckOpts::default())
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        gradgradcheck(f, &[q.clone(), k.clone(), v.clone()], GradcheckOpts::default())
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        // Under `create_graph` the rule is made of tensor ops: its first derivatives must be
        // the kernel's (gradgradcheck only checks them against themselves).
        let g = Tensor::randn([2, 5, 2]).to_dtype(DType::F64);
        let out = f(&[q.clone(), k.clone(), v.clone()]);
        let opts = GradOpts { create_graph: true, ..Default::default() };
        let differentiable = grad(&[&out], &[&q, &k, &v], Some(&[&g]), opts).unwrap();
        let kernel = grad(&[&out], &[&q, &k, &v], Some(&[&g]), GradOpts::default()).unwrap();
        for (i, (a, b)) in differentiable.iter().zip(&kernel).enumerate() {
            let (a, b) = (a.as_ref().unwrap(), b.as_ref().unwrap());
            assert!(a.requires_grad() && !b.requires_grad(), "{what}: input {i}: which rule ran");
            let d = max_diff(&a.detach(), b);
            assert!(d < 1e-12, "{what}: input {i}: create_graph gradient differs by {d}");
        }
    }
}

/// The compiled step: attention of `(q, k, v)`, causal, with dropout; its loss and backward.
fn loss_and_backward((q, k, v, fused): (&Tensor, &Tensor, &Tensor, bool)) -> Tensor {
    let loss = attend(q, k, v, true, 0.2, fused).square().sum();
    loss.backward();
    loss
}

#[test]
fn compiled_fused_attention_equals_eager_and_keeps_the_weights_out_of_memory() {
    let _alone = alone();
    let (b, h, l, e) = (2, 3, 1024, 8);
    let weights_bytes = b * h * l * l * 4;
    let mut peaks = Vec::new();
    for fused in [true, false] {
        let [q, k, v] = [0, 1, 2].map(|_| Tensor::randn([b, h, l, e]).requires_grad_(true));
        let mut step = kiln::compile(loss_and_backward);
        for call in 0..2 {
            for t in [&q, &k, &v] {
                t.set_grad(None);
            }
            let before = kiln::memory::memory_allocated();
            kiln::memory::reset_peak_memory_stats();
            let compiled = step.call((&q, &k, &v, fused));
            peaks.push(kiln::memory::max_memory_allocated() - before);
            let grads: Vec<Tensor> = [&q, &k, &v].iter().map(|t| t.grad().unwrap()).collect();
            for t in [&q, &k, &v] {
                t.set_grad(None);
            }
            let eager = loss_and_backward((&q, &k, &v, fused));
            let what = format!("fused {fused}, call {call}");
            let (c, e) = (compiled.item::<f32>(), eager.item::<f32>());
            assert!((c - e).abs() <= 1e-4 * e.abs(), "{what}: loss compiled {c} vs eager {e}");
            for (g, t) in grads.iter().zip([&q, &k, &v]) {
                let d = (g - &t.grad().unwrap()).abs().max().item::<f32>();
                assert!(d <= 1e-4, "{what}: gradients differ by {d}");
            }
        }
        assert_eq!(step.stats().plan_cache_hits, 1, "fused {fused}: the second call reuses the plan");
    }
    // The cache-hit calls' peaks: fused, then decomposed.
    let (fused, decomposed) = (peaks[1], peaks[3]);
    assert!(decomposed >= weights_bytes, "the decomposition holds the weights: peak {decomposed} B");
    assert!(fused < weights_bytes / 4, "fused peak {fused} B, weights {weights_bytes} B");
}

/// Holds the tests of this file one at a time: they seed and draw from the global generator
/// and read the process's memory peak.
fn alone() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}
