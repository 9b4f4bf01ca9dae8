//! Convolutions: `conv1d` and `conv2d` (`torch.nn.functional.conv1d/conv2d`) with stride,
//! padding (explicit, `"same"`, `"valid"`), dilation and groups, on batched `(N, C, ...)` or
//! unbatched `(C, ...)` input.
//!
//! The forward is im2col + gemm per image and group, parallel over the batch (runtime
//! `cpu::conv`); the backward rule (`ConvolutionBackward0`) is made of differentiable ops of
//! its own (the transposed convolution for the input, the im2col product for the weight; see
//! `crate::ops::conv`), so gradients of every order work. f32 and f64 compute natively; f16 and bf16 are
//! computed in f32 and rounded once (the result's `grad_fn` is then `ToCopyBackward0`); integer
//! dtypes are refused, as in PyTorch. A 1-d convolution runs as a 2-d one of height 1.

use crate::error::{bail, OrPanic, Result};
use crate::ops::conv as ops;
use crate::tensor::{check_shape, Tensor};
use kiln_runtime::cpu::conv::ConvGeom;
use kiln_runtime::DType;
use ops::Conv;
use std::sync::Arc;

/// Padding of an N-d convolution: explicit per-dim, "same" or "valid" (PyTorch's `padding=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Padding<const N: usize> {
    /// Zeros added on both sides of each spatial dim.
    Explicit([usize; N]),
    /// Pad so that the output has the input's size (stride 1 only; when the total padding
    /// `dilation * (kernel - 1)` is odd, the extra zero goes after the input, as in PyTorch).
    Same,
    /// No padding.
    Valid,
}

/// Options of conv1d/conv2d (PyTorch defaults: stride 1, padding 0, dilation 1, groups 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvOpts<const N: usize> {
    /// Step of the kernel over each spatial dim.
    pub stride: [usize; N],
    /// Padding of the input.
    pub padding: Padding<N>,
    /// Spacing between kernel elements.
    pub dilation: [usize; N],
    /// Number of blocked connections from input to output channels.
    pub groups: usize,
}

impl<const N: usize> Default for ConvOpts<N> {
    /// Stride 1, padding 0, dilation 1, one group.
    fn default() -> Self {
        ConvOpts { stride: [1; N], padding: Padding::Explicit([0; N]), dilation: [1; N], groups: 1 }
    }
}

/// Options of [`conv1d`].
pub type Conv1dOpts = ConvOpts<1>;
/// Options of [`conv2d`].
pub type Conv2dOpts = ConvOpts<2>;

/// 2-d convolution (`F.conv2d`): `input` `(N, C_in, H, W)` or `(C_in, H, W)`, `weight`
/// `(C_out, C_in / groups, KH, KW)`, `bias` `(C_out)`; the output is `(N, C_out, OH, OW)` (or
/// without `N`). Panics with the op and the shapes on a mismatch.
#[track_caller]
pub fn conv2d(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>, opts: &Conv2dOpts) -> Tensor {
    try_conv2d(input, weight, bias, opts).or_panic()
}

/// [`conv2d`] returning an error for wrong ranks, channel or group mismatches, a kernel larger
/// than the padded input, bad options, or unsupported dtypes.
#[track_caller]
pub fn try_conv2d(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>, opts: &Conv2dOpts) -> Result<Tensor> {
    if let Some(c) = crate::amp::autocast::operands("conv2d", &[Some(input), Some(weight), bias])? {
        return try_conv2d(c.arg(0), c.arg(1), c.opt(2), opts);
    }
    convolution("conv2d", input, weight, bias, opts)
}

/// 1-d convolution (`F.conv1d`): `input` `(N, C_in, L)` or `(C_in, L)`, `weight`
/// `(C_out, C_in / groups, K)`, `bias` `(C_out)`.
#[track_caller]
pub fn conv1d(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>, opts: &Conv1dOpts) -> Tensor {
    try_conv1d(input, weight, bias, opts).or_panic()
}

/// [`conv1d`] returning an error instead of panicking.
#[track_caller]
pub fn try_conv1d(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>, opts: &Conv1dOpts) -> Result<Tensor> {
    if let Some(c) = crate::amp::autocast::operands("conv1d", &[Some(input), Some(weight), bias])? {
        return try_conv1d(c.arg(0), c.arg(1), c.opt(2), opts);
    }
    convolution("conv1d", input, weight, bias, opts)
}

/// Checks, then runs an N-d (N = 1 or 2) convolution through the 2-d kernels.
#[track_caller]
fn convolution<const N: usize>(
    op: &'static str,
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    opts: &ConvOpts<N>,
) -> Result<Tensor> {
    let c = plan(op, x, w, bias, opts)?;
    let out = ops::forward(&Arc::new(c), &widened(x), &widened(w), bias.map(widened).as_ref())?;
    Ok(out.to_dtype(x.dtype()))
}

/// `t` in the dtype the kernels compute in: f32 and f64 as they are, f16 and bf16 widened to
/// f32 (the caller rounds the result back once).
pub(super) fn widened(t: &Tensor) -> Tensor {
    match t.dtype() {
        DType::F16 | DType::BF16 => t.to_dtype(DType::F32),
        _ => t.clone(),
    }
}

/// Along each spatial dim: the dilated kernel's extent, the padding before the input, and
/// the padded input's size.
struct Extents<const N: usize> {
    spans: [usize; N],
    lo: [usize; N],
    padded: [usize; N],
}

/// The [`Extents`] of a convolution, `None` when one passes 64 bits (a padding or dilation
/// near `usize::MAX`): computed with checked arithmetic, never wrapped. `"same"` padding puts
/// the odd zero after.
fn extents<const N: usize>(spatial: &[usize], kernel: &[usize], opts: &ConvOpts<N>) -> Option<Extents<N>> {
    let mut e = Extents { spans: [0; N], lo: [0; N], padded: [0; N] };
    for d in 0..N {
        let span = opts.dilation[d].checked_mul(kernel[d] - 1)?.checked_add(1)?;
        let (before, after) = match opts.padding {
            Padding::Explicit(p) => (p[d], p[d]),
            Padding::Valid => (0, 0),
            Padding::Same => ((span - 1) / 2, span - 1 - (span - 1) / 2),
        };
        e.spans[d] = span;
        e.lo[d] = before;
        e.padded[d] = spatial[d].checked_add(before)?.checked_add(after)?;
    }
    Some(e)
}

/// Checks what every convolution (plain or transposed) shares: one device, a `(N + 2)`-D
/// weight, an `(N + 1)`-D or `(N + 2)`-D input, one floating-point dtype, and a bias of
/// `[out_channels]`.
#[track_caller]
pub(super) fn check_operands<const N: usize>(
    op: &'static str,
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    out_channels: impl Fn() -> usize,
) -> Result<()> {
    let shapes = || format!("input {:?}, weight {:?}", x.shape(), w.shape());
    x.check_same_device(op, w)?;
    if w.dim() != N + 2 {
        bail!(op, Shape, "expected a {}-D weight, but got weight of shape {:?}", N + 2, w.shape());
    }
    if x.dim() != N + 1 && x.dim() != N + 2 {
        bail!(
            op,
            Shape,
            "expected {}-D (unbatched) or {}-D (batched) input, but got input of shape {:?}",
            N + 1,
            N + 2,
            x.shape()
        );
    }
    if x.dtype() != w.dtype() {
        bail!(
            op,
            DType,
            "input type ({}) and weight type ({}) should be the same ({})",
            x.dtype(),
            w.dtype(),
            shapes()
        );
    }
    if !matches!(x.dtype(), DType::F32 | DType::F64 | DType::F16 | DType::BF16) {
        bail!(
            op,
            DType,
            "not implemented for dtype {} ({}); convolutions need a floating-point dtype",
            x.dtype(),
            shapes()
        );
    }
    if let Some(b) = bias {
        x.check_same_device(op, b)?;
        if b.dtype() != x.dtype() {
            bail!(op, DType, "input type ({}) and bias type ({}) should be the same", x.dtype(), b.dtype());
        }
        if b.shape() != [out_channels()] {
            bail!(
                op,
                Shape,
                "expected bias of shape [{}] (out_channels), but got bias of shape {:?} ({})",
                out_channels(),
                b.shape(),
                shapes()
            );
        }
    }
    Ok(())
}

/// Refuses zero groups, strides or dilations.
#[track_caller]
pub(super) fn check_steps<const N: usize>(
    op: &'static str,
    groups: usize,
    stride: &[usize; N],
    dilation: &[usize; N],
) -> Result<()> {
    if groups == 0 {
        bail!(op, Value, "non-positive groups is not supported");
    }
    if stride.contains(&0) {
        bail!(op, Value, "non-positive stride is not supported (stride {stride:?})");
    }
    if dilation.contains(&0) {
        bail!(op, Value, "dilation should be greater than zero (dilation {dilation:?})");
    }
    Ok(())
}

/// A checked N-d convolution: its sizes, the padding before the input and the output size
/// along each spatial dim.
pub(super) struct Checked<const N: usize> {
    /// Whether the input has a batch dim.
    pub batched: bool,
    /// Zeros added before the input along each spatial dim.
    pub lo: [usize; N],
    /// The padded input's size along each spatial dim.
    pub padded: [usize; N],
    /// The output's spatial size.
    pub out: [usize; N],
}

/// Validates the operands and options of an N-d convolution and works out its output size
/// (PyTorch's checks and messages, with both shapes).
#[track_caller]
pub(super) fn check<const N: usize>(
    op: &'static str,
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    opts: &ConvOpts<N>,
) -> Result<Checked<N>> {
    let shapes = || format!("input {:?}, weight {:?}", x.shape(), w.shape());
    check_operands::<N>(op, x, w, bias, || w.shape()[0])?;
    let groups = opts.groups;
    check_steps(op, groups, &opts.stride, &opts.dilation)?;
    let batched = x.dim() == N + 2;
    let c_in = x.shape()[batched as usize];
    let spatial = &x.shape()[x.dim() - N..];
    let (c_out, kernel) = (w.shape()[0], &w.shape()[2..]);
    if c_out == 0 || kernel.contains(&0) {
        bail!(op, Shape, "weight should have non-zero sizes, but got weight of shape {:?}", w.shape());
    }
    if c_out % groups != 0 {
        bail!(
            op,
            Shape,
            "expected weight to be divisible by {groups} at dimension 0, but got weight of shape {:?}",
            w.shape()
        );
    }
    if w.shape()[1] * groups != c_in {
        bail!(
            op,
            Shape,
            "given groups={groups}, weight of size {:?}, expected input {:?} to have {} channels, but got {c_in} channels instead",
            w.shape(),
            x.shape(),
            w.shape()[1] * groups
        );
    }
    if matches!(opts.padding, Padding::Same) && opts.stride.iter().any(|&s| s != 1) {
        bail!(op, Value, "padding='same' is not supported for strided convolutions (stride {:?})", opts.stride);
    }
    let Some(Extents { spans, lo, padded }) = extents(spatial, kernel, opts) else {
        bail!(
            op,
            Shape,
            "the padded input or the dilated kernel is larger than 64 bits can count ({}, padding {:?}, dilation {:?})",
            shapes(),
            opts.padding,
            opts.dilation
        );
    };
    let mut out = [0usize; N];
    for d in 0..N {
        if padded[d] < spans[d] {
            bail!(
                op,
                Shape,
                "calculated padded input size per channel: {padded:?}; kernel size: {spans:?}; kernel size can't be greater than actual input size ({})",
                shapes()
            );
        }
        out[d] = (padded[d] - spans[d]) / opts.stride[d] + 1;
    }
    Ok(Checked { batched, lo, padded, out })
}

/// The 2-d kernel geometry of an N-d (N = 1 or 2) convolution of an input of `x_shape`
/// (`(N, C, ...)` or `(C, ...)`) by a `kernel` into `c_out` channels of `out_spatial` sizes: a
/// 1-d convolution is a 2-d one of height 1.
pub(super) fn geometry<const N: usize>(
    x_shape: &[usize],
    kernel: &[usize],
    c_out: usize,
    (groups, stride, dilation): (usize, [usize; N], [usize; N]),
    lo: [usize; N],
    out_spatial: [usize; N],
) -> ConvGeom {
    let batched = x_shape.len() == N + 2;
    let (n, c_in) = if batched { (x_shape[0], x_shape[1]) } else { (1, x_shape[0]) };
    let two = |v: &[usize], fill: usize| -> [usize; 2] {
        if N == 1 {
            [fill, v[0]]
        } else {
            [v[0], v[1]]
        }
    };
    let (ks, sp, os) = (two(kernel, 1), two(&x_shape[x_shape.len() - N..], 1), two(&out_spatial, 1));
    ConvGeom {
        n,
        c_in,
        h: sp[0],
        w: sp[1],
        c_out,
        groups,
        kh: ks[0],
        kw: ks[1],
        stride: two(&stride, 1),
        pad: two(&lo, 0),
        dilation: two(&dilation, 1),
        oh: os[0],
        ow: os[1],
    }
}

/// Validates the operands and options and works out the geometry.
#[track_caller]
fn plan<const N: usize>(
    op: &'static str,
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    opts: &ConvOpts<N>,
) -> Result<Conv> {
    let Checked { batched, lo, out, .. } = check(op, x, w, bias, opts)?;
    let c_out = w.shape()[0];
    let geom = geometry(x.shape(), &w.shape()[2..], c_out, (opts.groups, opts.stride, opts.dilation), lo, out);
    let mut y_shape = if batched { vec![geom.n, c_out] } else { vec![c_out] };
    y_shape.extend_from_slice(&out);
    check_shape(op, &y_shape)?;
    Ok(Conv { geom, x_shape: x.shape().to_vec(), w_shape: w.shape().to_vec(), y_shape, channel_dim: batched as usize })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autograd;

    #[test]
    fn same_padding_puts_the_odd_zero_after() {
        let x = Tensor::zeros([1, 1, 5, 6]);
        let w = Tensor::zeros([1, 1, 2, 4]);
        let opts = Conv2dOpts { padding: Padding::Same, ..Default::default() };
        let c = plan("conv2d", &x, &w, None, &opts).unwrap();
        assert_eq!(c.geom.pad, [0, 1]);
        assert_eq!((c.geom.oh, c.geom.ow), (5, 6));
        assert_eq!(c.y_shape, vec![1, 1, 5, 6]);
    }

    #[test]
    fn recording_is_skipped_without_grad() {
        let x = Tensor::ones([1, 1, 3, 3]).requires_grad_(true);
        let w = Tensor::ones([1, 1, 2, 2]);
        let _g = autograd::no_grad_guard();
        assert!(conv2d(&x, &w, None, &Default::default()).grad_fn().is_none());
    }
}
