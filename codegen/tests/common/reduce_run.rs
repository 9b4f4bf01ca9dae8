//! Running a [`ReduceKernel`] in the tests of stages and epilogues (`cpu_reduce_stages.rs`,
//! `cpu_reduce_epilogue.rs`): a reference evaluator of instructions in f64, and a runner
//! that calls a compiled kernel over row ranges and reads every output back.

use super::{bytes, kernel_args, read_out, Input};
use kiln_codegen::cpu::CpuKernel;
use kiln_codegen::kernel::{Inst, InstOp, ReduceKernel};
use kiln_runtime::op_kind::{BinaryOp, CmpOp, ReduceOp, UnaryOp};
use kiln_runtime::DType;
use std::ops::Range;

/// An instruction of `dtype`.
pub fn inst(op: InstOp, dtype: DType) -> Inst {
    Inst { op, dtype }
}

/// The reference of `insts` at one element, in f64 (exact for the integers used), with
/// `reduced[s]` as [`InstOp::Reduced`]`(s)`; per instruction, its value.
pub fn eval(insts: &[Inst], load: &dyn Fn(usize) -> f64, scalars: &[f64], reduced: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = Vec::new();
    for i in insts {
        let a = |x: u32| v[x as usize];
        let r = match i.op {
            InstOp::Load(n) => load(n as usize),
            InstOp::Scalar(j) => scalars[j as usize],
            InstOp::Const(c) => c,
            InstOp::Reduced(s) => reduced[s as usize],
            InstOp::Unary(UnaryOp::Exp, x) => a(x).exp(),
            InstOp::Unary(UnaryOp::Log, x) => a(x).ln(),
            InstOp::Unary(UnaryOp::Rsqrt, x) => 1.0 / a(x).sqrt(),
            InstOp::Unary(UnaryOp::Square, x) => a(x) * a(x),
            InstOp::Binary(BinaryOp::Add, x, y) => a(x) + a(y),
            InstOp::Binary(BinaryOp::Sub, x, y) => a(x) - a(y),
            InstOp::Binary(BinaryOp::Mul, x, y) => a(x) * a(y),
            InstOp::Binary(BinaryOp::Div, x, y) => a(x) / a(y),
            InstOp::Cmp(CmpOp::Gt, x, y) => (a(x) > a(y)) as i64 as f64,
            InstOp::Cmp(CmpOp::Eq, x, y) => (a(x) == a(y)) as i64 as f64,
            InstOp::Where(c, x, y) => {
                if a(c) != 0.0 {
                    a(x)
                } else {
                    a(y)
                }
            }
            InstOp::Cast(x) => a(x),
            op => panic!("the reference does not evaluate {op:?}"),
        };
        v.push(r);
    }
    v
}

/// A kernel's results as f64: per stage its values, then per epilogue output its values.
pub struct Outs {
    /// Per stage, its value for each output.
    pub stages: Vec<Vec<f64>>,
    /// Per epilogue output, its values.
    pub epi: Vec<Vec<f64>>,
}

/// The number of outputs and of reduced elements per output of `k` over `shape`.
pub fn sizes(k: &ReduceKernel, shape: &[usize]) -> (usize, usize) {
    let kept = shape.len() - k.reduce_rank;
    (shape[..kept].iter().product(), shape[kept..].iter().product())
}

/// The full multi-index of reduced element `r` of output `o`.
pub fn index(shape: &[usize], rr: usize, o: usize, r: usize) -> Vec<usize> {
    let rank = shape.len();
    let mut idx = vec![0usize; rank];
    let (mut ro, mut rr_) = (o, r);
    for d in (0..rank).rev() {
        let rem = if d >= rank - rr { &mut rr_ } else { &mut ro };
        idx[d] = *rem % shape[d];
        *rem /= shape[d];
    }
    idx
}

/// Compiles `k` and runs it over `shape` once per row range of `splits` (consecutive, from 0
/// to the number of outputs), checking after each call that no later output was written.
pub fn run(k: &ReduceKernel, shape: &[usize], inputs: &[Input], scalars: &[f64], splits: &[Range<usize>]) -> Outs {
    let kern = CpuKernel::compile_reduce(k, "reduce").unwrap_or_else(|e| panic!("{e}"));
    let (n_out, n_red) = sizes(k, shape);
    let bufs: Vec<Vec<u8>> = inputs.iter().map(bytes).collect();
    let in_ptrs: Vec<*const u8> = bufs.iter().map(|b| b.as_ptr()).collect();
    let strides: Vec<isize> = inputs.iter().flat_map(|x| x.strides.iter().copied()).collect();
    let ep_dtypes: Vec<DType> = k.epilogue.iter().flat_map(|ep| ep.outputs.iter().map(|&v| ep.dtype(v))).collect();
    // Per buffer: its dtype and elements per output.
    let per: Vec<(DType, usize)> =
        k.stages.iter().map(|s| (s.output, 1)).chain(ep_dtypes.iter().map(|&d| (d, n_red))).collect();
    let mut outs: Vec<Vec<u8>> = per.iter().map(|&(d, n)| vec![0xA5u8; n_out * n * d.size_in_bytes()]).collect();
    for rows in splits {
        let out_ptrs: Vec<*mut u8> = outs.iter_mut().map(|b| b.as_mut_ptr()).collect();
        let args = kernel_args(&in_ptrs, &out_ptrs, scalars, shape, &strides, rows.clone());
        // SAFETY: the input buffers cover every element their strides reach over `shape`, each
        // stage's buffer holds `n_out` elements of its output dtype and each epilogue buffer
        // `n_out·n_red` of its dtype, none overlapping; `rows` lies within `0..n_out`;
        // `scalars` covers `k.scalars`.
        unsafe { kern.call(&args) };
        for (b, &(d, n)) in outs.iter().zip(&per) {
            let from = rows.end * n * d.size_in_bytes();
            assert!(b[from..].iter().all(|&x| x == 0xA5), "outputs past row {} were written", rows.end);
        }
    }
    let read = |b: &[u8], d: DType, n: usize| (0..n).map(|i| read_out(b, d, i)).collect::<Vec<f64>>();
    let n_st = k.stages.len();
    let stages = outs[..n_st].iter().zip(&k.stages).map(|(b, s)| read(b, s.output, n_out)).collect();
    let epi = outs[n_st..].iter().zip(&ep_dtypes).map(|(b, &d)| read(b, d, n_out * n_red)).collect();
    Outs { stages, epi }
}

/// Runs `k` (rows `0..k` then `k..n`, `k` about a third of the outputs) and checks every stage
/// and the epilogue against the reference. Each stage's reference is evaluated with the
/// kernel's own values of the earlier stages, and so is the epilogue's: f32 sums within
/// `4e-6·Σ|term|`, f64 sums within `1e-12·Σ|term|`, max/min of loads and integer results
/// exact; f32 epilogue values within `1e-6·(1 + |want|)`, f64 ones within `1e-14·(1 +
/// |want|)`. Returns the results.
pub fn check(k: &ReduceKernel, shape: &[usize], inputs: &[Input], scalars: &[f64], label: &str) -> Outs {
    let (n_out, n_red) = sizes(k, shape);
    let mid = n_out.div_ceil(3);
    let got = run(k, shape, inputs, scalars, &[0..mid, mid..n_out]);
    let rr = k.reduce_rank;
    for o in 0..n_out {
        let mine: Vec<f64> = got.stages.iter().map(|v| v[o]).collect();
        for (s, st) in k.stages.iter().enumerate() {
            let rd = st.dtype(st.reduced);
            let (mut acc, mut abs) = (st.op.identity(), 0.0);
            for r in 0..n_red {
                let idx = index(shape, rr, o, r);
                let x = eval(&st.insts, &|i| inputs[i].at(&idx), scalars, &mine[..s])[st.reduced as usize];
                abs += x.abs();
                acc = st.op.step(acc, x);
            }
            if let Some(j) = st.scale {
                acc *= scalars[j as usize];
                abs *= scalars[j as usize].abs();
            }
            let exact = !rd.is_float()
                || (matches!(st.op, ReduceOp::Max | ReduceOp::Min)
                    && !st.insts.iter().any(|i| matches!(i.op, InstOp::Unary(..))));
            let tol = if exact {
                0.0
            } else if rd == DType::F32 || st.output == DType::F32 {
                4e-6 * abs
            } else {
                1e-12 * abs
            };
            let g = mine[s];
            assert!((g - acc).abs() <= tol, "{label}: stage {s}, output {o}: got {g}, want {acc} (tol {tol})");
        }
        let Some(ep) = &k.epilogue else { continue };
        for r in 0..n_red {
            let idx = index(shape, rr, o, r);
            let vals = eval(&ep.insts, &|i| inputs[i].at(&idx), scalars, &mine);
            for (e, &v) in ep.outputs.iter().enumerate() {
                let d = ep.dtype(v);
                let want = if d == DType::F32 { vals[v as usize] as f32 as f64 } else { vals[v as usize] };
                let tol = match d {
                    DType::F32 => 1e-6 * (1.0 + want.abs()),
                    DType::F64 => 1e-14 * (1.0 + want.abs()),
                    _ => 0.0,
                };
                let have = got.epi[e][o * n_red + r];
                assert!((have - want).abs() <= tol, "{label}: epilogue output {e} at output {o}, element {r} {idx:?}: got {have}, want {want} (tol {tol})");
            }
        }
    }
    got
}
