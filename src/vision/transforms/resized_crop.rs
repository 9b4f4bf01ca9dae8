//! [`RandomResizedCrop`]: a crop of random area and aspect ratio, resized to a fixed size.

use super::functional::{resized_crop, Size};
use super::{draw_below, draw_uniform, Transform};
use crate::error::{bail, Result};
use crate::vision::Image;

/// Crops a random window and resizes it to `height x width`
/// (`transforms.RandomResizedCrop(size, scale, ratio)`), the usual ImageNet training
/// augmentation. Up to 10 times a window is drawn — its area a uniform fraction in `scale`
/// of the image's, the log of its aspect ratio (width / height) uniform in `log(ratio)`,
/// its sides `round(√(area·ratio))` and `round(√(area / ratio))` — until one fits, then its
/// top and left uniformly; otherwise the central crop with the ratio clamped into `ratio`
/// (torchvision's `get_params`). Draws come from the item generator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RandomResizedCrop {
    height: usize,
    width: usize,
    scale: (f64, f64),
    ratio: (f64, f64),
}

impl RandomResizedCrop {
    /// Output `size x size`, `scale = (0.08, 1)`, `ratio = (3/4, 4/3)` (torchvision's defaults).
    pub fn new(size: usize) -> RandomResizedCrop {
        RandomResizedCrop::with_size(size, size)
    }

    /// Output `height x width`, default scale and ratio.
    pub fn with_size(height: usize, width: usize) -> RandomResizedCrop {
        RandomResizedCrop { height, width, scale: (0.08, 1.0), ratio: (3.0 / 4.0, 4.0 / 3.0) }
    }

    /// The range of the window's area as a fraction of the image's (`scale=`).
    pub fn scale(mut self, lo: f64, hi: f64) -> RandomResizedCrop {
        self.scale = (lo, hi);
        self
    }

    /// The range of the window's aspect ratio, width over height (`ratio=`).
    pub fn ratio(mut self, lo: f64, hi: f64) -> RandomResizedCrop {
        self.ratio = (lo, hi);
        self
    }

    /// The window `(top, left, height, width)` for an `h x w` image.
    #[track_caller]
    pub fn params(&self, h: usize, w: usize) -> Result<(usize, usize, usize, usize)> {
        let ((s0, s1), (r0, r1)) = (self.scale, self.ratio);
        if !(s0 <= s1 && r0 <= r1 && s0 >= 0.0 && r0 > 0.0) {
            bail!(
                "RandomResizedCrop",
                Value,
                "expected 0 <= scale.0 <= scale.1 and 0 < ratio.0 <= ratio.1, but got scale {:?} and ratio {:?}",
                self.scale,
                self.ratio
            );
        }
        if h == 0 || w == 0 {
            bail!("RandomResizedCrop", Shape, "cannot crop an empty {h}x{w} image");
        }
        let area = (h * w) as f64;
        for _ in 0..10 {
            let target = area * draw_uniform(s0, s1);
            let aspect = draw_uniform(r0.ln(), r1.ln()).exp();
            let cw = (target * aspect).sqrt().round_ties_even() as usize;
            let ch = (target / aspect).sqrt().round_ties_even() as usize;
            if 0 < cw && cw <= w && 0 < ch && ch <= h {
                let top = draw_below(h - ch + 1);
                let left = draw_below(w - cw + 1);
                return Ok((top, left, ch, cw));
            }
        }
        let in_ratio = w as f64 / h as f64;
        let (ch, cw) = if in_ratio < r0 {
            ((w as f64 / r0).round_ties_even() as usize, w)
        } else if in_ratio > r1 {
            (h, (h as f64 * r1).round_ties_even() as usize)
        } else {
            (h, w)
        };
        Ok(((h - ch) / 2, (w - cw) / 2, ch, cw))
    }
}

impl Transform for RandomResizedCrop {
    #[track_caller]
    fn apply(&self, image: Image) -> Result<Image> {
        let (h, w) = image.size()?;
        let (top, left, ch, cw) = self.params(h, w)?;
        resized_crop(image, top as i64, left as i64, ch, cw, Size::Exact(self.height, self.width))
    }
}
