//! Reduction kernels of the Cranelift CPU back end ([`CpuKernel::compile_reduce`]) against a
//! plain Rust reference in f64 (i64 for integers): sum/prod/max/min over f32, f64, i64, i32
//! (and u8/Bool), ranks 2–3, one and two reduced dims, every inner stride, odd lengths (vector
//! tails), row ranges starting mid-way, NaN propagation, prologues (the softmax denominator
//! `Σ exp(x - m)`, the variance `Σ (x - mean)²`), `scale` (mean), empty reductions, refusals (f16/bf16 kernels: `cpu_half_reduce.rs`).
//!
//! Tolerances: integer results and float max/min are exact; f32 sums within `1e-6·Σ|x|`
//! (`4e-6·Σ|x|` with the inline `exp`), f64 sums within `1e-12·Σ|x|`; products within `1e-6`
//! (f32) or `1e-12` (f64) relative.

use kiln_codegen::cpu::CpuKernel;
use kiln_codegen::kernel::{InnerStride, Inst, InstOp, KernelArgs, KernelInput, ReduceKernel, ReduceStage};
use kiln_runtime::op_kind::{BinaryOp, CmpOp, ReduceOp, UnaryOp};
use kiln_runtime::DType;

mod common;
use common::{bytes, lcg, make_input, read_out, Input, Lay};

/// The reference prologue in f64 (i64 for integers), for the ops the tests use.
fn eval(k: &ReduceKernel, load: &dyn Fn(usize) -> f64, scalars: &[f64]) -> f64 {
    let st = &k.stages[0];
    let mut v: Vec<f64> = Vec::new();
    for inst in &st.insts {
        let r = match inst.op {
            InstOp::Load(i) => load(i as usize),
            InstOp::Scalar(j) => scalars[j as usize],
            InstOp::Const(c) => c,
            InstOp::Unary(UnaryOp::Exp, a) => v[a as usize].exp(),
            InstOp::Unary(UnaryOp::Square, a) => v[a as usize] * v[a as usize],
            InstOp::Binary(BinaryOp::Add, a, b) => v[a as usize] + v[b as usize],
            InstOp::Binary(BinaryOp::Sub, a, b) => v[a as usize] - v[b as usize],
            InstOp::Binary(BinaryOp::Mul, a, b) => v[a as usize] * v[b as usize],
            InstOp::Cmp(CmpOp::Gt, a, b) => (v[a as usize] > v[b as usize]) as i64 as f64,
            op => panic!("the reference does not evaluate {op:?}"),
        };
        v.push(r);
    }
    v[st.reduced as usize]
}

/// Compiles and runs `k` over `shape` for outputs `rows` and checks them against the reference:
/// exact for integers and float max/min (`sum_tol`/`prod_tol` relative tolerances otherwise),
/// outputs outside `rows` untouched. Returns the compiled results of `rows`.
fn check(
    k: &ReduceKernel,
    shape: &[usize],
    lays: &[Lay],
    rows: std::ops::Range<usize>,
    scalars: &[f64],
    nan_at: Option<usize>,
    label: &str,
) -> Vec<f64> {
    let kern = CpuKernel::compile_reduce(k, label).unwrap_or_else(|e| panic!("{label}: {e}"));
    let st = &k.stages[0];
    for (inp, lay) in k.inputs.iter().zip(lays) {
        assert_eq!(inp.inner, lay.inner(), "{label}: the layout must match the kernel's inner stride");
    }
    let rank = shape.len();
    let rr = k.reduce_rank;
    let n_out: usize = shape[..rank - rr].iter().product();
    let n_red: usize = shape[rank - rr..].iter().product();
    let small = st.op == ReduceOp::Prod;
    let mut inputs: Vec<Input> = k
        .inputs
        .iter()
        .zip(lays)
        .enumerate()
        .map(|(i, (inp, &lay))| make_input(inp.dtype, shape, rr, lay, i as u64 * 77 + 5, small))
        .collect();
    if let Some(p) = nan_at {
        let n = inputs[0].vals.len();
        inputs[0].vals[p % n] = f64::NAN;
    }
    let bufs: Vec<Vec<u8>> = inputs.iter().map(bytes).collect();
    let in_ptrs: Vec<*const u8> = bufs.iter().map(|b| b.as_ptr()).collect();
    let osz = st.output.size_in_bytes();
    let mut out = vec![0xA5u8; n_out.max(1) * osz];
    let out_ptrs = [out.as_mut_ptr()];
    let strides: Vec<isize> = inputs.iter().flat_map(|x| x.strides.iter().copied()).collect();
    let args = common::kernel_args(&in_ptrs, &out_ptrs, scalars, shape, &strides, rows.clone());
    // SAFETY: the buffers cover every element the strides reach for `shape`, the output buffer
    // holds `n_out` elements and `rows` lies within it; the scalars cover `k.scalars`.
    unsafe { kern.call(&args) };

    let rd = st.dtype(st.reduced);
    let mut got_all = Vec::new();
    for o in 0..n_out {
        let o_bytes = &out[o * osz..(o + 1) * osz];
        if !rows.contains(&o) {
            assert!(o_bytes.iter().all(|&b| b == 0xA5), "{label}: output {o} outside the rows was written");
            continue;
        }
        // The outer multi-index of output o, then every reduced element.
        let mut idx = vec![0usize; rank];
        let mut rem = o;
        for d in (0..rank - rr).rev() {
            idx[d] = rem % shape[d];
            rem /= shape[d];
        }
        let (mut acc, mut abs) = (st.op.identity(), 0.0);
        let mut iacc: i64 = if st.op == ReduceOp::Prod { 1 } else { 0 };
        for r in 0..n_red {
            let mut rem = r;
            for d in (rank - rr..rank).rev() {
                idx[d] = rem % shape[d];
                rem /= shape[d];
            }
            let load = |i: usize| {
                let off: isize = (0..rank).map(|d| idx[d] as isize * inputs[i].strides[d]).sum();
                inputs[i].vals[off as usize]
            };
            let x = eval(k, &load, scalars);
            abs += x.abs();
            match st.op {
                ReduceOp::Sum if !rd.is_float() => iacc = iacc.wrapping_add(x as i64),
                ReduceOp::Prod if !rd.is_float() => iacc = iacc.wrapping_mul(x as i64),
                _ => acc = st.op.step(acc, x),
            }
        }
        if !rd.is_float() && matches!(st.op, ReduceOp::Sum | ReduceOp::Prod) {
            acc = iacc as f64;
        }
        if let Some(s) = st.scale {
            acc *= scalars[s as usize];
            abs *= scalars[s as usize].abs();
        }
        let got = read_out(&out, st.output, o);
        got_all.push(got);
        let f32ish = rd == DType::F32 || st.output == DType::F32;
        let has_exp = st.insts.iter().any(|i| matches!(i.op, InstOp::Unary(UnaryOp::Exp, _)));
        let tol = match (st.op, rd.is_float()) {
            (_, false) | (ReduceOp::Max | ReduceOp::Min, true) if !has_exp => 0.0,
            (ReduceOp::Prod, true) => acc.abs() * if f32ish { 1e-6 } else { 1e-12 },
            _ => {
                abs * if !f32ish {
                    1e-12
                } else if has_exp {
                    4e-6
                } else {
                    1e-6
                } + 1e-300
            }
        };
        let ok = if acc.is_nan() { got.is_nan() } else { (got - acc).abs() <= tol || got == acc };
        assert!(ok, "{label}: output {o}: got {got}, want {acc} (tol {tol})");
    }
    got_all
}

fn load_kernel(dtype: DType, rank: usize, rr: usize, inner: InnerStride, op: ReduceOp) -> ReduceKernel {
    let output = if !dtype.is_float() && matches!(op, ReduceOp::Sum | ReduceOp::Prod) { DType::I64 } else { dtype };
    ReduceKernel {
        rank,
        reduce_rank: rr,
        inputs: vec![KernelInput { dtype, inner }],
        scalars: 0,
        stages: vec![ReduceStage {
            insts: vec![Inst { op: InstOp::Load(0), dtype }],
            reduced: 0,
            op,
            output,
            scale: None,
        }],
        epilogue: None,
    }
}

const OPS: [ReduceOp; 4] = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min];
const STRIDES: [InnerStride; 3] = [InnerStride::Unit, InnerStride::Broadcast, InnerStride::Strided];

#[test]
fn every_op_dtype_rank_and_stride() {
    let cases: [(&[usize], usize); 6] =
        [(&[5, 7], 1), (&[3, 13], 2), (&[3, 4, 9], 1), (&[2, 3, 5], 2), (&[2, 3, 11], 3), (&[4, 1, 2], 2)];
    for dtype in [DType::F32, DType::F64, DType::I64, DType::I32] {
        for op in OPS {
            for &(shape, rr) in &cases {
                for inner in STRIDES {
                    let k = load_kernel(dtype, shape.len(), rr, inner, op);
                    let n_out: usize = shape[..shape.len() - rr].iter().product();
                    let label = format!("{op:?} {dtype} {shape:?} rr={rr} {inner:?}");
                    let rows = if n_out > 1 { 1..n_out } else { 0..n_out };
                    check(&k, shape, &[Lay::Full(inner)], rows, &[], None, &label);
                    let kern = CpuKernel::compile_reduce(&k, "v").unwrap();
                    assert_eq!(kern.is_vectorized(), dtype.is_float() && inner != InnerStride::Strided, "{label}");
                }
            }
        }
    }
}

#[test]
fn partial_row_ranges_and_long_rows() {
    for dtype in [DType::F32, DType::F64] {
        for op in OPS {
            let k = load_kernel(dtype, 2, 1, InnerStride::Unit, op);
            check(&k, &[9, 1003], &[Lay::Full(InnerStride::Unit)], 3..7, &[], None, &format!("{op:?} {dtype} 3..7"));
            check(&k, &[9, 3], &[Lay::Full(InnerStride::Unit)], 8..9, &[], None, &format!("{op:?} {dtype} 8..9"));
            check(
                &k,
                &[9, 3],
                &[Lay::Full(InnerStride::Unit)],
                4..4,
                &[],
                None,
                &format!("{op:?} {dtype} empty range"),
            );
        }
    }
}

#[test]
fn max_min_propagate_nan() {
    for dtype in [DType::F32, DType::F64] {
        for op in [ReduceOp::Max, ReduceOp::Min] {
            for inner in STRIDES {
                // NaN first, inside a vector of each unrolled chain of the vector loop (16
                // f32 or 8 f64 elements an iteration), in the last iteration, in the tail.
                for nan_at in [0, 5, 6, 12, 13, 21, 30, 39, 47, 48, 50] {
                    let k = load_kernel(dtype, 2, 1, inner, op);
                    let got = check(
                        &k,
                        &[1, 51],
                        &[Lay::Full(inner)],
                        0..1,
                        &[],
                        Some(nan_at),
                        &format!("{op:?} {dtype} {inner:?} nan@{nan_at}"),
                    );
                    if inner != InnerStride::Strided || nan_at % 3 == 0 {
                        assert!(got[0].is_nan(), "{op:?} {dtype} {inner:?}: NaN lost");
                    }
                }
            }
        }
    }
}

#[test]
fn mixed_inputs_run_the_scalar_path() {
    // Σ x·y with x unit-strided and y strided (scalar loop), and with both unit (vector loop).
    for dtype in [DType::F32, DType::F64, DType::I64, DType::I32] {
        for (yi, vec) in [(InnerStride::Strided, false), (InnerStride::Unit, true), (InnerStride::Broadcast, true)] {
            let insts = vec![
                Inst { op: InstOp::Load(0), dtype },
                Inst { op: InstOp::Load(1), dtype },
                Inst { op: InstOp::Binary(BinaryOp::Mul, 0, 1), dtype },
            ];
            let inputs = vec![KernelInput { dtype, inner: InnerStride::Unit }, KernelInput { dtype, inner: yi }];
            let output = if dtype.is_float() { dtype } else { DType::I64 };
            let k = ReduceKernel {
                rank: 3,
                reduce_rank: 2,
                inputs,
                scalars: 0,
                stages: vec![ReduceStage { insts, reduced: 2, op: ReduceOp::Sum, output, scale: None }],
                epilogue: None,
            };
            check(
                &k,
                &[3, 5, 7],
                &[Lay::Full(InnerStride::Unit), Lay::Full(yi)],
                1..3,
                &[],
                None,
                &format!("dot {dtype} {yi:?}"),
            );
            assert_eq!(CpuKernel::compile_reduce(&k, "m").unwrap().is_vectorized(), vec && dtype.is_float());
        }
    }
}

/// `Σ exp(x - m)` over the last `rr` dims, `m` one value per output.
fn softmax_denominator(dtype: DType, rank: usize, rr: usize) -> ReduceKernel {
    let insts = vec![
        Inst { op: InstOp::Load(0), dtype },
        Inst { op: InstOp::Load(1), dtype },
        Inst { op: InstOp::Binary(BinaryOp::Sub, 0, 1), dtype },
        Inst { op: InstOp::Unary(UnaryOp::Exp, 2), dtype },
    ];
    let inputs =
        vec![KernelInput { dtype, inner: InnerStride::Unit }, KernelInput { dtype, inner: InnerStride::Broadcast }];
    ReduceKernel {
        rank,
        reduce_rank: rr,
        inputs,
        scalars: 0,
        stages: vec![ReduceStage { insts, reduced: 3, op: ReduceOp::Sum, output: dtype, scale: None }],
        epilogue: None,
    }
}

#[test]
fn softmax_denominator_prologue() {
    for dtype in [DType::F32, DType::F64] {
        for (shape, rr) in [(&[4usize, 37][..], 1), (&[3, 2, 9][..], 1), (&[3, 2, 9][..], 2)] {
            let k = softmax_denominator(dtype, shape.len(), rr);
            assert!(CpuKernel::compile_reduce(&k, "sm").unwrap().is_vectorized());
            check(
                &k,
                shape,
                &[Lay::Full(InnerStride::Unit), Lay::PerOutput],
                1..shape[0],
                &[],
                None,
                &format!("softmax {dtype} {shape:?} rr={rr}"),
            );
        }
    }
}

#[test]
fn variance_and_mean_with_scale() {
    for dtype in [DType::F32, DType::F64] {
        for inner in [InnerStride::Unit, InnerStride::Strided] {
            let shape = [5usize, 3, 7];
            let n = 21.0;
            // mean: Σ x · (1/n)
            let mut k = load_kernel(dtype, 3, 2, inner, ReduceOp::Sum);
            k.scalars = 1;
            k.stages[0].scale = Some(0);
            check(&k, &shape, &[Lay::Full(inner)], 0..5, &[1.0 / n], None, &format!("mean {dtype} {inner:?}"));
            // variance: Σ (x - mean)² · (1/n), with the mean as a per-output input
            let insts = vec![
                Inst { op: InstOp::Load(0), dtype },
                Inst { op: InstOp::Load(1), dtype },
                Inst { op: InstOp::Binary(BinaryOp::Sub, 0, 1), dtype },
                Inst { op: InstOp::Unary(UnaryOp::Square, 2), dtype },
            ];
            let inputs = vec![KernelInput { dtype, inner }, KernelInput { dtype, inner: InnerStride::Broadcast }];
            let k = ReduceKernel {
                rank: 3,
                reduce_rank: 2,
                inputs,
                scalars: 1,
                stages: vec![ReduceStage { insts, reduced: 3, op: ReduceOp::Sum, output: dtype, scale: Some(0) }],
                epilogue: None,
            };
            check(
                &k,
                &shape,
                &[Lay::Full(inner), Lay::PerOutput],
                2..5,
                &[1.0 / n],
                None,
                &format!("variance {dtype} {inner:?}"),
            );
        }
    }
}

#[test]
fn u8_and_bool_reduce_as_eager() {
    for dtype in [DType::U8, DType::Bool] {
        for op in OPS {
            for inner in STRIDES {
                let k = load_kernel(dtype, 2, 1, inner, op);
                check(&k, &[3, 11], &[Lay::Full(inner)], 0..3, &[], None, &format!("{op:?} {dtype} {inner:?}"));
            }
        }
    }
}

#[test]
fn f32_sums_accumulate_in_f64() {
    // 2^24 + many ones is lost by an f32 accumulator (it stays 2^24); the f64 one rounds once
    // at the end. The four vectors of one unrolled iteration are added in f32 first, so the
    // ones in 2^24's group may round away (one here): within one f32 ulp of the result.
    let n = 100_003usize;
    let mut xs = vec![1.0f32; n];
    xs[0] = 16_777_216.0;
    let k = load_kernel(DType::F32, 2, 1, InnerStride::Unit, ReduceOp::Sum);
    let shape = [1usize, n];
    let strides = [0isize, 1];
    let mut out = [0f32; 1];
    let ip = [xs.as_ptr() as *const u8];
    let op = [out.as_mut_ptr() as *mut u8];
    let args = KernelArgs {
        inputs: ip.as_ptr(),
        outputs: op.as_ptr(),
        scalars: std::ptr::null(),
        shape: shape.as_ptr(),
        strides: strides.as_ptr(),
        row_start: 0,
        row_end: 1,
        index_base: 0,
    };
    let kern = CpuKernel::compile_reduce(&k, "wide").unwrap();
    // SAFETY: `xs` holds the n elements of the one row, `out` the one output.
    unsafe { kern.call(&args) };
    let exact = 16_777_216.0f64 + (n - 1) as f64;
    let ulp = (exact as f32).next_up() as f64 - exact as f32 as f64;
    assert!((out[0] as f64 - exact).abs() <= ulp, "got {}, want {exact} within {ulp}", out[0]);
}

#[test]
fn empty_reductions_write_the_identity() {
    for (op, want) in [
        (ReduceOp::Sum, 0.0),
        (ReduceOp::Prod, 1.0),
        (ReduceOp::Max, f64::NEG_INFINITY),
        (ReduceOp::Min, f64::INFINITY),
    ] {
        for dtype in [DType::F32, DType::F64, DType::I64] {
            if !dtype.is_float() && matches!(op, ReduceOp::Max | ReduceOp::Min) {
                continue; // the integer bounds; eager rejects empty max/min anyway
            }
            let k = load_kernel(dtype, 2, 1, InnerStride::Unit, op);
            let got =
                check(&k, &[3, 0], &[Lay::Full(InnerStride::Unit)], 0..3, &[], None, &format!("empty {op:?} {dtype}"));
            if dtype.is_float() {
                assert_eq!(got, vec![want; 3]);
            }
        }
    }
}

#[test]
fn refusals_and_hashes() {
    let mut k = load_kernel(DType::F32, 2, 1, InnerStride::Unit, ReduceOp::Sum);
    k.reduce_rank = 0;
    assert!(k.validate().is_err());
    k.reduce_rank = 3;
    assert!(k.validate().is_err());
    let mut k = load_kernel(DType::I64, 2, 1, InnerStride::Unit, ReduceOp::Sum);
    k.scalars = 1;
    k.stages[0].scale = Some(0);
    assert!(CpuKernel::compile_reduce(&k, "s").is_err());
    k.stages[0].scale = Some(1);
    k.stages[0].output = DType::F64;
    assert!(k.validate().is_err());
    let a = load_kernel(DType::F32, 2, 1, InnerStride::Unit, ReduceOp::Sum);
    let b = load_kernel(DType::F32, 2, 1, InnerStride::Unit, ReduceOp::Max);
    let c = load_kernel(DType::F32, 2, 2, InnerStride::Unit, ReduceOp::Sum);
    assert_eq!(a.structural_hash(), a.clone().structural_hash());
    assert_ne!(a.structural_hash(), b.structural_hash());
    assert_ne!(a.structural_hash(), c.structural_hash());
}

/// Runs `k` over a contiguous buffer of `shape` into `n_out` outputs of `O`.
fn run_contiguous<T, O: Copy + Default>(k: &ReduceKernel, xs: &[T], shape: &[usize], n_out: usize) -> Vec<O> {
    let kern = CpuKernel::compile_reduce(k, "eager").unwrap();
    let mut strides = vec![1isize; shape.len()];
    for d in (0..shape.len() - 1).rev() {
        strides[d] = strides[d + 1] * shape[d + 1] as isize;
    }
    let mut out = vec![O::default(); n_out];
    let ip = [xs.as_ptr() as *const u8];
    let op = [out.as_mut_ptr() as *mut u8];
    let args = KernelArgs {
        inputs: ip.as_ptr(),
        outputs: op.as_ptr(),
        scalars: std::ptr::null(),
        shape: shape.as_ptr(),
        strides: strides.as_ptr(),
        row_start: 0,
        row_end: n_out,
        index_base: 0,
    };
    // SAFETY: `xs` is the contiguous tensor of `shape`, `out` holds the `n_out` outputs of the
    // kernel's output dtype (`O`).
    unsafe { kern.call(&args) };
    out
}

#[test]
fn matches_the_eager_kernels() {
    use kiln_runtime::cpu::reduce::{reduce, MinMax, Prod, ReducePlan, Sum};
    use kiln_runtime::Layout;
    for (shape, rr) in [(&[6usize, 1001][..], 1), (&[3, 5, 67][..], 2), (&[4, 3, 9][..], 1)] {
        let rank = shape.len();
        let n: usize = shape.iter().product();
        let n_out: usize = shape[..rank - rr].iter().product();
        let reduced: Vec<bool> = (0..rank).map(|d| d >= rank - rr).collect();
        let plan = ReducePlan::new(&Layout::contiguous(shape), &reduced);
        let mut seed = 11u64;
        let mut xs: Vec<f32> = (0..n).map(|_| (4.0 * lcg(&mut seed) - 2.0) as f32).collect();
        xs[n / 2 + 1] = f32::NAN; // one output's max/min is NaN
        let k = |op| load_kernel(DType::F32, rank, rr, InnerStride::Unit, op);
        let sum: Vec<f32> = run_contiguous(&k(ReduceOp::Sum), &xs, shape, n_out);
        let want = reduce(&xs, &plan, &Sum, |a: f64, _| a as f32);
        let abs = reduce(&xs.iter().map(|x| x.abs()).collect::<Vec<f32>>(), &plan, &Sum, |a: f64, _| a);
        for o in 0..n_out {
            if want[o].is_nan() {
                assert!(sum[o].is_nan());
            } else {
                assert!(
                    ((sum[o] - want[o]) as f64).abs() <= 1e-6 * abs[o],
                    "sum {shape:?} output {o}: {} vs eager {}",
                    sum[o],
                    want[o]
                );
            }
        }
        let ys: Vec<f32> = xs.iter().map(|x| if x.is_nan() { 1.0 } else { 0.75 + x.abs() / 4.0 }).collect();
        let prod: Vec<f32> = run_contiguous(&k(ReduceOp::Prod), &ys, shape, n_out);
        let want = reduce(&ys, &plan, &Prod, |a: f64, _| a as f32);
        for o in 0..n_out {
            assert!(
                (prod[o] - want[o]).abs() <= 1e-6 * want[o].abs(),
                "prod {shape:?} output {o}: {} vs eager {}",
                prod[o],
                want[o]
            );
        }
        for (op, want) in [
            (ReduceOp::Max, reduce(&xs, &plan, &MinMax::<true>, |a: f32, _| a)),
            (ReduceOp::Min, reduce(&xs, &plan, &MinMax::<false>, |a: f32, _| a)),
        ] {
            let got: Vec<f32> = run_contiguous(&k(op), &xs, shape, n_out);
            for o in 0..n_out {
                assert!(
                    got[o] == want[o] || (got[o].is_nan() && want[o].is_nan()),
                    "{op:?} {shape:?} output {o}: {} vs eager {}",
                    got[o],
                    want[o]
                );
            }
        }
        let is: Vec<i32> = (0..n).map(|i| (i as i32).wrapping_mul(2_654_435_761u32 as i32)).collect();
        let ki = load_kernel(DType::I32, rank, rr, InnerStride::Unit, ReduceOp::Sum);
        let got: Vec<i64> = run_contiguous(&ki, &is, shape, n_out);
        assert_eq!(&got[..], &reduce(&is, &plan, &Sum, |a: i64, _| a)[..]);
        let ki = load_kernel(DType::I32, rank, rr, InnerStride::Unit, ReduceOp::Max);
        let got: Vec<i32> = run_contiguous(&ki, &is, shape, n_out);
        assert_eq!(&got[..], &reduce(&is, &plan, &MinMax::<true>, |a: i32, _| a)[..]);
    }
}

#[test]
fn counting_a_comparison() {
    // Σ (x > 0) as i64 (a Bool prologue value reduces as an integer), and max of it as Bool.
    for dtype in [DType::F32, DType::I32] {
        for (op, output) in [(ReduceOp::Sum, DType::I64), (ReduceOp::Max, DType::Bool), (ReduceOp::Min, DType::Bool)] {
            let insts = vec![
                Inst { op: InstOp::Load(0), dtype },
                Inst { op: InstOp::Const(0.0), dtype },
                Inst { op: InstOp::Cmp(CmpOp::Gt, 0, 1), dtype: DType::Bool },
            ];
            let k = ReduceKernel {
                rank: 2,
                reduce_rank: 1,
                inputs: vec![KernelInput { dtype, inner: InnerStride::Unit }],
                scalars: 0,
                stages: vec![ReduceStage { insts, reduced: 2, op, output, scale: None }],
                epilogue: None,
            };
            assert!(!CpuKernel::compile_reduce(&k, "count").unwrap().is_vectorized());
            check(&k, &[4, 19], &[Lay::Full(InnerStride::Unit)], 1..4, &[], None, &format!("count {op:?} {dtype}"));
        }
    }
}
