//! Antialiased bilinear resampling, as Pillow's `Image.resize(size, BILINEAR)` computes it
//! (and as `F.interpolate(mode="bilinear", antialias=True)` computes it on float tensors):
//! one triangle filter per output pixel, widened by the scale factor when shrinking, its
//! weights normalized to sum 1; rows first, then columns.
//!
//! Pixels go through Pillow's 8-bit path bit for bit: weights rounded to 22-bit fixed point,
//! each pass accumulating in `i32` from a half and clipping to `0..=255`, the horizontal pass
//! first (over the rows the vertical pass reads) and a pass skipped when its size is
//! unchanged. Float tensors are multiplied by the two weight matrices
//! (`Wy · X · Wxᵀ`), which keeps them differentiable.

use crate::error::Result;
use crate::vision::Pixels;
use crate::Tensor;

/// Fractional bits of Pillow's fixed-point weights (`PRECISION_BITS`: 32 − 8 − 2).
const PRECISION_BITS: u32 = 22;

/// The filter of one output position: the first input it reads and its weights.
struct Taps {
    first: usize,
    weights: Vec<f64>,
}

/// The triangle filter (`bilinear_filter`), support 1.
fn triangle(x: f64) -> f64 {
    let x = x.abs();
    if x < 1.0 {
        1.0 - x
    } else {
        0.0
    }
}

/// The filters that take `in_size` samples to `out_size` (`precompute_coeffs` over the
/// whole input).
fn taps(in_size: usize, out_size: usize) -> Vec<Taps> {
    let scale = in_size as f32 as f64 / out_size as f64;
    let filter_scale = scale.max(1.0);
    let support = filter_scale;
    (0..out_size)
        .map(|o| {
            let center = (o as f64 + 0.5) * scale;
            // Pillow rounds the bounds by adding a half and truncating toward zero.
            let first = ((center - support + 0.5) as i64).max(0) as usize;
            let end = ((center + support + 0.5) as i64).min(in_size as i64) as usize;
            let mut weights: Vec<f64> =
                (first..end).map(|x| triangle((x as f64 - center + 0.5) / filter_scale)).collect();
            let total: f64 = weights.iter().sum();
            if total != 0.0 {
                weights.iter_mut().for_each(|w| *w /= total);
            }
            Taps { first, weights }
        })
        .collect()
}

/// A weight as Pillow's 8-bit passes use it: rounded half away from zero to 22 bits.
fn fixed(w: f64) -> i32 {
    let scaled = w * (1 << PRECISION_BITS) as f64;
    (if scaled < 0.0 { scaled - 0.5 } else { scaled + 0.5 }) as i32
}

/// A fixed-point sum as a byte (`clip8`: the integer part, clamped).
fn clip8(sum: i32) -> u8 {
    (sum >> PRECISION_BITS).clamp(0, 255) as u8
}

/// One 8-bit pass: `out[o] = clip8(½ + Σ in[first + k] · w[k])` for the samples of `src`
/// that lie `stride` apart, starting at `start`.
fn pass(src: &[u8], start: usize, stride: usize, taps: &[(usize, Vec<i32>)], out: &mut Vec<u8>) {
    for (first, weights) in taps {
        let mut sum = 1i32 << (PRECISION_BITS - 1);
        for (k, w) in weights.iter().enumerate() {
            sum += src[start + (first + k) * stride] as i32 * w;
        }
        out.push(clip8(sum));
    }
}

/// `pixels` resized to `height x width` with Pillow's antialiased bilinear filter, every
/// channel on its own (Pillow's `L` and `RGB` images; an `RGBA` image there is resized with
/// its colours premultiplied by alpha, which this does not do).
pub(crate) fn resize_pixels(pixels: &Pixels, height: usize, width: usize) -> Result<Pixels> {
    let (c, h, w) = (pixels.channels(), pixels.height(), pixels.width());
    let fixed_taps = |t: Vec<Taps>| -> Vec<(usize, Vec<i32>)> {
        t.into_iter().map(|t| (t.first, t.weights.into_iter().map(fixed).collect())).collect()
    };
    let mut vertical = fixed_taps(taps(h, height));
    // The rows the vertical pass reads, the only ones the horizontal pass computes; its taps
    // then count rows from the first of them.
    let horizontal = (width != w).then(|| fixed_taps(taps(w, width)));
    let (row0, row_end) = match (&horizontal, vertical.first(), vertical.last()) {
        (Some(_), Some(first), Some(last)) => (first.0, last.0 + last.1.len()),
        _ => (0, h),
    };
    vertical.iter_mut().for_each(|(first, _)| *first -= row0);
    let mut data = Vec::with_capacity(c * height * width);
    for plane in pixels.data().chunks_exact(h * w).take(c) {
        let rows: std::borrow::Cow<[u8]> = match &horizontal {
            Some(taps) => {
                let mut rows = Vec::with_capacity((row_end - row0) * width);
                for y in row0..row_end {
                    pass(plane, y * w, 1, taps, &mut rows);
                }
                rows.into()
            }
            None => plane.into(),
        };
        if height != h {
            let mut cols = vec![Vec::with_capacity(height); width];
            for (x, col) in cols.iter_mut().enumerate() {
                pass(&rows, x, width, &vertical, col);
            }
            data.extend((0..height).flat_map(|y| cols.iter().map(move |col| col[y])));
        } else {
            data.extend_from_slice(&rows[..h * width]);
        }
    }
    Pixels::new(data, c, height, width)
}

/// The `out_size x in_size` matrix of the filters taking `in_size` samples to `out_size`, in
/// `like`'s dtype and device.
fn weight_matrix(in_size: usize, out_size: usize, like: &Tensor) -> Result<Tensor> {
    let mut m = vec![0.0f64; out_size * in_size];
    for (o, t) in taps(in_size, out_size).into_iter().enumerate() {
        m[o * in_size + t.first..][..t.weights.len()].copy_from_slice(&t.weights);
    }
    Tensor::from_vec(m, [out_size, in_size]).try_to_dtype(like.dtype())?.try_to(&like.device())
}

/// A float tensor `[..., H, W]` resized to `[..., height, width]` with the antialiased
/// bilinear filter (`F.interpolate(mode="bilinear", antialias=True)`); differentiable.
#[track_caller]
pub(crate) fn resize_tensor(t: &Tensor, height: usize, width: usize) -> Result<Tensor> {
    let (h, w) = (t.shape()[t.dim() - 2], t.shape()[t.dim() - 1]);
    let mut out = t.clone();
    if height != h {
        out = weight_matrix(h, height, t)?.try_matmul(&out)?;
    }
    if width != w {
        out = out.try_matmul(&weight_matrix(w, width, t)?.t())?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filters_of_a_size_kept_are_the_identity() {
        for (o, t) in taps(5, 5).iter().enumerate() {
            assert_eq!(t.first, o);
            assert_eq!(t.weights[0], 1.0);
            assert!(t.weights[1..].iter().all(|&w| w == 0.0));
        }
    }

    #[test]
    fn halving_averages_pairs_with_the_widened_filter() {
        // Scale 2: support 2, so each output reads 4 inputs with weights ∝ (1/4, 3/4, 3/4, 1/4)
        // inside the image, fewer at the borders.
        let t = taps(8, 4);
        assert_eq!((t[1].first, t[1].weights.clone()), (1, vec![0.125, 0.375, 0.375, 0.125]));
        assert_eq!(t[0].first, 0);
        let want = [3.0 / 7.0, 3.0 / 7.0, 1.0 / 7.0];
        assert_eq!(t[0].weights.len(), 3, "the first output's taps cut at the border");
        assert!(t[0].weights.iter().zip(want).all(|(w, v)| (w - v).abs() < 1e-15), "{:?}", t[0].weights);
    }

    #[test]
    fn a_flat_image_stays_flat_at_any_size() {
        let p = Pixels::new(vec![77; 2 * 5 * 7], 2, 5, 7).unwrap();
        for (h, w) in [(3, 4), (10, 14), (5, 2), (1, 1), (9, 7)] {
            let r = resize_pixels(&p, h, w).unwrap();
            assert_eq!(r.shape(), [2, h, w]);
            assert!(r.data().iter().all(|&v| v == 77), "{h}x{w}: {:?}", r.data());
        }
    }
}
