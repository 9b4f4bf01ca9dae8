//! `kiln::vision::datasets::MNIST` and the IDX reader: small files written here (plain and
//! gzipped, and every kind of corruption), and the embedded 8,000/2,000 subset.

use flate2::write::GzEncoder;
use flate2::Compression;
use kiln::data::{DataLoader, Dataset};
use kiln::vision::datasets::idx::read_idx;
use kiln::vision::datasets::mnist::default_root;
use kiln::vision::datasets::{Split, MNIST};
use kiln::vision::transforms::{Compose, Normalize, ToTensor};
use kiln::{DType, ErrorKind};
use std::io::Write;
use std::path::{Path, PathBuf};

#[path = "common/idx.rs"]
mod idx;
use idx::idx;

/// A fresh directory for one test.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kiln-vision-mnist-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// `n` 28x28 images whose pixel `p` of image `i` is `(i * 7 + p) % 256`, and labels `i % 10`.
fn digits(n: usize) -> (Vec<u8>, Vec<u8>) {
    let images = (0..n * 784).map(|k| ((k / 784) * 7 + k % 784) as u8).collect();
    let labels = (0..n).map(|i| (i % 10) as u8).collect();
    (images, labels)
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::write(dir.join(name), bytes).unwrap();
}

#[test]
fn reads_plain_and_gzipped_files() {
    let (images, labels) = digits(3);
    let dir = temp_dir("ok");
    write(&dir, "train-images-idx3-ubyte", &idx(&[3, 28, 28], &images));
    write(&dir, "train-labels-idx1-ubyte", &idx(&[3], &labels));
    write(&dir, "t10k-images-idx3-ubyte.gz", &gzip(&idx(&[3, 28, 28], &images)));
    write(&dir, "t10k-labels-idx1-ubyte.gz", &gzip(&idx(&[3], &labels)));
    for split in [Split::Train, Split::Test] {
        let ds = MNIST::new(&dir, split).unwrap();
        assert_eq!(ds.len(), 3);
        let (x, y) = ds.get(2);
        assert_eq!((x.shape(), x.dtype(), y), (&[1usize, 28, 28][..], DType::F32, 2));
        let want: Vec<f32> = images[2 * 784..3 * 784].iter().map(|&b| b as f32 / 255.0).collect();
        assert_eq!(x.to_vec::<f32>(), want);
        assert_eq!(ds.data().shape(), &[3, 28, 28]);
        assert_eq!(ds.targets().to_vec::<i64>(), vec![0, 1, 2]);
    }
    // torchvision's layout root/MNIST/raw is found too.
    let nested = temp_dir("nested");
    std::fs::create_dir_all(nested.join("MNIST/raw")).unwrap();
    for f in ["t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"] {
        std::fs::copy(dir.join(f), nested.join("MNIST/raw").join(f)).unwrap();
    }
    assert_eq!(MNIST::new(&nested, Split::Test).unwrap().len(), 3);
    // The generic reader.
    let a = read_idx(dir.join("t10k-labels-idx1-ubyte.gz")).unwrap();
    assert_eq!((a.dims, a.data), (vec![3], labels));
}

/// Writes the test split's two files and returns the error of loading them.
fn load_err(name: &str, images: Vec<u8>, labels: Vec<u8>) -> kiln::Error {
    let dir = temp_dir(name);
    write(&dir, "t10k-images-idx3-ubyte", &images);
    write(&dir, "t10k-labels-idx1-ubyte", &labels);
    match MNIST::new(&dir, Split::Test) {
        Ok(_) => panic!("{name}: corrupt files were accepted"),
        Err(e) => e,
    }
}

#[test]
fn corrupt_files_are_errors_naming_the_file() {
    let (images, labels) = digits(2);
    let good_images = idx(&[2, 28, 28], &images);
    let good_labels = idx(&[2], &labels);
    let check = |e: kiln::Error, file: &str, what: &str, kind: ErrorKind| {
        let s = e.to_string();
        assert!(s.contains(file) && s.contains(what), "expected {file:?} and {what:?} in: {s}");
        assert_eq!(e.kind, kind, "{s}");
        assert_eq!(e.op, "MNIST", "{s}");
    };

    let mut bad_magic = good_images.clone();
    bad_magic[0] = 0x12;
    check(
        load_err("magic", bad_magic, good_labels.clone()),
        "t10k-images-idx3-ubyte",
        "bad magic number 0x12000803",
        ErrorKind::Value,
    );
    let mut bad_type = good_labels.clone();
    bad_type[2] = 0x0D;
    check(
        load_err("type", good_images.clone(), bad_type),
        "t10k-labels-idx1-ubyte",
        "element type 0x0d (f32)",
        ErrorKind::Value,
    );
    check(
        load_err("ndim", idx(&[2, 784], &images), good_labels.clone()),
        "t10k-images-idx3-ubyte",
        "3 dims",
        ErrorKind::Value,
    );
    check(
        load_err("size", idx(&[2, 28, 28 * 28 / 28 - 1], &images[..2 * 28 * 27]), good_labels.clone()),
        "t10k-images-idx3-ubyte",
        "28x28",
        ErrorKind::Value,
    );
    check(
        load_err("label-ndim", good_images.clone(), idx(&[2, 1], &labels)),
        "t10k-labels-idx1-ubyte",
        "1 dim",
        ErrorKind::Value,
    );
    check(
        load_err("count", good_images.clone(), idx(&[3], &[0, 1, 2])),
        "t10k-labels-idx1-ubyte",
        "holds 3 labels",
        ErrorKind::Value,
    );
    check(
        load_err("short", good_images[..good_images.len() - 5].to_vec(), good_labels.clone()),
        "t10k-images-idx3-ubyte",
        "truncated data",
        ErrorKind::Value,
    );
    check(
        load_err("header", good_images[..9].to_vec(), good_labels.clone()),
        "t10k-images-idx3-ubyte",
        "truncated header",
        ErrorKind::Value,
    );
    check(load_err("empty", vec![], good_labels.clone()), "t10k-images-idx3-ubyte", "too short", ErrorKind::Value);
    let mut long = good_labels.clone();
    long.push(0);
    check(
        load_err("long", good_images.clone(), long),
        "t10k-labels-idx1-ubyte",
        "1 unexpected bytes",
        ErrorKind::Value,
    );
    check(
        load_err("label", good_images.clone(), idx(&[2], &[3, 12])),
        "t10k-labels-idx1-ubyte",
        "label 12 of item 1",
        ErrorKind::Value,
    );

    // Gzip: a corrupted stream, a cut-off stream, and a bad checksum.
    let gz = gzip(&good_images);
    let mut garbage = gz.clone();
    for b in &mut garbage[12..40] {
        *b ^= 0x5A;
    }
    check(
        load_err("gz-garbage", garbage, good_labels.clone()),
        "t10k-images-idx3-ubyte",
        "not a valid gzip stream",
        ErrorKind::Io,
    );
    check(
        load_err("gz-cut", gz[..gz.len() / 2].to_vec(), good_labels.clone()),
        "t10k-images-idx3-ubyte",
        "not a valid gzip stream",
        ErrorKind::Io,
    );
    let mut crc = gz.clone();
    let n = crc.len();
    crc[n - 6] ^= 0xFF; // inside the CRC-32 trailer
    check(
        load_err("gz-crc", crc, good_labels.clone()),
        "t10k-images-idx3-ubyte",
        "not a valid gzip stream",
        ErrorKind::Io,
    );

    // Missing files.
    let dir = temp_dir("missing");
    let e = MNIST::new(&dir, Split::Train).err().unwrap();
    assert!(e.to_string().contains("cannot find train-images-idx3-ubyte"), "{e}");
    assert_eq!(e.kind, ErrorKind::Io);
}

#[test]
fn embedded_subset_loads() {
    assert!(default_root().is_absolute() && default_root().join("README.md").is_file());
    let train = MNIST::embedded(Split::Train).unwrap();
    let test = MNIST::new(default_root(), Split::Test).unwrap();
    assert_eq!((train.len(), test.len()), (8000, 2000));
    for ds in [&train, &test] {
        let mut counts = [0usize; 10];
        for i in 0..ds.len() {
            counts[ds.label(i) as usize] += 1;
        }
        // Every digit is well represented (MNIST's classes are 9-11% each).
        assert!(counts.iter().all(|&c| c * 100 > ds.len() * 7), "{counts:?}");
        let total: u64 = (0..ds.len()).flat_map(|i| ds.image_bytes(i).iter()).map(|&b| b as u64).sum();
        let mean = total as f64 / (ds.len() * 784) as f64 / 255.0;
        assert!((mean - 0.1307).abs() < 0.01, "mean pixel {mean}");
        // Real digits: a dark background and some saturated ink in each image.
        for i in (0..ds.len()).step_by(97) {
            let img = ds.image_bytes(i);
            assert_eq!(img[0], 0);
            assert!(img.iter().any(|&b| b >= 250), "image {i} has no ink");
        }
    }
}

#[test]
fn normalize_transform_and_loader() {
    let test = MNIST::embedded(Split::Test).unwrap();
    let (mean, std) = (0.1307, 0.3081);
    let normalized = test.clone().transform(Compose::new((ToTensor, Normalize::new(&[mean], &[std]))));
    let (x, y) = normalized.get(5);
    assert_eq!(y, test.label(5) as i64);
    let want: Vec<f32> = test.image_bytes(5).iter().map(|&b| (b as f32 / 255.0 - mean as f32) / std as f32).collect();
    assert_eq!(x.to_vec::<f32>(), want);

    let loader = DataLoader::new(normalized).batch_size(64).shuffle(true).seed(1).num_workers(2);
    assert_eq!(loader.len(), 32);
    let (mut n, mut sum) = (0usize, 0.0f64);
    for (images, labels) in &loader {
        assert_eq!(&images.shape()[1..], &[1, 28, 28]);
        assert_eq!((labels.dtype(), labels.shape()[0]), (DType::I64, images.shape()[0]));
        n += images.shape()[0];
        sum += images.to_vec::<f32>().iter().map(|&v| v as f64).sum::<f64>();
    }
    assert_eq!(n, 2000);
    // The subset's mean is close to full MNIST's, so normalized data has mean near 0.
    assert!((sum / (n * 784) as f64).abs() < 0.03, "normalized mean {}", sum / (n * 784) as f64);
}
