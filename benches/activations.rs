//! The activations PyTorch has one kernel for (silu, gelu with the tanh approximation,
//! softplus; and mish on softplus), forward and forward+backward: eager through the one-pass
//! kernel, eager through the decomposition into primitive ops (what eager would run without
//! the kernel), and compiled (which captures the decomposition), each against a memcpy of the
//! bytes an ideal kernel moves, measured in the same run.
//!
//! `cargo bench --bench activations` prints a Markdown table (copied into docs/perf.md).

use kiln::prelude::*;
use std::hint::black_box;

mod common;
use common::{time, time_against_memcpy};

/// Elements per case: 4M f32 (16 MiB), larger than the last-level cache.
const N: usize = 4 << 20;

/// One row: `name`, the eager, eager-decomposition and compiled seconds, and the memcpy
/// seconds of `bytes_per_elem`.
fn row(case: &str, eager: f64, decomposed: Option<f64>, compiled: f64, copy: f64, bytes_per_elem: usize) {
    let decomposed = decomposed.map_or("–".to_string(), |d| format!("{:.2} ms ({:.1}× slower)", d * 1e3, d / eager));
    println!(
        "| {case} | {:.2} ms | {decomposed} | {:.2} ms | memcpy {bytes_per_elem} B/elem {:.2} ms | {:.0}% / {:.0}% |",
        eager * 1e3,
        compiled * 1e3,
        copy * 1e3,
        100.0 * copy / eager,
        100.0 * copy / compiled,
    );
}

/// `x.grad` after `f(x).sum().backward()`.
fn grad_of(f: fn(&Tensor) -> Tensor, x: &Tensor) -> Tensor {
    x.set_grad(None);
    f(x).sum().backward();
    x.grad().expect("grad")
}

/// Forward (8 bytes per element: x in, y out) and forward+backward (x in, its gradient out: 8
/// bytes per element at best) of `f`, eager, eager through `decomposed`, and compiled.
fn case(name: &str, f: fn(&Tensor) -> Tensor, decomposed: Option<fn(&Tensor) -> Tensor>) {
    let x = Tensor::randn([N]);
    let mut fwd = kiln::compile(move |x: &Tensor| f(x));
    let (compiled, copy8) = time_against_memcpy(9, N, || {
        black_box(fwd.call(&x));
    });
    let eager = time(9, || {
        black_box(f(&x));
    });
    let slow = decomposed.map(|d| {
        time(5, || {
            black_box(d(&x));
        })
    });
    row(&format!("`{name}` forward"), eager, slow, compiled, copy8, 8);

    let xg = Tensor::randn([N]).requires_grad_(true);
    let mut both = kiln::compile(move |x: &Tensor| grad_of(f, x));
    let (compiled, copy8) = time_against_memcpy(9, N, || {
        black_box(both.call(&xg));
    });
    let eager = time(9, || {
        black_box(grad_of(f, &xg));
    });
    let slow = decomposed.map(|d| {
        time(5, || {
            black_box(grad_of(d, &xg));
        })
    });
    row(&format!("`{name}` forward+backward"), eager, slow, compiled, copy8, 8);
}

fn main() {
    // `cargo bench` passes --bench; ignore arguments.
    println!("| case [4M f32] | eager | eager decomposition | compiled | baseline | memcpy / eager, / compiled |");
    println!("|---|---|---|---|---|---|");
    for (name, f, decomposed) in kiln::ops::composite_fast() {
        case(name, f, Some(decomposed));
    }
    case("softplus", |x| x.softplus(1.0, 20.0), None);
    case("mish", |x| x.mish(), None);
}
