//! Host↔device copies of tensors.

use super::OrOp;
use crate::error::Result;
use crate::tensor::Tensor;
use kiln_runtime::cuda::CudaStorage;
use kiln_runtime::{CpuStorage, Device, Storage};

/// A contiguous tensor of `shape` on `cuda:ordinal` holding a copy of `host`.
#[track_caller]
pub(crate) fn upload(op: &'static str, host: &CpuStorage, shape: &[usize], ordinal: usize) -> Result<Tensor> {
    let s = CudaStorage::from_cpu(op, host, ordinal).or_op(op)?;
    Ok(Tensor::from_storage(Storage::Cuda(s), shape))
}

/// `x`'s values in a new contiguous tensor on `device` (no autograd history). A CUDA view is
/// made contiguous on its device first; a move between two CUDA devices goes through the host.
#[track_caller]
pub(crate) fn to_device(op: &'static str, x: &Tensor, device: Device) -> Result<Tensor> {
    let _off = crate::autograd::no_grad();
    if x.device().is_cpu() {
        let Device::Cuda(i) = device else { return Ok(x.clone()) };
        let host = x.with_cpu(op, |s, l| crate::tensor::cast_storage(s, l, x.dtype()))?;
        return upload(op, &host, x.shape(), i);
    }
    let whole = x.is_contiguous() && x.storage_offset() == 0 && x.numel() == x.storage_len();
    let x = if whole { x.clone() } else { super::map(op, kiln_codegen::cuda::EagerOp::Copy, &[(x, x.layout().clone())], x.shape(), x.dtype(), x.dtype())? };
    let host = {
        let guard = x.read_storage();
        let Storage::Cuda(s) = &*guard else { unreachable!("the tensor's device is CUDA") };
        s.to_cpu(op).or_op(op)?
    };
    match device {
        Device::Cpu => Ok(Tensor::from_cpu_storage(host, x.shape())),
        Device::Cuda(i) => upload(op, &host, x.shape(), i),
    }
}
