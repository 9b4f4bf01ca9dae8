//! The collectives on tensors (`dist.all_reduce`, `broadcast`, `all_gather`,
//! `reduce_scatter`, `barrier`): checks, the cross-rank agreement check, then
//! [`super::exchange::exchange`] and the write-back.

use super::exchange::{exchange, finish_average, fresh, received, sendable, staged, write_back, wrong_device};
use super::group::with_group;
use super::options::ReduceOp;
use super::transport::{Call, Wire};
use super::work::{SendBuf, Work};
use crate::error::{Error, ErrorKind, Result};
use crate::tensor::Tensor;
use kiln_runtime::{DType, Device};

/// Reduces `tensor` across all ranks in place (`dist.all_reduce(tensor, op)`): afterwards
/// every rank holds the same result. Tensors of every dtype, on the CPU for MPI and on the
/// rank's GPU for NCCL; `Avg` needs a floating-point dtype; F16/BF16 reduce in F32 and round
/// once on the CPU, and in their own type through NCCL (as PyTorch's NCCL backend). Autograd does not see the write (as in PyTorch).
///
/// Errors: no process group, a tensor on a device the backend does not move, ranks that
/// disagree on the dtype or element count, the group's timeout passing (see the module docs).
#[track_caller]
pub fn all_reduce(tensor: &Tensor, op: ReduceOp) -> Result<()> {
    const OP: &str = "all_reduce";
    check_device(OP, tensor)?;
    check_reduce(OP, op, tensor.dtype())?;
    let n = tensor.numel();
    agree(OP, Call::AllReduce(op), tensor.dtype(), n)?;
    let src = if sendable(tensor) { tensor.clone() } else { staged(tensor) };
    let mut out = exchange(OP, &src, Call::AllReduce(op), n, n)?;
    if op == ReduceOp::Avg {
        finish_average(&mut out, with_group(OP, |g| Ok(g.transport.world_size()))?);
    }
    write_back(tensor, received(out, tensor.shape()));
    Ok(())
}

/// Copies `src`'s `tensor` to every rank in place (`dist.broadcast(tensor, src)`).
///
/// Errors: as [`all_reduce`], and `src` not a rank.
#[track_caller]
pub fn broadcast(tensor: &Tensor, src: usize) -> Result<()> {
    const OP: &str = "broadcast";
    check_device(OP, tensor)?;
    let (rank, world_size) = with_group(OP, |g| Ok((g.transport.rank(), g.transport.world_size())))?;
    if src >= world_size {
        return Err(Error::new(OP, ErrorKind::Value, format!("src={src} is not a rank of a group of {world_size}")));
    }
    let n = tensor.numel();
    agree(OP, Call::Broadcast { root: src }, tensor.dtype(), n)?;
    let wire = Wire::of(tensor.dtype(), tensor.device());
    if rank == src {
        let send = if sendable(tensor) { tensor.clone() } else { staged(tensor) };
        exchange(OP, &send, Call::Broadcast { root: src }, n, 0)?;
    } else {
        let recv = Some(fresh(OP, tensor.device(), wire.dtype(), n)?);
        // SAFETY: receivers send nothing; `recv` is owned by the work.
        let work = unsafe { Work::start(OP, Call::Broadcast { root: src }, wire, n, SendBuf::None, recv) }?;
        let out = work.wait()?.expect("broadcast receives");
        write_back(tensor, received(out, tensor.shape()));
    }
    Ok(())
}

/// Gathers every rank's `tensor` into `outputs` (`dist.all_gather(tensor_list, tensor)`):
/// `outputs[r]` gets rank `r`'s values. `outputs` has one tensor per rank, each of `tensor`'s
/// element count (and any dtype: values are cast).
///
/// Errors: as [`all_reduce`], and the wrong number or size of outputs.
#[track_caller]
pub fn all_gather(outputs: &[Tensor], tensor: &Tensor) -> Result<()> {
    const OP: &str = "all_gather";
    check_device(OP, tensor)?;
    let world_size = with_group(OP, |g| Ok(g.transport.world_size()))?;
    check_list(OP, "outputs", outputs, world_size, tensor.numel())?;
    let n = tensor.numel();
    agree(OP, Call::AllGather, tensor.dtype(), n)?;
    let send = if sendable(tensor) { tensor.clone() } else { staged(tensor) };
    let out = received(exchange(OP, &send, Call::AllGather, n, n * world_size)?, &[world_size, n]);
    for (r, o) in outputs.iter().enumerate() {
        let _off = crate::no_grad_guard();
        o.detach().copy_(&out.select(0, r as i64).reshape(shape_i64(o.shape())));
    }
    Ok(())
}

/// Reduces `inputs` (one tensor per rank) across ranks and leaves the reduction of the
/// `r`-th inputs on rank `r` in `output` (`dist.reduce_scatter(output, input_list, op)`).
///
/// Errors: as [`all_reduce`], and the wrong number or size of inputs.
#[track_caller]
pub fn reduce_scatter(output: &Tensor, inputs: &[Tensor], op: ReduceOp) -> Result<()> {
    const OP: &str = "reduce_scatter";
    check_device(OP, output)?;
    check_reduce(OP, op, output.dtype())?;
    let world_size = with_group(OP, |g| Ok(g.transport.world_size()))?;
    check_list(OP, "inputs", inputs, world_size, output.numel())?;
    let n = output.numel();
    agree(OP, Call::ReduceScatter(op), output.dtype(), n)?;
    let wire = Wire::of(output.dtype(), output.device());
    let flat: Vec<Tensor> = inputs.iter().map(|t| t.detach().to_dtype(wire.dtype()).reshape([-1])).collect();
    let send = staged(&Tensor::cat(&flat, 0));
    let mut out = exchange(OP, &send, Call::ReduceScatter(op), n, n)?;
    if op == ReduceOp::Avg {
        finish_average(&mut out, world_size);
    }
    write_back(output, received(out, output.shape()));
    Ok(())
}

/// Waits until every rank has called `barrier` (`dist.barrier()`), or the timeout passes.
#[track_caller]
pub fn barrier() -> Result<()> {
    // SAFETY: a barrier moves no data.
    let work = unsafe { Work::start("barrier", Call::Barrier, Wire::U8, 0, SendBuf::None, None) }?;
    work.wait().map(|_| ())
}

/// Checks that the ranks call the same collective on the same dtype and element count (one
/// small max-reduction of `[call, dtype, count]` and its negation): a mismatch would otherwise
/// corrupt data or hang. Every rank sees the same extremes, so all of them fail together.
#[track_caller]
fn agree(op: &'static str, call: Call, dtype: DType, count: usize) -> Result<()> {
    let mine = [call.code(), dtype_code(dtype), count as i64];
    let probe: Vec<i64> = mine.iter().copied().chain(mine.iter().map(|v| -v)).collect();
    let probe = on_group_device(op, Tensor::from_vec(probe, [6]))?;
    let out = exchange(op, &probe, Call::AllReduce(ReduceOp::Max), 6, 6)?;
    let ext: Vec<i64> = received(out, &[6]).to_vec();
    let (max, min) = (&ext[..3], [-ext[3], -ext[4], -ext[5]]);
    if max == mine && min == mine {
        return Ok(());
    }
    let rank = with_group(op, |g| Ok(g.transport.rank()))?;
    let mut what = Vec::new();
    if max[0] != min[0] {
        what.push("the ranks called different collectives (or broadcast roots)".to_string());
    }
    if max[1] != min[1] {
        what.push("the ranks' tensors have different dtypes".to_string());
    }
    if max[2] != min[2] {
        what.push(format!("the ranks' tensors have between {} and {} elements", min[2], max[2]));
    }
    Err(Error::new(
        op,
        ErrorKind::Distributed,
        format!("{}: rank {rank} has a {dtype} tensor of {count} elements", what.join("; ")),
    ))
}

/// A code per dtype for [`agree`].
fn dtype_code(dtype: DType) -> i64 {
    [DType::Bool, DType::U8, DType::I32, DType::I64, DType::F16, DType::BF16, DType::F32, DType::F64]
        .iter()
        .position(|d| *d == dtype)
        .unwrap_or(99) as i64
}

/// Refuses tensors the group's backend cannot move: MPI moves CPU tensors, NCCL CUDA tensors
/// on the rank's device. The error names the op, both devices and the caller's line.
#[track_caller]
fn check_device(op: &'static str, t: &Tensor) -> Result<()> {
    let (backend, want) = with_group(op, |g| Ok((g.backend, g.transport.device())))?;
    if t.device() == want {
        return Ok(());
    }
    Err(wrong_device(op, backend, want, t.device()))
}

/// `t` (a small CPU tensor kiln made) on the device the group's transport moves.
#[track_caller]
pub(crate) fn on_group_device(op: &'static str, t: Tensor) -> Result<Tensor> {
    match with_group(op, |g| Ok(g.transport.device()))? {
        Device::Cpu => Ok(t),
        cuda => t.try_to(&cuda),
    }
}

/// Refuses reductions a dtype has no meaning for (PyTorch's Gloo refuses the same).
#[track_caller]
fn check_reduce(op: &'static str, reduce: ReduceOp, dtype: DType) -> Result<()> {
    if reduce == ReduceOp::Avg && !dtype.is_float() {
        return Err(Error::new(
            op,
            ErrorKind::DType,
            format!("ReduceOp::Avg needs a floating-point tensor, got {dtype}"),
        ));
    }
    Ok(())
}

/// Checks a per-rank list: `world_size` tensors of `numel` elements each, on the backend's
/// device.
#[track_caller]
fn check_list(op: &'static str, what: &str, list: &[Tensor], world_size: usize, numel: usize) -> Result<()> {
    if list.len() != world_size {
        return Err(Error::new(
            op,
            ErrorKind::Value,
            format!("{what} has {} tensors; the group has {world_size} ranks", list.len()),
        ));
    }
    for (i, t) in list.iter().enumerate() {
        check_device(op, t)?;
        if t.numel() != numel {
            return Err(Error::new(
                op,
                ErrorKind::Shape,
                format!("{what}[{i}] has shape {:?} ({} elements); expected {numel} elements", t.shape(), t.numel()),
            ));
        }
    }
    Ok(())
}

/// A shape as the `i64` dims `reshape` takes.
fn shape_i64(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&d| d as i64).collect()
}
