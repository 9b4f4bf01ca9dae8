//! 2-d pooling: `max_pool2d` (with PyTorch's argmax indices), `avg_pool2d` and
//! `adaptive_avg_pool2d` over batched `(N, C, H, W)` or unbatched `(C, H, W)` input.
//!
//! Windows, output sizes (`ceil_mode`), divisors (`count_include_pad`, `divisor_override`) and
//! tie-breaking (the first maximum; NaN wins) follow PyTorch's CPU kernels. Backward rules
//! (`MaxPool2DWithIndicesBackward0`, `AvgPool2DBackward0`, `AdaptiveAvgPool2DBackward0`) are
//! differentiable again (see `crate::ops::pool`). f32 and f64 compute natively; f16 and bf16 compute in f32
//! and round once (the result's `grad_fn` is then `ToCopyBackward0`); integer dtypes are
//! refused, as in PyTorch. On CUDA, max, average and adaptive average pooling and their
//! gradients run as generated kernels (`crate::cuda::pool`).

use crate::error::{bail, OrPanic, Result};
use crate::ops::pool as ops;
use crate::tensor::{check_shape, Tensor};
use kiln_runtime::cpu::pool::{AvgMode, PoolGeom};
use kiln_runtime::DType;
use ops::{Kind, Pool};
use std::sync::Arc;

/// Options of max_pool2d (stride None = kernel_size, padding 0, dilation 1, ceil_mode false).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxPool2dOpts {
    /// Window size (rows, columns).
    pub kernel_size: [usize; 2],
    /// Step of the window; `None` is the window size.
    pub stride: Option<[usize; 2]>,
    /// Implicit `-inf` padding on both sides (at most half the window).
    pub padding: [usize; 2],
    /// Spacing between window elements.
    pub dilation: [usize; 2],
    /// Round the output size up instead of down (windows that start in the right/bottom
    /// padding are dropped).
    pub ceil_mode: bool,
}

impl MaxPool2dOpts {
    /// A `kernel_size` window with PyTorch's defaults for the rest.
    pub fn new(kernel_size: [usize; 2]) -> Self {
        MaxPool2dOpts { kernel_size, stride: None, padding: [0, 0], dilation: [1, 1], ceil_mode: false }
    }
}

/// Options of avg_pool2d (stride None = kernel_size, padding 0, ceil_mode false,
/// count_include_pad true, no divisor override).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AvgPool2dOpts {
    /// Window size (rows, columns).
    pub kernel_size: [usize; 2],
    /// Step of the window; `None` is the window size.
    pub stride: Option<[usize; 2]>,
    /// Implicit zero padding on both sides (at most half the window).
    pub padding: [usize; 2],
    /// Round the output size up instead of down.
    pub ceil_mode: bool,
    /// Count the padding zeros in the divisor.
    pub count_include_pad: bool,
    /// Divide every window's sum by this instead.
    pub divisor_override: Option<usize>,
}

impl AvgPool2dOpts {
    /// A `kernel_size` window with PyTorch's defaults for the rest.
    pub fn new(kernel_size: [usize; 2]) -> Self {
        AvgPool2dOpts {
            kernel_size,
            stride: None,
            padding: [0, 0],
            ceil_mode: false,
            count_include_pad: true,
            divisor_override: None,
        }
    }
}

/// Max pooling with a square `kernel_size` window and stride (`F.max_pool2d(x, k)`).
#[track_caller]
pub fn max_pool2d(input: &Tensor, kernel_size: usize) -> Tensor {
    max_pool2d_opts(input, &MaxPool2dOpts::new([kernel_size; 2]))
}

/// Max pooling with every option (`F.max_pool2d`).
#[track_caller]
pub fn max_pool2d_opts(input: &Tensor, opts: &MaxPool2dOpts) -> Tensor {
    try_max_pool2d_opts(input, opts).or_panic()
}

/// [`max_pool2d_opts`] returning an error for a wrong rank, bad options, an output that
/// would be empty, or an unsupported dtype.
#[track_caller]
pub fn try_max_pool2d_opts(input: &Tensor, opts: &MaxPool2dOpts) -> Result<Tensor> {
    Ok(try_max_pool2d_with_indices(input, opts)?.0)
}

/// Max pooling and the position of each maximum in its input plane, as int64 `h * W + w`
/// (`F.max_pool2d(..., return_indices=True)`).
#[track_caller]
pub fn max_pool2d_with_indices(input: &Tensor, opts: &MaxPool2dOpts) -> (Tensor, Tensor) {
    try_max_pool2d_with_indices(input, opts).or_panic()
}

/// [`max_pool2d_with_indices`] returning an error instead of panicking.
#[track_caller]
pub fn try_max_pool2d_with_indices(input: &Tensor, opts: &MaxPool2dOpts) -> Result<(Tensor, Tensor)> {
    max_pool_as("max_pool2d", input, opts)
}

/// [`try_max_pool2d_with_indices`] with errors naming `op` (the 1-d and 3-d poolings run
/// through it).
#[track_caller]
pub(super) fn max_pool_as(op: &'static str, input: &Tensor, opts: &MaxPool2dOpts) -> Result<(Tensor, Tensor)> {
    let stride = opts.stride.unwrap_or(opts.kernel_size);
    let p = window_plan(op, input, opts.kernel_size, stride, opts.padding, opts.dilation, opts.ceil_mode, Kind::Max)?;
    let x = as_float(op, input)?;
    let (v, i) = ops::max_pool(&Arc::new(p), &x)?;
    Ok((v.to_dtype(input.dtype()), i))
}

/// Average pooling with a square `kernel_size` window and stride (`F.avg_pool2d(x, k)`).
#[track_caller]
pub fn avg_pool2d(input: &Tensor, kernel_size: usize) -> Tensor {
    avg_pool2d_opts(input, &AvgPool2dOpts::new([kernel_size; 2]))
}

/// Average pooling with every option (`F.avg_pool2d`).
#[track_caller]
pub fn avg_pool2d_opts(input: &Tensor, opts: &AvgPool2dOpts) -> Tensor {
    try_avg_pool2d_opts(input, opts).or_panic()
}

/// [`avg_pool2d_opts`] returning an error instead of panicking.
#[track_caller]
pub fn try_avg_pool2d_opts(input: &Tensor, opts: &AvgPool2dOpts) -> Result<Tensor> {
    avg_pool_as("avg_pool2d", input, opts)
}

/// [`try_avg_pool2d_opts`] with errors naming `op` (the 1-d pooling runs through it).
#[track_caller]
pub(super) fn avg_pool_as(op: &'static str, input: &Tensor, opts: &AvgPool2dOpts) -> Result<Tensor> {
    if opts.divisor_override == Some(0) {
        bail!(op, Value, "divisor must be not zero");
    }
    let stride = opts.stride.unwrap_or(opts.kernel_size);
    let mode = AvgMode { count_include_pad: opts.count_include_pad, divisor_override: opts.divisor_override };
    let p = window_plan(op, input, opts.kernel_size, stride, opts.padding, [1, 1], opts.ceil_mode, Kind::Avg(mode))?;
    let x = as_float(op, input)?;
    Ok(ops::avg(&Arc::new(p), &x)?.to_dtype(input.dtype()))
}

/// Adaptive average pooling to `output_size` (`F.adaptive_avg_pool2d`): output cell `(i, j)`
/// averages input rows `floor(i*H/OH)..ceil((i+1)*H/OH)` and the columns likewise.
#[track_caller]
pub fn adaptive_avg_pool2d(input: &Tensor, output_size: [usize; 2]) -> Tensor {
    try_adaptive_avg_pool2d(input, output_size).or_panic()
}

/// [`adaptive_avg_pool2d`] returning an error instead of panicking.
#[track_caller]
pub fn try_adaptive_avg_pool2d(input: &Tensor, output_size: [usize; 2]) -> Result<Tensor> {
    let op = "adaptive_avg_pool2d";
    let (planes, h, w) = planes(op, input)?;
    let [oh, ow] = output_size;
    let y_shape = out_shape(input, oh, ow);
    check_shape(op, &y_shape)?;
    let geom = PoolGeom { planes, h, w, oh, ow, kernel: [1, 1], stride: [1, 1], pad: [0, 0], dilation: [1, 1] };
    let p = Pool { geom, kind: Kind::Adaptive, x_shape: input.shape().to_vec(), y_shape };
    let x = as_float(op, input)?;
    Ok(ops::avg(&Arc::new(p), &x)?.to_dtype(input.dtype()))
}

/// `x` in the dtype the kernels compute in: f32/f64 as they are, f16/bf16 widened to f32;
/// an error for other dtypes.
#[track_caller]
fn as_float(op: &'static str, x: &Tensor) -> Result<Tensor> {
    match x.dtype() {
        DType::F32 | DType::F64 => Ok(x.clone()),
        DType::F16 | DType::BF16 => Ok(x.to_dtype(DType::F32)),
        d => bail!(
            op,
            DType,
            "not implemented for dtype {d} (input {:?}); pooling needs a floating-point dtype",
            x.shape()
        ),
    }
}

/// `(planes, H, W)` of a 3-D or 4-D input with non-empty planes.
#[track_caller]
pub(super) fn planes(op: &'static str, x: &Tensor) -> Result<(usize, usize, usize)> {
    let s = x.shape();
    if s.len() != 3 && s.len() != 4 {
        bail!(op, Shape, "expected 3D (unbatched) or 4D (batched) input, but got input of shape {s:?}");
    }
    if s[s.len() - 3..].contains(&0) {
        bail!(
            op,
            Shape,
            "expected input with non-zero sizes for the non-batch dimensions, but got input of shape {s:?}"
        );
    }
    let (h, w) = (s[s.len() - 2], s[s.len() - 1]);
    Ok((x.numel() / (h * w), h, w))
}

/// The input's shape with the last two dims replaced.
fn out_shape(x: &Tensor, oh: usize, ow: usize) -> Vec<usize> {
    let s = x.shape();
    let mut out = s[..s.len() - 2].to_vec();
    out.extend([oh, ow]);
    out
}

/// PyTorch's `pooling_output_shape`: the number of windows along one dim (`k` and `stride`
/// positive). Computed in 128 bits, so that sizes near `usize::MAX` give the true count
/// (a window larger than the padded input gives a count below 1) instead of wrapping.
pub(super) fn out_len(len: usize, k: usize, pad: usize, stride: usize, dilation: usize, ceil_mode: bool) -> i128 {
    let (len, k, pad, stride, dilation) = (len as i128, k as i128, pad as i128, stride as i128, dilation as i128);
    // At most 2^64 · 2^64: saturates only at the very top of i128, far below any length.
    let span = dilation.saturating_mul(k - 1);
    let num = (len + 2 * pad).saturating_sub(span) - 1 + if ceil_mode { stride - 1 } else { 0 };
    let mut out = num.div_euclid(stride) + 1;
    if ceil_mode && (out - 1) * stride >= len + pad {
        out -= 1;
    }
    out
}

/// Refuses a fixed window's zero sizes, strides or dilations, and a padding past half the
/// window.
#[track_caller]
pub(super) fn check_window<const N: usize>(
    op: &'static str,
    kernel: &[usize; N],
    stride: &[usize; N],
    pad: &[usize; N],
    dilation: &[usize; N],
) -> Result<()> {
    if kernel.contains(&0) {
        bail!(op, Value, "kernel size should be greater than zero, but got kernel_size {kernel:?}");
    }
    if stride.contains(&0) {
        bail!(op, Value, "stride should be greater than zero, but got stride {stride:?}");
    }
    if dilation.contains(&0) {
        bail!(op, Value, "dilation should be greater than zero, but got dilation {dilation:?}");
    }
    if (0..N).any(|d| pad[d] > kernel[d] / 2) {
        bail!(op, Value, "pad should be smaller than or equal to half of kernel size, but got padding {pad:?} and kernel_size {kernel:?}");
    }
    Ok(())
}

/// Checks a fixed-window pooling's options against the input and works out its geometry.
#[allow(clippy::too_many_arguments)]
#[track_caller]
fn window_plan(
    op: &'static str,
    x: &Tensor,
    kernel: [usize; 2],
    stride: [usize; 2],
    pad: [usize; 2],
    dilation: [usize; 2],
    ceil_mode: bool,
    kind: Kind,
) -> Result<Pool> {
    check_window(op, &kernel, &stride, &pad, &dilation)?;
    let (planes, h, w) = planes(op, x)?;
    let oh = out_len(h, kernel[0], pad[0], stride[0], dilation[0], ceil_mode);
    let ow = out_len(w, kernel[1], pad[1], stride[1], dilation[1], ceil_mode);
    if oh < 1 || ow < 1 {
        bail!(
            op,
            Shape,
            "given input of shape {:?}, the calculated output size is {oh}x{ow}: output size is too small",
            x.shape()
        );
    }
    // Past usize (a padding near usize::MAX), saturated for the shape check to refuse.
    let (oh, ow) = (usize::try_from(oh).unwrap_or(usize::MAX), usize::try_from(ow).unwrap_or(usize::MAX));
    let y_shape = out_shape(x, oh, ow);
    check_shape(op, &y_shape)?;
    let geom = PoolGeom { planes, h, w, oh, ow, kernel, stride, pad, dilation };
    Ok(Pool { geom, kind, x_shape: x.shape().to_vec(), y_shape })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_lengths_follow_pytorch() {
        // floor((5 + 0 - 2) / 2) + 1 = 2; ceil: 3 (the last window starts inside the input)
        assert_eq!(out_len(5, 2, 0, 2, 1, false), 2);
        assert_eq!(out_len(5, 2, 0, 2, 1, true), 3);
        // ceil mode drops a window that would start in the right padding: len 4, k 2, s 2, p 1
        assert_eq!(out_len(4, 2, 1, 2, 1, true), 3);
        assert_eq!(out_len(1, 3, 0, 1, 1, false), -1);
        // Sizes near usize::MAX are counted, not wrapped: a huge window leaves no output, a
        // huge padding a count past usize.
        assert!(out_len(4, usize::MAX, 0, 1, 1, false) < 1);
        assert!(out_len(4, 3, 0, 1, usize::MAX, false) < 1);
        assert_eq!(out_len(4, usize::MAX, usize::MAX / 2, 1, 1, false), 4);
        assert_eq!(out_len(usize::MAX, 1, 0, 1, 1, false), usize::MAX as i128);
    }
}
