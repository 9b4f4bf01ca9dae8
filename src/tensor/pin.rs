//! Page-locked ("pinned") host memory for tensors: `pin_memory` and `is_pinned`. A pinned
//! tensor is what [`Tensor::to_non_blocking`] copies to a CUDA device without waiting, and
//! what it returns from a CUDA device to the CPU.

use super::{cast_storage, Tensor};
use crate::autograd::{self, grads};
use crate::cuda::OrOp;
use crate::error::{bail, OrPanic, Result};
use kiln_runtime::Storage;

impl Tensor {
    /// A contiguous copy of this CPU tensor in page-locked host memory (`x.pin_memory()`), the
    /// same handle when it is pinned already. Needs a CUDA device, as in PyTorch: panics with
    /// "pin_memory: no CUDA device available" without one, and for a CUDA tensor. The gradient
    /// passes through.
    #[track_caller]
    pub fn pin_memory(&self) -> Tensor {
        self.try_pin_memory().or_panic()
    }

    /// [`Tensor::pin_memory`] returning an error without a CUDA device or for a CUDA tensor.
    #[track_caller]
    pub fn try_pin_memory(&self) -> Result<Tensor> {
        let op = "pin_memory";
        if self.device().is_cuda() {
            bail!(op, Device, "cannot pin a tensor on {}: only CPU tensors can be pinned", self.device());
        }
        if self.is_pinned() {
            return Ok(self.clone());
        }
        let pinned = self.with_cpu(op, |s, l| {
            if self.covers_storage() {
                s.pinned_copy(op)
            } else {
                cast_storage(s, l, self.dtype()).pinned_copy(op)
            }
        })?;
        let out = Tensor::from_cpu_storage(pinned.or_op(op)?, self.shape());
        if autograd::is_recording(&[self]) {
            return Ok(autograd::record(out, "PinMemoryBackward0", &[self], [], |_, g, _| grads![Some(g.clone())]));
        }
        Ok(out)
    }

    /// Whether the tensor's storage is page-locked host memory (`x.is_pinned()`): true for
    /// [`Tensor::pin_memory`]'s results, for [`Tensor::to_non_blocking`]'s from a CUDA
    /// tensor to the CPU, and their views; false for CUDA tensors. Does not wait for a
    /// non-blocking copy still filling the storage.
    #[track_caller]
    pub fn is_pinned(&self) -> bool {
        matches!(&*self.read_storage(), Storage::Cpu(s) if s.is_pinned())
    }
}
