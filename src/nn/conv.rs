//! `Conv1d` and `Conv2d` (PyTorch's `torch.nn.modules.conv`).

use super::functional::{self as F, ConvOpts, Padding};
use super::init::{kaiming_uniform_, uniform_, FanMode, Nonlinearity};
use super::repr::py_tuple;
use crate::nn::Module;
use crate::Tensor;

/// Panics unless both channel counts are multiples of `groups` (PyTorch's check).
#[track_caller]
pub(super) fn check_groups(layer: &str, in_channels: usize, out_channels: usize, groups: usize) {
    if groups == 0 || !in_channels.is_multiple_of(groups) || !out_channels.is_multiple_of(groups) {
        crate::error::fail("Conv", crate::ErrorKind::Value, format!("{layer}: in_channels ({in_channels}) and out_channels ({out_channels}) must both be divisible by groups ({groups})"));
    }
}

/// A convolution's weight of `shape` (`(out, in/groups, k…)`, or `(in, out/groups, k…)`
/// transposed) and a bias of `bias_len` values, requiring grad, initialised as PyTorch does:
/// kaiming-uniform a = √5 for the weight, U(±1/√fan_in) for the bias, with `fan_in =
/// shape[1] · Π k`.
pub(super) fn conv_params(shape: &[usize], bias_len: Option<usize>) -> (Tensor, Option<Tensor>) {
    let weight = Tensor::empty(shape);
    kaiming_uniform_(&weight, Nonlinearity::LeakyRelu(5f64.sqrt()), FanMode::FanIn);
    let fan_in: usize = shape[1..].iter().product();
    let bias = bias_len.map(|len| {
        let b = Tensor::empty([len]);
        let bound = if fan_in > 0 { 1.0 / (fan_in as f64).sqrt() } else { 0.0 };
        uniform_(&b, -bound, bound);
        b.requires_grad_(true)
    });
    (weight.requires_grad_(true), bias)
}

/// An N-d convolution layer's weight, bias and options; `Conv1d`, `Conv2d` and `Conv3d` wrap it.
pub(super) struct ConvParts<const N: usize> {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    pub opts: ConvOpts<N>,
}

/// Builds the weight `(out, in/groups, k…)` and bias with PyTorch's initialisation.
#[track_caller]
pub(super) fn conv_parts<const N: usize>(
    in_channels: usize,
    out_channels: usize,
    kernel_size: [usize; N],
    opts: ConvOpts<N>,
    bias: bool,
) -> ConvParts<N> {
    check_groups(&format!("Conv{N}d"), in_channels, out_channels, opts.groups);
    let mut shape = vec![out_channels, in_channels / opts.groups];
    shape.extend_from_slice(&kernel_size);
    let (weight, bias) = conv_params(&shape, bias.then_some(out_channels));
    ConvParts { weight, bias, opts }
}

/// PyTorch's `Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1))` text from the channels `(in,
/// out)`: options printed only when they differ from the defaults (`output_padding` is a
/// transposed convolution's, empty for a plain one).
pub(super) fn describe<const N: usize>(
    (in_c, out_c): (usize, usize),
    kernel: &[usize],
    opts: &ConvOpts<N>,
    output_padding: &[usize],
    bias: bool,
) -> String {
    let mut s = format!("{in_c}, {out_c}, kernel_size={}, stride={}", py_tuple(kernel), py_tuple(&opts.stride));
    match &opts.padding {
        Padding::Explicit(p) if p.iter().all(|&x| x == 0) => {}
        Padding::Explicit(p) => s += &format!(", padding={}", py_tuple(p)),
        Padding::Same => s += ", padding=same",
        Padding::Valid => s += ", padding=valid",
    }
    if opts.dilation.iter().any(|&d| d != 1) {
        s += &format!(", dilation={}", py_tuple(&opts.dilation));
    }
    if output_padding.iter().any(|&p| p != 0) {
        s += &format!(", output_padding={}", py_tuple(output_padding));
    }
    if opts.groups != 1 {
        s += &format!(", groups={}", opts.groups);
    }
    if !bias {
        s += ", bias=False";
    }
    s
}

/// [`describe`] of a plain convolution's weight `(out, in/groups, k…)`.
pub(super) fn describe_conv<const N: usize>(weight: &Tensor, bias: bool, opts: &ConvOpts<N>) -> String {
    let shape = weight.shape();
    describe((shape[1] * opts.groups, shape[0]), &shape[2..], opts, &[], bias)
}

/// 2-d convolution over `(N, C_in, H, W)` (or unbatched `(C_in, H, W)`) inputs.
#[derive(crate::nn::Module)]
#[module(extra_repr = "describe")]
pub struct Conv2d {
    /// The weight, `(out_channels, in_channels / groups, kH, kW)`.
    pub weight: Tensor,
    /// The bias, `(out_channels)`, unless built without one.
    pub bias: Option<Tensor>,
    /// Stride, padding, dilation and groups.
    #[module(skip)]
    pub opts: ConvOpts<2>,
}

impl Conv2d {
    /// `nn.Conv2d(in_channels, out_channels, kernel_size)`: square kernel, stride 1, no padding.
    #[track_caller]
    pub fn new(in_channels: usize, out_channels: usize, kernel_size: usize) -> Conv2d {
        Conv2d::with_opts(in_channels, out_channels, [kernel_size; 2], ConvOpts::default(), true)
    }

    /// `nn.Conv2d` with every option: kernel `(kH, kW)`, stride/padding/dilation/groups, bias.
    #[track_caller]
    pub fn with_opts(
        in_channels: usize,
        out_channels: usize,
        kernel_size: [usize; 2],
        opts: ConvOpts<2>,
        bias: bool,
    ) -> Conv2d {
        let p = conv_parts(in_channels, out_channels, kernel_size, opts, bias);
        Conv2d { weight: p.weight, bias: p.bias, opts: p.opts }
    }

    fn describe(&self) -> String {
        describe_conv(&self.weight, self.bias.is_some(), &self.opts)
    }
}

impl Module for Conv2d {
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(F::conv2d(input, &self.weight, self.bias.as_ref(), &self.opts))
    }
}

/// 1-d convolution over `(N, C_in, L)` (or unbatched `(C_in, L)`) inputs.
#[derive(crate::nn::Module)]
#[module(extra_repr = "describe")]
pub struct Conv1d {
    /// The weight, `(out_channels, in_channels / groups, k)`.
    pub weight: Tensor,
    /// The bias, `(out_channels)`, unless built without one.
    pub bias: Option<Tensor>,
    /// Stride, padding, dilation and groups.
    #[module(skip)]
    pub opts: ConvOpts<1>,
}

impl Conv1d {
    /// `nn.Conv1d(in_channels, out_channels, kernel_size)`.
    #[track_caller]
    pub fn new(in_channels: usize, out_channels: usize, kernel_size: usize) -> Conv1d {
        Conv1d::with_opts(in_channels, out_channels, kernel_size, ConvOpts::default(), true)
    }

    /// `nn.Conv1d` with every option.
    #[track_caller]
    pub fn with_opts(
        in_channels: usize,
        out_channels: usize,
        kernel_size: usize,
        opts: ConvOpts<1>,
        bias: bool,
    ) -> Conv1d {
        let p = conv_parts(in_channels, out_channels, [kernel_size], opts, bias);
        Conv1d { weight: p.weight, bias: p.bias, opts: p.opts }
    }

    fn describe(&self) -> String {
        describe_conv(&self.weight, self.bias.is_some(), &self.opts)
    }
}

impl Module for Conv1d {
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(F::conv1d(input, &self.weight, self.bias.as_ref(), &self.opts))
    }
}
