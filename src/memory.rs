//! CPU memory statistics and the allocator cache (PyTorch's `torch.cuda.memory_*` family, for
//! host memory).
//!
//! Tensor storage comes from a caching allocator: freed buffers are kept by size class and
//! reused, so a training loop's steady state faults no new pages. [`empty_cache`] returns the
//! cached buffers to the system.

pub use kiln_runtime::cpu::alloc::{
    empty_cache, max_memory_allocated, memory_allocated, memory_stats, reset_peak_memory_stats, MemoryStats,
};

/// The number of tensors alive in the process: each op result and each view counts once, however
/// many handles (`Clone`s) point at it. Tests use it to check that training loops and backward
/// hold nothing after they finish.
pub fn live_tensors() -> usize {
    crate::tensor::live_tensors()
}
