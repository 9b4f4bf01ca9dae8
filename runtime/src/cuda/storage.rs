//! `CudaStorage`: a tensor's elements on one CUDA device (a [`CudaBuffer`] with a dtype).

use super::buffer::CudaBuffer;
use super::error::Result;
use crate::cpu::CpuBuf;
use crate::dtype::DType;
use crate::storage::{CpuStorage, StorageElement};

/// Runs `$body` with `$T` naming the element type of `$dtype`, any dtype but `Bool`: the types
/// whose device bytes are copied back as they are (a device byte of a bool is checked first).
macro_rules! match_bits {
    ($dtype:expr, |$T:ident| $body:expr) => {
        match $dtype {
            DType::F32 => {
                type $T = f32;
                $body
            }
            DType::F64 => {
                type $T = f64;
                $body
            }
            DType::F16 => {
                type $T = half::f16;
                $body
            }
            DType::BF16 => {
                type $T = half::bf16;
                $body
            }
            DType::I64 => {
                type $T = i64;
                $body
            }
            DType::I32 => {
                type $T = i32;
                $body
            }
            DType::U8 => {
                type $T = u8;
                $body
            }
            DType::Bool => unreachable!("bools are read back as bytes"),
        }
    };
}

/// `len` elements of `dtype` on one CUDA device. Bools are stored as bytes holding 0 or 1 (the
/// layout of Rust's `bool`), every other dtype as its own bits.
pub struct CudaStorage {
    buf: CudaBuffer,
    dtype: DType,
    len: usize,
}

impl std::fmt::Debug for CudaStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaStorage({} x {}, {:?})", self.len, self.dtype, self.buf)
    }
}

impl CudaStorage {
    /// `len` elements of `dtype` on `cuda:ordinal` with unspecified contents (`op` names the
    /// caller in errors).
    pub fn uninit(op: &'static str, ordinal: usize, dtype: DType, len: usize) -> Result<CudaStorage> {
        let buf = CudaBuffer::alloc(ordinal, len * dtype.size_in_bytes()).map_err(|e| e.in_op(op))?;
        Ok(CudaStorage { buf, dtype, len })
    }

    /// A copy of `src` (host) on `cuda:ordinal`: waits for nothing when `src` is pinned (see
    /// [`CudaBuffer::copy_from_slice`]).
    pub fn from_cpu(op: &'static str, src: &CpuStorage, ordinal: usize) -> Result<CudaStorage> {
        // Bools are bytes 0/1: the device sees them as `unsigned char`.
        let buf = CudaBuffer::from_slice(ordinal, src.as_bytes()).map_err(|e| e.in_op(op))?;
        Ok(CudaStorage { buf, dtype: src.dtype(), len: src.len() })
    }

    /// A host copy of every element (waits for the device's queued work).
    pub fn to_cpu(&self, op: &'static str) -> Result<CpuStorage> {
        let out = if self.dtype == DType::Bool {
            self.buf
                .to_vec::<u8>()
                .map(|v| bool::wrap(CpuBuf::from_slice(&v.iter().map(|&b| b != 0).collect::<Vec<bool>>())))
        } else {
            match_bits!(self.dtype, |T| self.buf.to_vec::<T>().map(|v| T::wrap(CpuBuf::from_slice(&v))))
        };
        out.map_err(|e| e.in_op(op))
    }

    /// A host copy of every element in page-locked memory, without waiting: the copy is queued
    /// on the device's stream behind the work that writes the elements, the first host access
    /// of the result (a read or a write) waits for it, so it is never seen half-done, and its
    /// block is not reused before the copy ran, even if the result is dropped unread. Bools are read back as [`CudaStorage::to_cpu`] does (waiting: each
    /// byte is checked to be a valid `bool`), then pinned.
    pub fn to_cpu_non_blocking(&self, op: &'static str) -> Result<CpuStorage> {
        if self.dtype == DType::Bool {
            return self.to_cpu(op)?.pinned_copy(op);
        }
        match_bits!(self.dtype, |T| {
            let mut host = CpuBuf::<T>::pinned_uninit(op, self.len)?;
            // SAFETY: `host` is untouched until the event completed: it is set as the block's
            // pending write right below, before anything else can see the buffer, and from then
            // on every host access (`RawBuffer::as_ptr`) waits for it and a drop keeps the
            // block out of reuse until it completed (`pinned::release`).
            let event = unsafe { self.buf.copy_to_pinned(&mut host) }.map_err(|e| e.in_op(op))?;
            host.set_pending(Box::new(event));
            Ok(T::wrap(host))
        })
    }

    /// The dtype of the elements.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the storage holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The ordinal of the device holding the elements.
    pub fn ordinal(&self) -> usize {
        self.buf.ordinal()
    }

    /// The device buffer.
    pub fn buffer(&self) -> &CudaBuffer {
        &self.buf
    }

    /// The device buffer, writable.
    pub fn buffer_mut(&mut self) -> &mut CudaBuffer {
        &mut self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_device_uploads_fail_naming_the_op() {
        if super::super::is_available() {
            return println!("a CUDA device is present; the no-device error is not reachable");
        }
        let cpu = CpuStorage::zeros(DType::F32, 3);
        let e = CudaStorage::from_cpu("to", &cpu, 0).unwrap_err();
        assert_eq!(e.op, "to");
        assert!(e.message.contains("no CUDA device available"), "{e}");
        let e = CudaStorage::uninit("empty", 0, DType::Bool, 3).unwrap_err();
        assert!(e.to_string().starts_with("empty: no CUDA device available"), "{e}");
    }
}
