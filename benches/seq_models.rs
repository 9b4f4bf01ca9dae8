//! Training steps of the sequence models of issue 30 (item 5), eager against `kiln::compile`,
//! measured in the same run, round by round:
//! - `transformer`: one `nn::TransformerEncoderLayer` (d_model 256, 4 heads, feed-forward 1024,
//!   PyTorch's other defaults: relu, post-norm, dropout 0.1) on batch 16 × 128 positions
//!   (batch first), MSE loss, AdamW; target: compiled ≥ 1.5× eager;
//! - `lstm`: `nn::LSTM` (input 256, hidden 256, 2 layers) on 64 steps × batch 32, MSE loss,
//!   AdamW; target: compiled ≥ 1.2× eager.
//!
//! Beside them, the step's matrix products through the `gemm` crate (a floor neither mode can
//! beat). `scripts/bench_seq_models.py` times the same steps in PyTorch, eager and
//! `torch.compile`, when torch is installed.
//!
//! - `attention`: `F::scaled_dot_product_attention` forward and backward alone, the fused
//!   kernel against the chain of ops it replaced, with each one's memory peak.
//!
//! `cargo bench --bench seq_models [transformer|lstm|attention]` prints Markdown tables.

use kiln::nn::{self, functional as F, Module};
use kiln::optim::{AdamW, AdamWConfig, Optimizer};
use kiln::prelude::*;
use std::hint::black_box;
use std::time::Instant;

mod common;
use common::{time_interleaved, GemmProducts};

/// Calls of a compiled step before it is timed (every product shape picks its spread over
/// threads in the first few dozen calls; see benches/compile.rs).
const WARM_UP_CALLS: usize = 30;

/// Times one training step of `net` (input `x`, MSE against `target`), compiled and eager,
/// against its matrix `products` through gemm, and prints the row.
fn bench_step(
    case: &str,
    net: &dyn Module,
    x: &Tensor,
    target: &Tensor,
    products: &[(usize, usize, usize)],
    goal: f64,
) {
    let mut opt = AdamW::new(net.parameters(), AdamWConfig::default());
    let mut step = kiln::compile(|(x, t): (&Tensor, &Tensor)| {
        opt.zero_grad();
        let loss = F::mse_loss(&net.forward(x), t);
        loss.backward();
        opt.step();
        loss
    });
    let cold = Instant::now();
    step.call((x, target));
    step.call((x, target)); // the steady graph (the first call also creates AdamW's state)
    let cold = cold.elapsed().as_secs_f64();
    for _ in 0..WARM_UP_CALLS {
        step.call((x, target));
    }
    let breaks = step.stats().graph_breaks;
    let mut gemm = GemmProducts::new(products);
    let step = std::cell::RefCell::new(step);
    let t = time_interleaved(
        11,
        &mut [
            &mut || {
                black_box(step.borrow_mut().call((x, target)));
            },
            &mut || {
                black_box(step.borrow_mut().call_eager((x, target)));
            },
            &mut || gemm.run(),
        ],
    );
    let (compiled, eager, gemm) = (t[0], t[1], t[2]);
    static HEADER: std::sync::Once = std::sync::Once::new();
    HEADER.call_once(|| {
        println!("| training step (AdamW, MSE) | eager | compiled | speed-up | target | met | its products through gemm | first two compiled calls |");
        println!("|---|---|---|---|---|---|---|---|");
    });
    let flops: f64 = products.iter().map(|&(m, k, n)| 2.0 * (m * k * n) as f64).sum();
    println!(
        "| {case} | {:.1} ms | {:.1} ms | {:.2}× | ≥ {goal}× | {} | {:.1} ms ({:.0} MFLOP) | {:.2} s |",
        eager * 1e3,
        compiled * 1e3,
        eager / compiled,
        if eager / compiled >= goal { "yes" } else { "**no**" },
        gemm * 1e3,
        flops / 1e6,
        cold,
    );
    if breaks > 0 {
        println!("| ({case}: {breaks} graph breaks in the compiled step) | | | | | | | |");
    }
}

/// A linear layer's products in one step on `rows` rows: forward, weight gradient and input
/// gradient.
fn linear(rows: usize, fan_in: usize, fan_out: usize) -> [(usize, usize, usize); 3] {
    [(rows, fan_in, fan_out), (fan_out, rows, fan_in), (rows, fan_out, fan_in)]
}

/// Case `transformer`.
fn transformer() {
    let (batch, seq, d, heads, ff) = (16, 128, 256, 4, 1024);
    let opts = nn::TransformerLayerOpts::default().dim_feedforward(ff).batch_first(true);
    let layer = nn::TransformerEncoderLayer::with_opts(d, heads, opts);
    let (x, target) = (Tensor::randn([batch, seq, d]), Tensor::randn([batch, seq, d]));
    let rows = batch * seq;
    let mut products: Vec<_> =
        [(d, 3 * d), (d, d), (d, ff), (ff, d)].iter().flat_map(|&(i, o)| linear(rows, i, o)).collect();
    // Per head: scores q·kᵀ and the weighted sum p·v, forward and both operands' gradients.
    let hd = d / heads;
    for _ in 0..batch * heads {
        products.extend([
            (seq, hd, seq),
            (seq, seq, hd),
            (seq, seq, hd),
            (seq, hd, seq),
            (seq, seq, hd),
            (seq, hd, seq),
        ]);
    }
    bench_step("TransformerEncoderLayer d256 h4 ff1024, 16×128", &layer, &x, &target, &products, 1.5);
}

/// Case `lstm`.
fn lstm() {
    let (seq, batch, input, hidden, layers) = (64, 32, 256, 256, 2);
    let lstm = nn::LSTM::with_opts(input, hidden, nn::RNNOpts { num_layers: layers, ..Default::default() });
    let (x, target) = (Tensor::randn([seq, batch, input]), Tensor::randn([seq, batch, hidden]));
    let mut products = Vec::new();
    for l in 0..layers {
        let fan_in = if l == 0 { input } else { hidden };
        // The input products of a layer batch over the sequence, and so does the recurrent
        // weight's gradient; the recurrent product and its input gradient run per step.
        products.extend(linear(seq * batch, fan_in, 4 * hidden));
        let [forward, weight_grad, input_grad] = linear(batch, hidden, 4 * hidden);
        for _ in 0..seq {
            products.extend([forward, input_grad]);
        }
        products.push((weight_grad.0, seq * batch, weight_grad.2));
    }
    bench_step("LSTM 256→256 ×2 layers, 64 steps × batch 32", &lstm, &x, &target, &products, 1.2);
}

/// Case `attention`: eager attention forward and backward on 4×4 heads of 64 features,
/// without dropout and with 0.1 (PyTorch's Transformer default), and with 0.1 and a
/// key-padding mask, for several sequence lengths: the fused kernel
/// against the chain of ops it replaced (product, softmax, dropout, product, as
/// `F::scaled_dot_product_attention` ran before it), timed round by round, and the memory each
/// one's call allocates at its peak (tensors only: the fused kernel's per-thread scratch, at
/// most three tiles of 65536 numbers, is not counted).
fn attention() {
    println!();
    println!("| attention fwd+bwd, 4×4 heads × 64, L = S | dropout | mask | fused | op by op | speed-up | fused peak | op-by-op peak |");
    println!("|---|---|---|---|---|---|---|---|");
    let cases = [128, 512, 1024].into_iter().flat_map(|l| [(l, 0.0, false), (l, 0.1, false), (l, 0.1, true)]);
    for (l, p, masked) in cases {
        let [q, k, v] = [0, 1, 2].map(|_| Tensor::randn([4, 4, l, 64]).requires_grad_(true));
        let g = Tensor::randn([4, 4, l, 64]);
        // Key padding: the last quarter of each sequence's keys, as an additive [4, 1, 1, L].
        let padding = Tensor::arange(l as i64).ge((l * 3 / 4) as i64).reshape([1, 1, 1, l]);
        let bias = Tensor::zeros([4, 1, 1, l]).masked_fill(&padding, f64::NEG_INFINITY);
        let mask = masked.then_some(&bias);
        let run = |fused: bool| {
            let out = if fused {
                F::scaled_dot_product_attention(&q, &k, &v, mask, p, false, None)
            } else {
                let scores = (&q * 0.125).matmul(&k.transpose(-2, -1));
                let scores = mask.map_or(scores.clone(), |m| &scores + m);
                F::dropout(&scores.softmax(-1), p, true).matmul(&v)
            };
            out.backward_with(&g);
            for t in [&q, &k, &v] {
                t.set_grad(None);
            }
        };
        let peak = |fused: bool| {
            let before = kiln::memory::memory_allocated();
            kiln::memory::reset_peak_memory_stats();
            run(fused);
            kiln::memory::max_memory_allocated() - before
        };
        let (fused_peak, chain_peak) = (peak(true), peak(false));
        let t = time_interleaved(11, &mut [&mut || run(true), &mut || run(false)]);
        let mib = |b: usize| b as f64 / (1 << 20) as f64;
        println!(
            "| {l} | {p} | {} | {:.2} ms | {:.2} ms | {:.2}× | {:.1} MiB | {:.1} MiB |",
            if masked { "key padding" } else { "–" },
            t[0] * 1e3,
            t[1] * 1e3,
            t[1] / t[0],
            mib(fused_peak),
            mib(chain_peak)
        );
    }
}

fn main() {
    kiln::manual_seed(0);
    println!("threads: {}\n", kiln::get_num_threads());
    let cases: [(&str, fn()); 3] = [("transformer", transformer), ("lstm", lstm), ("attention", attention)];
    let wanted: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    for (name, case) in cases {
        if wanted.is_empty() || wanted.iter().any(|w| name.contains(w.as_str())) {
            case();
        }
    }
}
