//! Pooling modules: `MaxPool2d`, `AvgPool2d`, `AdaptiveAvgPool2d`.

use super::functional::{self as F, AvgPool2dOpts, MaxPool2dOpts};
use super::repr::{py_bool, py_tuple, py_uniform};
use crate::nn::Module;
use crate::Tensor;

/// 2-d max pooling (`nn.MaxPool2d(kernel_size)`; stride defaults to the kernel size).
#[derive(crate::nn::Module, Clone, Debug)]
#[module(extra_repr = "describe")]
pub struct MaxPool2d {
    /// Kernel, stride, padding, dilation, ceil mode.
    #[module(skip)]
    pub opts: MaxPool2dOpts,
}

impl MaxPool2d {
    /// A square window of `kernel_size`, stride `kernel_size`.
    pub fn new(kernel_size: usize) -> MaxPool2d {
        MaxPool2d { opts: MaxPool2dOpts::new([kernel_size; 2]) }
    }

    /// Every option.
    pub fn with_opts(opts: MaxPool2dOpts) -> MaxPool2d {
        MaxPool2d { opts }
    }

    fn describe(&self) -> String {
        let o = &self.opts;
        format!(
            "kernel_size={}, stride={}, padding={}, dilation={}, ceil_mode={}",
            py_uniform(&o.kernel_size),
            py_uniform(&o.stride.unwrap_or(o.kernel_size)),
            py_uniform(&o.padding),
            py_uniform(&o.dilation),
            py_bool(o.ceil_mode)
        )
    }
}

impl Module for MaxPool2d {
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(F::max_pool2d_opts(input, &self.opts))
    }
}

/// 2-d average pooling (`nn.AvgPool2d(kernel_size)`).
#[derive(crate::nn::Module, Clone, Debug)]
#[module(extra_repr = "describe")]
pub struct AvgPool2d {
    /// Kernel, stride, padding, ceil mode, count_include_pad, divisor override.
    #[module(skip)]
    pub opts: AvgPool2dOpts,
}

impl AvgPool2d {
    /// A square window of `kernel_size`, stride `kernel_size`.
    pub fn new(kernel_size: usize) -> AvgPool2d {
        AvgPool2d { opts: AvgPool2dOpts::new([kernel_size; 2]) }
    }

    /// Every option.
    pub fn with_opts(opts: AvgPool2dOpts) -> AvgPool2d {
        AvgPool2d { opts }
    }

    fn describe(&self) -> String {
        let o = &self.opts;
        format!(
            "kernel_size={}, stride={}, padding={}",
            py_uniform(&o.kernel_size),
            py_uniform(&o.stride.unwrap_or(o.kernel_size)),
            py_uniform(&o.padding)
        )
    }
}

impl Module for AvgPool2d {
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(F::avg_pool2d_opts(input, &self.opts))
    }
}

/// Average pooling to a fixed output size (`nn.AdaptiveAvgPool2d((h, w))`).
#[derive(crate::nn::Module, Clone, Copy, Debug)]
#[module(extra_repr = "describe")]
pub struct AdaptiveAvgPool2d {
    /// The output `(H, W)`.
    pub output_size: [usize; 2],
}

impl AdaptiveAvgPool2d {
    /// `nn.AdaptiveAvgPool2d(output_size)`.
    pub fn new(output_size: [usize; 2]) -> AdaptiveAvgPool2d {
        AdaptiveAvgPool2d { output_size }
    }

    fn describe(&self) -> String {
        format!("output_size={}", py_tuple(&self.output_size))
    }
}

impl Module for AdaptiveAvgPool2d {
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(F::adaptive_avg_pool2d(input, self.output_size))
    }
}
