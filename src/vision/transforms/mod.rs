//! Image transforms (`torchvision.transforms`): [`ToTensor`], [`Normalize`], [`Compose`],
//! [`Resize`], [`CenterCrop`], [`RandomCrop`], [`RandomResizedCrop`],
//! [`RandomHorizontalFlip`], [`ColorJitter`] and [`Lambda`]; the functions they are made of
//! in [`functional`].
//!
//! Transforms take and return an [`Image`]: [`Pixels`](super::Pixels) (bytes, as datasets store
//! them) or a tensor. Random transforms draw from the per-item generator
//! ([`kiln::data::with_item_generator`](crate::data::with_item_generator)), which a
//! `DataLoader` seeds per batch, so augmentation is reproducible for a given loader seed.
//!
//! `Compose((ToTensor, Normalize::new(..)))` on pixels runs as one table lookup per pixel
//! (the table holds exactly what `ToTensor` then `Normalize` compute, in f32), so data loading
//! stays cheap.

mod color_jitter;
mod compose;
mod crop;
mod enhance;
mod flip;
pub mod functional;
mod normalize;
mod resample;
mod resize;
mod resized_crop;

pub use color_jitter::ColorJitter;
pub use compose::{Compose, IntoTransforms};
pub use crop::{CenterCrop, RandomCrop};
pub use flip::RandomHorizontalFlip;
pub use normalize::Normalize;
pub use resize::Resize;
pub use resized_crop::RandomResizedCrop;

use super::Image;
use crate::error::{bail, Result};
use crate::DType;
use std::any::Any;

/// An image transform. Errors (an image of the wrong kind or size) are returned, and a dataset
/// that applies the transform turns them into a panic naming the item.
pub trait Transform: Any + Send + Sync {
    /// The transformed image. `#[track_caller]` in every implementation, so an error names
    /// the line that applied the transform.
    #[track_caller]
    fn apply(&self, image: Image) -> Result<Image>;
}

/// Converts pixels to an f32 tensor `[C, H, W]` of `byte / 255` (`transforms.ToTensor`).
/// A u8 tensor is converted the same way and a float tensor passes through unchanged.
#[derive(Clone, Copy, Debug, Default)]
pub struct ToTensor;

impl Transform for ToTensor {
    #[track_caller]
    fn apply(&self, image: Image) -> Result<Image> {
        Ok(Image::Tensor(match image {
            Image::Pixels(p) => p.to_tensor(),
            Image::Tensor(t) if t.dtype() == DType::U8 => t.try_to_dtype(DType::F32)?.try_div(255.0f32)?,
            Image::Tensor(t) if t.dtype().is_float() => t,
            Image::Tensor(t) => {
                bail!(
                    "ToTensor",
                    DType,
                    "expected pixels, a uint8 tensor or a float tensor, but got a {} tensor",
                    t.dtype()
                )
            }
        }))
    }
}

/// A transform from a function (`transforms.Lambda`).
pub struct Lambda<F>(pub F);

impl<F> Lambda<F>
where
    F: Fn(Image) -> Result<Image> + Send + Sync + 'static,
{
    /// Wraps `f`.
    pub fn new(f: F) -> Lambda<F> {
        Lambda(f)
    }
}

impl<F> Transform for Lambda<F>
where
    F: Fn(Image) -> Result<Image> + Send + Sync + 'static,
{
    fn apply(&self, image: Image) -> Result<Image> {
        (self.0)(image)
    }
}

impl<T: Transform + ?Sized> Transform for Box<T> {
    fn apply(&self, image: Image) -> Result<Image> {
        (**self).apply(image)
    }
}

impl<T: Transform + ?Sized> Transform for std::sync::Arc<T> {
    fn apply(&self, image: Image) -> Result<Image> {
        (**self).apply(image)
    }
}

/// `transform` as `&dyn Any`, to recognize the transforms `Compose` fuses.
fn as_any(transform: &dyn Transform) -> &dyn Any {
    transform
}

/// A uniform integer in `0..n` (`n >= 1`) from the item generator, by 64-bit multiply–shift.
fn draw_below(n: usize) -> usize {
    crate::data::with_item_generator(|g| {
        let w = g.draw(1).words64(0)[0];
        ((w as u128 * n as u128) >> 64) as usize
    })
}

/// A uniform value in `[lo, hi)` from the item generator (53 random bits).
fn draw_uniform(lo: f64, hi: f64) -> f64 {
    let w = crate::data::with_item_generator(|g| g.draw(1).words64(0)[0]);
    lo + (hi - lo) * ((w >> 11) as f64 * (1.0 / (1u64 << 53) as f64))
}
