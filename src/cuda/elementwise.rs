//! Eager elementwise ops on CUDA tensors: one strided kernel per op (a fused group of one op).
//!
//! Operands are views (shape, strides, offset) of their storages: nothing is made contiguous
//! first. Dims are collapsed (size-1 dims dropped, dims contiguous in every operand merged) and
//! the sizes, strides and offsets passed as kernel arguments, so a kernel is compiled once per
//! (op, dtypes, number of collapsed dims) and device, and every shape and view reuses it.
//! When the collapsed operands are one contiguous (or broadcast) dim and aligned, the op's
//! vector kernel runs instead (`kiln_codegen::cuda::vector`: 16-byte accesses).

use super::{LoadedKernels, OrOp};
use crate::error::{bail, Result};
use crate::tensor::Tensor;
use kiln_codegen::cuda::{
    eager_kernel, eager_vector_kernel, vector_launch, EagerOp, LoadedStrided, LoadedVector, StridedOperand,
    VectorOperand,
};
use kiln_runtime::cpu::strided::collapse;
use kiln_runtime::cuda::{CudaBuffer, CudaStorage};
use kiln_runtime::{DType, Device, Layout, Storage};
use std::sync::Arc;

/// The device an op on operands on `devices` runs on, each given with whether the operand is
/// 0-dim: every operand on one CUDA device, except 0-dim CPU tensors (scalars, which are copied
/// over, as PyTorch allows). Errors name the op and both devices.
#[track_caller]
pub(crate) fn common_device(op: &'static str, devices: &[(Device, bool)]) -> Result<usize> {
    let target = devices.iter().find_map(|&(d, _)| match d {
        Device::Cuda(i) => Some(i),
        Device::Cpu => None,
    });
    let Some(i) = target else { bail!(op, Device, "no operand is on a CUDA device") };
    for &(d, zero_dim) in devices {
        if d != Device::Cuda(i) && !(d.is_cpu() && zero_dim) {
            let first = devices[0].0;
            let (a, b) = if first == d { (d, Device::Cuda(i)) } else { (first, d) };
            bail!(op, Device, "expected all tensors to be on the same device, but found {a} and {b}");
        }
    }
    Ok(i)
}

/// `op` over `inputs` (tensors with their layouts broadcast to `shape`), computing in the
/// operand dtype `dtype`, into a new contiguous tensor of `out` on the inputs' CUDA device.
#[track_caller]
pub(crate) fn map(
    name: &'static str,
    op: EagerOp,
    inputs: &[(&Tensor, Layout)],
    shape: &[usize],
    dtype: DType,
    out: DType,
) -> Result<Tensor> {
    let devices: Vec<(Device, bool)> = inputs.iter().map(|(t, _)| (t.device(), t.dim() == 0)).collect();
    let ordinal = common_device(name, &devices)?;
    let mut storage = CudaStorage::uninit(name, ordinal, out, kiln_runtime::layout::numel(shape)).or_op(name)?;
    launch(name, op, inputs, &mut storage, &Layout::contiguous(shape), dtype, ordinal)?;
    Ok(Tensor::from_storage(Storage::Cuda(storage), shape))
}

/// Writes `src` (viewed through `ls`, already broadcast to `dst`'s shape) into the CUDA tensor
/// `dst` in place, converted to `dst`'s dtype. `src` is on `dst`'s device or a 0-dim CPU
/// tensor, and must not share storage with `dst` (copy it first).
#[track_caller]
pub(crate) fn copy_into(name: &'static str, dst: &Tensor, src: &Tensor, ls: Layout) -> Result<()> {
    let ordinal = common_device(name, &[(dst.device(), false), (src.device(), src.dim() == 0)])?;
    debug_assert!(!dst.shares_storage_with(src));
    let mut guard = dst.write_storage();
    let Storage::Cuda(d) = &mut *guard else { unreachable!("the destination's device is CUDA") };
    launch(name, EagerOp::Copy, &[(src, ls)], d, dst.layout(), src.dtype(), ordinal)
}

/// The kernel of `op` for these dtypes and dims on `cuda:ordinal`: emitted, compiled and
/// loaded once per process.
#[track_caller]
fn loaded(
    name: &'static str,
    op: EagerOp,
    dtype: DType,
    out: DType,
    ndim: usize,
    ordinal: usize,
) -> Result<Arc<LoadedStrided>> {
    static LOADED: LoadedKernels<(EagerOp, DType, DType, usize, usize), LoadedStrided> = LoadedKernels::new();
    LOADED.get_or_load(name, (op, dtype, out, ndim, ordinal), || {
        LoadedStrided::load(&eager_kernel(op, dtype, out, ndim)?, ordinal)
    })
}

/// Runs `op` over `inputs` into `out` viewed through `lo` (all of one shape after
/// broadcasting), computing in `dtype`. 0-dim CPU inputs are copied to the device first.
#[track_caller]
fn launch(
    name: &'static str,
    op: EagerOp,
    inputs: &[(&Tensor, Layout)],
    out: &mut CudaStorage,
    lo: &Layout,
    dtype: DType,
    ordinal: usize,
) -> Result<()> {
    let mut moved: Vec<Tensor> = Vec::with_capacity(inputs.len());
    let mut layouts: Vec<Layout> = Vec::with_capacity(inputs.len());
    for (t, l) in inputs {
        if t.device().is_cpu() {
            // A 0-dim tensor, broadcast: zero strides; its copy starts at element 0.
            moved.push(super::to_device(name, t, Device::Cuda(ordinal))?);
            layouts.push(Layout::new(l.shape().into(), vec![0; l.ndim()].into(), 0));
        } else {
            moved.push((*t).clone());
            layouts.push(l.clone());
        }
    }
    let strides: Vec<&[usize]> = layouts.iter().map(|l| l.strides()).chain([lo.strides()]).collect();
    let (shape, cstrides) = collapse_all(lo.shape(), &strides);
    let (guards, guard_of) = Tensor::read_storages(&moved);
    let buffers: Vec<&CudaBuffer> = guard_of
        .iter()
        .map(|&g| match &*guards[g] {
            Storage::Cuda(b) => b.buffer(),
            Storage::Cpu(_) => unreachable!("inputs were moved to the device"),
        })
        .collect();
    // The contiguous fast path when every operand allows it (16-byte accesses).
    let dtypes: Vec<DType> = moved.iter().map(Tensor::dtype).chain([out.dtype()]).collect();
    let addresses: Vec<u64> = buffers.iter().map(|b| b.device_ptr()).chain([out.buffer().device_ptr()]).collect();
    let offsets: Vec<usize> = layouts.iter().map(Layout::offset).chain([lo.offset()]).collect();
    let operands: Vec<VectorOperand<'_>> = (0..dtypes.len())
        .map(|j| VectorOperand { dtype: dtypes[j], strides: &cstrides[j], offset: offsets[j], address: addresses[j] })
        .collect();
    if let Some(broadcast) = vector_launch(&shape, &operands) {
        let kernel = loaded_vector(name, op, dtype, out.dtype(), broadcast, ordinal)?;
        let ins: Vec<(&CudaBuffer, usize)> = buffers.iter().zip(&offsets).map(|(&b, &o)| (b, o)).collect();
        return kernel.run(&ins, out.buffer_mut(), lo.offset(), shape[0]).or_op(name);
    }
    let kernel = loaded(name, op, dtype, out.dtype(), shape.len(), ordinal)?;
    let ops: Vec<(&CudaBuffer, StridedOperand<'_>)> = buffers
        .iter()
        .zip(&offsets)
        .zip(&cstrides)
        .map(|((&b, &offset), s)| (b, StridedOperand { offset, strides: s }))
        .collect();
    let out_view = StridedOperand { offset: lo.offset(), strides: &cstrides[inputs.len()] };
    kernel.run(&ops, out.buffer_mut(), out_view, &shape).or_op(name)
}

/// The vector kernel of `op` for these dtypes and broadcast inputs on `cuda:ordinal`:
/// emitted, compiled and loaded once per process.
#[track_caller]
fn loaded_vector(
    name: &'static str,
    op: EagerOp,
    dtype: DType,
    out: DType,
    broadcast: Vec<bool>,
    ordinal: usize,
) -> Result<Arc<LoadedVector>> {
    static LOADED: LoadedKernels<(EagerOp, DType, DType, Vec<bool>, usize), LoadedVector> = LoadedKernels::new();
    let kernel = || LoadedVector::load(&eager_vector_kernel(op, dtype, out, &broadcast)?, ordinal);
    LOADED.get_or_load(name, (op, dtype, out, broadcast.clone(), ordinal), kernel)
}

/// `shape` and the operands' `strides` collapsed together (size-1 dims dropped, dims
/// contiguous in every operand merged): fewer dims, less index math per element.
pub(super) fn collapse_all(shape: &[usize], strides: &[&[usize]]) -> (Vec<usize>, Vec<Vec<usize>>) {
    fn go<const N: usize>(shape: &[usize], strides: &[&[usize]]) -> (Vec<usize>, Vec<Vec<usize>>) {
        let c = collapse::<N>(shape, std::array::from_fn(|k| strides[k]));
        (c.shape.to_vec(), c.strides.iter().map(|s| s.to_vec()).collect())
    }
    match strides.len() {
        1 => go::<1>(shape, strides),
        2 => go::<2>(shape, strides),
        3 => go::<3>(shape, strides),
        4 => go::<4>(shape, strides),
        n => unreachable!("bounds checks, eager and indexing kernels have 1 to 4 operands, not {n}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixed_devices_are_errors_naming_both() {
        let e = common_device("add", &[(Device::Cpu, false), (Device::Cuda(0), false)]).unwrap_err();
        assert!(
            e.to_string().starts_with("add: expected all tensors to be on the same device, but found cpu and cuda:0"),
            "{e}"
        );
        let e = common_device("mul", &[(Device::Cuda(0), false), (Device::Cuda(1), true)]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("mul: expected all tensors to be on the same device, but found cuda:0 and cuda:1"),
            "{e}"
        );
        let e = common_device("where", &[(Device::Cuda(1), false), (Device::Cuda(1), false), (Device::Cpu, false)])
            .unwrap_err();
        assert!(e.to_string().contains("found cuda:1 and cpu"), "{e}");
        // A 0-dim CPU tensor (a scalar) joins a CUDA op, in any position.
        assert_eq!(common_device("add", &[(Device::Cpu, true), (Device::Cuda(2), false)]).unwrap(), 2);
        assert_eq!(common_device("add", &[(Device::Cuda(0), false), (Device::Cpu, true)]).unwrap(), 0);
    }

    #[test]
    fn dims_contiguous_in_every_operand_merge() {
        // [2, 3, 4] with a broadcast row: the outer dims merge (stride 0 stays 0), the row does
        // not; a transposed operand keeps every dim.
        let (shape, st) = collapse_all(&[2, 3, 4], &[&[12, 4, 1], &[0, 0, 1], &[12, 4, 1]]);
        assert_eq!((shape, st), (vec![6, 4], vec![vec![4, 1], vec![0, 1], vec![4, 1]]));
        let (shape, _) = collapse_all(&[2, 3, 4], &[&[1, 2, 6], &[12, 4, 1]]);
        assert_eq!(shape, vec![2, 3, 4]);
        let (shape, st) = collapse_all(&[2, 1, 4], &[&[4, 4, 1], &[4, 9, 1]]);
        assert_eq!((shape, st), (vec![8], vec![vec![1], vec![1]]));
    }
}
