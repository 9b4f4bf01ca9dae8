//! Dropout (`F.dropout`, `F.dropout1d`, `F.dropout2d`, `F.dropout3d`).
//!
//! In training mode each element (or each whole channel, for the `Nd` forms) is kept with
//! probability `1 - p` and scaled by `1 / (1 - p)`; `p = 1` gives zeros. The mask comes from
//! kiln's seeded generator (`kiln::manual_seed`), so the same seed gives the same mask (inside
//! `kiln::compile` too, where the uniform numbers are generated inside the one fused kernel of
//! the comparison, the scaling and the product, and never reach memory). The
//! output is `input * (mask / (1 - p))` (the mask divided as PyTorch does) with a constant mask, so the gradient is `mask * scale`.
//! In evaluation mode, or with `p = 0`, the input is returned as it is (the same tensor).

use super::loss::{check_float, err, named};
use crate::error::{ErrorKind, OrPanic, Result};
use crate::tensor::Tensor;
use kiln_runtime::DType;

/// Checks `p` in `[0, 1]`.
#[track_caller]
fn check_p(op: &'static str, p: f64) -> Result<()> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        Err(err(op, ErrorKind::Value, format!("dropout probability has to be between 0 and 1, but got {p}")))
    }
}

/// `input * keep_mask(mask_shape) / (1 - p)`, the mask broadcast over `input`.
#[track_caller]
fn apply(op: &'static str, input: &Tensor, p: f64, training: bool, mask_shape: &[usize]) -> Result<Tensor> {
    check_p(op, p)?;
    check_float(op, "input", input)?;
    if !training || p == 0.0 {
        return Ok(input.clone());
    }
    if p == 1.0 {
        return named(op, input.try_mul(0.0));
    }
    let draw_dtype = if input.dtype() == DType::F64 { DType::F64 } else { DType::F32 };
    let uniform = named(op, Tensor::try_rand_opts(mask_shape, draw_dtype, input.device()))?;
    // No closures here: each op records the caller's line (`#[track_caller]`), which a closure
    // would hide behind this file's.
    let keep = named(op, uniform.try_ge(p))?;
    let mask = named(op, named(op, keep.try_to_dtype(input.dtype()))?.try_div(1.0 - p))?;
    named(op, input.try_mul(&mask))
}

/// Dropout of single elements (`F.dropout(input, p, training)`; PyTorch's defaults are
/// `p = 0.5`, `training = true`).
#[track_caller]
pub fn dropout(input: &Tensor, p: f64, training: bool) -> Tensor {
    try_dropout(input, p, training).or_panic()
}

/// [`dropout`] returning an error for `p` outside `[0, 1]` or a non-float input.
#[track_caller]
pub fn try_dropout(input: &Tensor, p: f64, training: bool) -> Result<Tensor> {
    apply("dropout", input, p, training, input.shape())
}

/// Channel dropout shared by the `Nd` forms: `input` has `spatial` trailing dims after the
/// channel dim, with or without a batch dim in front.
#[track_caller]
fn feature_dropout(op: &'static str, input: &Tensor, p: f64, training: bool, spatial: usize) -> Result<Tensor> {
    let d = input.dim();
    if d != spatial + 1 && d != spatial + 2 {
        return Err(err(
            op,
            ErrorKind::Shape,
            format!(
                "expected an input with {} or {} dims ((C, …) or (N, C, …)), got shape {:?}",
                spatial + 1,
                spatial + 2,
                input.shape()
            ),
        ));
    }
    let lead = d - spatial;
    let mask_shape: Vec<usize> = input.shape().iter().enumerate().map(|(i, &s)| if i < lead { s } else { 1 }).collect();
    apply(op, input, p, training, &mask_shape)
}

/// Dropout of whole channels of a `(N, C, L)` or `(C, L)` input (`F.dropout1d`).
#[track_caller]
pub fn dropout1d(input: &Tensor, p: f64, training: bool) -> Tensor {
    try_dropout1d(input, p, training).or_panic()
}

/// [`dropout1d`] returning an error.
#[track_caller]
pub fn try_dropout1d(input: &Tensor, p: f64, training: bool) -> Result<Tensor> {
    feature_dropout("dropout1d", input, p, training, 1)
}

/// Dropout of whole channels (feature maps) of a `(N, C, H, W)` input (`F.dropout2d`). A 3-D
/// input is taken as `(N, C, L)`, as PyTorch does (with a warning there).
#[track_caller]
pub fn dropout2d(input: &Tensor, p: f64, training: bool) -> Tensor {
    try_dropout2d(input, p, training).or_panic()
}

/// [`dropout2d`] returning an error (an input that is not 3-D or 4-D, `p` outside `[0, 1]`).
#[track_caller]
pub fn try_dropout2d(input: &Tensor, p: f64, training: bool) -> Result<Tensor> {
    const OP: &str = "dropout2d";
    if input.dim() == 3 {
        let mask_shape = [input.shape()[0], input.shape()[1], 1];
        return apply(OP, input, p, training, &mask_shape);
    }
    if input.dim() != 4 {
        return Err(err(
            OP,
            ErrorKind::Shape,
            format!("expected a 4-D input (N, C, H, W) or a 3-D input (N, C, L), got shape {:?}", input.shape()),
        ));
    }
    feature_dropout(OP, input, p, training, 2)
}

/// Dropout of whole channels of a `(N, C, D, H, W)` or `(C, D, H, W)` input (`F.dropout3d`).
#[track_caller]
pub fn dropout3d(input: &Tensor, p: f64, training: bool) -> Tensor {
    try_dropout3d(input, p, training).or_panic()
}

/// [`dropout3d`] returning an error.
#[track_caller]
pub fn try_dropout3d(input: &Tensor, p: f64, training: bool) -> Result<Tensor> {
    feature_dropout("dropout3d", input, p, training, 3)
}
