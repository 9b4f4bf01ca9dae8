//! `CosineSimilarity` (PyTorch's `torch.nn.modules.distance`).

use super::functional as F;
use crate::error::Result;
use crate::Tensor;

/// The cosine similarity of two inputs along `dim` (`nn.CosineSimilarity(dim=1, eps=1e-8)`):
/// see [`F::cosine_similarity`]. Like the losses, it takes two tensors, so its `forward` is
/// its own method, not `Module::forward`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CosineSimilarity {
    /// The dim the vectors lie along.
    pub dim: i64,
    /// The smallest norm divided by.
    pub eps: f64,
}

impl CosineSimilarity {
    /// `nn.CosineSimilarity(dim, eps)`.
    pub fn new(dim: i64, eps: f64) -> CosineSimilarity {
        CosineSimilarity { dim, eps }
    }

    /// The similarity of `x1` and `x2` along the dim.
    #[track_caller]
    pub fn forward(&self, x1: &Tensor, x2: &Tensor) -> Tensor {
        F::cosine_similarity(x1, x2, self.dim, self.eps)
    }

    /// [`CosineSimilarity::forward`] returning an error.
    #[track_caller]
    pub fn try_forward(&self, x1: &Tensor, x2: &Tensor) -> Result<Tensor> {
        F::try_cosine_similarity(x1, x2, self.dim, self.eps)
    }
}

impl Default for CosineSimilarity {
    /// `nn.CosineSimilarity()`: dim 1, eps 1e-8.
    fn default() -> CosineSimilarity {
        CosineSimilarity::new(1, 1e-8)
    }
}
