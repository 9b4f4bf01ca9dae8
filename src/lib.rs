//! # kiln
//!
//! A deep-learning framework in Rust with PyTorch's define-by-run API: tensors with
//! shared-storage views, and (in coming work) autograd, `nn`, `optim`, data loading, CUDA and a
//! graph compiler underneath (`kiln::compile`).
//!
//! ## Deliberate differences from PyTorch
//! - `Tensor: Clone` copies the *handle* (both share storage, like Python assignment);
//!   PyTorch's data-copying `x.clone()` is [`Tensor::deep_clone`].
//! - Dims are `i64` (negative counts from the end); shapes given to constructors are `&[usize]`,
//!   shapes given to `view`/`reshape`/`expand` are `&[i64]` so that -1 can be used.
//! - Python's `x[1, :, 2:4]` is `x.i((1, .., 2..4))`.
//! - Errors panic with `op: message (at file:line)`; the `try_` forms return [`Result`].

pub mod error;
pub mod ops;
pub mod scalar;
pub mod tensor;

pub use error::{Error, ErrorKind, Result};
pub use kiln_runtime::{DType, Device};
pub use scalar::Scalar;
pub use tensor::Tensor;

/// What most programs need: `use kiln::prelude::*;`.
pub mod prelude {
    pub use crate::{DType, Device, Scalar, Tensor};
}
