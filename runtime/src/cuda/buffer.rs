//! `CudaBuffer`: bytes on one device, from the caching allocator, with host↔device copies.

use super::alloc::{allocate, release};
use super::context::{device, CudaDevice};
use super::error::{CudaError, CudaErrorKind, Result};
use cudarc::driver::CudaEvent;
use std::sync::Arc;

/// Element types that can be copied to and from a [`CudaBuffer`]: plain numbers for which every
/// bit pattern is a valid value (so reading back any device bytes is sound). `bool` is left
/// out for that reason; copy it as `u8`.
pub trait DeviceElement: Copy + Default + Send + Sync + 'static + sealed::Sealed {}

mod sealed {
    /// Closes [`super::DeviceElement`] to the types listed here.
    pub trait Sealed {}
}

macro_rules! device_elements {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl DeviceElement for $t {}
    )*};
}
device_elements!(f32, f64, i32, i64, u8, u16, u32, u64, half::f16, half::bf16);

/// Device memory on one CUDA device: a block from the device's caching allocator holding
/// `len_bytes` bytes (the block may be larger). The bytes have no dtype; kernels and copies give
/// them one. Dropping the buffer returns the block to the cache.
pub struct CudaBuffer {
    dev: Arc<CudaDevice>,
    ptr: u64,
    len: usize,
    capacity: usize,
}

impl std::fmt::Debug for CudaBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaBuffer(cuda:{}, {} bytes at {:#x})", self.dev.ordinal(), self.len, self.ptr)
    }
}

impl CudaBuffer {
    /// A buffer of `len_bytes` bytes on `cuda:ordinal` with unspecified contents.
    pub fn alloc(ordinal: usize, len_bytes: usize) -> Result<CudaBuffer> {
        let dev = device("CudaBuffer::alloc", ordinal)?;
        let (ptr, capacity) = allocate(&dev, "CudaBuffer::alloc", len_bytes)?;
        Ok(CudaBuffer { dev, ptr, len: len_bytes, capacity })
    }

    /// A buffer of `len_bytes` zero bytes on `cuda:ordinal`.
    pub fn zeros(ordinal: usize, len_bytes: usize) -> Result<CudaBuffer> {
        let buf = CudaBuffer::alloc(ordinal, len_bytes)?;
        buf.dev.bind("CudaBuffer::zeros")?;
        // SAFETY: the range [ptr, ptr + len) lies inside this buffer's block.
        unsafe { cudarc::driver::result::memset_d8_async(buf.ptr, 0, buf.len, buf.dev.stream().cu_stream()) }
            .map_err(|e| CudaError::driver("CudaBuffer::zeros", "cuMemsetD8Async", e))?;
        Ok(buf)
    }

    /// A buffer on `cuda:ordinal` holding a copy of `data`.
    pub fn from_slice<T: DeviceElement>(ordinal: usize, data: &[T]) -> Result<CudaBuffer> {
        let mut buf = CudaBuffer::alloc(ordinal, std::mem::size_of_val(data))?;
        buf.copy_from_slice(data)?;
        Ok(buf)
    }

    /// Copies `data` (host) into the start of this buffer, queued on the device's stream. From
    /// pageable memory the driver stages the bytes before this returns; from page-locked
    /// memory ([`super::pinned`]) the copy runs later, while the host goes on, and the pinned
    /// block is not reused before it ran (the caller must not write `data` meanwhile, as with
    /// PyTorch's `non_blocking=True`).
    pub fn copy_from_slice<T: DeviceElement>(&mut self, data: &[T]) -> Result<()> {
        let op = "CudaBuffer::copy_from_slice";
        let bytes = std::mem::size_of_val(data);
        if bytes > self.len {
            return Err(CudaError::new(
                op,
                CudaErrorKind::InvalidArgument,
                format!("{bytes} bytes do not fit a buffer of {} bytes", self.len),
            ));
        }
        if bytes == 0 {
            return Ok(());
        }
        self.dev.bind(op)?;
        // SAFETY: `T` is a plain number type without padding (DeviceElement), so its bytes are
        // initialized `u8`s, borrowed as long as `data`.
        let raw = unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), bytes) };
        let stream = self.dev.stream().cu_stream();
        let dst = self.ptr;
        super::pinned::record_copies(op, &self.dev, raw, || {
            // SAFETY: the destination range lies inside this buffer. A pageable source is staged
            // before the call returns; a pinned one stays allocated (and out of reuse) until the
            // event `record_copies` queues after this copy has completed.
            unsafe { cudarc::driver::result::memcpy_htod_async(dst, data, stream) }
                .map_err(|e| CudaError::driver(op, "host-to-device copy", e))
        })
    }

    /// The buffer's bytes as `len_bytes / size_of::<T>()` values of `T` (waits for queued work).
    pub fn to_vec<T: DeviceElement>(&self) -> Result<Vec<T>> {
        let op = "CudaBuffer::to_vec";
        let size = std::mem::size_of::<T>();
        if !self.len.is_multiple_of(size) {
            return Err(CudaError::new(
                op,
                CudaErrorKind::InvalidArgument,
                format!("{} bytes are not a whole number of {size}-byte elements", self.len),
            ));
        }
        let mut out = vec![T::default(); self.len / size];
        if out.is_empty() {
            return Ok(out);
        }
        self.dev.bind(op)?;
        // SAFETY: the source range lies inside this buffer and `out` has exactly that many bytes;
        // every bit pattern is a valid `T` (DeviceElement). The stream is synchronized before
        // `out` is read.
        unsafe { cudarc::driver::result::memcpy_dtoh_async(&mut out[..], self.ptr, self.dev.stream().cu_stream()) }
            .map_err(|e| CudaError::driver(op, "device-to-host copy", e))?;
        self.dev.synchronize().map_err(|mut e| {
            e.op = op;
            e
        })?;
        Ok(out)
    }

    /// Queues a copy of the buffer's bytes into `dst` (host memory of exactly `len_bytes`
    /// bytes) on the device's stream and returns the event recorded after it: `dst` holds the
    /// bytes once the event has completed. Into page-locked memory ([`super::pinned`]) the copy
    /// is a DMA that runs later, while the host goes on.
    ///
    /// # Safety
    ///
    /// Until the event has completed, `dst` must be neither read, written nor freed: the
    /// caller hands the event to the block as its pending write (`CpuBuf::set_pending`), which
    /// makes every host access and the block's reuse wait for it.
    pub(crate) unsafe fn copy_to_pinned<T: DeviceElement>(&self, dst: &mut [T]) -> Result<CudaEvent> {
        let op = "CudaBuffer::copy_to_pinned";
        let bytes = std::mem::size_of_val(dst);
        if bytes != self.len {
            return Err(CudaError::new(
                op,
                CudaErrorKind::InvalidArgument,
                format!("a buffer of {} bytes copied into {bytes} bytes", self.len),
            ));
        }
        self.dev.bind(op)?;
        if bytes > 0 {
            // SAFETY: the source range is this buffer's bytes and `dst` has exactly that many;
            // every bit pattern is a valid `T` (DeviceElement). The caller keeps `dst` untouched
            // and alive until the event below has completed (this function's contract).
            unsafe { cudarc::driver::result::memcpy_dtoh_async(dst, self.ptr, self.dev.stream().cu_stream()) }
                .map_err(|e| CudaError::driver(op, "device-to-host copy", e))?;
        }
        self.dev.stream().record_event(None).map_err(|e| {
            // Without an event nothing could wait for the copy: finish it before `dst` goes back.
            let _ = self.dev.synchronize();
            CudaError::driver(op, "recording the copy's event", e)
        })
    }

    /// Copies `src`'s bytes (same device) into the start of this buffer, on the device's stream.
    pub fn copy_from_buffer(&mut self, src: &CudaBuffer) -> Result<()> {
        let op = "CudaBuffer::copy_from_buffer";
        if src.dev.ordinal() != self.dev.ordinal() {
            return Err(CudaError::new(
                op,
                CudaErrorKind::InvalidArgument,
                format!("source on cuda:{}, destination on cuda:{}", src.dev.ordinal(), self.dev.ordinal()),
            ));
        }
        if src.len > self.len {
            return Err(CudaError::new(
                op,
                CudaErrorKind::InvalidArgument,
                format!("{} bytes do not fit a buffer of {} bytes", src.len, self.len),
            ));
        }
        self.dev.bind(op)?;
        // SAFETY: both ranges lie inside their buffers; distinct buffers never overlap.
        unsafe { cudarc::driver::result::memcpy_dtod_async(self.ptr, src.ptr, src.len, self.dev.stream().cu_stream()) }
            .map_err(|e| CudaError::driver(op, "device-to-device copy", e))
    }

    /// The number of bytes the buffer holds.
    pub fn len_bytes(&self) -> usize {
        self.len
    }

    /// The size class of the block behind the buffer (at least `len_bytes`).
    pub fn capacity_bytes(&self) -> usize {
        self.capacity
    }

    /// The device address of the first byte (256-byte aligned).
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// The ordinal of the device the buffer lives on.
    pub fn ordinal(&self) -> usize {
        self.dev.ordinal()
    }

    /// The device the buffer lives on.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.dev
    }
}

impl Drop for CudaBuffer {
    fn drop(&mut self) {
        release(&self.dev, self.ptr, self.capacity);
    }
}
