//! Every error a caller causes names the caller's line: for one error of each kind (shape,
//! dtype, index, value, io, autograd, state dict, optimizer, module, dataset, data loader,
//! compile), the reported file is this test file, never one of kiln's sources.

use kiln::data::{DataLoader, Dataset, TensorDataset};
use kiln::nn::{self, Module};
use kiln::optim::{Optimizer, Sgd, SgdConfig};
use kiln::prelude::*;
use kiln::vision::datasets::{Cifar10, Mnist, Split};
use kiln::{Error, StateDict};
use std::panic::{catch_unwind, AssertUnwindSafe};

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
    let a = Tensor::zeros(&[2, 3]);
    assert_here("shape", a.try_add(&Tensor::zeros(&[4])).map(drop));
    assert_here("view", a.try_view(&[7]).map(drop));
    assert_here("matmul", a.try_matmul(&a).map(drop));
    assert_here("dtype", a.try_bitwise_and(&a).map(drop));
    assert_here("index dtype", a.try_index_select(0, &Tensor::zeros(&[1])).map(drop));
    assert_here("index value", a.try_index_select(0, &Tensor::from_slice(&[5i64])).map(drop));
    assert_here("gather", a.try_gather(1, &Tensor::from_vec(vec![9i64; 6], &[2, 3])).map(drop));
    assert_here("dim", a.try_sum_dim(5, false).map(drop));
    assert_here("cat", Tensor::try_cat(&[&a, &Tensor::zeros(&[2, 3, 1])], 0).map(drop));
    assert_here("overflow", Tensor::try_zeros(&[usize::MAX, 2]).map(drop));
    assert_here("to_dtype", Tensor::try_from_vec(vec![1.0f32], &[3]).map(drop));
    assert_panics_here("panicking form", || drop(&a + &Tensor::zeros(&[4])));
}

#[test]
fn file_and_dataset_errors_name_the_callers_line() {
    assert_here("load missing", kiln::load(temp("missing.safetensors")).map(drop));
    let corrupt = temp("corrupt.safetensors");
    std::fs::write(&corrupt, b"\x08\x00\x00\x00\x00\x00\x00\x00{not json").expect("write");
    assert_here("load corrupt", kiln::load(&corrupt).map(drop));
    let mut sd = StateDict::new();
    sd.insert("x", Tensor::zeros(&[2]));
    assert_here("save to a folder that is not there", kiln::save(&sd, temp("no/such/folder/x.safetensors")));
    assert_here("mnist", Mnist::new(temp("no-mnist"), Split::Train).map(drop));
    let truncated = temp("mnist-bad");
    std::fs::create_dir_all(&truncated).expect("a folder");
    std::fs::write(truncated.join("train-images-idx3-ubyte"), [0u8, 0, 8, 3, 0, 0]).expect("write");
    std::fs::write(truncated.join("train-labels-idx1-ubyte"), [0u8, 0, 8, 1, 0, 0, 0, 0]).expect("write");
    assert_here("mnist truncated", Mnist::new(&truncated, Split::Train).map(drop));
    assert_here("cifar", Cifar10::new(temp("no-cifar"), true).map(drop));
    assert_here("tensor dataset", TensorDataset::new((Tensor::zeros(&[2]), Tensor::zeros(&[3]))).map(drop));
}

#[test]
fn autograd_errors_name_the_callers_line() {
    let x = Tensor::ones(&[3]).requires_grad_(true);
    assert_here("not a scalar", (&x * 2.0).try_backward_with_opts(None, Default::default()));
    assert_here("no grad", Tensor::ones(&[1]).try_backward_with_opts(None, Default::default()));
    let y = (&x * &x).sum();
    y.backward();
    assert_here("backward twice", y.try_backward_with_opts(None, Default::default()));
    let z = (&x * 3.0).sum();
    assert_here("grad of an input not in the graph", kiln::autograd::grad(&[&z], &[&Tensor::ones(&[1]).requires_grad_(true)], None, Default::default()).map(drop));
}

#[test]
fn module_and_optimizer_errors_name_the_callers_line() {
    let mut net = Net { fc: nn::Linear::new(3, 2) };
    let mut sd = net.state_dict();
    sd.insert("fc.weight", Tensor::zeros(&[5, 5]));
    assert_here("state dict shape", net.load_state_dict(&sd));
    let mut missing = StateDict::new();
    missing.insert("fc.bias", Tensor::zeros(&[2]));
    assert_here("state dict missing key", net.load_state_dict(&missing));
    if !Device::cuda_is_available() {
        assert_here("module to a missing device", net.try_to(&Device::Cuda(0)));
    }
    assert_here("optimizer lr", Sgd::try_new(net.parameters(), SgdConfig { lr: -1.0, ..Default::default() }).map(drop));
    let mut opt = Sgd::new(net.parameters(), SgdConfig { lr: 0.1, momentum: 0.9, ..Default::default() });
    let mut bad = StateDict::new();
    bad.insert("state.7.momentum_buffer", Tensor::zeros(&[2]));
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
        Tensor::zeros(&[index + 1])
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
    let x = Tensor::zeros(&[4, 2]);
    let bad = Tensor::from_slice(&[0i64, 9]);
    let mut step = kiln::compile(|x: &Tensor| x.index_select(0, &bad) * 2.0);
    assert_panics_here("index_select inside compile", || drop(step.call(&x)));
    let mut step = kiln::compile(|x: &Tensor| x.gather(1, &Tensor::from_vec(vec![7i64; 8], &[4, 2])) + 1.0);
    assert_panics_here("gather inside compile", || drop(step.call(&x)));
}
