//! Normalisation layers: `BatchNorm1d`, `BatchNorm2d`, `LayerNorm`, `GroupNorm`.

use super::functional as F;
use super::repr::{py_bool, py_float, py_tuple};
use crate::error::OrPanic;
use crate::nn::Module;
use crate::tensor::{sizes, IntoShape};
use crate::{no_grad_guard, DType, Tensor};

/// Defines a batch-norm layer type: same fields and behaviour, different accepted ranks.
macro_rules! batch_norm_layer {
    ($(#[$doc:meta])* $name:ident, $ranks:expr, $expected:literal) => {
        $(#[$doc])*
        ///
        /// Normalises over every dim but the channel dim 1; in train mode with batch statistics
        /// (biased variance) while updating the running statistics (unbiased variance), in eval
        /// mode with the running statistics.
        #[derive(crate::nn::Module)]
        #[module(extra_repr = "describe")]
        pub struct $name {
            /// Per-channel scale γ (ones), when affine.
            pub weight: Option<Tensor>,
            /// Per-channel shift β (zeros), when affine.
            pub bias: Option<Tensor>,
            /// Running mean (zeros), when tracking running stats.
            #[module(buffer)]
            pub running_mean: Option<Tensor>,
            /// Running unbiased variance (ones), when tracking running stats.
            #[module(buffer)]
            pub running_var: Option<Tensor>,
            /// Number of training batches seen (I64), when tracking running stats.
            #[module(buffer)]
            pub num_batches_tracked: Option<Tensor>,
            /// The number of channels C.
            pub num_features: usize,
            /// Added to the variance for stability (1e-5).
            pub eps: f64,
            /// Weight of the new batch in the running statistics (0.1); `None` = cumulative average.
            pub momentum: Option<f64>,
            /// Train mode flag.
            pub training: bool,
        }

        impl $name {
            #[doc = concat!("`nn.", stringify!($name), "(num_features)`: eps 1e-5, momentum 0.1, affine, tracking running stats.")]
            #[track_caller]
            pub fn new(num_features: usize) -> $name {
                $name::with_opts(num_features, 1e-5, Some(0.1), true, true)
            }

            #[doc = concat!("`nn.", stringify!($name), "(num_features, eps, momentum, affine, track_running_stats)`.")]
            #[track_caller]
            pub fn with_opts(num_features: usize, eps: f64, momentum: Option<f64>, affine: bool, track_running_stats: bool) -> $name {
                let c = num_features;
                let track = track_running_stats;
                $name {
                    weight: affine.then(|| Tensor::ones(&[c]).requires_grad_(true)),
                    bias: affine.then(|| Tensor::zeros(&[c]).requires_grad_(true)),
                    running_mean: track.then(|| Tensor::zeros(&[c])),
                    running_var: track.then(|| Tensor::ones(&[c])),
                    num_batches_tracked: track.then(|| Tensor::zeros(()).to_dtype(DType::I64)),
                    num_features,
                    eps,
                    momentum,
                    training: true,
                }
            }

            fn describe(&self) -> String {
                describe_batch_norm(self.num_features, self.eps, self.momentum, self.weight.is_some(), self.running_mean.is_some())
            }
        }

        impl Module for $name {
            #[track_caller]
            fn forward(&self, input: &Tensor) -> Tensor {
                let layer = crate::nn::summary::enter(self);
                if !$ranks.contains(&input.dim()) {
                    panic!("{}: expected {} input, got shape {:?}", stringify!($name), $expected, input.shape());
                }
                let state = RunningState {
                    mean: self.running_mean.as_ref(),
                    var: self.running_var.as_ref(),
                    batches: self.num_batches_tracked.as_ref(),
                };
                layer.exit(batch_norm_forward(input, state, self.weight.as_ref(), self.bias.as_ref(), self.training, self.momentum, self.eps))
            }
        }
    };
}

batch_norm_layer!(
    /// `nn.BatchNorm1d`: inputs `(N, C)` or `(N, C, L)`.
    BatchNorm1d, [2usize, 3], "a 2-d or 3-d"
);
batch_norm_layer!(
    /// `nn.BatchNorm2d`: inputs `(N, C, H, W)`.
    BatchNorm2d, [4usize], "a 4-d"
);

/// A batch-norm layer's buffers, when it tracks running statistics.
struct RunningState<'a> {
    mean: Option<&'a Tensor>,
    var: Option<&'a Tensor>,
    batches: Option<&'a Tensor>,
}

/// PyTorch's `_BatchNorm.forward`: counts the batch, picks the averaging factor (cumulative
/// when momentum is `None`) and normalises with batch or running statistics.
#[track_caller]
fn batch_norm_forward(
    input: &Tensor,
    state: RunningState<'_>,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    training: bool,
    momentum: Option<f64>,
    eps: f64,
) -> Tensor {
    let mut factor = momentum.unwrap_or(0.0);
    if training {
        if let Some(n) = state.batches {
            let _guard = no_grad_guard();
            n.add_(1);
            if momentum.is_none() {
                factor = 1.0 / n.item::<i64>() as f64;
            }
        }
    }
    let use_batch_stats = training || state.mean.is_none();
    F::batch_norm(input, state.mean, state.var, weight, bias, use_batch_stats, factor, eps)
}

fn describe_batch_norm(c: usize, eps: f64, momentum: Option<f64>, affine: bool, track: bool) -> String {
    let momentum = momentum.map_or("None".to_string(), py_float);
    // PyTorch 2.15 prints the `bias` flag too; kiln's affine layers always have both γ and β.
    format!(
        "{c}, eps={}, momentum={momentum}, affine={a}, bias={a}, track_running_stats={}",
        py_float(eps),
        py_bool(track),
        a = py_bool(affine)
    )
}

/// Layer normalisation over the trailing `normalized_shape` dims (`nn.LayerNorm`).
#[derive(crate::nn::Module)]
#[module(extra_repr = "describe")]
pub struct LayerNorm {
    /// Elementwise scale (ones), when elementwise_affine.
    pub weight: Option<Tensor>,
    /// Elementwise shift (zeros), when elementwise_affine.
    pub bias: Option<Tensor>,
    /// The trailing shape normalised over.
    pub normalized_shape: Vec<usize>,
    /// Added to the variance (1e-5).
    pub eps: f64,
}

impl LayerNorm {
    /// `nn.LayerNorm(normalized_shape)`: eps 1e-5, with elementwise affine. The shape is any
    /// [`IntoShape`] (`LayerNorm::new(512)`, `LayerNorm::new(&[8, 8])`); a negative size panics.
    #[track_caller]
    pub fn new(normalized_shape: impl IntoShape) -> LayerNorm {
        LayerNorm::with_opts(normalized_shape, 1e-5, true)
    }

    /// `nn.LayerNorm(normalized_shape, eps, elementwise_affine)`.
    #[track_caller]
    pub fn with_opts(normalized_shape: impl IntoShape, eps: f64, elementwise_affine: bool) -> LayerNorm {
        let normalized_shape = &*sizes("LayerNorm", normalized_shape).or_panic();
        // Not in closures: a shape too large to allocate is reported at the caller's line.
        let (weight, bias) = if elementwise_affine {
            (
                Some(Tensor::ones(normalized_shape).requires_grad_(true)),
                Some(Tensor::zeros(normalized_shape).requires_grad_(true)),
            )
        } else {
            (None, None)
        };
        LayerNorm { weight, bias, normalized_shape: normalized_shape.to_vec(), eps }
    }

    /// The layer with a learnable shift β or without one (`nn.LayerNorm(..., bias=False)`,
    /// PyTorch 2.1+: the scale alone, and no `bias` in the state dict), as a builder option:
    /// `LayerNorm::new(&[d]).bias(false)`. Without elementwise affine there is no shift either
    /// way; `bias(true)` gives an affine layer without one a zero shift.
    #[track_caller]
    pub fn bias(mut self, bias: bool) -> LayerNorm {
        let affine = self.weight.is_some();
        self.bias = match self.bias.take() {
            Some(b) if bias => Some(b),
            None if bias && affine => Some(Tensor::zeros(&self.normalized_shape).requires_grad_(true)),
            _ => None,
        };
        self
    }

    fn describe(&self) -> String {
        format!(
            "{}, eps={}, elementwise_affine={}, bias={}",
            py_tuple(&self.normalized_shape),
            py_float(self.eps),
            py_bool(self.weight.is_some()),
            py_bool(self.bias.is_some())
        )
    }
}

impl Module for LayerNorm {
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(F::layer_norm(input, &self.normalized_shape, self.weight.as_ref(), self.bias.as_ref(), self.eps))
    }
}

/// Group normalisation: channels split into `num_groups` groups (`nn.GroupNorm`).
#[derive(crate::nn::Module)]
#[module(extra_repr = "describe")]
pub struct GroupNorm {
    /// Per-channel scale (ones), when affine.
    pub weight: Option<Tensor>,
    /// Per-channel shift (zeros), when affine.
    pub bias: Option<Tensor>,
    /// The number of groups.
    pub num_groups: usize,
    /// The number of channels.
    pub num_channels: usize,
    /// Added to the variance (1e-5).
    pub eps: f64,
}

impl GroupNorm {
    /// `nn.GroupNorm(num_groups, num_channels)`: eps 1e-5, affine.
    #[track_caller]
    pub fn new(num_groups: usize, num_channels: usize) -> GroupNorm {
        GroupNorm::with_opts(num_groups, num_channels, 1e-5, true)
    }

    /// `nn.GroupNorm(num_groups, num_channels, eps, affine)`.
    #[track_caller]
    pub fn with_opts(num_groups: usize, num_channels: usize, eps: f64, affine: bool) -> GroupNorm {
        if num_groups == 0 || !num_channels.is_multiple_of(num_groups) {
            crate::error::fail(
                "GroupNorm",
                crate::ErrorKind::Value,
                format!("num_channels ({num_channels}) must be divisible by num_groups ({num_groups})"),
            );
        }
        GroupNorm {
            weight: affine.then(|| Tensor::ones([num_channels]).requires_grad_(true)),
            bias: affine.then(|| Tensor::zeros([num_channels]).requires_grad_(true)),
            num_groups,
            num_channels,
            eps,
        }
    }

    fn describe(&self) -> String {
        let affine = py_bool(self.weight.is_some());
        format!(
            "{}, {}, eps={}, affine={affine}, bias={affine}",
            self.num_groups,
            self.num_channels,
            py_float(self.eps)
        )
    }
}

impl Module for GroupNorm {
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(F::group_norm(input, self.num_groups, self.weight.as_ref(), self.bias.as_ref(), self.eps))
    }
}
