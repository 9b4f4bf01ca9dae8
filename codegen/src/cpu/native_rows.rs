//! Reduction stages whose sweep of an output's row is one call of a native row routine
//! (`kiln_runtime::cpu::row_reduce`: AVX-512F where the CPU has it) in place of a Cranelift
//! loop of 128-bit vectors: the sweeps of softmax, log-softmax, cross-entropy and layer norm.
//!
//! A stage qualifies when its kernel reduces one dim, its reduced value is f32, and that value
//! is, over a unit-stride f32 input `x` and a value `c` known once per output (an earlier
//! stage's result, a scalar, a constant, …):
//!
//! | stage | routine |
//! |---|---|
//! | `sum(x)` | `kiln_row_sum_f32` |
//! | `max(x)` | `kiln_row_max_f32` |
//! | `sum((x - c)·(x - c))` | `kiln_row_sq_dev_sum_f32` (which prefetches the next output's row meanwhile: the first sweep, the mean, found this one in memory) |
//! | `sum(exp(x - c))`, `sum(exp(x))` | `kiln_row_exp_sum_f32` (which can also keep the exps in the epilogue's row buffer, see [`super::kept_tile_values`], and prefetches the next output's row meanwhile) |
//! | `sum(where(x == t, a, b))` (either operand order) | `kiln_row_count_eq_f32`, then `a·k + b·(n - k)` (a term whose count is 0 is 0) |
//!
//! A value "known once per output" here is one [`per_output_known`] computes before the loops,
//! or the load of an input broadcast along the row (cross-entropy's target and gradient).
//!
//! The routines add each f32 term into f64 lanes (the Cranelift loops add groups of four in
//! f32 first), and the exp is the tiled kernels' `Exp` slice routine bit for bit.

use super::emit::{data_flags, per_output_known, PerValue};
use super::ops::FnEmitter;
use crate::kernel::{InnerStride, Inst, InstOp, KernelInput, ReduceKernel, ReduceStage, Val};
use cranelift_codegen::ir::{types, InstBuilder, Value};
use kiln_runtime::op_kind::{BinaryOp, CmpOp, ReduceOp, UnaryOp};
use kiln_runtime::DType;

/// Which routine a native stage calls.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum RowCall {
    /// `Σ x`.
    Sum,
    /// `max x`.
    Max,
    /// `Σ (x - c)²`, with `c` the value given.
    SqDevSum(Val),
    /// `Σ e^(x - c)`, with `c` the value given (`None`: `c = 0`, and `x - 0` is `x` exactly).
    ExpSum(Option<Val>),
    /// `Σ where(x == t, a, b)`.
    CountEq {
        /// The value compared with.
        t: Val,
        /// The value where equal.
        a: Val,
        /// The value elsewhere.
        b: Val,
    },
}

/// A stage that runs as one routine call per output.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct NativeRow {
    /// The kernel input `x` the routine reads.
    pub input: usize,
    /// The routine.
    pub call: RowCall,
}

impl RowCall {
    /// The routine's helper name (`super::jit_symbols`).
    pub(crate) fn helper(self) -> &'static str {
        match self {
            RowCall::Sum => "kiln_row_sum_f32",
            RowCall::Max => "kiln_row_max_f32",
            RowCall::SqDevSum(_) => "kiln_row_sq_dev_sum_f32",
            RowCall::ExpSum(_) => "kiln_row_exp_sum_f32",
            RowCall::CountEq { .. } => "kiln_row_count_eq_f32",
        }
    }
}

/// The native routine stage `st` of `k` runs as, or `None` for the generated loops.
pub(crate) fn native_row(k: &ReduceKernel, st: &ReduceStage) -> Option<NativeRow> {
    if k.reduce_rank != 1 || st.dtype(st.reduced) != DType::F32 {
        return None;
    }
    let insts = &st.insts;
    let computed = per_output_known(insts);
    let known: Vec<bool> =
        (0..insts.len()).map(|v| computed[v] || broadcast_load(&k.inputs, insts, v as Val).is_some()).collect();
    let f32_known = |v: Val| known[v as usize] && insts[v as usize].dtype == DType::F32;
    // The unit-stride f32 input `v` loads, if it is such a load.
    let row_input = |v: Val| match insts[v as usize].op {
        InstOp::Load(i) if unit_f32(&k.inputs[i as usize]) => Some(i as usize),
        _ => None,
    };
    // `x - c` with `c` once per output: (input, c).
    let shifted = |v: Val| match insts[v as usize].op {
        InstOp::Binary(BinaryOp::Sub, a, c) if f32_known(c) => Some((row_input(a)?, c)),
        _ => None,
    };
    let call = |input, call| Some(NativeRow { input, call });
    match (st.op, insts[st.reduced as usize].op) {
        (ReduceOp::Sum, InstOp::Load(_)) => call(row_input(st.reduced)?, RowCall::Sum),
        (ReduceOp::Max, InstOp::Load(_)) => call(row_input(st.reduced)?, RowCall::Max),
        (ReduceOp::Sum, InstOp::Binary(BinaryOp::Mul, a, b)) if a == b => {
            let (input, c) = shifted(a)?;
            call(input, RowCall::SqDevSum(c))
        }
        (ReduceOp::Sum, InstOp::Unary(UnaryOp::Exp, a)) => match shifted(a) {
            Some((input, c)) => call(input, RowCall::ExpSum(Some(c))),
            None => call(row_input(a)?, RowCall::ExpSum(None)),
        },
        (ReduceOp::Sum, InstOp::Where(cond, a, b)) if f32_known(a) && f32_known(b) => {
            let InstOp::Cmp(CmpOp::Eq, p, q) = insts[cond as usize].op else { return None };
            let (input, t) = match (row_input(p), row_input(q)) {
                (Some(i), _) if f32_known(q) => (i, q),
                (_, Some(i)) if f32_known(p) => (i, p),
                _ => return None,
            };
            call(input, RowCall::CountEq { t, a, b })
        }
        _ => None,
    }
}

/// The input that value `v` loads, when it is a load of an input broadcast along the row
/// (the same element for the whole row: one value per output).
pub(crate) fn broadcast_load(inputs: &[KernelInput], insts: &[Inst], v: Val) -> Option<usize> {
    match insts[v as usize].op {
        InstOp::Load(i) if inputs[i as usize].inner == InnerStride::Broadcast => Some(i as usize),
        _ => None,
    }
}

/// The f32 value `v`, known once per output, for a routine's argument: the load of a
/// broadcast input at `base`, or the per-output value [`super::emit::per_output_pre`] computed.
pub(crate) fn per_output_arg(
    cx: &mut FnEmitter,
    inputs: &[KernelInput],
    insts: &[Inst],
    pre: &PerValue,
    base: &[Value],
    v: Val,
) -> Value {
    match broadcast_load(inputs, insts, v) {
        Some(i) => cx.b.ins().load(types::F32, data_flags(), base[i], 0),
        None => pre.0[v as usize].expect("a per-output value is computed before the loops"),
    }
}

/// True for an f32 input read with stride 1 along the reduced dim.
pub(crate) fn unit_f32(input: &KernelInput) -> bool {
    input.inner == InnerStride::Unit && input.dtype == DType::F32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32(op: InstOp) -> Inst {
        Inst { op, dtype: DType::F32 }
    }

    fn kernel(inner: InnerStride, stage: ReduceStage) -> ReduceKernel {
        ReduceKernel {
            rank: 2,
            reduce_rank: 1,
            inputs: vec![KernelInput { dtype: DType::F32, inner }],
            scalars: 1,
            stages: vec![stage],
            epilogue: None,
        }
    }

    fn stage(op: ReduceOp, insts: Vec<Inst>) -> ReduceStage {
        ReduceStage { reduced: insts.len() as Val - 1, insts, op, output: DType::F32, scale: None }
    }

    #[test]
    fn the_softmax_and_layer_norm_sweeps_are_native() {
        let load = f32(InstOp::Load(0));
        let c = f32(InstOp::Scalar(0));
        let sub = f32(InstOp::Binary(BinaryOp::Sub, 0, 1));
        let cases = [
            (stage(ReduceOp::Sum, vec![load]), Some(RowCall::Sum)),
            (stage(ReduceOp::Max, vec![load]), Some(RowCall::Max)),
            (
                stage(ReduceOp::Sum, vec![load, c, sub, f32(InstOp::Binary(BinaryOp::Mul, 2, 2))]),
                Some(RowCall::SqDevSum(1)),
            ),
            (
                stage(ReduceOp::Sum, vec![load, c, sub, f32(InstOp::Unary(UnaryOp::Exp, 2))]),
                Some(RowCall::ExpSum(Some(1))),
            ),
            (stage(ReduceOp::Sum, vec![load, f32(InstOp::Unary(UnaryOp::Exp, 0))]), Some(RowCall::ExpSum(None))),
            (
                stage(
                    ReduceOp::Sum,
                    vec![
                        load,
                        c,
                        f32(InstOp::Const(0.0)),
                        Inst { op: InstOp::Cmp(CmpOp::Eq, 1, 0), dtype: DType::Bool },
                        f32(InstOp::Where(3, 1, 2)),
                    ],
                ),
                Some(RowCall::CountEq { t: 1, a: 1, b: 2 }),
            ),
            // Not these: a min, a product, exp(c - x), a square of two different values, a
            // where on `x < c`.
            (
                stage(
                    ReduceOp::Sum,
                    vec![
                        load,
                        c,
                        f32(InstOp::Const(0.0)),
                        Inst { op: InstOp::Cmp(CmpOp::Lt, 0, 1), dtype: DType::Bool },
                        f32(InstOp::Where(3, 1, 2)),
                    ],
                ),
                None,
            ),
            (stage(ReduceOp::Min, vec![load]), None),
            (stage(ReduceOp::Prod, vec![load]), None),
            (
                stage(
                    ReduceOp::Sum,
                    vec![load, c, f32(InstOp::Binary(BinaryOp::Sub, 1, 0)), f32(InstOp::Unary(UnaryOp::Exp, 2))],
                ),
                None,
            ),
            (stage(ReduceOp::Sum, vec![load, c, sub, f32(InstOp::Binary(BinaryOp::Mul, 2, 0))]), None),
        ];
        for (st, want) in cases {
            assert_eq!(native_row(&kernel(InnerStride::Unit, st.clone()), &st).map(|n| n.call), want, "{st:?}");
        }
    }

    #[test]
    fn strided_inputs_other_dtypes_and_several_reduced_dims_keep_the_loops() {
        let st = stage(ReduceOp::Sum, vec![f32(InstOp::Load(0))]);
        assert_eq!(native_row(&kernel(InnerStride::Strided, st.clone()), &st), None);
        let mut k = kernel(InnerStride::Unit, st.clone());
        k.reduce_rank = 2;
        assert_eq!(native_row(&k, &st), None);
        let mut k = kernel(InnerStride::Unit, st.clone());
        k.inputs[0].dtype = DType::F64;
        let st64 = stage(ReduceOp::Sum, vec![Inst { op: InstOp::Load(0), dtype: DType::F64 }]);
        assert_eq!(native_row(&k, &st64), None);
    }
}
