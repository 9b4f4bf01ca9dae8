//! The values, loads and stores of a kernel's elements: liveness and the vector plan, each
//! input's row base from the outer multi-index, the per-instruction emission ([`emit_values`],
//! which also serves the prologue and the epilogue of reduction kernels), broadcast loads, and
//! the random draws' scalars (an [`InstOp::Rand`] outside a tile is one helper call per element,
//! lane by lane on the vector plan; tiled f32 rows fill a tile of a draw per call, see
//! `tiled_rows.rs`). The F32X4 plan also holds bf16 values, as the f32 of the same number
//! (four bf16 loaded, rounded and stored per vector, bit for bit the scalar plan's lanes; see
//! [`plan`]); f16 values keep the scalar plan. The elementwise kernel's function and its row
//! loop are in `elementwise.rs`; the loop skeleton is in `run_loops.rs`.

use super::ops::{is_half, value_type, FnEmitter};
use crate::kernel::{ElementwiseKernel, InnerStride, Inst, InstOp, KernelArgs, KernelInput, Val};
use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData, Type, Value};
use kiln_runtime::DType;
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
    live_of(&k.insts, &k.outputs)
}

/// Which instructions of `insts` the values `roots` depend on.
pub(crate) fn live_of(insts: &[Inst], roots: &[Val]) -> Vec<bool> {
    live_cut(insts, roots, |_| false)
}

/// Which instructions of `insts` the values `roots` depend on when the values `given(n)` holds
/// for are known (so their operands are not needed for them).
pub(crate) fn live_cut(insts: &[Inst], roots: &[Val], given: impl Fn(usize) -> bool) -> Vec<bool> {
    let mut live = vec![false; insts.len()];
    for &o in roots {
        live[o as usize] = true;
    }
    for i in (0..insts.len()).rev() {
        if !live[i] || given(i) {
            continue;
        }
        let mut mark = |v: u32| live[v as usize] = true;
        match insts[i].op {
            InstOp::Load(_) | InstOp::Scalar(_) | InstOp::Const(_) | InstOp::Reduced(_) | InstOp::Rand { .. } => {}
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

/// The vector plan applies when every live value is of one float dtype E (f32 or f64; with
/// E = f32 a value may also be bf16, held in f32 lanes, [`in_lanes`]), except Bool values
/// (kept as lane masks) made by Cmp/Logical/Not or loaded, every input is of E's lanes or Bool
/// with a unit or broadcast inner stride, every Cast is between E's lanes (f32→bf16 rounds
/// lane-wise, bf16→f32 is exact) or Bool→E's lanes (a mask to 1 or 0: dropout's
/// `(rand >= p).to(E)`) and every output is of E's lanes. A Bool input is attention's mask,
/// say: without it, a masked softmax would run scalar code with a libm `exp` per element. A
/// random draw ([`InstOp::Rand`] of E) is one helper call per lane, or in tiled f32 rows one
/// call per tile, so dropout's other math stays vectorized.
///
/// So a bf16 kernel (or one mixing bf16 and f32 values) takes the F32X4 plan: its bf16 loads,
/// roundings and stores are lane-wise forms of the scalar ones (`ops.rs`), its arithmetic is
/// the f32 vector code, and its transcendentals run the eager routine on each lane (one helper
/// call per vector), so each lane equals the scalar plan's (and eager's) result bit for bit.
/// f16 values keep the scalar plan (their conversions are helper calls).
pub(crate) fn plan(k: &ElementwiseKernel, live: &[bool]) -> Plan {
    let e = match k.outputs.first().map(|&o| k.dtype(o)) {
        Some(DType::F32 | DType::BF16) => DType::F32,
        Some(DType::F64) => DType::F64,
        _ => return Plan::Scalar,
    };
    if k.outputs.iter().any(|&o| !in_lanes(k.dtype(o), e)) {
        return Plan::Scalar;
    }
    if !vector_ok(&k.inputs, &k.insts, live, e) {
        return Plan::Scalar;
    }
    Plan::Vector(if e == DType::F32 { types::F32X4 } else { types::F64X2 })
}

/// True when a value of `d` rides the lanes of float dtype `e`'s vectors: `e` itself, and bf16
/// in f32 lanes (the f32 of the same number, [`value_type`]).
fn in_lanes(d: DType, e: DType) -> bool {
    d == e || (e == DType::F32 && d == DType::BF16)
}

/// The instruction and input rules of the vector plan for float dtype `e` (see [`plan`]),
/// without the rule on outputs. With `e` f32, bf16 values pass ([`in_lanes`]), in reduction
/// stages and epilogues too.
pub(crate) fn vector_ok(inputs: &[KernelInput], insts: &[Inst], live: &[bool], e: DType) -> bool {
    let lanes = |d: DType| in_lanes(d, e);
    if inputs.iter().any(|i| !(lanes(i.dtype) || i.dtype == DType::Bool) || i.inner == InnerStride::Strided) {
        return false;
    }
    let dt = |v: Val| insts[v as usize].dtype;
    for (i, inst) in insts.iter().enumerate() {
        if !live[i] {
            continue;
        }
        let ok = match inst.op {
            InstOp::Cmp(_, a, _) => inst.dtype == DType::Bool && lanes(dt(a)),
            InstOp::Logical(_, a, b) => [a, b].iter().all(|&v| lanes(dt(v)) || dt(v) == DType::Bool),
            InstOp::Not(a) => lanes(dt(a)) || dt(a) == DType::Bool,
            InstOp::Cast(a) => lanes(inst.dtype) && (lanes(dt(a)) || dt(a) == DType::Bool),
            InstOp::Rand { .. } => inst.dtype == e,
            InstOp::Load(_) => lanes(inst.dtype) || inst.dtype == DType::Bool,
            _ => lanes(inst.dtype),
        };
        // A Bool value must come from Cmp/Logical/Not or a load (a mask), never from a
        // const/cast.
        let bool_ok = inst.dtype != DType::Bool
            || matches!(inst.op, InstOp::Cmp(..) | InstOp::Logical(..) | InstOp::Not(_) | InstOp::Load(_));
        if !ok || !bool_ok {
            return false;
        }
    }
    true
}

/// A constant converted to `dtype` as the eager scalar conversion does (`Element::from_f64`).
pub(crate) fn const_value(cx: &mut FnEmitter, c: f64, dtype: DType) -> Result<Value, String> {
    let ty = value_type(dtype)?;
    Ok(match dtype {
        DType::F32 => cx.b.ins().f32const(c as f32),
        DType::F16 => cx.b.ins().f32const(half::f16::from_f32(c as f32).to_f32()),
        DType::BF16 => cx.b.ins().f32const(half::bf16::from_f32(c as f32).to_f32()),
        DType::F64 => cx.b.ins().f64const(c),
        DType::Bool => cx.b.ins().iconst(ty, (c != 0.0) as i64),
        DType::I64 => cx.b.ins().iconst(ty, c as i64),
        DType::I32 => cx.b.ins().iconst(ty, (c as i64) as i32 as i64),
        DType::U8 => cx.b.ins().iconst(ty, (c as i64) as u8 as i64),
    })
}

/// Where the values of one row come from.
pub(crate) struct Row<'v> {
    /// Per input, the address of its element 0 in this row.
    pub in_ptr: &'v [Value],
    /// Per input, the inner stride in bytes (Strided inputs only).
    pub in_step: &'v [Option<Value>],
    /// Per input, its value for the whole row (Broadcast inputs, in the loop's form).
    pub bcast: &'v [Option<Value>],
    /// Per instruction, values computed before the loop (Const, Scalar, and in a reduction
    /// kernel's later stages and epilogue Reduced and values of known values alone) in the
    /// loop's form.
    pub pre: &'v [Option<Value>],
    /// Per output, the address of its element 0 in this row (empty for reductions).
    pub out_ptr: &'v [Value],
    /// Per instruction, the four f64 scalars of an [`InstOp::Rand`]'s draw (loaded before the
    /// loop; empty for reductions, which refuse Rand).
    pub draws: &'v [Option<[Value; 4]>],
    /// The linear index of the row's element 0, `index_base + row·inner` (kernels that draw).
    pub index0: Option<Value>,
}

/// Memory flags of data loads and stores.
pub(crate) fn data_flags() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

/// One element (or one vector of `lanes` elements) at inner index `j`: loads, the
/// instructions, the stores (at `row.out_ptr`).
pub(crate) fn emit_element(
    cx: &mut FnEmitter,
    k: &ElementwiseKernel,
    live: &[bool],
    row: &Row,
    j: Value,
    vty: Option<Type>,
) -> Result<(), String> {
    let vals = emit_values(cx, &k.inputs, &k.insts, live, row, j, vty)?;
    store_outputs(cx, k, row, j, &vals);
    Ok(())
}

/// The stores of `k`'s outputs (values `vals`) at inner index `j` of `row`.
pub(crate) fn store_outputs(cx: &mut FnEmitter, k: &ElementwiseKernel, row: &Row, j: Value, vals: &[Option<Value>]) {
    for (o, &val) in k.outputs.iter().enumerate() {
        let size = k.dtype(val).size_in_bytes() as i64;
        let off = cx.b.ins().imul_imm_s(j, size);
        let addr = cx.b.ins().iadd(row.out_ptr[o], off);
        cx.store_value(k.dtype(val), vals[val as usize].expect("outputs are live"), addr, data_flags());
    }
}

/// The live instructions of `insts` at inner index `j` of `row` (one element, or one vector of
/// `vty` when given): per instruction, its value (`None` for dead ones).
pub(crate) fn emit_values(
    cx: &mut FnEmitter,
    inputs: &[KernelInput],
    insts: &[Inst],
    live: &[bool],
    row: &Row,
    j: Value,
    vty: Option<Type>,
) -> Result<Vec<Option<Value>>, String> {
    emit_values_given(cx, inputs, insts, live, row, j, vty, vec![None; insts.len()])
}

/// [`emit_values`] where the instructions whose `vals` entry is already `Some` are known (in
/// the loop's form: a tile buffer's element, say) and not emitted.
#[allow(clippy::too_many_arguments)]
pub(crate) fn emit_values_given(
    cx: &mut FnEmitter,
    inputs: &[KernelInput],
    insts: &[Inst],
    live: &[bool],
    row: &Row,
    j: Value,
    vty: Option<Type>,
    mut vals: Vec<Option<Value>>,
) -> Result<Vec<Option<Value>>, String> {
    let dt = |v: Val| insts[v as usize].dtype;
    for (n, inst) in insts.iter().enumerate() {
        if !live[n] || vals[n].is_some() {
            continue;
        }
        if let Some(&Some(p)) = row.pre.get(n) {
            // Computed before the loop: a constant, a scalar, or in a reduction kernel's later
            // stage or epilogue a value of the output's stage values alone.
            vals[n] = Some(p);
            continue;
        }
        let v = |x: u32| vals[x as usize].expect("operands come first");
        let r = match inst.op {
            InstOp::Load(i) => {
                let i = i as usize;
                let size = inst.dtype.size_in_bytes() as i64;
                match inputs[i].inner {
                    InnerStride::Broadcast => row.bcast[i].expect("broadcast loaded per row"),
                    InnerStride::Unit => {
                        let off = cx.b.ins().imul_imm_s(j, size);
                        let addr = cx.b.ins().iadd(row.in_ptr[i], off);
                        match vty {
                            Some(vt) => cx.load_lanes(inst.dtype, addr, vt, data_flags()),
                            None => cx.load_value(inst.dtype, addr, data_flags())?,
                        }
                    }
                    InnerStride::Strided => {
                        let off = cx.b.ins().imul(j, row.in_step[i].expect("strided step"));
                        let addr = cx.b.ins().iadd(row.in_ptr[i], off);
                        cx.load_value(inst.dtype, addr, data_flags())?
                    }
                }
            }
            InstOp::Scalar(_) | InstOp::Const(_) => row.pre[n].expect("computed before the loop"),
            InstOp::Reduced(_) => row.pre[n].expect("a stage's value is set per output"),
            InstOp::Unary(op, a) => cx.unary(op, inst.dtype, v(a))?,
            InstOp::Binary(op, a, b) => cx.binary(op, inst.dtype, v(a), v(b))?,
            InstOp::Cmp(op, a, b) => cx.cmp(op, dt(a), v(a), v(b)),
            InstOp::Logical(op, a, b) => {
                let ta = cx.truth(v(a), dt(a));
                let tb = cx.truth(v(b), dt(b));
                cx.logical(op, ta, tb)
            }
            InstOp::Not(a) => {
                let t = cx.truth(v(a), dt(a));
                cx.not(t)
            }
            InstOp::Where(c, a, b) => cx.sel(v(c), v(a), v(b)),
            InstOp::Cast(a) => match vty {
                // The vector plan admits casts between E's lanes and masks to them: 1 and 0
                // are exact in bf16, bf16→f32 is exact, f32→bf16 rounds lane-wise.
                Some(vt) if dt(a) == DType::Bool => {
                    let (one, zero) = (cx.fconst(vt, 1.0), cx.fconst(vt, 0.0));
                    cx.sel(v(a), one, zero)
                }
                Some(_) if is_half(inst.dtype) && !is_half(dt(a)) => cx.round_to(inst.dtype, v(a)),
                Some(_) => v(a),
                None => cx.cast(v(a), dt(a), inst.dtype)?,
            },
            InstOp::Rand { dist, .. } => {
                let params = row.draws[n].expect("loaded before the loop");
                let index = cx.b.ins().iadd(row.index0.expect("a kernel that draws knows its rows' indices"), j);
                cx.rand(dist, inst.dtype, params, index, vty)
            }
        };
        vals[n] = Some(r);
    }
    Ok(vals)
}

/// The kernel arguments read in the entry block: `KernelArgs`'s fields, the sizes, the base
/// pointers and every input's strides in bytes.
pub(crate) struct Entry {
    /// `scalars`.
    pub scalars_p: Value,
    /// `row_start`.
    pub row_start: Value,
    /// `row_end`.
    pub row_end: Value,
    /// `index_base`.
    pub index_base: Value,
    /// The `rank` sizes.
    pub dims: Vec<Value>,
    /// Per input, its base pointer.
    pub in_base: Vec<Value>,
    /// Per output, its base pointer.
    pub out_base: Vec<Value>,
    /// Per input, its `rank` strides in bytes.
    pub strides: Vec<Vec<Value>>,
    /// Per input, the inner stride in bytes (Strided inputs only).
    pub in_step: Vec<Option<Value>>,
}

impl Entry {
    /// Loads the fields of the `KernelArgs` at `args` (`ptr` is the pointer type).
    pub(crate) fn load(
        cx: &mut FnEmitter,
        args: Value,
        ptr: Type,
        inputs: &[KernelInput],
        rank: usize,
        n_out: usize,
    ) -> Entry {
        let tf = MemFlagsData::trusted();
        let field = |cx: &mut FnEmitter, off: usize| cx.b.ins().load(ptr, tf, args, off as i32);
        let inputs_pp = field(cx, offset_of!(KernelArgs, inputs));
        let outputs_pp = field(cx, offset_of!(KernelArgs, outputs));
        let scalars_p = field(cx, offset_of!(KernelArgs, scalars));
        let shape_p = field(cx, offset_of!(KernelArgs, shape));
        let strides_p = field(cx, offset_of!(KernelArgs, strides));
        let row_start = field(cx, offset_of!(KernelArgs, row_start));
        let row_end = field(cx, offset_of!(KernelArgs, row_end));
        let index_base = field(cx, offset_of!(KernelArgs, index_base));
        let dims: Vec<Value> = (0..rank).map(|d| cx.b.ins().load(ptr, tf, shape_p, (8 * d) as i32)).collect();
        let in_base: Vec<Value> =
            (0..inputs.len()).map(|i| cx.b.ins().load(ptr, tf, inputs_pp, (8 * i) as i32)).collect();
        let out_base: Vec<Value> = (0..n_out).map(|o| cx.b.ins().load(ptr, tf, outputs_pp, (8 * o) as i32)).collect();
        let mut strides = Vec::with_capacity(inputs.len());
        let mut in_step = Vec::with_capacity(inputs.len());
        for (i, input) in inputs.iter().enumerate() {
            let size = input.dtype.size_in_bytes() as i64;
            let s: Vec<Value> = (0..rank)
                .map(|d| {
                    let st = cx.b.ins().load(ptr, tf, strides_p, (8 * (i * rank + d)) as i32);
                    cx.b.ins().imul_imm_s(st, size)
                })
                .collect();
            in_step.push(if input.inner == InnerStride::Strided { Some(s[rank - 1]) } else { None });
            strides.push(s);
        }
        Entry { scalars_p, row_start, row_end, index_base, dims, in_base, out_base, strides, in_step }
    }
}

/// Per instruction or input, an optional scalar value and its optional splat.
pub(crate) type PerValue = (Vec<Option<Value>>, Vec<Option<Value>>);

/// Constants and run-time scalars of the live instructions, converted once: per instruction,
/// the scalar and (with `vty`) its splat.
pub(crate) fn emit_pre(
    cx: &mut FnEmitter,
    insts: &[Inst],
    live: &[bool],
    scalars_p: Value,
    vty: Option<Type>,
) -> Result<PerValue, String> {
    let tf = MemFlagsData::trusted();
    let mut pre: Vec<Option<Value>> = vec![None; insts.len()];
    let mut pre_v: Vec<Option<Value>> = vec![None; insts.len()];
    for (n, inst) in insts.iter().enumerate() {
        if !live[n] {
            continue;
        }
        let s = match inst.op {
            InstOp::Const(c) => const_value(cx, c, inst.dtype)?,
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
    Ok((pre, pre_v))
}

/// The per-output form of `pre` (from [`emit_pre`]) for a pass over one output of a reduction
/// kernel (a later stage's prologue or the epilogue), emitted in the current block: each live
/// [`InstOp::Reduced`]`(s)` is `reduced[s]` (that stage's converted value for this output), and
/// each live instruction [`per_output_known`] marks (log_softmax's `log Σ`, layer norm's
/// `rsqrt(var + eps)`) is computed here, once per output; with `vty`, each is splatted too.
pub(crate) fn per_output_pre(
    cx: &mut FnEmitter,
    insts: &[Inst],
    live: &[bool],
    pre: &PerValue,
    vty: Option<Type>,
    reduced: &[Value],
) -> Result<PerValue, String> {
    let known = per_output_known(insts);
    let mut pre = pre.clone();
    for (n, inst) in insts.iter().enumerate() {
        if !live[n] || !known[n] || pre.0[n].is_some() {
            continue;
        }
        let k = |v: Val| pre.0[v as usize].expect("known operands are computed first");
        let s = match inst.op {
            InstOp::Reduced(s) => reduced[s as usize],
            InstOp::Unary(op, a) => cx.unary(op, inst.dtype, k(a))?,
            InstOp::Binary(op, a, b) => cx.binary(op, inst.dtype, k(a), k(b))?,
            InstOp::Cast(a) => cx.cast(k(a), insts[a as usize].dtype, inst.dtype)?,
            _ => unreachable!("emit_pre computed the live constants and scalars"),
        };
        let s = if matches!(inst.op, InstOp::Reduced(_)) { s } else { cx.pinned(s) };
        pre.0[n] = Some(s);
        pre.1[n] = vty.map(|vt| cx.b.ins().splat(vt, s));
    }
    Ok(pre)
}

/// Per instruction of a reduction kernel's later stage or epilogue, whether it has one value
/// per output: constants, scalars, stage values, and non-Bool unary, binary and cast
/// instructions of those alone ([`per_output_pre`] computes them before the loops).
pub(crate) fn per_output_known(insts: &[Inst]) -> Vec<bool> {
    let mut known = vec![false; insts.len()];
    for (n, inst) in insts.iter().enumerate() {
        let k = |v: Val| known[v as usize];
        known[n] = match inst.op {
            InstOp::Const(_) | InstOp::Scalar(_) | InstOp::Reduced(_) => true,
            _ if inst.dtype == DType::Bool => false,
            InstOp::Unary(_, a) => k(a),
            InstOp::Binary(_, a, b) => k(a) && k(b),
            InstOp::Cast(a) => insts[a as usize].dtype != DType::Bool && k(a),
            _ => false,
        };
    }
    known
}

/// The four f64 scalars of each live [`InstOp::Rand`]'s draw, loaded once per call.
pub(crate) fn load_draws(
    cx: &mut FnEmitter,
    insts: &[Inst],
    live: &[bool],
    scalars_p: Value,
) -> Vec<Option<[Value; 4]>> {
    let tf = MemFlagsData::trusted();
    let mut draws = vec![None; insts.len()];
    for (n, inst) in insts.iter().enumerate() {
        if let (InstOp::Rand { params, .. }, true) = (inst.op, live[n]) {
            draws[n] =
                Some([0, 1, 2, 3].map(|w| cx.b.ins().load(types::F64, tf, scalars_p, (8 * (params + w)) as i32)));
        }
    }
    draws
}

/// Broadcast inputs: one load per row (at `in_ptr`), and its splat with `vty`.
pub(crate) fn load_bcast(
    cx: &mut FnEmitter,
    inputs: &[KernelInput],
    insts: &[Inst],
    in_ptr: &[Value],
    vty: Option<Type>,
) -> Result<PerValue, String> {
    let mut bcast = vec![None; inputs.len()];
    let mut bcast_v = vec![None; inputs.len()];
    for inst in insts {
        if let InstOp::Load(i) = inst.op {
            let i = i as usize;
            if inputs[i].inner == InnerStride::Broadcast && bcast[i].is_none() {
                let s = cx.load_value(inst.dtype, in_ptr[i], data_flags())?;
                bcast[i] = Some(s);
                if let Some(vt) = vty {
                    bcast_v[i] =
                        Some(if inst.dtype == DType::Bool { cx.splat_mask(s, vt) } else { cx.b.ins().splat(vt, s) });
                }
            }
        }
    }
    Ok((bcast, bcast_v))
}
