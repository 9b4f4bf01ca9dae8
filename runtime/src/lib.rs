//! kiln-runtime: where kernels run.
//!
//! This crate knows nothing of autograd or graphs. It holds the element types ([`DType`],
//! [`Element`]), devices ([`Device`]), strided layouts ([`Layout`]), storage ([`Storage`]) with
//! its caching CPU allocator, the kinds of elementwise/reduction operations shared by eager
//! kernels and the code generator ([`op_kind`]), the native CPU kernels ([`cpu`]), and CUDA
//! (devices, memory, NVRTC, launches: [`cuda`]), loaded at run time.

pub mod cpu;
pub mod cuda;
pub mod device;
pub mod dtype;
pub mod layout;
pub mod op_kind;
pub mod storage;

pub use device::Device;
pub use dtype::{DType, Element, FloatElement};
pub use layout::{Layout, Shape};
pub use storage::{CpuStorage, Storage};
