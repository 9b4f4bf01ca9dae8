//! In-place ops under autograd: history is rebased onto the written tensor.
//!
//! `y.op_(args)` while recording runs the op out of place on a snapshot of `y` (a copy of its
//! values that carries `y`'s history), writes the result into `y`'s storage, and makes the
//! result's node `y`'s new `grad_fn`. So every in-place op reuses the backward rule of its
//! out-of-place form, and a rule that needs `y`'s old values gets them from the snapshot (as
//! PyTorch's saved `original_self`). Refused, with a clear error: in-place writes to a leaf that
//! requires grad, to a view made while recording, and to a storage such views look at.

use crate::error::{bail, Result};
use crate::tensor::Tensor;

/// Runs `out_of_place(snapshot of dst)` recorded, writes its result into `dst`, and rebases
/// `dst`'s history onto it. Call when [`super::is_recording`] holds for `dst` and the op's other
/// inputs.
#[track_caller]
pub(crate) fn inplace(
    op: &'static str,
    dst: &Tensor,
    out_of_place: impl FnOnce(&Tensor) -> Result<Tensor>,
) -> Result<()> {
    {
        let inner = dst.autograd().lock();
        if inner.leaf_requires_grad && inner.grad_fn.is_none() {
            bail!(op, Value, "a leaf tensor that requires grad (shape {:?}) is being used in an in-place operation; do it inside kiln::no_grad(|| …), or use the out-of-place form", dst.shape());
        }
        if inner.is_tracked_view {
            bail!(op, Unsupported, "in-place operation on a view (shape {:?}) of a tensor that requires grad is not supported; use the out-of-place form, or write into a clone", dst.shape());
        }
    }
    if dst.has_tracked_views() {
        bail!(op, Unsupported, "in-place operation on a tensor (shape {:?}) whose views are tracked by autograd is not supported: the views' history would become stale; use the out-of-place form", dst.shape());
    }
    let snapshot = {
        let _off = super::no_grad_guard();
        dst.deep_clone()
    };
    snapshot.autograd().set_grad_fn(dst.autograd().grad_fn());
    let out = out_of_place(&snapshot)?;
    if out.shape() != dst.shape() {
        bail!(op, Shape, "output with shape {:?} doesn't match the broadcast shape {:?}", dst.shape(), out.shape());
    }
    if !crate::ops::can_cast(out.dtype(), dst.dtype()) {
        bail!(op, DType, "result type {} can't be cast to the desired output type {}", out.dtype(), dst.dtype());
    }
    {
        let _off = super::no_grad_guard();
        dst.try_copy_(&out)?;
    }
    dst.autograd().set_grad_fn(out.autograd().grad_fn());
    Ok(())
}
