//! Normalisation: `batch_norm`, `layer_norm`, `group_norm` (PyTorch's `F.*` forms).
//!
//! Each is composed of differentiable tensor ops (mean, biased variance, `rsqrt`), so autograd
//! works to any order; an eager CPU f32 layer norm that records no gradient runs as one row
//! kernel instead (`fused_rows.rs`). f16/bf16 inputs are normalised in f32 and the result rounded back, as
//! PyTorch's CPU kernels do.

use super::loss::{check_float, err, named};
use crate::error::{ErrorKind, OrPanic, Result};
use crate::tensor::Tensor;
use kiln_runtime::DType;

/// The dtype statistics are computed in.
fn compute_dtype(dtype: DType) -> DType {
    match dtype {
        DType::F16 | DType::BF16 => DType::F32,
        d => d,
    }
}

/// Checks an optional per-channel tensor of `numel` elements (shape `expected` when given).
#[track_caller]
fn check_param(op: &'static str, what: &str, t: Option<&Tensor>, expected: &[usize]) -> Result<()> {
    if let Some(t) = t {
        check_float(op, what, t)?;
        if t.shape() != expected {
            return Err(err(
                op,
                ErrorKind::Shape,
                format!("expected {what} of shape {expected:?}, got shape {:?}", t.shape()),
            ));
        }
    }
    Ok(())
}

/// `x * w + b` for optional `w` and `b` viewed as `shape`.
#[track_caller]
fn affine(x: Tensor, weight: Option<&Tensor>, bias: Option<&Tensor>, shape: &[i64]) -> Result<Tensor> {
    let mut y = x;
    if let Some(w) = weight {
        y = y.try_mul(&w.try_to_dtype(y.dtype())?.try_reshape(shape)?)?;
    }
    if let Some(b) = bias {
        y = y.try_add(&b.try_to_dtype(y.dtype())?.try_reshape(shape)?)?;
    }
    Ok(y)
}

/// Batch normalisation (`F.batch_norm`) of `input` `(N, C, …)` over every dim but the channel
/// dim 1.
///
/// In training mode the batch's mean and biased variance normalise the input, and the running
/// statistics (when given) are updated in place, without recording for autograd, as
/// `running = (1 - momentum)·running + momentum·batch` with the *unbiased* batch variance (as
/// PyTorch). In evaluation mode the running statistics (required then) normalise the input.
/// `weight` and `bias` (`C` elements) scale and shift the result. PyTorch's defaults are
/// `momentum = 0.1`, `eps = 1e-5`.
#[allow(clippy::too_many_arguments)]
#[track_caller]
pub fn batch_norm(
    input: &Tensor,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    training: bool,
    momentum: f64,
    eps: f64,
) -> Tensor {
    try_batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps).or_panic()
}

/// [`batch_norm`] returning an error (shapes, dtypes, a single value per channel in training,
/// missing running statistics in evaluation).
#[allow(clippy::too_many_arguments)]
#[track_caller]
pub fn try_batch_norm(
    input: &Tensor,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    training: bool,
    momentum: f64,
    eps: f64,
) -> Result<Tensor> {
    const OP: &str = "batch_norm";
    check_float(OP, "input", input)?;
    if input.dim() < 2 {
        return Err(err(
            OP,
            ErrorKind::Shape,
            format!("expected an input of shape (N, C, ...) with at least 2 dims, got shape {:?}", input.shape()),
        ));
    }
    let c = input.shape()[1];
    for (what, t) in [("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)]
    {
        check_param(OP, what, t, &[c])?;
    }
    let mut pshape = vec![1i64; input.dim()];
    pshape[1] = c as i64;
    let dims: Vec<i64> = std::iter::once(0).chain(2..input.dim() as i64).collect();
    let x = named(OP, input.try_to_dtype(compute_dtype(input.dtype())))?;
    let normalized = if training && input.numel() == 0 {
        // As PyTorch: an empty batch normalizes to an empty output (still connected to the
        // weight and bias) and leaves the running statistics alone.
        x
    } else if training {
        let count = input.numel() / c.max(1);
        if count <= 1 {
            return Err(err(
                OP,
                ErrorKind::Value,
                format!("expected more than 1 value per channel when training, got input of shape {:?}", input.shape()),
            ));
        }
        let mean = named(OP, x.try_mean_dim_keepdim(dims.clone()))?;
        let var = named(OP, x.try_var_correction(dims, 0, true))?;
        named(OP, update_running_stats(running_mean, running_var, &mean, &var, count, momentum))?;
        (&x - &mean) * (var + eps).rsqrt()
    } else {
        let (Some(rm), Some(rv)) = (running_mean, running_var) else {
            return Err(err(
                OP,
                ErrorKind::Value,
                "running_mean and running_var must be given in evaluation mode (training = false)".into(),
            ));
        };
        let rm = named(OP, rm.try_to_dtype(x.dtype()).and_then(|t| t.try_reshape(&pshape)))?;
        let rv = named(OP, rv.try_to_dtype(x.dtype()).and_then(|t| t.try_reshape(&pshape)))?;
        (&x - rm) * (rv + eps).rsqrt()
    };
    let y = named(OP, affine(normalized, weight, bias, &pshape))?;
    named(OP, y.try_to_dtype(input.dtype()))
}

/// `running = (1 - m)·running + m·stat` in place, outside autograd.
#[track_caller]
fn update_running_stats(
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    mean: &Tensor,
    var: &Tensor,
    count: usize,
    momentum: f64,
) -> Result<()> {
    let _guard = crate::no_grad_guard();
    if let Some(rm) = running_mean {
        let batch = mean.detach().try_reshape([-1])?;
        rm.try_copy_(&(rm * (1.0 - momentum) + batch * momentum))?;
    }
    if let Some(rv) = running_var {
        let unbiased = var.detach().try_reshape([-1])? * (count as f64 / (count - 1) as f64);
        rv.try_copy_(&(rv * (1.0 - momentum) + unbiased * momentum))?;
    }
    Ok(())
}

/// Layer normalisation (`F.layer_norm`) over the trailing dims `normalized_shape`, with the
/// biased variance; `weight` and `bias` have shape `normalized_shape`. PyTorch's `eps` default
/// is `1e-5`.
#[track_caller]
pub fn layer_norm(
    input: &Tensor,
    normalized_shape: &[usize],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Tensor {
    try_layer_norm(input, normalized_shape, weight, bias, eps).or_panic()
}

/// [`layer_norm`] returning an error (an input whose trailing dims are not `normalized_shape`,
/// parameters of another shape, a non-float input).
#[track_caller]
pub fn try_layer_norm(
    input: &Tensor,
    normalized_shape: &[usize],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<Tensor> {
    if let Some(c) = crate::amp::autocast::operands("layer_norm", &[Some(input), weight, bias])? {
        return try_layer_norm(c.arg(0), normalized_shape, c.opt(1), c.opt(2), eps);
    }
    const OP: &str = "layer_norm";
    check_float(OP, "input", input)?;
    let k = normalized_shape.len();
    if k == 0 || input.dim() < k || &input.shape()[input.dim() - k..] != normalized_shape {
        return Err(err(
            OP,
            ErrorKind::Shape,
            format!(
                "given normalized_shape {normalized_shape:?}, expected an input of shape [*, {}], got shape {:?}",
                normalized_shape.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", "),
                input.shape()
            ),
        ));
    }
    check_param(OP, "weight", weight, normalized_shape)?;
    check_param(OP, "bias", bias, normalized_shape)?;
    if let Some(y) = super::fused_rows::layer_norm(input, normalized_shape.iter().product(), weight, bias, eps) {
        return y;
    }
    let dims: Vec<i64> = (input.dim() - k..input.dim()).map(|d| d as i64).collect();
    let x = named(OP, input.try_to_dtype(compute_dtype(input.dtype())))?;
    let mean = named(OP, x.try_mean_dim_keepdim(dims.clone()))?;
    let var = named(OP, x.try_var_correction(dims, 0, true))?;
    let normalized = (&x - &mean) * (var + eps).rsqrt();
    let shape: Vec<i64> = normalized_shape.iter().map(|&s| s as i64).collect();
    let y = named(OP, affine(normalized, weight, bias, &shape))?;
    named(OP, y.try_to_dtype(input.dtype()))
}

/// Group normalisation (`F.group_norm`): the channels of `input` `(N, C, …)` split into
/// `num_groups` groups, each normalised over its channels and the spatial dims (biased
/// variance); per-channel `weight` and `bias` (`C` elements). PyTorch's `eps` default is `1e-5`.
#[track_caller]
pub fn group_norm(
    input: &Tensor,
    num_groups: usize,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Tensor {
    try_group_norm(input, num_groups, weight, bias, eps).or_panic()
}

/// [`group_norm`] returning an error (channels not divisible by `num_groups`, shapes, dtypes).
#[track_caller]
pub fn try_group_norm(
    input: &Tensor,
    num_groups: usize,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<Tensor> {
    if let Some(c) = crate::amp::autocast::operands("group_norm", &[Some(input), weight, bias])? {
        return try_group_norm(c.arg(0), num_groups, c.opt(1), c.opt(2), eps);
    }
    const OP: &str = "group_norm";
    check_float(OP, "input", input)?;
    if input.dim() < 2 {
        return Err(err(
            OP,
            ErrorKind::Shape,
            format!("expected an input of shape (N, C, ...) with at least 2 dims, got shape {:?}", input.shape()),
        ));
    }
    let (n, c) = (input.shape()[0], input.shape()[1]);
    if num_groups == 0 || c % num_groups != 0 {
        return Err(err(OP, ErrorKind::Value, format!("expected the number of channels of the input to be divisible by num_groups, got input of shape {:?} and num_groups = {num_groups}", input.shape())));
    }
    check_param(OP, "weight", weight, &[c])?;
    check_param(OP, "bias", bias, &[c])?;
    let x = named(OP, input.try_to_dtype(compute_dtype(input.dtype())))?;
    let grouped = named(OP, x.try_reshape([n as i64, num_groups as i64, -1]))?;
    let mean = named(OP, grouped.try_mean_dim_keepdim(2))?;
    let var = named(OP, grouped.try_var_correction(2, 0, true))?;
    let normalized =
        ((&grouped - &mean) * (var + eps).rsqrt()).reshape(input.shape().iter().map(|&s| s as i64).collect::<Vec<_>>());
    let mut pshape = vec![1i64; input.dim()];
    pshape[1] = c as i64;
    let y = named(OP, affine(normalized, weight, bias, &pshape))?;
    named(OP, y.try_to_dtype(input.dtype()))
}
