//! Page-locked ("pinned") host memory: a caching allocator of `cuMemHostAlloc` blocks, and the
//! bookkeeping that lets copies between such a block and a device run asynchronously.
//!
//! A copy from pageable memory is staged by the driver before `cuMemcpyHtoDAsync` returns; a
//! copy from a pinned block is a DMA that reads the block *later*, while the host goes on. So
//! every copy out of a pinned block records an event on the copying stream against the block
//! ([`record_copies`]), and a freed block is handed out again only once all of its events have
//! completed: the bytes a queued copy reads cannot be reused under it, whatever the tensor
//! layer does with the storage meanwhile (PyTorch's `CachingHostAllocator` does the same).
//!
//! The other way, a `cuMemcpyDtoHAsync` into a pinned block writes it later
//! (`CudaBuffer::copy_to_pinned`): its event is the block's pending write
//! (`RawBuffer::set_pending`), which the first host access waits for; a block dropped before
//! that gets the event here, as a copy reading it would, so it is not reused while the copy
//! may still write it.
//!
//! Blocks are allocated with `CU_MEMHOSTALLOC_PORTABLE` (pinned for every context), in the CPU
//! allocator's size classes, zeroed when fresh (a [`RawBuffer`](crate::cpu::alloc::RawBuffer)'s
//! bytes are always initialized), and kept for the life of the process: they never go back to
//! the driver, so a DMA can never read unmapped memory.
//!
//! Why a copy into a new block rather than `cuMemHostRegister` of a tensor's own buffer: the CPU
//! allocator's small blocks share pages, and registration works on whole pages (a second block
//! on a registered page fails with `CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED`); a registered
//! block would also have to be unregistered (a synchronizing call) before the CPU cache could
//! hand it out again. PyTorch's `pin_memory()` is a copy too.

use super::context::{device, CudaDevice};
use super::error::{driver_message, CudaError, CudaErrorKind, Result};
use crate::cpu::host_block::{size_class, Fence};
use ahash::AHashMap;
use cudarc::driver::CudaEvent;
use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::Mutex;

/// An event recorded after a copy on a device's stream: the copy has run once it completed.
impl Fence for CudaEvent {
    fn wait(&self) -> std::result::Result<(), String> {
        self.synchronize().map_err(driver_message)
    }

    /// An event whose query fails counts as pending: a block is never reused rather than
    /// reused too early.
    fn is_complete(&self) -> bool {
        self.context().bind_to_thread().and_then(|()| self.try_is_complete()).unwrap_or(false)
    }
}

/// A pinned block and the events of the copies that read it (or of a copy writing it that was
/// still queued when the block was freed).
struct Block {
    class: usize,
    copies: Vec<Box<dyn Fence>>,
}

impl Block {
    /// Forgets the copies that have completed; true when none is left.
    fn settle(&mut self) -> bool {
        self.copies.retain(|e| !e.is_complete());
        self.copies.is_empty()
    }
}

/// The live blocks (by start address, to find the block a slice lies in) and the free ones.
#[derive(Default)]
struct PinnedCache {
    live: BTreeMap<usize, Block>,
    free: AHashMap<usize, Vec<(usize, Block)>>,
}

static CACHE: Mutex<Option<PinnedCache>> = Mutex::new(None);

fn with_cache<R>(f: impl FnOnce(&mut PinnedCache) -> R) -> R {
    let mut guard = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    f(guard.get_or_insert_with(PinnedCache::default))
}

/// A pinned block of at least `bytes` bytes (its address and size class): a free block whose
/// copies have all completed, or a new zeroed one. Needs a CUDA device (`op` names the caller
/// in the "no CUDA device available" error).
pub(crate) fn allocate(op: &'static str, bytes: usize) -> Result<(NonNull<u8>, usize)> {
    let dev = device(op, 0)?;
    let class = size_class(bytes);
    let reused = with_cache(|c| {
        let list = c.free.get_mut(&class)?;
        let i = list.iter_mut().position(|(_, b)| b.settle())?;
        let (ptr, block) = list.swap_remove(i);
        c.live.insert(ptr, block);
        Some(ptr)
    });
    if let Some(ptr) = reused {
        return Ok((NonNull::new(ptr as *mut u8).expect("listed blocks are not null"), class));
    }
    dev.bind(op)?;
    // SAFETY: a plain host allocation on the bound context, owned by the block from here on;
    // its bytes are zeroed before anything reads them.
    let raw = unsafe { cudarc::driver::result::malloc_host(class, cudarc::driver::sys::CU_MEMHOSTALLOC_PORTABLE) }
        .map_err(|e| {
            CudaError::new(
                op,
                CudaErrorKind::OutOfMemory,
                format!("could not allocate {bytes} bytes of pinned host memory: {}", super::error::driver_message(e)),
            )
        })?;
    let ptr = NonNull::new(raw.cast::<u8>())
        .ok_or_else(|| CudaError::new(op, CudaErrorKind::Driver, "cuMemHostAlloc returned null"))?;
    // SAFETY: the block has `class` bytes and nothing else refers to it yet.
    unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, class) };
    with_cache(|c| c.live.insert(ptr.as_ptr() as usize, Block { class, copies: Vec::new() }));
    Ok((ptr, class))
}

/// Returns a block from [`allocate`] to the free list, with the write into it that may still
/// be in flight (a device→host copy nothing waited for); it is reused once its copies are done.
pub(crate) fn release(ptr: NonNull<u8>, in_flight: Option<Box<dyn Fence>>) {
    let addr = ptr.as_ptr() as usize;
    with_cache(|c| {
        let mut block = c.live.remove(&addr).expect("a released pinned block is live");
        block.copies.extend(in_flight);
        c.free.entry(block.class).or_default().push((addr, block));
    });
}

/// The live block holding all of `data`.
fn block_of<'c>(c: &'c mut PinnedCache, data: &[u8]) -> Option<&'c mut Block> {
    let start = data.as_ptr() as usize;
    let (&base, block) = c.live.range_mut(..=start).next_back()?;
    (start + data.len() <= base + block.class).then_some(block)
}

/// Runs `copy` (which queues a copy reading `data` on `dev`'s stream) and, when `data` lies in
/// a pinned block, records an event after it so the block is not reused before the copy ran.
/// (The caller borrows `data`, so its block stays live until this returns.)
pub(crate) fn record_copies(
    op: &'static str,
    dev: &CudaDevice,
    data: &[u8],
    copy: impl FnOnce() -> Result<()>,
) -> Result<()> {
    with_cache(|c| {
        copy()?;
        let Some(block) = block_of(c, data) else { return Ok(()) };
        block.settle();
        let event =
            dev.stream().record_event(None).map_err(|e| CudaError::driver(op, "recording the copy's event", e))?;
        block.copies.push(Box::new(event));
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use crate::cpu::CpuBuf;
    use crate::cuda::{is_available, CudaBuffer, CudaErrorKind};

    #[test]
    fn pinned_blocks_need_a_device() {
        if is_available() {
            return println!("a CUDA device is present, skipping the no-device check");
        }
        let e = CpuBuf::<f32>::pinned_from_slice("pin_memory", &[1.0, 2.0]).unwrap_err();
        assert_eq!((e.op, e.kind), ("pin_memory", CudaErrorKind::NoDevice), "{e}");
        assert!(e.message.starts_with("no CUDA device available"), "{e}");
    }

    #[test]
    #[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
    fn pinned_blocks_stay_out_of_reuse_until_copied() {
        let data: Vec<f32> = (0..300_000).map(|i| i as f32 * 0.5).collect();
        let pinned = CpuBuf::pinned_from_slice("test", &data).unwrap();
        assert!(pinned.is_pinned() && !CpuBuf::from_slice(&data).is_pinned());
        assert_eq!(&pinned[..], &data[..]);
        let mut dev = CudaBuffer::alloc(0, data.len() * 4).unwrap();
        dev.copy_from_slice(&pinned[..]).unwrap();
        let addr = pinned.as_ptr();
        // Dropped while its copy may still be queued: the block must wait for the copy.
        drop(pinned);
        assert_eq!(dev.to_vec::<f32>().unwrap(), data);
        // The stream was synchronized: the block is free again and handed out first.
        let again = CpuBuf::<f32>::pinned_from_slice("test", &data[..1000]).unwrap();
        assert_eq!(again.as_ptr(), addr);
    }
}
