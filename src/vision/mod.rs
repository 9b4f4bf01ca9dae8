//! `kiln::vision`: datasets and transforms for images (torchvision's counterparts).
//!
//! ```no_run
//! use kiln::vision::datasets::{MNIST, Split};
//! use kiln::vision::transforms::{Compose, Normalize, ToTensor};
//! # fn main() -> kiln::Result<()> {
//! let train = MNIST::new("data/mnist", Split::Train)?
//!     .transform(Compose::new((ToTensor, Normalize::new(&[0.1307], &[0.3081]))));
//! let loader = kiln::data::DataLoader::new(train).batch_size(64).shuffle(true);
//! for (images, labels) in &loader { /* [64, 1, 28, 28] f32, [64] i64 */ }
//! # Ok(()) }
//! ```
//!
//! Differences from torchvision: datasets keep their images as bytes in channel-first order
//! ([`Pixels`], the counterpart of a PIL image) and items come out as `(Tensor, i64)`: when a
//! transform leaves pixels (or there is none), [`ToTensor`](transforms::ToTensor) is applied last.
//! `Compose` takes a tuple of transforms (`Compose::new((ToTensor, Normalize::new(..)))`) since
//! a Rust `vec!` cannot mix types. Nothing is downloaded: point the datasets at files you have
//! (kiln ships an 8,000/2,000-image MNIST subset, see [`datasets::mnist::default_root`]).

pub mod datasets;
mod image;
pub mod io;
pub mod transforms;
pub mod utils;

pub use image::{Image, Pixels};
