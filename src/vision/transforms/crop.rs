//! [`RandomCrop`]: a crop at a random position, after optional zero padding.

use super::{draw_below, Transform};
use crate::error::{bail, Result};
use crate::vision::{Image, Pixels};

/// Pads every side with `padding` zeros, then crops a `height x width` window at a random
/// position (`transforms.RandomCrop(size, padding)`). The position is drawn from the item
/// generator: top first, then left, each uniform over the valid range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RandomCrop {
    height: usize,
    width: usize,
    padding: usize,
}

impl RandomCrop {
    /// A square crop of `size x size`, no padding.
    pub fn new(size: usize) -> RandomCrop {
        RandomCrop { height: size, width: size, padding: 0 }
    }

    /// A crop of `height x width`, no padding.
    pub fn with_size(height: usize, width: usize) -> RandomCrop {
        RandomCrop { height, width, padding: 0 }
    }

    /// Zero padding added to each side before cropping (`padding=`).
    pub fn padding(mut self, padding: usize) -> RandomCrop {
        self.padding = padding;
        self
    }

    /// `(top, left)` of the window in the padded `h x w` image; an error if it does not fit.
    #[track_caller]
    fn position(&self, h: usize, w: usize) -> Result<(usize, usize)> {
        let (ph, pw) = (h + 2 * self.padding, w + 2 * self.padding);
        if self.height > ph || self.width > pw {
            bail!(
                "RandomCrop",
                Shape,
                "required crop size ({}, {}) is larger than the input image size ({h}, {w}) padded by {} to ({ph}, {pw})",
                self.height,
                self.width,
                self.padding
            );
        }
        let top = draw_below(ph - self.height + 1);
        let left = draw_below(pw - self.width + 1);
        Ok((top, left))
    }

    /// The crop of pixels: each output byte is the padded image's byte, or 0 in the padding.
    fn crop_pixels(&self, p: &Pixels, top: usize, left: usize) -> Result<Pixels> {
        let (h, w, pad) = (p.height(), p.width(), self.padding);
        let mut out = vec![0u8; p.channels() * self.height * self.width];
        for c in 0..p.channels() {
            let src = &p.data()[c * h * w..(c + 1) * h * w];
            for y in 0..self.height {
                // Row y of the window is row top + y of the padded image, row top + y - pad of
                // the source; rows and columns outside the source stay 0.
                let Some(sy) = (top + y).checked_sub(pad).filter(|&sy| sy < h) else { continue };
                let row = &mut out[(c * self.height + y) * self.width..][..self.width];
                for (x, o) in row.iter_mut().enumerate() {
                    if let Some(sx) = (left + x).checked_sub(pad).filter(|&sx| sx < w) {
                        *o = src[sy * w + sx];
                    }
                }
            }
        }
        Pixels::new(out, p.channels(), self.height, self.width)
    }
}

impl Transform for RandomCrop {
    #[track_caller]
    fn apply(&self, image: Image) -> Result<Image> {
        let (h, w) = image.size()?;
        let (top, left) = self.position(h, w)?;
        match image {
            Image::Pixels(p) => Ok(Image::Pixels(self.crop_pixels(&p, top, left)?)),
            Image::Tensor(t) => {
                let nd = t.dim();
                let padded = if self.padding == 0 {
                    t
                } else {
                    let mut shape = t.shape().to_vec();
                    shape[nd - 2] += 2 * self.padding;
                    shape[nd - 1] += 2 * self.padding;
                    let padded = t.new_zeros(&shape);
                    let pad = self.padding as i64;
                    padded.try_narrow(-2, pad, h)?.try_narrow(-1, pad, w)?.try_copy_(&t)?;
                    padded
                };
                let out = padded.try_narrow(-2, top as i64, self.height)?.try_narrow(-1, left as i64, self.width)?;
                Ok(Image::Tensor(out.contiguous()))
            }
        }
    }
}
