//! Finite differences through a module's parameters (`gradcheck`, and `gradgradcheck` for the
//! second order), in f64, for the layer tests (`tests/nn_rnn*.rs`, `tests/nn_attention.rs`).
//!
//! Use it from a test file with `#[path = "common/module_grad.rs"] mod module_grad;`.

#![allow(dead_code)] // each test binary uses its own part of these helpers

use kiln::autograd::{gradcheck, gradgradcheck, GradcheckOpts};
use kiln::nn::{FieldVisitorMut, Module};
use kiln::{DType, Tensor};
use std::cell::RefCell;

/// Replaces a module's parameters, in `named_parameters` order, with `values`.
pub struct Replace<'a>(pub &'a [Tensor], pub usize);

impl FieldVisitorMut for Replace<'_> {
    fn parameter(&mut self, _: &str, tensor: &mut Tensor) {
        *tensor = self.0[self.1].clone();
        self.1 += 1;
    }
    fn buffer(&mut self, _: &str, _: &mut Tensor) {}
    fn child(&mut self, _: &str, module: &mut dyn Module) {
        module.visit_fields_mut(self)
    }
}

/// Finite differences in f64 through every parameter and the `inputs`: `run` maps the module
/// and the inputs to one flat tensor of every result.
pub fn check_gradients<M: Module>(module: M, inputs: Vec<Tensor>, run: impl Fn(&M, &[Tensor]) -> Tensor) {
    check_order(module, inputs, run, false)
}

/// [`check_gradients`], then the second-order gradients (`gradgradcheck`) the same way.
pub fn check_second_order<M: Module>(module: M, inputs: Vec<Tensor>, run: impl Fn(&M, &[Tensor]) -> Tensor) {
    check_order(module, inputs, run, true)
}

/// [`check_gradients`], and [`check_second_order`] when `second`.
fn check_order<M: Module>(mut module: M, inputs: Vec<Tensor>, run: impl Fn(&M, &[Tensor]) -> Tensor, second: bool) {
    module.to_dtype(DType::F64);
    let params = module.parameters();
    let n_in = inputs.len();
    let mut all = inputs;
    all.extend(params.iter().map(|p| p.detach().requires_grad_(true)));
    let module = RefCell::new(module);
    let f = |args: &[Tensor]| {
        let mut m = module.borrow_mut();
        m.visit_fields_mut(&mut Replace(&args[n_in..], 0));
        run(&m, &args[..n_in])
    };
    gradcheck(f, &all, GradcheckOpts::default()).unwrap_or_else(|e| panic!("{e}"));
    if second {
        gradgradcheck(f, &all, GradcheckOpts::default()).unwrap_or_else(|e| panic!("second order: {e}"));
    }
}

/// A standard-normal f64 tensor that requires grad.
pub fn randn64(shape: &[usize]) -> Tensor {
    Tensor::randn(shape).to_dtype(DType::F64).requires_grad_(true)
}
