//! The loops of a [`ReduceKernel`]: per output (`row_start..row_end`), the outer multi-index
//! gives each input's base; then for each stage in order, the reduced sub-space is walked by
//! the loops of [`super::run_loops`] (the middle reduced dims by one counter, the last dim by an
//! F32X4/F64X2 loop when the stage's prologue qualifies for the vector plan, see
//! [`super::emit::vector_ok`], and a scalar tail) and the stage's value is stored. A prologue is
//! emitted by [`super::emit::emit_values`], as in elementwise kernels; the values of earlier
//! stages it reads enter it like run-time scalars ([`super::emit::per_output_pre`], as in the
//! epilogue). Once every stage of an output is stored, its epilogue (if any) runs one more
//! pass ([`super::epilogue`]). The row is read once per stage, but while it fits the L1 cache
//! only the first pass reaches memory.
//!
//! Accumulators live in `cranelift_frontend` variables (per stage): a scalar one (f64 for float values,
//! i64 for integer/Bool values) and, on the vector plan, two F64X2 for f32 Sum/Prod (the low
//! and high halves of each F32X4, promoted), one F64X2 for f64, or one F32X4 for f32 Max/Min.
//! They are combined lane by lane into the scalar one when the output is done.
//!
//! f16 and bf16 values are held as their f32, as in elementwise kernels ([`value_type`]): a
//! bf16 stage takes the F32X4 plan (its sums promoting every vector: f64 accumulation, as
//! eager's), an f16 one the scalar loop; neither is tiled. The f64 result is rounded to the
//! half type through f32, as eager's `Element::from_f64` does.

use super::emit::{data_flags, emit_pre, emit_values, live_of, per_output_pre, vector_ok, Entry, PerValue};
use super::epilogue::EpiloguePass;
use super::kept_tile_values::{same_value, ROW_CACHE};
use super::native_rows::{native_row, per_output_arg, NativeRow, RowCall};
use super::ops::{value_type, FnEmitter};
use super::run_loops::{emit_runs, Pass, Space};
use super::tiled_rows::{self, RowKeep, TileBody, Tiling};
use crate::kernel::{ReduceKernel, ReduceStage, Val};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    types, BlockArg, ConstantData, Function, InstBuilder, MemFlagsData, StackSlot, StackSlotData, StackSlotKind, Type,
    Value,
};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_jit::JITModule;
use cranelift_module::Module;
use kiln_runtime::op_kind::ReduceOp;
use kiln_runtime::DType;
use std::cell::RefCell;

/// The identity of `op` for values of `dtype`, in the scalar accumulator's type (f64 or i64).
fn identity(cx: &mut FnEmitter, op: ReduceOp, dtype: DType) -> Value {
    if dtype.is_float() {
        return cx.b.ins().f64const(op.identity());
    }
    let (lo, hi) = match dtype {
        DType::I64 => (i64::MIN, i64::MAX),
        DType::I32 => (i32::MIN as i64, i32::MAX as i64),
        DType::U8 => (0, 255),
        _ => (0, 1), // Bool
    };
    cx.b.ins().iconst(types::I64, op.int_identity(lo, hi))
}

/// `pick(a, b)` of the eager kernels for floats (scalars or vectors of one type): `b` if it is
/// larger (`max`) or smaller than `a`, or NaN; otherwise `a`. So NaN, once in, stays.
fn pick_float(cx: &mut FnEmitter, max: bool, a: Value, b: Value) -> Value {
    let cc = if max { FloatCC::GreaterThan } else { FloatCC::LessThan };
    let better = cx.fcmp(cc, b, a);
    let nan = cx.fcmp(FloatCC::Unordered, b, b);
    let take = cx.b.ins().bor(better, nan);
    cx.sel(take, b, a)
}

/// Folds `x` (same type as `acc`: f64 scalars or vectors, or i64) into `acc`.
fn step(cx: &mut FnEmitter, op: ReduceOp, acc: Value, x: Value) -> Value {
    let float = cx.ty(acc).lane_type().is_float();
    match (op, float) {
        (ReduceOp::Sum, true) => cx.b.ins().fadd(acc, x),
        (ReduceOp::Sum, false) => cx.b.ins().iadd(acc, x),
        (ReduceOp::Prod, true) => cx.b.ins().fmul(acc, x),
        (ReduceOp::Prod, false) => cx.b.ins().imul(acc, x),
        (ReduceOp::Max, true) => pick_float(cx, true, acc, x),
        (ReduceOp::Min, true) => pick_float(cx, false, acc, x),
        (ReduceOp::Max, false) => cx.b.ins().smax(acc, x),
        (ReduceOp::Min, false) => cx.b.ins().smin(acc, x),
    }
}

/// The high two lanes of an F32X4 promoted to an F64X2.
fn promote_high(cx: &mut FnEmitter, v: Value) -> Value {
    let bytes = cx.bitcast(types::I8X16, v);
    let mask: Vec<u8> = (8..16).chain(8..16).collect();
    let imm = cx.b.func.dfg.immediates.push(ConstantData::from(mask));
    let hi = cx.b.ins().shuffle(bytes, bytes, imm);
    let hi = cx.bitcast(types::F32X4, hi);
    cx.b.ins().fvpromote_low(hi)
}

/// Vectors per iteration of the vector loop, each with its own accumulators.
const UNROLL: usize = 4;

/// How the inner loop accumulates.
#[derive(Clone, Copy, PartialEq, Eq)]
enum VecAcc {
    /// No vector loop.
    None,
    /// F32 values into two F64X2 (Sum/Prod).
    F32Wide,
    /// Vectors accumulated in their own type (F32X4 Max/Min, F64X2 anything).
    Same(Type),
}

/// The accumulators of one output: a scalar one and, per unrolled vector, its vector ones.
struct Accs {
    /// How the vector loop accumulates.
    vacc: VecAcc,
    /// The scalar accumulator (f64 or i64).
    scalar: Variable,
    /// Its type.
    aty: Type,
    /// Per unrolled vector, its accumulators (independent chains hide the add latency).
    vector: Vec<Vec<Variable>>,
    /// Float max/min: per unrolled vector, the lanes that have seen a NaN (all ones). The
    /// vector loop keeps the maximum with x86's `maxps`/`minps` form (a NaN already in the
    /// accumulator stays; a NaN operand is dropped) and flags NaN operands here, three
    /// instructions where the eager `pick` took six; [`Accs::combine`] puts the NaNs back.
    nan: Vec<Variable>,
    /// An f32 sum's vectors of the current unrolled iteration, not yet added (see
    /// [`Accs::fold`]).
    pending: RefCell<Vec<Value>>,
    /// Per accumulator (the scalar one, then the vector ones), its stack slot while parked
    /// ([`Accs::park`]), made on first use.
    slots: RefCell<Vec<StackSlot>>,
}

impl Accs {
    /// Declares the variables (`aty` is the scalar accumulator's type).
    fn declare(cx: &mut FnEmitter, vacc: VecAcc, aty: Type, op: ReduceOp) -> Accs {
        let scalar = cx.b.declare_var(aty);
        let vector = (0..UNROLL)
            .map(|_| match vacc {
                VecAcc::None => vec![],
                VecAcc::F32Wide => vec![cx.b.declare_var(types::F64X2), cx.b.declare_var(types::F64X2)],
                VecAcc::Same(t) => vec![cx.b.declare_var(t)],
            })
            .collect();
        let nan = match (vacc, op) {
            (VecAcc::Same(t), ReduceOp::Max | ReduceOp::Min) if t.lane_type().is_float() => {
                (0..UNROLL).map(|_| cx.b.declare_var(t.as_int())).collect()
            }
            _ => Vec::new(),
        };
        Accs { vacc, scalar, aty, vector, nan, pending: RefCell::new(Vec::new()), slots: RefCell::new(Vec::new()) }
    }

    /// Sets every accumulator to the identity of `op` for values of `dtype`.
    fn reset(&self, cx: &mut FnEmitter, op: ReduceOp, dtype: DType) {
        let id = identity(cx, op, dtype);
        cx.b.def_var(self.scalar, id);
        let v = match self.vacc {
            VecAcc::None => return,
            VecAcc::F32Wide => cx.b.ins().splat(types::F64X2, id),
            VecAcc::Same(t) => {
                let s = if t == types::F32X4 { cx.b.ins().fdemote(types::F32, id) } else { id };
                cx.b.ins().splat(t, s)
            }
        };
        for &var in self.vector.iter().flatten() {
            cx.b.def_var(var, v);
        }
        for &var in &self.nan {
            let ty = cx.b.func.dfg.value_type(v).as_int();
            let zero = cx.b.ins().iconst(ty.lane_type(), 0);
            let zero = cx.b.ins().splat(ty, zero);
            cx.b.def_var(var, zero);
        }
    }

    /// Sets the scalar accumulator to `acc` (an f64 or i64) and the vector ones, already
    /// reset, stay at the identity: what [`Accs::combine`] then gives is `acc`.
    fn reset_to(&self, cx: &mut FnEmitter, acc: Value) {
        cx.b.def_var(self.scalar, acc);
    }

    /// Stores every accumulator into its stack slot (`park`) or loads it back (`!park`). A
    /// tiled sweep keeps them parked across the slice routines' calls: a value live across a
    /// call lives in memory (every vector register is caller-saved), and register allocation
    /// was seen loading and storing the accumulators at every iteration of the folding loop;
    /// loaded at the loop's start, they stay in registers through it.
    fn park(&self, cx: &mut FnEmitter, park: bool) {
        let vty = match self.vacc {
            VecAcc::Same(t) => t,
            _ => types::F64X2,
        };
        let vars: Vec<(Variable, Type)> = std::iter::once((self.scalar, self.aty))
            .chain(self.vector.iter().flatten().map(|&v| (v, vty)))
            .chain(self.nan.iter().map(|&v| (v, vty.as_int())))
            .collect();
        let mut slots = self.slots.borrow_mut();
        if slots.is_empty() {
            *slots = vars
                .iter()
                .map(|_| cx.b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 16, 4)))
                .collect();
        }
        for (&(var, ty), &slot) in vars.iter().zip(slots.iter()) {
            if park {
                let v = cx.b.use_var(var);
                cx.b.ins().stack_store(types::I64, v, slot, 0);
            } else {
                let v = cx.b.ins().stack_load(types::I64, ty, slot, 0);
                cx.b.def_var(var, v);
            }
        }
    }

    /// Folds value `x` (of `dtype`) at one position into the accumulators: the `u`-th vector
    /// of an unrolled iteration when `vector`, else one scalar of the tail.
    ///
    /// An f32 sum adds the iteration's [`UNROLL`] vectors in f32 (pairwise: two roundings of
    /// four terms per lane) and promotes that one vector: promoting each vector to two F64X2
    /// cost five instructions per four elements, the loop's largest share. A bf16 sum
    /// promotes each vector, so that it accumulates in f64 as eager does: its result, rounded
    /// once to bf16, is then eager's.
    fn fold(&self, cx: &mut FnEmitter, op: ReduceOp, dtype: DType, x: Value, vector: bool, u: usize) {
        if !vector {
            let x = widen(cx, x, dtype);
            let acc = cx.b.use_var(self.scalar);
            let r = step(cx, op, acc, x);
            cx.b.def_var(self.scalar, r);
            return;
        }
        if (self.vacc, op, dtype) == (VecAcc::F32Wide, ReduceOp::Sum, DType::F32) {
            let mut pending = self.pending.borrow_mut();
            pending.push(x);
            if u + 1 < UNROLL {
                return;
            }
            while pending.len() > 1 {
                let pairs: Vec<Value> =
                    pending.chunks(2).map(|p| if p.len() == 2 { cx.b.ins().fadd(p[0], p[1]) } else { p[0] }).collect();
                *pending = pairs;
            }
            let x = pending.pop().expect("UNROLL ≥ 1 vectors");
            drop(pending);
            return self.fold_wide(cx, op, x, 0);
        }
        if self.vacc == VecAcc::F32Wide {
            return self.fold_wide(cx, op, x, u);
        }
        let VecAcc::Same(t) = self.vacc else { unreachable!("a vector type implies a vector accumulator") };
        let acc = cx.b.use_var(self.vector[u][0]);
        let r = if self.nan.is_empty() {
            step(cx, op, acc, x)
        } else {
            // `bitselect(a < b, …)` in the operand order Cranelift lowers to `maxps x, acc`
            // (`x > acc ? x : acc`) and `minps x, acc`.
            let take_x = if op == ReduceOp::Max {
                cx.fcmp(FloatCC::LessThan, acc, x)
            } else {
                cx.fcmp(FloatCC::LessThan, x, acc)
            };
            let take_x = cx.bitcast(t, take_x);
            let r = cx.b.ins().bitselect(take_x, x, acc);
            let seen = cx.b.use_var(self.nan[u]);
            let is_nan = cx.fcmp(FloatCC::Unordered, x, x);
            let seen = cx.b.ins().bor(seen, is_nan);
            cx.b.def_var(self.nan[u], seen);
            r
        };
        cx.b.def_var(self.vector[u][0], r);
    }

    /// Folds F32X4 `x`, promoted to two F64X2, into chain `u`'s accumulators.
    fn fold_wide(&self, cx: &mut FnEmitter, op: ReduceOp, x: Value, u: usize) {
        let parts = [cx.b.ins().fvpromote_low(x), promote_high(cx, x)];
        for (&var, part) in self.vector[u].iter().zip(parts) {
            let acc = cx.b.use_var(var);
            let r = step(cx, op, acc, part);
            cx.b.def_var(var, r);
        }
    }

    /// The output is done: the unrolled chains and then the lanes combined into the scalar
    /// accumulator; returns its value.
    fn combine(&self, cx: &mut FnEmitter, op: ReduceOp, dtype: DType) -> Value {
        let mut acc = cx.b.use_var(self.scalar);
        // The unrolled chains, folded into the first one.
        // Chain u's accumulator n, with NaN in the lanes that saw one (all ones is a NaN).
        let chain = |cx: &mut FnEmitter, u: usize, n: usize| {
            let v = cx.b.use_var(self.vector[u][n]);
            let Some(&nan) = self.nan.get(u) else { return v };
            let seen = cx.b.use_var(nan);
            let ty = cx.ty(v);
            let seen = cx.bitcast(ty, seen);
            cx.b.ins().bor(v, seen)
        };
        let mut acc_vals: Vec<Value> = (0..self.vector[0].len()).map(|n| chain(cx, 0, n)).collect();
        for u in 1..self.vector.len() {
            for (n, acc) in acc_vals.iter_mut().enumerate() {
                let x = chain(cx, u, n);
                *acc = step(cx, op, *acc, x);
            }
        }
        match self.vacc {
            VecAcc::None => {}
            VecAcc::F32Wide => {
                let v = step(cx, op, acc_vals[0], acc_vals[1]);
                for lane in 0..2 {
                    let x = cx.b.ins().extractlane(v, lane);
                    acc = step(cx, op, acc, x);
                }
            }
            VecAcc::Same(t) => {
                let v = acc_vals[0];
                for lane in 0..t.lane_count() as u8 {
                    let x = cx.b.ins().extractlane(v, lane);
                    let x = widen(cx, x, dtype);
                    acc = step(cx, op, acc, x);
                }
            }
        }
        acc
    }
}

/// One stage's plan, chosen before any code is emitted.
struct StagePlan<'k> {
    /// The stage.
    st: &'k ReduceStage,
    /// Which of its prologue's instructions the reduced value depends on.
    live: Vec<bool>,
    /// The reduced value's dtype (an f16 or bf16 one held as its f32, see [`value_type`]).
    rd: DType,
    /// The vector type of its inner loop, or `None` for the scalar loop only.
    vty: Option<Type>,
    /// How its vector loop accumulates.
    vacc: VecAcc,
    /// How its rows are tiled, when its transcendentals run as slice routines
    /// ([`super::tiled_rows`]).
    tiling: Option<Tiling>,
    /// The native routine that sweeps each row, when one fits ([`super::native_rows`]): it
    /// replaces the loops (the tiling stays to match a kept row with the epilogue's).
    native: Option<NativeRow>,
}

impl<'k> StagePlan<'k> {
    /// Checks the stage's types and picks its plan with the rules of [`vector_ok`] (the
    /// reduced value's dtype is the vector plan's, bf16 riding f32 lanes, and stage values it
    /// reads count as run-time scalars). A stage holding f16 or bf16 values is never tiled
    /// (as elementwise kernels: its transcendentals are the eager routines, per element).
    fn new(k: &ReduceKernel, st: &'k ReduceStage) -> Result<StagePlan<'k>, String> {
        let live = live_of(&st.insts, &[st.reduced]);
        for (n, inst) in st.insts.iter().enumerate() {
            if live[n] {
                value_type(inst.dtype)?;
            }
        }
        value_type(st.output)?;
        let rd = st.dtype(st.reduced);
        let vty = match rd {
            DType::F32 | DType::BF16 if vector_ok(&k.inputs, &st.insts, &live, DType::F32) => Some(types::F32X4),
            DType::F64 if vector_ok(&k.inputs, &st.insts, &live, rd) => Some(types::F64X2),
            _ => None,
        };
        let vacc = match (vty, st.op) {
            (None, _) => VecAcc::None,
            (Some(types::F32X4), ReduceOp::Sum | ReduceOp::Prod) => VecAcc::F32Wide,
            (Some(t), _) => VecAcc::Same(t),
        };
        let tiling = tiled_rows::reduction_tiling(k, &Self::body(k, st), &live, vty);
        let native = native_row(k, st);
        Ok(StagePlan { st, live, rd, vty, vacc, tiling, native })
    }

    /// What the stage's sweep computes, as a tiled pass sees it: its prologue, whose root is
    /// the reduced value.
    fn body<'b>(k: &'b ReduceKernel, st: &'b ReduceStage) -> TileBody<'b> {
        TileBody { inputs: &k.inputs, insts: &st.insts, roots: std::slice::from_ref(&st.reduced) }
    }
}

/// A stage's code-generation state, set up in the entry block.
struct StagePass<'p, 'k> {
    /// Its plan.
    plan: &'p StagePlan<'k>,
    /// Its accumulators.
    accs: Accs,
    /// Its constants and run-time scalars, converted once (and splatted).
    pre: PerValue,
    /// Its scale, loaded once.
    scale: Option<Value>,
}

impl StagePass<'_, '_> {
    /// Emits stage `s` for output `row` from the current block: the accumulators reset, the
    /// loops over the output's reduced sub-space (inputs at `base`) with the earlier stages'
    /// values `earlier` entering the prologue like run-time scalars, then combine, scale,
    /// convert and store at `out_base + row`. Returns the stored value (of the stage's output
    /// dtype); leaves the builder in the block after the loops.
    /// `keep`: a tiled stage whose values go to the row buffer for the epilogue.
    #[allow(clippy::too_many_arguments)]
    fn emit(
        &self,
        cx: &mut FnEmitter,
        k: &ReduceKernel,
        sp: &Space,
        base: &[Value],
        row: Value,
        earlier: &[Value],
        out_base: Value,
        keep: Option<RowKeep>,
    ) -> Result<Value, String> {
        let StagePlan { st, live, rd, vty, .. } = self.plan;
        let (st, rd, vty) = (*st, *rd, *vty);
        self.accs.reset(cx, st.op, rd);
        let fold = |cx: &mut FnEmitter, vt: Option<Type>, u: usize, vals: &[Option<Value>]| {
            let x = vals[st.reduced as usize].expect("the reduced value is live");
            self.accs.fold(cx, st.op, rd, x, vt.is_some(), u);
            Ok(())
        };
        // The per-output values, once per output (every pass of every tile reads them).
        let pre = per_output_pre(cx, &st.insts, live, &self.pre, vty, earlier)?;
        if let Some(native) = self.plan.native {
            let acc = native_sweep(cx, k, st, native, &pre, sp, base, keep);
            self.accs.reset_to(cx, acc);
        } else if let Some(t) = &self.plan.tiling {
            self.accs.park(cx, true);
            let around = |cx: &mut FnEmitter, start: bool| self.accs.park(cx, !start);
            tiled_rows::emit_row(
                cx,
                &StagePlan::body(k, st),
                t,
                sp,
                base,
                &[],
                &[],
                UNROLL,
                keep,
                &[],
                None,
                |_, _| Ok(pre.clone()),
                around,
                |cx, _, _, vt, u, vals| fold(cx, vt, u, vals),
            )?;
            self.accs.park(cx, false);
        } else {
            let pass =
                Pass { inputs: &k.inputs, insts: &st.insts, pre: &pre, vty, unroll: UNROLL, draws: &[], index0: None };
            emit_runs(
                cx,
                sp,
                &pass,
                base,
                |_, _| vec![],
                |cx, r, j, vt, u| {
                    let vals = emit_values(cx, &k.inputs, &st.insts, live, r, j, vt)?;
                    fold(cx, vt, u, &vals)
                },
            )?;
        }
        let mut acc = self.accs.combine(cx, st.op, rd);
        if let Some(s) = self.scale {
            acc = cx.b.ins().fmul(acc, s);
        }
        let acc_dtype = if rd.is_float() { DType::F64 } else { DType::I64 };
        let out = cx.cast(acc, acc_dtype, st.output)?;
        let off = cx.b.ins().imul_imm_s(row, st.output.size_in_bytes() as i64);
        let addr = cx.b.ins().iadd(out_base, off);
        cx.store_value(st.output, out, addr, data_flags());
        Ok(out)
    }
}

/// The f64 result of native stage `native` (of stage `st` of `k`) over the output's row
/// (inputs at `base`, `pre` holding the per-output values): one routine call. `keep`: the routine also writes its exps
/// to the row buffer while the row fits there.
#[allow(clippy::too_many_arguments)]
fn native_sweep(
    cx: &mut FnEmitter,
    k: &ReduceKernel,
    st: &ReduceStage,
    native: NativeRow,
    pre: &PerValue,
    sp: &Space,
    base: &[Value],
    keep: Option<RowKeep>,
) -> Value {
    let (src, n) = (base[native.input], sp.inner());
    let given = |cx: &mut FnEmitter, v: Val| per_output_arg(cx, &k.inputs, &st.insts, pre, base, v);
    let name = native.call.helper();
    match native.call {
        RowCall::Sum => cx.call(name, &[src, n]),
        RowCall::Max => {
            let m = cx.call(name, &[src, n]);
            cx.b.ins().fpromote(types::F64, m)
        }
        RowCall::SqDevSum(c) => {
            let c = given(cx, c);
            let next = next_row(cx, sp, native, src);
            cx.call(name, &[src, c, n, next])
        }
        RowCall::CountEq { t, a, b } => {
            let t = given(cx, t);
            let equal = cx.call(name, &[src, t, n]);
            let rest = cx.b.ins().isub(n, equal);
            // `a·count`, and 0 (not a NaN from inf·0) when the count is 0.
            let term = |cx: &mut FnEmitter, v: Val, count: Value| {
                let v = given(cx, v);
                let v = cx.b.ins().fpromote(types::F64, v);
                let c = cx.b.ins().fcvt_from_uint(types::F64, count);
                let prod = cx.b.ins().fmul(v, c);
                let zero = cx.b.ins().f64const(0.0);
                let none = cx.b.ins().icmp_imm_u(IntCC::Equal, count, 0);
                cx.b.ins().select(none, zero, prod)
            };
            let (ta, tb) = (term(cx, a, equal), term(cx, b, rest));
            cx.b.ins().fadd(ta, tb)
        }
        RowCall::ExpSum(c) => {
            let c = match c {
                Some(c) => given(cx, c),
                None => cx.b.ins().f32const(0.0),
            };
            let dst = match keep {
                Some(k) => {
                    let cap = cx.b.ins().iconst(sp.ptr, ROW_CACHE as i64);
                    let fits = cx.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, n, cap);
                    let row = cx.b.ins().stack_addr(sp.ptr, k.slot, 0);
                    let null = cx.b.ins().iconst(sp.ptr, 0);
                    cx.b.ins().select(fits, row, null)
                }
                None => cx.b.ins().iconst(sp.ptr, 0),
            };
            let next = next_row(cx, sp, native, src);
            cx.call(name, &[src, c, dst, n, next])
        }
    }
}

/// The address of the next output's row of `native`'s input (whose row starts at `src`), one
/// step along the last kept dim: a prefetch hint for the routines that sweep a row a second
/// time (past the last row, a harmless one).
fn next_row(cx: &mut FnEmitter, sp: &Space, native: NativeRow, src: Value) -> Value {
    match sp.o_rank {
        0 => src,
        o => cx.b.ins().iadd(src, sp.strides[native.input][o - 1]),
    }
}

/// Builds the body of `extern "C" fn(*const KernelArgs)` for `k` into `func` (whose
/// signature is already set); returns whether every stage's inner loop is vectorized and
/// whether some stage or the epilogue is tiled.
pub(crate) fn build(k: &ReduceKernel, module: &mut JITModule, func: &mut Function) -> Result<(bool, bool), String> {
    for i in &k.inputs {
        value_type(i.dtype)?;
    }
    let plans = k.stages.iter().map(|st| StagePlan::new(k, st)).collect::<Result<Vec<_>, _>>()?;
    let ptr = module.target_config().pointer_type();
    let mut fctx = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(func, &mut fctx);
    let frontend_config = module.target_config();
    let mut cx = FnEmitter::new(&mut b, module);
    let (rank, o_rank) = (k.rank, k.rank - k.reduce_rank);
    let n_stages = k.stages.len();
    let n_out = n_stages + k.epilogue.as_ref().map_or(0, |ep| ep.outputs.len());

    let entry = cx.b.create_block();
    cx.b.append_block_params_for_function_params(entry);
    cx.b.switch_to_block(entry);
    let args = cx.b.block_params(entry)[0];
    let a = Entry::load(&mut cx, args, ptr, &k.inputs, rank, n_out);
    let mut stages = Vec::with_capacity(n_stages);
    for plan in &plans {
        let pre = emit_pre(&mut cx, &plan.st.insts, &plan.live, a.scalars_p, plan.vty)?;
        let scale =
            plan.st.scale.map(|j| cx.b.ins().load(types::F64, MemFlagsData::trusted(), a.scalars_p, (8 * j) as i32));
        let aty = if plan.rd.is_float() { types::F64 } else { types::I64 };
        let accs = Accs::declare(&mut cx, plan.vacc, aty, plan.st.op);
        stages.push(StagePass { plan, accs, pre, scale });
    }
    let sp = Space::new(&mut cx, ptr, &a.dims, &a.strides, &a.in_step, o_rank);
    let epilogue = match &k.epilogue {
        Some(ep) => Some(EpiloguePass::new(&mut cx, k, ep, a.scalars_p, &sp)?),
        None => None,
    };
    // A stage's tiled value that the epilogue computes again: kept in a row buffer.
    let keep = epilogue.as_ref().and_then(|e| kept_stage(&plans, e)).map(|(s, stage, ep_stage)| {
        let slot =
            cx.b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, (ROW_CACHE * 4) as u32, 6));
        (s, RowKeep { stage, slot, reuse: false }, RowKeep { stage: ep_stage, slot, reuse: true })
    });

    let out_head = cx.b.create_block();
    let out_body = cx.b.create_block();
    let exit = cx.b.create_block();
    let row = cx.b.append_block_param(out_head, ptr);
    cx.b.ins().jump(out_head, &[BlockArg::Value(a.row_start)]);

    cx.b.switch_to_block(out_head);
    let more = cx.b.ins().icmp(IntCC::UnsignedLessThan, row, a.row_end);
    cx.b.ins().brif(more, out_body, &[], exit, &[]);

    // One output: its inputs' bases from the outer multi-index, then each stage in order
    // (reading the values of the ones before), then the epilogue's pass.
    cx.b.switch_to_block(out_body);
    let base = sp.outer_ptrs(&mut cx, &a.in_base, row);
    let mut values = Vec::with_capacity(n_stages);
    for (s, stage) in stages.iter().enumerate() {
        let kept = keep.filter(|kp| kp.0 == s).map(|kp| kp.1);
        let v = stage.emit(&mut cx, k, &sp, &base, row, &values, a.out_base[s], kept)?;
        values.push(v);
    }
    if let Some(e) = &epilogue {
        e.emit(&mut cx, &sp, &base, row, &values, &a.out_base[n_stages..], keep.map(|kp| kp.2))?;
    }
    let next_row = cx.b.ins().iadd_imm_s(row, 1);
    cx.b.ins().jump(out_head, &[BlockArg::Value(next_row)]);

    cx.b.switch_to_block(exit);
    cx.b.ins().return_(&[]);
    drop(cx);
    b.seal_all_blocks();
    b.finalize(frontend_config);
    let tiled = plans.iter().any(|p| p.tiling.is_some()) || epilogue.as_ref().is_some_and(EpiloguePass::is_tiled);
    Ok((plans.iter().all(|p| p.vty.is_some()), tiled))
}

/// The first tiled stage value of a reduction stage that the tiled epilogue `e` computes too
/// (the same routine on the same value, [`same_value`]): the reduction stage's index, its
/// tile stage's and the epilogue's tile stage's.
fn kept_stage(plans: &[StagePlan], e: &EpiloguePass) -> Option<(usize, usize, usize)> {
    let et = e.tiling()?;
    plans.iter().enumerate().find_map(|(s, p)| {
        p.tiling.as_ref()?.stage_values().enumerate().find_map(|(ts, (inst, routine))| {
            let ets = et.stage_values().position(|(einst, eroutine)| {
                eroutine == routine && same_value(&p.st.insts, inst as Val, e.insts(), einst as Val)
            })?;
            Some((s, ts, ets))
        })
    })
}

/// A scalar value of `dtype` in the scalar accumulator's type: f32 (and f16 and bf16, held as
/// their f32) promoted to f64 (exactly), integers and Bool widened to i64.
fn widen(cx: &mut FnEmitter, x: Value, dtype: DType) -> Value {
    match dtype {
        DType::F32 | DType::F16 | DType::BF16 => cx.b.ins().fpromote(types::F64, x),
        DType::F64 => x,
        _ => cx.widen_i64(x, dtype),
    }
}
