//! The differentiable pooling ops over `(planes, H, W)` memory, each with a backward made of
//! differentiable ops again:
//!
//! - max pooling records `MaxPool2DWithIndicesBackward0`, whose gradient scatters into the
//!   argmax positions ([`max_scatter`]); that scatter's own gradient is a `gather` at the same
//!   indices;
//! - average and adaptive average pooling are linear maps `A`: the backward is `Aᵀ` (a kernel
//!   of its own), and the backward of `Aᵀ` is `A` again.
//!
//! CUDA tensors take `crate::cuda::pool`'s generated kernels for max, average and adaptive
//! average pooling and their gradients.

use super::dispatch::Kernel;
use super::{kernel_op, kernel_op2};
use crate::autograd::{self, grads, Saved};
use crate::error::{bail, Result};
use crate::tensor::Tensor;
use kiln_codegen::cuda::PoolKind;
use kiln_runtime::cpu::pool::{self as kernels, AvgMode, PoolGeom};
use kiln_runtime::dtype::num_like::Float;
use kiln_runtime::storage::StorageElement;
use kiln_runtime::DType;
use std::sync::Arc;

/// Which pooling, with its parameters.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    /// Max pooling (only its backward scatter runs through [`Pool`]).
    Max,
    /// Average pooling.
    Avg(AvgMode),
    /// Adaptive average pooling (the geometry's window fields are unused).
    Adaptive,
}

/// One pooling: geometry, kind, and the caller's input and output shapes.
#[derive(Debug)]
pub(crate) struct Pool {
    pub geom: PoolGeom,
    pub kind: Kind,
    pub x_shape: Vec<usize>,
    pub y_shape: Vec<usize>,
}

/// `t` itself when contiguous, else a contiguous copy, without recording.
fn contiguous(t: &Tensor) -> Tensor {
    let _off = autograd::no_grad_guard();
    t.contiguous()
}

#[track_caller]
fn float_only(t: &Tensor) -> Result<()> {
    if !matches!(t.dtype(), DType::F32 | DType::F64) {
        bail!("pooling", DType, "not implemented for dtype {}", t.dtype());
    }
    Ok(())
}

/// Max pooling of `x`: the values (recording `MaxPool2DWithIndicesBackward0`) and the int64
/// argmax indices within each plane.
#[track_caller]
pub(crate) fn max_pool(p: &Arc<Pool>, x: &Tensor) -> Result<(Tensor, Tensor)> {
    float_only(x)?;
    let (g, shape) = (p.geom, p.y_shape.clone());
    let cpu = move |ins: &[Tensor]| Ok(max_pool_now(&g, &ins[0], &shape));
    let (g, shape) = (p.geom, p.y_shape.clone());
    let cuda = move |ins: &[Tensor]| crate::cuda::pool::max_pool(&g, &ins[0], &shape);
    let outs = [(&p.y_shape[..], x.dtype()), (&p.y_shape[..], DType::I64)];
    let (vals, idx) = kernel_op2("max_pool2d", &[x], outs, cpu, cuda)?;
    if !autograd::is_recording(&[x]) {
        return Ok((vals, idx));
    }
    let p = p.clone();
    let vals = autograd::record(vals, "MaxPool2DWithIndicesBackward0", &[x], [Saved::of(&idx)], move |_, g, s| {
        grads![Some(max_scatter(&p, g, &s[0]).expect("max_pool2d backward"))]
    });
    Ok((vals, idx))
}

/// The max-pool kernel on a realized float `x`: values and indices as tensors of `shape`.
fn max_pool_now(g: &PoolGeom, x: &Tensor, shape: &[usize]) -> (Tensor, Tensor) {
    let xc = contiguous(x);
    match x.dtype() {
        DType::F64 => max_bufs::<f64>(g, &xc, shape),
        _ => max_bufs::<f32>(g, &xc, shape),
    }
}

/// The max-pool kernel's values and indices as tensors of `shape`.
fn max_bufs<T: Float + StorageElement>(g: &PoolGeom, x: &Tensor, shape: &[usize]) -> (Tensor, Tensor) {
    let (v, i) = kernels::max_pool2d_forward(g, &x.as_slice::<T>());
    (Tensor::from_buf(v, shape), Tensor::from_buf(i, shape))
}

/// The gradient of max pooling: `gy` added into zeros of the input's shape at the argmax
/// positions `idx`. Its own gradient is `G` gathered at `idx`.
#[track_caller]
pub(crate) fn max_scatter(p: &Arc<Pool>, gy: &Tensor, idx: &Tensor) -> Result<Tensor> {
    float_only(gy)?;
    let (g, x_shape) = (p.geom, p.x_shape.clone());
    let shape = x_shape.clone();
    let cuda = move |ins: &[Tensor]| crate::cuda::pool::max_pool_backward(&g, &ins[0], &ins[1], &shape);
    let out = kernel_op(
        "max_pool2d_backward",
        &[gy, idx],
        (&x_shape, gy.dtype()),
        max_scatter_cpu(g, x_shape.clone()),
        cuda,
    )?;
    if !autograd::is_recording(&[gy]) {
        return Ok(out);
    }
    let p = p.clone();
    Ok(autograd::record(out, "MaxPool2DWithIndicesBackwardBackward0", &[gy], [Saved::of(idx)], move |_, g, s| {
        let (planes, il, ol) = (p.geom.planes as i64, (p.geom.h * p.geom.w) as i64, (p.geom.oh * p.geom.ow) as i64);
        let picked = g.reshape([planes, il]).gather(1, &s[0].reshape([planes, ol]));
        let shape: Vec<i64> = p.y_shape.iter().map(|&d| d as i64).collect();
        grads![Some(picked.reshape(&shape))]
    }))
}

/// [`max_scatter`]'s CPU kernel, of the realized gradient and indices.
fn max_scatter_cpu(g: PoolGeom, x_shape: Vec<usize>) -> impl Kernel<Tensor> {
    move |ins: &[Tensor]| {
        let (gc, ic) = (contiguous(&ins[0]), contiguous(&ins[1]));
        Ok(match gc.dtype() {
            DType::F64 => Tensor::from_buf(
                kernels::max_pool2d_backward(&g, &gc.as_slice::<f64>(), &ic.as_slice::<i64>()),
                &x_shape,
            ),
            _ => Tensor::from_buf(
                kernels::max_pool2d_backward(&g, &gc.as_slice::<f32>(), &ic.as_slice::<i64>()),
                &x_shape,
            ),
        })
    }
}

/// The average (or adaptive average) pooling `A·x`, recording `AvgPool2DBackward0` or
/// `AdaptiveAvgPool2DBackward0` whose rule is [`avg_adjoint`].
#[track_caller]
pub(crate) fn avg(p: &Arc<Pool>, x: &Tensor) -> Result<Tensor> {
    let out = linear(p, x, false)?;
    if !autograd::is_recording(&[x]) {
        return Ok(out);
    }
    let name = if matches!(p.kind, Kind::Adaptive) { "AdaptiveAvgPool2DBackward0" } else { "AvgPool2DBackward0" };
    let p = p.clone();
    Ok(autograd::record(out, name, &[x], [], move |_, g, _| {
        grads![Some(avg_adjoint(&p, g).expect("avg_pool2d backward"))]
    }))
}

/// `Aᵀ·gy`: the gradient of [`avg`], differentiable (its gradient is `A` again).
#[track_caller]
pub(crate) fn avg_adjoint(p: &Arc<Pool>, gy: &Tensor) -> Result<Tensor> {
    let out = linear(p, gy, true)?;
    if !autograd::is_recording(&[gy]) {
        return Ok(out);
    }
    let name = if matches!(p.kind, Kind::Adaptive) {
        "AdaptiveAvgPool2DBackwardBackward0"
    } else {
        "AvgPool2DBackwardBackward0"
    };
    let p = p.clone();
    Ok(autograd::record(out, name, &[gy], [], move |_, g, _| grads![Some(avg(&p, g).expect("avg_pool2d"))]))
}

/// Runs `A` (or `Aᵀ` when `adjoint`) on `t` without recording (inside a compiled step, as an
/// opaque node).
#[track_caller]
fn linear(p: &Arc<Pool>, t: &Tensor, adjoint: bool) -> Result<Tensor> {
    float_only(t)?;
    let name = match (p.kind, adjoint) {
        (Kind::Adaptive, false) => "adaptive_avg_pool2d",
        (Kind::Adaptive, true) => "adaptive_avg_pool2d_backward",
        (_, false) => "avg_pool2d",
        (_, true) => "avg_pool2d_backward",
    };
    let shape = if adjoint { &p.x_shape } else { &p.y_shape };
    let (kind, mode) = match (p.kind, adjoint) {
        (Kind::Avg(m), false) => (PoolKind::AvgForward, m),
        (Kind::Avg(m), true) => (PoolKind::AvgBackward, m),
        (Kind::Adaptive, false) => (PoolKind::AdaptiveForward, crate::cuda::pool::NO_MODE),
        (Kind::Adaptive, true) => (PoolKind::AdaptiveBackward, crate::cuda::pool::NO_MODE),
        (Kind::Max, _) => unreachable!("max pooling is not linear"),
    };
    let (geom, out_shape) = (p.geom, shape.clone());
    let cuda = move |ins: &[Tensor]| crate::cuda::pool::avg_pool(name, kind, &geom, mode, &ins[0], &out_shape);
    let p2 = p.clone();
    let cpu = move |ins: &[Tensor]| {
        let tc = contiguous(&ins[0]);
        Ok(match tc.dtype() {
            DType::F64 => linear_typed::<f64>(&p2, &tc, adjoint),
            _ => linear_typed::<f32>(&p2, &tc, adjoint),
        })
    };
    kernel_op(name, &[t], (shape, t.dtype()), cpu, cuda)
}

fn linear_typed<T: Float + StorageElement>(p: &Pool, t: &Tensor, adjoint: bool) -> Tensor {
    let (g, s) = (&p.geom, t.as_slice::<T>());
    let buf = match (p.kind, adjoint) {
        (Kind::Avg(m), false) => kernels::avg_pool2d_forward(g, m, &s),
        (Kind::Avg(m), true) => kernels::avg_pool2d_backward(g, m, &s),
        (Kind::Adaptive, false) => kernels::adaptive_avg_pool2d_forward(g.planes, g.h, g.w, g.oh, g.ow, &s),
        (Kind::Adaptive, true) => kernels::adaptive_avg_pool2d_backward(g.planes, g.h, g.w, g.oh, g.ow, &s),
        (Kind::Max, _) => unreachable!("max pooling is not linear"),
    };
    Tensor::from_buf(buf, if adjoint { &p.x_shape } else { &p.y_shape })
}
