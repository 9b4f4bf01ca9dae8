//! The caching CPU allocator.
//!
//! A freshly page-faulted buffer is written at a fraction of memory bandwidth (measured ~4.5 GB/s
//! against ~30 GB/s here), so a training loop that allocates each step's tensors anew pays that on
//! every op. Like PyTorch's CUDA allocator, kiln keeps freed buffers in free lists by size class
//! and hands them out again: in the steady state of a loop no page is faulted.
//!
//! Size classes: below 1 MiB the next power of two (at least 64 bytes, 64-byte aligned); from
//! 1 MiB on, the next multiple of 2 MiB, aligned to 2 MiB and advised for transparent huge pages.

use super::host_block::{alloc_layout, Fence, LARGE_THRESHOLD};
pub use super::host_block::{checked_size_class, size_class};
use ahash::AHashMap;
use std::alloc;
use std::ptr::NonNull;
use std::sync::{Mutex, OnceLock};

/// Counters of the CPU caching allocator, as `torch.cuda.memory_stats` reports them for CUDA.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes (by size class) held by live buffers.
    pub allocated: usize,
    /// The largest `allocated` seen since start or the last [`reset_peak_memory_stats`].
    pub max_allocated: usize,
    /// Bytes held in the free lists, ready for reuse.
    pub cached: usize,
    /// Allocations served from the free lists.
    pub cache_hits: u64,
    /// Allocations that went to the system allocator.
    pub system_allocs: u64,
}

struct Cache {
    free: AHashMap<usize, Vec<NonNull<u8>>>,
    stats: MemoryStats,
}

// SAFETY: the pointers in the free lists are owned by the cache alone (no buffer refers to them
// while they are listed), so moving the cache between threads moves sole ownership.
unsafe impl Send for Cache {}

static CACHE: Mutex<Option<Cache>> = Mutex::new(None);

fn with_cache<R>(f: impl FnOnce(&mut Cache) -> R) -> R {
    let mut guard = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let cache = guard.get_or_insert_with(|| Cache { free: AHashMap::new(), stats: MemoryStats::default() });
    f(cache)
}

/// An allocation the system refused, or one too large to ask for (past `isize::MAX`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocError {
    /// The bytes requested.
    pub bytes: usize,
}

impl std::fmt::Display for AllocError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "out of memory: the system refused to allocate {} bytes ({})", self.bytes, human_bytes(self.bytes))
    }
}

impl std::error::Error for AllocError {}

/// A byte count in binary units with one decimal (`3.0 GiB`), for messages.
pub fn human_bytes(bytes: usize) -> String {
    const UNITS: [&str; 7] = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// A fresh zeroed block of a size class from the system; `None` when the system refuses it
/// (the cached blocks are kept: [`empty_cache`] returns them, for a caller that wants to try
/// again).
fn system_alloc(class: usize) -> Option<NonNull<u8>> {
    let layout = alloc_layout(class)?;
    // SAFETY: the layout has a non-zero size (class >= 64) and a power-of-two alignment.
    let ptr = NonNull::new(unsafe { alloc::alloc_zeroed(layout) })?;
    if class >= LARGE_THRESHOLD {
        advise_huge_pages(ptr, class);
    }
    Some(ptr)
}

/// Makes sure the free lists hold a block that serves `bytes`, taking it from the system when
/// they do not, so that the next [`RawBuffer::acquire`] of that size (an op's output, which the
/// op reserved before running its kernel) is served without asking the system: an allocation
/// the system refuses is reported here, as an error, instead of failing inside a kernel. A
/// block another thread takes in between is not a fault: that acquire then asks the system.
pub fn reserve(bytes: usize) -> Result<(), AllocError> {
    let class = checked_size_class(bytes).ok_or(AllocError { bytes })?;
    if with_cache(|c| c.free.get(&class).is_some_and(|list| !list.is_empty())) {
        return Ok(());
    }
    let ptr = system_alloc(class).ok_or(AllocError { bytes })?;
    with_cache(|c| {
        c.stats.system_allocs += 1;
        c.stats.cached += class;
        c.free.entry(class).or_default().push(ptr);
    });
    Ok(())
}

/// A block's write in flight, and whether a host access has waited for it already.
struct Pending {
    fence: Box<dyn Fence>,
    waited: OnceLock<()>,
}

/// A block of CPU memory from the caching allocator, or a page-locked block from the CUDA
/// runtime's pinned cache ([`crate::cuda::pinned`]; not counted in this allocator's
/// statistics); returned to its cache on drop.
///
/// Its bytes are always initialized: fresh blocks are zeroed, reused blocks hold what their last
/// owner wrote. A block may carry a write still in flight (`set_pending`): every host access
/// goes through [`RawBuffer::as_ptr`], which waits for it the first time, so the write is never
/// observed half-done.
pub struct RawBuffer {
    ptr: NonNull<u8>,
    class: usize,
    pinned: bool,
    pending: Option<Pending>,
}

// SAFETY: a RawBuffer is the unique owner of its block; access goes through the typed buffer that
// owns it, which follows Rust's borrowing rules, and through `as_ptr`, which first waits (once,
// for every thread: `OnceLock` makes the others block until the first waiter is done, and
// publishes the block's bytes to them) for a write in flight. `Fence` is `Send + Sync`.
unsafe impl Send for RawBuffer {}
// SAFETY: as for `Send` above.
unsafe impl Sync for RawBuffer {}

impl RawBuffer {
    /// A block of at least `bytes` bytes, and whether it is freshly zeroed (true) or reused; an
    /// error when the system refuses the memory (or `bytes` is past `isize::MAX`).
    pub fn try_acquire(bytes: usize) -> Result<(RawBuffer, bool), AllocError> {
        if bytes == 0 {
            return Ok((RawBuffer::empty(), false));
        }
        let class = checked_size_class(bytes).ok_or(AllocError { bytes })?;
        let hit = with_cache(|c| {
            let hit = c.free.get_mut(&class).and_then(Vec::pop);
            if hit.is_some() {
                c.stats.cached -= class;
                c.stats.cache_hits += 1;
                c.stats.allocated += class;
                c.stats.max_allocated = c.stats.max_allocated.max(c.stats.allocated);
            }
            hit
        });
        if let Some(ptr) = hit {
            return Ok((RawBuffer { ptr, class, pinned: false, pending: None }, false));
        }
        let ptr = system_alloc(class).ok_or(AllocError { bytes })?;
        with_cache(|c| {
            c.stats.system_allocs += 1;
            c.stats.allocated += class;
            c.stats.max_allocated = c.stats.max_allocated.max(c.stats.allocated);
        });
        Ok((RawBuffer { ptr, class, pinned: false, pending: None }, true))
    }

    /// A block of no bytes (class 0): no allocation, nothing to give back. Storages that a
    /// compiled step will compute start empty, so capturing an op allocates nothing.
    fn empty() -> RawBuffer {
        /// The strictest alignment an element type needs; the block's pointer is dangling at it.
        #[repr(align(64))]
        struct Aligned;
        RawBuffer { ptr: NonNull::<Aligned>::dangling().cast(), class: 0, pinned: false, pending: None }
    }

    /// [`RawBuffer::try_acquire`] for the kernels' own allocations: a refusal panics with the
    /// bytes requested (an unwinding panic, never an abort). Ops reserve their outputs first
    /// ([`reserve`]), so a refusal there is an error naming the op instead.
    pub fn acquire(bytes: usize) -> (RawBuffer, bool) {
        Self::try_acquire(bytes).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A page-locked block of at least `bytes` bytes (needs a CUDA device: `op` names the
    /// caller in the "no CUDA device available" error).
    pub fn acquire_pinned(op: &'static str, bytes: usize) -> crate::cuda::Result<RawBuffer> {
        let (ptr, class) = crate::cuda::pinned::allocate(op, bytes)?;
        Ok(RawBuffer { ptr, class, pinned: true, pending: None })
    }

    /// Whether the block is page-locked (from [`RawBuffer::acquire_pinned`]).
    pub fn is_pinned(&self) -> bool {
        self.pinned
    }

    /// The start of the block, once a write in flight (`set_pending`) has finished: the first
    /// call waits for it (and panics if the wait fails: the bytes may still be changing).
    #[inline]
    pub fn as_ptr(&self) -> *mut u8 {
        if let Some(p) = &self.pending {
            p.waited.get_or_init(|| {
                if let Err(e) = p.fence.wait() {
                    panic!("waiting for an asynchronous copy into host memory failed: {e}");
                }
            });
        }
        self.ptr.as_ptr()
    }

    /// Records that `fence`'s write into the block (queued through a pointer taken before this
    /// call) may still be in flight: the next host access waits for it, and dropping the block
    /// before then hands it to its cache only once the write has finished (a pinned block is
    /// kept out of reuse until then, a CPU one is waited for). A write pending already is
    /// waited for first.
    pub(crate) fn set_pending(&mut self, fence: Box<dyn Fence>) {
        self.as_ptr();
        self.pending = Some(Pending { fence, waited: OnceLock::new() });
    }

    /// The usable size of the block in bytes.
    pub fn capacity(&self) -> usize {
        self.class
    }
}

impl Drop for RawBuffer {
    fn drop(&mut self) {
        if self.class == 0 {
            return; // `RawBuffer::empty`: nothing was allocated
        }
        let in_flight = self.pending.take().filter(|p| p.waited.get().is_none()).map(|p| p.fence);
        if self.pinned {
            return crate::cuda::pinned::release(self.ptr, in_flight);
        }
        if in_flight.is_some_and(|f| f.wait().is_err()) {
            // The write may still land: the block is leaked rather than handed out again.
            return;
        }
        let (ptr, class) = (self.ptr, self.class);
        with_cache(|c| {
            c.stats.allocated -= class;
            c.stats.cached += class;
            c.free.entry(class).or_default().push(ptr);
        });
    }
}

#[cfg(target_os = "linux")]
fn advise_huge_pages(ptr: NonNull<u8>, len: usize) {
    // SAFETY: [ptr, ptr+len) is a block we own, 2 MiB aligned; madvise only changes paging hints
    // and cannot affect memory safety. Failure (THP disabled) is harmless and ignored.
    unsafe {
        libc::madvise(ptr.as_ptr().cast(), len, libc::MADV_HUGEPAGE);
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_ptr: NonNull<u8>, _len: usize) {}

/// Current allocator counters.
pub fn memory_stats() -> MemoryStats {
    with_cache(|c| c.stats)
}

/// Bytes held by live CPU buffers (`torch.cuda.memory_allocated` for the CPU).
pub fn memory_allocated() -> usize {
    memory_stats().allocated
}

/// The peak of [`memory_allocated`].
pub fn max_memory_allocated() -> usize {
    memory_stats().max_allocated
}

/// Restarts the peak counter at the current allocation.
pub fn reset_peak_memory_stats() {
    with_cache(|c| c.stats.max_allocated = c.stats.allocated);
}

/// Returns every cached (free) block to the system (`torch.cuda.empty_cache`).
pub fn empty_cache() {
    let blocks: Vec<(usize, Vec<NonNull<u8>>)> = with_cache(|c| {
        c.stats.cached = 0;
        c.free.drain().collect()
    });
    for (class, ptrs) in blocks {
        for ptr in ptrs {
            let layout = alloc_layout(class).expect("a cached block's class has a layout");
            // SAFETY: each pointer came from alloc_zeroed with alloc_layout(class) and is owned
            // by the cache alone, which just gave it up.
            unsafe { alloc::dealloc(ptr.as_ptr(), layout) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::host_block::{HUGE_PAGE, SMALL_ALIGN};

    #[test]
    fn size_classes() {
        assert_eq!(size_class(1), 64);
        assert_eq!(size_class(65), 128);
        assert_eq!(size_class((1 << 20) - 1), 1 << 20);
        assert_eq!(size_class(1 << 20), 2 << 20);
        assert_eq!(size_class(64 << 20), 64 << 20);
        assert_eq!(size_class((64 << 20) + 1), 66 << 20);
        // Past isize::MAX (with the class's rounding) no block can exist.
        assert_eq!(checked_size_class(64 << 20), Some(64 << 20));
        assert_eq!(checked_size_class(isize::MAX as usize), None);
        assert_eq!(checked_size_class(usize::MAX), None);
    }

    #[test]
    fn an_empty_block_takes_no_memory_and_is_aligned() {
        let (b, fresh) = RawBuffer::acquire(0);
        assert_eq!((b.capacity(), fresh), (0, false));
        assert_eq!(b.as_ptr() as usize % 64, 0, "aligned for every element type");
        use crate::cpu::buffer::CpuBuf;
        let buf = CpuBuf::<f64>::uninit(0);
        assert!(buf[..].is_empty() && CpuBuf::<u8>::zeros(0).is_empty());
        drop((b, buf)); // nothing to give back: the cache's lists are not touched
    }

    /// 2^50 bytes (1 PiB): more than the 47-bit user address space Linux gives a process by
    /// default, so the system refuses it whatever the overcommit setting (nothing is touched).
    const REFUSED: usize = 1 << 50;

    #[test]
    fn a_refused_allocation_is_an_error_and_leaves_the_counters() {
        let class = size_class(REFUSED);
        assert_eq!(RawBuffer::try_acquire(REFUSED).err(), Some(AllocError { bytes: REFUSED }));
        assert_eq!(reserve(REFUSED), Err(AllocError { bytes: REFUSED }));
        assert_eq!(RawBuffer::try_acquire(usize::MAX).err(), Some(AllocError { bytes: usize::MAX }));
        assert_eq!(with_cache(|c| c.free.get(&class).map_or(0, Vec::len)), 0, "nothing was listed");
        assert!(memory_stats().allocated < class, "nothing was counted as allocated");
        assert_eq!(
            AllocError { bytes: REFUSED }.to_string(),
            "out of memory: the system refused to allocate 1125899906842624 bytes (1.0 PiB)"
        );
        // The infallible form unwinds with the same message instead of aborting the process.
        let e = std::panic::catch_unwind(|| drop(RawBuffer::acquire(REFUSED))).unwrap_err();
        assert!(e
            .downcast_ref::<String>()
            .unwrap()
            .starts_with("out of memory: the system refused to allocate 1125899906842624 bytes"));
    }

    #[test]
    fn a_reserved_block_serves_the_next_acquire() {
        // A size no other test uses, so parallel tests cannot take the block in between.
        let bytes = 5 * HUGE_PAGE + 777;
        let listed = || with_cache(|c| c.free.get(&(6 * HUGE_PAGE)).map_or(0, Vec::len));
        reserve(bytes).unwrap();
        assert_eq!(listed(), 1);
        reserve(bytes).unwrap();
        assert_eq!(listed(), 1, "a class already listed is not reserved twice");
        let (b, fresh) = RawBuffer::try_acquire(bytes).unwrap();
        assert!(!fresh, "the reserved block is taken from the free list");
        assert_eq!((b.capacity(), listed()), (6 * HUGE_PAGE, 0));
    }

    #[test]
    fn byte_counts_read_in_binary_units() {
        assert_eq!(human_bytes(1000), "1000 bytes");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
        assert_eq!(human_bytes(usize::MAX), "16.0 EiB");
    }

    #[test]
    fn freed_block_is_reused_and_aligned() {
        // A size no other test uses, so parallel tests cannot take the block in between.
        let bytes = 3 * HUGE_PAGE + 12345;
        let (a, fresh) = RawBuffer::acquire(bytes);
        assert!(fresh);
        assert_eq!(a.as_ptr() as usize % HUGE_PAGE, 0);
        let p = a.as_ptr();
        drop(a);
        let (b, fresh) = RawBuffer::acquire(bytes);
        assert!(!fresh, "a freed block of the same class must be reused");
        assert_eq!(b.as_ptr(), p);
        let small = RawBuffer::acquire(100).0;
        assert_eq!(small.as_ptr() as usize % SMALL_ALIGN, 0);
        assert!(memory_allocated() >= b.capacity() + small.capacity());
    }
}
