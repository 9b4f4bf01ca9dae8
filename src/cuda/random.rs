//! Random draws on CUDA: `rand`, `randn`, `uniform_`, `normal_` (and dropout's mask) fill a
//! device buffer with the eager Philox kernels of `kiln_codegen::cuda::philox`, which give the
//! CPU generator's numbers for the same (seed, offset): uniform values bit for bit, normal
//! values within the bound docs/cuda.md states. The generator's offset advances exactly as
//! for a CPU draw (the caller reserves the draw).

use super::{LoadedKernels, OrOp};
use crate::error::Result;
use crate::tensor::Tensor;
use kiln_codegen::cuda::{emit_rand, LoadedRand, RandKind};
use kiln_runtime::cpu::philox::{self, Philox};
use kiln_runtime::cuda::CudaStorage;
use kiln_runtime::{DType, Device, FloatElement, Storage};

/// A device distribution and its parameters (as the CPU's rule takes them).
#[derive(Clone, Copy, Debug)]
pub(crate) enum DeviceDist {
    /// Uniform on `[low, high)`.
    Uniform { low: f64, high: f64 },
    /// Normal with `mean` and `std`.
    Normal { mean: f64, std: f64 },
}

impl DeviceDist {
    /// The kernel's kind and its four parameter words for `T` (the CPU rule's own constants).
    fn for_type<T: FloatElement>(self) -> (RandKind, [f64; 4]) {
        match self {
            DeviceDist::Uniform { low, high } => (RandKind::Uniform, philox::uniform_params::<T>(low, high)),
            DeviceDist::Normal { mean, std } => {
                let [m, s] = philox::normal_params::<T>(mean, std);
                (RandKind::Normal, [m, s, 0.0, 0.0])
            }
        }
    }

    /// The kernel's kind and parameters for the float `dtype`.
    fn params(self, dtype: DType) -> (RandKind, [f64; 4]) {
        match dtype {
            DType::F64 => self.for_type::<f64>(),
            DType::F16 => self.for_type::<half::f16>(),
            DType::BF16 => self.for_type::<half::bf16>(),
            _ => self.for_type::<f32>(),
        }
    }
}

/// A new contiguous tensor of `shape` and float `dtype` on `device` (CUDA) holding the
/// elements of `draw` in `dist`, generated on the device: one launch.
#[track_caller]
pub(crate) fn generate(op: &'static str, shape: &[usize], dtype: DType, dist: DeviceDist, draw: &Philox, device: Device) -> Result<Tensor> {
    let Device::Cuda(ordinal) = device else { unreachable!("device draws are for CUDA devices") };
    let (kind, params) = dist.params(dtype);
    static LOADED: LoadedKernels<(RandKind, DType, usize), LoadedRand> = LoadedKernels::new();
    let loaded = LOADED.get_or_load(op, (kind, dtype, ordinal), || LoadedRand::load(&emit_rand(kind, dtype)?, ordinal))?;
    let n = kiln_runtime::layout::numel(shape);
    let mut out = CudaStorage::uninit(op, ordinal, dtype, n).or_op(op)?;
    loaded.run(out.buffer_mut(), n, draw.seed(), draw.offset(), params).or_op(op)?;
    Ok(Tensor::from_storage(Storage::Cuda(out), shape))
}
