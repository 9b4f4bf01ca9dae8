//! `Dropout` and `Dropout2d`: random zeroing in train mode, the identity in eval mode.

use super::functional as F;
use super::repr::py_float;
use crate::nn::Module;
use crate::Tensor;

/// Checks a dropout probability.
#[track_caller]
fn check_p(layer: &'static str, p: f64) -> f64 {
    if !(0.0..=1.0).contains(&p) {
        crate::error::fail(
            layer,
            crate::ErrorKind::Value,
            format!("dropout probability has to be between 0 and 1, but got {p}"),
        );
    }
    p
}

/// Zeroes each element with probability `p` in train mode and scales the rest by `1/(1-p)`.
#[derive(crate::nn::Module, Clone, Copy, Debug)]
#[module(extra_repr = "describe")]
pub struct Dropout {
    /// The probability of zeroing an element.
    pub p: f64,
    /// Train mode flag.
    pub training: bool,
}

impl Dropout {
    /// `nn.Dropout(p)`.
    #[track_caller]
    pub fn new(p: f64) -> Dropout {
        Dropout { p: check_p("Dropout", p), training: true }
    }

    fn describe(&self) -> String {
        format!("p={}, inplace=False", py_float(self.p))
    }
}

impl Module for Dropout {
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(F::dropout(input, self.p, self.training))
    }
}

/// Zeroes whole channels of `(N, C, H, W)` inputs with probability `p` in train mode.
#[derive(crate::nn::Module, Clone, Copy, Debug)]
#[module(extra_repr = "describe")]
pub struct Dropout2d {
    /// The probability of zeroing a channel.
    pub p: f64,
    /// Train mode flag.
    pub training: bool,
}

impl Dropout2d {
    /// `nn.Dropout2d(p)`.
    #[track_caller]
    pub fn new(p: f64) -> Dropout2d {
        Dropout2d { p: check_p("Dropout2d", p), training: true }
    }

    fn describe(&self) -> String {
        format!("p={}, inplace=False", py_float(self.p))
    }
}

impl Module for Dropout2d {
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(F::dropout2d(input, self.p, self.training))
    }
}
