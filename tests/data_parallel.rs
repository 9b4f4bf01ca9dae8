//! `nn::DataParallel` on the CPU: without a GPU it runs the wrapped module unchanged; with CPU
//! `device_ids` it takes the multi-replica path (scatter, replicas on threads, gather,
//! gradients summed into the wrapped module), which must equal the bare module forward,
//! backward, in a training loop and inside `kiln::compile`; state-dict names carry PyTorch's
//! `module.` prefix; errors name the op and the caller's line. The CUDA devices are tested in
//! `tests/cuda_data_parallel.rs`.

use kiln::nn::{self, DataParallel, DataParallelOpts, Module};
use kiln::prelude::*;
use std::sync::Mutex;
use std::thread::ThreadId;

#[path = "common/compiled_training.rs"]
mod compiled_training;
#[path = "common/seeded.rs"]
mod seeded;
use compiled_training::Trained;
use seeded::seeded;

const HERE: &str = "tests/data_parallel.rs";

#[derive(Module)]
struct Net {
    fc1: nn::Linear,
    drop: nn::Dropout,
    fc2: nn::Linear,
}

impl Net {
    fn new() -> Net {
        Net { fc1: nn::Linear::new(4, 8), drop: nn::Dropout::new(0.0), fc2: nn::Linear::new(8, 3) }
    }
}

impl Module for Net {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.fc2.forward(&self.drop.forward(&F::relu(&self.fc1.forward(x))))
    }
}

/// `DataParallel` over `n` CPU replicas.
fn on_cpus(n: usize, make: impl Fn() -> Net) -> DataParallel<Net> {
    DataParallel::with_opts(make, DataParallelOpts { device_ids: Some(vec![Device::Cpu; n]), ..Default::default() })
}

/// A bare `Net` and a `DataParallel` one with the same weights (both drawn from seed `seed`).
fn pair(seed: u64, replicas: usize) -> (Net, DataParallel<Net>) {
    kiln::manual_seed(seed);
    let bare = Net::new();
    kiln::manual_seed(seed);
    let dp = on_cpus(replicas, Net::new);
    (bare, dp)
}

fn close(a: &Tensor, b: &Tensor) -> bool {
    a.shape() == b.shape() && a.allclose(b, 1e-6, 1e-6)
}

#[test]
fn without_devices_the_module_runs_unchanged() {
    let _seeded = seeded();
    if kiln::cuda::device_count() > 0 {
        println!("skipping: CUDA devices are visible, so DataParallel::new uses them");
        return;
    }
    kiln::manual_seed(1);
    let bare = Net::new();
    kiln::manual_seed(1);
    let dp = DataParallel::new(Net::new);
    assert!(dp.device_ids().is_empty() && dp.output_device().is_none());
    let x = Tensor::randn([5, 4]);
    assert!(dp.forward(&x).allclose(&bare.forward(&x), 0.0, 0.0));
}

#[test]
fn names_carry_the_module_prefix() {
    let _seeded = seeded();
    let (bare, dp) = pair(2, 2);
    let want: Vec<String> = bare.state_dict().keys().map(|k| format!("module.{k}")).collect();
    let got: Vec<String> = dp.state_dict().keys().map(str::to_string).collect();
    assert_eq!(got, want);
    assert_eq!(got[0], "module.fc1.weight");
    let named: Vec<String> = dp.named_parameters().into_iter().map(|(k, _)| k).collect();
    assert_eq!(named, ["module.fc1.weight", "module.fc1.bias", "module.fc2.weight", "module.fc2.bias"]);
    // The parameters are the wrapped module's own tensors, not the replicas'.
    for (p, q) in dp.parameters().iter().zip(dp.module().parameters()) {
        assert!(p.shares_storage_with(&q));
    }
    assert!(dp.to_string().starts_with("DataParallel(\n  (module): Net(\n    (fc1): Linear(in_features=4"), "{dp}");
    // A bare checkpoint loads through module_mut; the wrapped one through the wrapper.
    let (mut other, mut other_dp) = pair(3, 2);
    other.load_state_dict(&bare.state_dict()).unwrap();
    other_dp.load_state_dict(&dp.state_dict()).unwrap();
    other_dp.module_mut().load_state_dict(&bare.state_dict()).unwrap();
    let x = Tensor::randn([4, 4]);
    assert!(close(&other_dp.forward(&x), &other.forward(&x)));
}

/// The threads `Probe::forward` ran on.
static THREADS: Mutex<Vec<ThreadId>> = Mutex::new(Vec::new());

/// `Net` that records its thread, and refuses a chunk of one row.
#[derive(Module)]
struct Probe {
    net: Net,
}

impl Module for Probe {
    fn forward(&self, x: &Tensor) -> Tensor {
        THREADS.lock().unwrap().push(std::thread::current().id());
        assert!(x.size(0) > 1, "a chunk of one row");
        self.net.forward(x)
    }
}

#[test]
fn replicas_run_on_threads_and_match_the_bare_module() {
    let _seeded = seeded();
    let (bare, dp) = pair(4, 3);
    assert_eq!(dp.device_ids(), [Device::Cpu; 3]);
    assert_eq!(dp.output_device(), Some(Device::Cpu));
    // The replicas' draws are undone: the generator goes on as after one bare module.
    let after_dp = Tensor::rand([3]);
    kiln::manual_seed(4);
    let _ = Net::new();
    assert_eq!(after_dp.to_vec::<f32>(), Tensor::rand([3]).to_vec::<f32>());
    // 7 rows scatter as 3 + 3 + 1.
    let x = Tensor::randn([7, 4]).requires_grad_(true);
    let x_bare = x.detach().requires_grad_(true);
    let y = dp.forward(&x);
    let y_bare = bare.forward(&x_bare);
    assert!(close(&y, &y_bare), "{y} vs {y_bare}");
    let w = Tensor::randn([7, 3]);
    (&y * &w).sum().backward();
    (&y_bare * &w).sum().backward();
    assert!(close(&x.grad().unwrap(), &x_bare.grad().unwrap()));
    for ((name, p), q) in dp.named_parameters().into_iter().zip(bare.parameters()) {
        let (g, h) = (p.grad().unwrap_or_else(|| panic!("{name}: no gradient")), q.grad().unwrap());
        assert!(close(&g, &h), "{name}: {g} vs {h}");
    }
    // Two rows: two chunks, so only two replicas run. Under no_grad nothing is recorded.
    let _off = kiln::no_grad_guard();
    let y2 = dp.forward(&x.detach().narrow(0, 0, 2));
    assert!(!y2.requires_grad() && close(&y2, &y_bare.detach().narrow(0, 0, 2)));

    // Each replica on a thread of its own.
    THREADS.lock().unwrap().clear();
    kiln::manual_seed(5);
    let probe = DataParallel::with_opts(
        || Probe { net: Net::new() },
        DataParallelOpts { device_ids: Some(vec![Device::Cpu; 3]), ..Default::default() },
    );
    probe.forward(&Tensor::randn([6, 4]));
    let seen = THREADS.lock().unwrap().clone();
    assert_eq!(seen.len(), 3);
    assert!(seen.iter().all(|t| *t != std::thread::current().id()), "{seen:?}");
    assert!(seen[0] != seen[1] && seen[1] != seen[2] && seen[0] != seen[2], "{seen:?}");
    // A replica's panic is an error naming it, at the caller's line.
    let e = probe.try_forward(&Tensor::randn([5, 4])).unwrap_err();
    assert!(e.op == "DataParallel" && e.location.file() == HERE, "{e}");
    assert!(e.to_string().contains("replica 2 on device cpu") && e.to_string().contains("a chunk of one row"), "{e}");
}

#[test]
fn replicas_follow_the_modules_train_flags() {
    let _seeded = seeded();
    kiln::manual_seed(6);
    let mut dp = on_cpus(2, || Net { drop: nn::Dropout::new(1.0), ..Net::new() });
    let x = Tensor::randn([4, 4]);
    // p = 1 in train mode zeroes fc1's activations on every replica: the output is fc2's bias.
    let bias = dp.module().fc2.bias.clone().unwrap();
    let train = dp.forward(&x);
    assert!(close(&train, &bias.expand([4, 3])), "{train}");
    dp.eval();
    let eval = dp.forward(&x);
    assert!(close(&eval, &dp.module().forward(&x)), "{eval}");
    assert!(!close(&eval, &train));
}

/// 4 SGD steps of `model`, compiled or eager.
fn train(model: &dyn Module, compiled: bool) -> Trained {
    let x = Tensor::randn([8, 4]);
    let y = Tensor::randint(0, 3, [8]);
    let criterion = nn::CrossEntropyLoss::new();
    Trained::sgd(model.parameters(), || criterion.forward(&model.forward(&x), &y), compiled, 4)
}

#[test]
fn training_matches_the_bare_module_eager_and_compiled() {
    let _seeded = seeded();
    kiln::manual_seed(7);
    let bare = train(&Net::new(), false);
    for (replicas, compiled) in [(2, false), (3, true)] {
        kiln::manual_seed(7);
        // Compiled, the replicas run one after the other into the step's one graph.
        train(&on_cpus(replicas, Net::new), compiled).assert_matches(&bare, 1e-5);
    }
}

#[test]
fn bad_options_and_inputs_name_the_op_and_the_callers_line() {
    let _seeded = seeded();
    let error = |e: kiln::Error, parts: &[&str]| {
        let text = e.to_string();
        assert!(e.op == "DataParallel" && e.location.file() == HERE, "{text}");
        for p in parts {
            assert!(text.contains(p), "{text:?} should contain {p:?}");
        }
    };
    let opts = |ids: Vec<Device>| DataParallelOpts { device_ids: Some(ids), ..Default::default() };
    error(DataParallel::try_with_opts(Net::new, opts(vec![])).err().unwrap(), &["device_ids is empty"]);
    let missing = Device::Cuda(kiln::cuda::device_count());
    error(DataParallel::try_with_opts(Net::new, opts(vec![Device::Cpu, missing])).err().unwrap(), &["does not exist"]);
    // A constructor whose replicas differ from the module.
    let calls = Mutex::new(0);
    let growing = || {
        let mut n = calls.lock().unwrap();
        *n += 1;
        Net { fc1: nn::Linear::new(4, 8 * *n), fc2: nn::Linear::new(8 * *n, 3), drop: nn::Dropout::new(0.0) }
    };
    error(DataParallel::try_with_opts(growing, opts(vec![Device::Cpu; 2])).err().unwrap(), &["differ", "fc1.weight"]);
    let dp = on_cpus(2, Net::new);
    error(dp.try_forward(&Tensor::scalar(1.0f32)).unwrap_err(), &["cannot scatter", "[]", "dim 0"]);
    error(dp.try_forward(&Tensor::zeros([0, 4])).unwrap_err(), &["cannot scatter", "[0, 4]"]);
    let text = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(dp.forward(&Tensor::zeros([0, 4])))))
        .expect_err("a panic")
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(text.contains(&format!("(at {HERE}:")), "{text}");
}
