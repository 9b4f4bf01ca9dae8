//! [`RandomHorizontalFlip`]: a left–right mirror with probability `p`.

use super::Transform;
use crate::error::{bail, Result};
use crate::vision::{Image, Pixels};
use crate::Tensor;

/// Mirrors the image left to right with probability `p` (`transforms.RandomHorizontalFlip(p)`),
/// deciding with one draw from the item generator (a 32-bit word below `p * 2^32`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RandomHorizontalFlip {
    p: f64,
}

impl RandomHorizontalFlip {
    /// Flips with probability `p`; panics unless `0 <= p <= 1`.
    #[track_caller]
    pub fn new(p: f64) -> RandomHorizontalFlip {
        match RandomHorizontalFlip::try_new(p) {
            Ok(f) => f,
            Err(e) => panic!("{e}"),
        }
    }

    /// [`RandomHorizontalFlip::new`] returning an error for `p` outside `[0, 1]`.
    #[track_caller]
    pub fn try_new(p: f64) -> Result<RandomHorizontalFlip> {
        if !(0.0..=1.0).contains(&p) {
            bail!("RandomHorizontalFlip", Value, "expected a probability in [0, 1], but got p = {p}");
        }
        Ok(RandomHorizontalFlip { p })
    }

    /// The probability of a flip.
    pub fn p(&self) -> f64 {
        self.p
    }
}

impl Default for RandomHorizontalFlip {
    /// `p = 0.5`, torchvision's default.
    fn default() -> Self {
        RandomHorizontalFlip { p: 0.5 }
    }
}

impl Transform for RandomHorizontalFlip {
    #[track_caller]
    fn apply(&self, image: Image) -> Result<Image> {
        let (_, w) = image.size()?;
        let word = crate::data::with_item_generator(|g| g.draw(1).words32(0)[0]);
        if (word as f64) >= self.p * 4_294_967_296.0 {
            return Ok(image);
        }
        Ok(match image {
            Image::Pixels(p) => {
                let mut data = p.data().to_vec();
                if w > 0 {
                    for row in data.chunks_exact_mut(w) {
                        row.reverse();
                    }
                }
                Image::Pixels(Pixels::new(data, p.channels(), p.height(), p.width())?)
            }
            Image::Tensor(t) => {
                let reversed = Tensor::from_vec((0..w as i64).rev().collect::<Vec<i64>>(), [w]);
                Image::Tensor(t.try_index_select(-1, &reversed)?)
            }
        })
    }
}
