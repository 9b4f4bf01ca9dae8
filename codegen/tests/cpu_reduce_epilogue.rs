//! Reduce→broadcast epilogues of the Cranelift CPU back end ([`Epilogue`] on a
//! [`ReduceKernel`]) against a plain Rust reference in f64: softmax (`exp(x - m) / Σ`, with
//! `m` from a Max kernel run first), log_softmax (`x - m - log Σ`), layer norm
//! (`(x - mean)·rsqrt(var + eps)·w + b` with `var = Σ (x - mean)² · 1/n`, `mean` from a mean
//! kernel, `w`/`b` broadcast over the kept dims, `eps` a run-time scalar), two outputs of
//! different dtypes (f32 and Bool), integer epilogues on the scalar plan, empty reductions,
//! validation errors and hashes. Shapes of rank 2 and 3 with one and two reduced dims, unit
//! (vector plan) and strided (scalar plan) inputs, every kernel called twice (rows `0..k`,
//! then `k..n`) and checked to leave the rows not yet computed untouched.
//!
//! Tolerances: the reduced values as in `cpu_reduce.rs` (f32 sums within `4e-6·Σ|x|`, f64
//! within `1e-12·Σ|x|`, max and integers exact). The epilogue's reference is evaluated with
//! the kernel's own reduced value (so a rounding of the reduction is not counted twice):
//! integer and Bool values are exact, f64 values within `1e-14·(1 + |want|)` (f64 `exp`/`log`
//! are the std functions; measured: exact) and f32 values within `1e-6·(1 + |want|)`: each
//! f32 operation rounds (½ ulp) and the inline `exp`/`log` are within 2 ulp (`cpu/math.rs`),
//! a few ulp in all of values of magnitude ≤ 10 (measured: at most `2.2e-7·(1 + |want|)`,
//! layer norm).

use kiln_codegen::cpu::CpuKernel;
use kiln_codegen::kernel::{
    ElementwiseKernel, Epilogue, InnerStride, Inst, InstOp, KernelInput, ReduceKernel, ReduceStage,
};
use kiln_runtime::op_kind::{BinaryOp, CmpOp, ReduceOp, UnaryOp};
use kiln_runtime::DType;

mod common;
use common::reduce_run::{check, inst, run, sizes};
use common::{layout, make_input, Input, Lay};

/// `op` over input 0 (`x`, declared as the first of `inputs`), with no epilogue.
fn reduce_x(dtype: DType, rank: usize, rr: usize, inputs: Vec<KernelInput>, op: ReduceOp) -> ReduceKernel {
    ReduceKernel {
        rank,
        reduce_rank: rr,
        inputs,
        scalars: 0,
        stages: vec![ReduceStage {
            insts: vec![inst(InstOp::Load(0), dtype)],
            reduced: 0,
            op,
            output: dtype,
            scale: None,
        }],
        epilogue: None,
    }
}

/// The per-output values `vals` of `dtype` as an input broadcast over the reduced dims.
fn per_output(vals: Vec<f64>, dtype: DType, shape: &[usize], rr: usize) -> Input {
    let (strides, n) = layout(shape, rr, Lay::PerOutput);
    assert_eq!(n, vals.len());
    Input { vals, strides, dtype }
}

const SHAPES: [(&[usize], usize); 5] =
    [(&[3, 7], 1), (&[5, 33], 1), (&[2, 3, 17], 1), (&[2, 3, 17], 2), (&[4, 1003], 1)];

/// Softmax's second kernel: `Σ exp(x - m)` with the epilogue `tail(exp(x - m), x - m)` over
/// `x` (input 0) and `m` (input 1); `tail` appends the instructions after `[x, m, x - m,
/// exp(x - m), Reduced]` (values 0..5) and returns the output.
fn softmax_kernel(
    dtype: DType,
    rank: usize,
    rr: usize,
    x_inner: InnerStride,
    tail: impl Fn(&mut Vec<Inst>) -> u32,
) -> ReduceKernel {
    let head = vec![
        inst(InstOp::Load(0), dtype),
        inst(InstOp::Load(1), dtype),
        inst(InstOp::Binary(BinaryOp::Sub, 0, 1), dtype),
        inst(InstOp::Unary(UnaryOp::Exp, 2), dtype),
    ];
    let mut insts = head.clone();
    insts.push(inst(InstOp::Reduced(0), dtype));
    let out = tail(&mut insts);
    let inputs = vec![KernelInput { dtype, inner: x_inner }, KernelInput { dtype, inner: InnerStride::Broadcast }];
    ReduceKernel {
        rank,
        reduce_rank: rr,
        inputs,
        scalars: 0,
        stages: vec![ReduceStage { insts: head, reduced: 3, op: ReduceOp::Sum, output: dtype, scale: None }],
        epilogue: Some(Epilogue { insts, outputs: vec![out] }),
    }
}

/// Runs K1 = max(x) then K2 (`softmax_kernel` with `tail`) for every dtype, shape and inner
/// stride; returns nothing, checks everything; `sums_to_one` checks each row's outputs.
fn softmax_family(name: &str, tail: impl Fn(&mut Vec<Inst>) -> u32 + Copy, sums_to_one: bool) {
    for dtype in [DType::F32, DType::F64] {
        for (shape, rr) in SHAPES {
            for x_inner in [InnerStride::Unit, InnerStride::Strided] {
                let label = format!("{name} {dtype} {shape:?} rr={rr} {x_inner:?}");
                let rank = shape.len();
                let x = make_input(dtype, shape, rr, Lay::Full(x_inner), 7, false);
                let k1 = reduce_x(dtype, rank, rr, vec![KernelInput { dtype, inner: x_inner }], ReduceOp::Max);
                let m = check(&k1, shape, std::slice::from_ref(&x), &[], &format!("{label} max")).stages.swap_remove(0);
                let m = per_output(m, dtype, shape, rr);
                let k2 = softmax_kernel(dtype, rank, rr, x_inner, tail);
                assert_eq!(
                    CpuKernel::compile_reduce(&k2, "sm").unwrap().is_vectorized(),
                    x_inner == InnerStride::Unit,
                    "{label}"
                );
                let got = check(&k2, shape, &[x, m], &[], &label);
                if sums_to_one {
                    let (n_out, n_red) = sizes(&k2, shape);
                    for o in 0..n_out {
                        let s: f64 = got.epi[0][o * n_red..(o + 1) * n_red].iter().sum();
                        assert!((s - 1.0).abs() < 1e-4, "{label}: row {o} sums to {s}");
                    }
                }
            }
        }
    }
}

#[test]
fn softmax_normalises_in_the_reduction_kernel() {
    // exp(x - m) / Σ
    softmax_family(
        "softmax",
        |insts| {
            let d = insts[0].dtype;
            insts.push(inst(InstOp::Binary(BinaryOp::Div, 3, 4), d));
            5
        },
        true,
    );
}

#[test]
fn log_softmax_epilogue() {
    // x - m - log Σ
    softmax_family(
        "log_softmax",
        |insts| {
            let d = insts[0].dtype;
            insts.push(inst(InstOp::Unary(UnaryOp::Log, 4), d));
            insts.push(inst(InstOp::Binary(BinaryOp::Sub, 2, 5), d));
            6
        },
        false,
    );
}

/// Layer norm's second kernel over x (0), mean (1, per output), w (2) and b (3): `Σ (x -
/// mean)² · scale` with scale scalar 0 and the epilogue `(x - mean)·rsqrt(var + eps)·w + b`,
/// eps scalar 1.
fn layer_norm_kernel(dtype: DType, rank: usize, rr: usize, x_inner: InnerStride) -> ReduceKernel {
    let b = |op, x, y| inst(InstOp::Binary(op, x, y), dtype);
    let prologue = vec![
        inst(InstOp::Load(0), dtype),
        inst(InstOp::Load(1), dtype),
        b(BinaryOp::Sub, 0, 1),
        inst(InstOp::Unary(UnaryOp::Square, 2), dtype),
    ];
    let epilogue = vec![
        inst(InstOp::Load(0), dtype),
        inst(InstOp::Load(1), dtype),
        b(BinaryOp::Sub, 0, 1),
        inst(InstOp::Reduced(0), dtype),
        inst(InstOp::Scalar(1), dtype),
        b(BinaryOp::Add, 3, 4),
        inst(InstOp::Unary(UnaryOp::Rsqrt, 5), dtype),
        b(BinaryOp::Mul, 2, 6),
        inst(InstOp::Load(2), dtype),
        b(BinaryOp::Mul, 7, 8),
        inst(InstOp::Load(3), dtype),
        b(BinaryOp::Add, 9, 10),
    ];
    let inputs = vec![
        KernelInput { dtype, inner: x_inner },
        KernelInput { dtype, inner: InnerStride::Broadcast },
        KernelInput { dtype, inner: InnerStride::Unit },
        KernelInput { dtype, inner: InnerStride::Unit },
    ];
    ReduceKernel {
        rank,
        reduce_rank: rr,
        inputs,
        scalars: 2,
        stages: vec![ReduceStage { insts: prologue, reduced: 3, op: ReduceOp::Sum, output: dtype, scale: Some(0) }],
        epilogue: Some(Epilogue { insts: epilogue, outputs: vec![11] }),
    }
}

#[test]
fn layer_norm_scales_and_shifts_in_the_reduction_kernel() {
    for dtype in [DType::F32, DType::F64] {
        for (shape, rr) in SHAPES {
            for x_inner in [InnerStride::Unit, InnerStride::Strided] {
                let label = format!("layer_norm {dtype} {shape:?} rr={rr} {x_inner:?}");
                let rank = shape.len();
                let n_red: usize = shape[rank - rr..].iter().product();
                let inv_n = 1.0 / n_red as f64;
                let x = make_input(dtype, shape, rr, Lay::Full(x_inner), 3, false);
                let mut k0 = reduce_x(dtype, rank, rr, vec![KernelInput { dtype, inner: x_inner }], ReduceOp::Sum);
                k0.scalars = 1;
                k0.stages[0].scale = Some(0);
                let mean = check(&k0, shape, std::slice::from_ref(&x), &[inv_n], &format!("{label} mean"))
                    .stages
                    .swap_remove(0);
                let mean = per_output(mean, dtype, shape, rr);
                let w = make_input(dtype, shape, rr, Lay::OverReduced, 11, true);
                let b = make_input(dtype, shape, rr, Lay::OverReduced, 13, false);
                let k = layer_norm_kernel(dtype, rank, rr, x_inner);
                assert_eq!(
                    CpuKernel::compile_reduce(&k, "ln").unwrap().is_vectorized(),
                    x_inner == InnerStride::Unit,
                    "{label}"
                );
                check(&k, shape, &[x, mean, w, b], &[inv_n, 1e-5], &label);
            }
        }
    }
}

#[test]
fn two_outputs_of_different_dtypes() {
    // mean = Σ x / n, then x - mean (f32) and x > mean (Bool): the scalar plan.
    for (shape, rr) in SHAPES {
        for x_inner in [InnerStride::Unit, InnerStride::Strided] {
            let d = DType::F32;
            let rank = shape.len();
            let n_red: usize = shape[rank - rr..].iter().product();
            let insts = vec![
                inst(InstOp::Load(0), d),
                inst(InstOp::Reduced(0), d),
                inst(InstOp::Binary(BinaryOp::Sub, 0, 1), d),
                inst(InstOp::Cmp(CmpOp::Gt, 0, 1), DType::Bool),
            ];
            let mut k = reduce_x(d, rank, rr, vec![KernelInput { dtype: d, inner: x_inner }], ReduceOp::Sum);
            k.scalars = 1;
            k.stages[0].scale = Some(0);
            k.epilogue = Some(Epilogue { insts, outputs: vec![2, 3] });
            let x = make_input(d, shape, rr, Lay::Full(x_inner), 5, false);
            let label = format!("centre+mask {shape:?} rr={rr} {x_inner:?}");
            let got = check(&k, shape, &[x], &[1.0 / n_red as f64], &label);
            assert!(got.epi[1].iter().all(|&b| b == 0.0 || b == 1.0), "{label}: Bool values are 0 or 1");
            assert!(got.epi[1].contains(&1.0) && got.epi[1].contains(&0.0), "{label}: both truths occur");
        }
    }
}

#[test]
fn integer_epilogues_run_the_scalar_plan() {
    // i64: Σ x then x · Σ; i32: Σ x (as i64) then cast(x) · Σ.
    for (shape, rr) in SHAPES {
        for x_inner in [InnerStride::Unit, InnerStride::Strided, InnerStride::Broadcast] {
            for dtype in [DType::I64, DType::I32] {
                let o = DType::I64;
                let rank = shape.len();
                let mut insts = vec![inst(InstOp::Load(0), dtype)];
                let x = if dtype == o {
                    0
                } else {
                    insts.push(inst(InstOp::Cast(0), o));
                    1
                };
                insts.push(inst(InstOp::Reduced(0), o));
                insts.push(inst(InstOp::Binary(BinaryOp::Mul, x, x + 1), o));
                let out = x + 2;
                let mut k = reduce_x(dtype, rank, rr, vec![KernelInput { dtype, inner: x_inner }], ReduceOp::Sum);
                k.stages[0].output = o;
                k.epilogue = Some(Epilogue { insts, outputs: vec![out] });
                let input = make_input(dtype, shape, rr, Lay::Full(x_inner), 9, false);
                let label = format!("int {dtype} {shape:?} rr={rr} {x_inner:?}");
                assert!(!CpuKernel::compile_reduce(&k, "int").unwrap().is_vectorized(), "{label}");
                check(&k, shape, &[input], &[], &label);
            }
        }
    }
}

#[test]
fn epilogue_constants_and_scalars() {
    // Σ x then (x · s0 + 0.5) / Reduced, on both plans, with a Max reduction.
    for dtype in [DType::F32, DType::F64] {
        for x_inner in [InnerStride::Unit, InnerStride::Broadcast, InnerStride::Strided] {
            let b = |op, x, y| inst(InstOp::Binary(op, x, y), dtype);
            let insts = vec![
                inst(InstOp::Load(0), dtype),
                inst(InstOp::Scalar(0), dtype),
                b(BinaryOp::Mul, 0, 1),
                inst(InstOp::Const(0.5), dtype),
                b(BinaryOp::Add, 2, 3),
                inst(InstOp::Reduced(0), dtype),
                b(BinaryOp::Div, 4, 5),
            ];
            let mut k = reduce_x(dtype, 3, 2, vec![KernelInput { dtype, inner: x_inner }], ReduceOp::Max);
            k.scalars = 1;
            k.epilogue = Some(Epilogue { insts, outputs: vec![6] });
            let shape = [3usize, 4, 9];
            let x = make_input(dtype, &shape, 2, Lay::Full(x_inner), 21, true);
            check(&k, &shape, &[x], &[1.75], &format!("consts {dtype} {x_inner:?}"));
        }
    }
}

#[test]
fn empty_reductions_write_only_the_identity() {
    let d = DType::F32;
    let mut k = softmax_kernel(d, 2, 1, InnerStride::Unit, |insts| {
        insts.push(inst(InstOp::Binary(BinaryOp::Div, 3, 4), d));
        5
    });
    let shape = [3usize, 0];
    let x = make_input(d, &shape, 1, Lay::Full(InnerStride::Unit), 1, false);
    let m = per_output(vec![0.0; 3], d, &shape, 1);
    let got = run(&k, &shape, &[x, m], &[], &[0..1, 1..3]);
    assert_eq!(got.stages[0], vec![0.0; 3]);
    assert!(got.epi[0].is_empty());
    k.epilogue.as_mut().unwrap().outputs.push(0);
    let x = make_input(d, &shape, 1, Lay::Full(InnerStride::Unit), 1, false);
    let m = per_output(vec![0.0; 3], d, &shape, 1);
    let got = run(&k, &shape, &[x, m], &[], &[0..2, 2..3]);
    assert_eq!(got.epi.len(), 2);
    assert!(got.epi.iter().all(|e| e.is_empty()));
}

#[test]
fn reduced_is_refused_outside_an_epilogue_and_checked() {
    let d = DType::F32;
    // In an elementwise kernel.
    let ew = ElementwiseKernel {
        rank: 1,
        inputs: vec![],
        scalars: 0,
        insts: vec![inst(InstOp::Reduced(0), d)],
        outputs: vec![0],
    };
    let e = ew.validate().unwrap_err();
    assert!(e.contains("Reduced") && e.contains("epilogue"), "{e}");
    assert!(CpuKernel::compile(&ew, "ew").unwrap_err().contains("Reduced"));
    // In a prologue.
    let input = vec![KernelInput { dtype: d, inner: InnerStride::Unit }];
    let mut k = reduce_x(d, 2, 1, input.clone(), ReduceOp::Sum);
    k.stages[0].insts.push(inst(InstOp::Reduced(0), d));
    k.stages[0].insts.push(inst(InstOp::Binary(BinaryOp::Add, 0, 1), d));
    k.stages[0].reduced = 2;
    let e = k.validate().unwrap_err();
    assert!(e.contains("prologue") && e.contains("Reduced"), "{e}");
    assert!(CpuKernel::compile_reduce(&k, "p").is_err());
    // Wrong dtype for Reduced (the output is f32).
    let mut k = reduce_x(d, 2, 1, input.clone(), ReduceOp::Sum);
    k.epilogue = Some(Epilogue { insts: vec![inst(InstOp::Reduced(0), DType::F64)], outputs: vec![0] });
    let e = k.validate().unwrap_err();
    assert!(e.starts_with("epilogue") && e.contains("reduced value") && e.contains(&DType::F32.to_string()), "{e}");
    assert!(CpuKernel::compile_reduce(&k, "w").is_err());
    // The right dtype passes; with the output f64 it is the f64 one.
    k.epilogue = Some(Epilogue { insts: vec![inst(InstOp::Reduced(0), d)], outputs: vec![0] });
    assert!(k.validate().is_ok());
    k.stages[0].output = DType::F64;
    assert!(k.validate().is_err());
    k.epilogue = Some(Epilogue { insts: vec![inst(InstOp::Reduced(0), DType::F64)], outputs: vec![0] });
    assert!(k.validate().is_ok());
    // Other epilogue errors: no outputs, an undefined output, a bad load, a bad operand.
    let mut k = reduce_x(d, 2, 1, input, ReduceOp::Sum);
    for (insts, outputs) in [
        (vec![inst(InstOp::Load(0), d)], vec![]),
        (vec![inst(InstOp::Load(0), d)], vec![1]),
        (vec![inst(InstOp::Load(1), d)], vec![0]),
        (vec![inst(InstOp::Load(0), DType::F64)], vec![0]),
        (vec![inst(InstOp::Unary(UnaryOp::Exp, 0), d)], vec![0]),
        (vec![inst(InstOp::Scalar(0), d)], vec![0]),
    ] {
        k.epilogue = Some(Epilogue { insts: insts.clone(), outputs });
        let e = k.validate().unwrap_err();
        assert!(e.starts_with("epilogue"), "{insts:?}: {e}");
    }
}

#[test]
fn the_epilogue_is_part_of_the_hash() {
    let d = DType::F32;
    let plain = softmax_kernel(d, 2, 1, InnerStride::Unit, |_| 4);
    let mut none = plain.clone();
    none.epilogue = None;
    let div = softmax_kernel(d, 2, 1, InnerStride::Unit, |insts| {
        insts.push(inst(InstOp::Binary(BinaryOp::Div, 3, 4), d));
        5
    });
    let mul = softmax_kernel(d, 2, 1, InnerStride::Unit, |insts| {
        insts.push(inst(InstOp::Binary(BinaryOp::Mul, 3, 4), d));
        5
    });
    let mut two = div.clone();
    two.epilogue.as_mut().unwrap().outputs.push(3);
    let hashes = [&plain, &none, &div, &mul, &two].map(|k| k.structural_hash());
    for i in 0..hashes.len() {
        for j in i + 1..hashes.len() {
            assert_ne!(hashes[i], hashes[j], "kernels {i} and {j}");
        }
    }
    assert_eq!(div.structural_hash(), div.clone().structural_hash());
}
