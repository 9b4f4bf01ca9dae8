//! `nonzero` and `masked_select` on CUDA tensors: the compaction kernels of
//! `kiln_codegen::cuda::compact` (a count per chunk, an exclusive scan, a write pass) turn a
//! contiguous bool buffer into the coordinates of its set elements in row-major order; the
//! count is read back to size the output (a sync, as in PyTorch).

use super::{dense, ordinal_of, LoadedKernels, OrOp};
use crate::error::Result;
use crate::tensor::Tensor;
use kiln_codegen::cuda::{compact_chunks, LoadedCompact};
use kiln_runtime::cuda::CudaStorage;
use kiln_runtime::{DType, Device, Storage};
use std::sync::Arc;

/// The compaction kernels on `cuda:ordinal`: compiled and loaded once per process.
#[track_caller]
fn loaded(op: &'static str, ordinal: usize) -> Result<Arc<LoadedCompact>> {
    static LOADED: LoadedKernels<usize, LoadedCompact> = LoadedKernels::new();
    LOADED.get_or_load(op, ordinal, || LoadedCompact::load(ordinal))
}

/// The coordinates over `sizes` of the true elements of the contiguous CUDA bool tensor
/// `flags` (of `sizes`' element count), in row-major order: int64 `[count, sizes.len()]`.
#[track_caller]
fn coordinates(op: &'static str, flags: &Tensor, sizes: &[usize]) -> Result<Tensor> {
    let ordinal = ordinal_of(flags);
    let (n, ndim) = (flags.numel(), sizes.len());
    let chunks = compact_chunks(n);
    let kernels = loaded(op, ordinal)?;
    let mut counts = CudaStorage::uninit(op, ordinal, DType::I64, chunks + 1).or_op(op)?;
    {
        let guard = flags.read_storage();
        let Storage::Cuda(sf) = &*guard else { unreachable!("the tensor's device is CUDA") };
        kernels.offsets(sf.buffer(), counts.buffer_mut(), n).or_op(op)?;
    }
    let counts = Tensor::from_storage(Storage::Cuda(counts), &[chunks + 1]);
    let total = counts.try_narrow(0, chunks as i64, 1)?.try_item::<i64>()? as usize;
    let host_sizes: Vec<i64> = sizes.iter().map(|&s| s as i64).collect();
    let sizes_t = super::to_device(op, &Tensor::from_vec(host_sizes, [ndim]), Device::Cuda(ordinal))?;
    let mut out = CudaStorage::uninit(op, ordinal, DType::I64, total * ndim).or_op(op)?;
    {
        let operands = [flags.clone(), counts, sizes_t];
        let (guards, at) = Tensor::read_storages(&operands);
        let (Storage::Cuda(sf), Storage::Cuda(sc), Storage::Cuda(ss)) =
            (&*guards[at[0]], &*guards[at[1]], &*guards[at[2]])
        else {
            unreachable!("every operand is on the device")
        };
        kernels.write(sf.buffer(), sc.buffer(), (ss.buffer(), ndim), out.buffer_mut(), n, total).or_op(op)?;
    }
    Ok(Tensor::from_storage(Storage::Cuda(out), &[total, ndim]))
}

/// The coordinates of the nonzero elements of the CUDA tensor `x` (NaN counts as nonzero):
/// int64 `[count, x.dim()]`, row-major order.
#[track_caller]
pub(crate) fn nonzero(op: &'static str, x: &Tensor) -> Result<Tensor> {
    let _off = crate::autograd::no_grad_guard();
    let flags = if x.dtype() == DType::Bool { x.clone() } else { x.try_ne(0)? };
    coordinates(op, &dense(&flags), x.shape())
}

/// The elements of the CUDA tensor `x` where the bool `mask` is true, both broadcast to
/// `shape`, as a 1-D tensor in row-major order (no autograd: the op layer records it).
#[track_caller]
pub(crate) fn masked_select(op: &'static str, x: &Tensor, mask: &Tensor, shape: &[usize]) -> Result<Tensor> {
    let _off = crate::autograd::no_grad_guard();
    let n = shape.iter().product::<usize>();
    let flags = dense(&mask.try_broadcast_to(shape)?);
    let positions = coordinates(op, &flags, &[n])?.reshape([-1]);
    let flat = dense(&x.try_broadcast_to(shape)?).reshape([n as i64]);
    let count = positions.numel();
    super::index::gather(op, &flat, 0, &positions, positions.layout(), &[count], &[count])
}
