//! The speed dashboard of docs/perf.md: eager kiln against `kiln::compile` on the workloads of
//! the training-speed issue, each next to the limit the machine allows, measured in the same
//! run (a memcpy of the bytes an ideal kernel moves, an in-place update of the bytes an
//! optimizer moves, the step's FLOP at the measured FMA peak), and each target marked met or
//! not. With PyTorch's times of the same workloads in a file (`KILN_TORCH_TIMES=FILE`, written
//! by `python3 scripts/bench_torch.py --out FILE`), the eager-against-PyTorch targets are
//! checked too.
//!
//! `cargo bench --all-features --bench compile [-- CASE…]` prints the Markdown table.

use kiln::nn::{self, functional as F, Module};
use kiln::optim::{Adadelta, AdadeltaConfig, Adam, AdamConfig, Optimizer, SGDConfig, SGD};
use kiln::prelude::*;
use std::collections::HashMap;
use std::hint::black_box;
use std::time::Instant;

mod common;
use common::{conv_products, time_interleaved, GemmProducts, InPlaceUpdate, Memcpy};
#[path = "../tests/common/blitz_net.rs"]
mod blitz_net;
#[path = "common/mlp.rs"]
mod mlp;
#[path = "../examples/common/mnist.rs"]
#[allow(dead_code)]
mod mnist_example;
#[path = "common/peak.rs"]
mod peak;
use mlp::Mlp;

/// Rounds each case times its eager, compiled and limit runs in (medians).
const ROUNDS: usize = 9;

/// A target and whether the run met it.
struct Target {
    text: String,
    met: bool,
}

/// `Target` from its text and condition.
fn target(text: impl Into<String>, met: bool) -> Target {
    Target { text: text.into(), met }
}

/// What a case measured, as one dashboard row.
struct Row<'a> {
    workload: &'a str,
    /// The limit measured in the run (text with its time), or a dash.
    limit: String,
    eager: f64,
    compiled: f64,
    targets: Vec<Target>,
}

/// Seconds as milliseconds (or microseconds below 0.1 ms) for the table.
fn secs(t: f64) -> String {
    if t < 1e-4 {
        format!("{:.1} µs", t * 1e6)
    } else {
        format!("{:.2} ms", t * 1e3)
    }
}

impl Row<'_> {
    fn print(&self) {
        let text: Vec<&str> = self.targets.iter().map(|t| t.text.as_str()).collect();
        let met: Vec<&str> = self.targets.iter().map(|t| if t.met { "yes" } else { "**no**" }).collect();
        println!(
            "| {} | {} | {} | {} | {:.2}× | {} | {} |",
            self.workload,
            self.limit,
            secs(self.eager),
            secs(self.compiled),
            self.eager / self.compiled,
            text.join("; "),
            met.join("; ")
        );
    }
}

/// The share of a limit a run reaches: `limit / t` in percent.
fn pct(limit: f64, t: f64) -> f64 {
    100.0 * limit / t
}

/// A "reaches at least `min`% of the limit" target for the time `t` of `who`.
fn share(who: &str, limit: f64, t: f64, min: f64) -> Target {
    let p = pct(limit, t);
    target(format!("{who} {p:.0}% of limit (≥ {min:.0}%)"), p >= min)
}

/// PyTorch's eager times of the workloads, by key, from the file `KILN_TORCH_TIMES` names
/// (lines `key<TAB>milliseconds`), when it is set.
fn torch_times() -> HashMap<String, f64> {
    let Ok(path) = std::env::var("KILN_TORCH_TIMES") else { return HashMap::new() };
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("KILN_TORCH_TIMES={path}: {e}"));
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once('\t')?;
            Some((k.to_string(), v.trim().parse::<f64>().ok()? / 1e3))
        })
        .collect()
}

/// The eager-against-PyTorch target of workload `key`, when PyTorch's time is known.
fn against_torch(torch: &HashMap<String, f64>, key: &str, eager: f64) -> Option<Target> {
    torch.get(key).map(|&t| target(format!("eager ≤ PyTorch eager {}", secs(t)), eager <= t))
}

/// `gelu_tanh(x*a + b)` written as primitive ops.
fn gelu_chain(x: &Tensor, a: &Tensor, b: &Tensor) -> Tensor {
    let z = x * a + b;
    let inner = (&z + &z * &z * &z * 0.044715) * 0.7978845608;
    &z * 0.5 * (inner.tanh() + 1.0)
}

/// Prints the row of a memory-bound workload: `compiled` and `eager` timed against a memcpy of
/// `elems` f32 values (the faster of its one-thread and pool-split forms; `bytes` per element
/// in the limit's text), interleaved round by round. Targets: the compiled form reaches `min`%
/// of the memcpy, `extra(eager, compiled)`, and eager ≤ PyTorch's `key` time when known.
#[allow(clippy::too_many_arguments)]
fn memory_case(
    workload: &str,
    key: &str,
    torch: &HashMap<String, f64>,
    (elems, bytes): (usize, usize),
    min: f64,
    compiled: &mut dyn FnMut(),
    eager: &mut dyn FnMut(),
    extra: impl Fn(f64, f64) -> Vec<Target>,
) {
    let m = std::cell::RefCell::new(Memcpy::new(elems));
    let t = time_interleaved(
        ROUNDS,
        &mut [compiled, eager, &mut || m.borrow_mut().single(), &mut || m.borrow_mut().parallel()],
    );
    let (compiled, eager, copy) = (t[0], t[1], t[2].min(t[3]));
    let mut targets = vec![share("compiled", copy, compiled, min)];
    targets.extend(extra(eager, compiled));
    targets.extend(against_torch(torch, key, eager));
    let limit = format!("memcpy {bytes} B/elem {}", secs(copy));
    Row { workload, limit, eager, compiled, targets }.print();
}

/// Case `gelu`: the GELU chain on [4096, 4096]: 16 bytes per element (x, a read; b broadcast;
/// y written).
fn gelu(torch: &HashMap<String, f64>) {
    let n = 4096;
    let (x, a, b) = (Tensor::randn([n, n]), Tensor::randn([n, n]), Tensor::randn([n]));
    let gelu = std::cell::RefCell::new(kiln::compile(|(x, a, b): (&Tensor, &Tensor, &Tensor)| gelu_chain(x, a, b)));
    memory_case(
        "GELU chain `gelu_tanh(x*a+b)`, 11 primitive ops [4096²] f32",
        "gelu",
        torch,
        (2 * n * n, 16),
        80.0,
        &mut || drop(black_box(gelu.borrow_mut().call((&x, &a, &b)))),
        &mut || drop(black_box(gelu_chain(&x, &a, &b))),
        |eager, compiled| vec![target("compiled ≥ 3× eager", eager >= 3.0 * compiled)],
    );
}

/// Case `gelu_bf16`: the GELU chain on [2048, 2048] in bf16 (x, a read; b broadcast; y
/// written: 6 bytes per element), compiled (one kernel on the F32X4 plan: bf16 lanes rounded
/// after every op, the tanh by the eager routine on each lane, so bit for bit eager's) and
/// eager, against a memcpy of those bytes and the same chain compiled in f32, interleaved in
/// the same run. Targets: one kernel, compiled faster than eager, and compiled within 2× of
/// the f32 kernel (bf16's rounding after each op and the eager tanh per element cost more
/// than the f32 kernel's inline arithmetic and tiled tanh).
fn gelu_bf16(_torch: &HashMap<String, f64>) {
    let n = 2048;
    let f32s = (Tensor::randn([n, n]), Tensor::randn([n, n]), Tensor::randn([n]));
    let bf = |t: &Tensor| t.to_dtype(DType::BF16);
    let bf16s = (bf(&f32s.0), bf(&f32s.1), bf(&f32s.2));
    let chain = || kiln::compile(|(x, a, b): (&Tensor, &Tensor, &Tensor)| gelu_chain(x, a, b));
    let (compiled_bf16, compiled_f32) = (std::cell::RefCell::new(chain()), std::cell::RefCell::new(chain()));
    let m = std::cell::RefCell::new(Memcpy::new(n * n * 6 / 8));
    let t = time_interleaved(
        ROUNDS,
        &mut [
            &mut || drop(black_box(compiled_bf16.borrow_mut().call((&bf16s.0, &bf16s.1, &bf16s.2)))),
            &mut || drop(black_box(gelu_chain(&bf16s.0, &bf16s.1, &bf16s.2))),
            &mut || drop(black_box(compiled_f32.borrow_mut().call((&f32s.0, &f32s.1, &f32s.2)))),
            &mut || m.borrow_mut().single(),
            &mut || m.borrow_mut().parallel(),
        ],
    );
    let (compiled, eager, f32_compiled, copy) = (t[0], t[1], t[2], t[3].min(t[4]));
    let stats = compiled_bf16.borrow().stats().clone();
    let targets = vec![
        target(
            format!("one kernel, no eager op ({} kernels, {} eager)", stats.kernels_launched, stats.eager_ops),
            stats.kernels_launched == 1 && stats.eager_ops == 0,
        ),
        target("compiled < eager", compiled < eager),
        target(
            format!(
                "compiled {:.0}% of limit, {:.2}× compiled f32 {} (≤ 2×)",
                pct(copy, compiled),
                compiled / f32_compiled,
                secs(f32_compiled)
            ),
            compiled <= 2.0 * f32_compiled,
        ),
    ];
    let limit = format!("memcpy 6 B/elem {}", secs(copy));
    Row { workload: "GELU chain `gelu_tanh(x*a+b)`, 11 primitive ops [2048²] bf16", limit, eager, compiled, targets }
        .print();
}

/// Case `optimizers`: one Adam step and one SGD-with-momentum step on a 16M-element
/// parameter. Compiled (the plan writes the parameter and state in place) and eager (the
/// one-pass kernel, kiln's default: PyTorch's `fused=True`) against the in-place update of the
/// same bytes.
fn optimizers(torch: &HashMap<String, f64>) {
    let len = 16 << 20;
    let param = || {
        let p = Tensor::randn([len]).requires_grad_(true);
        p.set_grad(Some(Tensor::randn([len])));
        vec![p]
    };
    let adam = Adam::new(param(), AdamConfig::default());
    optimizer_case("Adam step, one 16M f32 parameter", adam, InPlaceUpdate::new(len, 2), torch.get("adam_fused"));
    let sgd = SGD::new(param(), SGDConfig { lr: 0.01, momentum: 0.9, ..Default::default() });
    optimizer_case("SGD momentum step, one 16M f32 parameter", sgd, InPlaceUpdate::new(len, 1), None);
}

/// Prints the row of one step of `opt`, compiled and eager, against `baseline`; targets: both
/// reach 90% of it, and eager ≤ PyTorch's `fused=True` time when known.
fn optimizer_case(workload: &str, mut opt: impl Optimizer, mut baseline: InPlaceUpdate, torch: Option<&f64>) {
    opt.step(); // creates the state
    let step = std::cell::RefCell::new(kiln::compile(|()| opt.step()));
    let t = time_interleaved(
        ROUNDS,
        &mut [&mut || step.borrow_mut().call(()), &mut || step.borrow_mut().call_eager(()), &mut || baseline.run()],
    );
    let (compiled, eager, in_place) = (t[0], t[1], t[2]);
    let mut targets = vec![share("compiled", in_place, compiled, 90.0), share("eager", in_place, eager, 90.0)];
    targets.extend(torch.map(|&t| target(format!("eager ≤ PyTorch `fused=True` {}", secs(t)), eager <= t)));
    let limit = format!("in-place update {} B/elem {}", baseline.bytes_per_element(), secs(in_place));
    Row { workload, limit, eager, compiled, targets }.print();
}

/// Case `cross_entropy`: cross-entropy forward and backward on logits [8192, 1000]: logits
/// in, gradient out (8 bytes per element).
fn cross_entropy(torch: &HashMap<String, f64>) {
    let logits = Tensor::randn([8192, 1000]).requires_grad_(true);
    let target = Tensor::randint(0, 1000, [8192]);
    let ce = |(l, t): (&Tensor, &Tensor)| {
        l.set_grad(None);
        F::cross_entropy(l, t).backward();
        l.grad().expect("grad")
    };
    let step = std::cell::RefCell::new(kiln::compile(ce));
    memory_case(
        "cross-entropy fwd+bwd [8192, 1000]",
        "cross_entropy",
        torch,
        (8192 * 1000, 8),
        50.0,
        &mut || drop(black_box(step.borrow_mut().call((&logits, &target)))),
        &mut || drop(black_box(step.borrow_mut().call_eager((&logits, &target)))),
        |_, _| vec![],
    );
}

/// Case `layer_norm`: LayerNorm(1024) forward on [8192, 1024], no autograd: 8 bytes per
/// element.
fn layer_norm(torch: &HashMap<String, f64>) {
    let ln = nn::LayerNorm::new([1024]);
    let xs = Tensor::randn([8192, 1024]);
    let step = std::cell::RefCell::new(kiln::compile(|x: &Tensor| {
        let _g = kiln::no_grad_guard();
        ln.forward(x)
    }));
    memory_case(
        "LayerNorm(1024) forward [8192, 1024], no autograd",
        "layer_norm",
        torch,
        (8192 * 1024, 8),
        70.0,
        &mut || drop(black_box(step.borrow_mut().call(&xs))),
        &mut || drop(black_box(step.borrow_mut().call_eager(&xs))),
        |_, _| vec![],
    );
}

/// Seconds of one training step (`body`) on `(x, y)`, eager and compiled, and of the step's
/// matrix `products` through gemm (interleaved round by round), and of the first two compiled
/// calls together (cold).
fn train_step<'a>(
    body: impl FnMut((&Tensor, &Tensor)) -> Tensor + 'a,
    x: &Tensor,
    y: &Tensor,
    products: &[(usize, usize, usize)],
) -> StepTimes {
    let mut step = kiln::compile(body);
    let cold = Instant::now();
    step.call((x, y));
    step.call((x, y)); // the steady graph (the first call also creates the optimizer's state)
    let cold = cold.elapsed().as_secs_f64();
    // Warm-up: a large product's runs take the candidate spreads over threads in turn until
    // each has its timed runs (at most 6 candidates x 5 runs), then keep the fastest.
    for _ in 0..WARM_UP_CALLS {
        step.call((x, y));
    }
    let mut gemm = GemmProducts::new(products);
    let step = std::cell::RefCell::new(step);
    let t = time_interleaved(
        15,
        &mut [
            &mut || drop(black_box(step.borrow_mut().call((x, y)))),
            &mut || drop(black_box(step.borrow_mut().call_eager((x, y)))),
            &mut || gemm.run(),
        ],
    );
    StepTimes { compiled: t[0], eager: t[1], cold, gemm: t[2] }
}

/// The body of a training step of `net`: zero_grad, forward, cross-entropy, backward, SGD
/// (lr 0.01, momentum 0.9) step; returns the loss.
fn sgd_step<'a>(net: &'a dyn Module) -> impl FnMut((&Tensor, &Tensor)) -> Tensor + 'a {
    sgd_step_autocast(net, None)
}

/// [`sgd_step`] with forward and loss under `kiln::autocast("cpu", dtype)` when `autocast`
/// names a dtype (backward and the step outside, PyTorch's recipe).
fn sgd_step_autocast<'a>(
    net: &'a dyn Module,
    autocast: Option<DType>,
) -> impl FnMut((&Tensor, &Tensor)) -> Tensor + 'a {
    let mut opt = SGD::new(net.parameters(), SGDConfig { lr: 0.01, momentum: 0.9, ..Default::default() });
    let criterion = nn::CrossEntropyLoss::new();
    move |(x, y): (&Tensor, &Tensor)| {
        opt.zero_grad();
        let forward = || criterion.forward(&net.forward(x), y);
        let loss = match autocast {
            Some(dtype) => kiln::autocast("cpu", dtype, forward),
            None => forward(),
        };
        loss.backward();
        opt.step();
        loss
    }
}

/// Calls of a compiled training step before it is timed: by then every product shape has
/// chosen its spread over threads (`kiln_runtime::cpu::product_split`: at most 6 candidates,
/// 5 timed runs each).
const WARM_UP_CALLS: usize = 40;

/// What [`train_step`] measures, in seconds.
struct StepTimes {
    eager: f64,
    compiled: f64,
    cold: f64,
    gemm: f64,
}

/// The products of linear layers in one step: forward, weight gradient, and input gradient
/// (for the first layer only when `first_input_grad`: its input may be the data).
fn linear_products(batch: usize, layers: &[(usize, usize)], first_input_grad: bool) -> Vec<(usize, usize, usize)> {
    let mut p = Vec::new();
    for (i, &(fan_in, fan_out)) in layers.iter().enumerate() {
        p.push((batch, fan_in, fan_out));
        p.push((fan_out, batch, fan_in));
        if i > 0 || first_input_grad {
            p.push((batch, fan_out, fan_in));
        }
    }
    p
}

/// A training step's row: its limit is its products' FLOP at the machine's FMA peak (measured
/// here, before the step), with the products through gemm beside it; the compiled step must
/// reach `min_peak`% of the peak.
#[allow(clippy::too_many_arguments)]
fn step_row<'a>(
    workload: &str,
    key: &str,
    body: impl FnMut((&Tensor, &Tensor)) -> Tensor + 'a,
    (x, y): (&Tensor, &Tensor),
    products: &[(usize, usize, usize)],
    min_peak: Option<f64>,
    min_speedup: Option<f64>,
    torch: &HashMap<String, f64>,
) {
    // The peak before and after the step, keeping the higher: a single measurement sometimes
    // sees one core only (half the peak, which would flatter the step).
    let threads = kiln::get_num_threads();
    let before = peak::peak_flops(threads);
    let t = train_step(body, x, y, products);
    let peak = match (before, peak::peak_flops(threads)) {
        (Some(a), Some(b)) => Some(if a.0 >= b.0 { a } else { b }),
        (a, b) => a.or(b),
    };
    let flop: f64 = products.iter().map(|&(m, k, n)| 2.0 * (m * k * n) as f64).sum();
    let (limit, mut targets) = match peak {
        Some((peak, how)) => {
            let at_peak = flop / peak;
            (
                format!(
                    "{:.0} MFLOP at the {how} peak ({:.0} GFLOP/s) {}; gemm {}",
                    flop / 1e6,
                    peak / 1e9,
                    secs(at_peak),
                    secs(t.gemm)
                ),
                min_peak.map(|min| share("compiled", at_peak, t.compiled, min)).into_iter().collect(),
            )
        }
        None => (format!("gemm {} (no AVX2/FMA: peak not measured)", secs(t.gemm)), vec![]),
    };
    if let Some(min) = min_speedup {
        let speedup = t.eager / t.compiled;
        targets.push(target(format!("compiled {speedup:.2}× eager (≥ {min}×)"), speedup >= min));
    }
    targets.push(target(format!("first two compiled calls {} (≤ 300 ms)", secs(t.cold)), t.cold <= 0.3));
    targets.extend(against_torch(torch, key, t.eager));
    Row { workload, limit, eager: t.eager, compiled: t.compiled, targets }.print();
}

/// Case `mlp`: the MLP 784-512-512-10 training step, batch 128, SGD momentum.
fn mlp(torch: &HashMap<String, f64>) {
    let net = Mlp::new();
    let (x, y) = (Tensor::randn([128, 784]), Tensor::randint(0, 10, [128]));
    let products = linear_products(128, &[(784, 512), (512, 512), (512, 10)], false);
    let workload = "MLP 784-512-512-10 step, batch 128, SGD momentum";
    step_row(workload, "mlp", sgd_step(&net), (&x, &y), &products, Some(65.0), None, torch);
}

/// Case `cifar`: the blitz CIFAR net's training step, batch 64, SGD momentum; its products are
/// the convolutions' as im2col products and the linear layers'.
fn cifar(torch: &HashMap<String, f64>) {
    let net = blitz_net::Net::new();
    let (x, y) = (Tensor::randn([64, 3, 32, 32]), Tensor::randint(0, 10, [64]));
    let mut products = conv_products(64, 3, 6, 5, 28, true);
    products.extend(conv_products(64, 6, 16, 5, 10, false));
    products.extend(linear_products(64, &[(400, 120), (120, 84), (84, 10)], true));
    let workload = "blitz CIFAR net step, batch 64, SGD momentum";
    step_row(workload, "cifar", sgd_step(&net), (&x, &y), &products, Some(30.0), None, torch);
}

/// Case `autocast`: the steps of `mlp` and `cifar` under bf16 autocast, eager and compiled,
/// interleaved with the same steps in f32 (each with its own SGD over the same parameters).
/// The limit column holds the f32 times and the autocast/f32 ratios: the bf16 products run in
/// f32 on copies of their operands (a CPU without bf16 arithmetic gains nothing from bf16, so
/// autocast costs its casts here). Target: the compiled autocast step beats the eager one.
fn autocast(_torch: &HashMap<String, f64>) {
    let net = Mlp::new();
    let (x, y) = (Tensor::randn([128, 784]), Tensor::randint(0, 10, [128]));
    autocast_row("MLP 784-512-512-10 step, batch 128, SGD momentum, bf16 autocast", &net, (&x, &y));
    let net = blitz_net::Net::new();
    let (x, y) = (Tensor::randn([64, 3, 32, 32]), Tensor::randint(0, 10, [64]));
    autocast_row("blitz CIFAR net step, batch 64, SGD momentum, bf16 autocast", &net, (&x, &y));
}

/// One row of case `autocast`: `net`'s SGD step under bf16 autocast and in f32, each eager and
/// compiled (warmed up like [`train_step`]), timed round by round.
fn autocast_row(workload: &str, net: &dyn Module, (x, y): (&Tensor, &Tensor)) {
    let mut amp = kiln::compile(sgd_step_autocast(net, Some(DType::BF16)));
    let mut full = kiln::compile(sgd_step(net));
    for _ in 0..WARM_UP_CALLS {
        amp.call((x, y));
        full.call((x, y));
    }
    let (amp, full) = (std::cell::RefCell::new(amp), std::cell::RefCell::new(full));
    let t = time_interleaved(
        ROUNDS,
        &mut [
            &mut || drop(black_box(amp.borrow_mut().call((x, y)))),
            &mut || drop(black_box(amp.borrow_mut().call_eager((x, y)))),
            &mut || drop(black_box(full.borrow_mut().call((x, y)))),
            &mut || drop(black_box(full.borrow_mut().call_eager((x, y)))),
        ],
    );
    let (compiled, eager, f32_compiled, f32_eager) = (t[0], t[1], t[2], t[3]);
    let stats = amp.borrow().stats().clone();
    let limit = format!(
        "f32 step: eager {}, compiled {}; autocast / f32: eager {:.2}×, compiled {:.2}×",
        secs(f32_eager),
        secs(f32_compiled),
        eager / f32_eager,
        compiled / f32_compiled
    );
    let targets = vec![target(
        format!("compiled < eager ({} kernels, {} eager ops)", stats.kernels_launched, stats.eager_ops),
        compiled < eager,
    )];
    Row { workload, limit, eager, compiled, targets }.print();
}

/// Case `mnist`: the MNIST example's training step (its network, batch 64, `nll_loss` on the
/// log-probabilities, Adadelta lr 1.0), compiled against eager.
fn mnist(torch: &HashMap<String, f64>) {
    let net = mnist_example::Net::new();
    let (x, y) = (Tensor::randn([64, 1, 28, 28]), Tensor::randint(0, 10, [64]));
    let mut opt = Adadelta::new(net.parameters(), AdadeltaConfig { lr: 1.0, ..Default::default() });
    let body = |(x, y): (&Tensor, &Tensor)| {
        opt.zero_grad();
        let loss = F::nll_loss(&net.forward(x), y);
        loss.backward();
        opt.step();
        loss
    };
    let mut products = conv_products(64, 1, 32, 3, 26, true);
    products.extend(conv_products(64, 32, 64, 3, 24, false));
    products.extend(linear_products(64, &[(9216, 128), (128, 10)], true));
    let workload = "MNIST example step, batch 64, Adadelta";
    step_row(workload, "mnist", body, (&x, &y), &products, None, Some(1.4), torch);
}

/// Case `tiny_mlp`: a Linear(8,8)-ReLU-Linear(8,2) SGD step on a batch of 16, where the cost
/// of capturing and starting a plan is all there is (blocks of 200 calls).
fn tiny_mlp(_: &HashMap<String, f64>) {
    let net = nn::Sequential::new().add(nn::Linear::new(8, 8)).add(nn::ReLU).add(nn::Linear::new(8, 2));
    let (x, y) = (Tensor::randn([16, 8]), Tensor::randint(0, 2, [16]));
    let step = std::cell::RefCell::new(kiln::compile(sgd_step(&net)));
    const CALLS: usize = 200;
    let t = time_interleaved(
        15,
        &mut [&mut || (0..CALLS).for_each(|_| drop(black_box(step.borrow_mut().call((&x, &y))))), &mut || {
            (0..CALLS).for_each(|_| drop(black_box(step.borrow_mut().call_eager((&x, &y)))))
        }],
    );
    let (compiled, eager) = (t[0] / CALLS as f64, t[1] / CALLS as f64);
    let targets = vec![target(format!("compiled {:.2}× eager (≤ 0.7×)", compiled / eager), compiled <= 0.7 * eager)];
    Row { workload: "tiny MLP 8-8-2 step, batch 16, SGD momentum", limit: "–".into(), eager, compiled, targets }
        .print();
}

/// Case `cache_hit`: a compiled call at a plan-cache hit: 1,000 ops on one-element tensors.
fn cache_hit(_: &HashMap<String, f64>) {
    let one = Tensor::ones([1]);
    let chain = |x: &Tensor| {
        let mut y = x.clone();
        for i in 0..1000 {
            y = if i % 2 == 0 { &y * 1.0001 } else { &y + 0.5 };
        }
        y
    };
    let small = std::cell::RefCell::new(kiln::compile(chain));
    let t = time_interleaved(
        15,
        &mut [&mut || drop(black_box(small.borrow_mut().call(&one))), &mut || {
            drop(black_box(small.borrow_mut().call_eager(&one)))
        }],
    );
    let (compiled, eager) = (t[0], t[1]);
    let targets = vec![
        target(format!("compiled {:.2}× eager (≤ 0.2×)", compiled / eager), compiled <= 0.2 * eager),
        target(
            format!("{:.0} ns per op, all included (capture ≤ 50 ns)", compiled * 1e9 / 1000.0),
            compiled * 1e9 / 1000.0 <= 50.0,
        ),
    ];
    Row {
        workload: "1,000 captured ops on one element, at a plan-cache hit",
        limit: "–".into(),
        eager,
        compiled,
        targets,
    }
    .print();
}

/// Runs the cases named on the command line (any part of a case's name: `cargo bench
/// --bench compile -- mlp`), or all of them.
fn main() {
    kiln::manual_seed(0);
    let torch = torch_times();
    println!(
        "threads: {}; PyTorch times: {}\n",
        kiln::get_num_threads(),
        if torch.is_empty() { "none (KILN_TORCH_TIMES unset)" } else { "from KILN_TORCH_TIMES" }
    );
    println!("| workload | limit (same run) | eager | compiled | eager / compiled | targets | met |");
    println!("|---|---|---|---|---|---|---|");
    let cases: [(&str, fn(&HashMap<String, f64>)); 11] = [
        ("mlp", mlp),
        ("cifar", cifar),
        ("autocast", autocast),
        ("mnist", mnist),
        ("cross_entropy", cross_entropy),
        ("layer_norm", layer_norm),
        ("gelu", gelu),
        ("gelu_bf16", gelu_bf16),
        ("optimizers", optimizers),
        ("tiny_mlp", tiny_mlp),
        ("cache_hit", cache_hit),
    ];
    let wanted: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    for (name, case) in cases {
        if wanted.is_empty() || wanted.iter().any(|w| name.contains(w.as_str())) {
            case(&torch);
        }
    }
}
