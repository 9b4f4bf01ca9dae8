//! `torchvision.transforms.functional`: the deterministic image functions the random
//! transforms are made of — [`resize`], [`crop`], [`center_crop`], [`resized_crop`],
//! [`adjust_brightness`], [`adjust_contrast`], [`adjust_saturation`], [`adjust_hue`].
//!
//! Each takes an [`Image`]. Pixels (and `u8` tensors `[C, H, W]`, which are treated as
//! pixels) are computed as torchvision computes a PIL image, with Pillow's integer arithmetic,
//! bit for bit; float tensors `[..., C, H, W]` as torchvision computes a tensor image.
//! [`resize`] uses the antialiased bilinear filter, torchvision's default (`antialias=True`).

use super::enhance::Adjust;
use super::resample::{resize_pixels, resize_tensor};
use crate::error::{bail, AtCaller, Result};
use crate::vision::{Image, Pixels};
use crate::{DType, Tensor};

/// The size [`resize`] makes: the shorter edge (the other keeping the aspect ratio, as
/// torchvision's `size=int`), or an exact `(height, width)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// The length of the shorter edge; the longer one is scaled by the same ratio and
    /// truncated (`int(size * long / short)`).
    Shorter(usize),
    /// `(height, width)`.
    Exact(usize, usize),
}

impl From<usize> for Size {
    fn from(edge: usize) -> Size {
        Size::Shorter(edge)
    }
}

impl From<(usize, usize)> for Size {
    fn from((h, w): (usize, usize)) -> Size {
        Size::Exact(h, w)
    }
}

impl From<[usize; 2]> for Size {
    fn from([h, w]: [usize; 2]) -> Size {
        Size::Exact(h, w)
    }
}

impl Size {
    /// The `(height, width)` an `h x w` image resizes to (torchvision's
    /// `_compute_resized_output_size`): with `max_size`, a longer edge above it is brought
    /// down to it and the shorter edge scaled alike.
    #[track_caller]
    pub fn output_size(self, h: usize, w: usize, max_size: Option<usize>) -> Result<(usize, usize)> {
        let (new_h, new_w) = match self {
            Size::Exact(height, width) => {
                if max_size.is_some() {
                    bail!(
                        "resize",
                        Value,
                        "max_size is only allowed with a size for the shorter edge, not ({height}, {width})"
                    );
                }
                (height, width)
            }
            Size::Shorter(edge) => {
                let (short, long) = (h.min(w), h.max(w));
                if short == 0 {
                    bail!("resize", Shape, "cannot resize an empty {h}x{w} image");
                }
                let mut new = (edge, (edge as f64 * long as f64 / short as f64) as usize);
                if let Some(max) = max_size {
                    if max <= edge {
                        bail!(
                            "resize",
                            Value,
                            "max_size = {max} must be strictly greater than the requested size {edge}"
                        );
                    }
                    if new.1 > max {
                        new = ((max as f64 * new.0 as f64 / new.1 as f64) as usize, max);
                    }
                }
                if w <= h {
                    (new.1, new.0)
                } else {
                    new
                }
            }
        };
        if new_h == 0 || new_w == 0 || h == 0 || w == 0 {
            bail!("resize", Shape, "cannot resize a {h}x{w} image to {new_h}x{new_w}");
        }
        Ok((new_h, new_w))
    }
}

/// `image` resized to `size` with the antialiased bilinear filter (`F.resize`); an image
/// already of that size is returned as it is. Float tensors stay differentiable.
#[track_caller]
pub fn resize(image: Image, size: impl Into<Size>) -> Result<Image> {
    resize_with_max(image, size.into(), None)
}

/// [`resize`] with torchvision's `max_size`.
#[track_caller]
pub(crate) fn resize_with_max(image: Image, size: Size, max_size: Option<usize>) -> Result<Image> {
    let (h, w) = image.size()?;
    let (height, width) = size.output_size(h, w, max_size)?;
    if (height, width) == (h, w) {
        return Ok(image);
    }
    map_image("resize", image, |p| resize_pixels(p, height, width), |t| resize_tensor(t, height, width))
}

/// The `height x width` window of `image` whose top-left corner is at (`top`, `left`)
/// (`F.crop`); where the window leaves the image (negative or too large offsets) it reads
/// zeros, as torchvision pads.
#[track_caller]
pub fn crop(image: Image, top: i64, left: i64, height: usize, width: usize) -> Result<Image> {
    let (h, w) = image.size()?;
    // The window's rows and columns that lie inside the image: (first in the window,
    // first in the image, count).
    let span = |start: i64, len: usize, size: usize| {
        let lo = start.max(0).min(size as i64);
        let hi = (start + len as i64).clamp(lo, size as i64);
        ((lo - start) as usize, lo as usize, (hi - lo) as usize)
    };
    let (oy, sy, ny) = span(top, height, h);
    let (ox, sx, nx) = span(left, width, w);
    Ok(match image {
        Image::Pixels(p) => {
            let mut out = vec![0u8; p.channels() * height * width];
            for c in 0..p.channels() {
                for y in 0..ny {
                    let src = &p.data()[(c * h + sy + y) * w + sx..][..nx];
                    out[(c * height + oy + y) * width + ox..][..nx].copy_from_slice(src);
                }
            }
            Image::Pixels(Pixels::new(out, p.channels(), height, width)?)
        }
        Image::Tensor(t) => {
            let nd = t.dim();
            let inside = t.try_narrow(-2, sy as i64, ny)?.try_narrow(-1, sx as i64, nx)?;
            if (ny, nx) == (height, width) {
                Image::Tensor(inside.contiguous())
            } else {
                let mut shape = t.shape().to_vec();
                (shape[nd - 2], shape[nd - 1]) = (height, width);
                let out = t.new_zeros(&shape);
                out.try_narrow(-2, oy as i64, ny)?.try_narrow(-1, ox as i64, nx)?.try_copy_(&inside)?;
                Image::Tensor(out)
            }
        }
    })
}

/// The central `height x width` window of `image` (`F.center_crop`): offsets
/// `round((H − height) / 2)` and `round((W − width) / 2)` (halves to even, as Python's
/// `round`), zero padding where the window is larger than the image (split as torchvision
/// splits it, the extra pixel after).
#[track_caller]
pub fn center_crop(image: Image, height: usize, width: usize) -> Result<Image> {
    let (h, w) = image.size()?;
    // torchvision pads a too-small side by (d / 2, (d + 1) / 2) first, then crops the
    // padded image at the rounded centre offset.
    let pad_before = |want: usize, have: usize| if want > have { (want - have) / 2 } else { 0 };
    let padded = |want: usize, have: usize| have.max(want);
    let offset = |want: usize, have: usize| {
        let padded = padded(want, have);
        ((padded - want) as f64 / 2.0).round_ties_even() as i64 - pad_before(want, have) as i64
    };
    crop(image, offset(height, h), offset(width, w), height, width)
}

/// [`crop`] then [`resize`] to `size` (`F.resized_crop`).
#[track_caller]
pub fn resized_crop(
    image: Image,
    top: i64,
    left: i64,
    height: usize,
    width: usize,
    size: impl Into<Size>,
) -> Result<Image> {
    resize(crop(image, top, left, height, width)?, size)
}

/// `image` with its brightness scaled by `factor` ≥ 0 (`F.adjust_brightness`: a blend with
/// black; 0 gives black, 1 the image).
#[track_caller]
pub fn adjust_brightness(image: Image, factor: f64) -> Result<Image> {
    adjust(Adjust::Brightness, image, factor)
}

/// `image` with its contrast scaled by `factor` ≥ 0 (`F.adjust_contrast`: a blend with the
/// mean of its grey image; 0 gives that grey, 1 the image).
#[track_caller]
pub fn adjust_contrast(image: Image, factor: f64) -> Result<Image> {
    adjust(Adjust::Contrast, image, factor)
}

/// `image` with its saturation scaled by `factor` ≥ 0 (`F.adjust_saturation`: a blend with
/// its grey image; 0 gives grey, 1 the image). One-channel images are returned unchanged.
#[track_caller]
pub fn adjust_saturation(image: Image, factor: f64) -> Result<Image> {
    adjust(Adjust::Saturation, image, factor)
}

/// `image` with its hue turned by `factor` of a full turn, `factor` in `[-0.5, 0.5]`
/// (`F.adjust_hue`). One-channel images are returned unchanged.
#[track_caller]
pub fn adjust_hue(image: Image, factor: f64) -> Result<Image> {
    adjust(Adjust::Hue, image, factor)
}

/// One colour adjustment of `image`.
#[track_caller]
pub(crate) fn adjust(which: Adjust, image: Image, factor: f64) -> Result<Image> {
    map_image(which.name(), image, |p| which.pixels(p, factor), |t| which.tensor(t, factor))
}

/// `image` through `on_pixels` (pixels, and `u8` tensors `[C, H, W]` as pixels) or
/// `on_float` (float tensors); an error for other tensors.
#[track_caller]
fn map_image(
    op: &'static str,
    image: Image,
    on_pixels: impl FnOnce(&Pixels) -> Result<Pixels>,
    on_float: impl FnOnce(&Tensor) -> Result<Tensor>,
) -> Result<Image> {
    match image {
        Image::Pixels(p) => Ok(Image::Pixels(on_pixels(&p).at_caller()?)),
        Image::Tensor(t) if t.dtype().is_float() => Ok(Image::Tensor(on_float(&t).at_caller()?)),
        Image::Tensor(t) if t.dtype() == DType::U8 && t.dim() == 3 => {
            let [c, h, w] = [t.shape()[0], t.shape()[1], t.shape()[2]];
            let p = Pixels::new(t.contiguous().to_vec::<u8>(), c, h, w)?;
            Ok(Image::Tensor(on_pixels(&p).at_caller()?.to_u8_tensor().try_to(&t.device())?))
        }
        Image::Tensor(t) => bail!(
            op,
            DType,
            "expected pixels, a uint8 tensor [C, H, W] or a float tensor [..., C, H, W], but got {} of shape {:?}",
            t.dtype(),
            t.shape()
        ),
    }
}
