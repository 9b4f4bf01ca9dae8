//! `cat` and `stack` of CUDA tensors: each input copied into its slice of the output by the
//! strided copy kernel (`elementwise::copy_into`), which reads any view (transposed,
//! sliced, expanded) and converts to the output's dtype on the way.

use super::elementwise::copy_into;
use super::OrOp;
use crate::error::Result;
use crate::tensor::Tensor;
use kiln_runtime::cuda::CudaStorage;
use kiln_runtime::{DType, Storage};

/// The join of `parts` (all on `cuda:ordinal`, every dim but `d` of `shape`'s size) along dim
/// `d`, in that order: a new contiguous tensor of `shape` and `dtype`.
#[track_caller]
pub(crate) fn cat(
    op: &'static str,
    parts: &[&Tensor],
    d: usize,
    shape: &[usize],
    dtype: DType,
    ordinal: usize,
) -> Result<Tensor> {
    let storage = CudaStorage::uninit(op, ordinal, dtype, kiln_runtime::layout::numel(shape)).or_op(op)?;
    let out = Tensor::from_storage(Storage::Cuda(storage), shape);
    let mut start = 0;
    for t in parts {
        let len = t.shape()[d];
        if len > 0 {
            let slice = out.with_layout(out.layout().narrow(d, start, len));
            copy_into(op, &slice, t, t.layout().clone())?;
        }
        start += len;
    }
    Ok(out)
}
