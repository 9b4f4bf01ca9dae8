//! `CudaStorage`: a tensor's elements on one CUDA device (a [`CudaBuffer`] with a dtype).

use super::buffer::CudaBuffer;
use super::error::Result;
use crate::cpu::CpuBuf;
use crate::dtype::DType;
use crate::storage::{CpuStorage, StorageElement};

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
        fn read<T: StorageElement + super::DeviceElement>(buf: &CudaBuffer) -> Result<CpuStorage> {
            Ok(T::wrap(CpuBuf::from_slice(&buf.to_vec::<T>()?)))
        }
        let out = match self.dtype {
            DType::Bool => self.buf.to_vec::<u8>().map(|v| bool::wrap(CpuBuf::from_slice(&v.iter().map(|&b| b != 0).collect::<Vec<bool>>()))),
            DType::F32 => read::<f32>(&self.buf),
            DType::F64 => read::<f64>(&self.buf),
            DType::F16 => read::<half::f16>(&self.buf),
            DType::BF16 => read::<half::bf16>(&self.buf),
            DType::I64 => read::<i64>(&self.buf),
            DType::I32 => read::<i32>(&self.buf),
            DType::U8 => read::<u8>(&self.buf),
        };
        out.map_err(|e| e.in_op(op))
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
