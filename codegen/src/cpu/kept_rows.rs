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
//! The rewrite changes the epilogue's result by the rounding of one product (a few ulp); the
//! stage's max shift keeps `exp(x - max)` in `[0, 1]` and `Σ ≥ 1`, so neither factor
//! overflows where the fused form did not.

use super::emit::per_output_known;
use crate::kernel::{Inst, InstOp, Val};
use kiln_runtime::op_kind::{BinaryOp, UnaryOp};
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

/// `insts` (an epilogue's instructions) with each f32 `exp(p - q)` whose `q` is computed once
/// per output (and `p` is not) rewritten to `exp(p) · exp(-q)` when one of `stage_exps` (a
/// stage's instructions and the operand of its tiled exp) computes `exp(p)`; the order and
/// every other instruction are kept, operands renumbered. Also returns where each old value
/// went.
pub(crate) fn share_exps(insts: &[Inst], stage_exps: &[(&[Inst], Val)]) -> (Vec<Inst>, Vec<Val>) {
    let known = per_output_known(insts);
    let mut out: Vec<Inst> = Vec::with_capacity(insts.len() + 3);
    let mut at: Vec<Val> = Vec::with_capacity(insts.len());
    for inst in insts {
        let new = |v: Val| at[v as usize];
        let shared = match inst.op {
            InstOp::Unary(UnaryOp::Exp, a) if inst.dtype == DType::F32 => match insts[a as usize].op {
                InstOp::Binary(BinaryOp::Sub, p, q) if known[q as usize] && !known[p as usize] && stage_exps.iter().any(|&(xs, e)| same_value(xs, e, insts, p)) => Some((new(p), new(q))),
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

    #[test]
    fn same_value_compares_structure_not_positions() {
        use InstOp::*;
        let xs = stage();
        // The same x - max, built in another order, and near misses.
        let ys = vec![f32(Reduced(0)), f32(Load(0)), f32(Binary(BinaryOp::Sub, 1, 0)), f32(Load(1)), f32(Binary(BinaryOp::Sub, 3, 0)), f32(Binary(BinaryOp::Sub, 0, 1))];
        assert!(same_value(&xs, 2, &ys, 2));
        assert!(!same_value(&xs, 2, &ys, 4), "another input");
        assert!(!same_value(&xs, 2, &ys, 5), "operands swapped");
        let draws = [f32(Rand { dist: crate::ir::RandDist::Uniform, params: 0 })];
        assert!(!same_value(&draws, 0, &draws, 0), "draws never match");
    }

    #[test]
    fn exp_of_a_shifted_stage_value_becomes_a_product() {
        use InstOp::*;
        let xs = stage();
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
        let (got, at) = share_exps(&ep, &[(&xs, 2)]);
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
        assert_eq!(share_exps(&ep, &[]), (ep.clone(), (0..ep.len() as Val).collect()));
    }
}
