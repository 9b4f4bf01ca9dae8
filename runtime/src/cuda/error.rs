//! The CUDA layer's error: which operation failed, what kind of failure, and why.
//!
//! The runtime knows nothing of `kiln::Error`; the `kiln` crate maps a [`CudaError`] into its
//! own error (kind `Device`) keeping the op name and message.

use std::fmt;

/// What went wrong in the CUDA layer, for callers that branch on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CudaErrorKind {
    /// No CUDA driver, no device, or an ordinal past the device count.
    NoDevice,
    /// NVRTC (the runtime compiler) could not be loaded.
    NoNvrtc,
    /// cuBLAS (libcublas) could not be loaded.
    NoCublas,
    /// NCCL (libnccl) could not be loaded, or is too old.
    NoNccl,
    /// NVRTC rejected a kernel's source (the message holds its log).
    Compile,
    /// A driver call failed (allocation, copy, module load, synchronize).
    Driver,
    /// A kernel launch failed, or the kernel faulted (seen at once under `KILN_CUDA_SYNC=1`).
    Launch,
    /// Arguments that do not fit the call (sizes, devices, a launch's signature).
    InvalidArgument,
    /// Device memory ran out even after the allocator's cache was released.
    OutOfMemory,
    /// Something this build does not support yet (a dtype, an op).
    Unsupported,
    /// A wait on the device or on peers (NCCL) outlasted its timeout.
    Timeout,
}

/// An error from the CUDA layer: `op: message`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaError {
    /// The operation that failed (a tensor op's name, or the runtime function's).
    pub op: &'static str,
    /// The kind of failure.
    pub kind: CudaErrorKind,
    /// What was wrong, with the device, sizes or driver message involved.
    pub message: String,
}

impl CudaError {
    /// A new error.
    pub fn new(op: &'static str, kind: CudaErrorKind, message: impl Into<String>) -> CudaError {
        CudaError { op, kind, message: message.into() }
    }

    /// The same error reported as `op`'s (a tensor op calling the runtime): the runtime
    /// function's name moves into the message, except for "no CUDA device available", which
    /// needs no more detail.
    pub fn in_op(mut self, op: &'static str) -> CudaError {
        if self.op != op && self.kind != CudaErrorKind::NoDevice {
            self.message = format!("{} (in {})", self.message, self.op);
        }
        self.op = op;
        self
    }

    /// A driver failure of `op`, with the driver's error name and text.
    pub fn driver(op: &'static str, what: &str, e: cudarc::driver::DriverError) -> CudaError {
        CudaError::new(op, CudaErrorKind::Driver, format!("{what} failed: {}", driver_message(e)))
    }
}

/// The driver's name and description of an error code (`CUDA_ERROR_X: text`).
pub(crate) fn driver_message(e: cudarc::driver::DriverError) -> String {
    let name = e.error_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|_| format!("{:?}", e.0));
    let text = e.error_string().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    if text.is_empty() {
        name
    } else {
        format!("{name}: {text}")
    }
}

impl fmt::Display for CudaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.op, self.message)
    }
}

impl std::error::Error for CudaError {}

/// `Result` with [`CudaError`].
pub type Result<T, E = CudaError> = std::result::Result<T, E>;
