//! Transposed convolutions: `conv_transpose1d` and `conv_transpose2d`
//! (`torch.nn.functional.conv_transpose1d/2d`), run as the gradient of a convolution with
//! respect to its input.
//!
//! `conv_transpose(x, w)` is `convᵀ(x, w)` for the convolution that maps the transposed
//! convolution's output back to `x`'s shape (same kernel, stride, padding, dilation and
//! groups), so it runs `crate::ops::conv`'s input-gradient product on the weight as PyTorch
//! lays it out, `(C_in, C_out / groups, k...)`, with no kernel of its own. Its backward is that
//! product's: the input gradient is `conv(g, w)` and the weight gradient the convolution's
//! weight gradient with the roles of input and output swapped, so gradients of every order work.
//! `output_padding` only lengthens the convolution's input, which the kernels accept: the
//! extra rows and columns receive no contribution but the bias.

use super::conv::{check_operands, check_steps, geometry, widened};
use crate::error::{bail, OrPanic, Result};
use crate::ops::conv::{self as ops, Conv};
use crate::tensor::{check_shape, Tensor};
use std::sync::Arc;

/// Options of conv_transpose1d/2d (PyTorch defaults: stride 1, padding 0, output_padding 0,
/// groups 1, dilation 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvTransposeOpts<const N: usize> {
    /// Step of the kernel over each spatial dim of the output.
    pub stride: [usize; N],
    /// `dilation * (kernel - 1) - padding` zeros are added on both sides of the input (this
    /// much is cropped from both sides of the full output).
    pub padding: [usize; N],
    /// Extra size added to one side of each spatial dim of the output (smaller than the
    /// stride or the dilation).
    pub output_padding: [usize; N],
    /// Number of blocked connections from input to output channels.
    pub groups: usize,
    /// Spacing between kernel elements.
    pub dilation: [usize; N],
}

impl<const N: usize> Default for ConvTransposeOpts<N> {
    /// Stride 1, padding 0, output padding 0, one group, dilation 1.
    fn default() -> Self {
        ConvTransposeOpts { stride: [1; N], padding: [0; N], output_padding: [0; N], groups: 1, dilation: [1; N] }
    }
}

/// Options of [`conv_transpose1d`].
pub type ConvTranspose1dOpts = ConvTransposeOpts<1>;
/// Options of [`conv_transpose2d`].
pub type ConvTranspose2dOpts = ConvTransposeOpts<2>;

/// 2-d transposed convolution (`F.conv_transpose2d`): `input` `(N, C_in, H, W)` or
/// `(C_in, H, W)`, `weight` `(C_in, C_out / groups, KH, KW)`, `bias` `(C_out)`; the output is
/// `(N, C_out, OH, OW)` with `OH = (H - 1)·stride - 2·padding + dilation·(KH - 1) +
/// output_padding + 1`. Panics with the op and the shapes on a mismatch.
#[track_caller]
pub fn conv_transpose2d(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>, opts: &ConvTranspose2dOpts) -> Tensor {
    try_conv_transpose2d(input, weight, bias, opts).or_panic()
}

/// [`conv_transpose2d`] returning an error for wrong ranks, channel or group mismatches, an
/// empty output, bad options or unsupported dtypes.
#[track_caller]
pub fn try_conv_transpose2d(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    opts: &ConvTranspose2dOpts,
) -> Result<Tensor> {
    if let Some(c) = crate::amp::autocast::operands("conv_transpose2d", &[Some(input), Some(weight), bias])? {
        return try_conv_transpose2d(c.arg(0), c.arg(1), c.opt(2), opts);
    }
    transposed("conv_transpose2d", input, weight, bias, opts)
}

/// 1-d transposed convolution (`F.conv_transpose1d`): `input` `(N, C_in, L)` or `(C_in, L)`,
/// `weight` `(C_in, C_out / groups, K)`, `bias` `(C_out)`.
#[track_caller]
pub fn conv_transpose1d(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>, opts: &ConvTranspose1dOpts) -> Tensor {
    try_conv_transpose1d(input, weight, bias, opts).or_panic()
}

/// [`conv_transpose1d`] returning an error instead of panicking.
#[track_caller]
pub fn try_conv_transpose1d(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    opts: &ConvTranspose1dOpts,
) -> Result<Tensor> {
    if let Some(c) = crate::amp::autocast::operands("conv_transpose1d", &[Some(input), Some(weight), bias])? {
        return try_conv_transpose1d(c.arg(0), c.arg(1), c.opt(2), opts);
    }
    transposed("conv_transpose1d", input, weight, bias, opts)
}

/// Checks, then runs an N-d (N = 1 or 2) transposed convolution as the input gradient of the
/// matching convolution, adding the bias over the channel dim.
#[track_caller]
fn transposed<const N: usize>(
    op: &'static str,
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    opts: &ConvTransposeOpts<N>,
) -> Result<Tensor> {
    let c = plan(op, x, w, bias, opts)?;
    let y = ops::input_grad(&Arc::new(c), &widened(x), &widened(w))?;
    let y = match bias {
        Some(b) => {
            let mut per_channel = vec![-1i64];
            per_channel.extend([1; N]);
            &y + &widened(b).view(&per_channel)
        }
        None => y,
    };
    Ok(y.to_dtype(x.dtype()))
}

/// PyTorch's output size of a transposed convolution along spatial dim `d`,
/// `(len - 1)·stride - 2·padding + dilation·(kernel - 1) + output_padding + 1`, in 128 bits
/// (below 1 when the padding crops everything).
fn out_len<const N: usize>(len: usize, kernel: usize, d: usize, o: &ConvTransposeOpts<N>) -> i128 {
    let (len, kernel) = (len as i128, kernel as i128);
    let (stride, pad, dilation) = (o.stride[d] as i128, o.padding[d] as i128, o.dilation[d] as i128);
    (len - 1) * stride - 2 * pad + dilation * (kernel - 1) + o.output_padding[d] as i128 + 1
}

/// Validates the operands and options (PyTorch's checks, with both shapes) and works out the
/// convolution whose input gradient this transposed convolution is: its input is this op's
/// output and its output this op's input.
#[track_caller]
fn plan<const N: usize>(
    op: &'static str,
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    opts: &ConvTransposeOpts<N>,
) -> Result<Conv> {
    let groups = opts.groups;
    check_operands::<N>(op, x, w, bias, || w.shape()[1] * groups)?;
    check_steps(op, groups, &opts.stride, &opts.dilation)?;
    let batched = x.dim() == N + 2;
    let c_in = x.shape()[batched as usize];
    let kernel = &w.shape()[2..];
    if w.shape()[1] == 0 || kernel.contains(&0) {
        bail!(op, Shape, "weight should have non-zero sizes, but got weight of shape {:?}", w.shape());
    }
    if w.shape()[0] != c_in {
        bail!(
            op,
            Shape,
            "given transposed=1, weight of size {:?}, expected input {:?} to have {} channels, but got {c_in} channels instead",
            w.shape(),
            x.shape(),
            w.shape()[0]
        );
    }
    if !c_in.is_multiple_of(groups) {
        bail!(
            op,
            Shape,
            "expected weight to be divisible by {groups} at dimension 0, but got weight of shape {:?}",
            w.shape()
        );
    }
    let (stride, dilation, output_padding) = (opts.stride, opts.dilation, opts.output_padding);
    if (0..N).any(|d| output_padding[d] >= stride[d] && output_padding[d] >= dilation[d]) {
        bail!(
            op,
            Value,
            "output padding must be smaller than either stride or dilation, but got output_padding {output_padding:?}, stride {stride:?}, dilation {dilation:?}"
        );
    }
    let spatial = &x.shape()[x.dim() - N..];
    let sizes: Vec<i128> = (0..N).map(|d| out_len(spatial[d], kernel[d], d, opts)).collect();
    if sizes.iter().any(|&s| s < 1) {
        bail!(
            op,
            Shape,
            "given input {:?}, weight {:?} and padding {:?}, the calculated output size is {sizes:?}: output size is too small",
            x.shape(),
            w.shape(),
            opts.padding
        );
    }
    // Past usize (a stride near usize::MAX), saturated for the shape check to refuse.
    let out: [usize; N] = std::array::from_fn(|d| usize::try_from(sizes[d]).unwrap_or(usize::MAX));
    let c_out = w.shape()[1] * groups;
    let mut y_shape = if batched { vec![x.shape()[0], c_out] } else { vec![c_out] };
    y_shape.extend_from_slice(&out);
    check_shape(op, &y_shape)?;
    let in_spatial: [usize; N] = std::array::from_fn(|d| spatial[d]);
    let geom = geometry(&y_shape, kernel, c_in, (groups, stride, dilation), opts.padding, in_spatial);
    Ok(Conv {
        geom,
        x_shape: y_shape,
        w_shape: w.shape().to_vec(),
        y_shape: x.shape().to_vec(),
        channel_dim: batched as usize,
    })
}
