//! Normalising vectors and comparing them: `normalize` and `cosine_similarity` (PyTorch's
//! `F.normalize`, `F.cosine_similarity`), composed of [`Tensor::norm_dim`] and arithmetic.

use crate::error::{bail, OrPanic, Result};
use crate::tensor::Tensor;

/// `x / max(‖x‖_p, eps)` along `dim` (`F.normalize(x, p=2.0, dim=1, eps=1e-12)`).
#[track_caller]
pub fn normalize(input: &Tensor, p: f64, dim: i64, eps: f64) -> Tensor {
    try_normalize(input, p, dim, eps).or_panic()
}

/// [`normalize`] returning an error for a bad dim or a non-floating-point input.
#[track_caller]
pub fn try_normalize(input: &Tensor, p: f64, dim: i64, eps: f64) -> Result<Tensor> {
    let norm = input.try_norm_dim_keepdim(p, dim)?;
    input.try_div(norm.clamp_min(eps))
}

/// The cosine of the angle between `x1` and `x2` along `dim`, broadcasting
/// (`F.cosine_similarity(x1, x2, dim=1, eps=1e-8)`): each divided by its Euclidean norm, at
/// least `eps`, then their dot product. As in PyTorch, the floor `eps` applies to the values
/// only: the gradient is the unclamped norm's.
#[track_caller]
pub fn cosine_similarity(x1: &Tensor, x2: &Tensor, dim: i64, eps: f64) -> Tensor {
    try_cosine_similarity(x1, x2, dim, eps).or_panic()
}

/// [`cosine_similarity`] returning an error for shapes that do not broadcast, a bad dim or a
/// non-floating-point input.
#[track_caller]
pub fn try_cosine_similarity(x1: &Tensor, x2: &Tensor, dim: i64, eps: f64) -> Result<Tensor> {
    let unit = |x: &Tensor| -> Result<Tensor> {
        let norm = x.try_norm_dim_keepdim(2.0, dim)?;
        let floored = &norm + (norm.clamp_min(eps) - &norm).detach();
        x.try_div(floored)
    };
    let Some(shape) = kiln_runtime::layout::broadcast_shapes(x1.shape(), x2.shape()) else {
        bail!("cosine_similarity", Shape, "shapes {:?} and {:?} cannot broadcast", x1.shape(), x2.shape());
    };
    let (u1, u2) = (unit(&x1.try_broadcast_to(&shape)?)?, unit(&x2.try_broadcast_to(&shape)?)?);
    u1.try_mul(u2)?.try_sum_dim(dim)
}
