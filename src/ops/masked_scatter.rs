//! `masked_scatter_`/`masked_scatter`: the elements of a source, in order, written where a bool
//! mask is true, as a decomposition (the source's k-th element is gathered for the k-th true
//! position, then `where`), so autograd and `kiln::compile` see only primitive ops and the
//! mask is never read on the host inside a compiled step.
//!
//! Gradients as PyTorch's: to `self`, the output's gradient zeroed where the mask is true; to
//! the source, the output's gradient at the true positions in order, zeros after them. Eager
//! calls check that the source has at least as many elements as the mask has true entries;
//! inside `kiln::compile` that count is data the trace does not read, and a source too short
//! fails in the gather instead.

use super::binary::broadcast_all;
use crate::autograd;
use crate::error::{bail, OrPanic, Result};
use crate::Tensor;
use kiln_runtime::DType;

/// An error unless `mask` is bool, `source` has `x`'s dtype and all three share a device.
#[track_caller]
fn check_operands(op: &'static str, x: &Tensor, mask: &Tensor, source: &Tensor) -> Result<()> {
    if mask.dtype() != DType::Bool {
        bail!(
            op,
            DType,
            "{op} only supports boolean masks, but got mask with dtype {} (shape {:?})",
            mask.dtype(),
            mask.shape()
        );
    }
    if source.dtype() != x.dtype() {
        bail!(op, DType, "expected self and source to have same dtypes but got {} and {}", x.dtype(), source.dtype());
    }
    x.check_same_device(op, mask)?;
    x.check_same_device(op, source)
}

/// Eagerly (outside `kiln::compile`), an error when the mask (broadcast) has more true entries
/// than `source` has elements.
#[track_caller]
fn check_count(op: &'static str, mask: &Tensor, source: &Tensor) -> Result<()> {
    if crate::capture::is_active() {
        return Ok(());
    }
    let ones = mask.try_sum()?.item::<i64>();
    if ones > source.numel() as i64 {
        bail!(
            op,
            Value,
            "Number of elements of source < number of ones in mask ({} < {ones}; source shape {:?}, mask shape {:?})",
            source.numel(),
            source.shape(),
            mask.shape()
        );
    }
    Ok(())
}

/// `x` (broadcast with `mask`) with the elements of `source` written, in order, where `mask` is
/// true.
#[track_caller]
fn masked_scatter_out(op: &'static str, x: &Tensor, mask: &Tensor, source: &Tensor) -> Result<Tensor> {
    check_operands(op, x, mask, source)?;
    let shape = broadcast_all(op, &[x.shape(), mask.shape()])?;
    let mask = mask.try_broadcast_to(&shape)?;
    check_count(op, &mask, source)?;
    let flat = source.try_reshape([-1])?;
    // An empty source is gathered from a zero it never shows (no position is true).
    let flat = if flat.numel() == 0 { Tensor::zeros_opts([1], x.dtype(), x.device()) } else { flat };
    let mask_flat = mask.try_reshape([-1])?;
    let rank = mask_flat.try_to_dtype(DType::I64)?.try_cumsum(0)? - 1;
    let index = Tensor::where_cond(&mask_flat, &rank, 0i64);
    let shape: Vec<i64> = shape.iter().map(|&n| n as i64).collect();
    let picked = flat.try_gather(0, &index)?.try_reshape(&shape)?;
    Ok(Tensor::where_cond(&mask, &picked, x))
}

impl Tensor {
    /// Writes the elements of `source`, in row-major order, where `mask` (bool, broadcast to this
    /// tensor's shape) is true, in place (`x.masked_scatter_(mask, source)`); `source` has this
    /// tensor's dtype and at least as many elements as `mask` has true entries (any shape).
    #[track_caller]
    pub fn masked_scatter_(&self, mask: &Tensor, source: &Tensor) -> &Tensor {
        self.try_masked_scatter_(mask, source).or_panic()
    }

    /// [`Tensor::masked_scatter_`] returning an error for a non-bool mask, a mask that does not
    /// broadcast to this tensor, a source of another dtype or too few source elements (nothing
    /// is written then).
    #[track_caller]
    pub fn try_masked_scatter_(&self, mask: &Tensor, source: &Tensor) -> Result<&Tensor> {
        const OP: &str = "masked_scatter_";
        if broadcast_all(OP, &[self.shape(), mask.shape()])?.as_slice() != self.shape() {
            bail!(
                OP,
                Shape,
                "the mask of shape {:?} does not broadcast to the shape {:?} written in place",
                mask.shape(),
                self.shape()
            );
        }
        if autograd::is_recording(&[self, source]) {
            autograd::inplace(OP, self, |old| masked_scatter_out(OP, old, mask, source))?;
        } else {
            self.try_copy_(&masked_scatter_out(OP, self, mask, source)?)?;
        }
        Ok(self)
    }

    /// Out-of-place [`Tensor::masked_scatter_`] (`x.masked_scatter(mask, source)`): the result
    /// has the broadcast shape of this tensor and `mask`.
    #[track_caller]
    pub fn masked_scatter(&self, mask: &Tensor, source: &Tensor) -> Tensor {
        self.try_masked_scatter(mask, source).or_panic()
    }

    /// [`Tensor::masked_scatter`] returning an error for a non-bool mask, shapes that do not
    /// broadcast, a source of another dtype or too few source elements.
    #[track_caller]
    pub fn try_masked_scatter(&self, mask: &Tensor, source: &Tensor) -> Result<Tensor> {
        masked_scatter_out("masked_scatter", self, mask, source)
    }
}
