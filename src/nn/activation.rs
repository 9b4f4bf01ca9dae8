//! Activation modules (`nn.ReLU()`, `nn.GELU()`, `nn.Softmax(dim=1)`, …).

use super::functional as F;
use super::repr::py_float;
use crate::nn::Module;
use crate::Tensor;

/// Defines a parameterless activation module that applies `$apply` to its input.
macro_rules! activation {
    ($(#[$doc:meta])* $name:ident, |$x:ident| $apply:expr) => {
        $(#[$doc])*
        #[derive(crate::nn::Module, Clone, Copy, Debug, Default)]
        pub struct $name;

        impl Module for $name {
            #[track_caller]
            fn forward(&self, $x: &Tensor) -> Tensor {
                $apply
            }
        }
    };
}

activation!(
    /// `max(x, 0)`.
    ReLU, |x| x.relu()
);
activation!(
    /// `x·sigmoid(x)`.
    SiLU, |x| x.silu()
);
activation!(
    /// Logistic sigmoid.
    Sigmoid, |x| x.sigmoid()
);
activation!(
    /// Hyperbolic tangent.
    Tanh, |x| x.tanh()
);

/// `x` for positive `x`, `negative_slope · x` otherwise (default slope 0.01).
#[derive(crate::nn::Module, Clone, Copy, Debug)]
#[module(extra_repr = "describe")]
pub struct LeakyReLU {
    /// Slope for negative inputs.
    pub negative_slope: f64,
}

impl LeakyReLU {
    /// `nn.LeakyReLU(negative_slope)`.
    pub fn new(negative_slope: f64) -> LeakyReLU {
        LeakyReLU { negative_slope }
    }

    fn describe(&self) -> String {
        format!("negative_slope={}", py_float(self.negative_slope))
    }
}

impl Default for LeakyReLU {
    fn default() -> LeakyReLU {
        LeakyReLU::new(0.01)
    }
}

impl Module for LeakyReLU {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        F::leaky_relu(x, self.negative_slope)
    }
}

/// GELU, exact (`nn.GELU()`) or with the tanh approximation (`nn.GELU(approximate='tanh')`).
#[derive(crate::nn::Module, Clone, Copy, Debug, Default)]
#[module(extra_repr = "describe")]
pub struct GELU {
    /// Whether to use the tanh approximation.
    pub tanh_approximation: bool,
}

impl GELU {
    /// The exact GELU.
    pub fn new() -> GELU {
        GELU { tanh_approximation: false }
    }

    /// The tanh approximation.
    pub fn tanh() -> GELU {
        GELU { tanh_approximation: true }
    }

    fn describe(&self) -> String {
        format!("approximate='{}'", if self.tanh_approximation { "tanh" } else { "none" })
    }
}

impl Module for GELU {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        if self.tanh_approximation {
            x.gelu_tanh()
        } else {
            x.gelu()
        }
    }
}

/// Softmax over `dim` (`nn.Softmax(dim=1)`).
#[derive(crate::nn::Module, Clone, Copy, Debug)]
#[module(extra_repr = "describe")]
pub struct Softmax {
    /// The dim the probabilities sum to one over.
    pub dim: i64,
}

impl Softmax {
    /// `nn.Softmax(dim)`.
    pub fn new(dim: i64) -> Softmax {
        Softmax { dim }
    }

    fn describe(&self) -> String {
        format!("dim={}", self.dim)
    }
}

impl Module for Softmax {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        x.softmax(self.dim)
    }
}

/// Log-softmax over `dim` (`nn.LogSoftmax(dim=1)`).
#[derive(crate::nn::Module, Clone, Copy, Debug)]
#[module(extra_repr = "describe")]
pub struct LogSoftmax {
    /// The dim normalised over.
    pub dim: i64,
}

impl LogSoftmax {
    /// `nn.LogSoftmax(dim)`.
    pub fn new(dim: i64) -> LogSoftmax {
        LogSoftmax { dim }
    }

    fn describe(&self) -> String {
        format!("dim={}", self.dim)
    }
}

impl Module for LogSoftmax {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        x.log_softmax(self.dim)
    }
}
