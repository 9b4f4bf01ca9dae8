//! Loss functions (`F.mse_loss`, `F.cross_entropy`, …) and the free `softmax`/`log_softmax`.
//!
//! Every loss is composed of differentiable tensor ops, so autograd (first and higher order)
//! needs no rule of its own. Cross-entropy is `log_softmax` followed by a gather (never
//! `log(softmax)`), so large logits do not overflow; on CPU f32 `[N, C]` logits without class
//! weights or label smoothing it runs eagerly as row kernels with a backward rule of their own
//! (`fused_rows.rs`).
//!
//! Each loss has a panicking form (`#[track_caller]`) and a `try_` form; errors name the loss
//! (`cross_entropy: …`), the shapes or dtypes involved and the caller's line.
//!
//! Differences from PyTorch:
//! - Elementwise losses (`mse_loss`, `l1_loss`, `smooth_l1_loss`, `binary_cross_entropy*`,
//!   `kl_div`) require `input` and `target` of the same shape; PyTorch broadcasts some of them
//!   with a deprecation warning.
//! - A class-weight tensor of another float dtype is converted to the input's dtype (PyTorch
//!   raises).
//! - `binary_cross_entropy`'s gradient is that of its formula with PyTorch's `log` clamp at
//!   -100; at inputs of exactly 0 or 1 it can differ from PyTorch's special-cased gradient.

use crate::error::{Error, ErrorKind, OrPanic, Result};
use crate::tensor::Tensor;
use kiln_runtime::DType;

/// How a loss reduces its per-element values (`reduction=` in PyTorch).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reduction {
    /// Per-element losses, unreduced (`'none'`).
    None,
    /// The mean (`'mean'`, the default). For weighted `nll_loss`/`cross_entropy` the sum is
    /// divided by the total weight of the non-ignored targets.
    #[default]
    Mean,
    /// The sum (`'sum'`).
    Sum,
}

/// `kl_div`'s reduction: [`Reduction`]'s three plus PyTorch's `'batchmean'` (the sum divided by
/// the batch size, the mathematically correct KL divergence).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KlDivReduction {
    /// Per-element values.
    None,
    /// The mean over every element (PyTorch's default, with a warning there).
    #[default]
    Mean,
    /// The sum.
    Sum,
    /// The sum divided by `input.size(0)` (by 1 for a 0-dim input).
    BatchMean,
}

impl From<Reduction> for KlDivReduction {
    fn from(r: Reduction) -> KlDivReduction {
        match r {
            Reduction::None => KlDivReduction::None,
            Reduction::Mean => KlDivReduction::Mean,
            Reduction::Sum => KlDivReduction::Sum,
        }
    }
}

// ---------------------------------------------------------------- shared helpers

/// Renames an error from an inner op after the public op `op` (keeping the inner op's name in
/// the message and the caller's location).
pub(super) fn named<T>(op: &'static str, r: Result<T>) -> Result<T> {
    r.map_err(|e| if e.op == op { e } else { Error { op, message: format!("{} (in {})", e.message, e.op), ..e } })
}

/// An error located at the caller.
#[track_caller]
pub(super) fn err(op: &'static str, kind: ErrorKind, message: String) -> Error {
    Error::new(op, kind, message)
}

/// Fails unless `t` is floating point.
#[track_caller]
pub(super) fn check_float(op: &'static str, what: &str, t: &Tensor) -> Result<()> {
    if t.dtype().is_float() {
        Ok(())
    } else {
        Err(err(
            op,
            ErrorKind::DType,
            format!("expected a floating-point {what}, got dtype {} (shape {:?})", t.dtype(), t.shape()),
        ))
    }
}

/// Fails unless `input` and `target` have the same shape.
#[track_caller]
fn check_same_shape(op: &'static str, input: &Tensor, target: &Tensor) -> Result<()> {
    if input.shape() == target.shape() {
        Ok(())
    } else {
        Err(err(
            op,
            ErrorKind::Shape,
            format!("target shape {:?} must be the same as input shape {:?}", target.shape(), input.shape()),
        ))
    }
}

/// Checks a floating-point input and target of the same shape.
#[track_caller]
fn check_pointwise(op: &'static str, input: &Tensor, target: &Tensor) -> Result<()> {
    check_float(op, "input", input)?;
    check_float(op, "target", target)?;
    check_same_shape(op, input, target)
}

/// Reduces per-element losses.
#[track_caller]
fn reduce(loss: Tensor, reduction: Reduction) -> Result<Tensor> {
    match reduction {
        Reduction::None => Ok(loss),
        Reduction::Mean => loss.try_mean(),
        Reduction::Sum => loss.try_sum(),
    }
}

/// The class dim of a loss input: 0 for a 1-D input `(C)`, else 1.
fn class_dim(input: &Tensor) -> usize {
    if input.dim() == 1 {
        0
    } else {
        1
    }
}

/// A 1-D per-class tensor `w` of `C` elements viewed to broadcast along `input`'s class dim.
#[track_caller]
fn along_class_dim(w: &Tensor, input: &Tensor) -> Result<Tensor> {
    let mut shape = vec![1i64; input.dim()];
    shape[class_dim(input)] = -1;
    w.try_view(&shape)
}

/// Checks an optional class-weight tensor (1-D, `classes` elements, float) and converts it to
/// `dtype`.
#[track_caller]
fn class_weight(op: &'static str, weight: Option<&Tensor>, classes: usize, dtype: DType) -> Result<Option<Tensor>> {
    let Some(w) = weight else { return Ok(None) };
    check_float(op, "weight", w)?;
    if w.dim() != 1 || w.numel() != classes {
        return Err(err(op, ErrorKind::Shape, format!("weight tensor should be defined either for all {classes} classes or no classes but got weight tensor of shape {:?}", w.shape())));
    }
    Ok(Some(w.try_to_dtype(dtype)?))
}

// ---------------------------------------------------------------- softmax

/// `softmax(x, dim)` (`F.softmax`): the same as [`Tensor::softmax`].
#[track_caller]
pub fn softmax(x: &Tensor, dim: i64) -> Tensor {
    x.softmax(dim)
}

/// [`softmax`] returning an error.
#[track_caller]
pub fn try_softmax(x: &Tensor, dim: i64) -> Result<Tensor> {
    x.try_softmax(dim)
}

/// `log_softmax(x, dim)` (`F.log_softmax`): the same as [`Tensor::log_softmax`].
#[track_caller]
pub fn log_softmax(x: &Tensor, dim: i64) -> Tensor {
    x.log_softmax(dim)
}

/// [`log_softmax`] returning an error.
#[track_caller]
pub fn try_log_softmax(x: &Tensor, dim: i64) -> Result<Tensor> {
    x.try_log_softmax(dim)
}

/// `softmax(x, dim, dtype=dtype)` (`F.softmax` with `dtype`): `x` is cast to `dtype` first; the
/// same as [`Tensor::softmax_dtype`].
#[track_caller]
pub fn softmax_dtype(x: &Tensor, dim: i64, dtype: DType) -> Tensor {
    x.softmax_dtype(dim, dtype)
}

/// [`softmax_dtype`] returning an error.
#[track_caller]
pub fn try_softmax_dtype(x: &Tensor, dim: i64, dtype: DType) -> Result<Tensor> {
    x.try_softmax_dtype(dim, dtype)
}

/// `log_softmax(x, dim, dtype=dtype)` (`F.log_softmax` with `dtype`): `x` is cast to `dtype`
/// first; the same as [`Tensor::log_softmax_dtype`].
#[track_caller]
pub fn log_softmax_dtype(x: &Tensor, dim: i64, dtype: DType) -> Tensor {
    x.log_softmax_dtype(dim, dtype)
}

/// [`log_softmax_dtype`] returning an error.
#[track_caller]
pub fn try_log_softmax_dtype(x: &Tensor, dim: i64, dtype: DType) -> Result<Tensor> {
    x.try_log_softmax_dtype(dim, dtype)
}

// ---------------------------------------------------------------- regression losses

/// Mean squared error `mean((input - target)²)` (`F.mse_loss`).
#[track_caller]
pub fn mse_loss(input: &Tensor, target: &Tensor) -> Tensor {
    try_mse_loss_opts(input, target, Reduction::Mean).or_panic()
}

/// [`mse_loss`] with a reduction.
#[track_caller]
pub fn mse_loss_opts(input: &Tensor, target: &Tensor, reduction: Reduction) -> Tensor {
    try_mse_loss_opts(input, target, reduction).or_panic()
}

/// [`mse_loss_opts`] returning an error for non-float inputs or different shapes.
#[track_caller]
pub fn try_mse_loss_opts(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    if let Some(c) = crate::amp::autocast::operands("mse_loss", &[Some(input), Some(target)])? {
        return try_mse_loss_opts(c.arg(0), c.arg(1), reduction);
    }
    const OP: &str = "mse_loss";
    check_pointwise(OP, input, target)?;
    named(OP, input.try_sub(target).and_then(|d| reduce(d.square(), reduction)))
}

/// Mean absolute error `mean(|input - target|)` (`F.l1_loss`).
#[track_caller]
pub fn l1_loss(input: &Tensor, target: &Tensor) -> Tensor {
    try_l1_loss_opts(input, target, Reduction::Mean).or_panic()
}

/// [`l1_loss`] with a reduction.
#[track_caller]
pub fn l1_loss_opts(input: &Tensor, target: &Tensor, reduction: Reduction) -> Tensor {
    try_l1_loss_opts(input, target, reduction).or_panic()
}

/// [`l1_loss_opts`] returning an error for non-float inputs or different shapes.
#[track_caller]
pub fn try_l1_loss_opts(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    if let Some(c) = crate::amp::autocast::operands("l1_loss", &[Some(input), Some(target)])? {
        return try_l1_loss_opts(c.arg(0), c.arg(1), reduction);
    }
    const OP: &str = "l1_loss";
    check_pointwise(OP, input, target)?;
    named(OP, input.try_sub(target).and_then(|d| reduce(d.abs(), reduction)))
}

/// Smooth L1 loss (`F.smooth_l1_loss(input, target, reduction=, beta=)`, PyTorch's default
/// `beta` is 1.0): `0.5·d²/beta` where `|d| < beta`, else `|d| - 0.5·beta`; `beta = 0` is the L1
/// loss.
#[track_caller]
pub fn smooth_l1_loss(input: &Tensor, target: &Tensor, reduction: Reduction, beta: f64) -> Tensor {
    try_smooth_l1_loss(input, target, reduction, beta).or_panic()
}

/// [`smooth_l1_loss`] returning an error (also for a negative `beta`).
#[track_caller]
pub fn try_smooth_l1_loss(input: &Tensor, target: &Tensor, reduction: Reduction, beta: f64) -> Result<Tensor> {
    if let Some(c) = crate::amp::autocast::operands("smooth_l1_loss", &[Some(input), Some(target)])? {
        return try_smooth_l1_loss(c.arg(0), c.arg(1), reduction, beta);
    }
    const OP: &str = "smooth_l1_loss";
    check_pointwise(OP, input, target)?;
    if beta.is_nan() || beta < 0.0 {
        return Err(err(
            OP,
            ErrorKind::Value,
            format!("smooth_l1_loss does not support negative values for beta, got {beta}"),
        ));
    }
    named(OP, smooth_l1_impl(input, target, reduction, beta))
}

#[track_caller]
fn smooth_l1_impl(input: &Tensor, target: &Tensor, reduction: Reduction, beta: f64) -> Result<Tensor> {
    let d = input.try_sub(target)?.abs();
    if beta == 0.0 {
        return reduce(d, reduction);
    }
    let quadratic = d.square() * (0.5 / beta);
    let linear = &d - 0.5 * beta;
    reduce(Tensor::try_where(&d.lt(beta), quadratic, linear)?, reduction)
}

// ---------------------------------------------------------------- classification losses

/// Options of [`nll_loss_opts`] (PyTorch's keyword arguments and defaults).
#[derive(Clone, Debug)]
pub struct NllLossOpts {
    /// A weight per class (1-D, `C` elements); `None` weighs every class 1.
    pub weight: Option<Tensor>,
    /// Targets equal to this value contribute nothing (and do not count in the mean); -100.
    pub ignore_index: i64,
    /// The reduction; `Mean` divides by the total weight of the non-ignored targets.
    pub reduction: Reduction,
}

impl Default for NllLossOpts {
    fn default() -> Self {
        NllLossOpts { weight: None, ignore_index: -100, reduction: Reduction::Mean }
    }
}

/// Options of [`cross_entropy_opts`] (PyTorch's keyword arguments and defaults).
#[derive(Clone, Debug)]
pub struct CrossEntropyOpts {
    /// A weight per class (1-D, `C` elements); `None` weighs every class 1.
    pub weight: Option<Tensor>,
    /// Class-index targets equal to this value contribute nothing; -100. (Not used with
    /// probability targets.)
    pub ignore_index: i64,
    /// The reduction.
    pub reduction: Reduction,
    /// In `[0, 1]`: the target becomes `(1 - ε)·target + ε/C` (uniform smoothing); 0.0.
    pub label_smoothing: f64,
}

impl Default for CrossEntropyOpts {
    fn default() -> Self {
        CrossEntropyOpts { weight: None, ignore_index: -100, reduction: Reduction::Mean, label_smoothing: 0.0 }
    }
}

/// Negative log-likelihood of class-index targets given log-probabilities (`F.nll_loss`).
/// `input` is `(N, C)`, `(N, C, d1, …)` or `(C)`; `target` is int64 (or uint8) of shape
/// `(N)`, `(N, d1, …)` or `()`, each value a class in `[0, C)` or the ignore index.
#[track_caller]
pub fn nll_loss(input: &Tensor, target: &Tensor) -> Tensor {
    try_nll_loss_opts(input, target, &NllLossOpts::default()).or_panic()
}

/// [`nll_loss`] with options (weight, ignore_index, reduction).
#[track_caller]
pub fn nll_loss_opts(input: &Tensor, target: &Tensor, opts: &NllLossOpts) -> Tensor {
    try_nll_loss_opts(input, target, opts).or_panic()
}

/// [`nll_loss_opts`] returning an error (shapes, dtypes, a class index out of range).
#[track_caller]
pub fn try_nll_loss_opts(input: &Tensor, target: &Tensor, opts: &NllLossOpts) -> Result<Tensor> {
    if let Some(c) = crate::amp::autocast::operands("nll_loss", &[Some(input), Some(target)])? {
        return try_nll_loss_opts(c.arg(0), c.arg(1), opts);
    }
    const OP: &str = "nll_loss";
    let picked = nll_pick(OP, input, target, opts.weight.as_ref(), opts.ignore_index)?;
    named(OP, nll_reduce(picked, opts.reduction))
}

/// The per-target pieces of an NLL loss: the unreduced loss and, unless every target weighs
/// 1 (no weight and nothing ignored, so the mean is the loss's own), each target's weight (0
/// where ignored) and the ignore mask.
struct NllParts {
    loss: Tensor,
    weighed: Option<TargetWeights>,
}

/// Each target's weight (0 where ignored) and the ignore mask.
struct TargetWeights {
    weight: Tensor,
    ignored: Tensor,
}

#[track_caller]
fn nll_reduce(p: NllParts, reduction: Reduction) -> Result<Tensor> {
    match (reduction, p.weighed) {
        (Reduction::Mean, None) => p.loss.try_mean(),
        (Reduction::Mean, Some(w)) => p.loss.try_sum()?.try_div(&w.weight.try_sum()?),
        (r, _) => reduce(p.loss, r),
    }
}

/// Checks class-index targets for `input` (float, at least 1-D): int64 (or uint8, converted),
/// of `input`'s shape without the class dim, each `ignore_index` or a class in `0..C`. Returns
/// them as int64 with their values.
#[track_caller]
fn class_targets(op: &'static str, input: &Tensor, target: &Tensor, ignore_index: i64) -> Result<(Tensor, Vec<i64>)> {
    check_float(op, "input", input)?;
    if input.dim() == 0 {
        return Err(err(
            op,
            ErrorKind::Shape,
            format!("input of shape {:?} needs at least one dim (the classes)", input.shape()),
        ));
    }
    let target = match target.dtype() {
        DType::I64 => target.clone(),
        DType::U8 => target.try_to_dtype(DType::I64)?,
        other => {
            return Err(err(op, ErrorKind::DType, format!("expected a target of class indices of dtype int64 (or uint8), got dtype {other} (target shape {:?}, input shape {:?})", target.shape(), input.shape())))
        }
    };
    let cd = class_dim(input);
    let classes = input.shape()[cd];
    let mut expected: Vec<usize> = input.shape().to_vec();
    expected.remove(cd);
    if target.shape() != expected.as_slice() {
        return Err(err(
            op,
            ErrorKind::Shape,
            format!(
                "expected target of shape {expected:?} for input of shape {:?}, got target of shape {:?}",
                input.shape(),
                target.shape()
            ),
        ));
    }
    let values = target.contiguous().to_vec::<i64>();
    if let Some(bad) = values.iter().find(|&&t| t != ignore_index && (t < 0 || t >= classes as i64)) {
        return Err(err(
            op,
            ErrorKind::Index,
            format!(
                "target {bad} is out of bounds: input of shape {:?} has {classes} classes (target shape {:?})",
                input.shape(),
                target.shape()
            ),
        ));
    }
    Ok((target, values))
}

/// Validates and computes [`NllParts`] for log-probabilities `input`.
#[track_caller]
fn nll_pick(
    op: &'static str,
    input: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    ignore_index: i64,
) -> Result<NllParts> {
    let (target, values) = class_targets(op, input, target, ignore_index)?;
    let cd = class_dim(input);
    let weight = class_weight(op, weight, input.shape()[cd], input.dtype())?;
    if weight.is_none() && !values.contains(&ignore_index) && crate::capture::is_active() && cd + 1 == input.dim() {
        return named(op, nll_parts_all_kept(input, target.shape(), &values));
    }
    named(op, nll_parts(input, &target, weight.as_ref(), ignore_index))
}

/// [`NllParts`] inside a compiled step when no target is ignored and there is no weight
/// (the targets are read on the host for their bounds anyway, and each call traces again):
/// the pick by the known targets, no mask, and a plain mean. The captured loss is then the
/// log-probabilities' kernel and the mean's: no kernels for the mask, the targets' cast or
/// the weights' sum (the mean differs from `Σ loss / Σ 1` by the rounding of one division).
#[track_caller]
fn nll_parts_all_kept(input: &Tensor, target_shape: &[usize], values: &[i64]) -> Result<NllParts> {
    let cd = class_dim(input);
    let mut index_shape = target_shape.to_vec();
    index_shape.insert(cd, 1);
    let picked = crate::ops::pick::masked_pick_known(input, cd, &index_shape, values)?.squeeze_dim(cd as i64);
    Ok(NllParts { loss: -picked, weighed: None })
}

#[track_caller]
fn nll_parts(input: &Tensor, target: &Tensor, weight: Option<&Tensor>, ignore_index: i64) -> Result<NllParts> {
    let cd = class_dim(input) as i64;
    let ignored = target.try_eq(ignore_index)?;
    let safe = target.masked_fill(&ignored, 0i64);
    // Inside a compiled step, a pick along the last dim is a masked sum that fuses (the
    // targets are checked already); see `ops/pick.rs`.
    let picked = if crate::capture::is_active() && cd as usize + 1 == input.dim() {
        crate::ops::pick::masked_pick(input, cd as usize, &safe.unsqueeze(cd))?
    } else {
        input.try_gather(cd, &safe.unsqueeze(cd))?
    };
    let picked = picked.squeeze_dim(cd);
    let keep = ignored.logical_not().try_to_dtype(input.dtype())?;
    let target_weight = match weight {
        Some(w) => w.try_index_select(0, &safe.flatten(0, -1))?.try_reshape(shape_i64(target.shape()))? * keep,
        None => keep,
    };
    let loss = -(picked * &target_weight);
    Ok(NllParts { loss, weighed: Some(TargetWeights { weight: target_weight, ignored }) })
}

fn shape_i64(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&s| s as i64).collect()
}

/// Cross-entropy between logits and targets (`F.cross_entropy`): `log_softmax` over the class
/// dim, then the negative log-likelihood. `input` is `(N, C)`, `(N, C, d1, …)` or `(C)`;
/// `target` is either class indices (int64, the input's shape without the class dim) or class
/// probabilities (float, the input's shape).
#[track_caller]
pub fn cross_entropy(input: &Tensor, target: &Tensor) -> Tensor {
    try_cross_entropy_opts(input, target, &CrossEntropyOpts::default()).or_panic()
}

/// [`cross_entropy`] returning an error.
#[track_caller]
pub fn try_cross_entropy(input: &Tensor, target: &Tensor) -> Result<Tensor> {
    try_cross_entropy_opts(input, target, &CrossEntropyOpts::default())
}

/// [`cross_entropy`] with options (weight, ignore_index, reduction, label_smoothing), following
/// PyTorch's formulas: with class-index targets and label smoothing ε the loss is
/// `(1-ε)·nll + ε/C · smooth` where `smooth = -Σ_c w_c·log p_c` per target (0 where ignored),
/// reduced like the NLL term (the mean divides by the total weight of the non-ignored targets).
#[track_caller]
pub fn cross_entropy_opts(input: &Tensor, target: &Tensor, opts: &CrossEntropyOpts) -> Tensor {
    try_cross_entropy_opts(input, target, opts).or_panic()
}

/// [`cross_entropy_opts`] returning an error (shapes, dtypes, a class index out of range, a
/// label smoothing outside `[0, 1]`).
#[track_caller]
pub fn try_cross_entropy_opts(input: &Tensor, target: &Tensor, opts: &CrossEntropyOpts) -> Result<Tensor> {
    if let Some(c) = crate::amp::autocast::operands("cross_entropy", &[Some(input), Some(target)])? {
        return try_cross_entropy_opts(c.arg(0), c.arg(1), opts);
    }
    const OP: &str = "cross_entropy";
    check_float(OP, "input", input)?;
    if input.dim() == 0 {
        return Err(err(
            OP,
            ErrorKind::Shape,
            format!("input of shape {:?} needs at least one dim (the classes)", input.shape()),
        ));
    }
    let ls = opts.label_smoothing;
    if !(0.0..=1.0).contains(&ls) {
        return Err(err(OP, ErrorKind::Value, format!("label_smoothing must be between 0.0 and 1.0, got {ls}")));
    }
    let cd = class_dim(input);
    let classes = input.shape()[cd];
    if target.dtype().is_float() {
        check_same_shape(OP, input, target)?;
        let weight = class_weight(OP, opts.weight.as_ref(), classes, input.dtype())?;
        return named(OP, cross_entropy_probs(input, target, weight.as_ref(), opts.reduction, ls));
    }
    if super::fused_rows::takes_cross_entropy(input, target, opts.weight.is_some(), ls) {
        let (_, values) = class_targets(OP, input, target, opts.ignore_index)?;
        return named(OP, super::fused_rows::cross_entropy(input, &values, opts.ignore_index, opts.reduction));
    }
    let logp = named(OP, input.try_log_softmax(cd as i64))?;
    let parts = nll_pick(OP, &logp, target, opts.weight.as_ref(), opts.ignore_index)?;
    if ls == 0.0 {
        return named(OP, nll_reduce(parts, opts.reduction));
    }
    let weight = class_weight(OP, opts.weight.as_ref(), classes, input.dtype())?;
    named(OP, cross_entropy_smoothed(&logp, parts, weight.as_ref(), opts.reduction, ls))
}

/// Class-index cross-entropy with label smoothing, from log-probabilities and the NLL parts.
#[track_caller]
fn cross_entropy_smoothed(
    logp: &Tensor,
    parts: NllParts,
    weight: Option<&Tensor>,
    reduction: Reduction,
    ls: f64,
) -> Result<Tensor> {
    let cd = class_dim(logp) as i64;
    let classes = logp.shape()[cd as usize] as f64;
    let weighted = match weight {
        Some(w) => logp * along_class_dim(w, logp)?,
        None => logp.clone(),
    };
    let smooth = -weighted.try_sum_dim(cd)?;
    let smooth = match &parts.weighed {
        Some(w) => smooth.masked_fill(&w.ignored, 0.0),
        None => smooth,
    };
    let smooth = match (reduction, &parts.weighed) {
        (Reduction::None, _) => smooth,
        (Reduction::Sum, _) => smooth.sum(),
        (Reduction::Mean, None) => smooth.mean(),
        (Reduction::Mean, Some(w)) => smooth.sum() / w.weight.sum(),
    };
    let nll = nll_reduce(parts, reduction)?;
    Ok(nll * (1.0 - ls) + smooth * (ls / classes))
}

/// Cross-entropy with probability targets (the same shape as the input).
#[track_caller]
fn cross_entropy_probs(
    input: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: Reduction,
    ls: f64,
) -> Result<Tensor> {
    let cd = class_dim(input);
    let classes = input.shape()[cd];
    let logp = input.try_log_softmax(cd as i64)?;
    let target = if ls > 0.0 { target * (1.0 - ls) + ls / classes as f64 } else { target.clone() };
    let mut prod = logp * target;
    if let Some(w) = weight {
        prod = &prod * along_class_dim(w, &prod)?;
    }
    Ok(match reduction {
        Reduction::None => -prod.try_sum_dim(cd as i64)?,
        Reduction::Sum => -prod.sum(),
        Reduction::Mean => {
            let count = input.numel() / classes.max(1);
            -prod.sum() / count as f64
        }
    })
}

// ---------------------------------------------------------------- binary losses

/// Options of [`binary_cross_entropy_opts`].
#[derive(Clone, Debug, Default)]
pub struct BinaryCrossEntropyOpts {
    /// A weight broadcast against the per-element losses; `None` weighs each 1.
    pub weight: Option<Tensor>,
    /// The reduction.
    pub reduction: Reduction,
}

/// Options of [`binary_cross_entropy_with_logits_opts`].
#[derive(Clone, Debug, Default)]
pub struct BinaryCrossEntropyWithLogitsOpts {
    /// A weight broadcast against the per-element losses; `None` weighs each 1.
    pub weight: Option<Tensor>,
    /// A weight of the positive term, broadcast along the last (class) dim; `None` is 1.
    pub pos_weight: Option<Tensor>,
    /// The reduction.
    pub reduction: Reduction,
}

/// Binary cross-entropy of probabilities `input` (in `[0, 1]`) and targets of the same shape
/// (`F.binary_cross_entropy`): `-(t·log x + (1-t)·log(1-x))`, each log clamped at -100 as
/// PyTorch does.
#[track_caller]
pub fn binary_cross_entropy(input: &Tensor, target: &Tensor) -> Tensor {
    try_binary_cross_entropy_opts(input, target, &BinaryCrossEntropyOpts::default()).or_panic()
}

/// [`binary_cross_entropy`] with options (weight, reduction).
#[track_caller]
pub fn binary_cross_entropy_opts(input: &Tensor, target: &Tensor, opts: &BinaryCrossEntropyOpts) -> Tensor {
    try_binary_cross_entropy_opts(input, target, opts).or_panic()
}

/// [`binary_cross_entropy_opts`] returning an error (also for input values outside `[0, 1]`).
#[track_caller]
pub fn try_binary_cross_entropy_opts(input: &Tensor, target: &Tensor, opts: &BinaryCrossEntropyOpts) -> Result<Tensor> {
    if let Some(c) = crate::amp::autocast::operands("binary_cross_entropy", &[Some(input), Some(target)])? {
        return try_binary_cross_entropy_opts(c.arg(0), c.arg(1), opts);
    }
    const OP: &str = "binary_cross_entropy";
    check_pointwise(OP, input, target)?;
    let inside = input.ge(0.0).logical_and(input.le(1.0)).all().item::<bool>();
    if !inside {
        return Err(err(
            OP,
            ErrorKind::Value,
            format!("all elements of input (shape {:?}) should be between 0 and 1", input.shape()),
        ));
    }
    if let Some(w) = &opts.weight {
        check_float(OP, "weight", w)?;
    }
    named(OP, bce_impl(input, target, opts))
}

#[track_caller]
fn bce_impl(input: &Tensor, target: &Tensor, opts: &BinaryCrossEntropyOpts) -> Result<Tensor> {
    let log_x = input.log().clamp_min(-100.0);
    let log_1mx = (1.0 - input).log().clamp_min(-100.0);
    let mut loss = -(target * log_x + (1.0 - target) * log_1mx);
    if let Some(w) = &opts.weight {
        loss = loss.try_mul(w)?;
    }
    reduce(loss, opts.reduction)
}

/// Binary cross-entropy of logits (`F.binary_cross_entropy_with_logits`): the sigmoid and the
/// loss in one stable formula, `(1-t)·x - (1 + (pw-1)·t)·log σ(x)`.
#[track_caller]
pub fn binary_cross_entropy_with_logits(input: &Tensor, target: &Tensor) -> Tensor {
    try_binary_cross_entropy_with_logits_opts(input, target, &BinaryCrossEntropyWithLogitsOpts::default()).or_panic()
}

/// [`binary_cross_entropy_with_logits`] with options (weight, pos_weight, reduction).
#[track_caller]
pub fn binary_cross_entropy_with_logits_opts(
    input: &Tensor,
    target: &Tensor,
    opts: &BinaryCrossEntropyWithLogitsOpts,
) -> Tensor {
    try_binary_cross_entropy_with_logits_opts(input, target, opts).or_panic()
}

/// [`binary_cross_entropy_with_logits_opts`] returning an error.
#[track_caller]
pub fn try_binary_cross_entropy_with_logits_opts(
    input: &Tensor,
    target: &Tensor,
    opts: &BinaryCrossEntropyWithLogitsOpts,
) -> Result<Tensor> {
    if let Some(c) = crate::amp::autocast::operands("binary_cross_entropy_with_logits", &[Some(input), Some(target)])? {
        return try_binary_cross_entropy_with_logits_opts(c.arg(0), c.arg(1), opts);
    }
    const OP: &str = "binary_cross_entropy_with_logits";
    check_pointwise(OP, input, target)?;
    for (what, t) in [("weight", &opts.weight), ("pos_weight", &opts.pos_weight)] {
        if let Some(t) = t {
            check_float(OP, what, t)?;
        }
    }
    named(OP, bce_logits_impl(input, target, opts))
}

/// `log σ(x) = (x - |x|)/2 - log1p(e^-|x|)`: stable for any `x`, with the right gradient
/// (1/2) at 0.
fn log_sigmoid(x: &Tensor) -> Tensor {
    let a = x.abs();
    (x - &a) * 0.5 - (-&a).exp().log1p()
}

#[track_caller]
fn bce_logits_impl(input: &Tensor, target: &Tensor, opts: &BinaryCrossEntropyWithLogitsOpts) -> Result<Tensor> {
    let ls = log_sigmoid(input);
    let log_term = match &opts.pos_weight {
        Some(pw) => (pw - 1.0).try_mul(target)?.try_add(1.0)?.try_mul(&ls)?,
        None => ls,
    };
    let mut loss = (1.0 - target) * input - log_term;
    if let Some(w) = &opts.weight {
        loss = loss.try_mul(w)?;
    }
    reduce(loss, opts.reduction)
}

/// Kullback–Leibler divergence (`F.kl_div(input, target, reduction=, log_target=)`), with
/// `input` log-probabilities: per element `target·(log target - input)` (0 where `target` is
/// 0), or `exp(target)·(target - input)` when `log_target`. `reduction` is a [`Reduction`] or a
/// [`KlDivReduction`] (for `BatchMean`).
#[track_caller]
pub fn kl_div(input: &Tensor, target: &Tensor, reduction: impl Into<KlDivReduction>, log_target: bool) -> Tensor {
    try_kl_div(input, target, reduction, log_target).or_panic()
}

/// [`kl_div`] returning an error.
#[track_caller]
pub fn try_kl_div(
    input: &Tensor,
    target: &Tensor,
    reduction: impl Into<KlDivReduction>,
    log_target: bool,
) -> Result<Tensor> {
    if let Some(c) = crate::amp::autocast::operands("kl_div", &[Some(input), Some(target)])? {
        return try_kl_div(c.arg(0), c.arg(1), reduction, log_target);
    }
    const OP: &str = "kl_div";
    check_pointwise(OP, input, target)?;
    named(OP, kl_div_impl(input, target, reduction.into(), log_target))
}

#[track_caller]
fn kl_div_impl(input: &Tensor, target: &Tensor, reduction: KlDivReduction, log_target: bool) -> Result<Tensor> {
    let pointwise = if log_target {
        target.exp() * (target - input)
    } else {
        // xlogy(t, t): 0 where t == 0, with a log argument that is never 0 (no 0·(-inf) NaN in
        // the gradient).
        let zero = target.eq(0.0);
        let safe = target.masked_fill(&zero, 1.0);
        (target * safe.log()).masked_fill(&zero, 0.0) - target * input
    };
    Ok(match reduction {
        KlDivReduction::None => pointwise,
        KlDivReduction::Mean => pointwise.mean(),
        KlDivReduction::Sum => pointwise.sum(),
        KlDivReduction::BatchMean => {
            let batch = if input.dim() == 0 { 1 } else { input.shape()[0] };
            pointwise.sum() / batch as f64
        }
    })
}
