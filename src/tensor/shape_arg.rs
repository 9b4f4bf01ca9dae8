//! The one shape argument every op takes: `&[5, 3]`, `[5, 3]`, `(5, 3)`, `vec![5, 3]`, `5`,
//! `()` or another tensor's `x.shape()`, in `usize`, `i64` or `i32` (or a `SmallVec<[_; 6]>` of them).
//!
//! PyTorch takes a shape as a list, a tuple, varargs or a `torch.Size`, and so do kiln's
//! creations (`Tensor::zeros`), views (`view`, `reshape`, `expand`, `unflatten`), `repeat`,
//! `tile`, `broadcast_to` and `LayerNorm::new`, through [`IntoShape`]. An integer literal with
//! no other type falls back to `i32`, so `Tensor::zeros(&[5, 3])` and `x.view(&[-1, 8])` need no
//! suffix; a size past `i32::MAX` written as a literal needs one (`&[1usize << 40]`), and the
//! compiler refuses it without (`overflowing_literals`, `arithmetic_overflow`) rather than
//! wrapping it. `-1` means "infer this size" only where the op says so (`view`, `reshape`,
//! `unflatten`; "keep this size" in `expand`); anywhere else a negative size is a
//! [`ErrorKind::Shape`] error naming the op, the shape and the caller's line.

use crate::error::{Error, ErrorKind, Result};
use smallvec::SmallVec;

/// Sizes as the caller wrote them, `-1` included: an `i128` holds every `usize` and `i64`
/// exactly, so an error names the shape the caller passed.
pub type ShapeDims = SmallVec<[i128; 6]>;

/// A shape argument: a slice, array, `Vec` or tuple of `usize`, `i64` or `i32`, one integer
/// for a 1-D shape, or `()` for a 0-dim tensor (see the [module docs](self)).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a shape",
    label = "a shape is `&[5, 3]`, `[5, 3]`, `(5, 3)`, `vec![5, 3]`, `5`, `()` or `x.shape()`, in usize, i64 or i32"
)]
pub trait IntoShape {
    /// The sizes, exactly as written.
    fn into_dims(self) -> ShapeDims;
}

macro_rules! shape_impls {
    ($($t:ty)*) => {$(
        impl IntoShape for &[$t] {
            fn into_dims(self) -> ShapeDims {
                self.iter().map(|&v| v as i128).collect()
            }
        }
        impl<const N: usize> IntoShape for [$t; N] {
            fn into_dims(self) -> ShapeDims {
                self.as_slice().into_dims()
            }
        }
        impl IntoShape for Vec<$t> {
            fn into_dims(self) -> ShapeDims {
                self.as_slice().into_dims()
            }
        }
        impl IntoShape for SmallVec<[$t; 6]> {
            fn into_dims(self) -> ShapeDims {
                self.as_slice().into_dims()
            }
        }
        impl IntoShape for $t {
            fn into_dims(self) -> ShapeDims {
                SmallVec::from_elem(self as i128, 1)
            }
        }
        impl IntoShape for ($t, $t) {
            fn into_dims(self) -> ShapeDims {
                [self.0, self.1].into_dims()
            }
        }
        impl IntoShape for ($t, $t, $t) {
            fn into_dims(self) -> ShapeDims {
                [self.0, self.1, self.2].into_dims()
            }
        }
        impl IntoShape for ($t, $t, $t, $t) {
            fn into_dims(self) -> ShapeDims {
                [self.0, self.1, self.2, self.3].into_dims()
            }
        }
        impl IntoShape for ($t, $t, $t, $t, $t) {
            fn into_dims(self) -> ShapeDims {
                [self.0, self.1, self.2, self.3, self.4].into_dims()
            }
        }
    )*};
}

shape_impls!(usize i64 i32);

/// A reference to any shape (`&[5, 3]`, `&v`, `&x.shape()`).
impl<S: IntoShape + Clone> IntoShape for &S {
    fn into_dims(self) -> ShapeDims {
        self.clone().into_dims()
    }
}

impl IntoShape for () {
    fn into_dims(self) -> ShapeDims {
        SmallVec::new()
    }
}

/// The sizes of `shape` for an op that makes a tensor of exactly that shape: a negative size
/// (`-1` included) is an error of `op` naming the shape.
#[track_caller]
pub(crate) fn sizes(op: &'static str, shape: impl IntoShape) -> Result<SmallVec<[usize; 6]>> {
    non_negative(op, &shape.into_dims())
}

/// The sizes of `shape` for a view that may hold `-1` (`view`, `reshape`, `expand`,
/// `unflatten`), as `i64`; a size past `i64::MAX` saturates (a view that large is refused as
/// having too many elements either way).
pub(crate) fn signed_sizes(shape: impl IntoShape) -> SmallVec<[i64; 6]> {
    shape.into_dims().iter().map(|&d| d.clamp(i64::MIN as i128, i64::MAX as i128) as i64).collect()
}

#[track_caller]
fn non_negative(op: &'static str, dims: &[i128]) -> Result<SmallVec<[usize; 6]>> {
    match dims.iter().find(|&&d| d < 0) {
        Some(d) => Err(Error::new(op, ErrorKind::Shape, format!("negative size {d} in shape {dims:?}"))),
        None => Ok(dims.iter().map(|&d| d as usize).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims(s: impl IntoShape) -> Vec<i128> {
        s.into_dims().to_vec()
    }

    #[test]
    // `&[5, 3]` is a spelling users write; clippy would drop its `&`.
    #[allow(clippy::needless_borrows_for_generic_args)]
    fn every_spelling_of_a_shape_gives_the_same_sizes() {
        let v = vec![5usize, 3];
        let from_tensor: &[usize] = &v;
        for d in [dims(&[5, 3]), dims([5, 3]), dims((5, 3)), dims(vec![5i64, 3]), dims(&v), dims(from_tensor)] {
            assert_eq!(d, [5, 3]);
        }
        assert_eq!(dims(7), [7]);
        assert_eq!(dims(()), [] as [i128; 0]);
        assert_eq!(dims((1, 2, 3, 4, 5)), [1, 2, 3, 4, 5]);
        assert_eq!(dims([-1, 8]), [-1, 8]);
        assert_eq!(dims([usize::MAX]), [usize::MAX as i128], "every usize is kept exactly");
        assert_eq!(signed_sizes([usize::MAX]).as_slice(), [i64::MAX], "a view's sizes saturate to i64");
    }

    #[test]
    fn negative_sizes_are_errors_naming_op_and_shape_at_the_callers_line() {
        assert_eq!(sizes("zeros", (2, 3)).unwrap().as_slice(), [2, 3]);
        let e = sizes("zeros", [-1, 3]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Shape);
        assert_eq!(e.message, "negative size -1 in shape [-1, 3]");
        assert_eq!(e.location.line(), line!() - 3, "the caller's line");
    }
}
