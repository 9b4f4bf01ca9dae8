//! 2-d pooling of CUDA tensors (`max_pool2d`, `avg_pool2d`, `adaptive_avg_pool2d` and their
//! gradients) as kernels from
//! the CUDA C emitter (`kiln_codegen::cuda::pool`), over contiguous `(planes, H, W)` memory.
//!
//! The op layer (`nn::functional::pool`) keeps its checks and geometry and widens f16/bf16 to
//! f32 first; here operands are made contiguous (a copy only for views) and one kernel writes
//! each result. The gradients gather rather than scatter, so they are deterministic.

use super::{LoadedKernels, OrOp};
use crate::error::Result;
use crate::tensor::Tensor;
use kiln_codegen::cuda::{emit_pool, LoadedPool, PoolKind};
use kiln_runtime::cpu::pool::{AvgMode, PoolGeom};
use kiln_runtime::cuda::{CudaBuffer, CudaStorage};
use kiln_runtime::{DType, Storage};
use std::sync::Arc;

/// The `kind` kernel for `dtype` on `cuda:ordinal`: emitted, compiled and loaded once per
/// process.
#[track_caller]
fn loaded(op: &'static str, kind: PoolKind, dtype: DType, ordinal: usize) -> Result<Arc<LoadedPool>> {
    static LOADED: LoadedKernels<(PoolKind, DType, usize), LoadedPool> = LoadedKernels::new();
    LOADED.get_or_load(op, (kind, dtype, ordinal), || LoadedPool::load(&emit_pool(kind, dtype)?, ordinal))
}

/// Runs `kind` on `inputs` (CUDA tensors of one device, made contiguous here) into new
/// outputs of `outputs` (shape, dtype), returned in that order.
#[track_caller]
fn run(
    op: &'static str,
    kind: PoolKind,
    g: &PoolGeom,
    mode: AvgMode,
    inputs: &[&Tensor],
    outputs: &[(&[usize], DType)],
) -> Result<Vec<Tensor>> {
    let ordinal = super::ordinal_of(inputs[0]);
    let dtype = inputs[0].dtype();
    for t in inputs {
        inputs[0].check_same_device(op, t)?;
    }
    let kernel = loaded(op, kind, dtype, ordinal)?;
    let contiguous: Vec<Tensor> = inputs.iter().map(|t| super::dense(t)).collect();
    let mut outs = outputs
        .iter()
        .map(|&(shape, d)| CudaStorage::uninit(op, ordinal, d, kiln_runtime::layout::numel(shape)).or_op(op))
        .collect::<Result<Vec<CudaStorage>>>()?;
    {
        let (guards, at) = Tensor::read_storages(&contiguous);
        let bufs: Vec<&CudaBuffer> = at
            .iter()
            .map(|&i| match &*guards[i] {
                Storage::Cuda(s) => s.buffer(),
                Storage::Cpu(_) => unreachable!("devices were checked"),
            })
            .collect();
        let mut out_bufs: Vec<&mut CudaBuffer> = outs.iter_mut().map(|s| s.buffer_mut()).collect();
        kernel.run(g, mode, &bufs, &mut out_bufs).or_op(op)?;
    }
    Ok(outs.into_iter().zip(outputs).map(|(s, &(shape, _))| Tensor::from_storage(Storage::Cuda(s), shape)).collect())
}

/// The average pooling mode the max and adaptive pooling kernels ignore.
pub(crate) const NO_MODE: AvgMode = AvgMode { count_include_pad: true, divisor_override: None };

/// Max pooling of the CUDA tensor `x` (f32 or f64, `g.planes` planes): the values and the
/// int64 argmax indices within each plane, both of `shape`.
#[track_caller]
pub(crate) fn max_pool(g: &PoolGeom, x: &Tensor, shape: &[usize]) -> Result<(Tensor, Tensor)> {
    let mut r = run("max_pool2d", PoolKind::MaxForward, g, NO_MODE, &[x], &[(shape, x.dtype()), (shape, DType::I64)])?;
    let idx = r.pop().expect("two outputs");
    Ok((r.pop().expect("two outputs"), idx))
}

/// The gradient of max pooling: `gy` summed into each input element of `x_shape` that is its
/// window's argmax (`idx`).
#[track_caller]
pub(crate) fn max_pool_backward(g: &PoolGeom, gy: &Tensor, idx: &Tensor, x_shape: &[usize]) -> Result<Tensor> {
    let op = "max_pool2d_backward";
    Ok(run(op, PoolKind::MaxBackward, g, NO_MODE, &[gy, idx], &[(x_shape, gy.dtype())])?.remove(0))
}

/// Average or adaptive average pooling (`kind`: `AvgForward` or `AdaptiveForward`) of the
/// CUDA tensor `t`, a result of `shape`; or its gradient (`AvgBackward`, `AdaptiveBackward`:
/// `t` is the output gradient, `shape` the input's). `mode` is read by the average kinds.
#[track_caller]
pub(crate) fn avg_pool(
    op: &'static str,
    kind: PoolKind,
    g: &PoolGeom,
    mode: AvgMode,
    t: &Tensor,
    shape: &[usize],
) -> Result<Tensor> {
    Ok(run(op, kind, g, mode, &[t], &[(shape, t.dtype())])?.remove(0))
}
