//! The loops, loads and stores of a kernel: the row loop over `row_start..row_end`, each
//! input's row base from the outer multi-index, an F32X4/F64X2 loop over the inner dim when
//! the whole kernel is one float dtype over unit/broadcast inputs, and a scalar loop (the
//! vector loop's tail, or the whole row otherwise).

use super::ops::{clif_type, Cx};
use crate::kernel::{ElementwiseKernel, InnerStride, InstOp, KernelArgs};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, BlockArg, Function, InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::JITModule;
use cranelift_module::{FuncId, Module};
use kiln_runtime::DType;
use std::collections::HashMap;
use std::mem::offset_of;

/// How a kernel's inner loop is generated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Vectors of this type (F32X4 or F64X2), then a scalar tail.
    Vector(Type),
    /// Scalars only.
    Scalar,
}

/// Which instructions the outputs depend on.
pub(crate) fn live_set(k: &ElementwiseKernel) -> Vec<bool> {
    let mut live = vec![false; k.insts.len()];
    for &o in &k.outputs {
        live[o as usize] = true;
    }
    for i in (0..k.insts.len()).rev() {
        if !live[i] {
            continue;
        }
        let mut mark = |v: u32| live[v as usize] = true;
        match k.insts[i].op {
            InstOp::Load(_) | InstOp::Scalar(_) | InstOp::Const(_) => {}
            InstOp::Unary(_, a) | InstOp::Not(a) | InstOp::Cast(a) => mark(a),
            InstOp::Binary(_, a, b) | InstOp::Cmp(_, a, b) | InstOp::Logical(_, a, b) => {
                mark(a);
                mark(b);
            }
            InstOp::Where(c, a, b) => {
                mark(c);
                mark(a);
                mark(b);
            }
        }
    }
    live
}

/// The vector plan applies when every live value is of one float dtype E (f32 or f64), except
/// Bool values made by Cmp/Logical/Not (kept as lane masks), every input is E with a unit or
/// broadcast inner stride, every Cast is E→E and every output is E.
pub(crate) fn plan(k: &ElementwiseKernel, live: &[bool]) -> Plan {
    let e = match k.outputs.first().map(|&o| k.dtype(o)) {
        Some(d @ (DType::F32 | DType::F64)) => d,
        _ => return Plan::Scalar,
    };
    if k.inputs.iter().any(|i| i.dtype != e || i.inner == InnerStride::Strided) {
        return Plan::Scalar;
    }
    if k.outputs.iter().any(|&o| k.dtype(o) != e) {
        return Plan::Scalar;
    }
    for (i, inst) in k.insts.iter().enumerate() {
        if !live[i] {
            continue;
        }
        let ok = match inst.op {
            InstOp::Cmp(_, a, _) => inst.dtype == DType::Bool && k.dtype(a) == e,
            InstOp::Logical(_, a, b) => [a, b].iter().all(|&v| k.dtype(v) == e || k.dtype(v) == DType::Bool),
            InstOp::Not(a) => k.dtype(a) == e || k.dtype(a) == DType::Bool,
            InstOp::Cast(a) => inst.dtype == e && k.dtype(a) == e,
            _ => inst.dtype == e,
        };
        // A Bool value must come from Cmp/Logical/Not (a mask), never from a load/const/cast.
        let bool_ok = inst.dtype != DType::Bool || matches!(inst.op, InstOp::Cmp(..) | InstOp::Logical(..) | InstOp::Not(_));
        if !ok || !bool_ok {
            return Plan::Scalar;
        }
    }
    Plan::Vector(if e == DType::F32 { types::F32X4 } else { types::F64X2 })
}

/// A constant converted to `dtype` as the eager scalar conversion does (`Element::from_f64`).
fn const_value(cx: &mut Cx, c: f64, dtype: DType) -> Result<Value, String> {
    let ty = clif_type(dtype)?;
    Ok(match dtype {
        DType::F32 => cx.b.ins().f32const(c as f32),
        DType::F64 => cx.b.ins().f64const(c),
        DType::Bool => cx.b.ins().iconst(ty, (c != 0.0) as i64),
        DType::I64 => cx.b.ins().iconst(ty, c as i64),
        DType::I32 => cx.b.ins().iconst(ty, (c as i64) as i32 as i64),
        DType::U8 => cx.b.ins().iconst(ty, (c as i64) as u8 as i64),
        _ => unreachable!("clif_type rejected it"),
    })
}

/// Where the values of one row come from.
struct Row<'v> {
    /// Per input, the address of its element 0 in this row.
    in_ptr: &'v [Value],
    /// Per input, the inner stride in bytes (Strided inputs only).
    in_step: &'v [Option<Value>],
    /// Per input, its value for the whole row (Broadcast inputs, in the loop's form).
    bcast: &'v [Option<Value>],
    /// Per instruction, values computed before the loop (Const, Scalar) in the loop's form.
    pre: &'v [Option<Value>],
    /// Per output, the address of its element 0 in this row.
    out_ptr: &'v [Value],
}

fn data_flags() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

/// One element (or one vector of `lanes` elements) at inner index `j`: loads, the
/// instructions, the stores.
fn emit_element(cx: &mut Cx, k: &ElementwiseKernel, live: &[bool], row: &Row, j: Value, vty: Option<Type>) -> Result<(), String> {
    let mut vals: Vec<Option<Value>> = vec![None; k.insts.len()];
    for (n, inst) in k.insts.iter().enumerate() {
        if !live[n] {
            continue;
        }
        let v = |x: u32| vals[x as usize].expect("operands come first");
        let r = match inst.op {
            InstOp::Load(i) => {
                let i = i as usize;
                let size = inst.dtype.size_in_bytes() as i64;
                match k.inputs[i].inner {
                    InnerStride::Broadcast => row.bcast[i].expect("broadcast loaded per row"),
                    InnerStride::Unit => {
                        let off = cx.b.ins().imul_imm_s(j, size);
                        let addr = cx.b.ins().iadd(row.in_ptr[i], off);
                        let ty = vty.unwrap_or(clif_type(inst.dtype)?);
                        cx.b.ins().load(ty, data_flags(), addr, 0)
                    }
                    InnerStride::Strided => {
                        let off = cx.b.ins().imul(j, row.in_step[i].expect("strided step"));
                        let addr = cx.b.ins().iadd(row.in_ptr[i], off);
                        cx.b.ins().load(clif_type(inst.dtype)?, data_flags(), addr, 0)
                    }
                }
            }
            InstOp::Scalar(_) | InstOp::Const(_) => row.pre[n].expect("computed before the loop"),
            InstOp::Unary(op, a) => cx.unary(op, inst.dtype, v(a))?,
            InstOp::Binary(op, a, b) => cx.binary(op, inst.dtype, v(a), v(b))?,
            InstOp::Cmp(op, a, b) => cx.cmp(op, k.dtype(a), v(a), v(b)),
            InstOp::Logical(op, a, b) => {
                let ta = cx.truth(v(a), k.dtype(a));
                let tb = cx.truth(v(b), k.dtype(b));
                cx.logical(op, ta, tb)
            }
            InstOp::Not(a) => {
                let t = cx.truth(v(a), k.dtype(a));
                cx.not(t)
            }
            InstOp::Where(c, a, b) => cx.sel(v(c), v(a), v(b)),
            InstOp::Cast(a) => {
                if vty.is_some() {
                    v(a) // the vector plan only admits E→E casts
                } else {
                    cx.cast(v(a), k.dtype(a), inst.dtype)?
                }
            }
        };
        vals[n] = Some(r);
    }
    for (o, &val) in k.outputs.iter().enumerate() {
        let size = k.dtype(val).size_in_bytes() as i64;
        let off = cx.b.ins().imul_imm_s(j, size);
        let addr = cx.b.ins().iadd(row.out_ptr[o], off);
        cx.b.ins().store(data_flags(), vals[val as usize].expect("outputs are live"), addr, 0);
    }
    Ok(())
}

/// Builds the body of `extern "C" fn(*const KernelArgs)` for `k` into `func` (whose
/// signature is already set).
pub(crate) fn build(k: &ElementwiseKernel, module: &mut JITModule, ids: &HashMap<&'static str, FuncId>, func: &mut Function) -> Result<Plan, String> {
    let live = live_set(k);
    for (n, inst) in k.insts.iter().enumerate() {
        if live[n] {
            clif_type(inst.dtype)?;
        }
    }
    for i in &k.inputs {
        clif_type(i.dtype)?;
    }
    let plan = plan(k, &live);
    let vty = match plan {
        Plan::Vector(t) => Some(t),
        Plan::Scalar => None,
    };
    let ptr = module.target_config().pointer_type();
    let mut fctx = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(func, &mut fctx);
    let frontend_config = module.target_config();
    let mut cx = Cx::new(&mut b, module, ids);
    let rank = k.rank;
    let (n_in, n_out) = (k.inputs.len(), k.outputs.len());

    let entry = cx.b.create_block();
    cx.b.append_block_params_for_function_params(entry);
    cx.b.switch_to_block(entry);
    let args = cx.b.block_params(entry)[0];
    let tf = MemFlagsData::trusted();
    let field = |cx: &mut Cx, off: usize| cx.b.ins().load(ptr, tf, args, off as i32);
    let inputs_pp = field(&mut cx, offset_of!(KernelArgs, inputs));
    let outputs_pp = field(&mut cx, offset_of!(KernelArgs, outputs));
    let scalars_p = field(&mut cx, offset_of!(KernelArgs, scalars));
    let shape_p = field(&mut cx, offset_of!(KernelArgs, shape));
    let strides_p = field(&mut cx, offset_of!(KernelArgs, strides));
    let row_start = field(&mut cx, offset_of!(KernelArgs, row_start));
    let row_end = field(&mut cx, offset_of!(KernelArgs, row_end));
    let dims: Vec<Value> = (0..rank).map(|d| cx.b.ins().load(ptr, tf, shape_p, (8 * d) as i32)).collect();
    let inner = dims[rank - 1];
    let in_base: Vec<Value> = (0..n_in).map(|i| cx.b.ins().load(ptr, tf, inputs_pp, (8 * i) as i32)).collect();
    let out_base: Vec<Value> = (0..n_out).map(|o| cx.b.ins().load(ptr, tf, outputs_pp, (8 * o) as i32)).collect();
    // Outer strides in bytes, and the inner step in bytes of strided inputs.
    let mut outer_strides: Vec<Vec<Value>> = Vec::with_capacity(n_in);
    let mut in_step: Vec<Option<Value>> = Vec::with_capacity(n_in);
    for (i, input) in k.inputs.iter().enumerate() {
        let size = input.dtype.size_in_bytes() as i64;
        let mut s = Vec::with_capacity(rank.saturating_sub(1));
        for d in 0..rank - 1 {
            let st = cx.b.ins().load(ptr, tf, strides_p, (8 * (i * rank + d)) as i32);
            s.push(cx.b.ins().imul_imm_s(st, size));
        }
        outer_strides.push(s);
        in_step.push(if input.inner == InnerStride::Strided {
            let st = cx.b.ins().load(ptr, tf, strides_p, (8 * (i * rank + rank - 1)) as i32);
            Some(cx.b.ins().imul_imm_s(st, size))
        } else {
            None
        });
    }
    // Constants and run-time scalars, converted once.
    let mut pre: Vec<Option<Value>> = vec![None; k.insts.len()];
    let mut pre_v: Vec<Option<Value>> = vec![None; k.insts.len()];
    for (n, inst) in k.insts.iter().enumerate() {
        if !live[n] {
            continue;
        }
        let s = match inst.op {
            InstOp::Const(c) => const_value(&mut cx, c, inst.dtype)?,
            InstOp::Scalar(j) => {
                let f = cx.b.ins().load(types::F64, tf, scalars_p, (8 * j) as i32);
                if inst.dtype == DType::Bool {
                    cx.truth(f, DType::F64)
                } else {
                    cx.cast(f, DType::F64, inst.dtype)?
                }
            }
            _ => continue,
        };
        pre[n] = Some(s);
        if let Some(vt) = vty {
            pre_v[n] = Some(cx.b.ins().splat(vt, s));
        }
    }
    let row_head = cx.b.create_block();
    let row_body = cx.b.create_block();
    let exit = cx.b.create_block();
    let row = cx.b.append_block_param(row_head, ptr);
    let empty = cx.b.ins().icmp_imm_s(IntCC::Equal, inner, 0);
    cx.b.ins().brif(empty, exit, &[], row_head, &[BlockArg::Value(row_start)]);

    cx.b.switch_to_block(row_head);
    let more = cx.b.ins().icmp(IntCC::UnsignedLessThan, row, row_end);
    cx.b.ins().brif(more, row_body, &[], exit, &[]);

    cx.b.switch_to_block(row_body);
    // Row r's outer multi-index, innermost outer dim first.
    let mut idx = vec![None; rank];
    let mut rem = row;
    for d in (0..rank - 1).rev() {
        idx[d] = Some(cx.b.ins().urem(rem, dims[d]));
        if d > 0 {
            rem = cx.b.ins().udiv(rem, dims[d]);
        }
    }
    let mut in_ptr = Vec::with_capacity(n_in);
    for i in 0..n_in {
        let mut p = in_base[i];
        for d in 0..rank - 1 {
            let off = cx.b.ins().imul(idx[d].unwrap(), outer_strides[i][d]);
            p = cx.b.ins().iadd(p, off);
        }
        in_ptr.push(p);
    }
    let mut out_ptr = Vec::with_capacity(n_out);
    let row_elems = cx.b.ins().imul(row, inner);
    for (&base, &val) in out_base.iter().zip(&k.outputs) {
        let size = k.dtype(val).size_in_bytes() as i64;
        let off = cx.b.ins().imul_imm_s(row_elems, size);
        out_ptr.push(cx.b.ins().iadd(base, off));
    }
    // Broadcast inputs: one load per row.
    let mut bcast = vec![None; n_in];
    let mut bcast_v = vec![None; n_in];
    for inst in &k.insts {
        if let InstOp::Load(i) = inst.op {
            let i = i as usize;
            if k.inputs[i].inner == InnerStride::Broadcast && bcast[i].is_none() {
                let s = cx.b.ins().load(clif_type(inst.dtype)?, data_flags(), in_ptr[i], 0);
                bcast[i] = Some(s);
                if let Some(vt) = vty {
                    bcast_v[i] = Some(cx.b.ins().splat(vt, s));
                }
            }
        }
    }
    let t_head = cx.b.create_block();
    let t_body = cx.b.create_block();
    let row_next = cx.b.create_block();
    let tj = cx.b.append_block_param(t_head, ptr);
    let zero = cx.b.ins().iconst(ptr, 0);
    if let Some(vt) = vty {
        let lanes = vt.lane_count() as i64;
        let v_head = cx.b.create_block();
        let v_body = cx.b.create_block();
        let vj = cx.b.append_block_param(v_head, ptr);
        let n_vec = cx.b.ins().band_imm_s(inner, !(lanes - 1));
        cx.b.ins().jump(v_head, &[BlockArg::Value(zero)]);
        cx.b.switch_to_block(v_head);
        let more = cx.b.ins().icmp(IntCC::UnsignedLessThan, vj, n_vec);
        cx.b.ins().brif(more, v_body, &[], t_head, &[BlockArg::Value(vj)]);
        cx.b.switch_to_block(v_body);
        let rv = Row { in_ptr: &in_ptr, in_step: &in_step, bcast: &bcast_v, pre: &pre_v, out_ptr: &out_ptr };
        emit_element(&mut cx, k, &live, &rv, vj, Some(vt))?;
        let next = cx.b.ins().iadd_imm_s(vj, lanes);
        cx.b.ins().jump(v_head, &[BlockArg::Value(next)]);
    } else {
        cx.b.ins().jump(t_head, &[BlockArg::Value(zero)]);
    }
    cx.b.switch_to_block(t_head);
    let more = cx.b.ins().icmp(IntCC::UnsignedLessThan, tj, inner);
    cx.b.ins().brif(more, t_body, &[], row_next, &[]);
    cx.b.switch_to_block(t_body);
    let rs = Row { in_ptr: &in_ptr, in_step: &in_step, bcast: &bcast, pre: &pre, out_ptr: &out_ptr };
    emit_element(&mut cx, k, &live, &rs, tj, None)?;
    let next = cx.b.ins().iadd_imm_s(tj, 1);
    cx.b.ins().jump(t_head, &[BlockArg::Value(next)]);

    cx.b.switch_to_block(row_next);
    let next_row = cx.b.ins().iadd_imm_s(row, 1);
    cx.b.ins().jump(row_head, &[BlockArg::Value(next_row)]);

    cx.b.switch_to_block(exit);
    cx.b.ins().return_(&[]);
    drop(cx);
    b.seal_all_blocks();
    b.finalize(frontend_config);
    Ok(plan)
}
