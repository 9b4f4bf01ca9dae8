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
    let _off = crate::autograd::no_grad_guard();
    if x.device().is_cpu() {
        let Device::Cuda(i) = device else { return Ok(x.clone()) };
        let host = x.with_cpu(op, |s, l| crate::tensor::cast_storage(s, l, x.dtype()))?;
        return upload(op, &host, x.shape(), i);
    }
    let host = download(op, x, false)?;
    match device {
        Device::Cpu => Ok(Tensor::from_cpu_storage(host, x.shape())),
        Device::Cuda(i) => upload(op, &host, x.shape(), i),
    }
}

/// A contiguous host copy of CUDA tensor `x`'s values (a view is made contiguous on its
/// device first): waited for, or with `non_blocking` queued into pinned memory that waits for
/// the copy at its first host access ([`CudaStorage::to_cpu_non_blocking`]).
#[track_caller]
fn download(op: &'static str, x: &Tensor, non_blocking: bool) -> Result<CpuStorage> {
    let _off = crate::autograd::no_grad_guard();
    let x = if x.covers_storage() {
        x.clone()
    } else {
        super::map(op, kiln_codegen::cuda::EagerOp::Copy, &[(x, x.layout().clone())], x.shape(), x.dtype(), x.dtype())?
    };
    let guard = x.read_storage();
    let Storage::Cuda(s) = &*guard else { unreachable!("the tensor's device is CUDA") };
    let host = if non_blocking { s.to_cpu_non_blocking(op) } else { s.to_cpu(op) };
    host.or_op(op)
}

/// `x` on `device` as [`to_device`] makes it, except for two moves that return without
/// waiting for their copy. A pinned CPU tensor that is its whole storage goes to a CUDA device
/// straight from its pinned block: the copy is queued (`CudaBuffer::copy_from_slice` keeps the
/// block out of reuse until it ran). A CUDA tensor comes to the CPU in pinned memory that the
/// copy fills later: the first host access of the result waits for it ([`download`]).
#[track_caller]
pub(crate) fn to_device_non_blocking(op: &'static str, x: &Tensor, device: Device) -> Result<Tensor> {
    match device {
        Device::Cuda(i) if x.device().is_cpu() && x.covers_storage() => {
            let guard = x.read_storage();
            if let Storage::Cpu(s) = &*guard {
                if s.is_pinned() {
                    return upload(op, s, x.shape(), i);
                }
            }
        }
        Device::Cpu if x.device().is_cuda() => return Ok(Tensor::from_cpu_storage(download(op, x, true)?, x.shape())),
        _ => {}
    }
    to_device(op, x, device)
}
