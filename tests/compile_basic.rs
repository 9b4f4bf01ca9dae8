//! kiln::compile: compiled results equal eager ones; caches, breaks and kernel counts.

use kiln::prelude::*;

#[path = "common/seeded.rs"]
mod seeded;
use seeded::seeded;

fn close(a: &Tensor, b: &Tensor, tol: f32) {
    let (a, b) = (a.to_vec::<f32>(), b.to_vec::<f32>());
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()), "element {i}: {x} vs {y}");
    }
}

fn gelu_chain(x: &Tensor, a: &Tensor, b: &Tensor) -> Tensor {
    let z = x * a + b;
    let inner = (&z + &z * &z * &z * 0.044715) * 0.7978845608;
    &z * 0.5 * (inner.tanh() + 1.0)
}

#[test]
fn gelu_chain_is_one_kernel_and_matches_eager() {
    let _seeded = seeded();
    kiln::manual_seed(0);
    let (x, a, b) = (Tensor::randn([37, 129]), Tensor::randn([37, 129]), Tensor::randn([129]));
    let mut step = kiln::compile(|(x, a, b): (&Tensor, &Tensor, &Tensor)| gelu_chain(x, a, b));
    let y = step.call((&x, &a, &b));
    close(&y, &gelu_chain(&x, &a, &b), 1e-5);
    assert_eq!(step.stats().kernels_launched, 1, "{:?}", step.kernels());
    assert_eq!(step.stats().plan_cache_hits, 0);
    let y2 = step.call((&x, &a, &b));
    close(&y2, &y, 0.0);
    assert_eq!(step.stats().plan_cache_hits, 1);
}

/// One Adam step of one parameter: eager and compiled give the same parameter and state.
#[test]
fn adam_update_of_one_parameter_is_one_kernel() {
    let _seeded = seeded();
    use kiln::optim::{Adam, AdamConfig, Optimizer};
    let run = |compiled: bool| {
        kiln::manual_seed(3);
        let p = Tensor::randn([1000]).requires_grad_(true);
        let mut opt = Adam::new(vec![p.clone()], AdamConfig { lr: 0.01, ..Default::default() });
        let mut kernels = Vec::new();
        for k in 0..3 {
            p.set_grad(Some(Tensor::full([1000], 0.5 + k as f64)));
            if compiled {
                let mut step = kiln::compile(|()| opt.step());
                step.call(());
                kernels.push(step.stats().kernels_launched);
            } else {
                opt.step();
            }
        }
        (p.detach(), kernels)
    };
    let (eager, _) = run(false);
    let (compiled, kernels) = run(true);
    close(&compiled, &eager, 1e-6);
    // The first step also creates the state; every later step is exactly one kernel.
    assert_eq!(&kernels[1..], &[1, 1], "{kernels:?}");
}

/// A value read inside the step (a graph break) is right, and the step goes on capturing.
#[test]
fn graph_break_reads_the_right_value_and_capture_continues() {
    let _seeded = seeded();
    let x = Tensor::from_slice(&[1.0f32, -2.0, 3.0]);
    let mut step = kiln::compile(|x: &Tensor| {
        let y = x * 2.0;
        let s: f32 = y.sum().item();
        if s > 0.0 {
            (&y + 1.0).exp()
        } else {
            y.neg()
        }
    });
    let out = step.call(&x);
    assert_eq!(step.stats().graph_breaks, 1);
    assert_eq!(step.stats().graphs, 2);
    close(&out, &(&x * 2.0 + 1.0).exp(), 1e-6);
    assert_eq!(step.stats().plans_expected, 0, "the first call has nothing to expect");
    let neg = Tensor::from_slice(&[-1.0f32, -2.0, 3.0]);
    close(&step.call(&neg), &(&neg * 2.0).neg(), 0.0);
    assert_eq!(step.stats().plans_expected, 1, "the graph before the break repeats; the one after differs");
    close(&step.call(&neg), &(&neg * 2.0).neg(), 0.0);
    assert_eq!(step.stats().plans_expected, 2, "both graphs repeat the previous call's");
}

/// A call that records its previous call's graph again runs that plan without hashing; one
/// that differs anywhere (a node, an input's size, the outputs) is hashed and looked up, and
/// every result equals eager.
#[test]
fn a_repeated_graph_runs_the_previous_plan_unhashed() {
    let _seeded = seeded();
    let body = |(x, branch, both): (&Tensor, bool, bool)| {
        let y = x * 2.0;
        let z = if branch { y.exp() } else { y.tanh() };
        let w = &z + 1.0;
        if both {
            vec![z, w]
        } else {
            vec![w]
        }
    };
    let mut step = kiln::compile(body);
    // (elements, branch, both) -> (plan from the cache, plan expected)
    let calls = [
        ((4, false, false), (false, false)),
        ((4, false, false), (true, true)),
        ((4, true, false), (false, false)), // differs at the exp node
        ((4, false, false), (true, false)), // differs from the previous call's at tanh: hashed, cached
        ((4, false, true), (false, false)), // the same nodes with another output
        ((4, false, true), (true, true)),
        ((6, false, true), (false, false)), // the input's size differs
        ((6, false, true), (true, true)),
    ];
    for (i, ((n, branch, both), (hit, expected))) in calls.into_iter().enumerate() {
        let x = Tensor::randn([n]);
        let compiled = step.call((&x, branch, both));
        let eager = body((&x, branch, both));
        assert_eq!(compiled.len(), eager.len(), "call {i}");
        for (c, e) in compiled.iter().zip(&eager) {
            close(c, e, 1e-5);
        }
        let s = step.stats();
        assert_eq!((s.plan_cache_hits == 1, s.plans_expected == 1), (hit, expected), "call {i}: {s:?}");
    }
}

/// A new input shape misses the plan cache once, then hits; kernels are shared across sizes.
#[test]
fn new_shapes_recompile_once_then_hit() {
    let _seeded = seeded();
    let mut step = kiln::compile(|x: &Tensor| (x.sigmoid() * x).sum_dim(1));
    for (i, n) in [8usize, 8, 16, 16, 8].into_iter().enumerate() {
        let x = Tensor::randn([n, 5]);
        let y = step.call(&x);
        close(&y, &(x.sigmoid() * &x).sum_dim(1), 1e-5);
        let expect_hit = i == 1 || i >= 3;
        assert_eq!(step.stats().plan_cache_hits == 1, expect_hit, "call {i} (n = {n})");
    }
}

/// In-place writes through views inside a step land in the right elements.
#[test]
fn inplace_writes_through_views() {
    let _seeded = seeded();
    let run = |x: &Tensor| {
        let y = x.deep_clone();
        y.i((.., 1)).add_(10.0);
        y.t().mul_(Tensor::from_slice(&[1.0f32, 2.0, 3.0]).unsqueeze(1));
        x.add_(1.0);
        y
    };
    let (a, b) = (Tensor::ones([2, 3]), Tensor::ones([2, 3]));
    let eager = run(&a);
    let mut step = kiln::compile(|x: &Tensor| run(x));
    let compiled = step.call(&b);
    close(&compiled, &eager, 0.0);
    close(&b, &a, 0.0);
}

/// In-place ops that write an out-of-place result back (`masked_fill_`, `clamp_`, `fill_`)
/// are captured as assignments: the compiled step equals eager, with no graph break.
#[test]
fn masked_fill_clamp_and_fill_in_place_are_captured() {
    let _seeded = seeded();
    let run = |(x, mask): (&Tensor, &Tensor)| {
        let y = x * 2.0;
        y.masked_fill_(mask, -5.0);
        y.clamp_(-4.0, 1.5);
        let z = x.deep_clone();
        z.fill_(0.25);
        (y, z)
    };
    let x = Tensor::linspace(-1.0, 1.0, 12).view([3, 4]);
    let mask = Tensor::linspace(-1.0, 1.0, 4).gt(0.2);
    let eager = run((&x, &mask));
    let mut step = kiln::compile(run);
    let compiled = step.call((&x, &mask));
    close(&compiled.0, &eager.0, 0.0);
    close(&compiled.1, &eager.1, 0.0);
    assert_eq!(step.stats().graph_breaks, 0);
    assert!(eager.0.to_vec::<f32>().contains(&-4.0), "the mask filled and the clamp raised some elements");
}

/// `net.compile()` is the module's forward pass, compiled.
#[test]
fn module_compile_is_its_forward() {
    let _seeded = seeded();
    use kiln::nn::{self, Module};
    kiln::manual_seed(5);
    let net = nn::Sequential::new().add(nn::Linear::new(6, 8)).add(nn::Tanh).add(nn::Linear::new(8, 3));
    let x = Tensor::randn([4, 6]);
    let mut f = net.compile();
    close(&f.call(&x), &net.forward(&x), 1e-5);
    assert_eq!(f.stats().graph_breaks, 0);
}

/// `clamp` with tensor bounds is maximum/minimum nodes that fuse with their neighbours: one
/// kernel forward; compiled forward and gradients (of the input and of both bounds) equal eager.
#[test]
fn clamp_with_tensor_bounds_fuses_and_matches_eager() {
    let _seeded = seeded();
    kiln::manual_seed(5);
    let (x, lo, hi) = (Tensor::randn([37, 129]), Tensor::randn([129]) - 0.5, Tensor::randn([37, 1]) + 0.5);
    let f = |x: &Tensor, lo: &Tensor, hi: &Tensor| (x * 2.0).clamp_tensor(Some(lo), Some(hi)) + 1.0;
    let mut step = kiln::compile(|(x, lo, hi): (&Tensor, &Tensor, &Tensor)| f(x, lo, hi));
    let y = step.call((&x, &lo, &hi));
    close(&y, &f(&x, &lo, &hi), 0.0);
    assert_eq!(step.stats().kernels_launched, 1, "{:?}", step.kernels());
    let lo_only = kiln::compile(|(x, lo): (&Tensor, &Tensor)| x.clamp_tensor(Some(lo), None)).call((&x, &lo));
    close(&lo_only, &x.maximum(&lo), 0.0);

    let grads = |compiled: bool| {
        let leaves = [&x, &lo, &hi].map(|t| t.detach().requires_grad_(true));
        let loss = |(x, lo, hi): (&Tensor, &Tensor, &Tensor)| {
            let loss = (x.clamp_tensor(Some(lo), Some(hi)) * x).sum();
            loss.backward();
            loss
        };
        let l = if compiled {
            kiln::compile(loss).call((&leaves[0], &leaves[1], &leaves[2]))
        } else {
            loss((&leaves[0], &leaves[1], &leaves[2]))
        };
        (l, leaves.map(|t| t.grad().expect("every leaf gets a gradient")))
    };
    let ((le, ge), (lc, gc)) = (grads(false), grads(true));
    close(&lc, &le, 1e-5);
    // x's gradient is elementwise (exact); the bounds' are sums over their broadcast dims,
    // which a compiled reduction adds in another order (within an f32 ulp, see ReduceKernel).
    close(&gc[0], &ge[0], 0.0);
    for (c, e) in gc[1..].iter().zip(&ge[1..]) {
        close(c, e, 2e-7);
    }
    assert!(ge[1].sum().item::<f32>() != 0.0 && ge[2].sum().item::<f32>() != 0.0, "both bounds were chosen somewhere");
}

/// Ops with kernels of their own (sorting, `topk`, `max_dim`, `cumsum`, `softmax`, matmul,
/// pooling, and their backward kernels) are opaque nodes of the trace, with two results where
/// the op has two: the compiled step has no graph break, and its values and gradients equal
/// eager ones, at the first call and at a cache hit.
#[test]
fn ops_with_kernels_of_their_own_are_captured() {
    use kiln::nn::functional as F;
    let _seeded = seeded();
    kiln::manual_seed(11);
    let (x0, w0) = (Tensor::randn([2, 3, 6, 6]), Tensor::randn([6, 5]));
    let step = |(x, w): (&Tensor, &Tensor)| {
        let (sorted, order) = x.sort(-1, true);
        let (top, at) = x.topk(2, 2, true, true);
        let (most, where_most) = x.max_dim(1);
        let pooled = F::max_pool2d(x, 2) + F::avg_pool2d(x, 3).mean();
        let mixed = x.cumsum(3).softmax(-1).matmul(w);
        let loss = sorted.narrow(-1, 0, 2).sum()
            + top.sum() * 0.5
            + (most * 0.25).sum()
            + pooled.pow(2.0).sum()
            + mixed.log_softmax(-1).mean();
        loss.backward();
        let indices =
            order.to_dtype(DType::F32).sum() + at.to_dtype(DType::F32).sum() + where_most.to_dtype(DType::F32).sum();
        (loss, indices)
    };
    let run = |compiled: Option<&mut dyn FnMut(&Tensor, &Tensor) -> (Tensor, Tensor)>| {
        let (x, w) = (x0.detach().requires_grad_(true), w0.detach().requires_grad_(true));
        let out = match compiled {
            Some(f) => f(&x, &w),
            None => step((&x, &w)),
        };
        (out, x.grad().expect("x gets a gradient"), w.grad().expect("w gets a gradient"))
    };
    let ((le, ie), gxe, gwe) = run(None);
    let mut compiled = kiln::compile(step);
    for call in 0..2 {
        let ((lc, ic), gxc, gwc) = run(Some(&mut |x, w| compiled.call((x, w))));
        close(&lc, &le, 1e-5);
        close(&ic, &ie, 0.0);
        close(&gxc, &gxe, 1e-5);
        close(&gwc, &gwe, 1e-5);
        assert_eq!(compiled.stats().graph_breaks, 0, "call {call}");
    }
    assert_eq!(compiled.stats().plan_cache_hits, 1);
}

/// Indexed writes (`scatter_`, `scatter_add`, `index_put_`, `index_fill_`, in place on
/// intermediates and out of place), advanced indexing and `one_hot` join the trace: the
/// compiled step has no graph break, and its values and gradients equal eager ones, at the
/// first call and at a cache hit.
#[test]
fn indexed_writes_are_captured() {
    let _seeded = seeded();
    kiln::manual_seed(12);
    let x0 = Tensor::randn([4, 5]);
    let rows = Tensor::from_vec(vec![3i64, 0, 3], [3]);
    let cols = Tensor::from_vec(vec![1i64, 4, 2], [3]);
    let along = Tensor::from_vec(vec![0i64, 2, 1, 3, 3, 0, 2, 2, 1, 0], [2, 5]);
    let labels = Tensor::from_vec(vec![2i64, 0, 4, 1], [4]);
    let step = |x: &Tensor| {
        let y = x * 2.0;
        let buf = Tensor::zeros([4, 5]);
        buf.scatter_(0, &along.narrow(0, 0, 1), &x.detach().narrow(0, 0, 1));
        buf.index_put_(&[&rows, &cols], &Tensor::full([3], 7.0), true);
        buf.index_fill_(1, &cols.narrow(0, 0, 1), -1.0);
        let written =
            y.scatter_add(0, &along, &(x * x).narrow(0, 0, 2)).index_put(&[&rows, &cols], &(x.sum() * 0.1), false);
        let picked = written.index(&[&rows, &cols]);
        let onehot = labels.one_hot(5).to_dtype(DType::F32);
        let loss = (&written * &onehot).sum() + picked.pow(2.0).sum() + (&y * &buf).sum();
        loss.backward();
        (loss, buf)
    };
    let run = |compiled: Option<&mut dyn FnMut(&Tensor) -> (Tensor, Tensor)>| {
        let x = x0.detach().requires_grad_(true);
        let out = match compiled {
            Some(f) => f(&x),
            None => step(&x),
        };
        (out, x.grad().expect("x gets a gradient"))
    };
    let ((le, be), ge) = run(None);
    let mut compiled = kiln::compile(step);
    for call in 0..2 {
        let ((lc, bc), gc) = run(Some(&mut |x| compiled.call(x)));
        close(&lc, &le, 1e-5);
        close(&bc, &be, 0.0);
        close(&gc, &ge, 1e-5);
        assert_eq!(compiled.stats().graph_breaks, 0, "call {call}");
    }
    assert_eq!(compiled.stats().plan_cache_hits, 1);
}
