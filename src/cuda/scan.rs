//! The cumulative scans of CUDA tensors (`cumprod`, `cummax`/`cummin`, `logcumsumexp`) as scan
//! kernels from the CUDA C emitter (`kiln_codegen::cuda::scan`): the input made contiguous
//! (a copy only for views), one kernel writing the new contiguous result (and the indices).
//! Checks, result dtypes and autograd stay in `ops::scan`, shared with the CPU.

use super::{LoadedKernels, OrOp};
use crate::error::Result;
use crate::tensor::Tensor;
use kiln_codegen::cuda::{emit_scan, LoadedScan, ScanKind, ScanLines};
use kiln_runtime::cuda::CudaStorage;
use kiln_runtime::{DType, Storage};
use std::sync::Arc;

/// The `kind` kernel for `dtype` on `cuda:ordinal`: emitted, compiled and loaded once per
/// process.
#[track_caller]
fn loaded(op: &'static str, kind: ScanKind, dtype: DType, ordinal: usize) -> Result<Arc<LoadedScan>> {
    static LOADED: LoadedKernels<(ScanKind, DType, usize), LoadedScan> = LoadedKernels::new();
    LOADED.get_or_load(op, (kind, dtype, ordinal), || LoadedScan::load(&emit_scan(kind, dtype)?, ordinal))
}

/// `kind` of the CUDA tensor `t` along its dim that splits it into `lines` (`(outer, len,
/// inner)`): the values, and for `cummax`/`cummin` the int64 indices, each a new contiguous
/// tensor of `t`'s shape.
#[track_caller]
pub(crate) fn scan(op: &'static str, kind: ScanKind, t: &Tensor, lines: ScanLines) -> Result<(Tensor, Option<Tensor>)> {
    let ordinal = super::ordinal_of(t);
    let kernel = loaded(op, kind, t.dtype(), ordinal)?;
    let x = super::dense(t);
    let n = x.numel();
    let mut out = CudaStorage::uninit(op, ordinal, kind.out_dtype(t.dtype()), n).or_op(op)?;
    let mut idx =
        if kind.has_indices() { Some(CudaStorage::uninit(op, ordinal, DType::I64, n).or_op(op)?) } else { None };
    {
        let guard = x.read_storage();
        let Storage::Cuda(xs) = &*guard else { unreachable!("the tensor's device is CUDA") };
        kernel.run(xs.buffer(), lines, out.buffer_mut(), idx.as_mut().map(|s| s.buffer_mut())).or_op(op)?;
    }
    let tensor = |s: CudaStorage| Tensor::from_storage(Storage::Cuda(s), t.shape());
    Ok((tensor(out), idx.map(tensor)))
}
