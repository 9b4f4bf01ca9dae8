//! Image datasets read from local files (`torchvision.datasets`): [`MNIST`] (IDX files, plain
//! or gzipped), [`CIFAR10`] (the binary version) and [`ImageFolder`] (a folder per class).
//! Nothing is downloaded.
//!
//! Constructors read and check the whole dataset and return an error naming the file and the
//! problem (missing, bad magic number, wrong dims, counts that disagree, truncated data, a bad
//! gzip stream, a label out of range); they never panic on bad files. Errors from the file
//! system have [`ErrorKind::Io`](crate::ErrorKind::Io), malformed contents
//! [`ErrorKind::Value`](crate::ErrorKind::Value).

mod cifar10;
pub mod idx;
mod image_folder;
pub mod mnist;

pub use cifar10::CIFAR10;
pub use image_folder::ImageFolder;
pub use mnist::MNIST;

use super::transforms::Transform;
use super::{Image, Pixels};
use crate::Tensor;
use std::sync::Arc;

/// Which part of a dataset to load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Split {
    /// The training images (`train=True`).
    Train,
    /// The test images (`train=False`).
    Test,
}

/// An item's image as a tensor: `transform` applied to its bytes (then `ToTensor` if it left
/// pixels), or `ToTensor` alone. Panics with the dataset's name and the item on a transform
/// error (`Dataset::get` is infallible), at the line that asked for the item.
#[track_caller]
pub(crate) fn image_item(
    dataset: &str,
    index: usize,
    bytes: &[u8],
    shape: [usize; 3],
    transform: Option<&Arc<dyn Transform>>,
) -> Tensor {
    let pixels =
        Pixels::new(bytes.to_vec(), shape[0], shape[1], shape[2]).expect("stored images have their shape's size");
    transform_item(dataset, index, pixels, transform)
}

/// An item's pixels as a tensor: `transform` applied (then `ToTensor` if it left pixels), or
/// `ToTensor` alone; panics as [`image_item`] does.
#[track_caller]
pub(crate) fn transform_item(
    dataset: &str,
    index: usize,
    pixels: Pixels,
    transform: Option<&Arc<dyn Transform>>,
) -> Tensor {
    match transform {
        None => pixels.to_tensor(),
        Some(t) => match t.apply(Image::Pixels(pixels)) {
            Ok(image) => image.into_tensor(),
            Err(e) => panic!("{dataset}: the transform failed on item {index}: {e}"),
        },
    }
}
