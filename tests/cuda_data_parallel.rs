//! `nn::DataParallel` on CUDA devices (ignored unless asked for: `scripts/gpu-check.sh` runs
//! them with `--include-ignored`): one device runs the module there; two replicas sharing
//! `cuda:0`, and (with at least two GPUs, else the test prints that it skips) one replica per
//! GPU, match the bare module forward, backward and over SGD steps, with the output gathered on
//! the output device.

use kiln::nn::{self, DataParallel, DataParallelOpts, Module};
use kiln::optim::{Optimizer, SGDConfig, SGD};
use kiln::prelude::*;

#[path = "common/seeded.rs"]
mod seeded;
use seeded::seeded;

#[derive(Module)]
struct Net {
    fc1: nn::Linear,
    fc2: nn::Linear,
}

impl Net {
    fn new() -> Net {
        Net { fc1: nn::Linear::new(16, 32), fc2: nn::Linear::new(32, 4) }
    }
}

impl Module for Net {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.fc2.forward(&F::relu(&self.fc1.forward(x)))
    }
}

/// Asserts a CUDA device is there (these tests run on GPU machines only).
fn require_cuda() {
    assert!(kiln::cuda::is_available(), "no CUDA device: run these tests on a GPU machine");
}

/// Losses of 3 SGD steps of `model` (its input and labels made on `device`), its parameters
/// after them on the CPU, and the device of its first output.
fn train(model: &dyn Module, device: Device) -> (Vec<f32>, Vec<Tensor>, Device) {
    let mut opt = SGD::new(model.parameters(), SGDConfig { lr: 0.05, momentum: 0.9, ..Default::default() });
    let x = Tensor::randn([10, 16]).to(&device);
    let y = Tensor::randint(0, 4, [10]).to(&device);
    let criterion = nn::CrossEntropyLoss::new();
    let (mut losses, mut out_device) = (Vec::new(), device);
    for _ in 0..3 {
        opt.zero_grad();
        let out = model.forward(&x);
        out_device = out.device();
        let loss = criterion.forward(&out.to(&device), &y);
        loss.backward();
        opt.step();
        losses.push(loss.item::<f32>());
    }
    (losses, model.parameters().iter().map(|p| p.to(&Device::Cpu)).collect(), out_device)
}

/// Trains the bare module on `cuda:0` and the same weights wrapped over `device_ids`; asserts
/// equal losses and parameters, and the output on `output`.
fn matches_bare(device_ids: Vec<Device>, output: Device) {
    let cuda0 = Device::Cuda(0);
    kiln::manual_seed(9);
    let mut bare = Net::new();
    bare.to(&cuda0);
    let (want, want_params, _) = train(&bare, cuda0);
    kiln::manual_seed(9);
    let dp = DataParallel::with_opts(
        Net::new,
        DataParallelOpts { device_ids: Some(device_ids.clone()), output_device: Some(output), dim: 0 },
    );
    assert!(dp.parameters().iter().all(|p| p.device() == device_ids[0]));
    let (got, got_params, out_device) = train(&dp, cuda0);
    assert_eq!(out_device, output, "the output is gathered on the output device");
    for (a, b) in got.iter().zip(&want) {
        assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{device_ids:?}: losses {got:?} vs bare {want:?}");
    }
    for (p, q) in got_params.iter().zip(&want_params) {
        assert!(p.allclose(q, 1e-5, 1e-5), "{device_ids:?}: {p} vs {q}");
    }
    assert!(want[2] < want[0], "training lowers the loss: {want:?}");
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn one_device_moves_the_module_and_the_input_there() {
    let _seeded = seeded();
    require_cuda();
    kiln::manual_seed(8);
    let dp = DataParallel::with_opts(
        Net::new,
        DataParallelOpts { device_ids: Some(vec![Device::Cuda(0)]), ..Default::default() },
    );
    assert!(dp.parameters().iter().all(|p| p.device() == Device::Cuda(0)));
    let x = Tensor::randn([6, 16]);
    let y = dp.forward(&x);
    assert_eq!(y.device(), Device::Cuda(0));
    let want = dp.module().forward(&x.to(&Device::Cuda(0)));
    assert!(y.to(&Device::Cpu).allclose(&want.to(&Device::Cpu), 0.0, 0.0));
    matches_bare(vec![Device::Cuda(0)], Device::Cuda(0));
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn replicas_sharing_one_gpu_match_the_bare_module() {
    let _seeded = seeded();
    require_cuda();
    matches_bare(vec![Device::Cuda(0); 2], Device::Cuda(0));
    matches_bare(vec![Device::Cuda(0); 3], Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn one_replica_per_gpu_matches_the_bare_module() {
    let _seeded = seeded();
    require_cuda();
    let n = kiln::cuda::device_count();
    if n < 2 {
        println!("skipping: DataParallel over several GPUs needs at least 2 CUDA devices, found {n}");
        return;
    }
    let all: Vec<Device> = (0..n).map(Device::Cuda).collect();
    matches_bare(all.clone(), Device::Cuda(0));
    matches_bare(all, Device::Cuda(n - 1));
    // The default options take every visible device.
    kiln::manual_seed(10);
    let dp = DataParallel::new(Net::new);
    assert_eq!(dp.device_ids().len(), n);
    let y = dp.forward(&Tensor::randn([2 * n + 1, 16]).to(&Device::Cuda(0)));
    assert_eq!((y.shape(), y.device()), (&[2 * n + 1, 4][..], Device::Cuda(0)));
}
