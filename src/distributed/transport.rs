//! The byte-level interface a backend implements: start a collective on raw buffers, test it
//! for completion, abort, finalize. Everything above it (tensors, checks, deadlines) is shared
//! by the backends.

use super::options::ReduceOp;
use crate::error::Result;
use kiln_runtime::{DType, Device};
use std::ffi::c_void;

/// The element types a transport moves and reduces natively. On the CPU (MPI) F16 and BF16
/// tensors travel as F32, reduced in F32 and rounded once (MPI has no half-precision
/// reductions); on CUDA (NCCL) they travel as themselves and NCCL reduces them, as PyTorch's
/// NCCL backend does (half the bytes; each step's sum rounded to the half type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wire {
    F32,
    F64,
    F16,
    BF16,
    I64,
    I32,
    U8,
    Bool,
}

impl Wire {
    /// The wire type of `dtype` on a transport for `device`, or `None` for the dtypes staged
    /// through F32 there (F16 and BF16 on the CPU).
    pub(crate) fn native(dtype: DType, device: Device) -> Option<Wire> {
        Some(match dtype {
            DType::F32 => Wire::F32,
            DType::F64 => Wire::F64,
            DType::I64 => Wire::I64,
            DType::I32 => Wire::I32,
            DType::U8 => Wire::U8,
            DType::Bool => Wire::Bool,
            DType::F16 if device.is_cuda() => Wire::F16,
            DType::BF16 if device.is_cuda() => Wire::BF16,
            DType::F16 | DType::BF16 => return None,
        })
    }

    /// The wire type `dtype` travels as on a transport for `device` (F16 and BF16 as F32 on
    /// the CPU).
    pub(crate) fn of(dtype: DType, device: Device) -> Wire {
        Wire::native(dtype, device).unwrap_or(Wire::F32)
    }

    /// The bytes of one element (the MPI transport sizes its messages with it).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn bytes(self) -> usize {
        match self {
            Wire::F64 | Wire::I64 => 8,
            Wire::F32 | Wire::I32 => 4,
            Wire::F16 | Wire::BF16 => 2,
            Wire::U8 | Wire::Bool => 1,
        }
    }

    /// The dtype of a tensor holding wire elements.
    pub(crate) fn dtype(self) -> DType {
        match self {
            Wire::F32 => DType::F32,
            Wire::F64 => DType::F64,
            Wire::F16 => DType::F16,
            Wire::BF16 => DType::BF16,
            Wire::I64 => DType::I64,
            Wire::I32 => DType::I32,
            Wire::U8 => DType::U8,
            Wire::Bool => DType::Bool,
        }
    }
}

/// A collective as a transport sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    /// `count` elements from every rank reduced into `count` elements on every rank.
    AllReduce(ReduceOp),
    /// `count` elements of `root` copied to every rank (`send` is read on the root, `recv` is
    /// written on the others).
    Broadcast { root: usize },
    /// `count` elements from every rank concatenated into `count * world_size` on every rank.
    AllGather,
    /// `count * world_size` elements from every rank reduced, block `r` of `count` landing on
    /// rank `r`.
    ReduceScatter(ReduceOp),
    /// No data: completes once every rank has started it.
    Barrier,
}

impl Call {
    /// A small code for the cross-rank agreement check.
    pub(crate) fn code(self) -> i64 {
        match self {
            Call::AllReduce(op) => 10 + op.code(),
            Call::Broadcast { root } => 100 + root as i64,
            Call::AllGather => 20,
            Call::ReduceScatter(op) => 30 + op.code(),
            Call::Barrier => 40,
        }
    }
}

/// A started collective, named by the transport that started it.
#[derive(Debug)]
pub(crate) struct Request(pub(crate) usize);

impl Request {
    /// Puts `x` in the first free slot of `slots` (a new one when none is free) and returns
    /// the request naming that slot.
    pub(crate) fn store<T>(slots: &mut Vec<Option<T>>, x: T) -> Request {
        let slot = match slots.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                slots.push(None);
                slots.len() - 1
            }
        };
        slots[slot] = Some(x);
        Request(slot)
    }
}

/// What a backend provides. Implementations are used under the process group's lock only, so
/// no two calls run at once.
pub(crate) trait Transport: Send {
    /// This process's rank.
    fn rank(&self) -> usize;
    /// The number of processes.
    fn world_size(&self) -> usize;
    /// Where the tensors this transport moves live: the CPU for MPI, the rank's GPU for NCCL
    /// (whose buffers are device addresses).
    fn device(&self) -> Device;
    /// Starts `call` on `count` elements of type `wire` (see [`Call`] for the buffer sizes).
    ///
    /// # Safety
    /// `send` must be readable and `recv` writable for the sizes [`Call`] gives, `recv` must not
    /// be read or written by anything else, and both must stay valid until [`Transport::test`]
    /// reports completion (forever if it never does).
    unsafe fn start(
        &mut self,
        call: Call,
        wire: Wire,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
    ) -> Result<Request>;
    /// Whether `request` has completed (then it is released). Drives the library's progress.
    fn test(&mut self, request: &Request) -> Result<bool>;
    /// Ends every process of the job with `code` (after a timeout, when finalizing would wait
    /// for a dead peer).
    fn abort(&mut self, code: i32) -> !;
    /// Shuts the library down cleanly.
    fn finalize(self: Box<Self>);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_types_travel_as_f32_on_the_cpu_and_as_themselves_on_cuda() {
        for dtype in DType::ALL {
            let cpu = Wire::of(dtype, Device::Cpu);
            let cuda = Wire::of(dtype, Device::Cuda(0));
            match dtype {
                DType::F16 | DType::BF16 => {
                    assert_eq!((Wire::native(dtype, Device::Cpu), cpu), (None, Wire::F32));
                    assert_eq!((cuda.dtype(), cuda.bytes()), (dtype, 2));
                }
                _ => {
                    assert_eq!(cpu, cuda, "{dtype}");
                    assert_eq!((cpu.dtype(), cpu.bytes()), (dtype, dtype.size_in_bytes()), "{dtype}");
                }
            }
        }
    }
}
