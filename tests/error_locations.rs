//! Every error a caller causes names the caller's line: for one error of each kind (shape,
//! dtype, index, value, io, autograd, state dict, optimizer, scheduler, module, dataset,
//! transform, data loader, distributed, compile), the reported file is this test file, never
//! one of kiln's sources. And a `main` returning `kiln::Result` prints the error's message and
//! its cause, not the raw struct.

use kiln::data::{DataLoader, Dataset, Subset, TensorDataset};
use kiln::distributed::{self as dist, ReduceOp, TcpStore};
use kiln::nn::{self, Module};
use kiln::optim::lr_scheduler::{LRScheduler, OneCycleLR, OneCycleLRConfig, ReduceLROnPlateau, StepLR};
use kiln::optim::{Optimizer, SGDConfig, SGD};
use kiln::prelude::*;
use kiln::vision::datasets::idx::read_idx;
use kiln::vision::datasets::{Split, CIFAR10, MNIST};
use kiln::vision::transforms::{RandomCrop, Transform};
use kiln::vision::{Image, Pixels};
use kiln::{Error, StateDict};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

const HERE: &str = "tests/error_locations.rs";

/// The error's file and the whole message.
fn place(e: &Error) -> (String, String) {
    (e.location.file().to_string(), e.to_string())
}

/// The message of the panic `f` raises.
fn panic_text(f: impl FnOnce()) -> String {
    let e = catch_unwind(AssertUnwindSafe(f)).expect_err("expected a panic");
    e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

fn assert_here(what: &str, e: Result<(), Error>) {
    let e = e.expect_err(what);
    let (file, text) = place(&e);
    assert_eq!(file, HERE, "{what}: {text}");
}

fn assert_panics_here(what: &str, f: impl FnOnce()) {
    let text = panic_text(f);
    assert!(text.contains(&format!("(at {HERE}:")), "{what}: {text}");
}

fn temp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("kiln-error-locations-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    dir.join(name)
}

#[derive(Module)]
struct Net {
    fc: nn::Linear,
}

impl Module for Net {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.fc.forward(x)
    }
}

#[test]
fn tensor_op_errors_name_the_callers_line() {
    let a = Tensor::zeros([2, 3]);
    assert_here("shape", a.try_add(Tensor::zeros([4])).map(drop));
    assert_here("view", a.try_view([7]).map(drop));
    assert_here("matmul", a.try_matmul(&a).map(drop));
    assert_here("dtype", a.try_bitwise_and(&a).map(drop));
    assert_here("index dtype", a.try_index_select(0, &Tensor::zeros([1])).map(drop));
    assert_here("index value", a.try_index_select(0, &Tensor::from_slice(&[5i64])).map(drop));
    assert_here("gather", a.try_gather(1, &Tensor::from_vec(vec![9i64; 6], [2, 3])).map(drop));
    assert_here("dim", a.try_sum_dim(5).map(drop));
    assert_here("cat", Tensor::try_cat(&[&a, &Tensor::zeros([2, 3, 1])], 0).map(drop));
    assert_here("overflow", Tensor::try_zeros([usize::MAX, 2]).map(drop));
    assert_here("to_dtype", Tensor::try_from_vec(vec![1.0f32], [3]).map(drop));
    assert_panics_here("panicking form", || drop(&a + &Tensor::zeros([4])));
}

#[test]
fn file_and_dataset_errors_name_the_callers_line() {
    assert_here("load missing", kiln::load(temp("missing.safetensors")).map(drop));
    let corrupt = temp("corrupt.safetensors");
    std::fs::write(&corrupt, b"\x08\x00\x00\x00\x00\x00\x00\x00{not json").expect("write");
    assert_here("load corrupt", kiln::load(&corrupt).map(drop));
    let mut sd = StateDict::new();
    sd.insert("x", Tensor::zeros([2]));
    assert_here("save to a folder that is not there", kiln::save(&sd, temp("no/such/folder/x.safetensors")));
    assert_here("mnist", MNIST::new(temp("no-mnist"), Split::Train).map(drop));
    let truncated = temp("mnist-bad");
    std::fs::create_dir_all(&truncated).expect("a folder");
    std::fs::write(truncated.join("train-images-idx3-ubyte"), [0u8, 0, 8, 3, 0, 0]).expect("write");
    std::fs::write(truncated.join("train-labels-idx1-ubyte"), [0u8, 0, 8, 1, 0, 0, 0, 0]).expect("write");
    assert_here("mnist truncated", MNIST::new(&truncated, Split::Train).map(drop));
    assert_here("cifar", CIFAR10::new(temp("no-cifar"), Split::Train).map(drop));
    assert_here("tensor dataset", TensorDataset::new((Tensor::zeros([2]), Tensor::zeros([3]))).map(drop));
}

#[test]
fn autograd_errors_name_the_callers_line() {
    let x = Tensor::ones([3]).requires_grad_(true);
    assert_here("not a scalar", (&x * 2.0).try_backward_with_opts(None, Default::default()));
    assert_here("no grad", Tensor::ones([1]).try_backward_with_opts(None, Default::default()));
    let y = (&x * &x).sum();
    y.backward();
    assert_here("backward twice", y.try_backward_with_opts(None, Default::default()));
    let z = (&x * 3.0).sum();
    assert_here(
        "grad of an input not in the graph",
        kiln::autograd::grad(&[&z], &[&Tensor::ones([1]).requires_grad_(true)], None, Default::default()).map(drop),
    );
}

#[test]
fn module_and_optimizer_errors_name_the_callers_line() {
    let mut net = Net { fc: nn::Linear::new(3, 2) };
    let mut sd = net.state_dict();
    sd.insert("fc.weight", Tensor::zeros([5, 5]));
    assert_here("state dict shape", net.load_state_dict(&sd));
    let mut missing = StateDict::new();
    missing.insert("fc.bias", Tensor::zeros([2]));
    assert_here("state dict missing key", net.load_state_dict(&missing));
    if !Device::cuda_is_available() {
        assert_here("module to a missing device", net.try_to(&Device::Cuda(0)));
    }
    assert_here("optimizer lr", SGD::try_new(net.parameters(), SGDConfig { lr: -1.0, ..Default::default() }).map(drop));
    let mut opt = SGD::new(net.parameters(), SGDConfig { lr: 0.1, momentum: 0.9, ..Default::default() });
    let mut bad = StateDict::new();
    bad.insert("state.7.momentum_buffer", Tensor::zeros([2]));
    bad.set_metadata("param_groups.0.params", "0,1");
    assert_here("optimizer state dict", opt.load_state_dict(&bad));
}

/// A dataset whose items cannot be stacked (item 1 has another shape).
struct Ragged;

impl Dataset for Ragged {
    type Item = Tensor;
    fn len(&self) -> usize {
        2
    }
    fn get(&self, index: usize) -> Tensor {
        Tensor::zeros([index + 1])
    }
}

#[test]
fn data_loader_errors_name_the_callers_line() {
    for workers in [0, 2] {
        let loader = DataLoader::new(Ragged).batch_size(2).num_workers(workers);
        assert_panics_here("collate", || {
            for batch in &loader {
                drop(batch);
            }
        });
    }
}

#[test]
fn compiled_step_errors_name_the_callers_line() {
    let x = Tensor::zeros([4, 2]);
    let bad = Tensor::from_slice(&[0i64, 9]);
    let mut step = kiln::compile(|x: &Tensor| x.index_select(0, &bad) * 2.0);
    assert_panics_here("index_select inside compile", || drop(step.call(&x)));
    let mut step = kiln::compile(|x: &Tensor| x.gather(1, &Tensor::from_vec(vec![7i64; 8], [4, 2])) + 1.0);
    assert_panics_here("gather inside compile", || drop(step.call(&x)));
}

#[test]
fn scheduler_errors_name_the_callers_line() {
    let w = Tensor::zeros([2]).requires_grad_(true);
    let mut opt = SGD::new(vec![w], SGDConfig { lr: 0.1, momentum: 0.9, ..Default::default() });
    let empty = StateDict::new();
    let mut step = StepLR::new(&mut opt, 2, 0.5);
    assert_here("StepLR state dict", step.load_state_dict(&empty));
    let mut boxed: Box<dyn LRScheduler> = Box::new(StepLR::new(&mut opt, 2, 0.5));
    assert_here("a scheduler behind dyn", boxed.load_state_dict(&empty));
    let mut one_cycle = OneCycleLR::new(&mut opt, OneCycleLRConfig::new(0.1, 10));
    let mut bad = one_cycle.state_dict();
    bad.set_metadata("min_lr", "not a number");
    assert_here("OneCycleLR list", one_cycle.load_state_dict(&bad));
    let mut plateau = ReduceLROnPlateau::new(&mut opt, Default::default());
    assert_here("ReduceLROnPlateau state dict", plateau.load_state_dict(&empty));
}

#[test]
fn dataset_and_transform_errors_name_the_callers_line() {
    let shared = Arc::new(TensorDataset::new(Tensor::zeros([2, 3])).expect("a dataset"));
    assert_panics_here("dataset index", || drop(shared.get(2)));
    let boxed: Box<dyn Dataset<Item = Tensor>> = Box::new(shared.clone());
    assert_panics_here("dataset behind dyn", || drop(boxed.get(5)));
    let subset: Subset<TensorDataset<Tensor>> = Subset::new(shared, vec![0, 1, 1]).expect("a subset");
    assert_panics_here("subset index", || drop(subset.get(3)));
    let crop: Box<dyn Transform> = Box::new(RandomCrop::new(8));
    let pixels = Pixels::new(vec![0; 16], 1, 4, 4).expect("4x4 pixels");
    assert_here("transform behind dyn", crop.apply(Image::Pixels(pixels)).map(drop));
}

#[test]
fn file_reader_errors_name_the_callers_line_and_keep_the_cause() {
    let folder = temp("a-folder-not-a-file");
    std::fs::create_dir_all(&folder).expect("a folder");
    let e = read_idx(&folder).expect_err("a folder is not an IDX file");
    assert_eq!(e.location.file(), HERE, "{e}");
    let cause = std::error::Error::source(&e).and_then(|c| c.downcast_ref::<std::io::Error>());
    assert!(cause.is_some(), "the io error is the source: {e:?}");
}

#[test]
fn distributed_errors_name_the_callers_line() {
    assert_here("rank without a group", dist::rank().map(drop));
    assert_here("all_reduce without a group", dist::all_reduce(&Tensor::zeros([2]), ReduceOp::Sum));
    let taken = std::net::TcpListener::bind("0.0.0.0:0").expect("a free port");
    let port = taken.local_addr().expect("its address").port();
    assert_here("a store's port in use", TcpStore::new("127.0.0.1", port, true, Duration::from_millis(200)).map(drop));
}

/// `fn main() -> kiln::Result<()>` failing: stderr reads `Error: op: message (at file:line)`
/// and the cause, as `anyhow` prints it, never `Error { op: …, location: Location { … } }`.
#[test]
fn main_returning_a_kiln_error_prints_the_message_and_its_cause() {
    let missing = temp("main-missing.safetensors");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kiln-main-error"))
        .arg(&missing)
        .output()
        .expect("run kiln-main-error");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with(&format!("Error: load: cannot read {}: ", missing.display())), "{stderr}");
    assert!(stderr.contains("(at tests/programs/main_error.rs:"), "{stderr}");
    assert!(stderr.contains("\n\nCaused by:\n    No such file or directory"), "{stderr}");
    assert!(!stderr.contains("Error {") && !stderr.contains("Location"), "{stderr}");
}
