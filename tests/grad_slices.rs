//! Gradients of slicing views (`narrow`, `split`, `chunk`, `select`, basic indexing) when
//! several slices of one tensor are used: the engine keeps their gradients apart until that
//! tensor's node runs and tiles them into one `cat` where they lie along one dim without
//! overlapping (`src/autograd/arrived.rs`). Checked by finite differences (first and second
//! order), against the sums PyTorch gives, with hooks and `retain_grad` on the slices, and
//! inside `kiln::compile`.

use kiln::autograd::{gradcheck, gradgradcheck, GradcheckOpts};
use kiln::prelude::*;

#[path = "common/seeded.rs"]
mod seeded;
use seeded::seeded;

/// A random f64 leaf of `shape`.
fn leaf(shape: &[usize]) -> Tensor {
    Tensor::randn(shape).to_dtype(DType::F64).requires_grad_(true)
}

fn check(name: &str, f: impl Fn(&[Tensor]) -> Tensor + Copy, inputs: &[Tensor]) {
    let opts = GradcheckOpts::default();
    gradcheck(f, inputs, opts).unwrap_or_else(|e| panic!("{name}: {e}"));
    gradgradcheck(f, inputs, opts).unwrap_or_else(|e| panic!("{name} (second order): {e}"));
}

/// Every way slices of one tensor combine: pieces that tile it (in and out of order), pieces
/// with gaps, overlapping pieces, pieces along two dims, pieces beside a dense use of the same
/// tensor, selects, and nested slices of slices (as an RNN's steps of a step range).
#[test]
fn combined_slices_pass_gradcheck() {
    let _g = seeded();
    kiln::manual_seed(1);
    let x = leaf(&[6, 4]);
    check(
        "chunk, LSTM-like gates",
        |xs| {
            let g = xs[0].chunk(4, 1);
            let c = &g[1].sigmoid() * &g[0] + &g[0].sigmoid() * &g[2].tanh();
            &g[3].sigmoid() * &c.tanh()
        },
        &[x.clone()],
    );
    check(
        "pieces used out of order",
        |xs| {
            let p = xs[0].split(2, 0);
            &(&p[2] * 3.0) + &(&p[0] * &p[1])
        },
        &[x.clone()],
    );
    check("gaps", |xs| &xs[0].narrow(0, 1, 2).exp() + &xs[0].narrow(0, 4, 2), &[x.clone()]);
    check("overlapping", |xs| &xs[0].narrow(0, 0, 4).sin() * &xs[0].narrow(0, 2, 4), &[x.clone()]);
    check(
        "two dims",
        |xs| xs[0].narrow(0, 1, 4).narrow(1, 0, 3).exp() * &xs[0].narrow(1, 1, 3).narrow(0, 0, 4),
        &[x.clone()],
    );
    check("slices and a dense use", |xs| &xs[0].narrow(1, 0, 2).repeat([1, 2]) * &xs[0], &[x.clone()]);
    check("selects", |xs| &xs[0].select(0, 5) * &xs[0].select(0, 0) + xs[0].select(1, 2).sum(), &[x.clone()]);
    check(
        "nested steps",
        |xs| {
            let halves = xs[0].split(3, 0);
            let steps: Vec<Tensor> = halves.iter().flat_map(|h| h.split(1, 0)).collect();
            steps.iter().fold(Tensor::zeros_opts([1, 4], DType::F64, Device::Cpu), |h, s| (&h + s).tanh())
        },
        &[x.clone()],
    );
    check("basic indexing", |xs| &xs[0].i((.., 0..2)) * &xs[0].i((.., 2..4)), &[x]);
}

/// The values PyTorch gives for tiled, gapped and overlapping slices:
/// `x = torch.zeros(4, 2, requires_grad=True)`, then `(x[0:2]*1 + x[2:4]*2).sum()`,
/// `(x[1:2]*3).sum()` and `(x[0:3] + x[1:4]).sum()` accumulated by three `backward()` calls.
#[test]
fn slice_gradients_equal_pytorch_sums() {
    let x = Tensor::zeros([4, 2]).requires_grad_(true);
    (&x.narrow(0, 0, 2) + &(&x.narrow(0, 2, 2) * 2.0)).sum().backward();
    assert_eq!(x.grad().unwrap().to_vec::<f32>(), vec![1., 1., 1., 1., 2., 2., 2., 2.]);
    (&x.narrow(0, 1, 1) * 3.0).sum().backward();
    assert_eq!(x.grad().unwrap().to_vec::<f32>(), vec![1., 1., 4., 4., 2., 2., 2., 2.]);
    (&x.narrow(0, 0, 3) + &x.narrow(0, 1, 3)).sum().backward();
    assert_eq!(x.grad().unwrap().to_vec::<f32>(), vec![2., 2., 6., 6., 4., 4., 3., 3.]);
}

/// A hook on a slice sees (and may replace) that slice's gradient; `retain_grad` on a slice
/// keeps it; `autograd::grad` with `create_graph` through tiled slices differentiates again.
#[test]
fn hooks_retain_grad_and_create_graph_see_each_slice() {
    let x = Tensor::arange(6).to_dtype(DType::F32).view([3, 2]).requires_grad_(true);
    let parts = x.split(1, 0);
    parts[0].register_hook(|g| Some(g * 10.0));
    parts[2].retain_grad();
    (&parts[0] * 2.0 + &parts[1] + &parts[2] * &parts[2]).sum().backward();
    assert_eq!(x.grad().unwrap().to_vec::<f32>(), vec![20., 20., 1., 1., 8., 10.]);
    assert_eq!(parts[2].grad().unwrap().to_vec::<f32>(), vec![8., 10.]);

    let y = Tensor::new(&[1.0f64, 2.0, 3.0, 4.0]).requires_grad_(true);
    let h = y.chunk(2, 0);
    let out = (&h[0].pow(3.0) + &h[1].pow(2.0)).sum();
    let opts = kiln::autograd::GradOpts { create_graph: true, ..Default::default() };
    let g = kiln::autograd::grad(&[&out], &[&y], None, opts).unwrap()[0].clone().unwrap();
    assert_eq!(g.to_vec::<f64>(), vec![3., 12., 6., 8.]);
    g.sum().backward();
    assert_eq!(y.grad().unwrap().to_vec::<f64>(), vec![6., 12., 2., 2.]);
}

/// Inside `kiln::compile`, the gradients of chunked gates over a sequence of steps (an LSTM's
/// pattern) equal eager ones, call after call.
#[test]
fn compiled_slice_gradients_equal_eager() {
    let _g = seeded();
    kiln::manual_seed(2);
    let (w, x) = (Tensor::randn([8, 16]).requires_grad_(true), Tensor::randn([5, 3, 8]));
    let run = |x: &Tensor| -> Tensor {
        let gates = x.matmul(&w);
        let mut h = Tensor::zeros([3, 4]);
        for step in gates.split(1, 0) {
            let g = step.squeeze_dim(0).chunk(4, 1);
            h = &g[0].sigmoid() * &(&h + &g[2].tanh()) + &g[1] * &g[3].sigmoid();
        }
        let loss = h.square().sum();
        loss.backward();
        w.grad().unwrap()
    };
    w.set_grad(None);
    let eager = run(&x).deep_clone();
    let mut step = kiln::compile(|x: &Tensor| {
        w.set_grad(None);
        run(x)
    });
    for _ in 0..3 {
        let compiled = step.call(&x);
        assert!(compiled.allclose(&eager, 1e-5, 1e-6), "compiled {compiled} vs eager {eager}");
    }
}
