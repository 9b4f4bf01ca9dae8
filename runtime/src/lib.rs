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

use std::sync::atomic::{AtomicBool, Ordering};

static DETERMINISTIC: AtomicBool = AtomicBool::new(false);

/// Sets the process-wide deterministic-algorithms mode (`torch.use_deterministic_algorithms`):
/// when on, a kernel whose result depends on scheduling (atomics, racing accumulation) must be
/// replaced by a deterministic one or refuse to run. Kernels that have such a variant check
/// [`deterministic_algorithms`].
pub fn set_deterministic_algorithms(on: bool) {
    DETERMINISTIC.store(on, Ordering::Relaxed);
}

/// Whether the deterministic-algorithms mode is on (`torch.are_deterministic_algorithms_enabled`).
pub fn deterministic_algorithms() -> bool {
    DETERMINISTIC.load(Ordering::Relaxed)
}
