//! [`ColorJitter`]: random brightness, contrast, saturation and hue, in a random order.

use super::enhance::Adjust;
use super::functional::adjust;
use super::{draw_below, draw_uniform, Transform};
use crate::error::{bail, Result};
use crate::vision::Image;

/// Changes brightness, contrast, saturation and hue by random factors
/// (`transforms.ColorJitter(brightness, contrast, saturation, hue)`): for each item, the four
/// adjustments in a random order (a uniform permutation), each with a factor drawn uniformly
/// from its range; an adjustment left at 0 is skipped. Draws come from the item generator:
/// the permutation first, then the factors in the order brightness, contrast, saturation, hue.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ColorJitter {
    /// The factor ranges of brightness, contrast, saturation and hue (`None`: skipped).
    ranges: [Option<(f64, f64)>; 4],
}

/// The adjustments, in the order of `ColorJitter::ranges`.
const ADJUSTS: [Adjust; 4] = [Adjust::Brightness, Adjust::Contrast, Adjust::Saturation, Adjust::Hue];

impl ColorJitter {
    /// Jitters nothing until the builder methods say how much.
    pub fn new() -> ColorJitter {
        ColorJitter::default()
    }

    /// Brightness factors uniform in `[max(0, 1 − b), 1 + b]` (`brightness=b`).
    #[track_caller]
    pub fn brightness(self, b: f64) -> ColorJitter {
        self.around_one(0, b)
    }

    /// Contrast factors uniform in `[max(0, 1 − c), 1 + c]` (`contrast=c`).
    #[track_caller]
    pub fn contrast(self, c: f64) -> ColorJitter {
        self.around_one(1, c)
    }

    /// Saturation factors uniform in `[max(0, 1 − s), 1 + s]` (`saturation=s`).
    #[track_caller]
    pub fn saturation(self, s: f64) -> ColorJitter {
        self.around_one(2, s)
    }

    /// Hue shifts uniform in `[−h, h]`, `0 <= h <= 0.5` (`hue=h`).
    #[track_caller]
    pub fn hue(self, h: f64) -> ColorJitter {
        match self.try_range(3, -h, h) {
            Ok(j) => j,
            Err(e) => panic!("{e}"),
        }
    }

    /// Factors of adjustment `i` (an index of `ADJUSTS`) within `[lo, hi]`; an error for
    /// `lo > hi` or a factor the adjustment refuses.
    #[track_caller]
    fn try_range(mut self, i: usize, lo: f64, hi: f64) -> Result<ColorJitter> {
        let which = ADJUSTS[i];
        if lo.partial_cmp(&hi).is_none_or(|o| o.is_gt()) {
            bail!("ColorJitter", Value, "expected a range lo <= hi for {}, but got ({lo}, {hi})", which.name());
        }
        which.check(lo)?;
        which.check(hi)?;
        // A range that is the identity alone (b = 0) is skipped, as torchvision skips it.
        let identity = if which == Adjust::Hue { 0.0 } else { 1.0 };
        self.ranges[i] = (lo != identity || hi != identity).then_some((lo, hi));
        Ok(self)
    }

    /// Factors in `[max(0, 1 − v), 1 + v]` for adjustment `i`; panics for a negative `v`.
    #[track_caller]
    fn around_one(self, i: usize, v: f64) -> ColorJitter {
        if v.is_nan() || v < 0.0 {
            panic!("ColorJitter: {} must be non-negative, but got {v}", ["brightness", "contrast", "saturation"][i]);
        }
        match self.try_range(i, (1.0 - v).max(0.0), 1.0 + v) {
            Ok(j) => j,
            Err(e) => panic!("{e}"),
        }
    }
}

impl Transform for ColorJitter {
    #[track_caller]
    fn apply(&self, mut image: Image) -> Result<Image> {
        let mut order = [0usize, 1, 2, 3];
        for i in (1..4).rev() {
            order.swap(i, draw_below(i + 1));
        }
        let factors = self.ranges.map(|r| r.map(|(lo, hi)| draw_uniform(lo, hi)));
        for i in order {
            if let Some(f) = factors[i] {
                image = adjust(ADJUSTS[i], image, f)?;
            }
        }
        Ok(image)
    }
}
