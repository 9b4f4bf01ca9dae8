//! `ConvTranspose1d` and `ConvTranspose2d` (PyTorch's `torch.nn.modules.conv`).

use super::conv::{check_groups, conv_params, describe};
use super::functional::{self as F, ConvOpts, ConvTransposeOpts, Padding};
use crate::nn::Module;
use crate::Tensor;

/// Builds a transposed convolution's weight `(in, out/groups, k…)` and bias `(out)` with
/// PyTorch's initialisation (as a convolution's, with `fan_in = out/groups · Π k`).
#[track_caller]
fn transposed_params<const N: usize>(
    in_channels: usize,
    out_channels: usize,
    kernel_size: [usize; N],
    opts: &ConvTransposeOpts<N>,
    bias: bool,
) -> (Tensor, Option<Tensor>) {
    check_groups(&format!("ConvTranspose{N}d"), in_channels, out_channels, opts.groups);
    let mut shape = vec![in_channels, out_channels / opts.groups];
    shape.extend_from_slice(&kernel_size);
    conv_params(&shape, bias.then_some(out_channels))
}

/// PyTorch's `ConvTranspose2d(4, 6, kernel_size=(3, 3), stride=(2, 2), output_padding=(1, 1))`
/// text of a weight `(in, out/groups, k…)`.
fn describe_transposed<const N: usize>(weight: &Tensor, bias: bool, o: &ConvTransposeOpts<N>) -> String {
    let shape = weight.shape();
    let opts =
        ConvOpts { stride: o.stride, padding: Padding::Explicit(o.padding), dilation: o.dilation, groups: o.groups };
    describe((shape[0], shape[1] * o.groups), &shape[2..], &opts, &o.output_padding, bias)
}

/// 2-d transposed convolution over `(N, C_in, H, W)` (or unbatched `(C_in, H, W)`) inputs.
#[derive(crate::nn::Module)]
#[module(extra_repr = "describe")]
pub struct ConvTranspose2d {
    /// The weight, `(in_channels, out_channels / groups, kH, kW)`.
    pub weight: Tensor,
    /// The bias, `(out_channels)`, unless built without one.
    pub bias: Option<Tensor>,
    /// Stride, padding, output padding, groups and dilation.
    #[module(skip)]
    pub opts: ConvTransposeOpts<2>,
}

impl ConvTranspose2d {
    /// `nn.ConvTranspose2d(in_channels, out_channels, kernel_size)`: square kernel, stride 1.
    #[track_caller]
    pub fn new(in_channels: usize, out_channels: usize, kernel_size: usize) -> ConvTranspose2d {
        ConvTranspose2d::with_opts(in_channels, out_channels, [kernel_size; 2], ConvTransposeOpts::default(), true)
    }

    /// `nn.ConvTranspose2d` with every option: kernel `(kH, kW)`, stride/padding/output
    /// padding/groups/dilation, bias.
    #[track_caller]
    pub fn with_opts(
        in_channels: usize,
        out_channels: usize,
        kernel_size: [usize; 2],
        opts: ConvTransposeOpts<2>,
        bias: bool,
    ) -> ConvTranspose2d {
        let (weight, bias) = transposed_params(in_channels, out_channels, kernel_size, &opts, bias);
        ConvTranspose2d { weight, bias, opts }
    }

    fn describe(&self) -> String {
        describe_transposed(&self.weight, self.bias.is_some(), &self.opts)
    }
}

impl Module for ConvTranspose2d {
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(F::conv_transpose2d(input, &self.weight, self.bias.as_ref(), &self.opts))
    }
}

/// 1-d transposed convolution over `(N, C_in, L)` (or unbatched `(C_in, L)`) inputs.
#[derive(crate::nn::Module)]
#[module(extra_repr = "describe")]
pub struct ConvTranspose1d {
    /// The weight, `(in_channels, out_channels / groups, k)`.
    pub weight: Tensor,
    /// The bias, `(out_channels)`, unless built without one.
    pub bias: Option<Tensor>,
    /// Stride, padding, output padding, groups and dilation.
    #[module(skip)]
    pub opts: ConvTransposeOpts<1>,
}

impl ConvTranspose1d {
    /// `nn.ConvTranspose1d(in_channels, out_channels, kernel_size)`.
    #[track_caller]
    pub fn new(in_channels: usize, out_channels: usize, kernel_size: usize) -> ConvTranspose1d {
        ConvTranspose1d::with_opts(in_channels, out_channels, kernel_size, ConvTransposeOpts::default(), true)
    }

    /// `nn.ConvTranspose1d` with every option.
    #[track_caller]
    pub fn with_opts(
        in_channels: usize,
        out_channels: usize,
        kernel_size: usize,
        opts: ConvTransposeOpts<1>,
        bias: bool,
    ) -> ConvTranspose1d {
        let (weight, bias) = transposed_params(in_channels, out_channels, [kernel_size], &opts, bias);
        ConvTranspose1d { weight, bias, opts }
    }

    fn describe(&self) -> String {
        describe_transposed(&self.weight, self.bias.is_some(), &self.opts)
    }
}

impl Module for ConvTranspose1d {
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(F::conv_transpose1d(input, &self.weight, self.bias.as_ref(), &self.opts))
    }
}
