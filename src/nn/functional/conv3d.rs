//! 3-d convolution `conv3d` (`torch.nn.functional.conv3d`), decomposed onto `conv2d`: each
//! output depth's window of input depths is gathered into the channel dim, so one 2-d
//! convolution by the weight with its depth folded into its channels computes every depth.
//!
//! For input `(N, C, D, H, W)` and weight `(O, C / groups, KD, KH, KW)`, the depth-padded input
//! is indexed at depths `od·stride + kd·dilation` into `(N·OD, C·KD, H, W)` (channel-major, so
//! each group's channels stay together) and convolved by the weight viewed as
//! `(O, C / groups · KD, KH, KW)`. Every step is a differentiable op (zero padding,
//! `index_select`, views, `conv2d`), so gradients of every order and `kiln::compile` work.

use super::conv::{check, Checked, ConvOpts, Padding};
use super::{try_conv2d, try_pad, Conv2dOpts, PadMode};
use crate::error::{OrPanic, Result};
use crate::tensor::Tensor;

/// Options of [`conv3d`] (stride, padding, dilation, groups; PyTorch's defaults).
pub type Conv3dOpts = ConvOpts<3>;

/// 3-d convolution (`F.conv3d`): `input` `(N, C_in, D, H, W)` or `(C_in, D, H, W)`, `weight`
/// `(C_out, C_in / groups, KD, KH, KW)`, `bias` `(C_out)`; the output is
/// `(N, C_out, OD, OH, OW)` (or without `N`). Panics with the op and the shapes on a mismatch.
#[track_caller]
pub fn conv3d(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>, opts: &Conv3dOpts) -> Tensor {
    try_conv3d(input, weight, bias, opts).or_panic()
}

/// [`conv3d`] returning an error for wrong ranks, channel or group mismatches, a kernel larger
/// than the padded input, bad options, or unsupported dtypes.
#[track_caller]
pub fn try_conv3d(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>, opts: &Conv3dOpts) -> Result<Tensor> {
    if let Some(c) = crate::amp::autocast::operands("conv3d", &[Some(input), Some(weight), bias])? {
        return try_conv3d(c.arg(0), c.arg(1), c.opt(2), opts);
    }
    let Checked { batched, lo, padded, out } = check("conv3d", input, weight, bias, opts)?;
    let x = if batched { input.clone() } else { input.unsqueeze(0) };
    let [n, c, d, h, w] = dims(x.shape());
    let [o, _, kd, kh, kw] = dims(weight.shape());
    let x = try_pad(&x, &[0, 0, 0, 0, lo[0] as i64, (padded[0] - d - lo[0]) as i64], PadMode::Constant(0.0))?;
    let depths = window_taps(out[0], kd, opts.stride[0], opts.dilation[0]);
    let cols = x
        .index_select(2, &Tensor::from_vec(depths, [out[0] * kd]).to(&x.device()))
        .view([n, c, out[0], kd, h, w].map(|s| s as i64))
        .permute(&[0, 2, 1, 3, 4, 5])
        .reshape([(n * out[0]) as i64, (c * kd) as i64, h as i64, w as i64]);
    let w2 = weight.reshape([o as i64, -1, kh as i64, kw as i64]);
    let y = try_conv2d(&cols, &w2, bias, &plane_opts(opts))?;
    let y = y.view([n, out[0], o, out[1], out[2]].map(|s| s as i64)).permute(&[0, 2, 1, 3, 4]).contiguous();
    Ok(if batched { y } else { y.squeeze_dim(0) })
}

/// The five sizes of a 5-D shape.
fn dims(s: &[usize]) -> [usize; 5] {
    [s[0], s[1], s[2], s[3], s[4]]
}

/// For each of `out` windows and each of the `k` kernel taps, the input index
/// `o·stride + j·dilation` it reads (window-major), as int64.
pub(super) fn window_taps(out: usize, k: usize, stride: usize, dilation: usize) -> Vec<i64> {
    (0..out).flat_map(|o| (0..k).map(move |j| (o * stride + j * dilation) as i64)).collect()
}

/// The height and width options of a 3-d convolution's, for the 2-d convolution over each
/// depth window (the depth's padding is applied before it).
fn plane_opts(opts: &Conv3dOpts) -> Conv2dOpts {
    let padding = match opts.padding {
        Padding::Explicit([_, ph, pw]) => Padding::Explicit([ph, pw]),
        Padding::Same => Padding::Same,
        Padding::Valid => Padding::Valid,
    };
    let [_, sh, sw] = opts.stride;
    let [_, dh, dw] = opts.dilation;
    Conv2dOpts { stride: [sh, sw], padding, dilation: [dh, dw], groups: opts.groups }
}
