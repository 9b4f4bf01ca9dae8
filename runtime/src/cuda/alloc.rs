//! The caching device allocator, one per device.
//!
//! `cuMemAlloc`/`cuMemFree` synchronize the device and cost tens of microseconds, so, like
//! PyTorch's CUDA allocator, kiln keeps freed blocks in free lists by size class and hands them
//! out again. Size classes: below 1 MiB the next power of two (at least 512 bytes); from 1 MiB
//! on, the next multiple of 2 MiB.
//!
//! Reuse is safe without events because every kiln operation on a device runs on that device's
//! one stream: a block freed while a queued kernel still reads it can only be handed to work
//! queued *after* that kernel.

use super::context::{device, CudaDevice};
use super::error::{driver_message, CudaError, CudaErrorKind, Result};
use ahash::AHashMap;

const MIN_BLOCK: usize = 512;
const LARGE_THRESHOLD: usize = 1 << 20;
const LARGE_ROUND: usize = 2 << 20;

/// The size class (capacity in bytes) that serves a request of `bytes`.
pub fn size_class(bytes: usize) -> usize {
    if bytes < LARGE_THRESHOLD {
        bytes.max(MIN_BLOCK).next_power_of_two()
    } else {
        bytes.div_ceil(LARGE_ROUND) * LARGE_ROUND
    }
}

/// Counters of one device's caching allocator (`torch.cuda.memory_stats`, abridged).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CudaMemoryStats {
    /// Bytes (by size class) held by live buffers.
    pub allocated: usize,
    /// The largest `allocated` since start or the last [`reset_peak_memory_stats`].
    pub max_allocated: usize,
    /// Bytes obtained from the driver and not yet returned (live plus cached).
    pub reserved: usize,
    /// Allocations served from the free lists.
    pub cache_hits: u64,
    /// Allocations that went to `cuMemAlloc`.
    pub device_allocs: u64,
}

/// Free lists and counters of one device.
#[derive(Default)]
pub(crate) struct DeviceAllocator {
    free: AHashMap<usize, Vec<u64>>,
    stats: CudaMemoryStats,
}

impl DeviceAllocator {
    fn release_cached(&mut self, dev: &CudaDevice) -> Result<()> {
        dev.bind("empty_cache")?;
        for (class, ptrs) in self.free.drain() {
            for p in ptrs {
                // SAFETY: a pointer in a free list came from cuMemAlloc on this device and no
                // live buffer refers to it; the device is synchronized first by the caller.
                unsafe { cudarc::driver::result::free_sync(p) }
                    .map_err(|e| CudaError::driver("empty_cache", "cuMemFree", e))?;
                self.stats.reserved -= class;
            }
        }
        Ok(())
    }
}

/// A block of device memory from the cache: its address and its capacity (size class).
pub(crate) fn allocate(dev: &CudaDevice, op: &'static str, bytes: usize) -> Result<(u64, usize)> {
    let class = size_class(bytes);
    let mut a = dev.alloc.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = a.free.get_mut(&class).and_then(|l| l.pop()) {
        a.stats.cache_hits += 1;
        a.stats.allocated += class;
        a.stats.max_allocated = a.stats.max_allocated.max(a.stats.allocated);
        return Ok((p, class));
    }
    dev.bind(op)?;
    // SAFETY: plain allocation on the bound context; the memory is owned by the returned block.
    let ptr = match unsafe { cudarc::driver::result::malloc_sync(class) } {
        Ok(p) => p,
        Err(_) => {
            // Out of memory (or fragmented): give the cached blocks back and try once more.
            dev.synchronize()?;
            a.release_cached(dev)?;
            // SAFETY: as the first try: plain allocation on the bound context.
            unsafe { cudarc::driver::result::malloc_sync(class) }.map_err(|e| {
                CudaError::new(
                    op,
                    CudaErrorKind::OutOfMemory,
                    format!(
                        "could not allocate {bytes} bytes on cuda:{} ({} bytes allocated): {}",
                        dev.ordinal(),
                        a.stats.allocated,
                        driver_message(e)
                    ),
                )
            })?
        }
    };
    a.stats.device_allocs += 1;
    a.stats.reserved += class;
    a.stats.allocated += class;
    a.stats.max_allocated = a.stats.max_allocated.max(a.stats.allocated);
    Ok((ptr, class))
}

/// Returns a block to its free list.
pub(crate) fn release(dev: &CudaDevice, ptr: u64, class: usize) {
    let mut a = dev.alloc.lock().unwrap_or_else(|e| e.into_inner());
    a.stats.allocated -= class;
    a.free.entry(class).or_default().push(ptr);
}

/// The allocator's counters of `cuda:ordinal`.
pub fn memory_stats(ordinal: usize) -> Result<CudaMemoryStats> {
    let dev = device("memory_stats", ordinal)?;
    let a = dev.alloc.lock().unwrap_or_else(|e| e.into_inner());
    Ok(a.stats)
}

/// Bytes held by live buffers on `cuda:ordinal` (`torch.cuda.memory_allocated`).
pub fn memory_allocated(ordinal: usize) -> Result<usize> {
    Ok(memory_stats(ordinal)?.allocated)
}

/// The peak of [`memory_allocated`] (`torch.cuda.max_memory_allocated`).
pub fn max_memory_allocated(ordinal: usize) -> Result<usize> {
    Ok(memory_stats(ordinal)?.max_allocated)
}

/// Bytes obtained from the driver, live or cached (`torch.cuda.memory_reserved`).
pub fn memory_reserved(ordinal: usize) -> Result<usize> {
    Ok(memory_stats(ordinal)?.reserved)
}

/// Sets the peak to the current allocation (`torch.cuda.reset_peak_memory_stats`).
pub fn reset_peak_memory_stats(ordinal: usize) -> Result<()> {
    let dev = device("reset_peak_memory_stats", ordinal)?;
    let mut a = dev.alloc.lock().unwrap_or_else(|e| e.into_inner());
    a.stats.max_allocated = a.stats.allocated;
    Ok(())
}

/// Returns every cached (free) block of `cuda:ordinal` to the driver
/// (`torch.cuda.empty_cache`). Live buffers are untouched.
pub fn empty_cache(ordinal: usize) -> Result<()> {
    let dev = device("empty_cache", ordinal)?;
    dev.synchronize()?;
    let mut a = dev.alloc.lock().unwrap_or_else(|e| e.into_inner());
    a.release_cached(&dev)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes() {
        assert_eq!(size_class(0), 512);
        assert_eq!(size_class(513), 1024);
        assert_eq!(size_class((1 << 20) - 1), 1 << 20);
        assert_eq!(size_class(1 << 20), 2 << 20);
        assert_eq!(size_class((2 << 20) + 1), 4 << 20);
    }
}
