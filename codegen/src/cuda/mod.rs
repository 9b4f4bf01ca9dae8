//! The CUDA C emitter: elementwise expressions become NVRTC-compiled kernels.
//!
//! - [`ops`]: the CUDA C formula of every op kind (PyTorch's semantics).
//! - [`emit`]: [`emit_elementwise`], one kernel per expression and dtype.
//! - [`launch`]: compiling (through the runtime's cached NVRTC), loading and running it on
//!   [`kiln_runtime::cuda::CudaBuffer`]s.
//!
//! `KILN_DEBUG=kernels` prints each kernel's source the first time the process compiles it.

pub mod emit;
pub mod launch;
pub mod ops;

pub use emit::{emit_elementwise, ElementwiseKernel, CUDA_CODEGEN_VERSION, ELEMENTWISE_BLOCK};
pub use launch::{run_elementwise, LoadedElementwise};
