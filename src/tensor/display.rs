//! Printing tensors. (Placeholder until PyTorch-format printing lands.)

use super::Tensor;
use std::fmt;

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor(shape={:?}, dtype={}, device={})", self.shape(), self.dtype(), self.device())
    }
}
