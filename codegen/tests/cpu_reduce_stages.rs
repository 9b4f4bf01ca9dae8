//! Reduction kernels with several chained reductions over the same rows
//! ([`ReduceKernel::stages`]) on the Cranelift CPU back end, against a plain Rust reference in
//! f64: softmax as one kernel (stage 0 `max x`, stage 1 `Σ exp(x - Reduced(0))`, the epilogue
//! `exp(x - Reduced(0)) / Reduced(1)`), layer norm as one kernel (stage 0 the mean `Σ x · 1/n`,
//! stage 1 the variance `Σ (x - Reduced(0))² · 1/n`, the epilogue `(x - Reduced(0))·rsqrt(
//! Reduced(1) + eps)`, `eps` a run-time scalar), cross-entropy's pieces (a third stage `Σ t·(x
//! - Reduced(0) - log Reduced(1))` whose per-output part is hoisted), stages that read nothing
//! of each other (two sums of different inputs, one of them integer), validation errors and
//! hashes. f32 and f64, shapes of rank 2 and 3 with one and two reduced dims, unit (vector
//! plan) and strided (scalar plan) inputs, every kernel called twice (rows `0..k`, then
//! `k..n`) and checked to leave the rows not yet computed untouched.
//!
//! Tolerances: each stage's reference is evaluated with the kernel's own values of the
//! earlier stages (so a rounding of one stage is not counted again in the next): f32 sums
//! within `4e-6·Σ|term|`, f64 sums within `1e-12·Σ|term|` (the accumulation is f64 either way;
//! the f32 terms round per operation and the inline `exp`/`log` are within 2 ulp), max and
//! integer sums exact. The epilogue's reference is evaluated with the kernel's stage values as
//! in `cpu_reduce_epilogue.rs`: f64 values within `1e-14·(1 + |want|)`, f32 values within
//! `1e-6·(1 + |want|)`. On top, the outputs are checked against what they mean, computed from
//! the inputs alone: every softmax row sums to 1 within `1e-4`, and every layer norm row has
//! mean 0 within `1e-4` and variance `var/(var + eps)` within `1e-3`.

use kiln_codegen::cpu::CpuKernel;
use kiln_codegen::kernel::{Epilogue, InnerStride, Inst, InstOp, KernelInput, ReduceKernel, ReduceStage};
use kiln_runtime::op_kind::{BinaryOp, CmpOp, ReduceOp, UnaryOp};
use kiln_runtime::DType;

mod common;
use common::reduce_run::{check, index, inst, sizes};
use common::{make_input, Lay};

/// Shapes and reduced dims; rows of 1003 fit the row buffer that keeps a stage's tiled exp for
/// the epilogue (`cpu/kept_tile_values.rs`, 4096 elements), rows of 4500 do not.
const SHAPES: [(&[usize], usize); 6] =
    [(&[3, 7], 1), (&[5, 33], 1), (&[2, 3, 17], 1), (&[2, 3, 17], 2), (&[4, 1003], 1), (&[2, 4500], 1)];

/// Every dtype, shape and inner stride of x: calls `f(dtype, shape, rr, x_inner, label)`.
fn each_case(name: &str, mut f: impl FnMut(DType, &[usize], usize, InnerStride, &str)) {
    for dtype in [DType::F32, DType::F64] {
        for (shape, rr) in SHAPES {
            for x_inner in [InnerStride::Unit, InnerStride::Strided] {
                f(dtype, shape, rr, x_inner, &format!("{name} {dtype} {shape:?} rr={rr} {x_inner:?}"));
            }
        }
    }
}

/// Whether a kernel whose stages or epilogue compute an exp per element walks its rows in tiles
/// that call the slice routine (`cpu/tiled_rows.rs`): f32 on the vector plan, one reduced dim.
fn tiles(dtype: DType, rr: usize, x_inner: InnerStride) -> bool {
    dtype == DType::F32 && rr == 1 && x_inner == InnerStride::Unit
}

/// A stage reducing `insts`' value `reduced` with `op` into `dtype`.
fn stage(insts: Vec<Inst>, reduced: u32, op: ReduceOp, dtype: DType, scale: Option<u32>) -> ReduceStage {
    ReduceStage { insts, reduced, op, output: dtype, scale }
}

/// Softmax over x (input 0) as one kernel: max, `Σ exp(x - max)`, then `exp(x - max) / Σ`.
fn softmax_kernel(dtype: DType, rank: usize, rr: usize, x_inner: InnerStride) -> ReduceKernel {
    let i = |op| inst(op, dtype);
    let max = stage(vec![i(InstOp::Load(0))], 0, ReduceOp::Max, dtype, None);
    let sum = stage(
        vec![
            i(InstOp::Load(0)),
            i(InstOp::Reduced(0)),
            i(InstOp::Binary(BinaryOp::Sub, 0, 1)),
            i(InstOp::Unary(UnaryOp::Exp, 2)),
        ],
        3,
        ReduceOp::Sum,
        dtype,
        None,
    );
    let epilogue = vec![
        i(InstOp::Load(0)),
        i(InstOp::Reduced(0)),
        i(InstOp::Binary(BinaryOp::Sub, 0, 1)),
        i(InstOp::Unary(UnaryOp::Exp, 2)),
        i(InstOp::Reduced(1)),
        i(InstOp::Binary(BinaryOp::Div, 3, 4)),
    ];
    ReduceKernel {
        rank,
        reduce_rank: rr,
        inputs: vec![KernelInput { dtype, inner: x_inner }],
        scalars: 0,
        stages: vec![max, sum],
        epilogue: Some(Epilogue { insts: epilogue, outputs: vec![5] }),
    }
}

#[test]
fn softmax_is_one_kernel() {
    each_case("softmax", |dtype, shape, rr, x_inner, label| {
        let k = softmax_kernel(dtype, shape.len(), rr, x_inner);
        let ck = CpuKernel::compile_reduce(&k, "sm").unwrap();
        assert_eq!(ck.is_vectorized(), x_inner == InnerStride::Unit, "{label}");
        assert_eq!(ck.is_tiled(), tiles(dtype, rr, x_inner), "{label}");
        let x = make_input(dtype, shape, rr, Lay::Full(x_inner), 7, false);
        let got = check(&k, shape, std::slice::from_ref(&x), &[], label);
        let (n_out, n_red) = sizes(&k, shape);
        for o in 0..n_out {
            let want_max = (0..n_red).map(|r| x.at(&index(shape, rr, o, r))).fold(f64::NEG_INFINITY, f64::max);
            assert_eq!(got.stages[0][o], want_max, "{label}: row {o}'s max");
            let s: f64 = got.epi[0][o * n_red..(o + 1) * n_red].iter().sum();
            assert!((s - 1.0).abs() < 1e-4, "{label}: row {o} sums to {s}");
        }
    });
}

/// `exp(x - max - log Σ)` over x (input 0) with the max and `Σ` stage values 0 and 1: the
/// softmax as log-softmax's backward computes it (values 0..7, the last the softmax).
fn softmax_via_log_sum(dtype: DType) -> Vec<Inst> {
    let i = |op| inst(op, dtype);
    vec![
        i(InstOp::Load(0)),
        i(InstOp::Reduced(0)),
        i(InstOp::Binary(BinaryOp::Sub, 0, 1)),
        i(InstOp::Reduced(1)),
        i(InstOp::Unary(UnaryOp::Log, 3)),
        i(InstOp::Binary(BinaryOp::Sub, 2, 4)),
        i(InstOp::Unary(UnaryOp::Exp, 5)),
    ]
}

#[test]
fn softmax_through_log_sum_exp_shares_the_stage_exp() {
    // The epilogue `exp(x - max - log Σ)` (log-softmax's backward form): the kernel computes it
    // as `exp(x - max) · exp(-log Σ)` from the Σ stage's kept exps when tiled.
    each_case("softmax via log Σ", |dtype, shape, rr, x_inner, label| {
        let mut k = softmax_kernel(dtype, shape.len(), rr, x_inner);
        k.epilogue = Some(Epilogue { insts: softmax_via_log_sum(dtype), outputs: vec![6] });
        let ck = CpuKernel::compile_reduce(&k, "lse").unwrap();
        assert_eq!(ck.is_tiled(), tiles(dtype, rr, x_inner), "{label}");
        let x = make_input(dtype, shape, rr, Lay::Full(x_inner), 11, false);
        let got = check(&k, shape, std::slice::from_ref(&x), &[], label);
        let (n_out, n_red) = sizes(&k, shape);
        for o in 0..n_out {
            let s: f64 = got.epi[0][o * n_red..(o + 1) * n_red].iter().sum();
            assert!((s - 1.0).abs() < 1e-4, "{label}: row {o} sums to {s}");
        }
    });
}

/// Layer norm over x (input 0) as one kernel, scalar 0 = 1/n, scalar 1 = eps: the mean, the
/// variance `Σ (x - mean)² / n`, then `(x - mean)·rsqrt(var + eps)`.
fn layer_norm_kernel(dtype: DType, rank: usize, rr: usize, x_inner: InnerStride) -> ReduceKernel {
    let i = |op| inst(op, dtype);
    let mean = stage(vec![i(InstOp::Load(0))], 0, ReduceOp::Sum, dtype, Some(0));
    let var = stage(
        vec![
            i(InstOp::Load(0)),
            i(InstOp::Reduced(0)),
            i(InstOp::Binary(BinaryOp::Sub, 0, 1)),
            i(InstOp::Unary(UnaryOp::Square, 2)),
        ],
        3,
        ReduceOp::Sum,
        dtype,
        Some(0),
    );
    let epilogue = vec![
        i(InstOp::Load(0)),
        i(InstOp::Reduced(0)),
        i(InstOp::Binary(BinaryOp::Sub, 0, 1)),
        i(InstOp::Reduced(1)),
        i(InstOp::Scalar(1)),
        i(InstOp::Binary(BinaryOp::Add, 3, 4)),
        i(InstOp::Unary(UnaryOp::Rsqrt, 5)),
        i(InstOp::Binary(BinaryOp::Mul, 2, 6)),
    ];
    ReduceKernel {
        rank,
        reduce_rank: rr,
        inputs: vec![KernelInput { dtype, inner: x_inner }],
        scalars: 2,
        stages: vec![mean, var],
        epilogue: Some(Epilogue { insts: epilogue, outputs: vec![7] }),
    }
}

#[test]
fn layer_norm_is_one_kernel() {
    each_case("layer_norm", |dtype, shape, rr, x_inner, label| {
        let k = layer_norm_kernel(dtype, shape.len(), rr, x_inner);
        assert_eq!(
            CpuKernel::compile_reduce(&k, "ln").unwrap().is_vectorized(),
            x_inner == InnerStride::Unit,
            "{label}"
        );
        let (n_out, n_red) = sizes(&k, shape);
        let eps = 1e-5;
        let x = make_input(dtype, shape, rr, Lay::Full(x_inner), 3, false);
        let got = check(&k, shape, std::slice::from_ref(&x), &[1.0 / n_red as f64, eps], label);
        for o in 0..n_out {
            let xs: Vec<f64> = (0..n_red).map(|r| x.at(&index(shape, rr, o, r))).collect();
            let mean = xs.iter().sum::<f64>() / n_red as f64;
            let var = xs.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n_red as f64;
            let ys = &got.epi[0][o * n_red..(o + 1) * n_red];
            let y_mean = ys.iter().sum::<f64>() / n_red as f64;
            let y_var = ys.iter().map(|y| (y - y_mean) * (y - y_mean)).sum::<f64>() / n_red as f64;
            assert!(y_mean.abs() < 1e-4, "{label}: row {o}'s mean is {y_mean}");
            assert!((y_var - var / (var + eps)).abs() < 1e-3, "{label}: row {o}'s variance is {y_var}");
        }
    });
}

#[test]
fn a_per_output_exp_is_computed_once_not_tiled() {
    // max, then the epilogue x · exp(max): the exp has one value per output, so it is hoisted
    // out of the loop and is no tile stage.
    each_case("per-output exp", |dtype, shape, rr, x_inner, label| {
        let i = |op| inst(op, dtype);
        let max = stage(vec![i(InstOp::Load(0))], 0, ReduceOp::Max, dtype, None);
        let epilogue = vec![
            i(InstOp::Reduced(0)),
            i(InstOp::Unary(UnaryOp::Exp, 0)),
            i(InstOp::Load(0)),
            i(InstOp::Binary(BinaryOp::Mul, 2, 1)),
        ];
        let k = ReduceKernel {
            rank: shape.len(),
            reduce_rank: rr,
            inputs: vec![KernelInput { dtype, inner: x_inner }],
            scalars: 0,
            stages: vec![max],
            epilogue: Some(Epilogue { insts: epilogue, outputs: vec![3] }),
        };
        assert!(!CpuKernel::compile_reduce(&k, "pox").unwrap().is_tiled(), "{label}");
        let x = make_input(dtype, shape, rr, Lay::Full(x_inner), 23, false);
        check(&k, shape, &[x], &[], label);
    });
}

#[test]
fn cross_entropy_pieces_hoist_per_output_values() {
    // Over logits x (0) and target probabilities t (1): max, Σ exp(x - max), then
    // Σ t·(x - max - log Σ) (a third stage reading both; `max + log Σ` is computed once per
    // output); no epilogue.
    each_case("cross_entropy", |dtype, shape, rr, x_inner, label| {
        let mut k = softmax_kernel(dtype, shape.len(), rr, x_inner);
        k.epilogue = None;
        k.inputs.push(KernelInput { dtype, inner: x_inner });
        let i = |op| inst(op, dtype);
        let nll = vec![
            i(InstOp::Reduced(1)),
            i(InstOp::Unary(UnaryOp::Log, 0)),
            i(InstOp::Reduced(0)),
            i(InstOp::Binary(BinaryOp::Add, 2, 1)),
            i(InstOp::Load(0)),
            i(InstOp::Binary(BinaryOp::Sub, 4, 3)),
            i(InstOp::Load(1)),
            i(InstOp::Binary(BinaryOp::Mul, 6, 5)),
        ];
        k.stages.push(stage(nll, 7, ReduceOp::Sum, dtype, None));
        let ck = CpuKernel::compile_reduce(&k, "ce").unwrap();
        assert_eq!(ck.is_vectorized(), x_inner == InnerStride::Unit, "{label}");
        assert_eq!(ck.is_tiled(), tiles(dtype, rr, x_inner), "{label}");
        let x = make_input(dtype, shape, rr, Lay::Full(x_inner), 17, false);
        let t = make_input(dtype, shape, rr, Lay::Full(x_inner), 19, true);
        let got = check(&k, shape, &[x, t], &[], label);
        assert!(got.stages[2].iter().all(|&v| v < 0.0), "{label}: Σ t·log_softmax(x) is negative for positive t");
    });
}

#[test]
fn one_hot_sums_count_equal_elements() {
    // Σ where(x == t, a, b) (cross-entropy's gradient sums its one-hot mask this way): x
    // small integers with repeats (so a row holds t zero, one or several times), t and a one
    // value per output, b a constant 0 or a run-time scalar; t on either side of the `==`.
    each_case("one_hot", |dtype, shape, rr, x_inner, label| {
        let i = |op| inst(op, dtype);
        let round = |mut x: common::Input| {
            x.vals.iter_mut().for_each(|v| *v = (*v * 2.0).round());
            x
        };
        for (b, t_first) in [(InstOp::Const(0.0), false), (InstOp::Scalar(0), true)] {
            let cmp = if t_first { InstOp::Cmp(CmpOp::Eq, 1, 0) } else { InstOp::Cmp(CmpOp::Eq, 0, 1) };
            let insts = vec![
                i(InstOp::Load(0)),
                i(InstOp::Load(1)),
                i(InstOp::Load(2)),
                i(b),
                inst(cmp, DType::Bool),
                i(InstOp::Where(4, 2, 3)),
            ];
            let k = ReduceKernel {
                rank: shape.len(),
                reduce_rank: rr,
                inputs: vec![
                    KernelInput { dtype, inner: x_inner },
                    KernelInput { dtype, inner: InnerStride::Broadcast },
                    KernelInput { dtype, inner: InnerStride::Broadcast },
                ],
                scalars: 1,
                stages: vec![stage(insts, 5, ReduceOp::Sum, dtype, None)],
                epilogue: None,
            };
            let x = round(make_input(dtype, shape, rr, Lay::Full(x_inner), 37, false));
            let t = round(make_input(dtype, shape, rr, Lay::PerOutput, 41, false));
            let a = make_input(dtype, shape, rr, Lay::PerOutput, 43, false);
            let got = check(&k, shape, &[x, t, a], &[0.25], label);
            assert!(got.stages[0].iter().any(|&v| v != 0.0), "{label}: some row holds its t");
        }
    });
}

/// The cross-entropy gradient as one kernel over logits x (0), `iota` (1: the class index of
/// each element), the target t (2) and the picked gradient a (3), one value per output: the
/// max, `Σ exp(x - max)`, `S = Σ where(iota == t, a, 0)`, then the epilogue
/// `where(iota == t, a, 0) - exp(x - max - log Σ)·S` (log-softmax's backward). Tiled f32 rows
/// that fit the row buffer run the epilogue as one native routine call over the kept exps
/// (`cpu/native_epilogue.rs`); rows of 4500 run the loops.
#[test]
fn the_cross_entropy_gradient_is_one_kernel() {
    each_case("cross_entropy grad", |dtype, shape, rr, x_inner, label| {
        let i = |op| inst(op, dtype);
        let mut k = softmax_kernel(dtype, shape.len(), rr, x_inner);
        let hot = |insts: &mut Vec<Inst>| {
            let at = insts.len() as u32;
            insts.extend([
                i(InstOp::Load(1)),
                i(InstOp::Load(2)),
                inst(InstOp::Cmp(CmpOp::Eq, at, at + 1), DType::Bool),
                i(InstOp::Load(3)),
                i(InstOp::Const(0.0)),
                i(InstOp::Where(at + 2, at + 3, at + 4)),
            ]);
            at + 5
        };
        let mut picked = Vec::new();
        let reduced = hot(&mut picked);
        k.stages.push(stage(picked, reduced, ReduceOp::Sum, dtype, None));
        let mut epilogue = softmax_via_log_sum(dtype);
        epilogue.extend([i(InstOp::Reduced(2)), i(InstOp::Binary(BinaryOp::Mul, 6, 7))]);
        let w = hot(&mut epilogue);
        epilogue.push(i(InstOp::Binary(BinaryOp::Sub, w, 8)));
        k.epilogue = Some(Epilogue { outputs: vec![epilogue.len() as u32 - 1], insts: epilogue });
        k.inputs.extend([
            KernelInput { dtype, inner: InnerStride::Unit },
            KernelInput { dtype, inner: InnerStride::Broadcast },
            KernelInput { dtype, inner: InnerStride::Broadcast },
        ]);
        let ck = CpuKernel::compile_reduce(&k, "ce_grad").unwrap();
        assert_eq!(ck.is_tiled(), tiles(dtype, rr, x_inner), "{label}");
        let (n_out, n_red) = sizes(&k, shape);
        let x = make_input(dtype, shape, rr, Lay::Full(x_inner), 29, false);
        let mut iota = make_input(dtype, shape, rr, Lay::OverReduced, 1, false);
        iota.vals = (0..iota.vals.len()).map(|j| j as f64).collect();
        let mut t = make_input(dtype, shape, rr, Lay::PerOutput, 1, false);
        t.vals = (0..n_out).map(|o| ((o * 7 + 3) % n_red) as f64).collect();
        let a = make_input(dtype, shape, rr, Lay::PerOutput, 31, false);
        let a_vals = a.vals.clone();
        let got = check(&k, shape, &[x, iota, t, a], &[], label);
        // Each row of the gradient sums to a - a·Σ softmax = 0.
        for o in 0..n_out {
            let s: f64 = got.epi[0][o * n_red..(o + 1) * n_red].iter().sum();
            assert!(s.abs() < 1e-4 * (1.0 + a_vals[o].abs()), "{label}: row {o} sums to {s}");
        }
    });
}

#[test]
fn independent_stages() {
    // Σ x (input 0) and max y (input 1, its own layout), read by an epilogue x·Reduced(1) -
    // Reduced(0); and an integer stage (Σ i as i64, input 2) after a float one (the scalar
    // plan for both: the inputs' dtypes differ).
    each_case("independent", |dtype, shape, rr, x_inner, label| {
        let rank = shape.len();
        let i = |op| inst(op, dtype);
        let y_inner = if x_inner == InnerStride::Unit { InnerStride::Strided } else { InnerStride::Unit };
        let inputs = vec![KernelInput { dtype, inner: x_inner }, KernelInput { dtype, inner: x_inner }];
        let epilogue = vec![
            i(InstOp::Load(0)),
            i(InstOp::Reduced(1)),
            i(InstOp::Binary(BinaryOp::Mul, 0, 1)),
            i(InstOp::Reduced(0)),
            i(InstOp::Binary(BinaryOp::Sub, 2, 3)),
        ];
        let k = ReduceKernel {
            rank,
            reduce_rank: rr,
            inputs,
            scalars: 0,
            stages: vec![
                stage(vec![i(InstOp::Load(0))], 0, ReduceOp::Sum, dtype, None),
                stage(vec![i(InstOp::Load(1))], 0, ReduceOp::Max, dtype, None),
            ],
            epilogue: Some(Epilogue { insts: epilogue, outputs: vec![4] }),
        };
        assert_eq!(
            CpuKernel::compile_reduce(&k, "ind").unwrap().is_vectorized(),
            x_inner == InnerStride::Unit,
            "{label}"
        );
        let x = make_input(dtype, shape, rr, Lay::Full(x_inner), 23, false);
        let y = make_input(dtype, shape, rr, Lay::Full(x_inner), 29, false);
        let got = check(&k, shape, &[x, y], &[], label);
        assert_ne!(got.stages[0], got.stages[1], "{label}");

        let mut k2 = k.clone();
        k2.epilogue = None;
        k2.inputs[1].inner = y_inner;
        k2.inputs.push(KernelInput { dtype: DType::I32, inner: x_inner });
        k2.stages[1] = stage(
            vec![inst(InstOp::Load(2), DType::I32), inst(InstOp::Cast(0), DType::I64)],
            1,
            ReduceOp::Sum,
            DType::I64,
            None,
        );
        assert!(!CpuKernel::compile_reduce(&k2, "int").unwrap().is_vectorized(), "{label}");
        let x = make_input(dtype, shape, rr, Lay::Full(x_inner), 23, false);
        let y = make_input(dtype, shape, rr, Lay::Full(y_inner), 29, false);
        let n = make_input(DType::I32, shape, rr, Lay::Full(x_inner), 31, false);
        check(&k2, shape, &[x, y, n], &[], &format!("{label} int"));
    });
}

#[test]
fn stages_read_only_earlier_stages() {
    let d = DType::F32;
    let base = softmax_kernel(d, 2, 1, InnerStride::Unit);
    assert!(base.validate().is_ok());
    // Stage 1 reads itself, stage 0 reads stage 1.
    for (s, n, what) in [(1usize, 1u32, "stage 1 prologue"), (0, 1, "stage 0 prologue"), (0, 0, "stage 0 prologue")] {
        let mut k = base.clone();
        let insts = &mut k.stages[s].insts;
        let r = insts.len() as u32;
        insts.push(inst(InstOp::Reduced(n), d));
        insts.push(inst(InstOp::Binary(BinaryOp::Add, 0, r), d));
        k.stages[s].reduced = r + 1;
        let e = k.validate().unwrap_err();
        assert!(e.starts_with(what) && e.contains("stage") && e.contains("Reduced"), "stage {s} reading {n}: {e}");
        assert!(CpuKernel::compile_reduce(&k, "self").is_err());
    }
    // A later stage's value as the wrong dtype; the epilogue reading a stage that isn't there.
    let mut k = base.clone();
    k.stages[1].insts[1].dtype = DType::F64;
    let e = k.validate().unwrap_err();
    assert!(
        e.starts_with("stage 1 prologue")
            && e.contains("reduced value of stage 0")
            && e.contains(&DType::F32.to_string()),
        "{e}"
    );
    let mut k = base.clone();
    k.stages[0].output = DType::F64;
    let e = k.validate().unwrap_err();
    assert!(e.starts_with("stage 1 prologue") && e.contains(&DType::F64.to_string()), "{e}");
    let mut k = base.clone();
    k.epilogue.as_mut().unwrap().insts[4].op = InstOp::Reduced(2);
    let e = k.validate().unwrap_err();
    assert!(e.starts_with("epilogue") && e.contains("stage 2"), "{e}");
    let mut k = base.clone();
    k.epilogue.as_mut().unwrap().insts[4].dtype = DType::F64;
    assert!(k.validate().unwrap_err().starts_with("epilogue"));
    // Per-stage rules: scale, random draws, no stages at all.
    let mut k = base.clone();
    k.stages[1].scale = Some(0);
    let e = k.validate().unwrap_err();
    assert!(e.starts_with("stage 1 prologue") && e.contains("scale"), "{e}");
    let mut k = base.clone();
    k.scalars = 4;
    k.stages[1].insts[0] = inst(InstOp::Rand { dist: kiln_codegen::ir::RandDist::Uniform, params: 0 }, d);
    let e = k.validate().unwrap_err();
    assert!(e.starts_with("stage 1 prologue") && e.contains("random"), "{e}");
    let mut k = base.clone();
    k.stages.clear();
    k.epilogue = None;
    assert!(k.validate().unwrap_err().contains("at least one stage"));
    // Reduced stays refused in elementwise kernels.
    let ew = base.stage_prologue(1);
    assert!(ew.validate().unwrap_err().contains("Reduced"));
    assert!(base.stage_prologue(0).validate().is_ok());
}

#[test]
fn every_stage_is_part_of_the_hash() {
    let d = DType::F32;
    let base = softmax_kernel(d, 2, 1, InnerStride::Unit);
    let mut variants = vec![base.clone()];
    let mut push = |f: &dyn Fn(&mut ReduceKernel)| {
        let mut k = base.clone();
        f(&mut k);
        variants.push(k);
    };
    push(&|k| k.stages[1].op = ReduceOp::Max);
    push(&|k| k.stages[1].insts[3].op = InstOp::Unary(UnaryOp::Square, 2));
    push(&|k| k.stages[1].reduced = 2);
    push(&|k| k.stages[1].output = DType::F64);
    push(&|k| {
        k.scalars = 1;
        k.stages[1].scale = Some(0);
    });
    push(&|k| k.stages[0].op = ReduceOp::Min);
    push(&|k| k.stages.swap(0, 1));
    push(&|k| k.stages.push(k.stages[1].clone()));
    push(&|k| k.epilogue.as_mut().unwrap().insts[4].op = InstOp::Reduced(0));
    let hashes: Vec<u64> = variants.iter().map(|k| k.structural_hash()).collect();
    for i in 0..hashes.len() {
        for j in i + 1..hashes.len() {
            assert_ne!(hashes[i], hashes[j], "variants {i} and {j}");
        }
    }
    assert_eq!(base.structural_hash(), base.clone().structural_hash());
}
