//! CPU bench, single-threaded: two Cranelift-JIT reduction kernels over [8192, 1024] f32 in one
//! call each, as `kiln::compile` makes them (one kernel with chained stages and an epilogue),
//! against a memcpy of the same 8 bytes per element (4 read, 4 written) measured in the same
//! rounds:
//! - `layer_norm`: stages `mean = Σ x / n` and `var = Σ (x - mean)² / n`, epilogue
//!   `(x - mean)·rsqrt(var + eps)·w + b` (`w`, `b` over the row);
//! - `softmax`: stages `max x` and `Σ exp(x - max)`, epilogue `exp(x - max) / Σ` (tiled: the
//!   `exp` runs as the native slice routine).
//!
//! Prints one `BENCH <name> <value> <unit>` line per figure. Run: `cargo bench -p kiln-codegen
//! --bench cpu_reduce` (a case's name as argument runs that case alone).

use kiln_codegen::cpu::CpuKernel;
use kiln_codegen::kernel::{Epilogue, InnerStride, Inst, InstOp, KernelArgs, KernelInput, ReduceKernel, ReduceStage};
use kiln_runtime::op_kind::{BinaryOp, ReduceOp, UnaryOp};
use kiln_runtime::DType;
mod common;
use common::best_of;

const ROWS: usize = 8192;
const N: usize = 1024;

fn i(op: InstOp) -> Inst {
    Inst { op, dtype: DType::F32 }
}

fn stage(insts: Vec<Inst>, reduced: u32, op: ReduceOp, scale: Option<u32>) -> ReduceStage {
    ReduceStage { insts, reduced, op, output: DType::F32, scale }
}

/// Layer norm over the rows of input 0 with weight (input 1) and bias (input 2); scalar 0 is
/// `1/n`, scalar 1 is `eps`.
fn layer_norm() -> ReduceKernel {
    use BinaryOp::*;
    let mean = stage(vec![i(InstOp::Load(0))], 0, ReduceOp::Sum, Some(0));
    let var = stage(
        vec![
            i(InstOp::Load(0)),
            i(InstOp::Reduced(0)),
            i(InstOp::Binary(Sub, 0, 1)),
            i(InstOp::Unary(UnaryOp::Square, 2)),
        ],
        3,
        ReduceOp::Sum,
        Some(0),
    );
    let epilogue = vec![
        i(InstOp::Load(0)),
        i(InstOp::Reduced(0)),
        i(InstOp::Binary(Sub, 0, 1)),
        i(InstOp::Reduced(1)),
        i(InstOp::Scalar(1)),
        i(InstOp::Binary(Add, 3, 4)),
        i(InstOp::Unary(UnaryOp::Rsqrt, 5)),
        i(InstOp::Binary(Mul, 2, 6)),
        i(InstOp::Load(1)),
        i(InstOp::Binary(Mul, 7, 8)),
        i(InstOp::Load(2)),
        i(InstOp::Binary(Add, 9, 10)),
    ];
    let unit = KernelInput { dtype: DType::F32, inner: InnerStride::Unit };
    ReduceKernel {
        rank: 2,
        reduce_rank: 1,
        inputs: vec![unit; 3],
        scalars: 2,
        stages: vec![mean, var],
        epilogue: Some(Epilogue { insts: epilogue, outputs: vec![11] }),
    }
}

/// Softmax over the rows of input 0.
fn softmax() -> ReduceKernel {
    use BinaryOp::*;
    let max = stage(vec![i(InstOp::Load(0))], 0, ReduceOp::Max, None);
    let sum = stage(
        vec![
            i(InstOp::Load(0)),
            i(InstOp::Reduced(0)),
            i(InstOp::Binary(Sub, 0, 1)),
            i(InstOp::Unary(UnaryOp::Exp, 2)),
        ],
        3,
        ReduceOp::Sum,
        None,
    );
    let epilogue = vec![
        i(InstOp::Load(0)),
        i(InstOp::Reduced(0)),
        i(InstOp::Binary(Sub, 0, 1)),
        i(InstOp::Unary(UnaryOp::Exp, 2)),
        i(InstOp::Reduced(1)),
        i(InstOp::Binary(Div, 3, 4)),
    ];
    let unit = KernelInput { dtype: DType::F32, inner: InnerStride::Unit };
    ReduceKernel {
        rank: 2,
        reduce_rank: 1,
        inputs: vec![unit; 3],
        scalars: 2,
        stages: vec![max, sum],
        epilogue: Some(Epilogue { insts: epilogue, outputs: vec![5] }),
    }
}

/// Times `k` over [ROWS, N] (x varying, two row vectors, two stage outputs, one epilogue
/// output), interleaved with a memcpy of x; prints the figures.
fn run(name: &str, k: &ReduceKernel) {
    let kern = CpuKernel::compile_reduce(k, name).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(kern.is_vectorized(), "{name}: the bench measures the vector plan");
    let x: Vec<f32> = (0..ROWS * N).map(|j| ((j * 7919) % 1000) as f32 * 0.002 - 1.0).collect();
    let (w, b) = (vec![1.5f32; N], vec![0.25f32; N]);
    let (mut s0, mut s1, mut y) = (vec![0f32; ROWS], vec![0f32; ROWS], vec![0f32; ROWS * N]);
    let scalars = [1.0 / N as f64, 1e-5];
    let shape = [ROWS, N];
    let strides: [isize; 6] = [N as isize, 1, 0, 1, 0, 1];
    let ins = [x.as_ptr() as *const u8, w.as_ptr() as *const u8, b.as_ptr() as *const u8];
    let outs = [s0.as_mut_ptr() as *mut u8, s1.as_mut_ptr() as *mut u8, y.as_mut_ptr() as *mut u8];
    let args = KernelArgs {
        inputs: ins.as_ptr(),
        outputs: outs.as_ptr(),
        scalars: scalars.as_ptr(),
        shape: shape.as_ptr(),
        strides: strides.as_ptr(),
        row_start: 0,
        row_end: ROWS,
        index_base: 0,
    };
    let mut dst = vec![0f32; ROWS * N];
    let (mut kernel, mut copy) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..3 {
        // SAFETY: x is [ROWS, N] with the strides given, w and b hold N elements read with
        // stride 0 over the rows, the stage outputs hold ROWS elements and y ROWS·N; the
        // scalars cover the kernel's two.
        kernel = kernel.min(best_of(7, || unsafe { kern.call(&args) }));
        copy = copy.min(best_of(7, || {
            dst.copy_from_slice(std::hint::black_box(&x));
            std::hint::black_box(&dst);
        }));
    }
    assert!(y.iter().all(|v| v.is_finite()), "{name}: non-finite output");
    println!("BENCH {name}_kernel {:.3} ms", kernel * 1e3);
    println!("BENCH {name}_memcpy_8B_per_elem {:.3} ms", copy * 1e3);
    println!("BENCH {name}_vs_memcpy {:.0} %", 100.0 * copy / kernel);
}

fn main() {
    let only: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let cases: [(&str, fn() -> ReduceKernel); 2] = [("layer_norm", layer_norm), ("softmax", softmax)];
    for (name, make) in cases {
        if only.is_empty() || only.iter().any(|o| o == name) {
            run(name, &make());
        }
    }
}
