//! [`Normalize`]: `(x - mean) / std` per channel.

use super::Transform;
use crate::error::{bail, Result};
use crate::vision::Image;
use crate::Tensor;

/// Subtracts `mean[c]` and divides by `std[c]` in every channel `c` of a float tensor image
/// `[..., C, H, W]` (`transforms.Normalize`); one value stands for every channel. The values are
/// converted to the image's dtype first, as torchvision does.
#[derive(Clone, Debug, PartialEq)]
pub struct Normalize {
    mean: Vec<f64>,
    std: Vec<f64>,
}

impl Normalize {
    /// `Normalize::new(&[0.1307], &[0.3081])`. Panics for empty lists, lists of different
    /// lengths, or a zero standard deviation.
    #[track_caller]
    pub fn new(mean: &[f64], std: &[f64]) -> Normalize {
        match Normalize::try_new(mean, std) {
            Ok(n) => n,
            Err(e) => panic!("{e}"),
        }
    }

    /// [`Normalize::new`] returning an error instead of panicking.
    #[track_caller]
    pub fn try_new(mean: &[f64], std: &[f64]) -> Result<Normalize> {
        if mean.is_empty() || mean.len() != std.len() {
            bail!(
                "Normalize",
                Value,
                "expected mean and std of the same non-zero length, but got {} and {} values",
                mean.len(),
                std.len()
            );
        }
        if std.contains(&0.0) {
            bail!(
                "Normalize",
                Value,
                "std evaluated to zero after conversion, leading to division by zero (std = {std:?})"
            );
        }
        Ok(Normalize { mean: mean.to_vec(), std: std.to_vec() })
    }

    /// The means.
    pub fn mean(&self) -> &[f64] {
        &self.mean
    }

    /// The standard deviations.
    pub fn std(&self) -> &[f64] {
        &self.std
    }

    /// An error unless the values fit `channels` channels (one value, or one per channel).
    #[track_caller]
    fn check_channels(&self, channels: usize) -> Result<()> {
        if self.mean.len() != 1 && self.mean.len() != channels {
            bail!("Normalize", Shape, "{} mean/std values do not fit an image of {channels} channels", self.mean.len());
        }
        Ok(())
    }

    /// Lookup tables (one per channel) holding, for each byte `k`, the f32 result of `ToTensor`
    /// (`k / 255`) followed by `norms` in order.
    #[track_caller]
    pub(crate) fn fused_tables(norms: &[&Normalize], channels: usize) -> Result<Vec<[f32; 256]>> {
        for n in norms {
            n.check_channels(channels)?;
        }
        Ok((0..channels.max(1))
            .map(|c| {
                std::array::from_fn(|k| {
                    let mut x = k as f32 / 255.0;
                    for n in norms {
                        let pick = |v: &[f64]| v[if v.len() == 1 { 0 } else { c }] as f32;
                        x = (x - pick(&n.mean)) / pick(&n.std);
                    }
                    x
                })
            })
            .collect())
    }
}

impl Transform for Normalize {
    #[track_caller]
    fn apply(&self, image: Image) -> Result<Image> {
        let t = match image {
            Image::Tensor(t) => t,
            Image::Pixels(_) => {
                bail!("Normalize", DType, "expected a tensor image, but got pixels: put ToTensor before Normalize")
            }
        };
        if !t.dtype().is_float() {
            bail!("Normalize", DType, "expected a float tensor image, but got {}", t.dtype());
        }
        if t.dim() < 3 {
            bail!("Normalize", Shape, "expected a tensor image of shape [..., C, H, W], but got shape {:?}", t.shape());
        }
        let channels = t.shape()[t.dim() - 3];
        self.check_channels(channels)?;
        let c = self.mean.len();
        let mean = Tensor::try_from_vec(self.mean.clone(), [c, 1, 1])?.try_to_dtype(t.dtype())?;
        let std = Tensor::try_from_vec(self.std.clone(), [c, 1, 1])?.try_to_dtype(t.dtype())?;
        Ok(Image::Tensor(t.try_sub(&mean)?.try_div(&std)?))
    }
}
