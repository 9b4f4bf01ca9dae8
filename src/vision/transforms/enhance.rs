//! Brightness, contrast, saturation and hue, computed as torchvision computes them: on pixels
//! with Pillow's arithmetic (`ImageEnhance` blends, the `L` and `HSV` conversions), on float
//! tensors with `torchvision.transforms._functional_tensor`'s formulas.
//!
//! Pixels have 1 (`L`) or 3 (`RGB`) channels; float tensors `[..., C, H, W]` with C 1 or 3.
//! Saturation and hue leave one-channel images unchanged, as torchvision does.

use crate::error::{bail, Result};
use crate::vision::Pixels;
use crate::{DType, Tensor};

/// Which adjustment: the name errors use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Adjust {
    /// `adjust_brightness`: a blend with black.
    Brightness,
    /// `adjust_contrast`: a blend with the grey image's mean.
    Contrast,
    /// `adjust_saturation`: a blend with the grey image.
    Saturation,
    /// `adjust_hue`: a rotation of the hue.
    Hue,
}

impl Adjust {
    /// The torchvision function's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Adjust::Brightness => "adjust_brightness",
            Adjust::Contrast => "adjust_contrast",
            Adjust::Saturation => "adjust_saturation",
            Adjust::Hue => "adjust_hue",
        }
    }

    /// An error unless `factor` is valid: non-negative (in `[-0.5, 0.5]` for the hue).
    #[track_caller]
    pub(crate) fn check(self, factor: f64) -> Result<()> {
        let ok = match self {
            Adjust::Hue => (-0.5..=0.5).contains(&factor),
            _ => factor >= 0.0,
        };
        if !ok {
            let want = if self == Adjust::Hue { "in [-0.5, 0.5]" } else { "non-negative" };
            bail!(self.name(), Value, "the factor must be {want}, but got {factor}");
        }
        Ok(())
    }

    /// `pixels` adjusted by `factor` with Pillow's arithmetic.
    #[track_caller]
    pub(crate) fn pixels(self, p: &Pixels, factor: f64) -> Result<Pixels> {
        self.check(factor)?;
        let c = p.channels();
        if c != 1 && c != 3 {
            bail!(self.name(), Shape, "expected pixels with 1 (L) or 3 (RGB) channels, but got {c}");
        }
        let plane = p.height() * p.width();
        let data = match (self, c) {
            (Adjust::Saturation | Adjust::Hue, 1) => p.data().to_vec(),
            (Adjust::Brightness, _) => blend(&vec![0; p.data().len()], p.data(), factor),
            (Adjust::Contrast, _) => {
                let grey = if c == 3 { grey_plane(p.data(), plane) } else { p.data().to_vec() };
                // ImageStat's mean of the L image, rounded as ImageEnhance.Contrast does.
                let sum: u64 = grey.iter().map(|&v| v as u64).sum();
                let mean = (sum as f64 / plane.max(1) as f64 + 0.5) as u8;
                blend(&vec![mean; p.data().len()], p.data(), factor)
            }
            (Adjust::Saturation, _) => blend(&grey_plane(p.data(), plane).repeat(3), p.data(), factor),
            (Adjust::Hue, _) => rotate_hue(p.data(), plane, factor),
        };
        Pixels::new(data, c, p.height(), p.width())
    }

    /// A float tensor `[..., C, H, W]` adjusted by `factor` as torchvision's tensor functions
    /// do (values clamped to `[0, 1]`).
    #[track_caller]
    pub(crate) fn tensor(self, t: &Tensor, factor: f64) -> Result<Tensor> {
        self.check(factor)?;
        let c = if t.dim() >= 3 { t.shape()[t.dim() - 3] } else { 0 };
        if !t.dtype().is_float() || (c != 1 && c != 3) {
            bail!(
                self.name(),
                Shape,
                "expected a float tensor image [..., C, H, W] with 1 or 3 channels, but got {} of shape {:?}",
                t.dtype(),
                t.shape()
            );
        }
        match (self, c) {
            (Adjust::Saturation | Adjust::Hue, 1) => Ok(t.clone()),
            (Adjust::Brightness, _) => tensor_blend(t, &t.zeros_like(), factor),
            (Adjust::Contrast, _) => {
                let grey = if c == 3 { tensor_grey(t)? } else { t.clone() };
                tensor_blend(t, &grey.try_mean_dim_keepdim([-3, -2, -1])?, factor)
            }
            (Adjust::Saturation, _) => tensor_blend(t, &tensor_grey(t)?, factor),
            (Adjust::Hue, _) => tensor_hue(t, factor),
        }
    }
}

/// Pillow's `Image.blend(degenerate, image, alpha)` on bytes: `d + α·(x − d)` in f32,
/// truncated (clamped to `0..=255` when α is outside `[0, 1]`).
fn blend(degenerate: &[u8], image: &[u8], alpha: f64) -> Vec<u8> {
    let alpha = alpha as f32;
    degenerate
        .iter()
        .zip(image)
        .map(|(&d, &x)| {
            let v = d as f32 + alpha * (x as i32 - d as i32) as f32;
            // `as u8` truncates toward zero and saturates at 0 and 255: Pillow's clamp
            // for extrapolation, and exact for interpolation, whose values stay in range.
            v as u8
        })
        .collect()
}

/// The `L` plane of RGB bytes (`[3, H, W]`, `plane = H·W`): Pillow's
/// `(19595·r + 38470·g + 7471·b + 2¹⁵) >> 16`.
fn grey_plane(rgb: &[u8], plane: usize) -> Vec<u8> {
    let (r, rest) = rgb.split_at(plane);
    let (g, b) = rest.split_at(plane);
    (0..plane)
        .map(|i| ((r[i] as u32 * 19595 + g[i] as u32 * 38470 + b[i] as u32 * 7471 + 0x8000) >> 16) as u8)
        .collect()
}

/// RGB bytes with the hue turned by `factor` of a full turn, as torchvision does on a PIL
/// image: to Pillow's `HSV`, the hue byte plus `factor·255` truncated (wrapping), back to RGB.
fn rotate_hue(rgb: &[u8], plane: usize, factor: f64) -> Vec<u8> {
    let shift = (factor * 255.0) as i32 as u8;
    let mut out = vec![0u8; rgb.len()];
    for i in 0..plane {
        let (h, s, v) = rgb_to_hsv(rgb[i], rgb[plane + i], rgb[2 * plane + i]);
        let (r, g, b) = hsv_to_rgb(h.wrapping_add(shift), s, v);
        (out[i], out[plane + i], out[2 * plane + i]) = (r, g, b);
    }
    out
}

/// Pillow's `rgb2hsv_row` (C `float` variables, `double` arithmetic where C promotes).
fn rgb_to_hsv(r: u8, g: u8, b: u8) -> (u8, u8, u8) {
    let (maxc, minc) = (r.max(g).max(b), r.min(g).min(b));
    if maxc == minc {
        return (0, 0, maxc);
    }
    let cr = (maxc - minc) as f32;
    let s = cr / maxc as f32;
    let rc = (maxc - r) as f32 / cr;
    let gc = (maxc - g) as f32 / cr;
    let bc = (maxc - b) as f32 / cr;
    let h: f32 = if r == maxc {
        bc - gc
    } else if g == maxc {
        (2.0 + rc as f64 - bc as f64) as f32
    } else {
        (4.0 + gc as f64 - rc as f64) as f32
    };
    let h = ((h as f64 / 6.0 + 1.0) % 1.0) as f32;
    let byte = |x: f32| ((x as f64 * 255.0) as i32).clamp(0, 255) as u8;
    (byte(h), byte(s), maxc)
}

/// Pillow's `hsv2rgb` (C `float` variables, `double` arithmetic where C promotes; `round`
/// half away from zero).
fn hsv_to_rgb(h: u8, s: u8, v: u8) -> (u8, u8, u8) {
    if s == 0 {
        return (v, v, v);
    }
    let i = (h as f32 as f64 * 6.0 / 255.0).floor() as i32;
    let f = (h as f32 as f64 * 6.0 / 255.0 - i as f64) as f32;
    let fs = (s as f64 / 255.0) as f32;
    let v64 = v as f64;
    let byte = |x: f64| (x.round() as i32).clamp(0, 255) as u8;
    let p = byte(v64 * (1.0 - fs as f64));
    let q = byte(v64 * (1.0 - (fs * f) as f64));
    let t = byte(v64 * (1.0 - fs as f64 * (1.0 - f as f64)));
    sextant(i, v, p, q, t)
}

/// The RGB of a hue in sextant `i` (`i mod 6`) from the value `v` and the three mixes
/// `p`, `q`, `t` (colorsys's `hsv_to_rgb` table).
fn sextant<T>(i: i32, v: T, p: T, q: T, t: T) -> (T, T, T) {
    match i.rem_euclid(6) {
        0 => (v, t, p),
        1 => (q, v, p),
        2 => (p, v, t),
        3 => (p, q, v),
        4 => (t, p, v),
        _ => (v, p, q),
    }
}

/// torchvision's `_blend`: `(r·a + (1 − r)·b)` clamped to `[0, 1]`.
fn tensor_blend(a: &Tensor, b: &Tensor, ratio: f64) -> Result<Tensor> {
    a.try_mul(ratio)?.try_add(&b.try_mul(1.0 - ratio)?)?.try_clamp(0.0, 1.0)
}

/// torchvision's `rgb_to_grayscale`: `0.2989·r + 0.587·g + 0.114·b`, keeping the channel dim.
fn tensor_grey(t: &Tensor) -> Result<Tensor> {
    let ch = |c: i64| t.try_select(-3, c);
    Ok(ch(0)?.try_mul(0.2989)?.try_add(&ch(1)?.try_mul(0.587)?)?.try_add(&ch(2)?.try_mul(0.114)?)?.unsqueeze(-3))
}

/// torchvision's tensor `adjust_hue`: to HSV, `h = (h + factor) mod 1`, back to RGB, each
/// step in f32 as torchvision's formulas do (other float dtypes convert to f32 and back).
fn tensor_hue(t: &Tensor, factor: f64) -> Result<Tensor> {
    let x = t.try_to_dtype(DType::F32)?.try_to(&crate::Device::Cpu)?.contiguous();
    let plane = x.shape()[x.dim() - 2] * x.shape()[x.dim() - 1];
    let mut data = x.to_vec::<f32>();
    if plane > 0 {
        for image in data.chunks_exact_mut(3 * plane) {
            for i in 0..plane {
                let rgb = (image[i], image[plane + i], image[2 * plane + i]);
                let (r, g, b) = hue_shifted_f32(rgb, factor as f32);
                (image[i], image[plane + i], image[2 * plane + i]) = (r, g, b);
            }
        }
    }
    Tensor::from_vec(data, x.shape()).try_to_dtype(t.dtype())?.try_to(&t.device())
}

/// One RGB value with its hue turned, as `_rgb2hsv`, the shift and `_hsv2rgb` compute it.
fn hue_shifted_f32((r, g, b): (f32, f32, f32), factor: f32) -> (f32, f32, f32) {
    let maxc = r.max(g).max(b);
    let minc = r.min(g).min(b);
    let eqc = maxc == minc;
    let cr = maxc - minc;
    let s = cr / if eqc { 1.0 } else { maxc };
    let div = if eqc { 1.0 } else { cr };
    let (rc, gc, bc) = ((maxc - r) / div, (maxc - g) / div, (maxc - b) / div);
    let h = if maxc == r {
        bc - gc
    } else if maxc == g {
        2.0 + rc - bc
    } else {
        4.0 + gc - rc
    };
    let h = (h / 6.0 + 1.0) % 1.0;
    // `(h + factor) % 1.0`: torch.remainder, an fmod moved into [0, 1).
    let h = (h + factor) % 1.0;
    let h = if h < 0.0 { h + 1.0 } else { h };
    let v = maxc;
    let i = (h * 6.0).floor();
    let f = h * 6.0 - i;
    let p = (v * (1.0 - s)).clamp(0.0, 1.0);
    let q = (v * (1.0 - s * f)).clamp(0.0, 1.0);
    let t = (v * (1.0 - s * (1.0 - f))).clamp(0.0, 1.0);
    sextant(i as i32, v, p, q, t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hsv_round_trips_primaries_and_greys() {
        for rgb in [(255, 0, 0), (0, 255, 0), (0, 0, 255), (7, 7, 7), (0, 0, 0)] {
            let (h, s, v) = rgb_to_hsv(rgb.0, rgb.1, rgb.2);
            assert_eq!(hsv_to_rgb(h, s, v), rgb, "{rgb:?} -> {:?}", (h, s, v));
        }
        assert_eq!(rgb_to_hsv(0, 0, 255), (170, 255, 255), "blue is 2/3 of the turn");
    }

    #[test]
    fn blend_interpolates_then_clamps_when_extrapolating() {
        assert_eq!(blend(&[0, 100], &[200, 50], 0.5), vec![100, 75]);
        assert_eq!(blend(&[0, 100], &[200, 50], 2.0), vec![255, 0]);
        assert_eq!(blend(&[10], &[20], 0.0), vec![10]);
    }

    #[test]
    fn a_half_turn_of_hue_swaps_to_the_complement_on_tensors() {
        let (r, g, b) = hue_shifted_f32((1.0, 0.0, 0.0), 0.5);
        assert_eq!((r, g, b), (0.0, 1.0, 1.0));
    }
}
