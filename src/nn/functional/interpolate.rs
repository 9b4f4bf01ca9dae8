//! Resampling: `interpolate` (PyTorch's `F.interpolate`: nearest, nearest-exact, linear,
//! bilinear, trilinear, with `align_corners`) and `pixel_shuffle`/`pixel_unshuffle`.
//!
//! Each is a decomposition into ops kiln already has, so autograd, `kiln::compile` and every
//! device work with no kernel of its own. Nearest modes are one `index_select` per spatial dim;
//! the linear modes are separable, so each spatial dim (the last first, as PyTorch's CPU
//! kernel nests them) is two `index_select`s weighted by constant tensors. The source indices
//! and weights depend on the shapes only; they are computed on the host with PyTorch's formulas
//! (`area_pixel_compute_source_index`, `nearest_idx`, `nearest_exact_idx`) in PyTorch's
//! precision (f32 for every dtype but f64, and always f32 for the nearest modes), so that the
//! indices, the rounding included, are PyTorch's. The pixel shuffles are reshape, permute,
//! reshape.

use crate::error::{bail, OrPanic, Result};
use crate::{DType, Tensor};

/// The output's spatial size, or the factor that scales it (PyTorch's `size=` and
/// `scale_factor=`, of which exactly one is given; an enum makes that a type rule).
///
/// Converts from what PyTorch accepts: `8` or `[8, 6]` are sizes, `2.0` or `[2.0, 1.5]`
/// scale factors. One value applies to every spatial dim.
#[derive(Clone, Debug, PartialEq)]
pub enum Resize {
    /// The output's spatial sizes (`size=`).
    Size(Vec<usize>),
    /// Factors the spatial sizes are multiplied by (`scale_factor=`); each output size is
    /// `floor(input_size · factor)`.
    ScaleFactor(Vec<f64>),
}

impl From<usize> for Resize {
    fn from(size: usize) -> Resize {
        Resize::Size(vec![size])
    }
}

impl<const N: usize> From<[usize; N]> for Resize {
    fn from(size: [usize; N]) -> Resize {
        Resize::Size(size.to_vec())
    }
}

impl From<&[usize]> for Resize {
    fn from(size: &[usize]) -> Resize {
        Resize::Size(size.to_vec())
    }
}

impl From<f64> for Resize {
    fn from(factor: f64) -> Resize {
        Resize::ScaleFactor(vec![factor])
    }
}

impl<const N: usize> From<[f64; N]> for Resize {
    fn from(factor: [f64; N]) -> Resize {
        Resize::ScaleFactor(factor.to_vec())
    }
}

impl From<&[f64]> for Resize {
    fn from(factor: &[f64]) -> Resize {
        Resize::ScaleFactor(factor.to_vec())
    }
}

/// The interpolation algorithm of [`interpolate`] (PyTorch's `mode=` strings).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InterpolateMode {
    /// `'nearest'`: source index `floor(dst · in/out)` (PyTorch's legacy rule, kept for
    /// compatibility; it shifts the image by half a pixel). 3-D, 4-D or 5-D input.
    #[default]
    Nearest,
    /// `'nearest-exact'`: source index `floor((dst + 0.5) · in/out)`, the pixel whose centre is
    /// nearest (as Pillow and scikit-image). 3-D, 4-D or 5-D input.
    NearestExact,
    /// `'linear'`: 3-D input `(N, C, W)`.
    Linear,
    /// `'bilinear'`: 4-D input `(N, C, H, W)`.
    Bilinear,
    /// `'trilinear'`: 5-D input `(N, C, D, H, W)`.
    Trilinear,
}

impl InterpolateMode {
    /// PyTorch's name of the mode (`"nearest"`, `"nearest-exact"`, `"bilinear"`, …).
    pub fn name(self) -> &'static str {
        match self {
            InterpolateMode::Nearest => "nearest",
            InterpolateMode::NearestExact => "nearest-exact",
            InterpolateMode::Linear => "linear",
            InterpolateMode::Bilinear => "bilinear",
            InterpolateMode::Trilinear => "trilinear",
        }
    }

    /// The input rank a linear mode needs; `None` for the nearest modes (3-D to 5-D).
    fn linear_rank(self) -> Option<usize> {
        match self {
            InterpolateMode::Nearest | InterpolateMode::NearestExact => None,
            InterpolateMode::Linear => Some(3),
            InterpolateMode::Bilinear => Some(4),
            InterpolateMode::Trilinear => Some(5),
        }
    }
}

/// Every argument of [`interpolate_opts`] (PyTorch's `F.interpolate` keywords but
/// `antialias`).
#[derive(Clone, Debug, PartialEq)]
pub struct InterpolateOpts {
    /// The output size or the scale factor.
    pub resize: Resize,
    /// The algorithm.
    pub mode: InterpolateMode,
    /// For the linear modes: `true` maps the corner pixels' centres onto each other (source
    /// `dst · (in − 1)/(out − 1)`); `false` (what `None` means) maps the corners' edges
    /// (source `(dst + 0.5) · in/out − 0.5`). Must be `None` for the nearest modes.
    pub align_corners: Option<bool>,
    /// With a scale factor: `Some(true)` computes the source indices from the output size
    /// (`in/out`) instead of from `1/scale_factor`. Must not be `Some(true)` with a size.
    pub recompute_scale_factor: Option<bool>,
}

impl InterpolateOpts {
    /// `resize` and `mode` with PyTorch's defaults for the rest.
    pub fn new(resize: impl Into<Resize>, mode: InterpolateMode) -> InterpolateOpts {
        InterpolateOpts { resize: resize.into(), mode, align_corners: None, recompute_scale_factor: None }
    }
}

/// Resamples the spatial dims (all but the first two) of `input`
/// (`F.interpolate(input, size | scale_factor, mode, align_corners)`).
///
/// `resize` is a size (`8`, `[8, 6]`) or a scale factor (`2.0`, `[2.0, 1.5]`), see [`Resize`];
/// `align_corners` is `None` (PyTorch's default), `false` or `true`, and may be set only for
/// the linear modes:
///
/// ```
/// use kiln::prelude::*;
/// use kiln::nn::functional::InterpolateMode;
/// let x = Tensor::rand(&[1, 3, 4, 4]);
/// let y = F::interpolate(&x, 2.0, InterpolateMode::Nearest, None);   // scale_factor=2
/// assert_eq!(y.shape(), &[1, 3, 8, 8]);
/// let z = F::interpolate(&x, [5, 7], InterpolateMode::Bilinear, true); // size=(5, 7), align_corners=True
/// assert_eq!(z.shape(), &[1, 3, 5, 7]);
/// ```
///
/// The output sizes are `floor(in · scale_factor)`, and with a scale factor the source
/// indices use `1/scale_factor`, as in PyTorch (see
/// [`InterpolateOpts::recompute_scale_factor`]). The linear modes need a floating-point
/// input; the nearest modes take any dtype (PyTorch's CPU kernels refuse integer dtypes but
/// `uint8`). Panics with the op's name and the shapes on bad arguments; [`try_interpolate`]
/// returns the error.
#[track_caller]
pub fn interpolate(
    input: &Tensor,
    resize: impl Into<Resize>,
    mode: InterpolateMode,
    align_corners: impl Into<Option<bool>>,
) -> Tensor {
    try_interpolate(input, resize, mode, align_corners).or_panic()
}

/// [`interpolate`] returning an error for an input rank the mode does not take, a size or
/// scale factor of the wrong length, an empty input or output, a set `align_corners` with a
/// nearest mode, or an integer input with a linear mode.
#[track_caller]
pub fn try_interpolate(
    input: &Tensor,
    resize: impl Into<Resize>,
    mode: InterpolateMode,
    align_corners: impl Into<Option<bool>>,
) -> Result<Tensor> {
    let opts = InterpolateOpts {
        resize: resize.into(),
        mode,
        align_corners: align_corners.into(),
        recompute_scale_factor: None,
    };
    try_interpolate_opts(input, &opts)
}

/// [`interpolate`] with every option (`recompute_scale_factor` too).
#[track_caller]
pub fn interpolate_opts(input: &Tensor, opts: &InterpolateOpts) -> Tensor {
    try_interpolate_opts(input, opts).or_panic()
}

/// [`interpolate_opts`] returning an error instead of panicking.
#[track_caller]
pub fn try_interpolate_opts(input: &Tensor, opts: &InterpolateOpts) -> Result<Tensor> {
    let op = "interpolate";
    let mode = opts.mode;
    let shape = input.shape().to_vec();
    let n = shape.len();
    if mode.linear_rank().is_none() && opts.align_corners.is_some() {
        bail!(
            op,
            Value,
            "align_corners option can only be set with the interpolating modes: linear | bilinear | trilinear, \
             but mode is {}",
            mode.name()
        );
    }
    if !(3..=5).contains(&n) {
        bail!(
            op,
            Shape,
            "only 3-D, 4-D and 5-D input tensors are supported, but got {n}-D input of shape {shape:?} for mode {}",
            mode.name()
        );
    }
    if let Some(rank) = mode.linear_rank() {
        if n != rank {
            bail!(op, Shape, "got {n}-D input of shape {shape:?}, but {} mode needs {rank}-D input", mode.name());
        }
    }
    let spatial = n - 2;
    let in_sizes = &shape[2..];
    let (out_sizes, scales): (Vec<usize>, Vec<Option<f64>>) = match &opts.resize {
        Resize::Size(size) => {
            if opts.recompute_scale_factor == Some(true) {
                bail!(op, Value, "recompute_scale_factor is not meaningful with an explicit size {size:?}");
            }
            let size = broadcast(op, "output size", size, spatial, &shape)?;
            (size, vec![None; spatial])
        }
        Resize::ScaleFactor(factor) => {
            let factor = broadcast(op, "scale_factor", factor, spatial, &shape)?;
            let mut sizes = Vec::with_capacity(spatial);
            for (&len, &f) in in_sizes.iter().zip(&factor) {
                let out = (len as f64 * f).floor();
                if !(out >= 0.0 && out < usize::MAX as f64) {
                    bail!(
                        op,
                        Value,
                        "scale_factor {factor:?} gives no valid output size for input of shape {shape:?} \
                         (floor({len} · {f}) = {out})"
                    );
                }
                sizes.push(out as usize);
            }
            let keep = opts.recompute_scale_factor != Some(true);
            (sizes, factor.iter().map(|&f| keep.then_some(f)).collect())
        }
    };
    if in_sizes.contains(&0) || out_sizes.contains(&0) {
        bail!(
            op,
            Shape,
            "input and output sizes should be greater than 0, but got input of shape {shape:?} and output size \
             {out_sizes:?}"
        );
    }
    if shape[1] == 0 {
        bail!(op, Shape, "non-empty {n}-D data tensor expected, but got a tensor of shape {shape:?}");
    }
    let is_linear = mode.linear_rank().is_some();
    if is_linear && !input.dtype().is_float() {
        bail!(
            op,
            DType,
            "{} interpolation is not implemented for dtype {} (input of shape {shape:?}); it needs a floating-point \
             dtype",
            mode.name(),
            input.dtype()
        );
    }
    let device = input.device();
    let align = opts.align_corners.unwrap_or(false);
    let in_f32 = input.dtype() != DType::F64;
    let mut out = input.clone();
    // The last dim first: PyTorch's kernel nests the last dim innermost.
    for i in (0..spatial).rev() {
        let (d, len, out_len) = (2 + i, in_sizes[i], out_sizes[i]);
        let index = |v: Vec<i64>| Tensor::from_vec(v, [out_len]).to(&device);
        if !is_linear {
            let exact = mode == InterpolateMode::NearestExact;
            let idx: Vec<i64> = (0..out_len).map(|o| nearest_index(o, len, out_len, scales[i], exact)).collect();
            if out_len == len && idx.iter().enumerate().all(|(o, &s)| o as i64 == s) {
                continue;
            }
            out = out.try_index_select(d as i64, &index(idx))?;
            continue;
        }
        let w = linear_weights(len, out_len, align, scales[i], in_f32);
        if out_len == len && w.lambda1.iter().all(|&l| l == 0.0) && w.i0.iter().enumerate().all(|(o, &s)| o as i64 == s)
        {
            continue;
        }
        let mut wshape = vec![1usize; n - d];
        wshape[0] = out_len;
        let weight = |v: Vec<f64>| Tensor::from_vec(v, &wshape).to_dtype(input.dtype()).to(&device);
        let x0 = out.try_index_select(d as i64, &index(w.i0))?;
        let x1 = out.try_index_select(d as i64, &index(w.i1))?;
        out = x0 * weight(w.lambda0) + x1 * weight(w.lambda1);
    }
    Ok(out)
}

/// `values` for each of `spatial` dims: one value repeated, or exactly one per dim.
#[track_caller]
fn broadcast<T: Copy + std::fmt::Debug>(
    op: &'static str,
    what: &str,
    values: &[T],
    spatial: usize,
    shape: &[usize],
) -> Result<Vec<T>> {
    match values.len() {
        1 => Ok(vec![values[0]; spatial]),
        l if l == spatial => Ok(values.to_vec()),
        _ => bail!(
            op,
            Shape,
            "input and {what} must have the same number of spatial dimensions, but got input of shape {shape:?} \
             (spatial dimensions {:?}) and {what} {values:?}; give the input as (N, C, d1, …, dK) and the {what} as \
             K values",
            &shape[2.min(shape.len())..]
        ),
    }
}

/// A value rounded to f32 when the computation is in f32 (each step of PyTorch's f32 index
/// arithmetic is one correctly rounded f32 operation; computing it in f64 and rounding gives
/// the same value).
fn round_to(v: f64, f32: bool) -> f64 {
    if f32 {
        v as f32 as f64
    } else {
        v
    }
}

/// PyTorch's `compute_scales_value`: `1/scale` when a positive scale factor was given, else
/// `in/out`.
fn scales_value(scale: Option<f64>, len: usize, out_len: usize, f32: bool) -> f64 {
    match scale {
        Some(s) if s > 0.0 => round_to(1.0 / s, f32),
        _ => round_to(round_to(len as f64, f32) / round_to(out_len as f64, f32), f32),
    }
}

/// PyTorch's `nearest_idx` / `nearest_exact_idx` (computed in f32 for every dtype).
fn nearest_index(o: usize, len: usize, out_len: usize, scale: Option<f64>, exact: bool) -> i64 {
    let last = len as i64 - 1;
    if !exact {
        if out_len == len {
            return o as i64;
        }
        if out_len == 2 * len {
            return (o >> 1) as i64;
        }
    }
    let s = scales_value(scale, len, out_len, true);
    let src = if exact {
        // `floorf((dst + 0.5) * scale)`: the product in double, rounded to float by floorf.
        round_to((o as f64 + 0.5) * s, true).floor()
    } else {
        round_to(round_to(o as f64, true) * s, true).floor()
    };
    (src as i64).min(last)
}

/// The two source indices and weights of each output position along one dim.
struct LinearWeights {
    i0: Vec<i64>,
    i1: Vec<i64>,
    lambda0: Vec<f64>,
    lambda1: Vec<f64>,
}

/// PyTorch's `compute_indices_weights_linear`: the source coordinate
/// (`area_pixel_compute_source_index`), its floor clamped to the input and the fraction past
/// it (`guard_index_and_lambda`), computed in f32 unless the input is f64.
fn linear_weights(len: usize, out_len: usize, align: bool, scale: Option<f64>, f32: bool) -> LinearWeights {
    let r = |v: f64| round_to(v, f32);
    let s = if align {
        if out_len > 1 {
            r(r((len - 1) as f64) / r((out_len - 1) as f64))
        } else {
            0.0
        }
    } else {
        scales_value(scale, len, out_len, f32)
    };
    let mut w = LinearWeights {
        i0: Vec::with_capacity(out_len),
        i1: Vec::with_capacity(out_len),
        lambda0: Vec::with_capacity(out_len),
        lambda1: Vec::with_capacity(out_len),
    };
    let last = len as i64 - 1;
    for o in 0..out_len {
        let real = if align { r(s * r(o as f64)) } else { r(r(s * r(o as f64 + 0.5)) - 0.5).max(0.0) };
        // `floorf` takes a float, so PyTorch rounds the coordinate to f32 even for f64.
        let idx = ((real as f32).floor() as i64).min(last);
        let lambda = r(real - idx as f64).clamp(0.0, 1.0);
        w.i0.push(idx);
        w.i1.push(if idx < last { idx + 1 } else { idx });
        w.lambda0.push(r(1.0 - lambda));
        w.lambda1.push(lambda);
    }
    w
}

/// Rearranges `(*, C·r², H, W)` into `(*, C, H·r, W·r)` (`F.pixel_shuffle`): reshape, permute,
/// reshape.
#[track_caller]
pub fn pixel_shuffle(input: &Tensor, upscale_factor: usize) -> Tensor {
    try_pixel_shuffle(input, upscale_factor).or_panic()
}

/// [`pixel_shuffle`] returning an error for fewer than 3 dims, a zero factor, or channels not
/// divisible by its square.
#[track_caller]
pub fn try_pixel_shuffle(input: &Tensor, upscale_factor: usize) -> Result<Tensor> {
    let op = "pixel_shuffle";
    let (lead, [c, h, w]) = chw(op, input, upscale_factor, "upscale_factor")?;
    let r = upscale_factor;
    if c % (r * r) != 0 {
        bail!(
            op,
            Shape,
            "expects the input's channel dimension (dim -3) to be divisible by the square of upscale_factor {r}, \
             but got input of shape {:?}",
            input.shape()
        );
    }
    let l = lead.len() as i64;
    let dims = |tail: &[usize]| lead.iter().chain(tail).map(|&s| s as i64).collect::<Vec<i64>>();
    let perm: Vec<i64> = (0..l).chain([l, l + 3, l + 1, l + 4, l + 2]).collect();
    input.try_reshape(dims(&[c / (r * r), r, r, h, w]))?.try_permute(&perm)?.try_reshape(dims(&[
        c / (r * r),
        h * r,
        w * r,
    ]))
}

/// Rearranges `(*, C, H·r, W·r)` into `(*, C·r², H, W)`, the inverse of [`pixel_shuffle`]
/// (`F.pixel_unshuffle`).
#[track_caller]
pub fn pixel_unshuffle(input: &Tensor, downscale_factor: usize) -> Tensor {
    try_pixel_unshuffle(input, downscale_factor).or_panic()
}

/// [`pixel_unshuffle`] returning an error for fewer than 3 dims, a zero factor, or a height or
/// width not divisible by it.
#[track_caller]
pub fn try_pixel_unshuffle(input: &Tensor, downscale_factor: usize) -> Result<Tensor> {
    let op = "pixel_unshuffle";
    let (lead, [c, h, w]) = chw(op, input, downscale_factor, "downscale_factor")?;
    let r = downscale_factor;
    if h % r != 0 || w % r != 0 {
        bail!(
            op,
            Shape,
            "expects height and width (dims -2 and -1) to be divisible by downscale_factor {r}, but got input of \
             shape {:?}",
            input.shape()
        );
    }
    let l = lead.len() as i64;
    let dims = |tail: &[usize]| lead.iter().chain(tail).map(|&s| s as i64).collect::<Vec<i64>>();
    let perm: Vec<i64> = (0..l).chain([l, l + 2, l + 4, l + 1, l + 3]).collect();
    input.try_reshape(dims(&[c, h / r, r, w / r, r]))?.try_permute(&perm)?.try_reshape(dims(&[c * r * r, h / r, w / r]))
}

/// The leading dims and `(C, H, W)` of a pixel-shuffle input, checking its rank and factor.
#[track_caller]
fn chw(op: &'static str, x: &Tensor, factor: usize, name: &str) -> Result<(Vec<usize>, [usize; 3])> {
    let s = x.shape();
    if s.len() < 3 {
        bail!(op, Shape, "expects input to have at least 3 dimensions, but got input of shape {s:?}");
    }
    if factor == 0 {
        bail!(op, Value, "expects a positive {name}, but got 0 (input of shape {s:?})");
    }
    let k = s.len() - 3;
    Ok((s[..k].to_vec(), [s[k], s[k + 1], s[k + 2]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_indices_follow_pytorch() {
        // F.interpolate(arange(6), size=4): [0, 1, 3, 4]; nearest-exact: [0, 2, 3, 5].
        let idx = |exact| (0..4).map(|o| nearest_index(o, 6, 4, None, exact)).collect::<Vec<_>>();
        assert_eq!(idx(false), [0, 1, 3, 4]);
        assert_eq!(idx(true), [0, 2, 3, 5]);
        // scale_factor 0.5 of 6: [0, 2, 4].
        assert_eq!((0..3).map(|o| nearest_index(o, 6, 3, Some(0.5), false)).collect::<Vec<_>>(), [0, 2, 4]);
    }

    #[test]
    fn linear_weights_clamp_at_the_edges() {
        // 2 → 4 without align_corners: sources -0.25 (clamped to 0), 0.25, 0.75, 1.25 (index 1,
        // past which there is nothing: both neighbours are 1).
        let w = linear_weights(2, 4, false, None, false);
        assert_eq!(w.i0, [0, 0, 0, 1]);
        assert_eq!(w.i1, [1, 1, 1, 1]);
        assert_eq!(w.lambda1, [0.0, 0.25, 0.75, 0.25]);
        // align_corners with one output: source 0.
        let w = linear_weights(5, 1, true, None, true);
        assert_eq!((w.i0[0], w.lambda1[0]), (0, 0.0));
    }
}
