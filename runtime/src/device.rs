//! Devices a tensor can live on.

use std::fmt;

/// Where a tensor's storage lives: host memory or the `i`-th CUDA device.
///
/// `Cuda(i)` can always be named; whether such a device exists is answered at run time
/// ([`Device::cuda_is_available`]), and an op on a missing device fails with "no CUDA device
/// available", naming the op.
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

    /// Whether a CUDA device can be used: the driver library loads and reports at least one
    /// device. Answered once per process (no CUDA installed: `false`, never a panic).
    pub fn cuda_is_available() -> bool {
        crate::cuda::is_available()
    }

    /// Number of usable CUDA devices (0 without a driver).
    pub fn cuda_device_count() -> usize {
        crate::cuda::device_count()
    }

    /// Waits until all work queued on this device has finished (PyTorch's
    /// `torch.cuda.synchronize(device)`): on `Cuda(i)`, every kernel and copy on its stream,
    /// including the device→host copies of `to_non_blocking(&Device::Cpu)`, which are complete
    /// when this returns. A no-op for `Cpu`. Fails without such a device, or with the
    /// asynchronous error (a kernel fault) the queued work raised.
    pub fn synchronize(&self) -> crate::cuda::Result<()> {
        match self {
            Device::Cpu => Ok(()),
            Device::Cuda(i) => crate::cuda::synchronize(*i),
        }
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
        let want = if Device::cuda_device_count() > 0 { Device::Cuda(0) } else { Device::Cpu };
        assert_eq!(Device::cuda_if_available(0), want);
        assert_eq!(Device::cuda_if_available(usize::MAX), Device::Cpu);
        assert_eq!(Device::cuda_is_available(), Device::cuda_device_count() > 0);
    }

    #[test]
    fn synchronize_is_a_no_op_on_the_cpu_and_needs_the_device_on_cuda() {
        Device::Cpu.synchronize().unwrap();
        let e = Device::Cuda(usize::MAX).synchronize().unwrap_err();
        assert!(e.to_string().starts_with("synchronize: no CUDA device available"), "{e}");
    }
}
