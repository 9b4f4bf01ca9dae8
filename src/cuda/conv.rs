//! 2-d convolution of CUDA tensors: the column kernels of the CUDA C emitter
//! (`kiln_codegen::cuda::im2col`) around batched products through cuBLAS (the tensor
//! `matmul`, which runs [`super::matmul`](mod@super::matmul) on CUDA).
//!
//! With `G` groups, `K = C_in/G * kh * kw`, `L = oh * ow` and the columns `col = im2col(x)`
//! shaped `[N, G, K, L]`, each product runs for every image and group in one call, the weight
//! viewed as `W = [G, C_out/G, K]` and broadcast over the batch:
//!
//! - forward: `y = W @ col (+ bias)`, `[N, G, C_out/G, L]` = `[N, C_out, oh, ow]`;
//! - input gradient: `gx = col2im(Wᵀ @ gy)`, the column kernel gathering per input element;
//! - weight gradient: `gw = Σ_n gy @ colᵀ` (the products per image, then a sum over the batch).
//!
//! A 1x1 kernel with stride 1 and no padding reads the input itself as its columns (no
//! kernel). The bias gradient is the op layer's sum of the output gradient (a CUDA
//! reduction). Every step runs in a fixed order (no atomics), so results are deterministic.
//! Operands are f32 or f64: the op layer computes f16 and bf16 convolutions in f32.

use super::{LoadedKernels, OrOp};
use crate::error::Result;
use crate::tensor::Tensor;
use kiln_codegen::cuda::{emit_col, ColKind, LoadedCol};
use kiln_runtime::cpu::conv::ConvGeom;
use kiln_runtime::cuda::CudaStorage;
use kiln_runtime::{DType, Storage};
use std::sync::Arc;

/// The `kind` kernel for `dtype` on `cuda:ordinal`: emitted, compiled and loaded once per
/// process.
#[track_caller]
fn loaded(op: &'static str, kind: ColKind, dtype: DType, ordinal: usize) -> Result<Arc<LoadedCol>> {
    static LOADED: LoadedKernels<(ColKind, DType, usize), LoadedCol> = LoadedKernels::new();
    LOADED.get_or_load(op, (kind, dtype, ordinal), || LoadedCol::load(&emit_col(kind, dtype)?, ordinal))
}

/// Runs the `kind` column kernel of `g` on the CUDA tensor `t` into a new tensor of `shape`.
#[track_caller]
fn columns(op: &'static str, kind: ColKind, g: &ConvGeom, t: &Tensor, shape: &[usize]) -> Result<Tensor> {
    let ordinal = super::ordinal_of(t);
    let kernel = loaded(op, kind, t.dtype(), ordinal)?;
    let t = super::dense(t);
    let mut out = CudaStorage::uninit(op, ordinal, t.dtype(), kind.lengths(g).1).or_op(op)?;
    {
        let guard = t.read_storage();
        let Storage::Cuda(s) = &*guard else { unreachable!("a CUDA tensor has CUDA storage") };
        kernel.run(g, s.buffer(), out.buffer_mut()).or_op(op)?;
    }
    Ok(Tensor::from_storage(Storage::Cuda(out), shape))
}

/// Sizes as `reshape`'s argument.
fn dims(d: &[usize]) -> Vec<i64> {
    d.iter().map(|&v| v as i64).collect()
}

/// The columns of `x` (`[N, C_in, H, W]` memory), `[N, G, K, L]`.
#[track_caller]
fn im2col(op: &'static str, g: &ConvGeom, x: &Tensor) -> Result<Tensor> {
    let shape = [g.n, g.groups, g.k(), g.l()];
    if g.col_is_input() {
        return x.try_reshape(dims(&shape));
    }
    columns(op, ColKind::Im2col, g, x, &shape)
}

/// The weight (`[C_out, C_in/G, kh, kw]` memory) as `[G, C_out/G, K]`.
#[track_caller]
fn grouped_weight(g: &ConvGeom, w: &Tensor) -> Result<Tensor> {
    w.try_reshape(dims(&[g.groups, g.cog(), g.k()]))
}

/// The convolution of `x` (`[N, C_in, H, W]` memory) by `w` plus `bias`, `[N, C_out, L]`.
#[track_caller]
pub(crate) fn forward(g: &ConvGeom, x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    let op = "conv2d";
    check_devices(op, &[x, w].into_iter().chain(bias).collect::<Vec<_>>())?;
    let col = im2col(op, g, x)?;
    let y = grouped_weight(g, w)?.try_matmul(&col)?.try_reshape(dims(&[g.n, g.c_out, g.l()]))?;
    match bias {
        Some(b) => y.try_add(&b.try_reshape(dims(&[g.c_out, 1]))?),
        None => Ok(y),
    }
}

/// The gradient of the input: `col2im(Wᵀ @ gy)`, `[N, C_in, H, W]`.
#[track_caller]
pub(crate) fn input_grad(g: &ConvGeom, gy: &Tensor, w: &Tensor) -> Result<Tensor> {
    let op = "conv2d_backward_input";
    check_devices(op, &[gy, w])?;
    let gy = gy.try_reshape(dims(&[g.n, g.groups, g.cog(), g.l()]))?;
    let gcol = grouped_weight(g, w)?.transpose(1, 2).try_matmul(&gy)?;
    let shape = [g.n, g.c_in, g.h, g.w];
    if g.col_is_input() {
        return gcol.try_reshape(dims(&shape));
    }
    columns(op, ColKind::Col2im, g, &gcol, &shape)
}

/// The gradient of the weight: `Σ_n gy @ im2col(x)ᵀ`, `[C_out, C_in/G, kh, kw]`.
#[track_caller]
pub(crate) fn weight_grad(g: &ConvGeom, x: &Tensor, gy: &Tensor) -> Result<Tensor> {
    let op = "conv2d_backward_weight";
    check_devices(op, &[x, gy])?;
    let col = im2col(op, g, x)?;
    let gy = gy.try_reshape(dims(&[g.n, g.groups, g.cog(), g.l()]))?;
    let per_image = gy.try_matmul(&col.transpose(2, 3))?;
    per_image.try_sum_dim(0)?.try_reshape(dims(&[g.c_out, g.cig(), g.kh, g.kw]))
}

/// An error naming `op` and both devices unless `tensors` are all on the first one's device.
#[track_caller]
fn check_devices(op: &'static str, tensors: &[&Tensor]) -> Result<()> {
    tensors.iter().try_for_each(|t| tensors[0].check_same_device(op, t))
}
