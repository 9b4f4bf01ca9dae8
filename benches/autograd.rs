//! Autograd overhead, each figure a ratio against a baseline measured in the same run.
//!
//! `cargo bench --bench autograd` prints a Markdown table (copied into docs/perf.md):
//! - bookkeeping: forward + backward of a chain of 10,000 ops on 1-element tensors, per op, next
//!   to the same forward run without recording (the kernels alone);
//! - MLP 784-512-512-10 at batch 128: `loss.backward()` next to the same backward written by hand
//!   with the same matmuls and elementwise kernels under `no_grad`.

use kiln::prelude::*;
use std::hint::black_box;

mod common;
use common::time_interleaved;

const CHAIN: usize = 10_000;

/// A chain of `CHAIN` multiplications and additions on a 1-element tensor.
fn chain(x: &Tensor) -> Tensor {
    let mut y = x.clone();
    for i in 0..CHAIN {
        y = if i % 2 == 0 { &y * 1.0001 } else { &y + 0.0001 };
    }
    y
}

struct Mlp {
    w: [Tensor; 3],
    b: [Tensor; 3],
}

impl Mlp {
    fn new() -> Mlp {
        let dims = [784, 512, 512, 10];
        let w = std::array::from_fn(|i| {
            (Tensor::randn([dims[i], dims[i + 1]]) * (1.0 / (dims[i] as f64).sqrt())).requires_grad_(true)
        });
        let b = std::array::from_fn(|i| Tensor::zeros([dims[i + 1]]).requires_grad_(true));
        Mlp { w, b }
    }

    /// Hidden activations and output: `h1 = relu(x W1 + b1)`, `h2 = relu(h1 W2 + b2)`,
    /// `out = h2 W3 + b3`.
    fn forward(&self, x: &Tensor) -> [Tensor; 3] {
        let h1 = (x.matmul(&self.w[0]) + &self.b[0]).relu();
        let h2 = (h1.matmul(&self.w[1]) + &self.b[1]).relu();
        let out = h2.matmul(&self.w[2]) + &self.b[2];
        [h1, h2, out]
    }
}

/// The MLP's backward for `loss = mean(out²)`, by hand, with the kernels autograd's rules use.
fn manual_backward(m: &Mlp, x: &Tensor, acts: &[Tensor; 3]) -> Vec<Tensor> {
    let [h1, h2, out] = acts;
    let g_out = out * (2.0 / out.numel() as f64);
    let gw3 = h2.t().matmul(&g_out);
    let gb3 = g_out.sum_dim(0);
    let g_h2 = g_out.matmul(&m.w[2].t());
    let g_p2 = Tensor::where_cond(&h2.gt(0.0), &g_h2, 0.0);
    let gw2 = h1.t().matmul(&g_p2);
    let gb2 = g_p2.sum_dim(0);
    let g_h1 = g_p2.matmul(&m.w[1].t());
    let g_p1 = Tensor::where_cond(&h1.gt(0.0), &g_h1, 0.0);
    let gw1 = x.t().matmul(&g_p1);
    let gb1 = g_p1.sum_dim(0);
    vec![gw1, gb1, gw2, gb2, gw3, gb3]
}

fn main() {
    let mut rows: Vec<String> = Vec::new();

    // Bookkeeping on 1-element tensors.
    let x = Tensor::new(&[1.0f32]);
    let xg = Tensor::new(&[1.0f32]).requires_grad_(true);
    let mut plain = || {
        black_box(chain(&x));
    };
    let mut recorded = || {
        let y = chain(&xg);
        y.backward();
        xg.zero_grad();
    };
    let t = time_interleaved(9, &mut [&mut plain, &mut recorded]);
    let (plain, recorded) = (t[0], t[1]);
    let per_op = (recorded - plain) / CHAIN as f64 * 1e6;
    rows.push(format!(
        "| autograd bookkeeping, chain of {CHAIN} ops on 1 element (forward + backward) | {:.2} µs/op total, {per_op:.2} µs/op over the kernels | {:.2} µs/op (forward, no recording) | {:.2} | ≤ 2 µs/op total | {} |",
        recorded / CHAIN as f64 * 1e6,
        plain / CHAIN as f64 * 1e6,
        recorded / plain,
        if recorded / CHAIN as f64 * 1e6 <= 2.0 { "met" } else { "not met" }
    ));

    // MLP backward vs the same kernels by hand.
    kiln::manual_seed(0);
    let m = Mlp::new();
    let input = Tensor::randn([128, 784]);
    // The four timings interleave, round by round, so machine noise falls on all of them alike.
    let mut auto = || {
        let acts = m.forward(&input);
        acts[2].square().mean().backward();
        for p in m.w.iter().chain(&m.b) {
            p.zero_grad();
        }
    };
    let mut forward_only = || {
        let acts = m.forward(&input);
        black_box(acts[2].square().mean());
    };
    let mut by_hand = || {
        let acts = {
            let _g = kiln::no_grad_guard();
            m.forward(&input)
        };
        let _g = kiln::no_grad_guard();
        black_box(acts[2].square().mean());
        black_box(manual_backward(&m, &input, &acts));
    };
    let mut forward_plain = || {
        let _g = kiln::no_grad_guard();
        let acts = m.forward(&input);
        black_box(acts[2].square().mean());
    };
    let t = time_interleaved(31, &mut [&mut auto, &mut forward_only, &mut by_hand, &mut forward_plain]);
    let (auto, forward_only, by_hand, forward_plain) = (t[0], t[1], t[2], t[3]);
    let (auto_bwd, hand_bwd) = (auto - forward_only, by_hand - forward_plain);
    let ratio = auto_bwd / hand_bwd;
    rows.push(format!(
        "| MLP 784-512-512-10, batch 128: backward | {:.3} ms | {:.3} ms (same kernels by hand) | {ratio:.2} | ≤ 1.1 | {} |",
        auto_bwd * 1e3,
        hand_bwd * 1e3,
        if ratio <= 1.1 { "met" } else { "not met" }
    ));

    println!("threads: {}", kiln::get_num_threads());
    println!("| what | kiln | baseline | ratio | target | |");
    println!("|---|---|---|---|---|---|");
    for r in rows {
        println!("{r}");
    }
}
