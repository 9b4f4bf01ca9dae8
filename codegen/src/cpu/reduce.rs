//! The loops of a [`ReduceKernel`]: per output (`row_start..row_end`), the outer multi-index
//! gives each input's base; the middle reduced dims (all reduced dims but the last) are walked
//! by one counter decomposed into a multi-index; the last dim runs an F32X4/F64X2 loop (when
//! the prologue qualifies for the vector plan, see [`super::emit::vector_ok`]) and a scalar
//! tail. The prologue is emitted by [`super::emit::emit_values`], as in elementwise kernels.
//!
//! Accumulators live in `cranelift_frontend` variables: a scalar one (f64 for float values,
//! i64 for integer/Bool values) and, on the vector plan, two F64X2 for f32 Sum/Prod (the low
//! and high halves of each F32X4, promoted), one F64X2 for f64, or one F32X4 for f32 Max/Min.
//! They are combined lane by lane into the scalar one when the output is done.

use super::emit::{data_flags, emit_pre, emit_values, live_of, load_bcast, vector_ok, Entry, Row};
use super::ops::{clif_type, Cx};
use crate::kernel::ReduceKernel;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, BlockArg, ConstantData, Function, InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_jit::JITModule;
use cranelift_module::Module;
use kiln_runtime::op_kind::ReduceOp;
use kiln_runtime::DType;

/// The identity of `op` for values of `dtype`, in the scalar accumulator's type (f64 or i64).
fn identity(cx: &mut Cx, op: ReduceOp, dtype: DType) -> Value {
    if dtype.is_float() {
        let v = match op {
            ReduceOp::Sum => 0.0,
            ReduceOp::Prod => 1.0,
            ReduceOp::Max => f64::NEG_INFINITY,
            ReduceOp::Min => f64::INFINITY,
        };
        return cx.b.ins().f64const(v);
    }
    let (lo, hi) = match dtype {
        DType::I64 => (i64::MIN, i64::MAX),
        DType::I32 => (i32::MIN as i64, i32::MAX as i64),
        DType::U8 => (0, 255),
        _ => (0, 1), // Bool
    };
    let v = match op {
        ReduceOp::Sum => 0,
        ReduceOp::Prod => 1,
        ReduceOp::Max => lo,
        ReduceOp::Min => hi,
    };
    cx.b.ins().iconst(types::I64, v)
}

/// `pick(a, b)` of the eager kernels for floats (scalars or vectors of one type): `b` if it is
/// larger (`max`) or smaller than `a`, or NaN; otherwise `a`. So NaN, once in, stays.
fn pick_float(cx: &mut Cx, max: bool, a: Value, b: Value) -> Value {
    let cc = if max { FloatCC::GreaterThan } else { FloatCC::LessThan };
    let better = cx.fcmp(cc, b, a);
    let nan = cx.fcmp(FloatCC::Unordered, b, b);
    let take = cx.b.ins().bor(better, nan);
    cx.sel(take, b, a)
}

/// Folds `x` (same type as `acc`: f64 scalars or vectors, or i64) into `acc`.
fn step(cx: &mut Cx, op: ReduceOp, acc: Value, x: Value) -> Value {
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
fn promote_high(cx: &mut Cx, v: Value) -> Value {
    let bytes = cx.bitcast(types::I8X16, v);
    let mask: Vec<u8> = (8..16).chain(8..16).collect();
    let imm = cx.b.func.dfg.immediates.push(ConstantData::from(mask));
    let hi = cx.b.ins().shuffle(bytes, bytes, imm);
    let hi = cx.bitcast(types::F32X4, hi);
    cx.b.ins().fvpromote_low(hi)
}

/// Vectors per iteration of the vector loop, each with its own accumulators.
const UNROLL: usize = 2;

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

/// Builds the body of `extern "C" fn(*const KernelArgs)` for `k` into `func` (whose
/// signature is already set); returns whether the inner loop is vectorized.
pub(crate) fn build(k: &ReduceKernel, module: &mut JITModule, func: &mut Function) -> Result<bool, String> {
    let live = live_of(&k.insts, &[k.reduced]);
    for (n, inst) in k.insts.iter().enumerate() {
        if live[n] {
            clif_type(inst.dtype)?;
        }
    }
    for i in &k.inputs {
        clif_type(i.dtype)?;
    }
    clif_type(k.output)?;
    let rd = k.dtype(k.reduced);
    let float = rd.is_float();
    let vty = match rd {
        DType::F32 if vector_ok(&k.inputs, &k.insts, &live, rd) => Some(types::F32X4),
        DType::F64 if vector_ok(&k.inputs, &k.insts, &live, rd) => Some(types::F64X2),
        _ => None,
    };
    let vacc = match (vty, k.op) {
        (None, _) => VecAcc::None,
        (Some(types::F32X4), ReduceOp::Sum | ReduceOp::Prod) => VecAcc::F32Wide,
        (Some(t), _) => VecAcc::Same(t),
    };
    let aty = if float { types::F64 } else { types::I64 };
    let ptr = module.target_config().pointer_type();
    let mut fctx = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(func, &mut fctx);
    let frontend_config = module.target_config();
    let mut cx = Cx::new(&mut b, module);
    let (rank, o_rank) = (k.rank, k.rank - k.reduce_rank);
    let n_in = k.inputs.len();

    let entry = cx.b.create_block();
    cx.b.append_block_params_for_function_params(entry);
    cx.b.switch_to_block(entry);
    let args = cx.b.block_params(entry)[0];
    let a = Entry::load(&mut cx, args, ptr, &k.inputs, rank, 1);
    let (pre, pre_v) = emit_pre(&mut cx, &k.insts, &live, a.scalars_p, vty)?;
    let inner = a.dims[rank - 1];
    let mut n_mid = cx.b.ins().iconst(ptr, 1);
    for d in o_rank..rank - 1 {
        n_mid = cx.b.ins().imul(n_mid, a.dims[d]);
    }
    let scale = k.scale.map(|j| cx.b.ins().load(types::F64, MemFlagsData::trusted(), a.scalars_p, (8 * j) as i32));
    let out_size = k.output.size_in_bytes() as i64;

    // The accumulators.
    let acc_s: Variable = cx.b.declare_var(aty);
    // Per unrolled vector, its accumulators (independent chains hide the add latency).
    let acc_v: Vec<Vec<Variable>> = (0..UNROLL)
        .map(|_| match vacc {
            VecAcc::None => vec![],
            VecAcc::F32Wide => vec![cx.b.declare_var(types::F64X2), cx.b.declare_var(types::F64X2)],
            VecAcc::Same(t) => vec![cx.b.declare_var(t)],
        })
        .collect();

    let out_head = cx.b.create_block();
    let out_body = cx.b.create_block();
    let mid_head = cx.b.create_block();
    let mid_body = cx.b.create_block();
    let t_head = cx.b.create_block();
    let t_body = cx.b.create_block();
    let mid_next = cx.b.create_block();
    let out_fin = cx.b.create_block();
    let exit = cx.b.create_block();
    let row = cx.b.append_block_param(out_head, ptr);
    let m = cx.b.append_block_param(mid_head, ptr);
    let tj = cx.b.append_block_param(t_head, ptr);
    cx.b.ins().jump(out_head, &[BlockArg::Value(a.row_start)]);

    cx.b.switch_to_block(out_head);
    let more = cx.b.ins().icmp(IntCC::UnsignedLessThan, row, a.row_end);
    cx.b.ins().brif(more, out_body, &[], exit, &[]);

    // One output: its inputs' bases from the outer multi-index, the accumulators reset.
    cx.b.switch_to_block(out_body);
    let mut base: Vec<Value> = a.in_base.clone();
    let mut rem = row;
    for d in (0..o_rank).rev() {
        let idx = cx.b.ins().urem(rem, a.dims[d]);
        if d > 0 {
            rem = cx.b.ins().udiv(rem, a.dims[d]);
        }
        for (i, p) in base.iter_mut().enumerate() {
            let off = cx.b.ins().imul(idx, a.strides[i][d]);
            *p = cx.b.ins().iadd(*p, off);
        }
    }
    let id = identity(&mut cx, k.op, rd);
    cx.b.def_var(acc_s, id);
    match vacc {
        VecAcc::None => {}
        VecAcc::F32Wide => {
            let v = cx.b.ins().splat(types::F64X2, id);
            for &var in acc_v.iter().flatten() {
                cx.b.def_var(var, v);
            }
        }
        VecAcc::Same(t) => {
            let s = if t == types::F32X4 { cx.b.ins().fdemote(types::F32, id) } else { id };
            let v = cx.b.ins().splat(t, s);
            for &var in acc_v.iter().flatten() {
                cx.b.def_var(var, v);
            }
        }
    }
    let zero = cx.b.ins().iconst(ptr, 0);
    cx.b.ins().jump(mid_head, &[BlockArg::Value(zero)]);

    cx.b.switch_to_block(mid_head);
    let more = cx.b.ins().icmp(IntCC::UnsignedLessThan, m, n_mid);
    cx.b.ins().brif(more, mid_body, &[], out_fin, &[]);

    // One run along the last dim: the middle multi-index, then the vector loop and the tail.
    cx.b.switch_to_block(mid_body);
    let mut in_ptr = base.clone();
    let mut rem = m;
    for d in (o_rank..rank - 1).rev() {
        let idx = cx.b.ins().urem(rem, a.dims[d]);
        if d > o_rank {
            rem = cx.b.ins().udiv(rem, a.dims[d]);
        }
        for (i, p) in in_ptr.iter_mut().enumerate() {
            let off = cx.b.ins().imul(idx, a.strides[i][d]);
            *p = cx.b.ins().iadd(*p, off);
        }
    }
    debug_assert_eq!(in_ptr.len(), n_in);
    let (bcast, bcast_v) = load_bcast(&mut cx, &k.inputs, &k.insts, &in_ptr, vty)?;
    let zero = cx.b.ins().iconst(ptr, 0);
    if let Some(vt) = vty {
        let lanes = vt.lane_count() as i64;
        let v_head = cx.b.create_block();
        let v_body = cx.b.create_block();
        let vj = cx.b.append_block_param(v_head, ptr);
        let step_len = lanes * UNROLL as i64;
        let n_vec = cx.b.ins().band_imm_s(inner, !(step_len - 1));
        cx.b.ins().jump(v_head, &[BlockArg::Value(zero)]);
        cx.b.switch_to_block(v_head);
        let more = cx.b.ins().icmp(IntCC::UnsignedLessThan, vj, n_vec);
        cx.b.ins().brif(more, v_body, &[], t_head, &[BlockArg::Value(vj)]);
        cx.b.switch_to_block(v_body);
        let rv = Row { in_ptr: &in_ptr, in_step: &a.in_step, bcast: &bcast_v, pre: &pre_v, out_ptr: &[], draws: &[], index0: None };
        for (u, accs) in acc_v.iter().enumerate() {
            let ju = cx.b.ins().iadd_imm_s(vj, lanes * u as i64);
            let vals = emit_values(&mut cx, &k.inputs, &k.insts, &live, &rv, ju, Some(vt))?;
            let x = vals[k.reduced as usize].expect("the reduced value is live");
            let parts = match vacc {
                VecAcc::F32Wide => vec![cx.b.ins().fvpromote_low(x), promote_high(&mut cx, x)],
                VecAcc::Same(_) => vec![x],
                VecAcc::None => unreachable!("a vector type implies a vector accumulator"),
            };
            for (&var, part) in accs.iter().zip(parts) {
                let acc = cx.b.use_var(var);
                let r = step(&mut cx, k.op, acc, part);
                cx.b.def_var(var, r);
            }
        }
        let next = cx.b.ins().iadd_imm_s(vj, step_len);
        cx.b.ins().jump(v_head, &[BlockArg::Value(next)]);
    } else {
        cx.b.ins().jump(t_head, &[BlockArg::Value(zero)]);
    }

    cx.b.switch_to_block(t_head);
    let more = cx.b.ins().icmp(IntCC::UnsignedLessThan, tj, inner);
    cx.b.ins().brif(more, t_body, &[], mid_next, &[]);
    cx.b.switch_to_block(t_body);
    let rs = Row { in_ptr: &in_ptr, in_step: &a.in_step, bcast: &bcast, pre: &pre, out_ptr: &[], draws: &[], index0: None };
    let vals = emit_values(&mut cx, &k.inputs, &k.insts, &live, &rs, tj, None)?;
    let x = vals[k.reduced as usize].expect("the reduced value is live");
    let x = widen(&mut cx, x, rd);
    let acc = cx.b.use_var(acc_s);
    let r = step(&mut cx, k.op, acc, x);
    cx.b.def_var(acc_s, r);
    let next = cx.b.ins().iadd_imm_s(tj, 1);
    cx.b.ins().jump(t_head, &[BlockArg::Value(next)]);

    cx.b.switch_to_block(mid_next);
    let next_m = cx.b.ins().iadd_imm_s(m, 1);
    cx.b.ins().jump(mid_head, &[BlockArg::Value(next_m)]);

    // The output is done: combine the lanes into the scalar accumulator, scale, convert, store.
    cx.b.switch_to_block(out_fin);
    let mut acc = cx.b.use_var(acc_s);
    // The unrolled chains, folded into the first one.
    let mut acc_vals: Vec<Value> = acc_v[0].iter().map(|&var| cx.b.use_var(var)).collect();
    for accs in &acc_v[1..] {
        for (n, &var) in accs.iter().enumerate() {
            let x = cx.b.use_var(var);
            acc_vals[n] = step(&mut cx, k.op, acc_vals[n], x);
        }
    }
    match vacc {
        VecAcc::None => {}
        VecAcc::F32Wide => {
            let v = step(&mut cx, k.op, acc_vals[0], acc_vals[1]);
            for lane in 0..2 {
                let x = cx.b.ins().extractlane(v, lane);
                acc = step(&mut cx, k.op, acc, x);
            }
        }
        VecAcc::Same(t) => {
            let v = acc_vals[0];
            for lane in 0..t.lane_count() as u8 {
                let x = cx.b.ins().extractlane(v, lane);
                let x = widen(&mut cx, x, rd);
                acc = step(&mut cx, k.op, acc, x);
            }
        }
    }
    if let Some(s) = scale {
        acc = cx.b.ins().fmul(acc, s);
    }
    let acc_dtype = if float { DType::F64 } else { DType::I64 };
    let out = cx.cast(acc, acc_dtype, k.output)?;
    let off = cx.b.ins().imul_imm_s(row, out_size);
    let addr = cx.b.ins().iadd(a.out_base[0], off);
    cx.b.ins().store(data_flags(), out, addr, 0);
    let next_row = cx.b.ins().iadd_imm_s(row, 1);
    cx.b.ins().jump(out_head, &[BlockArg::Value(next_row)]);

    cx.b.switch_to_block(exit);
    cx.b.ins().return_(&[]);
    drop(cx);
    b.seal_all_blocks();
    b.finalize(frontend_config);
    Ok(vty.is_some())
}

/// A scalar value of `dtype` in the scalar accumulator's type: f32 promoted to f64 (exactly),
/// integers and Bool widened to i64.
fn widen(cx: &mut Cx, x: Value, dtype: DType) -> Value {
    match dtype {
        DType::F32 => cx.b.ins().fpromote(types::F64, x),
        DType::F64 => x,
        _ => cx.widen_i64(x, dtype),
    }
}
