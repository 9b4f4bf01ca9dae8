//! `Flatten` (PyTorch's `nn.Flatten`).

use crate::nn::Module;
use crate::Tensor;

/// Flattens dims `start_dim..=end_dim` into one (defaults 1 and -1: keep the batch dim).
#[derive(crate::nn::Module, Clone, Copy, Debug)]
#[module(extra_repr = "describe")]
pub struct Flatten {
    /// First dim to flatten.
    pub start_dim: i64,
    /// Last dim to flatten.
    pub end_dim: i64,
}

impl Flatten {
    /// `nn.Flatten()`: flattens every dim after the batch dim.
    pub fn new() -> Flatten {
        Flatten { start_dim: 1, end_dim: -1 }
    }

    /// `nn.Flatten(start_dim, end_dim)`.
    pub fn with_dims(start_dim: i64, end_dim: i64) -> Flatten {
        Flatten { start_dim, end_dim }
    }

    fn describe(&self) -> String {
        format!("start_dim={}, end_dim={}", self.start_dim, self.end_dim)
    }
}

impl Default for Flatten {
    fn default() -> Flatten {
        Flatten::new()
    }
}

impl Module for Flatten {
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(input.flatten(self.start_dim, self.end_dim))
    }
}
