//! Bad files and state: checkpoints, state dicts, MNIST and CIFAR-10 folders.

use super::{either, refused, Cases, Net};
use kiln::nn::{self, Module};
use kiln::prelude::*;
use kiln::vision::datasets::{Split, CIFAR10, MNIST};
use kiln::StateDict;
use std::path::PathBuf;

#[path = "../common/idx.rs"]
mod idx;
use idx::idx;

/// A fresh file of this child's, holding `bytes`.
fn file(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = folder("files");
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write a test file");
    path
}

/// A fresh folder of this child's.
fn folder(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kiln-bad-inputs-{}", std::process::id())).join(name);
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    dir
}

/// A valid safetensors file's bytes.
fn valid_checkpoint() -> Vec<u8> {
    let mut sd = StateDict::new();
    sd.insert("w", Tensor::arange(6).reshape([2, 3]).to_dtype(DType::F32));
    sd.insert("b", Tensor::ones([3]));
    let path = folder("valid").join("ok.safetensors");
    kiln::save(&sd, &path).expect("save");
    std::fs::read(&path).expect("read back")
}

/// A safetensors file with this JSON header and `data` after it.
fn with_header(json: &str, data: &[u8]) -> Vec<u8> {
    let mut bytes = (json.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(json.as_bytes());
    bytes.extend_from_slice(data);
    bytes
}

/// An MNIST folder holding these training images and labels files.
fn mnist(images: &[u8], labels: &[u8]) -> PathBuf {
    let dir = folder("mnist");
    std::fs::write(dir.join("train-images-idx3-ubyte"), images).expect("write");
    std::fs::write(dir.join("train-labels-idx1-ubyte"), labels).expect("write");
    dir
}

pub fn add(c: &mut Cases) {
    checkpoints(c);
    state_dicts(c);
    datasets(c);
}

fn checkpoints(c: &mut Cases) {
    c.add("load/missing", || refused(kiln::load(folder("none").join("missing.safetensors"))));
    c.add("load/a-folder", || refused(kiln::load(folder("a-folder"))));
    c.add("load/empty", || refused(kiln::load(file("empty.safetensors", b""))));
    c.add("load/seven-bytes", || refused(kiln::load(file("short.safetensors", &[1, 2, 3, 4, 5, 6, 7]))));
    c.add("load/random-bytes", || {
        refused(kiln::load(file(
            "random.safetensors",
            &(0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect::<Vec<_>>(),
        )))
    });
    for cut in [8usize, 20, 60, 100] {
        c.add(format!("load/truncated-at-{cut}"), move || {
            let bytes = valid_checkpoint();
            refused(kiln::load(file("cut.safetensors", &bytes[..cut.min(bytes.len() - 1)])))
        });
    }
    c.add("load/truncated-last-byte", || {
        let bytes = valid_checkpoint();
        refused(kiln::load(file("cut.safetensors", &bytes[..bytes.len() - 1])))
    });
    c.add("load/huge-header-length", || refused(kiln::load(file("huge.safetensors", &u64::MAX.to_le_bytes()))));
    c.add("load/header-not-json", || refused(kiln::load(file("json.safetensors", &with_header("{not json", &[])))));
    c.add("load/unknown-dtype", || {
        refused(kiln::load(file(
            "dtype.safetensors",
            &with_header(r#"{"x":{"dtype":"Q7","shape":[1],"data_offsets":[0,4]}}"#, &[0; 4]),
        )))
    });
    c.add("load/offsets-past-end", || {
        refused(kiln::load(file(
            "offsets.safetensors",
            &with_header(r#"{"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}"#, &[0; 4]),
        )))
    });
    c.add("load/shape-disagrees-with-bytes", || {
        refused(kiln::load(file(
            "shape.safetensors",
            &with_header(r#"{"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#, &[0; 8]),
        )))
    });
    c.add("load/overflowing-shape", || {
        refused(kiln::load(file(
            "overflow.safetensors",
            &with_header(
                r#"{"x":{"dtype":"F32","shape":[0,4294967296,4294967296,4294967296],"data_offsets":[0,0]}}"#,
                &[],
            ),
        )))
    });
    c.add("load/unsupported-dtype", || {
        refused(kiln::load(file(
            "f8.safetensors",
            &with_header(r#"{"x":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}}"#, &[0]),
        )))
    });
    c.add("load/bool-byte-two", || {
        refused(kiln::load(file(
            "bool.safetensors",
            &with_header(r#"{"x":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}}"#, &[1, 2]),
        )))
    });
    c.add("load/pth-zip", || {
        refused(kiln::load(file("model.pth", b"PK\x03\x04\x14\x00\x00\x00\x08\x00archive/data.pkl")))
    });
    c.add("load/pth-pickle", || {
        refused(kiln::load(file("legacy.pth", b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.\x80\x02}q\x00")))
    });
    c.add("save/missing-folder", || {
        refused(kiln::save(&StateDict::new(), folder("save").join("no/such/folder/x.safetensors")))
    });
    c.add("save/onto-a-folder", || refused(kiln::save(&StateDict::new(), folder("save-onto"))));
    c.add("save/empty-state-is-fine", || {
        either(kiln::save(&StateDict::new(), folder("save-empty").join("x.safetensors")))
    });
}

fn state_dicts(c: &mut Cases) {
    let net = || Net { fc: nn::Linear::new(3, 2) };
    c.add("state-dict/missing-key", move || {
        let mut sd = net().state_dict();
        sd.remove("fc.bias");
        refused(net().load_state_dict(&sd))
    });
    c.add("state-dict/unexpected-key", move || {
        let mut sd = net().state_dict();
        sd.insert("fc.extra", Tensor::ones([1]));
        refused(net().load_state_dict(&sd))
    });
    c.add("state-dict/wrong-shape", move || {
        let mut sd = net().state_dict();
        sd.insert("fc.weight", Tensor::ones([3, 2]));
        refused(net().load_state_dict(&sd))
    });
    c.add("state-dict/empty", move || refused(net().load_state_dict(&StateDict::new())));
    c.add("state-dict/integer-values-are-cast", move || {
        let mut sd = net().state_dict();
        sd.insert("fc.bias", Tensor::arange(2));
        either(net().load_state_dict(&sd))
    });
}

fn datasets(c: &mut Cases) {
    let images = |n: u32| idx(&[n, 28, 28], &vec![7u8; n as usize * 784]);
    let labels = |n: u32| idx(&[n], &vec![3u8; n as usize]);
    c.add("mnist/missing-folder", || refused(MNIST::new(folder("none").join("mnist"), Split::Train)));
    c.add("mnist/empty-folder", || refused(MNIST::new(folder("mnist-empty"), Split::Test)));
    c.add("mnist/truncated-header", move || refused(MNIST::new(mnist(&[0, 0, 8], &labels(2)), Split::Train)));
    c.add("mnist/truncated-images", move || refused(MNIST::new(mnist(&images(2)[..1000], &labels(2)), Split::Train)));
    c.add("mnist/bad-magic", move || refused(MNIST::new(mnist(&[1, 2, 3, 4, 0, 0, 0, 1], &labels(2)), Split::Train)));
    c.add("mnist/count-mismatch", move || refused(MNIST::new(mnist(&images(3), &labels(2)), Split::Train)));
    c.add("mnist/labels-as-images", move || refused(MNIST::new(mnist(&labels(2), &labels(2)), Split::Train)));
    c.add("mnist/label-out-of-range", move || refused(MNIST::new(mnist(&images(1), &idx(&[1], &[10])), Split::Train)));
    c.add("mnist/huge-dims", move || {
        refused(MNIST::new(mnist(&idx(&[u32::MAX, u32::MAX, u32::MAX], &[]), &labels(2)), Split::Train))
    });
    c.add("mnist/corrupt-gzip", || {
        let dir = folder("mnist-gz");
        std::fs::write(dir.join("train-images-idx3-ubyte.gz"), [0x1f, 0x8b, 8, 0, 1, 2, 3]).expect("write");
        std::fs::write(dir.join("train-labels-idx1-ubyte.gz"), [0x1f, 0x8b, 8, 0, 1, 2, 3]).expect("write");
        refused(MNIST::new(dir, Split::Train))
    });
    c.add("cifar/missing-folder", || refused(CIFAR10::new(folder("none").join("cifar"), Split::Test)));
    c.add("cifar/empty-batch", || {
        let dir = folder("cifar-empty");
        std::fs::write(dir.join("test_batch.bin"), b"").expect("write");
        refused(CIFAR10::new(dir, Split::Test))
    });
    c.add("cifar/truncated-record", || {
        let dir = folder("cifar-cut");
        std::fs::write(dir.join("test_batch.bin"), vec![1u8; 3073 + 100]).expect("write");
        refused(CIFAR10::new(dir, Split::Test))
    });
    c.add("cifar/label-out-of-range", || {
        let dir = folder("cifar-label");
        let mut record = vec![0u8; 3073];
        record[0] = 200;
        std::fs::write(dir.join("test_batch.bin"), record).expect("write");
        refused(CIFAR10::new(dir, Split::Test))
    });
    c.add("cifar/missing-training-batch", || {
        let dir = folder("cifar-train");
        std::fs::write(dir.join("data_batch_1.bin"), vec![0u8; 3073]).expect("write");
        refused(CIFAR10::new(dir, Split::Train))
    });
}
