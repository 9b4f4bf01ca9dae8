//! One eager training step (zero_grad, forward, loss, backward, SGD-momentum step) next to the
//! time its matrix products alone take through the `gemm` crate, measured in the same run
//! (issue 4, item 10):
//! - MLP 784-512-512-10 at batch 128 (411 MFLOP per step; target ≤ 1.6× the gemm time);
//! - the blitz CIFAR net at batch 64 (target ≤ 3× its gemm bound: every convolution and linear
//!   layer as the matrix products im2col makes of it, over the whole batch).
//!
//! `cargo bench --bench train_step` prints a Markdown table.

use kiln::nn::{self, Module};
use kiln::optim::{Optimizer, SGDConfig, SGD};
use kiln::prelude::*;

mod common;
use common::{conv_products, time_interleaved, GemmProducts};
#[path = "../tests/common/blitz_net.rs"]
mod blitz_net;
#[path = "common/mlp.rs"]
mod mlp;
use mlp::Mlp;

/// Median seconds of one training step of `net` on `(x, y)` and of its matrix `products` through
/// gemm, measured in alternation (one of each per round) so that machine noise falls on both.
fn step_and_gemm_secs(net: &dyn Module, x: &Tensor, y: &Tensor, products: &[(usize, usize, usize)]) -> (f64, f64) {
    let mut opt = SGD::new(net.parameters(), SGDConfig { lr: 0.01, momentum: 0.9, ..Default::default() });
    let criterion = nn::CrossEntropyLoss::new();
    let mut step = || {
        opt.zero_grad();
        let loss = criterion.forward(&net.forward(x), y);
        loss.backward();
        opt.step();
    };
    let mut gemm = GemmProducts::new(products);
    let t = time_interleaved(21, &mut [&mut step, &mut || gemm.run()]);
    (t[0], t[1])
}

/// `(m, k, n)` of a product, its FLOPs.
fn flops(products: &[(usize, usize, usize)]) -> f64 {
    products.iter().map(|&(m, k, n)| 2.0 * (m * k * n) as f64).sum()
}

/// A linear layer's products in one step: forward, weight gradient, and (unless it is the
/// first layer, whose input needs no gradient) input gradient.
fn linear_products(batch: usize, fan_in: usize, fan_out: usize, first: bool) -> Vec<(usize, usize, usize)> {
    let mut p = vec![(batch, fan_in, fan_out), (fan_out, batch, fan_in)];
    if !first {
        p.push((batch, fan_out, fan_in));
    }
    p
}

fn main() {
    kiln::manual_seed(0);
    println!("threads: {}\n", kiln::get_num_threads());
    println!("| step | kiln eager | its matrix products through gemm | ratio | target |");
    println!("|---|---|---|---|---|");

    let mlp = Mlp::new();
    let (x, y) = (Tensor::randn([128, 784]), Tensor::randint(0, 10, [128]));
    let products: Vec<_> = [(784, 512, true), (512, 512, false), (512, 10, false)]
        .iter()
        .flat_map(|&(i, o, f)| linear_products(128, i, o, f))
        .collect();
    let (kiln, gemm) = step_and_gemm_secs(&mlp, &x, &y, &products);
    println!(
        "| MLP 784-512-512-10, batch 128 ({:.0} MFLOP) | {:.2} ms | {:.2} ms | {:.2} | ≤ 1.6 |",
        flops(&products) / 1e6,
        kiln * 1e3,
        gemm * 1e3,
        kiln / gemm
    );

    let net = blitz_net::Net::new();
    let (x, y) = (Tensor::randn([64, 3, 32, 32]), Tensor::randint(0, 10, [64]));
    let mut products = conv_products(64, 3, 6, 5, 28, true);
    products.extend(conv_products(64, 6, 16, 5, 10, false));
    for (i, o) in [(400, 120), (120, 84), (84, 10)] {
        products.extend(linear_products(64, i, o, false));
    }
    let (kiln, gemm) = step_and_gemm_secs(&net, &x, &y, &products);
    println!(
        "| blitz CIFAR net, batch 64 ({:.0} MFLOP) | {:.2} ms | {:.2} ms | {:.2} | ≤ 3 |",
        flops(&products) / 1e6,
        kiln * 1e3,
        gemm * 1e3,
        kiln / gemm
    );
}
