//! CPU bench, single-threaded: the Cranelift-JIT GELU-tanh chain (9 primitive ops and a tanh,
//! fused) over 16M f32 in one call, tiled (the tanh stage a native AVX-512/AVX2 routine per
//! tile, what `CpuKernel::compile` makes) and untiled (the inline 128-bit tanh,
//! `CpuKernel::compile_untiled`), against a memcpy of 16 bytes per element measured in the same
//! rounds; and the JIT compile time per kernel.
//!
//! Prints one `BENCH <name> <value> <unit>` line per figure. Run: `cargo bench -p kiln-codegen
//! --bench cpu_elementwise`.

use kiln_codegen::cpu::CpuKernel;
use kiln_codegen::kernel::{ElementwiseKernel, InnerStride, Inst, InstOp, KernelArgs, KernelInput};
use kiln_runtime::op_kind::{BinaryOp, CmpOp, UnaryOp};
use kiln_runtime::DType;
mod common;
use common::best_of;

fn inst(op: InstOp, dtype: DType) -> Inst {
    Inst { op, dtype }
}

/// `z = x*a + b; 0.5*z*(1 + tanh(0.7978845608*(z + 0.044715*z*z*z)))`, `a` per row, `b` a scalar.
fn gelu_chain() -> ElementwiseKernel {
    use BinaryOp::*;
    let d = DType::F32;
    let b = |op, x, y| inst(InstOp::Binary(op, x, y), d);
    let insts = vec![
        inst(InstOp::Load(0), d),
        inst(InstOp::Load(1), d),
        inst(InstOp::Scalar(0), d),
        b(Mul, 0, 1),
        b(Add, 3, 2),
        inst(InstOp::Const(0.044715), d),
        b(Mul, 5, 4),
        b(Mul, 6, 4),
        b(Mul, 7, 4),
        b(Add, 4, 8),
        inst(InstOp::Const(0.797_884_560_8), d),
        b(Mul, 10, 9),
        inst(InstOp::Unary(UnaryOp::Tanh, 11), d),
        inst(InstOp::Const(1.0), d),
        b(Add, 13, 12),
        inst(InstOp::Const(0.5), d),
        b(Mul, 15, 4),
        b(Mul, 16, 14),
    ];
    let input = |inner| KernelInput { dtype: d, inner };
    ElementwiseKernel {
        rank: 2,
        inputs: vec![input(InnerStride::Unit), input(InnerStride::Broadcast)],
        scalars: 1,
        insts,
        outputs: vec![17],
    }
}

fn main() {
    let (rows, inner) = (4096usize, 4096usize);
    let n = rows * inner;
    let x: Vec<f32> = (0..n).map(|i| ((i % 1000) as f32 - 500.0) / 250.0).collect();
    let a: Vec<f32> = (0..rows).map(|r| 0.5 + (r % 7) as f32 * 0.25).collect();
    let mut out = vec![0f32; n];

    let k = gelu_chain();
    let tiled = CpuKernel::compile(&k, "gelu_chain").unwrap();
    assert!(tiled.is_vectorized() && tiled.is_tiled());
    let inline = CpuKernel::compile_untiled(&k, "gelu_chain_inline").unwrap();
    assert!(inline.is_vectorized() && !inline.is_tiled());
    let shape = [rows, inner];
    let strides = [inner as isize, 1, 1, 0];
    let scalars = [0.25f64];
    let mut run = |kern: &CpuKernel| {
        let ip = [x.as_ptr() as *const u8, a.as_ptr() as *const u8];
        let op = [out.as_mut_ptr() as *mut u8];
        let args = KernelArgs {
            inputs: ip.as_ptr(),
            outputs: op.as_ptr(),
            scalars: scalars.as_ptr(),
            shape: shape.as_ptr(),
            strides: strides.as_ptr(),
            row_start: 0,
            row_end: rows,
            index_base: 0,
        };
        // SAFETY: x and out hold rows × inner f32, a holds one f32 per row (inner stride 0).
        unsafe { kern.call(&args) };
        std::hint::black_box(&out);
    };
    // A memcpy of 16 bytes per element: 256 MiB copied.
    let src = vec![1u8; n * 16];
    let mut dst = vec![0u8; n * 16];

    // Rounds of (memcpy, inline, tiled), best of 3 each, interleaved so that the three see the
    // same machine load; the per-round ratios show the noise.
    let rounds = 5;
    let (mut tm, mut ti, mut tt) = (f64::INFINITY, f64::INFINITY, f64::INFINITY);
    for r in 0..rounds {
        let m = best_of(3, || {
            dst.copy_from_slice(&src);
            std::hint::black_box(&dst);
        });
        let i = best_of(3, || run(&inline));
        let t = best_of(3, || run(&tiled));
        println!(
            "round {r}: memcpy16 {:.3} ns/elem, inline {:.3} ns/elem ({:.0}% of memcpy), tiled {:.3} ns/elem ({:.0}% of memcpy), tiled {:.2}x inline",
            m * 1e9 / n as f64,
            i * 1e9 / n as f64,
            100.0 * m / i,
            t * 1e9 / n as f64,
            100.0 * m / t,
            i / t
        );
        (tm, ti, tt) = (tm.min(m), ti.min(i), tt.min(t));
    }
    let ns = |t: f64| t * 1e9 / n as f64;
    println!(
        "BENCH cpu_memcpy_16B_per_elem_16M {:.2} ms ({:.3} ns/elem, {:.1} GB/s copied)",
        tm * 1e3,
        ns(tm),
        16.0 * n as f64 / tm / 1e9
    );
    println!(
        "BENCH cpu_gelu_chain_inline_16M_f32 {:.2} ms ({:.3} ns/elem, {:.0}% of memcpy16)",
        ti * 1e3,
        ns(ti),
        100.0 * tm / ti
    );
    println!(
        "BENCH cpu_gelu_chain_tiled_16M_f32 {:.2} ms ({:.3} ns/elem, {:.0}% of memcpy16)",
        tt * 1e3,
        ns(tt),
        100.0 * tm / tt
    );
    println!("BENCH cpu_gelu_chain_tiled_vs_inline {:.2} x", ti / tt);

    // JIT time per kernel.
    let mut adam = Vec::new();
    {
        use BinaryOp::*;
        let d = DType::F32;
        let b = |op, x, y| inst(InstOp::Binary(op, x, y), d);
        adam.extend([
            inst(InstOp::Load(0), d),
            inst(InstOp::Load(1), d),
            inst(InstOp::Load(2), d),
            inst(InstOp::Load(3), d),
            inst(InstOp::Scalar(0), d),
            inst(InstOp::Scalar(1), d),
            inst(InstOp::Scalar(2), d),
            inst(InstOp::Scalar(3), d),
            inst(InstOp::Const(1.0), d),
            b(Mul, 5, 2),
            b(Sub, 8, 5),
            b(Mul, 10, 1),
            b(Add, 9, 11),
            b(Mul, 6, 3),
            b(Sub, 8, 6),
            b(Mul, 1, 1),
            b(Mul, 14, 15),
            b(Add, 13, 16),
            inst(InstOp::Unary(UnaryOp::Sqrt, 17), d),
            b(Add, 18, 7),
            b(Div, 12, 19),
            b(Mul, 4, 20),
            b(Sub, 0, 21),
        ]);
    }
    let unit = KernelInput { dtype: DType::F32, inner: InnerStride::Unit };
    let adam = ElementwiseKernel { rank: 2, inputs: vec![unit; 4], scalars: 4, insts: adam, outputs: vec![22, 12, 17] };
    let relu_i64 = ElementwiseKernel {
        rank: 3,
        inputs: vec![
            KernelInput { dtype: DType::I64, inner: InnerStride::Strided },
            KernelInput { dtype: DType::I32, inner: InnerStride::Unit },
        ],
        scalars: 0,
        insts: vec![
            inst(InstOp::Load(0), DType::I64),
            inst(InstOp::Load(1), DType::I32),
            inst(InstOp::Cast(1), DType::I64),
            inst(InstOp::Binary(BinaryOp::Add, 0, 2), DType::I64),
            inst(InstOp::Unary(UnaryOp::Relu, 3), DType::I64),
        ],
        outputs: vec![4],
    };
    let x_unit = KernelInput { dtype: DType::F32, inner: InnerStride::Unit };
    let sin_mask = ElementwiseKernel {
        rank: 1,
        inputs: vec![x_unit],
        scalars: 0,
        insts: vec![
            inst(InstOp::Load(0), DType::F32),
            inst(InstOp::Unary(UnaryOp::Sin, 0), DType::F32),
            inst(InstOp::Const(0.0), DType::F32),
            inst(InstOp::Cmp(CmpOp::Gt, 0, 2), DType::Bool),
            inst(InstOp::Unary(UnaryOp::Erf, 0), DType::F32),
            inst(InstOp::Where(3, 1, 4), DType::F32),
        ],
        outputs: vec![5],
    };
    for (name, k) in
        [("gelu_chain", &k), ("adam_3out", &adam), ("i64_relu_strided", &relu_i64), ("sin_erf_where", &sin_mask)]
    {
        let times: Vec<f64> =
            (0..5).map(|_| CpuKernel::compile(k, name).unwrap().compile_time().as_secs_f64()).collect();
        let best = times.iter().copied().fold(f64::INFINITY, f64::min);
        println!("BENCH cpu_jit_compile_{name} {:.3} ms", best * 1e3);
    }
}
