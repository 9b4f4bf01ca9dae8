//! Storage: one enum over devices, and on the CPU one variant per dtype.

use crate::cpu::CpuBuf;
use crate::cuda::CudaStorage;
use crate::device::Device;
use crate::dtype::{DType, Element};
use half::{bf16, f16};

/// A typed CPU array, one variant per dtype.
pub enum CpuStorage {
    /// float32
    F32(CpuBuf<f32>),
    /// float64
    F64(CpuBuf<f64>),
    /// float16
    F16(CpuBuf<f16>),
    /// bfloat16
    BF16(CpuBuf<bf16>),
    /// int64
    I64(CpuBuf<i64>),
    /// int32
    I32(CpuBuf<i32>),
    /// uint8
    U8(CpuBuf<u8>),
    /// bool
    Bool(CpuBuf<bool>),
}

/// Runs `$body` with `$buf` bound to the typed buffer inside a `CpuStorage` (by reference, or
/// by `mut` reference with the `mut` form), and the type alias `$T` naming its element type.
#[macro_export]
macro_rules! match_cpu {
    ($s:expr, |$buf:ident : $T:ident| $body:expr) => {
        match $s {
            $crate::CpuStorage::F32($buf) => {
                #[allow(dead_code)]
                type $T = f32;
                $body
            }
            $crate::CpuStorage::F64($buf) => {
                #[allow(dead_code)]
                type $T = f64;
                $body
            }
            $crate::CpuStorage::F16($buf) => {
                #[allow(dead_code)]
                type $T = half::f16;
                $body
            }
            $crate::CpuStorage::BF16($buf) => {
                #[allow(dead_code)]
                type $T = half::bf16;
                $body
            }
            $crate::CpuStorage::I64($buf) => {
                #[allow(dead_code)]
                type $T = i64;
                $body
            }
            $crate::CpuStorage::I32($buf) => {
                #[allow(dead_code)]
                type $T = i32;
                $body
            }
            $crate::CpuStorage::U8($buf) => {
                #[allow(dead_code)]
                type $T = u8;
                $body
            }
            $crate::CpuStorage::Bool($buf) => {
                #[allow(dead_code)]
                type $T = bool;
                $body
            }
        }
    };
}

/// Like [`match_cpu!`] for the floating-point variants only; `$other` runs for the rest.
#[macro_export]
macro_rules! match_cpu_float {
    ($s:expr, |$buf:ident : $T:ident| $body:expr, _ => $other:expr) => {
        match $s {
            $crate::CpuStorage::F32($buf) => {
                #[allow(dead_code)]
                type $T = f32;
                $body
            }
            $crate::CpuStorage::F64($buf) => {
                #[allow(dead_code)]
                type $T = f64;
                $body
            }
            $crate::CpuStorage::F16($buf) => {
                #[allow(dead_code)]
                type $T = half::f16;
                $body
            }
            $crate::CpuStorage::BF16($buf) => {
                #[allow(dead_code)]
                type $T = half::bf16;
                $body
            }
            _ => $other,
        }
    };
}

/// Runs `$body` for a `DType` value with `$T` naming its element type.
#[macro_export]
macro_rules! match_dtype {
    ($d:expr, |$T:ident| $body:expr) => {
        match $d {
            $crate::DType::F32 => {
                type $T = f32;
                $body
            }
            $crate::DType::F64 => {
                type $T = f64;
                $body
            }
            $crate::DType::F16 => {
                type $T = half::f16;
                $body
            }
            $crate::DType::BF16 => {
                type $T = half::bf16;
                $body
            }
            $crate::DType::I64 => {
                type $T = i64;
                $body
            }
            $crate::DType::I32 => {
                type $T = i32;
                $body
            }
            $crate::DType::U8 => {
                type $T = u8;
                $body
            }
            $crate::DType::Bool => {
                type $T = bool;
                $body
            }
        }
    };
}

/// Element types whose buffers convert to and from `CpuStorage`.
pub trait StorageElement: Element {
    /// Wraps a buffer of this type.
    fn wrap(buf: CpuBuf<Self>) -> CpuStorage;
    /// The buffer inside, when the storage holds this type.
    fn unwrap_ref(s: &CpuStorage) -> Option<&CpuBuf<Self>>;
    /// The buffer inside, mutably, when the storage holds this type.
    fn unwrap_mut(s: &mut CpuStorage) -> Option<&mut CpuBuf<Self>>;
}

macro_rules! storage_element {
    ($t:ty, $v:ident) => {
        impl StorageElement for $t {
            fn wrap(buf: CpuBuf<Self>) -> CpuStorage {
                CpuStorage::$v(buf)
            }
            fn unwrap_ref(s: &CpuStorage) -> Option<&CpuBuf<Self>> {
                match s {
                    CpuStorage::$v(b) => Some(b),
                    _ => None,
                }
            }
            fn unwrap_mut(s: &mut CpuStorage) -> Option<&mut CpuBuf<Self>> {
                match s {
                    CpuStorage::$v(b) => Some(b),
                    _ => None,
                }
            }
        }
    };
}
storage_element!(f32, F32);
storage_element!(f64, F64);
storage_element!(f16, F16);
storage_element!(bf16, BF16);
storage_element!(i64, I64);
storage_element!(i32, I32);
storage_element!(u8, U8);
storage_element!(bool, Bool);

impl CpuStorage {
    /// The dtype of the elements.
    pub fn dtype(&self) -> DType {
        match_cpu!(self, |_b: T| T::DTYPE)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match_cpu!(self, |b: T| b.len())
    }

    /// True when the storage holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held (by element count, not size class).
    pub fn nbytes(&self) -> usize {
        self.len() * self.dtype().size_in_bytes()
    }

    /// The elements' bytes, for copies to a device (`bool`s as bytes 0/1).
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: every storage element type (f32, f64, f16, bf16, i64, i32, u8, bool) is plain
        // data without padding, and the buffer holds `nbytes()` initialized bytes, so they are
        // valid `u8`s for as long as `self` is borrowed.
        match_cpu!(self, |b: T| unsafe { std::slice::from_raw_parts(b.byte_ptr(), self.nbytes()) })
    }

    /// A copy in page-locked host memory (see [`crate::cuda::pinned`]); needs a CUDA device
    /// (`op` names the caller in the "no CUDA device available" error).
    pub fn pinned_copy(&self, op: &'static str) -> crate::cuda::Result<CpuStorage> {
        match_cpu!(self, |b: T| Ok(T::wrap(CpuBuf::pinned_from_slice(op, b)?)))
    }

    /// Whether the elements live in page-locked host memory.
    pub fn is_pinned(&self) -> bool {
        match_cpu!(self, |b: T| b.is_pinned())
    }

    /// `len` zeros of `dtype`.
    pub fn zeros(dtype: DType, len: usize) -> CpuStorage {
        match_dtype!(dtype, |T| T::wrap(CpuBuf::<T>::zeros(len)))
    }

    /// `len` elements of `dtype` with unspecified (but initialized) contents.
    pub fn uninit(dtype: DType, len: usize) -> CpuStorage {
        match_dtype!(dtype, |T| T::wrap(CpuBuf::<T>::uninit(len)))
    }

    /// The typed buffer, when the storage holds `T`.
    pub fn as_buf<T: StorageElement>(&self) -> Option<&CpuBuf<T>> {
        T::unwrap_ref(self)
    }

    /// The typed buffer mutably, when the storage holds `T`.
    pub fn as_buf_mut<T: StorageElement>(&mut self) -> Option<&mut CpuBuf<T>> {
        T::unwrap_mut(self)
    }
}

/// A tensor's storage on its device: one enum over devices. CPU kernels see the `Cpu` variant
/// only (the tensor layer routes other devices elsewhere first).
pub enum Storage {
    /// Host memory.
    Cpu(CpuStorage),
    /// Memory on one CUDA device.
    Cuda(CudaStorage),
}

impl Storage {
    /// The device the storage lives on.
    pub fn device(&self) -> Device {
        match self {
            Storage::Cpu(_) => Device::Cpu,
            Storage::Cuda(s) => Device::Cuda(s.ordinal()),
        }
    }

    /// The dtype of the elements.
    pub fn dtype(&self) -> DType {
        match self {
            Storage::Cpu(s) => s.dtype(),
            Storage::Cuda(s) => s.dtype(),
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Storage::Cpu(s) => s.len(),
            Storage::Cuda(s) => s.len(),
        }
    }

    /// True when the storage holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The CPU storage, when the storage is on the CPU.
    pub fn as_cpu(&self) -> Option<&CpuStorage> {
        match self {
            Storage::Cpu(s) => Some(s),
            Storage::Cuda(_) => None,
        }
    }

    /// The CPU storage, writable, when the storage is on the CPU.
    pub fn as_cpu_mut(&mut self) -> Option<&mut CpuStorage> {
        match self {
            Storage::Cpu(s) => Some(s),
            Storage::Cuda(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispatch_by_dtype() {
        for d in DType::ALL {
            let s = CpuStorage::zeros(d, 5);
            assert_eq!(s.dtype(), d);
            assert_eq!(s.len(), 5);
            assert_eq!(s.nbytes(), 5 * d.size_in_bytes());
        }
        let s = f32::wrap(CpuBuf::from_slice(&[1.0, 2.0]));
        assert_eq!(&s.as_buf::<f32>().unwrap()[..], &[1.0, 2.0]);
        assert!(s.as_buf::<f64>().is_none());
    }
}
