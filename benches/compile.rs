//! Eager against `kiln::compile` on the cases of the compile() issue (item 11), each next to a
//! baseline measured in the same run: a memcpy of the bytes an ideal kernel moves, or the
//! `gemm` crate on the step's matrix products. `cargo bench --bench compile` prints a Markdown
//! table.

use kiln::nn::{self, functional as F, Module};
use kiln::optim::{Adam, AdamConfig, Optimizer, Sgd, SgdConfig};
use kiln::prelude::*;
use std::hint::black_box;
use std::time::Instant;

mod common;
use common::{time, time_against_memcpy, time_interleaved, GemmProducts};
#[path = "../tests/common/blitz_net.rs"]
mod blitz_net;
#[path = "common/mlp.rs"]
mod mlp;
#[path = "common/peak.rs"]
mod peak;
use mlp::Mlp;

/// `gelu_tanh(x*a + b)` written as primitive ops.
fn gelu_chain(x: &Tensor, a: &Tensor, b: &Tensor) -> Tensor {
    let z = x * a + b;
    let inner = (&z + &z * &z * &z * 0.044715) * 0.7978845608;
    &z * 0.5 * (inner.tanh() + 1.0)
}

fn row(case: &str, eager: f64, compiled: f64, baseline: &str, ratio: String, target: &str) {
    println!(
        "| {case} | {:.2} ms | {:.2} ms | {:.2}× | {baseline} | {ratio} | {target} |",
        eager * 1e3,
        compiled * 1e3,
        eager / compiled
    );
}

/// Seconds of one training step of `net` on `(x, y)`, eager and compiled, the first two
/// compiled calls together (cold), and the step's matrix `products` through gemm; the eager,
/// compiled and gemm timings alternate round by round so that machine noise falls on all three.
fn train_step(net: &dyn Module, x: &Tensor, y: &Tensor, products: &[(usize, usize, usize)]) -> StepTimes {
    let mut step = kiln::compile(sgd_step(net));
    let cold = Instant::now();
    step.call((x, y));
    step.call((x, y)); // the steady graph (the first call also creates the momentum buffers)
    let cold = cold.elapsed().as_secs_f64();
    // Warm-up: a large product's runs take the candidate spreads over threads in turn until
    // each has its timed runs (at most 6 candidates x 5 runs), then keep the fastest.
    let mut tuned = 0;
    for _ in 0..WARM_UP_CALLS {
        step.call((x, y));
        tuned += step.stats().products_tuned;
    }
    println!("| (warm-up: {WARM_UP_CALLS} calls, in which {tuned} product shapes chose their spread over threads) | | | | | | |");
    let mut gemm = GemmProducts::new(products);
    let step = std::cell::RefCell::new(step);
    let t = time_interleaved(
        15,
        &mut [
            &mut || {
                black_box(step.borrow_mut().call((x, y)));
            },
            &mut || {
                black_box(step.borrow_mut().call_eager((x, y)));
            },
            &mut || gemm.run(),
        ],
    );
    StepTimes { compiled: t[0], eager: t[1], cold, gemm: t[2] }
}

/// The body of a training step of `net`: zero_grad, forward, cross-entropy, backward, SGD
/// (lr 0.01, momentum 0.9) step; returns the loss.
fn sgd_step<'a>(net: &'a dyn Module) -> impl FnMut((&Tensor, &Tensor)) -> Tensor + 'a {
    let mut opt = Sgd::new(net.parameters(), SgdConfig { lr: 0.01, momentum: 0.9, ..Default::default() });
    let criterion = nn::CrossEntropyLoss::new();
    move |(x, y): (&Tensor, &Tensor)| {
        opt.zero_grad();
        let loss = criterion.forward(&net.forward(x), y);
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

/// Case `gelu`: GELU chain on [4096, 4096]: 16 bytes per element (x, a read; b broadcast; y written).
fn gelu() {
    let n = 4096;
    let (x, a, b) = (Tensor::randn(&[n, n]), Tensor::randn(&[n, n]), Tensor::randn(&[n]));
    let mut gelu = kiln::compile(|(x, a, b): (&Tensor, &Tensor, &Tensor)| gelu_chain(x, a, b));
    let (compiled, copy16) = time_against_memcpy(9, 2 * n * n, || {
        black_box(gelu.call((&x, &a, &b)));
    });
    let eager = time(5, || {
        black_box(gelu_chain(&x, &a, &b));
    });
    row(
        "`gelu_tanh(x*a+b)` [4096²] f32, primitive ops",
        eager,
        compiled,
        &format!("memcpy 16 B/elem {:.2} ms", copy16 * 1e3),
        format!("{:.0}% of memcpy", 100.0 * copy16 / compiled),
        "≥ 3× eager, ≥ 80%",
    );
}

/// Case `adam`: Adam update of a 16M parameter: 28 bytes per element (p, g, m, v read; p, m, v
/// written), compiled (the plan writes p, m and v in place), eager with the one-pass kernel
/// (kiln's default, PyTorch's `fused=True`) and eager op by op (`fused: Some(false)`), against
/// the in-place update baseline, interleaved.
fn adam() {
    let len = 16 << 20;
    let param = || {
        let p = Tensor::randn(&[len]).requires_grad_(true);
        p.set_grad(Some(Tensor::randn(&[len])));
        p
    };
    let (p, q) = (param(), param());
    let mut opt = Adam::new(vec![p.clone()], AdamConfig::default());
    let mut op_by_op = Adam::new(vec![q], AdamConfig { fused: Some(false), ..Default::default() });
    opt.step(); // creates the state
    op_by_op.step();
    let mut baseline = common::InPlaceUpdate::new(len);
    let adam = std::cell::RefCell::new(kiln::compile(|()| opt.step()));
    let t = time_interleaved(
        9,
        &mut [
            &mut || adam.borrow_mut().call(()),
            &mut || adam.borrow_mut().call_eager(()),
            &mut || op_by_op.step(),
            &mut || baseline.run(),
        ],
    );
    let (compiled, one_pass, eager, in_place) = (t[0], t[1], t[2], t[3]);
    row(
        "Adam update, 16M f32 parameter (eager: op by op)",
        eager,
        compiled,
        &format!("in-place update 28 B/elem {:.2} ms", in_place * 1e3),
        format!(
            "{:.0}% of in-place (eager one-pass kernel {:.2} ms: {:.0}%)",
            100.0 * in_place / compiled,
            one_pass * 1e3,
            100.0 * in_place / one_pass
        ),
        "≥ 90%, ≥ 90%",
    );
}

/// Case `cross_entropy`: softmax + cross-entropy forward and backward on [8192, 1000]: logits in, gradient out.
fn cross_entropy() {
    let logits = Tensor::randn(&[8192, 1000]).requires_grad_(true);
    let target = Tensor::randint(0, 1000, &[8192]);
    let ce = |(l, t): (&Tensor, &Tensor)| {
        l.set_grad(None);
        F::cross_entropy(l, t).backward();
        l.grad().expect("grad")
    };
    let mut ce_step = kiln::compile(ce);
    let (compiled, copy8) = time_against_memcpy(9, 8192 * 1000, || {
        black_box(ce_step.call((&logits, &target)));
    });
    let eager = time(5, || {
        black_box(ce_step.call_eager((&logits, &target)));
    });
    row(
        "softmax + cross-entropy fwd+bwd [8192, 1000]",
        eager,
        compiled,
        &format!("memcpy 8 B/elem {:.2} ms", copy8 * 1e3),
        format!("{:.0}% of memcpy", 100.0 * copy8 / compiled),
        "≥ 50%",
    );
}

/// Case `layer_norm`: LayerNorm(1024) forward on [8192, 1024]: 8 bytes per element.
fn layer_norm() {
    let ln = nn::LayerNorm::new(&[1024]);
    let xs = Tensor::randn(&[8192, 1024]);
    let mut ln_step = kiln::compile(|x: &Tensor| {
        let _g = kiln::no_grad();
        ln.forward(x)
    });
    let (compiled, copy8) = time_against_memcpy(9, 8192 * 1024, || {
        black_box(ln_step.call(&xs));
    });
    let eager = time(5, || {
        black_box(ln_step.call_eager(&xs));
    });
    row(
        "LayerNorm(1024) forward [8192, 1024]",
        eager,
        compiled,
        &format!("memcpy 8 B/elem {:.2} ms", copy8 * 1e3),
        format!("{:.0}% of memcpy", 100.0 * copy8 / compiled),
        "≥ 70%",
    );
}

/// Case `mlp`: MLP training step against its matrix products through gemm, and all three
/// against the machine's measured FMA peak.
fn mlp() {
    // The peak first: right after the step's timing, a measurement here once saw one core only.
    let threads = kiln::get_num_threads();
    let peak = peak::peak_flops(threads);
    let mlp = Mlp::new();
    let (x, y) = (Tensor::randn(&[128, 784]), Tensor::randint(0, 10, &[128]));
    let products = linear_products(128, &[(784, 512), (512, 512), (512, 10)], false);
    let t = train_step(&mlp, &x, &y, &products);
    row(
        "MLP 784-512-512-10 step, batch 128, SGD momentum",
        t.eager,
        t.compiled,
        &format!("gemm {:.2} ms", t.gemm * 1e3),
        format!("{:.2}× gemm", t.compiled / t.gemm),
        "≤ 1.25× gemm, ≥ 1.3× eager",
    );
    println!("| MLP step, first two calls (cold: trace + compile + run) | | {:.1} ms | | | | ≤ 300 ms |", t.cold * 1e3);
    let Some((peak, how)) = peak else { return println!("| MLP vs peak | no AVX2/FMA: peak not measured | | | | | |") };
    let flop: f64 = products.iter().map(|&(m, k, n)| 2.0 * (m * k * n) as f64).sum();
    let pct = |secs: f64| 100.0 * flop / secs / peak;
    println!(
        "| MLP products' {:.0} MFLOP vs the measured peak ({how} loop, {threads} threads: {:.0} GFLOP/s) | {:.0}% of peak | {:.0}% of peak | | gemm {:.0}% of peak | ≥ 1.3× eager needs {:.0}% | |",
        flop / 1e6,
        peak / 1e9,
        pct(t.eager),
        pct(t.compiled),
        pct(t.gemm),
        1.3 * pct(t.eager)
    );
}

/// Case `cifar`: The blitz CIFAR net at batch 64 against its gemm bound.
fn cifar() {
    let net = blitz_net::Net::new();
    let (x, y) = (Tensor::randn(&[64, 3, 32, 32]), Tensor::randint(0, 10, &[64]));
    let conv = |c_in: usize, c_out: usize, k: usize, hw: usize, first: bool| {
        let (rows, cols) = (c_in * k * k, 64 * hw * hw);
        let mut p = vec![(c_out, rows, cols), (c_out, cols, rows)];
        if !first {
            p.push((rows, c_out, cols));
        }
        p
    };
    let mut products = conv(3, 6, 5, 28, true);
    products.extend(conv(6, 16, 5, 10, false));
    products.extend(linear_products(64, &[(400, 120), (120, 84), (84, 10)], true));
    let t = train_step(&net, &x, &y, &products);
    row(
        "blitz CIFAR net step, batch 64",
        t.eager,
        t.compiled,
        &format!("gemm {:.2} ms", t.gemm * 1e3),
        format!("{:.2}× gemm", t.compiled / t.gemm),
        "≤ 1.5× gemm",
    );
}

/// Case `tiny_mlp`: a Linear(8,8)-ReLU-Linear(8,2) SGD step on a batch of 16, where the cost
/// of capturing and starting a plan is all there is: compiled must still beat eager.
fn tiny_mlp() {
    let net = nn::Sequential::new().add(nn::Linear::new(8, 8)).add(nn::ReLU).add(nn::Linear::new(8, 2));
    let (x, y) = (Tensor::randn(&[16, 8]), Tensor::randint(0, 2, &[16]));
    let step = std::cell::RefCell::new(kiln::compile(sgd_step(&net)));
    const CALLS: usize = 200;
    let t = time_interleaved(
        15,
        &mut [&mut || (0..CALLS).for_each(|_| drop(black_box(step.borrow_mut().call((&x, &y))))), &mut || {
            (0..CALLS).for_each(|_| drop(black_box(step.borrow_mut().call_eager((&x, &y)))))
        }],
    );
    let (compiled, eager) = (t[0] / CALLS as f64, t[1] / CALLS as f64);
    println!(
        "| tiny MLP 8-8-2 step, batch 16, SGD momentum | {:.1} µs | {:.1} µs | {:.2}× | | {:.2}× eager | ≤ 0.7× eager |",
        eager * 1e6,
        compiled * 1e6,
        eager / compiled,
        compiled / eager
    );
}

/// Case `cache_hit`: Cache-hit overhead per captured op: 1,000 ops on one-element tensors.
fn cache_hit() {
    let one = Tensor::ones(&[1]);
    let chain = |x: &Tensor| {
        let mut y = x.clone();
        for i in 0..1000 {
            y = if i % 2 == 0 { &y * 1.0001 } else { &y + 0.5 };
        }
        y
    };
    let mut small = kiln::compile(chain);
    small.call(&one);
    let total = time(15, || {
        black_box(small.call(&one));
    });
    let s = small.stats().clone();
    let eager = time(15, || {
        black_box(small.call_eager(&one));
    });
    println!(
        "| cache hit, 1,000 captured ops on 1 element | {:.2} ms | {:.2} ms | {:.2}× | trace {:.0} µs, hash {:.1} µs, run {:.0} µs | {:.2} µs per op, all included; {:.2}× eager | ≤ 0.2× eager |",
        eager * 1e3,
        total * 1e3,
        eager / total,
        s.trace_time.as_secs_f64() * 1e6,
        s.hash_time.as_secs_f64() * 1e6,
        s.run_time.as_secs_f64() * 1e6,
        total * 1e6 / 1000.0,
        total / eager
    );
}

/// Runs the cases named on the command line (any part of a case's name: `cargo bench
/// --bench compile -- mlp`), or all of them.
fn main() {
    kiln::manual_seed(0);
    println!("threads: {}\n", kiln::get_num_threads());
    println!("| case | eager | compiled | speed-up | baseline (same run) | compiled vs baseline | target |");
    println!("|---|---|---|---|---|---|---|");

    let cases: [(&str, fn()); 8] = [
        ("gelu", gelu),
        ("adam", adam),
        ("cross_entropy", cross_entropy),
        ("layer_norm", layer_norm),
        ("mlp", mlp),
        ("cifar", cifar),
        ("tiny_mlp", tiny_mlp),
        ("cache_hit", cache_hit),
    ];
    let wanted: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    for (name, case) in cases {
        if wanted.is_empty() || wanted.iter().any(|w| name.contains(w.as_str())) {
            case();
        }
    }
}
