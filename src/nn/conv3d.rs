//! `Conv3d` (PyTorch's `torch.nn.Conv3d`).

use super::conv::{conv_parts, describe_conv};
use super::functional::{self as F, Conv3dOpts};
use crate::nn::Module;
use crate::Tensor;

/// 3-d convolution over `(N, C_in, D, H, W)` (or unbatched `(C_in, D, H, W)`) inputs.
#[derive(crate::nn::Module)]
#[module(extra_repr = "describe")]
pub struct Conv3d {
    /// The weight, `(out_channels, in_channels / groups, kD, kH, kW)`.
    pub weight: Tensor,
    /// The bias, `(out_channels)`, unless built without one.
    pub bias: Option<Tensor>,
    /// Stride, padding, dilation and groups.
    #[module(skip)]
    pub opts: Conv3dOpts,
}

impl Conv3d {
    /// `nn.Conv3d(in_channels, out_channels, kernel_size)`: cubic kernel, stride 1, no padding.
    #[track_caller]
    pub fn new(in_channels: usize, out_channels: usize, kernel_size: usize) -> Conv3d {
        Conv3d::with_opts(in_channels, out_channels, [kernel_size; 3], Conv3dOpts::default(), true)
    }

    /// `nn.Conv3d` with every option: kernel `(kD, kH, kW)`, stride/padding/dilation/groups, bias.
    #[track_caller]
    pub fn with_opts(
        in_channels: usize,
        out_channels: usize,
        kernel_size: [usize; 3],
        opts: Conv3dOpts,
        bias: bool,
    ) -> Conv3d {
        let p = conv_parts(in_channels, out_channels, kernel_size, opts, bias);
        Conv3d { weight: p.weight, bias: p.bias, opts: p.opts }
    }

    fn describe(&self) -> String {
        describe_conv(&self.weight, self.bias.is_some(), &self.opts)
    }
}

impl Module for Conv3d {
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(F::conv3d(input, &self.weight, self.bias.as_ref(), &self.opts))
    }
}
