//! Loss modules (`nn.MSELoss`, `nn.CrossEntropyLoss`, …): a loss function with its options,
//! built once and applied with `forward(input, target)`.
//!
//! They keep PyTorch's names and capitalisation. They are not `Module`s: a
//! `Module`'s `forward` takes one input, a loss takes two (and has no parameters). Options are
//! set with builder methods: `nn::CrossEntropyLoss::new().label_smoothing(0.1)`.
#![allow(clippy::upper_case_acronyms)]

use super::functional as F;
use super::functional::{BinaryCrossEntropyOpts, BinaryCrossEntropyWithLogitsOpts, CrossEntropyOpts, KlDivReduction, NllLossOpts, Reduction};
use crate::error::{OrPanic, Result};
use crate::tensor::Tensor;

/// Adds `reduction` and `new` to a loss struct whose options include a [`Reduction`] field
/// reached by `$($path).+`.
macro_rules! reduction_builder {
    ($ty:ident, $($path:ident).+) => {
        impl $ty {
            /// The loss with PyTorch's default options.
            pub fn new() -> Self {
                Self::default()
            }

            /// Sets the reduction (`reduction=`; `Mean` by default).
            pub fn reduction(mut self, reduction: Reduction) -> Self {
                self.$($path).+ = reduction;
                self
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
reduction_builder!(MSELoss, reduction);

impl MSELoss {
    /// The loss of `input` against `target` (the same shape).
    #[track_caller]
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Tensor {
        self.try_forward(input, target).or_panic()
    }

    /// [`MSELoss::forward`] returning an error.
    #[track_caller]
    pub fn try_forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        F::try_mse_loss_opts(input, target, self.reduction)
    }
}

/// `nn.L1Loss`: [`F::l1_loss_opts`].
#[derive(Clone, Debug, Default)]
pub struct L1Loss {
    /// The reduction.
    pub reduction: Reduction,
}
reduction_builder!(L1Loss, reduction);

impl L1Loss {
    /// The loss of `input` against `target` (the same shape).
    #[track_caller]
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Tensor {
        self.try_forward(input, target).or_panic()
    }

    /// [`L1Loss::forward`] returning an error.
    #[track_caller]
    pub fn try_forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        F::try_l1_loss_opts(input, target, self.reduction)
    }
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
reduction_builder!(SmoothL1Loss, reduction);

impl SmoothL1Loss {
    /// Sets `beta` (`beta=`; 1.0 by default; 0 is the L1 loss).
    pub fn beta(mut self, beta: f64) -> Self {
        self.beta = beta;
        self
    }

    /// The loss of `input` against `target` (the same shape).
    #[track_caller]
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Tensor {
        self.try_forward(input, target).or_panic()
    }

    /// [`SmoothL1Loss::forward`] returning an error.
    #[track_caller]
    pub fn try_forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        F::try_smooth_l1_loss(input, target, self.reduction, self.beta)
    }
}

/// `nn.CrossEntropyLoss`: [`F::cross_entropy_opts`] (logits and class indices or class
/// probabilities).
#[derive(Clone, Debug, Default)]
pub struct CrossEntropyLoss {
    /// The options.
    pub opts: CrossEntropyOpts,
}
reduction_builder!(CrossEntropyLoss, opts.reduction);

impl CrossEntropyLoss {
    /// Sets a weight per class (1-D, `C` elements).
    pub fn weight(mut self, weight: Tensor) -> Self {
        self.opts.weight = Some(weight);
        self
    }

    /// Sets the target value that is ignored (-100 by default).
    pub fn ignore_index(mut self, ignore_index: i64) -> Self {
        self.opts.ignore_index = ignore_index;
        self
    }

    /// Sets the label smoothing, in `[0, 1]` (0.0 by default).
    pub fn label_smoothing(mut self, label_smoothing: f64) -> Self {
        self.opts.label_smoothing = label_smoothing;
        self
    }

    /// The loss of logits `input` against `target`.
    #[track_caller]
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Tensor {
        self.try_forward(input, target).or_panic()
    }

    /// [`CrossEntropyLoss::forward`] returning an error.
    #[track_caller]
    pub fn try_forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        F::try_cross_entropy_opts(input, target, &self.opts)
    }
}

/// `nn.NLLLoss`: [`F::nll_loss_opts`] (log-probabilities and class indices).
#[derive(Clone, Debug, Default)]
pub struct NLLLoss {
    /// The options.
    pub opts: NllLossOpts,
}
reduction_builder!(NLLLoss, opts.reduction);

impl NLLLoss {
    /// Sets a weight per class (1-D, `C` elements).
    pub fn weight(mut self, weight: Tensor) -> Self {
        self.opts.weight = Some(weight);
        self
    }

    /// Sets the target value that is ignored (-100 by default).
    pub fn ignore_index(mut self, ignore_index: i64) -> Self {
        self.opts.ignore_index = ignore_index;
        self
    }

    /// The loss of log-probabilities `input` against class indices `target`.
    #[track_caller]
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Tensor {
        self.try_forward(input, target).or_panic()
    }

    /// [`NLLLoss::forward`] returning an error.
    #[track_caller]
    pub fn try_forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        F::try_nll_loss_opts(input, target, &self.opts)
    }
}

/// `nn.BCELoss`: [`F::binary_cross_entropy_opts`] (probabilities in `[0, 1]`).
#[derive(Clone, Debug, Default)]
pub struct BCELoss {
    /// The options.
    pub opts: BinaryCrossEntropyOpts,
}
reduction_builder!(BCELoss, opts.reduction);

impl BCELoss {
    /// Sets a weight broadcast against the per-element losses.
    pub fn weight(mut self, weight: Tensor) -> Self {
        self.opts.weight = Some(weight);
        self
    }

    /// The loss of probabilities `input` against `target` (the same shape).
    #[track_caller]
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Tensor {
        self.try_forward(input, target).or_panic()
    }

    /// [`BCELoss::forward`] returning an error.
    #[track_caller]
    pub fn try_forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        F::try_binary_cross_entropy_opts(input, target, &self.opts)
    }
}

/// `nn.BCEWithLogitsLoss`: [`F::binary_cross_entropy_with_logits_opts`] (logits).
#[derive(Clone, Debug, Default)]
pub struct BCEWithLogitsLoss {
    /// The options.
    pub opts: BinaryCrossEntropyWithLogitsOpts,
}
reduction_builder!(BCEWithLogitsLoss, opts.reduction);

impl BCEWithLogitsLoss {
    /// Sets a weight broadcast against the per-element losses.
    pub fn weight(mut self, weight: Tensor) -> Self {
        self.opts.weight = Some(weight);
        self
    }

    /// Sets the weight of positive examples, broadcast along the last (class) dim.
    pub fn pos_weight(mut self, pos_weight: Tensor) -> Self {
        self.opts.pos_weight = Some(pos_weight);
        self
    }

    /// The loss of logits `input` against `target` (the same shape).
    #[track_caller]
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Tensor {
        self.try_forward(input, target).or_panic()
    }

    /// [`BCEWithLogitsLoss::forward`] returning an error.
    #[track_caller]
    pub fn try_forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        F::try_binary_cross_entropy_with_logits_opts(input, target, &self.opts)
    }
}

/// `nn.KLDivLoss`: [`F::kl_div`] (`input` log-probabilities).
#[derive(Clone, Debug, Default)]
pub struct KLDivLoss {
    /// The reduction (`Mean` by default, as PyTorch; `BatchMean` is the true KL divergence).
    pub reduction: KlDivReduction,
    /// Whether `target` holds log-probabilities too.
    pub log_target: bool,
}

impl KLDivLoss {
    /// The loss with PyTorch's default options.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the reduction: a [`Reduction`] or [`KlDivReduction::BatchMean`].
    pub fn reduction(mut self, reduction: impl Into<KlDivReduction>) -> Self {
        self.reduction = reduction.into();
        self
    }

    /// Sets whether `target` holds log-probabilities (false by default).
    pub fn log_target(mut self, log_target: bool) -> Self {
        self.log_target = log_target;
        self
    }

    /// The loss of log-probabilities `input` against `target` (the same shape).
    #[track_caller]
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Tensor {
        self.try_forward(input, target).or_panic()
    }

    /// [`KLDivLoss::forward`] returning an error.
    #[track_caller]
    pub fn try_forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        F::try_kl_div(input, target, self.reduction, self.log_target)
    }
}
