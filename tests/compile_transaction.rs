//! A compiled call is a transaction: when it fails (a panic in the closure, or kiln's own
//! error while its graph runs), every tensor it would have written — parameters, `.grad`,
//! optimizer state — is left as the call found it, readable at once, and the next call
//! continues as eager training would have.

use kiln::nn::{self, functional as F, Module};
use kiln::optim::{Adam, AdamConfig, Optimizer, SGDConfig, SGD};
use kiln::prelude::*;
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
#[path = "common/seeded.rs"]
mod seeded;
use seeded::seeded;

#[derive(Module)]
struct Mlp {
    fc1: nn::Linear,
    fc2: nn::Linear,
}

impl Module for Mlp {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.fc2.forward(&F::relu(&self.fc1.forward(x)))
    }
}

/// Where a step fails.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fail {
    Nowhere,
    /// A user panic after the forward pass was captured.
    AfterForward,
    /// A user panic after backward (the gradients are captured, not realized).
    AfterBackward,
    /// A user panic after the optimizer's update was captured.
    AfterStep,
    /// A graph break (`item`) realizes the forward and backward, then the update is captured
    /// and the closure panics.
    AfterBreakAndStep,
    /// A graph break after the update realizes it (installing new parameters and moments),
    /// then the closure panics.
    AfterStepAndBreak,
    /// An out-of-range `index_select` captured after the update: kiln's error surfaces when
    /// the step's graph runs.
    BadIndexAfterStep,
}

const FAILURES: [Fail; 6] = [
    Fail::AfterForward,
    Fail::AfterBackward,
    Fail::AfterStep,
    Fail::AfterBreakAndStep,
    Fail::AfterStepAndBreak,
    Fail::BadIndexAfterStep,
];

fn model() -> (Mlp, Adam) {
    kiln::manual_seed(11);
    let net = Mlp { fc1: nn::Linear::new(6, 8), fc2: nn::Linear::new(8, 3) };
    let opt = Adam::new(net.parameters(), AdamConfig { lr: 0.01, ..Default::default() });
    (net, opt)
}

fn batch() -> (Tensor, Tensor) {
    kiln::manual_seed(5);
    (Tensor::randn([5, 6]), Tensor::randint(0, 3, [5]))
}

/// One training step that fails as `fail` says; the extra tensor keeps the bad index's result
/// alive (an unused result would be dead code, never run).
fn step_body(
    net: &Mlp,
    opt: &mut Adam,
    x: &Tensor,
    y: &Tensor,
    fail: Fail,
    leaked: &RefCell<Option<Tensor>>,
) -> (Tensor, Option<Tensor>) {
    opt.zero_grad();
    let loss = nn::CrossEntropyLoss::new().forward(&net.forward(x), y);
    *leaked.borrow_mut() = Some(&loss * 2.0);
    if fail == Fail::AfterForward {
        panic!("user failure after forward");
    }
    loss.backward();
    if fail == Fail::AfterBackward {
        panic!("user failure after backward");
    }
    if fail == Fail::AfterBreakAndStep {
        assert!(loss.item::<f32>().is_finite());
    }
    opt.step();
    if fail == Fail::AfterStepAndBreak {
        assert!(net.fc1.weight.sum().item::<f32>().is_finite());
    }
    if matches!(fail, Fail::AfterStep | Fail::AfterBreakAndStep | Fail::AfterStepAndBreak) {
        panic!("user failure after step");
    }
    let extra = (fail == Fail::BadIndexAfterStep).then(|| x.index_select(0, &Tensor::from_slice(&[0i64, 99])));
    (loss, extra)
}

/// Every value the step may write: parameters, gradients, the optimizer's state dict.
fn snapshot(net: &Mlp, opt: &Adam) -> Vec<(String, Option<Vec<f32>>)> {
    let mut out = Vec::new();
    for (name, p) in net.named_parameters() {
        out.push((name.clone(), Some(p.to_vec::<f32>())));
        out.push((format!("{name}.grad"), p.grad().map(|g| g.to_vec::<f32>())));
    }
    for (name, t) in opt.state_dict().iter() {
        out.push((format!("opt.{name}"), Some(t.to_dtype(DType::F32).to_vec::<f32>())));
    }
    out
}

fn assert_close(a: &[(String, Option<Vec<f32>>)], b: &[(String, Option<Vec<f32>>)], tol: f32, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: entries differ");
    for ((na, va), (nb, vb)) in a.iter().zip(b) {
        assert_eq!(na, nb, "{what}");
        match (va, vb) {
            (Some(x), Some(y)) => {
                assert_eq!(x.len(), y.len(), "{what}: {na}");
                for (p, q) in x.iter().zip(y) {
                    assert!((p - q).abs() <= tol * (1.0 + q.abs()), "{what}: {na}: {p} vs {q}");
                }
            }
            (None, None) => {}
            _ => panic!("{what}: {na}: {va:?} vs {vb:?}"),
        }
    }
}

/// Serializes the tests that seed the process-wide generator (tests run on parallel threads).
static SEEDED: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `good` successful compiled steps, then one that fails as `fail` says, then one more
/// successful step; checks the state right after the failure and against eager training.
fn fails_and_recovers(fail: Fail, good: usize) {
    let _seeded = SEEDED.lock().unwrap_or_else(|e| e.into_inner());
    let (x, y) = batch();
    let (net, mut opt) = model();
    let leaked = RefCell::new(None);
    let mut step =
        kiln::compile(|(net, opt, fail): (&Mlp, &mut Adam, Fail)| step_body(net, opt, &x, &y, fail, &leaked));
    for _ in 0..good {
        step.call((&net, &mut opt, Fail::Nowhere));
    }
    let before = snapshot(&net, &opt);
    let failed = catch_unwind(AssertUnwindSafe(|| step.call((&net, &mut opt, fail))));
    let message = failed.expect_err("the step fails");
    if fail == Fail::BadIndexAfterStep {
        let text = message.downcast_ref::<String>().expect("kiln's error is a String");
        assert!(text.contains("index_select") && text.contains("99"), "{text}");
    }
    // Readable at once, exactly as before the call.
    assert_eq!(snapshot(&net, &opt), before, "{fail:?}: the failed call changed state");
    if good == 0 {
        assert!(net.parameters().iter().all(|p| p.grad().is_none() && opt.state(p).is_none()), "{fail:?}");
    }
    // A checkpoint can be written and read back.
    let path = std::env::temp_dir().join(format!("kiln-txn-{}-{fail:?}-{good}.safetensors", std::process::id()));
    kiln::save(&net.state_dict(), &path).expect("save after a failed call");
    let loaded = kiln::load(&path).expect("load");
    std::fs::remove_file(&path).ok();
    assert_eq!(loaded.get("fc1.weight").expect("saved").to_vec::<f32>(), net.fc1.weight.to_vec::<f32>());
    // A tensor the failed call was computing has no data: reading it says so.
    if let Some(t) = leaked.borrow_mut().take() {
        if matches!(fail, Fail::AfterForward | Fail::AfterBackward | Fail::AfterStep | Fail::BadIndexAfterStep) {
            let e = catch_unwind(AssertUnwindSafe(|| t.item::<f32>())).expect_err("no data");
            let text = e.downcast_ref::<String>().cloned().unwrap_or_default();
            assert!(text.contains("failed") && text.contains("compile_transaction.rs"), "{text}");
        }
    }
    // The next call continues as eager training does.
    step.call((&net, &mut opt, Fail::Nowhere));
    let (twin, mut twin_opt) = model();
    for _ in 0..=good {
        step_body(&twin, &mut twin_opt, &x, &y, Fail::Nowhere, &RefCell::new(None));
    }
    assert_close(&snapshot(&net, &opt), &snapshot(&twin, &twin_opt), 1e-5, &format!("{fail:?} after {good} steps"));
    let steps = opt.state(&net.fc1.weight).expect("stepped").step;
    assert_eq!(steps, (good + 1) as f64, "{fail:?}: Adam's step count");
}

#[test]
fn a_failed_call_leaves_the_state_it_found() {
    let _seeded = seeded();
    for fail in FAILURES {
        fails_and_recovers(fail, 2);
    }
}

#[test]
fn a_failed_first_call_leaves_no_state() {
    let _seeded = seeded();
    for fail in FAILURES {
        fails_and_recovers(fail, 0);
    }
}

#[test]
fn eager_writes_inside_a_failed_call_are_undone() {
    let _seeded = seeded();
    // index_fill_ has no capture: inside a compiled call it writes the storage eagerly.
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0]);
    let w = Tensor::from_slice(&[1.0f32, 2.0, 3.0]);
    let first = Tensor::from_slice(&[0i64]);
    let mut step = kiln::compile(|fail: bool| {
        // Written eagerly before the call touches it otherwise: journaled as a copy.
        a.index_fill_(0, &first, 50.0);
        // Captured, realized by the eager write after it (a graph break), then written.
        w.mul_(2.0);
        w.index_fill_(0, &first, 100.0);
        assert_eq!(w.to_vec::<f32>(), [100.0, 4.0, 6.0]);
        if fail {
            panic!("user failure");
        }
    });
    let (va, vw) = (a.version(), w.version());
    assert!(catch_unwind(AssertUnwindSafe(|| step.call(true))).is_err());
    assert_eq!(a.to_vec::<f32>(), [1.0, 2.0, 3.0]);
    assert_eq!(w.to_vec::<f32>(), [1.0, 2.0, 3.0]);
    assert!(a.version() > va && w.version() > vw, "restoring the data counts as a change");
    step.call(false);
    assert_eq!(a.to_vec::<f32>(), [50.0, 2.0, 3.0]);
    assert_eq!(w.to_vec::<f32>(), [100.0, 4.0, 6.0]);
}

#[test]
fn another_thread_reads_parameters_while_compiled_steps_update_them() {
    let _seeded = seeded();
    kiln::manual_seed(3);
    let w = Tensor::randn([64]).requires_grad_(true);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let reads = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let v = w.detach().to_vec::<f32>();
                assert!(v.len() == 64 && v.iter().all(|x| x.is_finite()));
                reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
        let mut opt = SGD::new([w.clone()], SGDConfig { lr: 0.01, momentum: 0.9, ..Default::default() });
        let mut step = kiln::compile(|opt: &mut SGD| {
            opt.zero_grad();
            let loss = (&w * &w).sum();
            loss.backward();
            opt.step();
            loss
        });
        // At least 300 steps, and on until the reader has read 20 times during them (on a busy
        // machine its thread may start late); bounded, so a reader that never runs fails.
        let reads_before = reads.load(std::sync::atomic::Ordering::Relaxed);
        let mut steps = 0;
        while steps < 300 || (reads.load(std::sync::atomic::Ordering::Relaxed) < reads_before + 20 && steps < 200_000) {
            step.call(&mut opt);
            steps += 1;
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        reader.join().expect("the reader never panics");
        assert!(
            reads.load(std::sync::atomic::Ordering::Relaxed) >= reads_before + 20,
            "the reader read while the steps ran"
        );
    });
}
