//! Random draws on CUDA: `rand`, `randn`, `uniform_`, `normal_` (and dropout's mask),
//! `randint`, `random_` and `bernoulli_` fill a device buffer with the eager Philox kernels of
//! `kiln_codegen::cuda::philox`, which give the CPU generator's numbers for the same (seed,
//! offset): uniform values, integers and Bernoulli values bit for bit, normal values within
//! the bound docs/cuda.md states. The generator's offset advances exactly as for a CPU draw
//! (the caller reserves the draw).

use super::{LoadedKernels, OrOp};
use crate::error::Result;
use crate::random::Dist;
use crate::tensor::Tensor;
use kiln_codegen::cuda::{emit_rand, LoadedRand, RandKind};
use kiln_runtime::cpu::philox::{self, Philox};
use kiln_runtime::cuda::CudaStorage;
use kiln_runtime::{DType, Device, FloatElement, Storage};

/// The float kernel's kind and its four parameters for `T` (the CPU rule's own constants):
/// uniform or normal values (the only float-parameter kinds).
fn float_params<T: FloatElement>(dist: Dist) -> (RandKind, [f64; 4]) {
    match dist {
        Dist::Normal { mean, std } => {
            let [m, s] = philox::normal_params::<T>(mean, std);
            (RandKind::Normal, [m, s, 0.0, 0.0])
        }
        Dist::Uniform { low, high } => (RandKind::Uniform, philox::uniform_params::<T>(low, high)),
        Dist::Integers { .. } | Dist::Bernoulli { .. } => {
            unreachable!("integer and Bernoulli draws take no float parameters")
        }
    }
}

/// The kernel's kind and its four parameter words (as `LoadedRand::run` takes them) for
/// `dist` in `dtype` (a float dtype for uniform and normal values, any dtype for the others).
fn kernel_words(dist: Dist, dtype: DType) -> (RandKind, [u64; 4]) {
    match dist {
        Dist::Integers { low, high } => (RandKind::Integers, [low as u64, philox::integer_range(low, high), 0, 0]),
        Dist::Bernoulli { p } => (RandKind::Bernoulli, [philox::bernoulli_threshold(p).to_bits(), 0, 0, 0]),
        Dist::Uniform { .. } | Dist::Normal { .. } => {
            let (kind, params) = match dtype {
                DType::F64 => float_params::<f64>(dist),
                DType::F16 => float_params::<half::f16>(dist),
                DType::BF16 => float_params::<half::bf16>(dist),
                _ => float_params::<f32>(dist),
            };
            (kind, params.map(f64::to_bits))
        }
    }
}

/// A new contiguous tensor of `shape` and `dtype` on `device` (CUDA) holding the elements of
/// `draw` in `dist` (parameters and dtype checked by the caller), generated on the device: one
/// launch.
#[track_caller]
pub(crate) fn generate(
    op: &'static str,
    shape: &[usize],
    dtype: DType,
    dist: Dist,
    draw: &Philox,
    device: Device,
) -> Result<Tensor> {
    let Device::Cuda(ordinal) = device else { unreachable!("device draws are for CUDA devices") };
    let (kind, words) = kernel_words(dist, dtype);
    static LOADED: LoadedKernels<(RandKind, DType, usize), LoadedRand> = LoadedKernels::new();
    let loaded =
        LOADED.get_or_load(op, (kind, dtype, ordinal), || LoadedRand::load(&emit_rand(kind, dtype)?, ordinal))?;
    let n = kiln_runtime::layout::numel(shape);
    let mut out = CudaStorage::uninit(op, ordinal, dtype, n).or_op(op)?;
    loaded.run(out.buffer_mut(), n, draw.seed(), draw.offset(), words).or_op(op)?;
    Ok(Tensor::from_storage(Storage::Cuda(out), shape))
}
