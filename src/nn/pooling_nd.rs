//! Pooling modules beyond 2-d: `MaxPool1d`, `AvgPool1d`, `MaxPool3d`, `AdaptiveMaxPool2d`.

use super::functional::{self as F, AvgPool1dOpts, MaxPool1dOpts, MaxPool3dOpts};
use super::repr::{py_bool, py_tuple, py_uniform};
use crate::nn::Module;
use crate::Tensor;

/// PyTorch's max-pooling text: `kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False`.
fn describe_max(kernel: &[usize], stride: &[usize], padding: &[usize], dilation: &[usize], ceil_mode: bool) -> String {
    format!(
        "kernel_size={}, stride={}, padding={}, dilation={}, ceil_mode={}",
        py_uniform(kernel),
        py_uniform(stride),
        py_uniform(padding),
        py_uniform(dilation),
        py_bool(ceil_mode)
    )
}

/// 1-d max pooling (`nn.MaxPool1d(kernel_size)`; stride defaults to the kernel size).
#[derive(crate::nn::Module, Clone, Debug)]
#[module(extra_repr = "describe")]
pub struct MaxPool1d {
    /// Kernel, stride, padding, dilation, ceil mode.
    #[module(skip)]
    pub opts: MaxPool1dOpts,
}

impl MaxPool1d {
    /// A window of `kernel_size`, stride `kernel_size`.
    pub fn new(kernel_size: usize) -> MaxPool1d {
        MaxPool1d { opts: MaxPool1dOpts::new(kernel_size) }
    }

    /// Every option.
    pub fn with_opts(opts: MaxPool1dOpts) -> MaxPool1d {
        MaxPool1d { opts }
    }

    /// The pooled values and the position of each maximum along `L`
    /// (`nn.MaxPool1d(..., return_indices=True)`).
    #[track_caller]
    pub fn forward_with_indices(&self, input: &Tensor) -> (Tensor, Tensor) {
        F::max_pool1d_with_indices(input, &self.opts)
    }

    fn describe(&self) -> String {
        let o = &self.opts;
        describe_max(&[o.kernel_size], &[o.stride.unwrap_or(o.kernel_size)], &[o.padding], &[o.dilation], o.ceil_mode)
    }
}

impl Module for MaxPool1d {
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(F::max_pool1d_opts(input, &self.opts))
    }
}

/// 1-d average pooling (`nn.AvgPool1d(kernel_size)`).
#[derive(crate::nn::Module, Clone, Debug)]
#[module(extra_repr = "describe")]
pub struct AvgPool1d {
    /// Kernel, stride, padding, ceil mode, count_include_pad.
    #[module(skip)]
    pub opts: AvgPool1dOpts,
}

impl AvgPool1d {
    /// A window of `kernel_size`, stride `kernel_size`.
    pub fn new(kernel_size: usize) -> AvgPool1d {
        AvgPool1d { opts: AvgPool1dOpts::new(kernel_size) }
    }

    /// Every option.
    pub fn with_opts(opts: AvgPool1dOpts) -> AvgPool1d {
        AvgPool1d { opts }
    }

    /// PyTorch stores AvgPool1d's sizes as 1-tuples: `kernel_size=(3,), stride=(2,), padding=(0,)`.
    fn describe(&self) -> String {
        let o = &self.opts;
        format!(
            "kernel_size={}, stride={}, padding={}",
            py_tuple(&[o.kernel_size]),
            py_tuple(&[o.stride.unwrap_or(o.kernel_size)]),
            py_tuple(&[o.padding])
        )
    }
}

impl Module for AvgPool1d {
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(F::avg_pool1d_opts(input, &self.opts))
    }
}

/// 3-d max pooling (`nn.MaxPool3d(kernel_size)`; stride defaults to the kernel size).
#[derive(crate::nn::Module, Clone, Debug)]
#[module(extra_repr = "describe")]
pub struct MaxPool3d {
    /// Kernel, stride, padding, dilation, ceil mode.
    #[module(skip)]
    pub opts: MaxPool3dOpts,
}

impl MaxPool3d {
    /// A cubic window of `kernel_size`, stride `kernel_size`.
    pub fn new(kernel_size: usize) -> MaxPool3d {
        MaxPool3d { opts: MaxPool3dOpts::new([kernel_size; 3]) }
    }

    /// Every option.
    pub fn with_opts(opts: MaxPool3dOpts) -> MaxPool3d {
        MaxPool3d { opts }
    }

    /// The pooled values and the position `d * H * W + h * W + w` of each maximum in its input
    /// channel (`nn.MaxPool3d(..., return_indices=True)`).
    #[track_caller]
    pub fn forward_with_indices(&self, input: &Tensor) -> (Tensor, Tensor) {
        F::max_pool3d_with_indices(input, &self.opts)
    }

    fn describe(&self) -> String {
        let o = &self.opts;
        describe_max(&o.kernel_size, &o.stride.unwrap_or(o.kernel_size), &o.padding, &o.dilation, o.ceil_mode)
    }
}

impl Module for MaxPool3d {
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(F::max_pool3d_opts(input, &self.opts))
    }
}

/// Max pooling to a fixed output size (`nn.AdaptiveMaxPool2d((h, w))`).
#[derive(crate::nn::Module, Clone, Copy, Debug)]
#[module(extra_repr = "describe")]
pub struct AdaptiveMaxPool2d {
    /// The output `(H, W)`.
    pub output_size: [usize; 2],
}

impl AdaptiveMaxPool2d {
    /// `nn.AdaptiveMaxPool2d(output_size)`.
    pub fn new(output_size: [usize; 2]) -> AdaptiveMaxPool2d {
        AdaptiveMaxPool2d { output_size }
    }

    /// The pooled values and the position `h * W + w` of each maximum in its input plane
    /// (`nn.AdaptiveMaxPool2d(..., return_indices=True)`).
    #[track_caller]
    pub fn forward_with_indices(&self, input: &Tensor) -> (Tensor, Tensor) {
        F::adaptive_max_pool2d_with_indices(input, self.output_size)
    }

    fn describe(&self) -> String {
        format!("output_size={}", py_tuple(&self.output_size))
    }
}

impl Module for AdaptiveMaxPool2d {
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(F::adaptive_max_pool2d(input, self.output_size))
    }
}
