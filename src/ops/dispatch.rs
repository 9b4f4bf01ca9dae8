//! Where an op runs: the one decision every op family makes before its kernel, made in one
//! place. Inside `kiln::compile` the op is recorded into the trace (whatever the operands'
//! devices, which must agree); otherwise it runs on the GPU when an operand lives there, and
//! on the CPU else. A family matches on [`Backend`], so a new backend is a compile error in
//! every family until each says what it does there. Elementwise ops go through
//! [`elementwise`] (a trace node the code generators fuse); ops with a kernel of their own
//! (matmul, conv, pooling, softmax, sorting, cat, gathers, reductions a plan does not generate)
//! through [`kernel_op`] and [`kernel_op2`] (an opaque node that runs the same kernel); indexed
//! writes (`scatter_`, `index_put_`, `index_fill_`) through [`write_op`] and [`written_copy`]
//! (captured, the written copy is an opaque node assigned back); ops whose result's shape
//! depends on their operands' values (`masked_select`, `nonzero`) through [`data_dependent`],
//! which reads the operands at once (inside `kiln::compile`, a graph break when one is pending).

use crate::error::{bail, AtCaller, Result};
use crate::tensor::reserve;
use crate::Tensor;
use kiln_codegen::cuda::EagerOp;
use kiln_codegen::ir::NodeKind;
use kiln_runtime::{DType, Layout};
use smallvec::SmallVec;
use std::sync::{Arc, Mutex};

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

/// A kernel of an op the code generators do not know (matmul, convolution, pooling, sorting,
/// …): it takes the realized operands and returns the result.
pub(crate) trait Kernel<R>: FnOnce(&[Tensor]) -> Result<R> + Send + 'static {}
impl<R, F: FnOnce(&[Tensor]) -> Result<R> + Send + 'static> Kernel<R> for F {}

/// An op with a kernel of its own, run where [`Backend::of`] says: inside `kiln::compile` an
/// opaque node of the trace, which runs the kernel of its operands' device when the plan runs;
/// otherwise `cuda` at once, or `cpu` once the output's memory (`out`: shape and dtype) is
/// reserved here. Errors name the caller's line.
#[track_caller]
pub(crate) fn kernel_op(
    op: &'static str,
    operands: &[&Tensor],
    (shape, dtype): (&[usize], DType),
    cpu: impl Kernel<Tensor>,
    cuda: impl Kernel<Tensor>,
) -> Result<Tensor> {
    let backend = Backend::of(op, operands)?;
    if backend == Backend::Capture {
        return Ok(crate::capture::opaque(op, operands, shape, dtype, move |ins| on_device(ins, cpu, cuda)));
    }
    if backend == Backend::Cpu {
        reserve(op, shape, dtype)?;
    }
    on_device(&owned(operands), cpu, cuda).at_caller()
}

/// [`kernel_op`] for an op with two results (values and indices: `sort`, `max_pool2d`, …),
/// `outs` their shapes and dtypes: [`kernel_ops`] with the results as a pair.
#[track_caller]
pub(crate) fn kernel_op2(
    op: &'static str,
    operands: &[&Tensor],
    outs: [(&[usize], DType); 2],
    cpu: impl Kernel<(Tensor, Tensor)>,
    cuda: impl Kernel<(Tensor, Tensor)>,
) -> Result<(Tensor, Tensor)> {
    let pair = |(a, b)| [a, b];
    let [a, b] = kernel_ops(op, operands, outs, move |ins| cpu(ins).map(pair), move |ins| cuda(ins).map(pair))?;
    Ok((a, b))
}

/// [`kernel_op`] for an op with `N` results, `outs` their shapes and dtypes. Captured, each
/// result is an opaque node (a node has one result); whichever runs first runs the kernel and
/// leaves the other results for the other nodes.
#[track_caller]
pub(crate) fn kernel_ops<const N: usize>(
    op: &'static str,
    operands: &[&Tensor],
    outs: [(&[usize], DType); N],
    cpu: impl Kernel<[Tensor; N]>,
    cuda: impl Kernel<[Tensor; N]>,
) -> Result<[Tensor; N]> {
    let backend = Backend::of(op, operands)?;
    if backend == Backend::Capture {
        let shared = Arc::new(Mutex::new(Results::Kernels(Box::new(move |ins| on_device(ins, cpu, cuda)))));
        return Ok(std::array::from_fn(|i| {
            let shared = shared.clone();
            let (shape, dtype) = outs[i];
            crate::capture::opaque(op, operands, shape, dtype, move |ins| Results::take(op, &shared, i, ins))
        }));
    }
    if backend == Backend::Cpu {
        for (shape, dtype) in outs {
            reserve(op, shape, dtype)?;
        }
    }
    on_device(&owned(operands), cpu, cuda).at_caller()
}

/// A kernel writing into its first argument in place from the realized operands (an indexed
/// write: `scatter_`, `index_put_`, `index_fill_`).
pub(crate) trait WriteKernel: FnOnce(&Tensor, &[Tensor]) -> Result<()> + Send + 'static {}
impl<F: FnOnce(&Tensor, &[Tensor]) -> Result<()> + Send + 'static> WriteKernel for F {}

/// A write of `operands` into `dst` in place, run where [`Backend::of`] says: inside
/// `kiln::compile` the [`written_copy`] of `dst`, assigned back to it in the trace (the write
/// joins the plan, no graph break); otherwise `cuda` or `cpu` writing `dst` at once. The caller
/// has checked that `dst` may be written. Errors name the caller's line.
#[track_caller]
pub(crate) fn write_op(
    op: &'static str,
    dst: &Tensor,
    operands: &[&Tensor],
    cpu: impl WriteKernel,
    cuda: impl WriteKernel,
) -> Result<()> {
    let all: SmallVec<[&Tensor; 4]> = std::iter::once(dst).chain(operands.iter().copied()).collect();
    match Backend::of(op, &all)? {
        Backend::Capture => {
            let written = written_copy(op, dst, operands, cpu, cuda)?;
            crate::capture::assign(dst, &written);
            Ok(())
        }
        Backend::Cuda => cuda(dst, &owned(operands)).at_caller(),
        Backend::Cpu => cpu(dst, &owned(operands)).at_caller(),
    }
}

/// A copy of `x` written by the kernel of its device ([`write_op`] out of place: `scatter`,
/// `index_put`, `index_fill`), dispatched as [`kernel_op`].
#[track_caller]
pub(crate) fn written_copy(
    op: &'static str,
    x: &Tensor,
    operands: &[&Tensor],
    cpu: impl WriteKernel,
    cuda: impl WriteKernel,
) -> Result<Tensor> {
    let all: SmallVec<[&Tensor; 4]> = std::iter::once(x).chain(operands.iter().copied()).collect();
    let copy_then = |write: Box<dyn FnOnce(&Tensor, &[Tensor]) -> Result<()> + Send>| {
        move |ins: &[Tensor]| {
            let out = ins[0].deep_clone();
            write(&out, &ins[1..])?;
            Ok(out)
        }
    };
    kernel_op(op, &all, (x.shape(), x.dtype()), copy_then(Box::new(cpu)), copy_then(Box::new(cuda)))
}

/// An op whose result's shape depends on its operands' values (`masked_select`, `nonzero`):
/// no trace can hold it, so it runs at once on the operands' device, even inside
/// `kiln::compile` (where reading an operand the trace has not computed yet realizes the trace
/// first: a graph break, counted in the step's stats with this caller's line).
#[track_caller]
pub(crate) fn data_dependent<R>(
    op: &'static str,
    operands: &[&Tensor],
    cpu: impl FnOnce(&[Tensor]) -> Result<R>,
    cuda: impl FnOnce(&[Tensor]) -> Result<R>,
) -> Result<R> {
    if crate::capture::is_active() {
        crate::capture::check_devices(op, operands)?;
    }
    on_device(&owned(operands), cpu, cuda).at_caller()
}

/// The state the opaque nodes of one `N`-result kernel share: the kernel until one of them
/// runs it, then the results the others have not taken yet.
enum Results<const N: usize> {
    Kernels(ResultsKernel<N>),
    Left([Option<Tensor>; N]),
}

/// The kernel of a captured op with `N` results.
type ResultsKernel<const N: usize> = Box<dyn FnOnce(&[Tensor]) -> Result<[Tensor; N]> + Send>;

impl<const N: usize> Results<N> {
    /// Result `i` of `op`'s kernel, run on `ins` unless another result's node ran it first.
    fn take(op: &'static str, shared: &Mutex<Results<N>>, i: usize, ins: &[Tensor]) -> Result<Tensor> {
        let mut results = shared.lock().unwrap_or_else(|e| e.into_inner());
        if let Results::Left(left) = &mut *results {
            let Some(t) = left[i].take() else { bail!(op, Value, "the kernel's run for this result failed") };
            return Ok(t);
        }
        let Results::Kernels(run) = std::mem::replace(&mut *results, Results::Left(std::array::from_fn(|_| None)))
        else {
            unreachable!()
        };
        let mut left = run(ins)?.map(Some);
        let mine = left[i].take().expect("just computed");
        *results = Results::Left(left);
        Ok(mine)
    }
}

/// The operands, owned, for an eager kernel's call, each checked readable here: a storage
/// that a failed compiled call was to compute is an error at the caller's line (the kernel's
/// own read, inside a closure, could not name it).
#[track_caller]
fn owned(operands: &[&Tensor]) -> SmallVec<[Tensor; 3]> {
    for t in operands {
        crate::capture::before_eager_access(t.cell(), false);
    }
    operands.iter().map(|t| (*t).clone()).collect()
}

/// Runs the kernel of the device the realized operands `ins` live on.
fn on_device<R>(
    ins: &[Tensor],
    cpu: impl FnOnce(&[Tensor]) -> Result<R>,
    cuda: impl FnOnce(&[Tensor]) -> Result<R>,
) -> Result<R> {
    if ins.iter().any(|t| t.device().is_cuda()) {
        cuda(ins)
    } else {
        cpu(ins)
    }
}
