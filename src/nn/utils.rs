//! Gradient clipping (`torch.nn.utils.clip_grad_norm_`, `clip_grad_value_`) and, in [`rnn`],
//! batching sequences of different lengths.

pub mod rnn;

use crate::error::{bail, OrPanic, Result};
use crate::{DType, Tensor};

/// The total `norm_type`-norm of the gradients of `params` (those with a gradient), as if they
/// were concatenated into one vector: the norm of the per-tensor norms, as PyTorch computes it.
/// A 0-dim tensor in the first gradient's dtype (f32 0.0 when no parameter has a gradient).
#[track_caller]
pub fn get_total_norm(params: &[Tensor], norm_type: f64) -> Tensor {
    let _no_grad = crate::no_grad_guard();
    let grads: Vec<Tensor> = params.iter().filter_map(|p| p.grad()).collect();
    let Some(first) = grads.first() else { return Tensor::scalar_opts(0.0, DType::F32) };
    let dtype = first.dtype();
    let norms: Vec<Tensor> = grads.iter().map(|g| g.norm(norm_type).to_dtype(dtype)).collect();
    Tensor::stack(&norms, 0).norm(norm_type)
}

/// Scales the gradients of `params` so that their total `norm_type`-norm (`f64::INFINITY` for
/// the max norm) is at most `max_norm`, in place, and returns the total norm before clipping
/// (`torch.nn.utils.clip_grad_norm_`). The scale is `min(max_norm / (total + 1e-6), 1)`.
/// A non-finite total norm scales the gradients to NaN, as PyTorch's default does; use
/// [`try_clip_grad_norm_`] for `error_if_nonfinite=True`.
#[track_caller]
pub fn clip_grad_norm_(params: &[Tensor], max_norm: f64, norm_type: f64) -> Tensor {
    let total = get_total_norm(params, norm_type);
    clip_grads_with_norm_(params, max_norm, &total);
    total
}

/// [`clip_grad_norm_`] with `error_if_nonfinite=True`: an error (and no clipping) when the
/// total norm is NaN or infinite.
#[track_caller]
pub fn try_clip_grad_norm_(params: &[Tensor], max_norm: f64, norm_type: f64) -> Result<Tensor> {
    let total = get_total_norm(params, norm_type);
    let value = total.to_dtype(DType::F64).item::<f64>();
    if !value.is_finite() {
        bail!("clip_grad_norm_", Value, "The total norm of order {norm_type} for gradients from `parameters` is non-finite ({value}), so it cannot be clipped");
    }
    clip_grads_with_norm_(params, max_norm, &total);
    Ok(total)
}

/// Multiplies every gradient of `params` by `min(max_norm / (total_norm + 1e-6), 1)`
/// (`torch.nn.utils.clip_grads_with_norm_`).
#[track_caller]
pub fn clip_grads_with_norm_(params: &[Tensor], max_norm: f64, total_norm: &Tensor) {
    let _no_grad = crate::no_grad_guard();
    let grads: Vec<Tensor> = params.iter().filter_map(|p| p.grad()).collect();
    if grads.is_empty() {
        return;
    }
    let coef = Tensor::scalar_opts(max_norm, total_norm.dtype()).div(total_norm.add(1e-6)).clamp_max(1.0);
    for g in &grads {
        g.mul_(&coef);
    }
}

/// Clamps every gradient of `params` to `[-clip_value, clip_value]` in place
/// (`torch.nn.utils.clip_grad_value_`). Panics when `clip_value` is negative or NaN.
#[track_caller]
pub fn clip_grad_value_(params: &[Tensor], clip_value: f64) {
    try_clip_grad_value_(params, clip_value).or_panic()
}

/// [`clip_grad_value_`] returning an error for a negative or NaN `clip_value`.
#[track_caller]
pub fn try_clip_grad_value_(params: &[Tensor], clip_value: f64) -> Result<()> {
    if clip_value.is_nan() || clip_value < 0.0 {
        bail!("clip_grad_value_", Value, "clip_value must be non-negative, got {clip_value}");
    }
    let _no_grad = crate::no_grad_guard();
    for g in params.iter().filter_map(|p| p.grad()) {
        g.clamp_(-clip_value, clip_value);
    }
    Ok(())
}
