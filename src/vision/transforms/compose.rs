//! [`Compose`]: transforms applied in sequence, with `ToTensor` + `Normalize` fused on pixels.

use super::{as_any, Normalize, ToTensor, Transform};
use crate::error::Result;
use crate::vision::Image;

/// Transforms applied one after another (`transforms.Compose`):
/// `Compose::new((RandomCrop::new(32).padding(4), ToTensor, Normalize::new(&m, &s)))`.
///
/// On pixels, a `ToTensor` followed by any number of `Normalize` runs as one lookup table per
/// channel, holding exactly the f32 values the separate steps would compute.
pub struct Compose {
    steps: Vec<Box<dyn Transform>>,
}

/// What [`Compose::new`] accepts: a tuple of 1 to 8 transforms, or a `Vec<Box<dyn Transform>>`.
pub trait IntoTransforms {
    /// The transforms, boxed, in order.
    fn into_transforms(self) -> Vec<Box<dyn Transform>>;
}

impl IntoTransforms for Vec<Box<dyn Transform>> {
    fn into_transforms(self) -> Vec<Box<dyn Transform>> {
        self
    }
}

macro_rules! tuple_transforms {
    ($(($($t:ident $i:tt),+))*) => {$(
        impl<$($t: Transform),+> IntoTransforms for ($($t,)+) {
            fn into_transforms(self) -> Vec<Box<dyn Transform>> {
                vec![$(Box::new(self.$i)),+]
            }
        }
    )*};
}

tuple_transforms! {
    (A 0)
    (A 0, B 1)
    (A 0, B 1, C 2)
    (A 0, B 1, C 2, D 3)
    (A 0, B 1, C 2, D 3, E 4)
    (A 0, B 1, C 2, D 3, E 4, F 5)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7)
}

impl Compose {
    /// The transforms in `steps`, applied in order.
    pub fn new(steps: impl IntoTransforms) -> Compose {
        Compose { steps: steps.into_transforms() }
    }

    /// Appends a transform.
    pub fn then(mut self, step: impl Transform) -> Compose {
        self.steps.push(Box::new(step));
        self
    }

    /// The number of transforms.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Whether there are no transforms.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

impl Transform for Compose {
    #[track_caller]
    fn apply(&self, mut image: Image) -> Result<Image> {
        let mut i = 0;
        while i < self.steps.len() {
            if let Image::Pixels(pixels) = &image {
                if as_any(&*self.steps[i]).is::<ToTensor>() {
                    let norms: Vec<&Normalize> =
                        self.steps[i + 1..].iter().map_while(|s| as_any(&**s).downcast_ref::<Normalize>()).collect();
                    if !norms.is_empty() {
                        let luts = Normalize::fused_tables(&norms, pixels.channels())?;
                        image = Image::Tensor(pixels.map_to_tensor(&luts));
                        i += 1 + norms.len();
                        continue;
                    }
                }
            }
            image = self.steps[i].apply(image)?;
            i += 1;
        }
        Ok(image)
    }
}
