//! `Bilinear` (PyTorch's `torch.nn.Bilinear`): `y = x1ᵀ·A·x2 + b`.

use super::functional as F;
use super::init::uniform_;
use super::repr::py_bool;
use crate::nn::Module;
use crate::Tensor;

/// `y_o = Σ_ij x1_i · A_oij · x2_j + b_o` with `A: (out_features, in1_features, in2_features)`,
/// initialised as PyTorch does: weight and bias U(±1/√in1_features).
#[derive(crate::nn::Module)]
#[module(extra_repr = "describe")]
pub struct Bilinear {
    /// The weight, `(out_features, in1_features, in2_features)`.
    pub weight: Tensor,
    /// The bias, `(out_features)`, unless built without one.
    pub bias: Option<Tensor>,
}

impl Bilinear {
    /// `nn.Bilinear(in1_features, in2_features, out_features)`, with a bias.
    pub fn new(in1_features: usize, in2_features: usize, out_features: usize) -> Bilinear {
        Bilinear::with_bias(in1_features, in2_features, out_features, true)
    }

    /// `nn.Bilinear(in1, in2, out, bias=...)`.
    pub fn with_bias(in1_features: usize, in2_features: usize, out_features: usize, bias: bool) -> Bilinear {
        let bound = if in1_features > 0 { 1.0 / (in1_features as f64).sqrt() } else { 0.0 };
        let param = |shape: &[usize]| {
            let t = Tensor::empty(shape);
            uniform_(&t, -bound, bound);
            t.requires_grad_(true)
        };
        let weight = param(&[out_features, in1_features, in2_features]);
        Bilinear { weight, bias: bias.then(|| param(&[out_features])) }
    }

    /// The two inputs `(*, in1_features)` and `(*, in2_features)` mapped to `(*, out_features)`
    /// (PyTorch's `bilinear(input1, input2)`: a `Module` has one input).
    #[track_caller]
    pub fn forward_with(&self, input1: &Tensor, input2: &Tensor) -> Tensor {
        F::bilinear(input1, input2, &self.weight, self.bias.as_ref())
    }

    fn describe(&self) -> String {
        let s = self.weight.shape();
        format!(
            "in1_features={}, in2_features={}, out_features={}, bias={}",
            s[1],
            s[2],
            s[0],
            py_bool(self.bias.is_some())
        )
    }
}

impl Module for Bilinear {
    /// Panics: a bilinear layer takes two inputs (call [`Bilinear::forward_with`]), as calling
    /// `nn.Bilinear` with one raises in PyTorch.
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        crate::error::fail(
            "Bilinear",
            crate::ErrorKind::Value,
            format!(
                "Bilinear takes two inputs: call forward_with(&input1, &input2) (got one input of shape {:?})",
                input.shape()
            ),
        )
    }
}
