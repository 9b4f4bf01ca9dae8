//! Crops: [`RandomCrop`] (a random position, after optional zero padding) and
//! [`CenterCrop`].

use super::{draw_below, functional, Transform};
use crate::error::{bail, Result};
use crate::vision::Image;

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
}

impl Transform for RandomCrop {
    #[track_caller]
    fn apply(&self, image: Image) -> Result<Image> {
        let (h, w) = image.size()?;
        let (top, left) = self.position(h, w)?;
        let pad = self.padding as i64;
        functional::crop(image, top as i64 - pad, left as i64 - pad, self.height, self.width)
    }
}

/// Crops the central `height x width` window (`transforms.CenterCrop(size)`), padding with
/// zeros where the image is smaller ([`functional::center_crop`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CenterCrop {
    height: usize,
    width: usize,
}

impl CenterCrop {
    /// A square crop of `size x size`.
    pub fn new(size: usize) -> CenterCrop {
        CenterCrop { height: size, width: size }
    }

    /// A crop of `height x width`.
    pub fn with_size(height: usize, width: usize) -> CenterCrop {
        CenterCrop { height, width }
    }
}

impl Transform for CenterCrop {
    #[track_caller]
    fn apply(&self, image: Image) -> Result<Image> {
        functional::center_crop(image, self.height, self.width)
    }
}
