//! Binary elementwise ops (in progress).

use crate::scalar::Scalar;
use crate::tensor::Tensor;

/// The right-hand operand of a binary op: a tensor or a Rust number.
#[derive(Clone, Debug)]
pub enum Rhs {
    /// A tensor operand (broadcast against the other).
    Tensor(Tensor),
    /// A Rust number: its category takes part in type promotion, its width does not.
    Scalar(Scalar),
}
