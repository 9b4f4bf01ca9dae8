//! A tiled reduction stage's transcendental values kept for the whole row, so the epilogue
//! reads them instead of computing them again.
//!
//! Softmax's Σ stage computes `exp(x - max)` tile by tile and folds it; its epilogue computes
//! `exp(x - max) / Σ`, the same exp of the same row. Log-softmax's backward (cross-entropy's
//! gradient) needs `exp(x - max - log Σ)`, which [`share_exps`] rewrites to
//! `exp(x - max) · exp(-log Σ)` (the second factor once per output) when a stage computes
//! `exp(x - max)`. When a stage and the epilogue both have a tiled stage of the same value
//! ([`same_value`]: the same ops on the same inputs, scalars, constants and stage values), the
//! kernel keeps that stage's routine output for the row in a stack buffer of [`ROW_CACHE`]
//! elements, and the epilogue's tiles read it with no operand pass and no routine call. Rows
//! longer than the buffer take the old path (a run-time test per tile).
//!
//! The rewrite is made only for that log-softmax shape (`p = y - max y` from a Max stage,
//! `q = log Σ exp(p)` from a Sum stage, neither scaled), where `exp(p)` is in `[0, 1]` and
//! `exp(-q)` in `[1/n, 1]`: it changes the result by the rounding of one product (a few
//! ulp), and neither factor overflows or underflows where the fused form did not. For any
//! other `exp(p - q)` the factors could (`exp(50) · exp(-120)` is `inf · 0` in f32).

use crate::kernel::{Inst, InstOp, ReduceStage, Val};
use kiln_runtime::op_kind::{BinaryOp, ReduceOp, UnaryOp};
use kiln_runtime::DType;

/// Elements of the row buffer (16 KiB of f32: the row stays in L1 with the tile buffers).
pub(crate) const ROW_CACHE: usize = 4096;

/// True when value `a` of `xs` and value `b` of `ys` compute the same thing for the same
/// output and element: the same ops, in the same dtypes, on the same inputs, run-time
/// scalars, constants and stage values. Draws never match (each is its own stream).
pub(crate) fn same_value(xs: &[Inst], a: Val, ys: &[Inst], b: Val) -> bool {
    let mut memo = vec![None; xs.len() * ys.len()];
    same(xs, a, ys, b, &mut memo)
}

fn same(xs: &[Inst], a: Val, ys: &[Inst], b: Val, memo: &mut [Option<bool>]) -> bool {
    let at = a as usize * ys.len() + b as usize;
    if let Some(known) = memo[at] {
        return known;
    }
    let (x, y) = (&xs[a as usize], &ys[b as usize]);
    let mut s = |p: Val, q: Val| same(xs, p, ys, q, memo);
    use InstOp::*;
    let r = x.dtype == y.dtype
        && match (x.op, y.op) {
            (Load(i), Load(j)) | (Scalar(i), Scalar(j)) | (Reduced(i), Reduced(j)) => i == j,
            (Const(c), Const(d)) => c.to_bits() == d.to_bits(),
            (Unary(o, p), Unary(o2, q)) => o == o2 && s(p, q),
            (Binary(o, p, q), Binary(o2, p2, q2)) => o == o2 && s(p, p2) && s(q, q2),
            (Cmp(o, p, q), Cmp(o2, p2, q2)) => o == o2 && s(p, p2) && s(q, q2),
            (Logical(o, p, q), Logical(o2, p2, q2)) => o == o2 && s(p, p2) && s(q, q2),
            (Not(p), Not(q)) | (Cast(p), Cast(q)) => s(p, q),
            (Where(c, p, q), Where(c2, p2, q2)) => s(c, c2) && s(p, p2) && s(q, q2),
            _ => false,
        };
    memo[at] = Some(r);
    r
}

/// True when value `q` of the epilogue `insts` is `log Σ exp(p)`, the log of an unscaled
/// Sum stage of `stages` whose reduced value is `exp(p)`, and `p` is `y - max y` with the max
/// an unscaled Max stage over `y`: log-softmax's shape (see the module documentation).
fn log_softmax_shape(insts: &[Inst], stages: &[ReduceStage], p: Val, q: Val) -> bool {
    let stage_of = |v: Val, op: ReduceOp| match insts[v as usize].op {
        InstOp::Reduced(s) => stages.get(s as usize).filter(|st| st.op == op && st.scale.is_none()),
        _ => None,
    };
    let sum = match insts[q as usize].op {
        InstOp::Unary(UnaryOp::Log, r) => stage_of(r, ReduceOp::Sum),
        _ => None,
    };
    let sum_of_exp_p = sum.is_some_and(|st| match st.insts[st.reduced as usize].op {
        InstOp::Unary(UnaryOp::Exp, e) => same_value(&st.insts, e, insts, p),
        _ => false,
    });
    let max_shifted = match insts[p as usize].op {
        InstOp::Binary(BinaryOp::Sub, y, m) => {
            stage_of(m, ReduceOp::Max).is_some_and(|st| same_value(&st.insts, st.reduced, insts, y))
        }
        _ => false,
    };
    sum_of_exp_p && max_shifted
}

/// `insts` (an epilogue's instructions) with each f32 `exp(p - q)` of log-softmax's shape
/// over `stages` ([`log_softmax_shape`]) rewritten to `exp(p) · exp(-q)`, so that `exp(p)`
/// is the Σ stage's value; the order and every other instruction are kept, operands
/// renumbered. Also returns where each old value went.
pub(crate) fn share_exps(insts: &[Inst], stages: &[ReduceStage]) -> (Vec<Inst>, Vec<Val>) {
    let mut out: Vec<Inst> = Vec::with_capacity(insts.len() + 3);
    let mut at: Vec<Val> = Vec::with_capacity(insts.len());
    for inst in insts {
        let new = |v: Val| at[v as usize];
        let shared = match inst.op {
            InstOp::Unary(UnaryOp::Exp, a) if inst.dtype == DType::F32 => match insts[a as usize].op {
                InstOp::Binary(BinaryOp::Sub, p, q) if log_softmax_shape(insts, stages, p, q) => Some((new(p), new(q))),
                _ => None,
            },
            _ => None,
        };
        let op = match shared {
            Some((p, q)) => {
                let f32 = |op| Inst { op, dtype: DType::F32 };
                let base = out.len() as Val;
                out.push(f32(InstOp::Unary(UnaryOp::Exp, p)));
                out.push(f32(InstOp::Unary(UnaryOp::Neg, q)));
                out.push(f32(InstOp::Unary(UnaryOp::Exp, base + 1)));
                InstOp::Binary(BinaryOp::Mul, base, base + 2)
            }
            None => inst.op.map_vals(new),
        };
        out.push(Inst { op, dtype: inst.dtype });
        at.push(out.len() as Val - 1);
    }
    (out, at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32(op: InstOp) -> Inst {
        Inst { op, dtype: DType::F32 }
    }

    /// `[x, max, x - max, exp(x - max)]`: softmax's Σ stage prologue.
    fn stage() -> Vec<Inst> {
        use InstOp::*;
        vec![f32(Load(0)), f32(Reduced(0)), f32(Binary(BinaryOp::Sub, 0, 1)), f32(Unary(UnaryOp::Exp, 2))]
    }

    /// Softmax's stages: `max x`, then `Σ exp(x - max)`.
    fn softmax_stages() -> Vec<ReduceStage> {
        let max = ReduceStage {
            insts: vec![f32(InstOp::Load(0))],
            reduced: 0,
            op: ReduceOp::Max,
            output: DType::F32,
            scale: None,
        };
        let sum = ReduceStage { insts: stage(), reduced: 3, op: ReduceOp::Sum, output: DType::F32, scale: None };
        vec![max, sum]
    }

    #[test]
    fn same_value_compares_structure_not_positions() {
        use InstOp::*;
        let xs = stage();
        // The same x - max, built in another order, and near misses.
        let ys = vec![
            f32(Reduced(0)),
            f32(Load(0)),
            f32(Binary(BinaryOp::Sub, 1, 0)),
            f32(Load(1)),
            f32(Binary(BinaryOp::Sub, 3, 0)),
            f32(Binary(BinaryOp::Sub, 0, 1)),
        ];
        assert!(same_value(&xs, 2, &ys, 2));
        assert!(!same_value(&xs, 2, &ys, 4), "another input");
        assert!(!same_value(&xs, 2, &ys, 5), "operands swapped");
        let draws = [f32(Rand { dist: crate::ir::RandDist::Uniform, params: 0 })];
        assert!(!same_value(&draws, 0, &draws, 0), "draws never match");
    }

    #[test]
    fn exp_of_a_shifted_stage_value_becomes_a_product() {
        use InstOp::*;
        // Epilogue: exp(x - max - log Σ) + 1.
        let ep = vec![
            f32(Load(0)),
            f32(Reduced(0)),
            f32(Binary(BinaryOp::Sub, 0, 1)),
            f32(Reduced(1)),
            f32(Unary(UnaryOp::Log, 3)),
            f32(Binary(BinaryOp::Sub, 2, 4)),
            f32(Unary(UnaryOp::Exp, 5)),
            f32(Const(1.0)),
            f32(Binary(BinaryOp::Add, 6, 7)),
        ];
        let stages = softmax_stages();
        let (got, at) = share_exps(&ep, &stages);
        // The first six instructions stay; the exp becomes four.
        let mut want = ep[..6].to_vec();
        want.extend([
            f32(Unary(UnaryOp::Exp, 2)),
            f32(Unary(UnaryOp::Neg, 4)),
            f32(Unary(UnaryOp::Exp, 7)),
            f32(Binary(BinaryOp::Mul, 6, 8)),
            f32(Const(1.0)),
            f32(Binary(BinaryOp::Add, 9, 10)),
        ]);
        assert_eq!(got, want);
        assert_eq!(at, vec![0, 1, 2, 3, 4, 5, 9, 10, 11]);
        // Without a stage computing exp(x - max), nothing changes.
        let unchanged = (ep.clone(), (0..ep.len() as Val).collect::<Vec<Val>>());
        assert_eq!(share_exps(&ep, &[]), unchanged);
        // Nor when the shift is not a max (exp(x - m) could overflow), or the Σ is scaled.
        let mut not_max = softmax_stages();
        not_max[0].op = ReduceOp::Min;
        assert_eq!(share_exps(&ep, &not_max), unchanged);
        let mut scaled = softmax_stages();
        scaled[1].scale = Some(0);
        assert_eq!(share_exps(&ep, &scaled), unchanged);
    }
}
