//! Loss modules (`nn.MSELoss`, `nn.CrossEntropyLoss`, …): a loss function with its options,
//! built once and applied with `forward(input, target)`.
//!
//! They keep PyTorch's names and capitalisation. They are not `Module`s: a
//! `Module`'s `forward` takes one input, a loss takes two (and has no parameters). Options are
//! set with builder methods: `nn::CrossEntropyLoss::new().label_smoothing(0.1)`.
#![allow(clippy::upper_case_acronyms)]

use super::functional as F;
use super::functional::{
    BinaryCrossEntropyOpts, BinaryCrossEntropyWithLogitsOpts, CrossEntropyOpts, KlDivReduction, NllLossOpts, Reduction,
};
use crate::error::{OrPanic, Result};
use crate::tensor::Tensor;

/// Implements a loss struct's methods: `new`; a `reduction` builder when `reduction at` names
/// the [`Reduction`] field; `forward` and `try_forward` from `forward = |self, input, target|
/// call` (a direct call, so `#[track_caller]` reaches the user's line); and one builder per
/// `fn name(type) => field` line, the value passed through `wrap` when one is given (`Some`).
macro_rules! loss_module {
    (
        $ty:ident $(, reduction at $($rpath:ident).+)?;
        $(#[$fdoc:meta])*
        forward = |$s:ident, $input:ident, $target:ident| $call:expr;
        $( $(#[$sdoc:meta])* fn $name:ident($argty:ty) => $($field:ident).+ $(, $wrap:path)?; )*
    ) => {
        impl $ty {
            /// The loss with PyTorch's default options.
            pub fn new() -> Self {
                Self::default()
            }

            $(
                /// Sets the reduction (`reduction=`; `Mean` by default).
                pub fn reduction(mut self, reduction: Reduction) -> Self {
                    self.$($rpath).+ = reduction;
                    self
                }
            )?

            $(
                $(#[$sdoc])*
                pub fn $name(mut self, $name: $argty) -> Self {
                    self.$($field).+ = $($wrap)?($name);
                    self
                }
            )*

            $(#[$fdoc])*
            #[track_caller]
            pub fn forward(&self, input: &Tensor, target: &Tensor) -> Tensor {
                self.try_forward(input, target).or_panic()
            }

            #[doc = concat!("[`", stringify!($ty), "::forward`] returning an error.")]
            #[track_caller]
            pub fn try_forward(&$s, $input: &Tensor, $target: &Tensor) -> Result<Tensor> {
                $call
            }
        }
    };
}

/// `nn.MSELoss`: [`F::mse_loss_opts`].
#[derive(Clone, Debug, Default)]
pub struct MSELoss {
    /// The reduction.
    pub reduction: Reduction,
}

loss_module! {
    MSELoss, reduction at reduction;
    /// The loss of `input` against `target` (the same shape).
    forward = |self, input, target| F::try_mse_loss_opts(input, target, self.reduction);
}

/// `nn.L1Loss`: [`F::l1_loss_opts`].
#[derive(Clone, Debug, Default)]
pub struct L1Loss {
    /// The reduction.
    pub reduction: Reduction,
}

loss_module! {
    L1Loss, reduction at reduction;
    /// The loss of `input` against `target` (the same shape).
    forward = |self, input, target| F::try_l1_loss_opts(input, target, self.reduction);
}

/// `nn.SmoothL1Loss`: [`F::smooth_l1_loss`] (`beta` 1.0 by default).
#[derive(Clone, Debug)]
pub struct SmoothL1Loss {
    /// The reduction.
    pub reduction: Reduction,
    /// Where the loss turns from quadratic to linear.
    pub beta: f64,
}

impl Default for SmoothL1Loss {
    fn default() -> Self {
        SmoothL1Loss { reduction: Reduction::Mean, beta: 1.0 }
    }
}

loss_module! {
    SmoothL1Loss, reduction at reduction;
    /// The loss of `input` against `target` (the same shape).
    forward = |self, input, target| F::try_smooth_l1_loss(input, target, self.reduction, self.beta);
    /// Sets `beta` (`beta=`; 1.0 by default; 0 is the L1 loss).
    fn beta(f64) => beta;
}

/// `nn.CrossEntropyLoss`: [`F::cross_entropy_opts`] (logits and class indices or class
/// probabilities).
#[derive(Clone, Debug, Default)]
pub struct CrossEntropyLoss {
    /// The options.
    pub opts: CrossEntropyOpts,
}

loss_module! {
    CrossEntropyLoss, reduction at opts.reduction;
    /// The loss of logits `input` against `target`.
    forward = |self, input, target| F::try_cross_entropy_opts(input, target, &self.opts);
    /// Sets a weight per class (1-D, `C` elements).
    fn weight(Tensor) => opts.weight, Some;
    /// Sets the target value that is ignored (-100 by default).
    fn ignore_index(i64) => opts.ignore_index;
    /// Sets the label smoothing, in `[0, 1]` (0.0 by default).
    fn label_smoothing(f64) => opts.label_smoothing;
}

/// `nn.NLLLoss`: [`F::nll_loss_opts`] (log-probabilities and class indices).
#[derive(Clone, Debug, Default)]
pub struct NLLLoss {
    /// The options.
    pub opts: NllLossOpts,
}

loss_module! {
    NLLLoss, reduction at opts.reduction;
    /// The loss of log-probabilities `input` against class indices `target`.
    forward = |self, input, target| F::try_nll_loss_opts(input, target, &self.opts);
    /// Sets a weight per class (1-D, `C` elements).
    fn weight(Tensor) => opts.weight, Some;
    /// Sets the target value that is ignored (-100 by default).
    fn ignore_index(i64) => opts.ignore_index;
}

/// `nn.BCELoss`: [`F::binary_cross_entropy_opts`] (probabilities in `[0, 1]`).
#[derive(Clone, Debug, Default)]
pub struct BCELoss {
    /// The options.
    pub opts: BinaryCrossEntropyOpts,
}

loss_module! {
    BCELoss, reduction at opts.reduction;
    /// The loss of probabilities `input` against `target` (the same shape).
    forward = |self, input, target| F::try_binary_cross_entropy_opts(input, target, &self.opts);
    /// Sets a weight broadcast against the per-element losses.
    fn weight(Tensor) => opts.weight, Some;
}

/// `nn.BCEWithLogitsLoss`: [`F::binary_cross_entropy_with_logits_opts`] (logits).
#[derive(Clone, Debug, Default)]
pub struct BCEWithLogitsLoss {
    /// The options.
    pub opts: BinaryCrossEntropyWithLogitsOpts,
}

loss_module! {
    BCEWithLogitsLoss, reduction at opts.reduction;
    /// The loss of logits `input` against `target` (the same shape).
    forward = |self, input, target| F::try_binary_cross_entropy_with_logits_opts(input, target, &self.opts);
    /// Sets a weight broadcast against the per-element losses.
    fn weight(Tensor) => opts.weight, Some;
    /// Sets the weight of positive examples, broadcast along the last (class) dim.
    fn pos_weight(Tensor) => opts.pos_weight, Some;
}

/// `nn.KLDivLoss`: [`F::kl_div`] (`input` log-probabilities).
#[derive(Clone, Debug, Default)]
pub struct KLDivLoss {
    /// The reduction (`Mean` by default, as PyTorch; `BatchMean` is the true KL divergence).
    pub reduction: KlDivReduction,
    /// Whether `target` holds log-probabilities too.
    pub log_target: bool,
}

loss_module! {
    KLDivLoss;
    /// The loss of log-probabilities `input` against `target` (the same shape).
    forward = |self, input, target| F::try_kl_div(input, target, self.reduction, self.log_target);
    /// Sets the reduction: a [`Reduction`] or [`KlDivReduction::BatchMean`].
    fn reduction(impl Into<KlDivReduction>) => reduction, Into::into;
    /// Sets whether `target` holds log-probabilities (false by default).
    fn log_target(bool) => log_target;
}
