//! The checks every decomposed op's tests share: f64 finite-difference gradients of each case
//! (first and second order), and a compiled training step equal to the eager one. Loaded with
//! `#[path]` by the op test files, so the others do not compile it.

#![allow(dead_code)] // each test binary uses its own part of these helpers

use kiln::autograd::{gradcheck, gradgradcheck, GradcheckOpts};
use kiln::{DType, Tensor};

/// A gradient case: its name, the op applied to the inputs, and the inputs (f64 leaves).
pub type GradCase = (&'static str, fn(&[Tensor]) -> Tensor, Vec<Tensor>);

/// An f64 leaf of `shape` drawn uniformly from [-1, 1) (seed the generator first).
pub fn leaf(shape: &[usize]) -> Tensor {
    (Tensor::rand(shape).to_dtype(DType::F64) * 2.0 - 1.0).requires_grad_(true)
}

/// Panics unless each case passes `gradcheck` and `gradgradcheck`, naming the case.
pub fn check_gradients(cases: impl IntoIterator<Item = GradCase>) {
    let opts = GradcheckOpts::default();
    for (name, f, inputs) in cases {
        gradcheck(f, &inputs, opts).unwrap_or_else(|e| panic!("{name}: {e}"));
        gradgradcheck(f, &inputs, opts).unwrap_or_else(|e| panic!("{name} (second order): {e}"));
    }
}

/// Runs `step` (a loss of its leaves that calls `backward` itself) eagerly and under
/// `kiln::compile`, each on fresh leaf copies of `inputs`: panics unless the losses and every
/// input's gradient agree within 1e-5 relative (f32) and the compiled call broke no graph.
pub fn compiled_equals_eager(inputs: &[Tensor], step: impl Fn(&[Tensor]) -> Tensor) {
    let leaves = || inputs.iter().map(|t| t.detach().requires_grad_(true)).collect::<Vec<_>>();
    let results = |loss: Tensor, leaves: &[Tensor]| {
        let grads = leaves.iter().map(|t| t.grad().expect("every input gets a gradient"));
        std::iter::once(loss).chain(grads).collect::<Vec<_>>()
    };
    let eager_leaves = leaves();
    let eager = results(step(&eager_leaves), &eager_leaves);
    let compiled_leaves = leaves();
    let mut compiled_step = kiln::compile(|ls: &[Tensor]| step(ls));
    let compiled = results(compiled_step.call(&compiled_leaves[..]), &compiled_leaves);
    for (c, e) in compiled.iter().zip(&eager) {
        for (c, e) in c.to_vec::<f32>().iter().zip(e.to_vec::<f32>()) {
            assert!((c - e).abs() <= 1e-5 * (1.0 + e.abs()), "compiled {c}, eager {e}");
        }
    }
    assert_eq!(compiled_step.stats().graph_breaks, 0);
}
