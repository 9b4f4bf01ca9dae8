//! [`MNIST`]: the MNIST digits from IDX files, and the subset kiln ships ([`default_root`]).

use super::idx::{read_idx, IdxArray};
use super::{image_item, Split};
use crate::data::{check_index, Dataset};
use crate::error::{AtCaller, Error, ErrorKind, Result};
use crate::vision::transforms::Transform;
use crate::Tensor;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Rows and columns of an MNIST image.
const SIDE: usize = 28;

/// The directory of the MNIST subset embedded in kiln's source tree (`data/mnist`: 8,000
/// training and 2,000 test images of the real MNIST digits; see its README for provenance).
/// Resolved from the crate's manifest directory, so it works from any working directory of a
/// program built from this source tree.
pub fn default_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data").join("mnist")
}

/// The MNIST handwritten digits (`torchvision.datasets.MNIST`, without downloading): items are
/// `(image, label)` with the image a `[1, 28, 28]` f32 tensor in `[0, 1]` (after the default
/// `ToTensor`, or whatever [`transform`](MNIST::transform) makes of the pixels) and the label
/// an `i64` in `0..10`.
///
/// The images are kept once, as bytes, and shared by clones (a clone with another transform
/// costs nothing); the transform runs per item.
#[derive(Clone)]
pub struct MNIST {
    data: Arc<MnistData>,
    transform: Option<Arc<dyn Transform>>,
}

struct MnistData {
    images: Vec<u8>,
    labels: Vec<u8>,
}

/// The error for a problem with the contents of `path`.
#[track_caller]
fn bad(path: &Path, message: impl std::fmt::Display) -> Error {
    Error::new("MNIST", ErrorKind::Value, format!("{}: {message}", path.display()))
}

/// The path of `name` or `name.gz` in `root` or in `root/MNIST/raw` (torchvision's layout).
#[track_caller]
fn find(root: &Path, name: &str) -> Result<PathBuf> {
    let dirs = [root.to_path_buf(), root.join("MNIST").join("raw")];
    for dir in &dirs {
        for file in [name.to_string(), format!("{name}.gz")] {
            let p = dir.join(file);
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    Err(Error::new(
        "MNIST",
        ErrorKind::Io,
        format!("cannot find {name} or {name}.gz in {} or {}", dirs[0].display(), dirs[1].display()),
    ))
}

impl MNIST {
    /// Reads the `split` from `root`: `train-images-idx3-ubyte` and `train-labels-idx1-ubyte`
    /// (or `t10k-…` for [`Split::Test`]), each plain or `.gz`, directly in `root` or in
    /// `root/MNIST/raw`. An error names the file and what is wrong with it.
    #[track_caller]
    pub fn new(root: impl AsRef<Path>, split: Split) -> Result<MNIST> {
        let root = root.as_ref();
        let prefix = match split {
            Split::Train => "train",
            Split::Test => "t10k",
        };
        let image_path = find(root, &format!("{prefix}-images-idx3-ubyte"))?;
        let label_path = find(root, &format!("{prefix}-labels-idx1-ubyte"))?;
        MNIST::from_files(&image_path, &label_path)
    }

    /// The embedded subset in [`default_root`]: 8,000 training or 2,000 test images.
    #[track_caller]
    pub fn embedded(split: Split) -> Result<MNIST> {
        MNIST::new(default_root(), split)
    }

    /// Reads an images file and a labels file given by path (plain or gzipped IDX).
    #[track_caller]
    pub fn from_files(images: impl AsRef<Path>, labels: impl AsRef<Path>) -> Result<MNIST> {
        let (image_path, label_path) = (images.as_ref(), labels.as_ref());
        let images = read_idx(image_path).map_err(relabel).at_caller()?;
        let labels = read_idx(label_path).map_err(relabel).at_caller()?;
        MNIST::from_idx(images, image_path, labels, label_path)
    }

    /// Checks the two arrays against each other and MNIST's format.
    #[track_caller]
    fn from_idx(images: IdxArray, image_path: &Path, labels: IdxArray, label_path: &Path) -> Result<MNIST> {
        if images.dims.len() != 3 {
            return Err(bad(
                image_path,
                format!(
                    "expected images of 3 dims (count, rows, cols), but the file has {} dims {:?}",
                    images.dims.len(),
                    images.dims
                ),
            ));
        }
        if images.dims[1..] != [SIDE, SIDE] {
            return Err(bad(
                image_path,
                format!("expected {SIDE}x{SIDE} images, but they are {}x{}", images.dims[1], images.dims[2]),
            ));
        }
        if labels.dims.len() != 1 {
            return Err(bad(
                label_path,
                format!(
                    "expected labels of 1 dim (count), but the file has {} dims {:?}",
                    labels.dims.len(),
                    labels.dims
                ),
            ));
        }
        if images.dims[0] != labels.dims[0] {
            return Err(bad(
                label_path,
                format!(
                    "holds {} labels, but {} holds {} images",
                    labels.dims[0],
                    image_path.display(),
                    images.dims[0]
                ),
            ));
        }
        if let Some((i, &l)) = labels.data.iter().enumerate().find(|(_, &l)| l > 9) {
            return Err(bad(label_path, format!("label {l} of item {i} is not a digit (0-9)")));
        }
        Ok(MNIST { data: Arc::new(MnistData { images: images.data, labels: labels.data }), transform: None })
    }

    /// The same images with `transform` applied to each item's pixels (torchvision's
    /// `transform=`), e.g. `Compose::new((ToTensor, Normalize::new(&[0.1307], &[0.3081])))`.
    pub fn transform(self, transform: impl Transform) -> MNIST {
        MNIST { data: self.data, transform: Some(Arc::new(transform)) }
    }

    /// The same images without a transform (items are `ToTensor` of the pixels).
    pub fn without_transform(self) -> MNIST {
        MNIST { data: self.data, transform: None }
    }

    /// The bytes of image `index` (784, row-major).
    pub fn image_bytes(&self, index: usize) -> &[u8] {
        &self.data.images[index * SIDE * SIDE..(index + 1) * SIDE * SIDE]
    }

    /// The label of item `index`.
    pub fn label(&self, index: usize) -> u8 {
        self.data.labels[index]
    }

    /// All images as a u8 tensor `[N, 28, 28]` (torchvision's `dataset.data`).
    pub fn data(&self) -> Tensor {
        Tensor::from_slice(&self.data.images).reshape([self.len() as i64, SIDE as i64, SIDE as i64])
    }

    /// All labels as an i64 tensor `[N]` (torchvision's `dataset.targets`).
    pub fn targets(&self) -> Tensor {
        Tensor::from_vec(self.data.labels.iter().map(|&l| l as i64).collect::<Vec<i64>>(), [self.len()])
    }

    /// The class names, `"0 - zero"` to `"9 - nine"` (torchvision's `classes`).
    pub fn classes() -> [&'static str; 10] {
        [
            "0 - zero",
            "1 - one",
            "2 - two",
            "3 - three",
            "4 - four",
            "5 - five",
            "6 - six",
            "7 - seven",
            "8 - eight",
            "9 - nine",
        ]
    }
}

/// Renames a `read_idx` error as this dataset's.
fn relabel(mut e: Error) -> Error {
    e.op = "MNIST";
    e
}

impl Dataset for MNIST {
    type Item = (Tensor, i64);

    fn len(&self) -> usize {
        self.data.labels.len()
    }

    fn get(&self, index: usize) -> (Tensor, i64) {
        check_index("MNIST", index, self.len());
        let image = image_item("MNIST", index, self.image_bytes(index), [1, SIDE, SIDE], self.transform.as_ref());
        (image, self.label(index) as i64)
    }
}
