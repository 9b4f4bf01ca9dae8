//! Devices a tensor can live on.

use std::fmt;

/// Where a tensor's storage lives: host memory or the `i`-th CUDA device.
///
/// `Cuda(i)` can be named before CUDA support is built: any op on such a tensor then fails with
/// a clear "CUDA support is not built yet" error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Device {
    /// Host memory, native CPU kernels.
    #[default]
    Cpu,
    /// The CUDA device with this ordinal.
    Cuda(usize),
}

impl Device {
    /// True for `Device::Cpu`.
    pub fn is_cpu(&self) -> bool {
        matches!(self, Device::Cpu)
    }

    /// True for any `Device::Cuda(_)`.
    pub fn is_cuda(&self) -> bool {
        matches!(self, Device::Cuda(_))
    }

    /// Whether a CUDA device can be used by this build. Always false until CUDA support lands.
    pub fn cuda_is_available() -> bool {
        false
    }

    /// Number of usable CUDA devices. Always 0 until CUDA support lands.
    pub fn cuda_device_count() -> usize {
        0
    }

    /// `Cuda(i)` when a CUDA device is available, `Cpu` otherwise (PyTorch's
    /// `torch.device("cuda:0" if torch.cuda.is_available() else "cpu")`).
    pub fn cuda_if_available(i: usize) -> Device {
        if Self::cuda_is_available() && i < Self::cuda_device_count() {
            Device::Cuda(i)
        } else {
            Device::Cpu
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_matches_pytorch() {
        assert_eq!(Device::Cpu.to_string(), "cpu");
        assert_eq!(Device::Cuda(1).to_string(), "cuda:1");
    }

    #[test]
    fn cuda_if_available_falls_back_to_cpu() {
        assert_eq!(Device::cuda_if_available(0), Device::Cpu);
    }
}
