//! Per-op instruction selection: one IR instruction of an [`ElementwiseKernel`] to CLIF, for a
//! scalar value of any dtype or (floats only) an F32X4/F64X2 vector of lanes.
//!
//! Scalar values use the CLIF type of their dtype ([`clif_type`]); Bool is an `i8` holding 0
//! or 1. In the vector path a Bool is a lane mask (all ones or zero, `i32x4`/`i64x2`).
//!
//! An f16 or bf16 value is held as the f32 of the same number ([`value_type`]): every op is
//! computed in f32 and rounded back ([`FnEmitter::round_to`]), transcendentals by the eager
//! routine (a helper call; in a vector, one call that runs it on each of the four lanes) rather
//! than the inline polynomial. bf16 values also ride F32X4 lanes (the vector plan of
//! `emit.rs`): loaded four at a time from their bytes (`uload16x4`, shifted into the high
//! half, NaNs quieted as the scalar load does; [`FnEmitter::load_lanes`]), rounded lane-wise
//! with the scalar's integer formula, and stored by narrowing the high halves to four `u16`
//! ([`FnEmitter::store_value`]): every lane is the scalar path's result bit for bit. f16 stays
//! scalar: Cranelift's x86-64 back end has no vector f16 conversion (no F16C lowering), and
//! its rounding is a helper call.
//!
//! An f32 vector op without an inline form (log1p, atan, …; a bf16 transcendental) is one
//! call per vector of a helper that runs the eager routine on the four lanes in a stack slot
//! (`FnEmitter::call_eager_unary`): calling per lane spilled every live vector around each of
//! four calls (a bf16 GELU chain kernel took 1.8× as long).
//!
//! [`ElementwiseKernel`]: crate::kernel::ElementwiseKernel

use super::jit_symbols::{self, half_names};
use crate::ir::RandDist;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    types, Endianness, FuncRef, InstBuilder, MemFlagsData, StackSlotData, StackSlotKind, Type, Value,
};
use cranelift_frontend::FunctionBuilder;
use cranelift_jit::JITModule;
use cranelift_module::{Linkage, Module};
use kiln_runtime::op_kind::{BinaryOp, CmpOp, LogicalOp, UnaryOp};
use kiln_runtime::DType;
use std::collections::HashMap;

/// The CLIF type of a scalar of `dtype` as memory holds it (f16 and bf16 have none: kernels
/// hold them as f32, see [`value_type`], and load and store them as their two bytes).
pub(crate) fn clif_type(dtype: DType) -> Result<Type, String> {
    Ok(match dtype {
        DType::F32 => types::F32,
        DType::F64 => types::F64,
        DType::I64 => types::I64,
        DType::I32 => types::I32,
        DType::U8 | DType::Bool => types::I8,
        DType::F16 | DType::BF16 => return Err(format!("{dtype} values are held as f32 (`value_type`)")),
    })
}

/// True for f16 and bf16.
pub(crate) fn is_half(dtype: DType) -> bool {
    matches!(dtype, DType::F16 | DType::BF16)
}

/// The CLIF type of an elementwise kernel's value of `dtype`: [`clif_type`]'s, and F32 for f16
/// and bf16, which a kernel holds as the f32 of the same number: loaded and stored as their
/// two bytes ([`FnEmitter::load_value`], [`FnEmitter::store_value`]) and rounded to their
/// precision after every op ([`FnEmitter::round_to`]), as eager kernels compute them (widened
/// to f32, rounded back), so a kernel's results equal eager ones bit for bit.
pub(crate) fn value_type(dtype: DType) -> Result<Type, String> {
    if is_half(dtype) {
        Ok(types::F32)
    } else {
        clif_type(dtype)
    }
}

/// The emission context: the function being built, and the module in which the helpers it
/// calls are declared (each on its first call).
pub(crate) struct FnEmitter<'a, 'b> {
    /// The function builder, positioned at the current block.
    pub b: &'a mut FunctionBuilder<'b>,
    module: &'a mut JITModule,
    refs: HashMap<&'static str, FuncRef>,
}

impl<'a, 'b> FnEmitter<'a, 'b> {
    /// A context over `b`, declaring the helpers it calls in `module`.
    pub fn new(b: &'a mut FunctionBuilder<'b>, module: &'a mut JITModule) -> Self {
        FnEmitter { b, module, refs: HashMap::new() }
    }

    /// The type of a value.
    pub fn ty(&self, v: Value) -> Type {
        self.b.func.dfg.value_type(v)
    }

    /// `v` (a scalar computed before a loop) passed through a stack slot, so that it is computed
    /// here, once: Cranelift's optimizer places a pure computation at its uses and, as measured
    /// on log_softmax's `log Σ` before an epilogue's loops, does not always hoist it back out
    /// of them; a load stays where it is emitted.
    pub fn pinned(&mut self, v: Value) -> Value {
        let ty = self.ty(v);
        let slot = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            ty.bytes(),
            ty.bytes().trailing_zeros() as u8,
        ));
        self.b.ins().stack_store(types::I64, v, slot, 0);
        self.b.ins().stack_load(types::I64, ty, slot, 0)
    }

    /// Calls helper `name` (one of [`jit_symbols::find`]'s) on scalars.
    pub fn call(&mut self, name: &'static str, args: &[Value]) -> Value {
        let fref = self.func_ref(name);
        let call = self.b.ins().call(fref, args);
        self.b.inst_results(call)[0]
    }

    /// Calls helper `name`, which returns nothing (a slice routine of [`jit_symbols::slice_name`]).
    pub fn call_void(&mut self, name: &'static str, args: &[Value]) {
        let fref = self.func_ref(name);
        self.b.ins().call(fref, args);
    }

    /// The reference to helper `name` in the function, declared on first use.
    fn func_ref(&mut self, name: &'static str) -> FuncRef {
        match self.refs.get(name) {
            Some(&f) => f,
            None => {
                let helper = jit_symbols::find(name).unwrap_or_else(|| panic!("no helper named {name}"));
                let sig = helper.signature(self.module);
                // A helper's name and signature are fixed, so declaring it cannot clash.
                let id = self
                    .module
                    .declare_function(name, Linkage::Import, &sig)
                    .unwrap_or_else(|e| panic!("declaring helper {name}: {e}"));
                let f = self.module.declare_func_in_func(id, self.b.func);
                self.refs.insert(name, f);
                f
            }
        }
    }

    /// Calls helper `name` on scalars, or lane by lane on vectors (extract, call, insert).
    pub fn call_any(&mut self, name: &'static str, args: &[Value]) -> Value {
        let ty = self.ty(args[0]);
        if !ty.is_vector() {
            return self.call(name, args);
        }
        let mut out = args[0];
        for lane in 0..ty.lane_count() as u8 {
            let lanes: Vec<Value> = args.iter().map(|&a| self.b.ins().extractlane(a, lane)).collect();
            let r = self.call(name, &lanes);
            out = self.b.ins().insertlane(out, r, lane);
        }
        out
    }

    /// The eager routine of unary `op` on f32 scalar `x` (a helper call), or on each lane of
    /// F32X4 `x`: the lanes stored to a stack slot, one helper call over the four
    /// ([`jit_symbols::unary_x4_name`]), the slot loaded back.
    fn call_eager_unary(&mut self, op: UnaryOp, x: Value) -> Value {
        let ty = self.ty(x);
        if ty != types::F32X4 {
            return self.call_any(jit_symbols::unary_name(op, false), &[x]);
        }
        let slot = self.b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 16, 4));
        self.b.ins().stack_store(types::I64, x, slot, 0);
        let addr = self.b.ins().stack_addr(types::I64, slot, 0);
        self.call_void(jit_symbols::unary_x4_name(op), &[addr]);
        self.b.ins().stack_load(types::I64, ty, slot, 0)
    }

    /// Element `index` (an i64) of the draw whose four f64 run-time scalars are `params`, in
    /// `dist` and float `dtype` (`InstOp::Rand`): a call of the runtime's per-element function;
    /// with vector type `vty`, elements `index + lane`, one call per lane (as [`Self::call_any`]).
    pub fn rand(&mut self, dist: RandDist, dtype: DType, params: [Value; 4], index: Value, vty: Option<Type>) -> Value {
        let name = jit_symbols::rand_name(dist, dtype == DType::F64);
        let [a, b, c, d] = params;
        let first = self.call(name, &[a, b, c, d, index]);
        let Some(vt) = vty else { return first };
        let mut out = self.b.ins().splat(vt, first);
        for lane in 1..vt.lane_count() as u8 {
            let at = self.b.ins().iadd_imm_s(index, lane as i64);
            let r = self.call(name, &[a, b, c, d, at]);
            out = self.b.ins().insertlane(out, r, lane);
        }
        out
    }

    /// The element of `dtype` at `addr` as a kernel value ([`value_type`]: an f16 or bf16 as
    /// its f32, exactly).
    pub fn load_value(&mut self, dtype: DType, addr: Value, flags: MemFlagsData) -> Result<Value, String> {
        Ok(match dtype {
            DType::BF16 => {
                // A NaN gets its quiet bit, as `half::bf16::to_f32` (eager's widening) sets it.
                let bits = self.b.ins().uload16(types::I32, flags, addr, 0);
                let magnitude = self.b.ins().band_imm_u(bits, 0x7FFF);
                let nan = self.b.ins().icmp_imm_u(IntCC::UnsignedGreaterThan, magnitude, 0x7F80);
                let quiet = self.b.ins().bor_imm_u(bits, 0x40);
                let bits = self.b.ins().select(nan, quiet, bits);
                let wide = self.b.ins().ishl_imm_u(bits, 16);
                self.bitcast(types::F32, wide)
            }
            DType::F16 => {
                let bits = self.b.ins().uload16(types::I32, flags, addr, 0);
                self.call(half_names::F16_LOAD, &[bits])
            }
            _ => self.b.ins().load(clif_type(dtype)?, flags, addr, 0),
        })
    }

    /// The F32X4/F64X2 vector (`vty`) of the elements of `dtype` at `addr`, one per lane: a
    /// plain load of f32/f64 lanes, the lane mask of Bool bytes ([`Self::load_mask`]), or four
    /// bf16 as their f32 ([`Self::load_bf16x4`]). Other dtypes never reach the vector plan.
    pub fn load_lanes(&mut self, dtype: DType, addr: Value, vty: Type, flags: MemFlagsData) -> Value {
        match dtype {
            DType::Bool => self.load_mask(addr, vty, flags),
            DType::BF16 => {
                debug_assert_eq!(vty, types::F32X4, "bf16 lanes are f32 lanes");
                self.load_bf16x4(addr, flags)
            }
            _ => {
                debug_assert_eq!(value_type(dtype).ok(), Some(vty.lane_type()), "{dtype} in {vty} lanes");
                self.b.ins().load(vty, flags, addr, 0)
            }
        }
    }

    /// The four bf16 at `addr` (8 bytes) as an F32X4 of the same numbers, each lane as
    /// [`Self::load_value`] makes it: zero-extended to 32 bits (`uload16x4`), shifted into the
    /// high half, and a NaN given its quiet bit (`half::bf16::to_f32`'s rule: a bf16 NaN's
    /// magnitude exceeds 0x7F80, so its f32 is a NaN, and bit 0x40 of the bf16 is bit 22 of
    /// the f32).
    fn load_bf16x4(&mut self, addr: Value, flags: MemFlagsData) -> Value {
        let bits = self.b.ins().uload16x4(flags, addr, 0);
        let wide = self.b.ins().ishl_imm_u(bits, 16);
        let f = self.bitcast(types::F32X4, wide);
        let nan = self.fcmp(FloatCC::Unordered, f, f);
        let quiet_bit = self.iconst(types::I32X4, 0x0040_0000);
        let quiet = self.b.ins().bor(wide, quiet_bit);
        let bits = self.b.ins().bitselect(nan, quiet, wide);
        self.bitcast(types::F32X4, bits)
    }

    /// Stores kernel value `v` of `dtype` at `addr` (an f16 or bf16 as its two bytes; `v` is
    /// already of its precision, so this rounding is exact). A vector `v` stores one element
    /// per lane: f32/f64 lanes as they are, bf16 lanes (F32X4 values of bf16 precision, whose
    /// low 16 bits are zero) as the four high halves, 8 bytes.
    pub fn store_value(&mut self, dtype: DType, v: Value, addr: Value, flags: MemFlagsData) {
        if self.ty(v).is_vector() {
            if dtype == DType::BF16 {
                // The high halves, shifted down with their sign (so each fits an i16 and the
                // signed saturating narrow keeps it), packed into the low 8 bytes.
                let u = self.bitcast(types::I32X4, v);
                let high = self.b.ins().sshr_imm_u(u, 16);
                let packed = self.b.ins().snarrow(high, high);
                let q = self.bitcast(types::I64X2, packed);
                let low = self.b.ins().extractlane(q, 0);
                self.b.ins().store(flags, low, addr, 0);
            } else {
                debug_assert!(!is_half(dtype), "f16 never takes the vector plan");
                self.b.ins().store(flags, v, addr, 0);
            }
            return;
        }
        let bits = match dtype {
            DType::BF16 => self.bf16_bits(v),
            DType::F16 => self.call(half_names::F16_STORE, &[v]),
            _ => {
                self.b.ins().store(flags, v, addr, 0);
                return;
            }
        };
        self.b.ins().istore16(flags, bits, addr, 0);
    }

    /// The bf16 nearest to f32 scalar `v` (ties to even; a NaN stays a NaN with its quiet bit
    /// set), in the low 16 bits of an i32: `half::bf16::from_f32`'s rule.
    fn bf16_bits(&mut self, v: Value) -> Value {
        let u = self.bitcast(types::I32, v);
        let high = self.b.ins().ushr_imm_u(u, 16);
        let lsb = self.b.ins().band_imm_u(high, 1);
        let bias = self.b.ins().iadd_imm_s(lsb, 0x7FFF);
        let sum = self.b.ins().iadd(u, bias);
        let rounded = self.b.ins().ushr_imm_u(sum, 16);
        let quiet = self.b.ins().bor_imm_u(high, 0x40);
        let nan = self.fcmp(FloatCC::Unordered, v, v);
        self.b.ins().select(nan, quiet, rounded)
    }

    /// f32 scalar or F32X4 vector `v` rounded to the precision of `dtype` when it is f16 or
    /// bf16 (what every op of those types keeps), else `v`. A bf16 vector is rounded lane-wise
    /// by [`Self::bf16_bits`]'s formula ([`Self::round_bf16x4`]); f16 calls the helper (lane
    /// by lane in a vector, which the vector plan never asks for).
    pub fn round_to(&mut self, dtype: DType, v: Value) -> Value {
        match dtype {
            DType::BF16 if self.ty(v).is_vector() => self.round_bf16x4(v),
            DType::BF16 => {
                let bits = self.bf16_bits(v);
                let wide = self.b.ins().ishl_imm_u(bits, 16);
                self.bitcast(types::F32, wide)
            }
            DType::F16 => self.call_any(half_names::F16_ROUND, &[v]),
            _ => v,
        }
    }

    /// Each lane of F32X4 `v` rounded to the nearest bf16 (ties to even; a NaN keeps its high
    /// half with the quiet bit set), as an F32X4: [`Self::bf16_bits`] lane-wise, with the
    /// shift down and back up folded into a mask of the high half (`(u + 0x7FFF + lsb) &
    /// 0xFFFF0000`, and `(u | 0x0040_0000) & 0xFFFF0000` for a NaN lane, picked by the mask
    /// of `fcmp uno`).
    fn round_bf16x4(&mut self, v: Value) -> Value {
        let ity = types::I32X4;
        let u = self.bitcast(ity, v);
        let high = self.b.ins().ushr_imm_u(u, 16);
        let one = self.iconst(ity, 1);
        let lsb = self.b.ins().band(high, one);
        let half_ulp = self.iconst(ity, 0x7FFF);
        let bias = self.b.ins().iadd(lsb, half_ulp);
        let sum = self.b.ins().iadd(u, bias);
        let quiet_bit = self.iconst(ity, 0x0040_0000);
        let quiet = self.b.ins().bor(u, quiet_bit);
        let nan = self.fcmp(FloatCC::Unordered, v, v);
        let bits = self.b.ins().bitselect(nan, quiet, sum);
        let high_half = self.iconst(ity, 0xFFFF_0000);
        let wide = self.b.ins().band(bits, high_half);
        self.bitcast(types::F32X4, wide)
    }

    /// A float constant of type `ty` (F32, F64 or a vector of them).
    pub fn fconst(&mut self, ty: Type, v: f64) -> Value {
        let s = if ty.lane_type() == types::F32 { self.b.ins().f32const(v as f32) } else { self.b.ins().f64const(v) };
        if ty.is_vector() {
            self.b.ins().splat(ty, s)
        } else {
            s
        }
    }

    /// An integer constant of type `ty` (scalar or vector).
    pub fn iconst(&mut self, ty: Type, v: i64) -> Value {
        let s = self.b.ins().iconst(ty.lane_type(), v);
        if ty.is_vector() {
            self.b.ins().splat(ty, s)
        } else {
            s
        }
    }

    /// A float comparison: an `i8` 0/1 for scalars, a lane mask for vectors.
    pub fn fcmp(&mut self, cc: FloatCC, a: Value, b: Value) -> Value {
        self.b.ins().fcmp(cc, a, b)
    }

    /// Reinterprets the bits of `v` as `ty` (same total size).
    pub fn bitcast(&mut self, ty: Type, v: Value) -> Value {
        if self.ty(v) == ty {
            return v;
        }
        let flags =
            if ty.is_vector() { MemFlagsData::new().with_endianness(Endianness::Little) } else { MemFlagsData::new() };
        self.b.ins().bitcast(ty, flags, v)
    }

    /// The lane mask for float vector type `vty` (F32X4 or F64X2) of the Bool elements (bytes
    /// 0 or 1) at `addr`: one byte per lane, zero-extended to the lane's width and negated
    /// (1 → all ones).
    pub fn load_mask(&mut self, addr: Value, vty: Type, flags: MemFlagsData) -> Value {
        let lanes = vty.lane_count();
        // The lanes' bytes as one integer (4 or 2 bytes), in lane 0 of a vector of that width.
        let word = types::Type::int(8 * lanes as u16).expect("a vector of 2 or 4 lanes");
        let bytes = self.b.ins().load(word, flags, addr, 0);
        let holder = word.by(128 / word.bits()).expect("a 128-bit vector");
        let v = self.b.ins().scalar_to_vector(holder, bytes);
        let mut v = self.bitcast(types::I8X16, v);
        while self.ty(v).lane_bits() < vty.lane_bits() {
            v = self.b.ins().uwiden_low(v);
        }
        self.b.ins().ineg(v)
    }

    /// The lane mask for float vector type `vty` with every lane the Bool scalar `t` (an `i8`
    /// 0 or 1).
    pub fn splat_mask(&mut self, t: Value, vty: Type) -> Value {
        let lane = Type::int(vty.lane_bits() as u16).expect("32- or 64-bit lanes");
        let wide = self.b.ins().uextend(lane, t);
        let all = self.b.ins().ineg(wide);
        self.b.ins().splat(lane.by(vty.lane_count()).expect("a 128-bit vector"), all)
    }

    /// `m ? a : b`, with `m` an `i8` truth value (scalars) or a lane mask (vectors).
    pub fn sel(&mut self, m: Value, a: Value, b: Value) -> Value {
        let ty = self.ty(a);
        if ty.is_vector() {
            let m = self.bitcast(ty, m);
            self.b.ins().bitselect(m, a, b)
        } else {
            self.b.ins().select(m, a, b)
        }
    }

    /// Widens an integer or Bool scalar of `dtype` to i64 (sign- or zero-extending).
    pub fn widen_i64(&mut self, v: Value, dtype: DType) -> Value {
        match dtype {
            DType::I64 => v,
            DType::I32 => self.b.ins().sextend(types::I64, v),
            _ => self.b.ins().uextend(types::I64, v),
        }
    }

    /// An i64 result converted to integer or Bool `dtype` (wrapping; Bool is `!= 0`).
    pub fn narrow_i64(&mut self, v: Value, dtype: DType) -> Value {
        match dtype {
            DType::I64 => v,
            DType::I32 => self.b.ins().ireduce(types::I32, v),
            DType::U8 => self.b.ins().ireduce(types::I8, v),
            _ => self.b.ins().icmp_imm_s(IntCC::NotEqual, v, 0),
        }
    }

    /// The truth (`!= 0`) of a scalar of `dtype` as an `i8` 0/1, or of a vector value (a
    /// float vector or, for `dtype == Bool`, already a mask) as a lane mask.
    pub fn truth(&mut self, v: Value, dtype: DType) -> Value {
        let ty = self.ty(v);
        if dtype == DType::Bool {
            return v;
        }
        if ty.lane_type().is_float() {
            let z = self.fconst(ty, 0.0);
            // NotEqual is unordered-or-not-equal: NaN is true, as `x != 0.0`.
            self.fcmp(FloatCC::NotEqual, v, z)
        } else {
            self.b.ins().icmp_imm_s(IntCC::NotEqual, v, 0)
        }
    }

    /// `op(x)` for `x` of `dtype` (a float scalar/vector, or an integer/Bool scalar).
    pub fn unary(&mut self, op: UnaryOp, dtype: DType, x: Value) -> Result<Value, String> {
        if !dtype.is_float() {
            if !op.keeps_int_dtype() {
                return Err(format!("{} on {dtype} must be computed in a float dtype", op.name()));
            }
            if op == UnaryOp::BitNot && dtype == DType::Bool {
                // Bool is an i8 0/1: flipping every bit would give -1 and -2.
                return Ok(self.b.ins().bxor_imm_s(x, 1));
            }
            let a = self.widen_i64(x, dtype);
            let r = match op {
                UnaryOp::Neg => self.b.ins().ineg(a),
                UnaryOp::Abs => self.b.ins().iabs(a),
                UnaryOp::Relu => {
                    let z = self.b.ins().iconst(types::I64, 0);
                    self.b.ins().smax(a, z)
                }
                UnaryOp::Sign => {
                    let pos = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, a, 0);
                    let neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, a, 0);
                    let pos = self.b.ins().uextend(types::I64, pos);
                    let neg = self.b.ins().uextend(types::I64, neg);
                    self.b.ins().isub(pos, neg)
                }
                UnaryOp::Square => self.b.ins().imul(a, a),
                UnaryOp::BitNot => self.b.ins().bnot(a),
                _ => a, // floor, ceil, round, trunc: identity on integers
            };
            return Ok(self.narrow_i64(r, dtype));
        }
        if op.is_int_only() {
            return Err(format!("{} is defined on integers only, not {dtype}", op.name()));
        }
        if is_half(dtype) {
            // In f32, then rounded; the ops whose f32 form is an inline polynomial (a few ulp
            // from the eager routine, enough to round to another f16) call the eager routine
            // (lane by lane on a bf16 vector).
            let r = match op {
                UnaryOp::Exp
                | UnaryOp::Log
                | UnaryOp::Tanh
                | UnaryOp::Sigmoid
                | UnaryOp::Gelu
                | UnaryOp::Erf
                | UnaryOp::Sin
                | UnaryOp::Cos => self.call_eager_unary(op, x),
                _ => self.unary(op, DType::F32, x)?,
            };
            return Ok(self.round_to(dtype, r));
        }
        let ty = self.ty(x);
        let f32 = dtype == DType::F32;
        Ok(match op {
            UnaryOp::Neg => self.b.ins().fneg(x),
            UnaryOp::Abs => self.b.ins().fabs(x),
            UnaryOp::Sqrt => self.b.ins().sqrt(x),
            UnaryOp::Rsqrt => {
                let s = self.b.ins().sqrt(x);
                let one = self.fconst(ty, 1.0);
                self.b.ins().fdiv(one, s)
            }
            UnaryOp::Reciprocal => {
                let one = self.fconst(ty, 1.0);
                self.b.ins().fdiv(one, x)
            }
            UnaryOp::Square => self.b.ins().fmul(x, x),
            UnaryOp::Floor => self.b.ins().floor(x),
            UnaryOp::Ceil => self.b.ins().ceil(x),
            UnaryOp::Trunc => self.b.ins().trunc(x),
            UnaryOp::Round => self.b.ins().nearest(x),
            UnaryOp::Relu => {
                // x > 0 or NaN: x; otherwise +0 (so relu(-0) = 0, relu(NaN) = NaN).
                let z = self.fconst(ty, 0.0);
                let keep = self.fcmp(FloatCC::UnorderedOrGreaterThan, x, z);
                self.sel(keep, x, z)
            }
            UnaryOp::Sign => {
                let z = self.fconst(ty, 0.0);
                let one = self.fconst(ty, 1.0);
                let m1 = self.fconst(ty, -1.0);
                let pos = self.fcmp(FloatCC::GreaterThan, x, z);
                let neg = self.fcmp(FloatCC::LessThan, x, z);
                let r = self.sel(neg, m1, z);
                self.sel(pos, one, r)
            }
            UnaryOp::Exp if f32 => self.exp_f32(x),
            UnaryOp::Log if f32 => self.log_f32(x),
            UnaryOp::Tanh if f32 => self.tanh_f32(x),
            UnaryOp::Sigmoid if f32 => self.sigmoid_f32(x),
            UnaryOp::Gelu if f32 => self.gelu_f32(x),
            UnaryOp::Erf if f32 => self.erf_f32(x),
            UnaryOp::Sin if f32 => self.sin_cos_f32(x, false),
            UnaryOp::Cos if f32 => self.sin_cos_f32(x, true),
            _ if f32 => self.call_eager_unary(op, x),
            _ => self.call_any(jit_symbols::unary_name(op, true), &[x]),
        })
    }

    /// `op(a, b)` for operands of `dtype`.
    pub fn binary(&mut self, op: BinaryOp, dtype: DType, a: Value, b: Value) -> Result<Value, String> {
        if !dtype.is_float() {
            if !op.keeps_int_dtype() {
                return Err(format!("{} with a {dtype} result is not an integer op", op.name()));
            }
            let a = self.widen_i64(a, dtype);
            let b = self.widen_i64(b, dtype);
            let r = match op {
                BinaryOp::Add => self.b.ins().iadd(a, b),
                BinaryOp::Sub => self.b.ins().isub(a, b),
                BinaryOp::Mul => self.b.ins().imul(a, b),
                BinaryOp::Maximum => self.b.ins().smax(a, b),
                BinaryOp::Minimum => self.b.ins().smin(a, b),
                BinaryOp::Pow => self.call(jit_symbols::POW_I64, &[a, b]),
                BinaryOp::Rem => {
                    // A zero divisor (ruled out by the caller) would trap: divide by 1 instead.
                    let zero = self.b.ins().icmp_imm_s(IntCC::Equal, b, 0);
                    let one = self.b.ins().iconst(types::I64, 1);
                    let d = self.b.ins().select(zero, one, b);
                    let r = self.b.ins().srem(a, d);
                    let rn = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, r, 0);
                    let bn = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, d, 0);
                    let differ = self.b.ins().bxor(rn, bn);
                    let nz = self.b.ins().icmp_imm_s(IntCC::NotEqual, r, 0);
                    let adj = self.b.ins().band(differ, nz);
                    let rb = self.b.ins().iadd(r, d);
                    self.b.ins().select(adj, rb, r)
                }
                BinaryOp::BitAnd => self.b.ins().band(a, b),
                BinaryOp::BitOr => self.b.ins().bor(a, b),
                BinaryOp::BitXor => self.b.ins().bxor(a, b),
                // `BinaryOp::eval_int`'s shifts: an amount outside 0..64 (unsigned compare)
                // gives 0 for `<<` and the sign fill (`>> 63`) for `>>`; `ishl`/`sshr` alone
                // would take the amount mod 64.
                BinaryOp::BitShl => {
                    let in_range = self.b.ins().icmp_imm_u(IntCC::UnsignedLessThan, b, 64);
                    let shifted = self.b.ins().ishl(a, b);
                    let zero = self.b.ins().iconst(types::I64, 0);
                    self.b.ins().select(in_range, shifted, zero)
                }
                BinaryOp::BitShr => {
                    let in_range = self.b.ins().icmp_imm_u(IntCC::UnsignedLessThan, b, 64);
                    let fill = self.b.ins().iconst(types::I64, 63);
                    let amount = self.b.ins().select(in_range, b, fill);
                    self.b.ins().sshr(a, amount)
                }
                BinaryOp::Div | BinaryOp::Atan2 => unreachable!(),
            };
            return Ok(self.narrow_i64(r, dtype));
        }
        if op.is_bitwise() {
            return Err(format!("{} is defined on integers and Bool only, not {dtype}", op.name()));
        }
        if is_half(dtype) {
            let r = self.binary(op, DType::F32, a, b)?;
            return Ok(self.round_to(dtype, r));
        }
        Ok(match op {
            BinaryOp::Add => self.b.ins().fadd(a, b),
            BinaryOp::Sub => self.b.ins().fsub(a, b),
            BinaryOp::Mul => self.b.ins().fmul(a, b),
            BinaryOp::Div => self.b.ins().fdiv(a, b),
            BinaryOp::Maximum | BinaryOp::Minimum => {
                // a >= b ? a : b (a <= b for minimum), NaN if either is NaN: max_nan exactly,
                // including which zero wins.
                let cc = if op == BinaryOp::Maximum { FloatCC::GreaterThanOrEqual } else { FloatCC::LessThanOrEqual };
                let pick = self.fcmp(cc, a, b);
                let r = self.sel(pick, a, b);
                let nan = self.fcmp(FloatCC::Unordered, a, b);
                let ty = self.ty(a);
                let q = self.fconst(ty, f64::NAN);
                self.sel(nan, q, r)
            }
            BinaryOp::Rem | BinaryOp::Pow | BinaryOp::Atan2 => {
                let name = jit_symbols::binary_name(op, dtype == DType::F64).expect("helper exists");
                self.call_any(name, &[a, b])
            }
            BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor | BinaryOp::BitShl | BinaryOp::BitShr => {
                unreachable!("refused above")
            }
        })
    }

    /// `op(a, b)` for operands of `dtype`: an `i8` 0/1 for scalars, a lane mask for vectors.
    pub fn cmp(&mut self, op: CmpOp, dtype: DType, a: Value, b: Value) -> Value {
        if dtype.is_float() {
            let cc = match op {
                CmpOp::Eq => FloatCC::Equal,
                CmpOp::Ne => FloatCC::NotEqual,
                CmpOp::Lt => FloatCC::LessThan,
                CmpOp::Le => FloatCC::LessThanOrEqual,
                CmpOp::Gt => FloatCC::GreaterThan,
                CmpOp::Ge => FloatCC::GreaterThanOrEqual,
            };
            return self.fcmp(cc, a, b);
        }
        let cc = match op {
            CmpOp::Eq => IntCC::Equal,
            CmpOp::Ne => IntCC::NotEqual,
            CmpOp::Lt => IntCC::SignedLessThan,
            CmpOp::Le => IntCC::SignedLessThanOrEqual,
            CmpOp::Gt => IntCC::SignedGreaterThan,
            CmpOp::Ge => IntCC::SignedGreaterThanOrEqual,
        };
        let a = self.widen_i64(a, dtype);
        let b = self.widen_i64(b, dtype);
        self.b.ins().icmp(cc, a, b)
    }

    /// A logical op on two truth values (both `i8` 0/1, or both lane masks).
    pub fn logical(&mut self, op: LogicalOp, a: Value, b: Value) -> Value {
        match op {
            LogicalOp::And => self.b.ins().band(a, b),
            LogicalOp::Or => self.b.ins().bor(a, b),
            LogicalOp::Xor => self.b.ins().bxor(a, b),
        }
    }

    /// Logical not of a truth value (`i8` 0/1, or a lane mask).
    pub fn not(&mut self, t: Value) -> Value {
        if self.ty(t).is_vector() {
            self.b.ins().bnot(t)
        } else {
            self.b.ins().bxor_imm_s(t, 1)
        }
    }

    /// A scalar converted from `from` to `to` with the eager cast rules (`cast()` in
    /// `src/tensor/convert.rs`).
    pub fn cast(&mut self, v: Value, from: DType, to: DType) -> Result<Value, String> {
        let to_ty = value_type(to)?;
        value_type(from)?;
        if from == to {
            return Ok(v);
        }
        if to == DType::Bool {
            return Ok(self.truth(v, from));
        }
        if is_half(from) {
            // An f16/bf16 value is its f32: cast that (exact widening, then `to`'s rule).
            return self.cast(v, DType::F32, to);
        }
        if is_half(to) {
            // Eager casts take `x as f64` to the half type through f32 (`Element::from_f64`,
            // PyTorch's rule): `as f64`, `as f32`, then the half type's rounding.
            let f = match from {
                DType::F32 => v,
                _ => {
                    let d = self.cast(v, from, DType::F64)?;
                    self.b.ins().fdemote(types::F32, d)
                }
            };
            return Ok(self.round_to(to, f));
        }
        Ok(match (from.is_float(), to.is_float()) {
            (true, true) => {
                if to == DType::F64 {
                    self.b.ins().fpromote(types::F64, v)
                } else {
                    self.b.ins().fdemote(types::F32, v)
                }
            }
            // `(v as f64) as i64` (saturating, NaN to 0), then wrapping to the integer type.
            (true, false) => {
                let i = self.b.ins().fcvt_to_sint_sat(types::I64, v);
                self.narrow_i64(i, to)
            }
            // Integer to float: exact through i64 then one rounding (i64 -> f32 directly).
            (false, true) => {
                let i = self.widen_i64(v, from);
                self.b.ins().fcvt_from_sint(to_ty, i)
            }
            (false, false) => {
                let i = self.widen_i64(v, from);
                self.narrow_i64(i, to)
            }
        })
    }
}
