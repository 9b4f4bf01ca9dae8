//! Tensors on the wire: the one primitive every collective uses ([`exchange`]: send from a
//! tensor's elements, receive into a fresh buffer), staging for tensors the transport cannot
//! read in place, and writing results back.

use super::transport::{Call, Wire};
use super::work::{storage_ptr, storage_ptr_mut, SendBuf, Work};
use crate::error::{Error, ErrorKind, Result};
use crate::tensor::Tensor;
use kiln_runtime::CpuStorage;
use std::ffi::c_void;

/// Whether the transport can send straight from `t`'s storage: contiguous, and of a dtype it
/// moves natively.
pub(crate) fn sendable(t: &Tensor) -> bool {
    t.is_contiguous() && Wire::native(t.dtype()).is_some()
}

/// A fresh contiguous tensor of wire elements holding `t`'s values (F16/BF16 widened to F32),
/// sharing storage with nothing.
pub(crate) fn staged(t: &Tensor) -> Tensor {
    let _off = crate::no_grad();
    let s = t.detach().to_dtype(Wire::of(t.dtype()).dtype()).contiguous();
    if s.shares_storage_with(t) || s.storage_offset() != 0 || s.storage_len() != s.numel() {
        s.deep_clone()
    } else {
        s
    }
}

/// Runs `call` with `t` (contiguous, native wire dtype) as the send buffer, receiving
/// `recv_len` elements into a fresh storage, which it returns. `t`'s storage is locked
/// exclusively while the transport reads it. If the collective never completes, `t` gets a
/// copy of its storage and the original is leaked (the library may still read it).
#[track_caller]
pub(crate) fn exchange(op: &'static str, t: &Tensor, call: Call, count: usize, recv_len: usize) -> Result<CpuStorage> {
    let wire = Wire::native(t.dtype()).expect("exchange: a native wire dtype");
    debug_assert!(t.is_contiguous());
    let mut guard = t.lock_storage_exclusive();
    let cpu = guard.as_cpu_mut().ok_or_else(|| cuda_refused(op))?;
    // SAFETY: `t` is contiguous over `numel` elements from its offset, inside the storage.
    let send = unsafe { (storage_ptr(cpu) as *const u8).add(t.storage_offset() * t.element_size()) } as *const c_void;
    let recv = (recv_len > 0).then(|| CpuStorage::uninit(wire.dtype(), recv_len));
    // SAFETY: the exclusive guard keeps `send` alive and unwritten until `wait` returns; on an
    // error the storage is replaced and the original leaked below.
    let work = unsafe { Work::start(op, call, wire, count, SendBuf::Borrowed(send), recv) }?;
    match work.wait() {
        Ok(recv) => Ok(recv.unwrap_or_else(|| CpuStorage::uninit(wire.dtype(), 0))),
        Err(e) => {
            let copy = copy_storage(cpu);
            std::mem::forget(std::mem::replace(cpu, copy));
            Err(e)
        }
    }
}

/// A byte copy of a CPU storage.
fn copy_storage(s: &CpuStorage) -> CpuStorage {
    let mut out = CpuStorage::uninit(s.dtype(), s.len());
    // SAFETY: both hold `s.nbytes()` bytes in distinct allocations; `s` is only read.
    unsafe { std::ptr::copy_nonoverlapping(storage_ptr(s) as *const u8, storage_ptr_mut(&mut out) as *mut u8, s.nbytes()) };
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
    let _off = crate::no_grad();
    t.detach().copy_(&values);
}

/// A tensor over a received storage.
pub(crate) fn received(values: CpuStorage, shape: &[usize]) -> Tensor {
    Tensor::from_cpu_storage(values, shape)
}

/// The error for a CUDA tensor given to a CPU transport.
#[track_caller]
pub(crate) fn cuda_refused(op: &'static str) -> Error {
    Error::new(op, ErrorKind::Device, "the MPI backend moves CPU tensors only; this tensor is on CUDA (move it with .to(&Device::Cpu), or use the NCCL backend once available)")
}

/// Divides every element of a storage by `by` in place (`ReduceOp::Avg` after a sum; computed
/// in f64 and rounded once).
pub(crate) fn divide(s: &mut CpuStorage, by: f64) {
    use kiln_runtime::dtype::Element;
    kiln_runtime::match_cpu!(s, |b: T| b.iter_mut().for_each(|x| *x = T::from_f64(x.to_f64() / by)))
}
