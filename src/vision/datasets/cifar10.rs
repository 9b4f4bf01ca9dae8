//! [`CIFAR10`]: CIFAR-10 from its binary version.

use super::idx::read_maybe_gz;
use super::image_item;
use super::Split;
use crate::data::{check_index, Dataset};
use crate::error::{AtCaller, Error, ErrorKind, Result};
use crate::vision::transforms::Transform;
use crate::Tensor;
use std::panic::Location;
use std::path::Path;
use std::sync::Arc;

/// Bytes of one image (3 channels of 32x32, channel-first).
const IMAGE: usize = 3 * 32 * 32;
/// Bytes of one record: the label, then the image.
const RECORD: usize = 1 + IMAGE;

/// CIFAR-10 (`torchvision.datasets.CIFAR10`, without downloading) from the binary version
/// (`cifar-10-binary.tar.gz`, extracted): `data_batch_1.bin` … `data_batch_5.bin` for training
/// and `test_batch.bin` for testing, each a sequence of 3073-byte records (a label byte, then
/// 1024 red, 1024 green and 1024 blue bytes). Items are `(image, label)`: a `[3, 32, 32]` f32
/// tensor (after the default `ToTensor`, or the [`transform`](CIFAR10::transform)) and an `i64`
/// in `0..10`. The images are kept once as bytes and shared by clones.
#[derive(Clone)]
pub struct CIFAR10 {
    data: Arc<CifarData>,
    transform: Option<Arc<dyn Transform>>,
}

struct CifarData {
    images: Vec<u8>,
    labels: Vec<u8>,
}

impl CIFAR10 {
    /// Reads the training ([`Split::Train`]) or test files from `root`, or from
    /// `root/cifar-10-batches-bin` (the archive's folder). Files may also be gzipped. An error
    /// names the file and what is wrong with it.
    #[track_caller]
    pub fn new(root: impl AsRef<Path>, split: Split) -> Result<CIFAR10> {
        let root = root.as_ref();
        let names: Vec<String> = match split {
            Split::Train => (1..=5).map(|i| format!("data_batch_{i}.bin")).collect(),
            Split::Test => vec!["test_batch.bin".to_string()],
        };
        let nested = root.join("cifar-10-batches-bin");
        let dir = if root.join(&names[0]).is_file() || !nested.join(&names[0]).is_file() {
            root.to_path_buf()
        } else {
            nested
        };
        let mut images = Vec::new();
        let mut labels = Vec::new();
        for name in &names {
            let path = dir.join(name);
            if !path.is_file() {
                return Err(Error::new(
                    "CIFAR10",
                    ErrorKind::Io,
                    format!(
                        "cannot find {name} in {} or {}",
                        root.display(),
                        root.join("cifar-10-batches-bin").display()
                    ),
                ));
            }
            read_batch(&path, &mut images, &mut labels).at_caller()?;
        }
        Ok(CIFAR10 { data: Arc::new(CifarData { images, labels }), transform: None })
    }

    /// The same images with `transform` applied to each item's pixels, e.g.
    /// `Compose::new((RandomCrop::new(32).padding(4), RandomHorizontalFlip::new(0.5), ToTensor, Normalize::new(..)))`.
    pub fn transform(self, transform: impl Transform) -> CIFAR10 {
        CIFAR10 { data: self.data, transform: Some(Arc::new(transform)) }
    }

    /// The same images without a transform.
    pub fn without_transform(self) -> CIFAR10 {
        CIFAR10 { data: self.data, transform: None }
    }

    /// The bytes of image `index` (3072, channel-first).
    pub fn image_bytes(&self, index: usize) -> &[u8] {
        &self.data.images[index * IMAGE..(index + 1) * IMAGE]
    }

    /// The label of item `index`.
    pub fn label(&self, index: usize) -> u8 {
        self.data.labels[index]
    }

    /// All labels as an i64 tensor `[N]` (torchvision's `targets`).
    pub fn targets(&self) -> Tensor {
        Tensor::from_vec(self.data.labels.iter().map(|&l| l as i64).collect::<Vec<i64>>(), [self.len()])
    }

    /// The class names in label order (torchvision's `classes`).
    pub fn classes() -> [&'static str; 10] {
        ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    }
}

/// Appends the records of one batch file.
#[track_caller]
fn read_batch(path: &Path, images: &mut Vec<u8>, labels: &mut Vec<u8>) -> Result<()> {
    let bytes = read_maybe_gz("CIFAR10", path)?;
    let at = Location::caller();
    let bad = |message: String| Error::at("CIFAR10", ErrorKind::Value, format!("{}: {message}", path.display()), at);
    if bytes.is_empty() {
        return Err(bad("the file is empty (expected 3073-byte records)".into()));
    }
    if bytes.len() % RECORD != 0 {
        return Err(bad(format!(
            "truncated: {} bytes is not a whole number of {RECORD}-byte records ({} whole records and {} bytes left over)",
            bytes.len(),
            bytes.len() / RECORD,
            bytes.len() % RECORD
        )));
    }
    for (i, record) in bytes.chunks_exact(RECORD).enumerate() {
        if record[0] > 9 {
            return Err(bad(format!("label {} of record {i} is not a class index (0-9)", record[0])));
        }
        labels.push(record[0]);
        images.extend_from_slice(&record[1..]);
    }
    Ok(())
}

impl Dataset for CIFAR10 {
    type Item = (Tensor, i64);

    fn len(&self) -> usize {
        self.data.labels.len()
    }

    fn get(&self, index: usize) -> (Tensor, i64) {
        check_index("CIFAR10", index, self.len());
        let image = image_item("CIFAR10", index, self.image_bytes(index), [3, 32, 32], self.transform.as_ref());
        (image, self.label(index) as i64)
    }
}
