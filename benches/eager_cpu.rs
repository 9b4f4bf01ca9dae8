//! Eager CPU speed, each figure a ratio against a baseline measured in the same run.
//!
//! `cargo bench --bench eager_cpu` prints a Markdown table (copied into docs/perf.md). Sizes are
//! the issue's: 16M f32 elementwise, a [4096, 4096] GELU chain of primitive ops, matmul at 1024²
//! and 2048², and a 1-element add for dispatch overhead.

use kiln::prelude::*;
use std::hint::black_box;

mod common;
use common::{memcpy_secs, time};

struct Row {
    name: String,
    kiln: String,
    baseline: String,
    ratio: f64,
    target: String,
    ok: bool,
}

fn gbs(bytes: f64, secs: f64) -> String {
    format!("{:.1} GB/s", bytes / secs / 1e9)
}

fn gemm_direct(n: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    let threads = kiln_runtime::cpu::parallel::num_threads();
    let par = if threads > 1 { gemm::Parallelism::Rayon(threads) } else { gemm::Parallelism::None };
    // SAFETY: a, b, c are n*n row-major f32 buffers that outlive the call; c is not aliased.
    unsafe {
        gemm::gemm(
            n,
            n,
            n,
            c.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr(),
            1,
            n as isize,
            b.as_ptr(),
            1,
            n as isize,
            0.0f32,
            1.0f32,
            false,
            false,
            false,
            par,
        );
    }
}

fn main() {
    // `cargo bench` passes --bench; ignore arguments.
    let n = 16 * 1024 * 1024;
    let threads = kiln_runtime::cpu::parallel::num_threads();
    let mut rows = Vec::new();

    let copy = memcpy_secs(n);
    let copy_bw = 2.0 * 4.0 * n as f64 / copy;
    let a = Tensor::rand([n]);
    let b = Tensor::rand([n]);
    for name in ["add", "mul"] {
        let secs = time(9, || {
            black_box(if name == "add" { &a + &b } else { &a * &b });
        });
        let bw = 3.0 * 4.0 * n as f64 / secs;
        rows.push(Row {
            name: format!("`{name}` 16M f32, contiguous"),
            kiln: gbs(3.0 * 4.0 * n as f64, secs),
            baseline: format!("memcpy {}", gbs(2.0 * 4.0 * n as f64, copy)),
            ratio: bw / copy_bw,
            target: "≥ 0.80".into(),
            ok: bw / copy_bw >= 0.8,
        });
    }

    // Transposed (non-contiguous) add against the contiguous one.
    let m = Tensor::rand([4096, 4096]);
    let m2 = Tensor::rand([4096, 4096]);
    let contiguous = time(7, || {
        black_box(&m + &m2);
    });
    let transposed = time(7, || {
        black_box(m.t() + &m2);
    });
    rows.push(Row {
        name: "`add` [4096²] with one transposed operand".into(),
        kiln: format!("{:.1} ms", transposed * 1e3),
        baseline: format!("contiguous {:.1} ms", contiguous * 1e3),
        ratio: transposed / contiguous,
        target: "≤ 3.0".into(),
        ok: transposed / contiguous <= 3.0,
    });

    // GELU (tanh form) as a chain of primitive eager ops.
    let x = Tensor::randn([4096, 4096]);
    let (ga, gb) = (Tensor::randn([4096, 4096]), Tensor::randn([4096, 4096]));
    let chain = time(5, || {
        let z = &x * &ga + &gb;
        let inner = (&z + z.pow(3.0) * 0.044715) * 0.7978845608;
        black_box(&z * 0.5 * (inner.tanh() + 1.0));
    });
    // Baseline: one memcpy that moves 16 bytes per element (8 read + 8 written), the traffic of
    // the ideal fused kernel (read x, a, b; write out).
    let copy16 = memcpy_secs(2 * 4096 * 4096);
    rows.push(Row {
        name: "GELU chain of primitive ops, [4096²] f32".into(),
        kiln: format!("{:.1} ms", chain * 1e3),
        baseline: format!("memcpy of 16 B/elem {:.1} ms", copy16 * 1e3),
        ratio: chain / copy16,
        target: "≤ 12".into(),
        ok: chain / copy16 <= 12.0,
    });

    // Full sum against memcpy's read bandwidth.
    let sum = time(9, || {
        black_box(a.sum());
    });
    let read_bw = 4.0 * n as f64 / copy;
    let sum_bw = 4.0 * n as f64 / sum;
    rows.push(Row {
        name: "`sum` 16M f32".into(),
        kiln: gbs(4.0 * n as f64, sum),
        baseline: format!("memcpy read {}", gbs(4.0 * n as f64, copy)),
        ratio: sum_bw / read_bw,
        target: "≥ 0.80".into(),
        ok: sum_bw / read_bw >= 0.8,
    });

    // Sums over the leading dim (a bias gradient: `g.sum_dim(0)` of [rows, features]) against
    // the full sum of the same elements, a pass at read bandwidth.
    for (rows_n, cols) in [(n / 64, 64usize), (n / 256, 256)] {
        let g = Tensor::rand([rows_n, cols]);
        let leading = time(9, || {
            black_box(g.sum_dim(0));
        });
        let full = time(9, || {
            black_box(g.sum());
        });
        rows.push(Row {
            name: format!("`sum_dim(0)` [{rows_n}, {cols}] f32"),
            kiln: gbs(4.0 * n as f64, leading),
            baseline: format!("full `sum` {}", gbs(4.0 * n as f64, full)),
            ratio: full / leading,
            target: "≥ 0.80".into(),
            ok: full / leading >= 0.8,
        });
    }

    // Matmul against the gemm crate called directly on the same data.
    for size in [1024usize, 2048] {
        let ta = Tensor::rand([size, size]);
        let tb = Tensor::rand([size, size]);
        let (va, vb) = (ta.to_vec::<f32>(), tb.to_vec::<f32>());
        let mut vc = vec![0.0f32; size * size];
        let direct = time(5, || gemm_direct(size, &va, &vb, &mut vc));
        let ours = time(5, || {
            black_box(ta.matmul(&tb));
        });
        let flops = 2.0 * (size as f64).powi(3);
        rows.push(Row {
            name: format!("`matmul` {size}² f32"),
            kiln: format!("{:.1} GFLOP/s", flops / ours / 1e9),
            baseline: format!("gemm crate {:.1} GFLOP/s", flops / direct / 1e9),
            ratio: ours / direct,
            target: "≤ 1.05".into(),
            ok: ours / direct <= 1.05,
        });
    }

    // Dispatch overhead: add of two 1-element tensors.
    let (s1, s2) = (Tensor::ones([1]), Tensor::ones([1]));
    let iters = 100_000;
    let per_op = time(5, || {
        for _ in 0..iters {
            black_box(&s1 + &s2);
        }
    }) / iters as f64;
    rows.push(Row {
        name: "`add` dispatch, 1-element tensors".into(),
        kiln: format!("{:.2} µs", per_op * 1e6),
        baseline: "1 µs budget".into(),
        ratio: per_op / 1e-6,
        target: "≤ 1.0".into(),
        ok: per_op <= 1e-6,
    });

    println!("threads: {threads}");
    println!("| case | kiln | baseline (same run) | ratio | target | met |");
    println!("|---|---|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {} | {} | {:.2} | {} | {} |",
            r.name,
            r.kiln,
            r.baseline,
            r.ratio,
            r.target,
            if r.ok { "yes" } else { "**no**" }
        );
    }
}
