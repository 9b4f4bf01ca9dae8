//! conv2d speed at the MNIST example's sizes (batch 64: 1→32 k3 on 28×28, 32→64 k3 on 26×26),
//! forward and forward+backward, in GFLOP/s next to the `gemm` crate's GFLOP/s on the same
//! matrix products measured in the same run (target: kiln ≥ 60% of gemm).
//!
//! `cargo bench --bench conv` prints a Markdown table. The gemm baseline runs each product of
//! the convolution as one large matrix product over the whole batch (forward `W·cols`, input
//! gradient `Wᵀ·gy`, weight gradient `gy·colsᵀ`) with gemm's own threading, so it counts the
//! arithmetic only: kiln also pays for im2col/col2im and the bias.

use kiln::nn::functional::{self as F, Conv2dOpts};
use kiln::prelude::*;
use std::hint::black_box;

mod common;
use common::{gemm_secs, time};

struct Layer {
    name: &'static str,
    n: usize,
    c_in: usize,
    c_out: usize,
    hw: usize,
    k: usize,
    /// Whether the layer's input needs a gradient (not for the first layer: it sees the images).
    input_grad: bool,
}

fn main() {
    let layers = [
        Layer { name: "conv1 1→32 k3, 28×28", n: 64, c_in: 1, c_out: 32, hw: 28, k: 3, input_grad: false },
        Layer { name: "conv2 32→64 k3, 26×26", n: 64, c_in: 32, c_out: 64, hw: 26, k: 3, input_grad: true },
    ];
    println!("threads: {}\n", kiln::get_num_threads());
    println!("| layer (batch 64, f32) | pass | kiln | gemm, same products | ratio | target |");
    println!("|---|---|---|---|---|---|");
    let mut all_ok = true;
    for l in &layers {
        kiln::manual_seed(0);
        let out = l.hw - l.k + 1;
        let (kk, ll) = (l.c_in * l.k * l.k, out * out);
        let flops = 2.0 * (l.n * l.c_out * ll * kk) as f64; // one product
        let x = Tensor::randn([l.n, l.c_in, l.hw, l.hw]).requires_grad_(l.input_grad);
        let w = (Tensor::randn([l.c_out, l.c_in, l.k, l.k]) * 0.1).requires_grad_(true);
        let b = Tensor::zeros([l.c_out]).requires_grad_(true);
        let gy = Tensor::randn([l.n, l.c_out, out, out]);
        let opts = Conv2dOpts::default();

        let fwd = time(9, || {
            let _g = kiln::no_grad_guard();
            black_box(F::conv2d(&x, &w, Some(&b), &opts));
        });
        let both = time(9, || {
            let y = F::conv2d(&x, &w, Some(&b), &opts);
            y.backward_with(&gy);
            w.set_grad(None);
            b.set_grad(None);
            x.set_grad(None);
        });
        let g_fwd = gemm_secs(l.c_out, kk, l.n * ll);
        let g_weight = gemm_secs(l.c_out, l.n * ll, kk);
        let g_input = if l.input_grad { gemm_secs(kk, l.c_out, l.n * ll) } else { 0.0 };
        let products_both = if l.input_grad { 3.0 } else { 2.0 };
        for (pass, secs, gsecs, count) in
            [("forward", fwd, g_fwd, 1.0), ("forward+backward", both, g_fwd + g_weight + g_input, products_both)]
        {
            let (kiln_gf, gemm_gf) = (count * flops / secs / 1e9, count * flops / gsecs / 1e9);
            let ratio = kiln_gf / gemm_gf;
            all_ok &= ratio >= 0.6;
            println!(
                "| {} | {pass} | {kiln_gf:.1} GFLOP/s ({:.2} ms) | {gemm_gf:.1} GFLOP/s | {ratio:.2} | ≥ 0.60 {} |",
                l.name,
                secs * 1e3,
                if ratio >= 0.6 { "✓" } else { "✗" }
            );
        }
    }
    println!("\n{}", if all_ok { "all targets met" } else { "some targets missed" });
}
