//! Reduction epilogues whose sweep of an output's row is one call of a native row routine
//! (`kiln_runtime::cpu::row_reduce`: AVX-512F where the CPU has it) in place of
//! [`super::epilogue`]'s 128-bit Cranelift loop: layer norm's normalization and the
//! cross-entropy gradient, the two epilogues that write a whole row of a memory-bound kernel.
//!
//! An epilogue qualifies when its kernel reduces one dim and it has one f32 output whose value
//! is, with `x`, `w`, `b`, `iota` unit-stride f32 inputs and `m`, `r`, `t`, `a`, `z`, `e`, `s`
//! values known once per output (as for [`super::native_rows`]):
//!
//! | epilogue | routine |
//! |---|---|
//! | `((x - m)·r)·w + b`, `w` and `b` each optional | `kiln_row_norm_affine_f32` |
//! | `where(iota == t, a, z) - (k·e)·s` | `kiln_row_onehot_sub_f32` |
//!
//! In the second, `k` is a unit-stride input, or the value a reduction stage keeps in the
//! row buffer ([`super::kept_tile_values`]: the exps of `x - max`), in which case the routine runs
//! only for rows that fit the buffer and longer rows take the loops. Products and sums match
//! with their operands in either order (IEEE `·` and `+` commute exactly); the routines round
//! each operation as the loops do, so the result is the same bits.

use super::emit::per_output_known;
use super::native_rows::{broadcast_load, unit_f32};
use crate::kernel::{Inst, InstOp, KernelInput, Val};
use kiln_runtime::op_kind::{BinaryOp, CmpOp};
use kiln_runtime::DType;

/// Where the cross-entropy routine reads `k`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum KeptSource {
    /// A unit-stride input.
    Input(usize),
    /// The row buffer, when it holds value `v` (a tiled stage of the epilogue).
    Kept(Val),
}

/// The routine an epilogue runs as, with its operands: inputs by index, per-output values by
/// instruction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum NativeEpilogue {
    /// `((x - m)·r)·w + b`.
    NormAffine {
        /// The input `x`.
        x: usize,
        /// The value subtracted.
        m: Val,
        /// The factor.
        r: Val,
        /// The input `w`, if any.
        w: Option<usize>,
        /// The input `b`, if any.
        b: Option<usize>,
    },
    /// `where(iota == t, a, z) - (k·e)·s`.
    OneHotSub {
        /// The input `iota`.
        iota: usize,
        /// The value compared with.
        t: Val,
        /// The value where equal.
        a: Val,
        /// The value elsewhere.
        z: Val,
        /// Where `k` is read.
        k: KeptSource,
        /// The first factor.
        e: Val,
        /// The second factor.
        s: Val,
    },
}

impl NativeEpilogue {
    /// The routine's helper name (`super::jit_symbols`).
    pub(crate) fn helper(self) -> &'static str {
        match self {
            NativeEpilogue::NormAffine { .. } => "kiln_row_norm_affine_f32",
            NativeEpilogue::OneHotSub { .. } => "kiln_row_onehot_sub_f32",
        }
    }
}

/// The native routine of an epilogue with instructions `insts` and outputs `outputs` over
/// `inputs` of a kernel reducing `reduce_rank` dims, or `None` for the loops.
pub(crate) fn native_epilogue(
    inputs: &[KernelInput],
    reduce_rank: usize,
    insts: &[Inst],
    outputs: &[Val],
) -> Option<NativeEpilogue> {
    let [root] = outputs else { return None };
    if reduce_rank != 1 || insts[*root as usize].dtype != DType::F32 {
        return None;
    }
    let computed = per_output_known(insts);
    let known = |v: Val| {
        (computed[v as usize] || broadcast_load(inputs, insts, v).is_some()) && insts[v as usize].dtype == DType::F32
    };
    let row = |v: Val| match insts[v as usize].op {
        InstOp::Load(i) if unit_f32(&inputs[i as usize]) => Some(i as usize),
        _ => None,
    };
    // `p·q` or `q·p` with `q` once per output: (p, q).
    let scaled = |v: Val, op: BinaryOp| match insts[v as usize].op {
        InstOp::Binary(o, p, q) if o == op && known(q) && !known(p) => Some((p, q)),
        InstOp::Binary(o, q, p) if o == op && known(q) && !known(p) => Some((p, q)),
        _ => None,
    };
    // `v` op a row input, either order.
    let with_row = |v: Val, op: BinaryOp| match insts[v as usize].op {
        InstOp::Binary(o, p, q) if o == op => row(q).map(|i| (p, i)).or_else(|| row(p).map(|i| (q, i))),
        _ => None,
    };
    let norm = |v: Val| {
        let (d, r) = scaled(v, BinaryOp::Mul)?;
        match insts[d as usize].op {
            InstOp::Binary(BinaryOp::Sub, x, m) if known(m) => Some((row(x)?, m, r)),
            _ => None,
        }
    };
    let norm_affine = || {
        let (v, b) = match with_row(*root, BinaryOp::Add) {
            Some((v, b)) => (v, Some(b)),
            None => (*root, None),
        };
        let (v, w) = match with_row(v, BinaryOp::Mul) {
            Some((v, w)) if norm(v).is_some() => (v, Some(w)),
            _ => (v, None),
        };
        let (x, m, r) = norm(v)?;
        Some(NativeEpilogue::NormAffine { x, m, r, w, b })
    };
    let onehot_sub = || {
        let InstOp::Binary(BinaryOp::Sub, hot, prod) = insts[*root as usize].op else { return None };
        let InstOp::Where(cond, a, z) = insts[hot as usize].op else { return None };
        let InstOp::Cmp(CmpOp::Eq, p, q) = insts[cond as usize].op else { return None };
        let (iota, t) = match (row(p), row(q)) {
            (Some(i), _) if known(q) => (i, q),
            (_, Some(i)) if known(p) => (i, p),
            _ => return None,
        };
        let (ke, s) = scaled(prod, BinaryOp::Mul)?;
        let (kv, e) = scaled(ke, BinaryOp::Mul)?;
        let k = match row(kv) {
            Some(i) => KeptSource::Input(i),
            None => KeptSource::Kept(kv),
        };
        (known(a) && known(z)).then_some(NativeEpilogue::OneHotSub { iota, t, a, z, k, e, s })
    };
    norm_affine().or_else(onehot_sub)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::InnerStride;
    use kiln_runtime::op_kind::UnaryOp;

    fn f32(op: InstOp) -> Inst {
        Inst { op, dtype: DType::F32 }
    }

    fn inputs(n: usize) -> Vec<KernelInput> {
        vec![KernelInput { dtype: DType::F32, inner: InnerStride::Unit }; n]
    }

    /// Layer norm's epilogue over inputs x, w, b: `((x - m)·r)·w + b` with `m`, `r` stage values.
    fn layer_norm(weight: bool, bias: bool) -> Vec<Inst> {
        use InstOp::*;
        let mut v = vec![
            f32(Load(0)),
            f32(Reduced(0)),
            f32(Binary(BinaryOp::Sub, 0, 1)),
            f32(Reduced(1)),
            f32(Binary(BinaryOp::Mul, 2, 3)),
        ];
        if weight {
            v.push(f32(Load(1)));
            v.push(f32(Binary(BinaryOp::Mul, 5, 4)));
        }
        if bias {
            let y = v.len() as Val - 1;
            v.push(f32(Load(2)));
            v.push(f32(Binary(BinaryOp::Add, y, y + 1)));
        }
        v
    }

    #[test]
    fn layer_norms_with_and_without_weight_and_bias_are_native() {
        for (w, b) in [(true, true), (true, false), (false, true), (false, false)] {
            let insts = layer_norm(w, b);
            let root = insts.len() as Val - 1;
            let want = NativeEpilogue::NormAffine { x: 0, m: 1, r: 3, w: w.then_some(1), b: b.then_some(2) };
            assert_eq!(native_epilogue(&inputs(3), 1, &insts, &[root]), Some(want), "weight {w}, bias {b}");
        }
    }

    #[test]
    fn the_cross_entropy_gradient_is_native() {
        use InstOp::*;
        // where(iota == t, a, 0) - (exp(x - max)·exp(-q))·s, t a broadcast input.
        let insts = vec![
            f32(Load(0)),
            f32(Load(1)),
            Inst { op: Cmp(CmpOp::Eq, 0, 1), dtype: DType::Bool },
            f32(Reduced(2)),
            f32(Const(0.0)),
            f32(Where(2, 3, 4)),
            f32(Load(2)),
            f32(Reduced(0)),
            f32(Binary(BinaryOp::Sub, 6, 7)),
            f32(Unary(UnaryOp::Exp, 8)),
            f32(Reduced(1)),
            f32(Unary(UnaryOp::Neg, 10)),
            f32(Unary(UnaryOp::Exp, 11)),
            f32(Binary(BinaryOp::Mul, 9, 12)),
            f32(Reduced(3)),
            f32(Binary(BinaryOp::Mul, 14, 13)),
            f32(Binary(BinaryOp::Sub, 5, 15)),
        ];
        let mut ins = inputs(3);
        ins[1].inner = InnerStride::Broadcast;
        let want = NativeEpilogue::OneHotSub { iota: 0, t: 1, a: 3, z: 4, k: KeptSource::Kept(9), e: 12, s: 14 };
        assert_eq!(native_epilogue(&ins, 1, &insts, &[16]), Some(want));
        // Not with two reduced dims, two outputs, or the difference reversed.
        assert_eq!(native_epilogue(&ins, 2, &insts, &[16]), None);
        assert_eq!(native_epilogue(&ins, 1, &insts, &[16, 5]), None);
        let mut reversed = insts.clone();
        reversed[16] = f32(Binary(BinaryOp::Sub, 15, 5));
        assert_eq!(native_epilogue(&ins, 1, &reversed, &[16]), None);
    }

    #[test]
    fn near_misses_keep_the_loops() {
        use InstOp::*;
        let mut ins = inputs(3);
        // (m - x)·r: the difference reversed.
        let mut insts = layer_norm(true, true);
        insts[2] = f32(Binary(BinaryOp::Sub, 1, 0));
        assert_eq!(native_epilogue(&ins, 1, &insts, &[8]), None);
        // A strided x.
        ins[0].inner = InnerStride::Strided;
        assert_eq!(native_epilogue(&ins, 1, &layer_norm(true, true), &[8]), None);
        // f64.
        let ins = vec![KernelInput { dtype: DType::F64, inner: InnerStride::Unit }; 3];
        let insts: Vec<Inst> = layer_norm(false, false).into_iter().map(|i| Inst { dtype: DType::F64, ..i }).collect();
        assert_eq!(native_epilogue(&ins, 1, &insts, &[4]), None);
        // (x - m)·w with w a row: r is not once per output.
        let insts = vec![
            f32(Load(0)),
            f32(Reduced(0)),
            f32(Binary(BinaryOp::Sub, 0, 1)),
            f32(Load(1)),
            f32(Binary(BinaryOp::Mul, 2, 3)),
        ];
        assert_eq!(native_epilogue(&inputs(2), 1, &insts, &[4]), None);
    }
}
