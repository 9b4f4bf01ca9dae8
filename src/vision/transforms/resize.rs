//! [`Resize`]: an image resized to a size or to a shorter edge.

use super::functional::{resize_with_max, Size};
use super::Transform;
use crate::error::Result;
use crate::vision::Image;

/// Resizes the image with the antialiased bilinear filter (`transforms.Resize(size)`):
/// `Resize::new(256)` brings the shorter edge to 256 keeping the aspect ratio,
/// `Resize::new((32, 48))` gives exactly 32x48 ([`functional::resize`](super::functional::resize)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resize {
    size: Size,
    max_size: Option<usize>,
}

impl Resize {
    /// Resizes to `size`: a `usize` for the shorter edge, `(height, width)` for both.
    pub fn new(size: impl Into<Size>) -> Resize {
        Resize { size: size.into(), max_size: None }
    }

    /// Caps the longer edge of a shorter-edge resize at `max_size` (`max_size=`); applying
    /// it with an exact size, or with `max_size` not above the requested edge, is an error.
    pub fn max_size(mut self, max_size: usize) -> Resize {
        self.max_size = Some(max_size);
        self
    }
}

impl Transform for Resize {
    #[track_caller]
    fn apply(&self, image: Image) -> Result<Image> {
        resize_with_max(image, self.size, self.max_size)
    }
}
