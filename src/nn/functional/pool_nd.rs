//! 1-d and 3-d pooling and adaptive max pooling, built on the 2-d poolings:
//! `max_pool1d` and `avg_pool1d` (`torch.nn.functional`'s) run the 2-d kernels on a height-1
//! view; `max_pool3d` max-pools each depth slice in 2-d, then takes, over each window of
//! depths, the first maximum (the latest NaN if any) of those; `adaptive_max_pool2d` takes the
//! max over PyTorch's adaptive windows (`start = floor(i·in/out)`, `end = ceil((i+1)·in/out)`)
//! of the rows, then of the columns.
//!
//! A max over a box is the max over one axis of the maxima over the others, so the separable
//! forms give PyTorch's values exactly. `max_pool3d` takes PyTorch's element too (its indices
//! and gradient): the first maximum of a row-major scan is the first maximum of the first
//! depth holding the maximum, and its latest NaN the latest NaN of the latest depth holding
//! one. `adaptive_max_pool2d`'s gradient may go to another of equal elements than PyTorch's.
//! Every step is a differentiable op, so gradients of every order and `kiln::compile` work.

use super::conv3d::window_taps;
use super::pool::{avg_pool_as, check_window, max_pool_as, out_len, planes};
use super::{try_pad, AvgPool2dOpts, MaxPool2dOpts, PadMode};
use crate::error::{bail, OrPanic, Result};
use crate::tensor::{check_shape, Tensor};
use kiln_runtime::cpu::pool::adaptive_range;

/// Options of max_pool1d (stride None = kernel_size, padding 0, dilation 1, ceil_mode false).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxPool1dOpts {
    /// Window length.
    pub kernel_size: usize,
    /// Step of the window; `None` is the window length.
    pub stride: Option<usize>,
    /// Implicit `-inf` padding on both sides (at most half the window).
    pub padding: usize,
    /// Spacing between window elements.
    pub dilation: usize,
    /// Round the output length up instead of down.
    pub ceil_mode: bool,
}

impl MaxPool1dOpts {
    /// A `kernel_size` window with PyTorch's defaults for the rest.
    pub fn new(kernel_size: usize) -> Self {
        MaxPool1dOpts { kernel_size, stride: None, padding: 0, dilation: 1, ceil_mode: false }
    }
}

/// Options of avg_pool1d (stride None = kernel_size, padding 0, ceil_mode false,
/// count_include_pad true).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AvgPool1dOpts {
    /// Window length.
    pub kernel_size: usize,
    /// Step of the window; `None` is the window length.
    pub stride: Option<usize>,
    /// Implicit zero padding on both sides (at most half the window).
    pub padding: usize,
    /// Round the output length up instead of down.
    pub ceil_mode: bool,
    /// Count the padding zeros in the divisor.
    pub count_include_pad: bool,
}

impl AvgPool1dOpts {
    /// A `kernel_size` window with PyTorch's defaults for the rest.
    pub fn new(kernel_size: usize) -> Self {
        AvgPool1dOpts { kernel_size, stride: None, padding: 0, ceil_mode: false, count_include_pad: true }
    }
}

/// Options of max_pool3d (stride None = kernel_size, padding 0, dilation 1, ceil_mode false).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxPool3dOpts {
    /// Window size (depth, rows, columns).
    pub kernel_size: [usize; 3],
    /// Step of the window; `None` is the window size.
    pub stride: Option<[usize; 3]>,
    /// Implicit `-inf` padding on both sides (at most half the window).
    pub padding: [usize; 3],
    /// Spacing between window elements.
    pub dilation: [usize; 3],
    /// Round the output size up instead of down.
    pub ceil_mode: bool,
}

impl MaxPool3dOpts {
    /// A `kernel_size` window with PyTorch's defaults for the rest.
    pub fn new(kernel_size: [usize; 3]) -> Self {
        MaxPool3dOpts { kernel_size, stride: None, padding: [0; 3], dilation: [1; 3], ceil_mode: false }
    }
}

/// 1-d max pooling with a `kernel_size` window and stride (`F.max_pool1d(x, k)`) over
/// `(N, C, L)` or `(C, L)` input.
#[track_caller]
pub fn max_pool1d(input: &Tensor, kernel_size: usize) -> Tensor {
    max_pool1d_opts(input, &MaxPool1dOpts::new(kernel_size))
}

/// 1-d max pooling with every option (`F.max_pool1d`).
#[track_caller]
pub fn max_pool1d_opts(input: &Tensor, opts: &MaxPool1dOpts) -> Tensor {
    try_max_pool1d_opts(input, opts).or_panic()
}

/// [`max_pool1d_opts`] returning an error for a wrong rank, bad options, an output that would
/// be empty, or an unsupported dtype.
#[track_caller]
pub fn try_max_pool1d_opts(input: &Tensor, opts: &MaxPool1dOpts) -> Result<Tensor> {
    Ok(try_max_pool1d_with_indices(input, opts)?.0)
}

/// 1-d max pooling and the position of each maximum along `L`, as int64
/// (`F.max_pool1d(..., return_indices=True)`).
#[track_caller]
pub fn max_pool1d_with_indices(input: &Tensor, opts: &MaxPool1dOpts) -> (Tensor, Tensor) {
    try_max_pool1d_with_indices(input, opts).or_panic()
}

/// [`max_pool1d_with_indices`] returning an error instead of panicking.
#[track_caller]
pub fn try_max_pool1d_with_indices(input: &Tensor, opts: &MaxPool1dOpts) -> Result<(Tensor, Tensor)> {
    let op = "max_pool1d";
    let MaxPool1dOpts { kernel_size: k, padding: p, dilation: d, ceil_mode, .. } = *opts;
    let s = opts.stride.unwrap_or(k);
    plan(op, input, [k], [s], [p], [d], ceil_mode)?;
    let flat =
        MaxPool2dOpts { kernel_size: [1, k], stride: Some([1, s]), padding: [0, p], dilation: [1, d], ceil_mode };
    let (values, indices) = max_pool_as(op, &input.unsqueeze(-2), &flat)?;
    Ok((values.squeeze_dim(-2), indices.squeeze_dim(-2)))
}

/// 1-d average pooling with a `kernel_size` window and stride (`F.avg_pool1d(x, k)`).
#[track_caller]
pub fn avg_pool1d(input: &Tensor, kernel_size: usize) -> Tensor {
    avg_pool1d_opts(input, &AvgPool1dOpts::new(kernel_size))
}

/// 1-d average pooling with every option (`F.avg_pool1d`).
#[track_caller]
pub fn avg_pool1d_opts(input: &Tensor, opts: &AvgPool1dOpts) -> Tensor {
    try_avg_pool1d_opts(input, opts).or_panic()
}

/// [`avg_pool1d_opts`] returning an error instead of panicking.
#[track_caller]
pub fn try_avg_pool1d_opts(input: &Tensor, opts: &AvgPool1dOpts) -> Result<Tensor> {
    let op = "avg_pool1d";
    let AvgPool1dOpts { kernel_size: k, padding: p, ceil_mode, count_include_pad, .. } = *opts;
    let s = opts.stride.unwrap_or(k);
    plan(op, input, [k], [s], [p], [1], ceil_mode)?;
    let flat = AvgPool2dOpts {
        kernel_size: [1, k],
        stride: Some([1, s]),
        padding: [0, p],
        ceil_mode,
        count_include_pad,
        divisor_override: None,
    };
    Ok(avg_pool_as(op, &input.unsqueeze(-2), &flat)?.squeeze_dim(-2))
}

/// 3-d max pooling with a cubic `kernel_size` window and stride (`F.max_pool3d(x, k)`) over
/// `(N, C, D, H, W)` or `(C, D, H, W)` input.
#[track_caller]
pub fn max_pool3d(input: &Tensor, kernel_size: usize) -> Tensor {
    max_pool3d_opts(input, &MaxPool3dOpts::new([kernel_size; 3]))
}

/// 3-d max pooling with every option (`F.max_pool3d`).
#[track_caller]
pub fn max_pool3d_opts(input: &Tensor, opts: &MaxPool3dOpts) -> Tensor {
    try_max_pool3d_opts(input, opts).or_panic()
}

/// [`max_pool3d_opts`] returning an error for a wrong rank, bad options, an output that would
/// be empty, or an unsupported dtype.
#[track_caller]
pub fn try_max_pool3d_opts(input: &Tensor, opts: &MaxPool3dOpts) -> Result<Tensor> {
    if let Some(c) = crate::amp::autocast::operands("max_pool3d", &[Some(input)])? {
        return try_max_pool3d_opts(c.arg(0), opts);
    }
    Ok(try_max_pool3d_with_indices(input, opts)?.0)
}

/// 3-d max pooling and the position of each maximum in its input channel, as int64
/// `d * H * W + h * W + w` (`F.max_pool3d(..., return_indices=True)`): the first maximum in
/// row-major order, the latest NaN where there is one, as PyTorch.
#[track_caller]
pub fn max_pool3d_with_indices(input: &Tensor, opts: &MaxPool3dOpts) -> (Tensor, Tensor) {
    try_max_pool3d_with_indices(input, opts).or_panic()
}

/// [`max_pool3d_with_indices`] returning an error instead of panicking.
#[track_caller]
pub fn try_max_pool3d_with_indices(input: &Tensor, opts: &MaxPool3dOpts) -> Result<(Tensor, Tensor)> {
    let op = "max_pool3d";
    let (k, pad, dil) = (opts.kernel_size, opts.padding, opts.dilation);
    let s = opts.stride.unwrap_or(k);
    let [od, oh, ow] = plan(op, input, k, s, pad, dil, opts.ceil_mode)?;
    let batched = input.dim() == 5;
    let x = if batched { input.clone() } else { input.unsqueeze(0) };
    let sh = x.shape();
    let (n, c, d, h, w) = (sh[0] as i64, sh[1] as i64, sh[2], sh[3] as i64, sh[4] as i64);
    let taps = DepthTaps::new(d, od, k[0], s[0], pad[0], dil[0]);
    // A window reading padding only reads an extra -inf slice (PyTorch's -inf, at its index).
    let x = if taps.past_end { try_pad(&x, &[0, 0, 0, 0, 0, 1], PadMode::Constant(f64::NEG_INFINITY))? } else { x };
    let dp = x.shape()[2] as i64;
    let slices = MaxPool2dOpts {
        kernel_size: [k[1], k[2]],
        stride: Some([s[1], s[2]]),
        padding: [pad[1], pad[2]],
        dilation: [dil[1], dil[2]],
        ceil_mode: opts.ceil_mode,
    };
    let (oh, ow) = (oh as i64, ow as i64);
    // Each depth slice pooled in 2-d, then its windows of depths gathered.
    let (y, at) = max_pool_as(op, &x.reshape([n, c * dp, h, w]), &slices)?;
    let window = [n, c, od as i64, k[0] as i64, oh, ow];
    let device = y.device();
    let gathered = Tensor::from_vec(taps.gathered, [od * k[0]]).to(&device);
    let windows = y.view([n, c, dp, oh, ow]).index_select(2, &gathered).view(window);
    let plane_at = at.view([n, c, dp, oh, ow]).index_select(2, &gathered).view(window);
    // The tap taken: the latest NaN, else the first maximum (max_dim's choice).
    let first_max = windows.max_dim_keepdim(3).1;
    let mut along = [1i64; 6];
    along[3] = k[0] as i64;
    let positions = Tensor::arange(k[0] as i64).view(along).to(&device);
    let last_nan = Tensor::where_cond(&windows.isnan(), &positions, -1i64).amax_keepdim(3);
    let taken = Tensor::where_cond(&last_nan.ge(0i64), &last_nan, &first_max);
    let values = windows.gather(3, &taken).squeeze_dim(3);
    let depth = Tensor::from_vec(taps.depth, [1, 1, od, k[0], 1, 1]).to(&device).expand(window);
    let indices = depth.gather(3, &taken).squeeze_dim(3) * (h * w) + plane_at.gather(3, &taken).squeeze_dim(3);
    Ok(if batched { (values, indices) } else { (values.squeeze_dim(0), indices.squeeze_dim(0)) })
}

/// The depths each output depth's window reads, `k` per window (window-major): the taps inside
/// the input, those in the padding replaced by the window's first or last inside tap (which
/// changes neither its maximum nor which element is taken). A window with no tap inside reads
/// the extra -inf slice at depth `d` (`past_end`), reported as PyTorch does at its first
/// non-negative tap.
struct DepthTaps {
    /// The slice each tap gathers.
    gathered: Vec<i64>,
    /// The depth each tap's indices report.
    depth: Vec<i64>,
    /// Whether some window reads the extra -inf slice.
    past_end: bool,
}

impl DepthTaps {
    fn new(d: usize, out: usize, k: usize, stride: usize, pad: usize, dilation: usize) -> DepthTaps {
        let mut taps =
            DepthTaps { gathered: Vec::with_capacity(out * k), depth: Vec::with_capacity(out * k), past_end: false };
        let d = d as i64;
        for window in window_taps(out, k, stride, dilation).chunks(k.max(1)) {
            let window: Vec<i64> = window.iter().map(|&t| t - pad as i64).collect();
            let inside: Vec<i64> = window.iter().copied().filter(|t| (0..d).contains(t)).collect();
            match (inside.first(), inside.last()) {
                (Some(&lo), Some(&hi)) => {
                    let clamped = window.iter().map(|&t| t.clamp(lo, hi));
                    taps.gathered.extend(clamped.clone());
                    taps.depth.extend(clamped);
                }
                _ => {
                    let first = window.iter().copied().find(|&t| t >= 0).unwrap_or(d);
                    taps.gathered.extend(std::iter::repeat_n(d, k));
                    taps.depth.extend(std::iter::repeat_n(first, k));
                    taps.past_end = true;
                }
            }
        }
        taps
    }
}

/// Checks an N-d fixed-window pooling of `x` (`(N + 1)`-D or `(N + 2)`-D, non-empty) and
/// returns its output size, with errors in the caller's N-d terms.
#[track_caller]
fn plan<const N: usize>(
    op: &'static str,
    x: &Tensor,
    kernel: [usize; N],
    stride: [usize; N],
    pad: [usize; N],
    dilation: [usize; N],
    ceil_mode: bool,
) -> Result<[usize; N]> {
    let s = x.shape();
    if s.len() != N + 1 && s.len() != N + 2 {
        bail!(op, Shape, "expected {}D (unbatched) or {}D (batched) input, but got input of shape {s:?}", N + 1, N + 2);
    }
    if s[s.len() - N - 1..].contains(&0) {
        bail!(
            op,
            Shape,
            "expected input with non-zero sizes for the non-batch dimensions, but got input of shape {s:?}"
        );
    }
    check_window(op, &kernel, &stride, &pad, &dilation)?;
    let spatial = &s[s.len() - N..];
    let sizes: [i128; N] =
        std::array::from_fn(|d| out_len(spatial[d], kernel[d], pad[d], stride[d], dilation[d], ceil_mode));
    if sizes.iter().any(|&o| o < 1) {
        bail!(
            op,
            Shape,
            "given input of shape {s:?}, the calculated output size is {sizes:?}: output size is too small"
        );
    }
    // Past usize (a padding near usize::MAX), saturated for the shape check to refuse.
    let out = sizes.map(|o| usize::try_from(o).unwrap_or(usize::MAX));
    let mut y_shape = s[..s.len() - N].to_vec();
    y_shape.extend(out);
    check_shape(op, &y_shape)?;
    Ok(out)
}

/// Adaptive max pooling to `output_size` (`F.adaptive_max_pool2d`): output cell `(i, j)` is
/// the max of input rows `floor(i·H/OH)..ceil((i+1)·H/OH)` and the columns likewise.
#[track_caller]
pub fn adaptive_max_pool2d(input: &Tensor, output_size: [usize; 2]) -> Tensor {
    try_adaptive_max_pool2d(input, output_size).or_panic()
}

/// [`adaptive_max_pool2d`] returning an error for a wrong rank, an empty plane, or a
/// non-floating-point dtype. An output size of 0 gives an empty result, as PyTorch.
#[track_caller]
pub fn try_adaptive_max_pool2d(input: &Tensor, output_size: [usize; 2]) -> Result<Tensor> {
    Ok(try_adaptive_max_pool2d_with_indices(input, output_size)?.0)
}

/// Adaptive max pooling and the position of each maximum in its input plane, as int64
/// `h * W + w` (`F.adaptive_max_pool2d(..., return_indices=True)`).
#[track_caller]
pub fn adaptive_max_pool2d_with_indices(input: &Tensor, output_size: [usize; 2]) -> (Tensor, Tensor) {
    try_adaptive_max_pool2d_with_indices(input, output_size).or_panic()
}

/// [`adaptive_max_pool2d_with_indices`] returning an error instead of panicking.
#[track_caller]
pub fn try_adaptive_max_pool2d_with_indices(input: &Tensor, output_size: [usize; 2]) -> Result<(Tensor, Tensor)> {
    let op = "adaptive_max_pool2d";
    let (_, h, w) = planes(op, input)?;
    if !input.dtype().is_float() {
        bail!(op, DType, "not implemented for dtype {} (input {:?})", input.dtype(), input.shape());
    }
    let (rows, row_at) = window_max(input, -2, h, output_size[0]);
    let (values, col_at) = window_max(&rows, -1, w, output_size[1]);
    let row = row_at.gather(-1, &col_at);
    Ok((values, &(&row * w as i64) + &col_at))
}

/// The max of `x` over each of the `out` adaptive windows along `dim` (-2 or -1, of size
/// `len`), and the position of each max along `dim`. The windows are gathered at one length,
/// the shorter ones repeating their last element (which changes no max, nor the first one).
fn window_max(x: &Tensor, dim: i64, len: usize, out: usize) -> (Tensor, Tensor) {
    let ranges: Vec<(usize, usize)> = (0..out).map(|o| adaptive_range(o, out, len)).collect();
    let k = ranges.iter().map(|(start, end)| end - start).max().unwrap_or(1);
    let taps: Vec<i64> =
        ranges.iter().flat_map(|&(start, end)| (0..k).map(move |j| (start + j).min(end - 1) as i64)).collect();
    let taps = Tensor::from_vec(taps, [out * k]).to(&x.device());
    let windows = x.index_select(dim, &taps).unflatten(dim, [out as i64, k as i64]);
    let (values, at) = windows.max_dim(dim);
    let mut starts_shape = vec![out];
    starts_shape.extend(std::iter::repeat_n(1, (-dim - 1) as usize));
    let starts = Tensor::from_vec(ranges.iter().map(|&(start, _)| start as i64).collect(), &starts_shape);
    (values, &at + &starts.to(&x.device()))
}
