//! Where an op runs: the one decision every op family makes before its kernel, made in one
//! place. Inside `kiln::compile` the op is recorded into the trace (whatever the operands'
//! devices, which must agree); otherwise it runs on the GPU when an operand lives there, and
//! on the CPU else. A family matches on [`Backend`], so a new backend is a compile error in
//! every family until each says what it does there.

use crate::error::Result;
use crate::tensor::reserve;
use crate::Tensor;
use kiln_codegen::cuda::EagerOp;
use kiln_codegen::ir::NodeKind;
use kiln_runtime::{DType, Layout};
use smallvec::SmallVec;

/// Where an op on given operands runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backend {
    /// Recorded into the trace of `kiln::compile` (nothing runs now).
    Capture,
    /// An eager kernel on the CUDA device of the operands.
    Cuda,
    /// An eager kernel on the CPU.
    Cpu,
}

impl Backend {
    /// The backend of `op` on `operands`; while capturing, an error naming `op` when the
    /// operands' devices disagree (eager kernels check that themselves).
    #[track_caller]
    pub(crate) fn of(op: &'static str, operands: &[&Tensor]) -> Result<Backend> {
        if crate::capture::is_active() {
            crate::capture::check_devices(op, operands)?;
            return Ok(Backend::Capture);
        }
        Ok(if crate::cuda::any_on_cuda(operands) { Backend::Cuda } else { Backend::Cpu })
    }
}

/// An elementwise op of `inputs` (each with its layout broadcast to `shape`), run where
/// [`Backend::of`] says: recorded as a `node` of the trace, the CUDA kernel `eager` (computing
/// in `compute`, writing `out`), or `cpu`, the CPU kernel, once the output's memory is
/// reserved here (an error for a shape too large names the caller's line: a closure cannot
/// pass `#[track_caller]` on). The elementwise families (unary, binary, comparison, logical,
/// `where`) dispatch through here.
#[track_caller]
pub(crate) fn elementwise(
    op: &'static str,
    node: NodeKind,
    eager: EagerOp,
    inputs: &[(&Tensor, Layout)],
    shape: &[usize],
    (compute, out): (DType, DType),
    cpu: impl FnOnce() -> Result<Tensor>,
) -> Result<Tensor> {
    let operands: SmallVec<[&Tensor; 3]> = inputs.iter().map(|(t, _)| *t).collect();
    match Backend::of(op, &operands)? {
        Backend::Capture => Ok(crate::capture::elementwise(node, inputs, shape, out)),
        Backend::Cuda => crate::cuda::map(op, eager, inputs, shape, compute, out),
        Backend::Cpu => {
            reserve(op, shape, out)?;
            cpu()
        }
    }
}
