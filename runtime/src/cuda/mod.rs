//! CUDA: devices, memory, NVRTC compilation and kernel launches.
//!
//! Everything is loaded at run time (cudarc's dynamic loading): a build without CUDA installed
//! runs, answers "not available", and every entry point returns a [`CudaError`] ("no CUDA device
//! available", naming the op) instead of panicking.
//!
//! - [`context`]: driver discovery, one context and one stream per device ([`device`]).
//! - [`alloc`]: the caching allocator and its statistics.
//! - [`buffer`]: [`CudaBuffer`], device bytes with host↔device copies.
//! - [`pinned`]: page-locked host blocks (`pin_memory`) and the events that keep a block out
//!   of reuse until the asynchronous copies reading it have run.
//! - [`nvrtc`] / [`compile`](mod@compile): loading NVRTC, compiling CUDA C to CUBIN, the kernel cache.
//! - [`storage`]: [`CudaStorage`], a tensor's typed elements on a device.
//! - [`kernel`]: loading CUBIN and launching with checked arguments; `KILN_CUDA_SYNC=1`.
//! - [`blas`]: cuBLAS batched matrix products (one handle per device, on its stream) and the
//!   TF32 switch.
//! - [`nccl`]: NCCL communicators and collectives on device buffers, on the device's stream.

pub mod alloc;
pub mod blas;
pub mod buffer;
pub mod compile;
pub mod context;
pub mod error;
pub mod kernel;
pub mod nccl;
pub mod nvrtc;
pub mod pinned;
pub mod storage;

pub use alloc::{
    empty_cache, max_memory_allocated, memory_allocated, memory_reserved, memory_stats, reset_peak_memory_stats,
    CudaMemoryStats,
};
pub use blas::{allow_tf32, cublas_available, gemm, set_allow_tf32, GemmOperand, GemmShape, MatrixLayout};
pub use buffer::{CudaBuffer, DeviceElement};
pub use compile::{compile, compile_stats, CompileStats, Compiled, Origin};
pub use context::{device, device_count, is_available, no_device, synchronize, CudaDevice};
pub use error::{CudaError, CudaErrorKind, Result};
pub use kernel::{launch_blocking, set_launch_blocking, CudaKernel, KernelArg, LaunchDims, Param};
pub use nvrtc::{nvrtc_available, nvrtc_for_tests, NvrtcInfo};
pub use storage::CudaStorage;
