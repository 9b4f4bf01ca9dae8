//! CPU memory statistics and the allocator cache (PyTorch's `torch.cuda.memory_*` family, for
//! host memory).
//!
//! Tensor storage comes from a caching allocator: freed buffers are kept by size class and
//! reused, so a training loop's steady state faults no new pages. [`empty_cache`] returns the
//! cached buffers to the system.

pub use kiln_runtime::cpu::alloc::{
    empty_cache, max_memory_allocated, memory_allocated, memory_stats, reset_peak_memory_stats, MemoryStats,
};
