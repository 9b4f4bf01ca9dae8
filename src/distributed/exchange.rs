//! Tensors on the wire: the one primitive every collective uses ([`exchange`]: send from a
//! tensor's elements, receive into a fresh buffer on the same device), staging for tensors the
//! transport cannot read in place, and writing results back. Host buffers for MPI, device
//! buffers of the rank's GPU for NCCL.

use super::transport::{Call, Wire};
use super::work::{any_storage_ptr, storage_ptr, storage_ptr_mut, SendBuf, Work};
use crate::cuda::OrOp;
use crate::error::{Error, ErrorKind, Result};
use crate::tensor::Tensor;
use kiln_runtime::cuda::CudaStorage;
use kiln_runtime::{CpuStorage, DType, Device, Storage};
use std::ffi::c_void;

/// Whether the transport can send straight from `t`'s storage: contiguous, and of a dtype it
/// moves natively.
pub(crate) fn sendable(t: &Tensor) -> bool {
    t.is_contiguous() && Wire::native(t.dtype(), t.device()).is_some()
}

/// A fresh contiguous tensor of wire elements holding `t`'s values (F16/BF16 widened to F32 on
/// the CPU),
/// sharing storage with nothing.
pub(crate) fn staged(t: &Tensor) -> Tensor {
    let _off = crate::no_grad_guard();
    let s = t.detach().to_dtype(Wire::of(t.dtype(), t.device()).dtype()).contiguous();
    if s.shares_storage_with(t) || s.storage_offset() != 0 || s.storage_len() != s.numel() {
        s.deep_clone()
    } else {
        s
    }
}

/// Runs `call` with `t` (contiguous, native wire dtype) as the send buffer, receiving
/// `recv_len` elements into a fresh storage on `t`'s device, which it returns. `t`'s storage is
/// locked exclusively while the transport reads it. If the collective never completes, a CPU
/// `t` gets a copy of its storage and the original is leaked (the library may still read it);
/// a CUDA `t` keeps its storage: NCCL runs on the device's one stream, so the block can only be
/// reused by work queued after the collective.
#[track_caller]
pub(crate) fn exchange(op: &'static str, t: &Tensor, call: Call, count: usize, recv_len: usize) -> Result<Storage> {
    let wire = Wire::native(t.dtype(), t.device()).expect("exchange: a native wire dtype");
    debug_assert!(t.is_contiguous());
    let mut guard = t.lock_storage_exclusive();
    let base = any_storage_ptr(&mut guard);
    // SAFETY (of the offset): `t` is contiguous over `numel` elements from its offset, inside
    // the storage; `wrapping_add` because a device address is not a host allocation.
    let send = (base as *const u8).wrapping_add(t.storage_offset() * t.element_size()) as *const c_void;
    let recv = if recv_len > 0 { Some(fresh(op, t.device(), wire.dtype(), recv_len)?) } else { None };
    // SAFETY: the exclusive guard keeps `send` alive and unwritten until `wait` returns; on an
    // error a CPU storage is replaced and the original leaked below.
    let work = unsafe { Work::start(op, call, wire, count, SendBuf::Borrowed(send), recv) }?;
    match work.wait() {
        Ok(recv) => match recv {
            Some(r) => Ok(r),
            None => fresh(op, t.device(), wire.dtype(), 0),
        },
        Err(e) => {
            if let Storage::Cpu(cpu) = &mut *guard {
                let copy = copy_storage(cpu);
                std::mem::forget(std::mem::replace(cpu, copy));
            }
            Err(e)
        }
    }
}

/// A storage of `len` elements of `dtype` with unspecified contents on `device`.
#[track_caller]
pub(crate) fn fresh(op: &'static str, device: Device, dtype: DType, len: usize) -> Result<Storage> {
    match device {
        Device::Cpu => Ok(Storage::Cpu(CpuStorage::uninit(dtype, len))),
        Device::Cuda(i) => Ok(Storage::Cuda(CudaStorage::uninit(op, i, dtype, len).or_op(op)?)),
    }
}

/// A byte copy of a CPU storage.
fn copy_storage(s: &CpuStorage) -> CpuStorage {
    let mut out = CpuStorage::uninit(s.dtype(), s.len());
    // SAFETY: both hold `s.nbytes()` bytes in distinct allocations; `s` is only read.
    unsafe {
        std::ptr::copy_nonoverlapping(storage_ptr(s) as *const u8, storage_ptr_mut(&mut out) as *mut u8, s.nbytes())
    };
    out
}

/// Writes `values` (a fresh tensor of `t`'s shape that nothing else references) into `t`:
/// its storage swapped in when `t` is all of its own storage and of the same dtype, else
/// copied (and cast) into `t`'s elements.
#[track_caller]
pub(crate) fn write_back(t: &Tensor, values: Tensor) {
    let whole = t.is_contiguous() && t.storage_offset() == 0 && t.storage_len() == t.numel();
    if whole && values.dtype() == t.dtype() && values.is_contiguous() && values.storage_len() == t.numel() {
        let storage = values.cell().take();
        *t.write_storage() = storage;
        return;
    }
    let _off = crate::no_grad_guard();
    t.detach().copy_(&values);
}

/// A tensor over a received storage.
pub(crate) fn received(values: Storage, shape: &[usize]) -> Tensor {
    Tensor::from_storage(values, shape)
}

/// The error for a tensor on a device the group's backend does not move: names the op, the
/// backend, the device it wants, the tensor's device, and (through `#[track_caller]`) the
/// caller's line.
#[track_caller]
pub(crate) fn wrong_device(op: &'static str, backend: super::Backend, want: Device, got: Device) -> Error {
    let how = match want {
        Device::Cpu => "CPU tensors only (use Backend::Nccl for CUDA tensors)".to_string(),
        Device::Cuda(i) => format!("CUDA tensors on this rank's device cuda:{i} only (LOCAL_RANK picks it)"),
    };
    Error::new(
        op,
        ErrorKind::Device,
        format!("the {backend} backend moves {how}; this tensor is on {got} (move it with .to(&Device::{want:?}))"),
    )
}

/// Finishes a [`ReduceOp::Avg`](super::ReduceOp::Avg) the transport computed as a sum: a CPU
/// result (MPI sums) is divided by the world size; a CUDA one is already the average (NCCL's
/// `ncclAvg`).
pub(crate) fn finish_average(s: &mut Storage, world_size: usize) {
    if let Storage::Cpu(c) = s {
        divide(c, world_size as f64);
    }
}

/// Divides every element of a storage by `by` in place (`ReduceOp::Avg` after a sum; computed
/// in f64 and rounded once).
fn divide(s: &mut CpuStorage, by: f64) {
    use kiln_runtime::dtype::Element;
    kiln_runtime::match_cpu!(s, |b: T| b.iter_mut().for_each(|x| *x = T::from_f64(x.to_f64() / by)))
}
