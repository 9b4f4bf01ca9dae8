//! `kiln::compile`'s fused kernels on CUDA: one launch per fused group, the kernel from
//! `kiln_codegen::cuda::emit_fused` (elementwise) or `emit_fused_reduce` (a reduction with its
//! prologues, stages and epilogue), emitted when the plan is built, compiled by NVRTC and
//! loaded once per process and device.

use super::{LoadedKernels, OrOp};
use crate::capture::CudaCode;
use crate::error::Result;
use crate::tensor::Tensor;
use kiln_codegen::cuda::{FusedOperand, LoadedFused, LoadedFusedReduce};
use kiln_codegen::ir::NodeId;
use kiln_codegen::passes::LoweredGroup;
use kiln_runtime::cuda::{CudaBuffer, CudaStorage};
use kiln_runtime::{DType, Device, Storage};

/// The op name of errors from a fused kernel's launch.
const OP: &str = "kiln::compile";

/// Runs `kernel`, the kernel of group `lowered`, on `device`: `inputs[k]` is the value load
/// `k` reads (its view is the load's layout, its strides the lowered ones; a CPU value, such
/// as a 0-dim scalar, is copied over first), `scalars` its run-time scalars. Returns one new
/// contiguous tensor per output, shaped and typed as `node(o)` says (a reduction's stage
/// outputs hold one element per row, its epilogue's the whole iteration space).
#[track_caller]
pub(crate) fn run<'g>(
    kernel: &CudaCode,
    device: Device,
    inputs: &[Tensor],
    lowered: &LoweredGroup,
    scalars: &[f64],
    node: impl Fn(NodeId) -> (&'g [usize], DType),
) -> Result<Vec<Tensor>> {
    let Device::Cuda(ordinal) = device else { unreachable!("CUDA kernels run in plans for a CUDA device") };
    static LOADED: LoadedKernels<(String, usize), LoadedFused> = LoadedKernels::new();
    static LOADED_REDUCE: LoadedKernels<(String, usize), LoadedFusedReduce> = LoadedKernels::new();
    let key = (kernel.name().to_string(), ordinal);
    let loaded = match kernel {
        CudaCode::Elementwise(k) => Loaded::Elementwise(LOADED.get_or_load(OP, key, || LoadedFused::load(k, ordinal))?),
        CudaCode::Reduce(k) => {
            Loaded::Reduce(LOADED_REDUCE.get_or_load(OP, key, || LoadedFusedReduce::load(k, ordinal))?)
        }
    };
    let moved: Vec<Tensor> = inputs
        .iter()
        .map(|t| if t.device() == device { Ok(t.clone()) } else { super::to_device(OP, t, device) })
        .collect::<Result<_>>()?;
    let mut outs: Vec<CudaStorage> = lowered
        .outputs
        .iter()
        .map(|&o| {
            let (shape, dtype) = node(o);
            CudaStorage::uninit(OP, ordinal, dtype, kiln_runtime::layout::numel(shape)).or_op(OP)
        })
        .collect::<Result<_>>()?;
    let rank = lowered.shape.len();
    {
        let (guards, guard_of) = Tensor::read_storages(&moved);
        let mut operands: Vec<(&CudaBuffer, FusedOperand<'_>)> = Vec::with_capacity(moved.len());
        for (k, (&g, u)) in guard_of.iter().zip(&lowered.loads).enumerate() {
            let Storage::Cuda(b) = &*guards[g] else { unreachable!("inputs were moved to the device") };
            operands.push((
                b.buffer(),
                FusedOperand { offset: u.layout.offset(), strides: &lowered.strides[k * rank..(k + 1) * rank] },
            ));
        }
        let mut buffers: Vec<&mut CudaBuffer> = outs.iter_mut().map(CudaStorage::buffer_mut).collect();
        match &loaded {
            Loaded::Elementwise(k) => k.run(&operands, &mut buffers, &lowered.shape, scalars),
            Loaded::Reduce(k) => k.run(&operands, &mut buffers, &lowered.shape, scalars),
        }
        .or_op(OP)?;
    }
    Ok(lowered.outputs.iter().zip(outs).map(|(&o, s)| Tensor::from_storage(Storage::Cuda(s), node(o).0)).collect())
}

/// A fused kernel loaded on a device.
enum Loaded {
    /// An elementwise group's.
    Elementwise(std::sync::Arc<LoadedFused>),
    /// A reduction group's.
    Reduce(std::sync::Arc<LoadedFusedReduce>),
}
