//! Reductions over dims and softmax along a dim on CUDA tensors, as reduction kernels from the
//! CUDA C emitter (`kiln_codegen::cuda::reduce`).
//!
//! The input is read through its view (shape, strides, offset: nothing is made contiguous):
//! its dims are split into kept and reduced dims and each set collapsed
//! ([`ReduceDims`]), and sizes, strides and offsets go to the kernel as arguments, so a kernel
//! is compiled once per (reduction, dtype, number of kept dims, number of reduced dims) and
//! device. Results are new contiguous tensors. Checks, result dtypes and autograd stay in
//! `ops::reduce` / `ops::softmax`, shared with the CPU.

use super::{LoadedKernels, OrOp};
use crate::error::Result;
use crate::tensor::Tensor;
use kiln_codegen::cuda::{emit_reduce, CudaReduce, LoadedReduce, ReduceDims};
use kiln_runtime::cuda::CudaStorage;
use kiln_runtime::{DType, Storage};
use std::sync::Arc;

/// The kernel of `kind` for `dtype` and these dims on `cuda:ordinal`: emitted, compiled and
/// loaded once per process.
#[track_caller]
fn loaded(
    name: &'static str,
    kind: CudaReduce,
    dtype: DType,
    dims: &ReduceDims,
    ordinal: usize,
) -> Result<Arc<LoadedReduce>> {
    static LOADED: LoadedKernels<(CudaReduce, DType, usize, usize, usize), LoadedReduce> = LoadedKernels::new();
    let key = (kind, dtype, dims.kept.len(), dims.red.len(), ordinal);
    if let Some(k) = LOADED.get(&key) {
        return Ok(k);
    }
    let kernel = emit_reduce(kind, dtype, dims.kept.len(), dims.red.len()).or_op(name)?;
    Ok(LOADED.insert(key, LoadedReduce::load(&kernel, ordinal).or_op(name)?))
}

/// Runs `kind` on the CUDA tensor `t` over `dims` into `out` (at `out_offset`) and `idx`.
#[track_caller]
fn launch(
    name: &'static str,
    kind: CudaReduce,
    t: &Tensor,
    dims: &ReduceDims,
    out: &mut CudaStorage,
    idx: Option<&mut CudaStorage>,
    param: i64,
) -> Result<()> {
    let kernel = loaded(name, kind, t.dtype(), dims, super::ordinal_of(t))?;
    let guard = t.read_storage();
    let Storage::Cuda(x) = &*guard else { unreachable!("the tensor's device is CUDA") };
    kernel
        .run(x.buffer(), t.layout().offset(), dims, out.buffer_mut(), 0, idx.map(|s| s.buffer_mut()), param as u64)
        .or_op(name)
}

/// `kind` over the dims of the CUDA tensor `t` flagged in `reduced`, into a new contiguous
/// tensor of `shape` (the result's shape, with or without the reduced dims kept as 1): the
/// values (the indices for argmax/argmin) and, for `max_dim`/`min_dim`, the indices. `param`
/// is `var`/`std`'s correction.
#[track_caller]
pub(crate) fn reduce(
    name: &'static str,
    kind: CudaReduce,
    t: &Tensor,
    reduced: &[bool],
    shape: &[usize],
    param: i64,
) -> Result<(Tensor, Option<Tensor>)> {
    let l = t.layout();
    let dims = ReduceDims::new(l.shape(), l.strides(), None, reduced);
    debug_assert_eq!(dims.n_out(), kiln_runtime::layout::numel(shape));
    let uninit = |dtype: DType| CudaStorage::uninit(name, super::ordinal_of(t), dtype, dims.n_out()).or_op(name);
    let mut out = uninit(kind.out_dtype(t.dtype()))?;
    let mut idx = if kind.has_indices() { Some(uninit(DType::I64)?) } else { None };
    launch(name, kind, t, &dims, &mut out, idx.as_mut(), param)?;
    let tensor = |s: CudaStorage| Tensor::from_storage(Storage::Cuda(s), shape);
    Ok((tensor(out), idx.map(tensor)))
}

/// `kind` (softmax, log-softmax or cumsum: a result shaped like the input) of the CUDA tensor
/// `t` along dim `dim`, into a new contiguous tensor.
#[track_caller]
pub(crate) fn along(name: &'static str, kind: CudaReduce, t: &Tensor, dim: usize) -> Result<Tensor> {
    debug_assert!(kind.keeps_shape());
    let l = t.layout();
    let reduced: Vec<bool> = (0..t.dim()).map(|d| d == dim).collect();
    let out_strides = kiln_runtime::layout::contiguous_strides(t.shape());
    let dims = ReduceDims::new(l.shape(), l.strides(), Some(&out_strides), &reduced);
    let mut out = CudaStorage::uninit(name, super::ordinal_of(t), kind.out_dtype(t.dtype()), t.numel()).or_op(name)?;
    launch(name, kind, t, &dims, &mut out, None, 0)?;
    Ok(Tensor::from_storage(Storage::Cuda(out), t.shape()))
}
