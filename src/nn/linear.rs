//! `Linear` and `Identity` (PyTorch's `torch.nn.modules.linear`).

use super::functional as F;
use super::init::{kaiming_uniform_, uniform_, FanMode, Nonlinearity};
use super::repr::py_bool;
use crate::nn::Module;
use crate::Tensor;

/// `y = x·Wᵀ + b` with `W: (out_features, in_features)`, initialised as PyTorch does:
/// kaiming-uniform with a = √5 (so U(±1/√in)) for the weight and U(±1/√in) for the bias.
#[derive(crate::nn::Module)]
#[module(extra_repr = "describe")]
pub struct Linear {
    /// The weight, `(out_features, in_features)`.
    pub weight: Tensor,
    /// The bias, `(out_features)`, unless built without one.
    pub bias: Option<Tensor>,
    /// Size of each input sample.
    pub in_features: usize,
    /// Size of each output sample.
    pub out_features: usize,
}

impl Linear {
    /// A linear layer with a bias (`nn.Linear(in_features, out_features)`).
    #[track_caller]
    pub fn new(in_features: usize, out_features: usize) -> Linear {
        Linear::with_bias(in_features, out_features, true)
    }

    /// A linear layer with or without a bias (`nn.Linear(in, out, bias=False)`).
    #[track_caller]
    pub fn with_bias(in_features: usize, out_features: usize, bias: bool) -> Linear {
        let weight = Tensor::empty([out_features, in_features]);
        kaiming_uniform_(&weight, Nonlinearity::LeakyRelu(5f64.sqrt()), FanMode::FanIn);
        let bias = bias.then(|| {
            let b = Tensor::empty([out_features]);
            let bound = if in_features > 0 { 1.0 / (in_features as f64).sqrt() } else { 0.0 };
            uniform_(&b, -bound, bound);
            b.requires_grad_(true)
        });
        Linear { weight: weight.requires_grad_(true), bias, in_features, out_features }
    }

    fn describe(&self) -> String {
        format!(
            "in_features={}, out_features={}, bias={}",
            self.in_features,
            self.out_features,
            py_bool(self.bias.is_some())
        )
    }
}

impl Module for Linear {
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(F::linear(input, &self.weight, self.bias.as_ref()))
    }
}

/// Returns its input unchanged (a placeholder layer).
#[derive(crate::nn::Module, Clone, Copy, Debug, Default)]
pub struct Identity;

impl Module for Identity {
    fn forward(&self, input: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(input.clone())
    }
}
