//! What every host memory block shares, whoever allocates it (the caching allocator of
//! `alloc.rs`, or the CUDA runtime's pinned cache): the size classes, and the fence of a write
//! that may still be in flight into the block.

use std::alloc::Layout as AllocLayout;

/// Alignment of small blocks (a cache line).
pub(crate) const SMALL_ALIGN: usize = 64;
/// Requests of at least this many bytes get huge-page-sized classes.
pub(crate) const LARGE_THRESHOLD: usize = 1 << 20;
/// The class granularity (and alignment) of large blocks.
pub(crate) const HUGE_PAGE: usize = 2 << 20;

/// The size class (capacity in bytes) that serves a request of `bytes`, which must be one a
/// block can have (see [`checked_size_class`]; past that it panics).
pub fn size_class(bytes: usize) -> usize {
    checked_size_class(bytes)
        .unwrap_or_else(|| panic!("no block of {bytes} bytes can exist (its size class passes isize::MAX)"))
}

/// The size class that serves a request of `bytes`; `None` when no block that large can exist
/// (a class past `isize::MAX`, Rust's allocation limit).
pub fn checked_size_class(bytes: usize) -> Option<usize> {
    let class = if bytes < LARGE_THRESHOLD {
        bytes.max(SMALL_ALIGN).next_power_of_two()
    } else {
        bytes.div_ceil(HUGE_PAGE).checked_mul(HUGE_PAGE)?
    };
    alloc_layout(class).map(|_| class)
}

/// The layout of a block of a size class; `None` past `isize::MAX`.
pub(crate) fn alloc_layout(class: usize) -> Option<AllocLayout> {
    let align = if class >= LARGE_THRESHOLD { HUGE_PAGE } else { SMALL_ALIGN };
    AllocLayout::from_size_align(class, align).ok()
}

/// A write into a block that the host does not make itself and that may still be in flight
/// when the block's owner gets it back (the DMA of a device→host copy: see
/// `RawBuffer::set_pending` in `alloc.rs`).
pub(crate) trait Fence: Send + Sync {
    /// Blocks until the write has finished. An error means it may not have: the block must be
    /// neither read nor reused.
    fn wait(&self) -> Result<(), String>;
    /// Whether the write has finished, without blocking; false when that cannot be told.
    fn is_complete(&self) -> bool;
}
