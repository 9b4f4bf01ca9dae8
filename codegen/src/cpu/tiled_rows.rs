//! The tiled row of an f32 pass whose transcendentals or random draws run natively: the row is
//! walked in tiles of [`TILE`] elements, and each transcendental stage of a tile is one call of
//! a rustc-built, CPU-specialized slice routine (`kiln_vm_*_f32`: AVX-512F or AVX2+FMA inside,
//! picked once when the JIT resolves the symbol; `kiln_runtime::cpu::simd::slice_math`) on a stack
//! buffer, instead of the inline 128-bit polynomial of [`super::math`] (Cranelift's x86-64
//! back end emits 128-bit vectors only); each random stage (an f32 [`InstOp::Rand`]) is one call
//! that writes the tile's elements of the draw into its buffer (`kiln_rand_*_f32_slice`, the
//! runtime's `philox::uniform_from`/`normal_from`: one Philox block per four elements, instead
//! of one per element). A pass is an elementwise kernel's row, a reduction
//! stage's sweep of one output's row (the final pass folds into the accumulators, softmax's
//! `Σ exp(x - max)`), or an epilogue's sweep (softmax's `exp(x - max) / Σ`), all described by
//! a [`TileBody`].
//!
//! A pass qualifies ([`tiling`]) when it runs the F32X4 plan and some live f32 instruction that
//! varies along the row (not one computed once per output, see
//! [`super::emit::per_output_known`]) is a unary op with a slice routine (exp, tanh, sigmoid) or
//! a random draw, at most [`MAX_STAGES`] of them. Each such instruction is a *stage*, in
//! instruction order. A bf16 op is never a stage, and an elementwise kernel holding f16 or bf16
//! values is not tiled at all (`elementwise.rs`: it stays bit for bit eager's). Per tile:
//!
//! 1. for each stage: a pass (one run of [`super::run_loops`]'s loop over the tile) computes the
//!    stage's operand into the stage's buffer, reading the buffers of earlier stages where
//!    their values are needed; then the routine transforms the buffer in place. An operand
//!    that is an earlier stage's value or a unit-stride input needs no pass: the routine reads
//!    that buffer or the input's tile directly. A draw has no operand: its routine is given the
//!    draw's four run-time scalars and the linear index of the tile's element 0 (the row's,
//!    `index_base + row·inner`, plus the tile's start), and fills the buffer;
//! 2. a final pass computes the roots (stored, or folded by the caller), reading every stage's
//!    value from its buffer.
//!
//! Everything else is recomputed in each pass that needs it (cheap next to the memory
//! traffic); a pass where a costly op (an inline transcendental, a helper call) would be
//! computed by two passes keeps the untiled path.
//!
//! With AVX2+FMA or AVX-512F the transcendental routines compute `slice_math`'s FMA forms, whose
//! error bounds are those of the inline functions (exp 2 ulp, tanh 3, sigmoid 3) but which are
//! not bit-identical to the eager ops; elsewhere they are the eager forms, bit for bit. Special
//! values (NaN, ±inf, ±0) are the eager ones either way. The draws are the eager ones, bit for
//! bit, always.

use super::emit::{data_flags, emit_values_given, live_cut, per_output_known, PerValue, Row};
use super::jit_symbols;
use super::kept_tile_values::ROW_CACHE;
use super::ops::{is_half, FnEmitter};
use super::run_loops::{emit_runs, Pass, Space};
use crate::kernel::{InnerStride, Inst, InstOp, KernelInput, ReduceKernel, Val};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, BlockArg, InstBuilder, StackSlot, StackSlotData, StackSlotKind, Type, Value};
use kiln_runtime::DType;

/// Elements per tile: the stage buffers (2 KiB each) and the tile's inputs and outputs stay in
/// L1 between the passes. (On the GELU bench, 256–512 measured best; 1024 about 10% slower,
/// 4096 25% slower.)
pub const TILE: usize = 512;

/// The most stages a tiled kernel has (one 2 KiB stack buffer each, 16 KiB in all, within
/// L1); more keep the untiled path. An LSTM step's gate kernel has five (three sigmoids and
/// two tanh), its backward as many.
pub const MAX_STAGES: usize = 8;

/// Vectors per iteration of a pass's vector loop (4 measured a little better than 1 or 2).
pub(crate) const UNROLL: usize = 4;

// Only the last tile of a row has a scalar tail.
const _: () = assert!(TILE.is_multiple_of(4 * UNROLL));

/// Where a stage's routine reads its operand.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Source {
    /// No operand: the stage is an f32 [`InstOp::Rand`], whose routine writes the tile's elements of
    /// the draw into the stage's buffer.
    Draw,
    /// The stage's own buffer, filled by a pass over the tile.
    Pass,
    /// The buffer of an earlier stage (the operand is that stage's value).
    Stage(usize),
    /// A unit-stride input's elements of the tile (the operand is its load).
    Input(usize),
}

/// One stage: a transcendental or a random draw.
#[derive(Clone, Debug)]
struct Stage {
    /// The instruction whose value the stage computes.
    inst: usize,
    /// The routine's symbol (`jit_symbols::slice_name` or `rand_slice_name`).
    routine: &'static str,
    /// Where the routine reads.
    source: Source,
    /// The live instructions of the stage's pass (with earlier stages given).
    live: Vec<bool>,
}

/// How a kernel is tiled: its stages in order and the final pass.
#[derive(Clone, Debug)]
pub(crate) struct Tiling {
    stages: Vec<Stage>,
    /// The live instructions of the final pass (every stage given).
    last: Vec<bool>,
}

impl Tiling {
    /// Each stage's instruction (the value its routine computes) and routine, in stage order.
    pub(crate) fn stage_values(&self) -> impl Iterator<Item = (usize, &'static str)> + '_ {
        self.stages.iter().map(|s| (s.inst, s.routine))
    }
}

/// A stage of a tiled pass whose values the row keeps in a buffer of
/// [`super::kept_tile_values::ROW_CACHE`] f32 (see [`super::kept_tile_values`]), while the row fits.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowKeep {
    /// The stage (an index into the pass's [`Tiling`] stages).
    pub stage: usize,
    /// The row buffer.
    pub slot: StackSlot,
    /// True: an earlier pass of the row filled the buffer, so this pass reads it and skips the
    /// stage's work; false: this pass's routine writes its output there.
    pub reuse: bool,
}

/// What a tiled pass computes: instructions over the kernel's inputs, and the values each
/// element ends with (`roots`: the stored outputs, or a stage's reduced value).
pub(crate) struct TileBody<'a> {
    /// The kernel's inputs.
    pub inputs: &'a [KernelInput],
    /// The pass's instructions.
    pub insts: &'a [Inst],
    /// The values the final pass hands to the caller's `finish`.
    pub roots: &'a [Val],
}

/// The tiling of a pass of reduction kernel `k` (a stage's sweep or the epilogue's) over
/// `body`: tiles apply with one reduced dim (the output's row is one run), and the values
/// computed once per output ([`per_output_known`]) are never stages.
pub(crate) fn reduction_tiling(k: &ReduceKernel, body: &TileBody, live: &[bool], vty: Option<Type>) -> Option<Tiling> {
    if k.reduce_rank != 1 {
        return None;
    }
    tiling(body, live, vty, &per_output_known(body.insts))
}

/// The tiling of `body` (with live instructions `live`, on the vector type `vty`; `known[n]`
/// when instruction `n` is computed once per output, before the loops), or `None` when the
/// pass keeps the untiled path (see the module documentation). A body holding f16 or bf16
/// values (inputs or live instructions) is never tiled: the tile routines are f32's, and half
/// kernels equal eager ones bit for bit only with the eager routines, per element.
pub(crate) fn tiling(body: &TileBody, live: &[bool], vty: Option<Type>, known: &[bool]) -> Option<Tiling> {
    let holds_half = body.inputs.iter().any(|i| is_half(i.dtype))
        || body.insts.iter().zip(live).any(|(i, &l)| l && is_half(i.dtype));
    if vty != Some(types::F32X4) || holds_half {
        return None;
    }
    let insts = body.insts;
    // Per stage: its instruction, its operand (none for a draw) and its routine.
    let mut staged: Vec<(usize, Option<u32>, &'static str)> = Vec::new();
    for (n, inst) in insts.iter().enumerate() {
        if !live[n] || known[n] || inst.dtype != DType::F32 {
            continue;
        }
        match inst.op {
            InstOp::Unary(op, a) => {
                if let Some(routine) = jit_symbols::slice_name(op) {
                    staged.push((n, Some(a), routine));
                }
            }
            InstOp::Rand { dist, .. } => staged.push((n, None, jit_symbols::rand_slice_name(dist))),
            _ => {}
        }
    }
    if staged.is_empty() || staged.len() > MAX_STAGES {
        return None;
    }
    let is_stage = |n: usize| staged.iter().any(|s| s.0 == n);
    let mut stages = Vec::with_capacity(staged.len());
    for &(inst, a, routine) in &staged {
        let source = match a.map(|a| (a as usize, insts[a as usize].op)) {
            None => Source::Draw,
            Some((a, _)) if is_stage(a) => Source::Stage(staged.iter().position(|s| s.0 == a).expect("a stage")),
            Some((_, InstOp::Load(i))) if body.inputs[i as usize].inner == InnerStride::Unit => {
                Source::Input(i as usize)
            }
            Some(_) => Source::Pass,
        };
        let live = match (source, a) {
            (Source::Pass, Some(a)) => live_cut(insts, &[a], is_stage),
            _ => vec![false; insts.len()],
        };
        stages.push(Stage { inst, routine, source, live });
    }
    let last = live_cut(insts, body.roots, is_stage);
    // A costly value computed by two passes would cost more than the tiles save.
    for n in 0..insts.len() {
        let passes = stages.iter().map(|s| &s.live).chain([&last]).filter(|l| l[n]).count();
        if passes > 1 && !is_stage(n) && !known[n] && insts[n].op.is_costly() {
            return None;
        }
    }
    Some(Tiling { stages, last })
}

/// Emits, from the current block, the tiles of one row of `body`'s pass (tiled as `t`) whose
/// inputs' and outputs' element 0 are at `in_ptr` and `out_ptr` (`out_sizes`: bytes per
/// element of each output), and leaves the builder in a new block after them. `sp` is the row's
/// space (every dim but the last kept). `pre(cx, live)` gives the values a pass with live
/// instructions `live` computes before its loop (constants, scalars, per-output values),
/// emitting them in the current block or handing back values the row computed once;
/// `around(cx, true)` and `around(cx, false)` run just before and just after each tile's
/// final pass (a reduction stage loads and stores its accumulators there); `finish(cx, row, j, vty, u, vals)` does the final pass's work at inner index `j`
/// (stores at `row.out_ptr`, or a fold) given every live value `vals`; its vector loop unrolls
/// `unroll` vectors. `keep` names a stage whose values go to, or come from, a row buffer.
/// `draws` holds per instruction the four f64 scalars of an [`InstOp::Rand`]'s draw and
/// `index0` the linear index of the row's element 0 (for passes with draw stages; reductions,
/// which refuse Rand, pass `&[]` and `None`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn emit_row<'a, 'b>(
    cx: &mut FnEmitter<'a, 'b>,
    body: &TileBody,
    t: &Tiling,
    sp: &Space,
    in_ptr: &[Value],
    out_ptr: &[Value],
    out_sizes: &[i64],
    unroll: usize,
    keep: Option<RowKeep>,
    draws: &[Option<[Value; 4]>],
    index0: Option<Value>,
    mut pre: impl FnMut(&mut FnEmitter<'a, 'b>, &[bool]) -> Result<PerValue, String>,
    mut around: impl FnMut(&mut FnEmitter<'a, 'b>, bool),
    mut finish: impl FnMut(&mut FnEmitter<'a, 'b>, &Row, Value, Option<Type>, usize, &[Option<Value>]) -> Result<(), String>,
) -> Result<(), String> {
    debug_assert!(TILE.is_multiple_of(4 * unroll), "only the last tile of a row has a scalar tail");
    let (inputs, insts) = (body.inputs, body.insts);
    let ptr = sp.ptr;
    let vty = Some(types::F32X4);
    let f32_size = DType::F32.size_in_bytes() as i64;
    let slots: Vec<StackSlot> = t
        .stages
        .iter()
        .map(|_| {
            cx.b.create_sized_stack_slot(StackSlotData::new(
                StackSlotKind::ExplicitSlot,
                (TILE as i64 * f32_size) as u32,
                6,
            ))
        })
        .collect();

    // The tile loop carries j0 and the tile's element 0 of each unit input and output (loop
    // parameters, so Cranelift cannot re-derive them from the row index inside the passes'
    // loops); broadcast inputs stay at the row's element (the vector plan has no strided
    // input).
    let unit: Vec<usize> = (0..inputs.len()).filter(|&i| inputs[i].inner == InnerStride::Unit).collect();
    debug_assert!(inputs.iter().all(|i| i.inner != InnerStride::Strided), "the vector plan has no strided input");
    let steps: Vec<i64> = unit
        .iter()
        .map(|&i| inputs[i].dtype.size_in_bytes() as i64)
        .chain(out_sizes.iter().copied())
        .map(|s| s * TILE as i64)
        .collect();
    let head = cx.b.create_block();
    let tile_body = cx.b.create_block();
    let done = cx.b.create_block();
    let j0 = cx.b.append_block_param(head, ptr);
    let carried: Vec<Value> = steps.iter().map(|_| cx.b.append_block_param(head, ptr)).collect();
    let zero = cx.b.ins().iconst(ptr, 0);
    let init: Vec<BlockArg> =
        [zero].iter().chain(unit.iter().map(|&i| &in_ptr[i])).chain(out_ptr).map(|&v| BlockArg::Value(v)).collect();
    cx.b.ins().jump(head, &init);
    cx.b.switch_to_block(head);
    let inner = sp.inner();
    let more = cx.b.ins().icmp(IntCC::UnsignedLessThan, j0, inner);
    cx.b.ins().brif(more, tile_body, &[], done, &[]);

    cx.b.switch_to_block(tile_body);
    let rest = cx.b.ins().isub(inner, j0);
    let tile = cx.b.ins().iconst(ptr, TILE as i64);
    let len = cx.b.ins().umin(rest, tile);
    let mut tin = in_ptr.to_vec();
    for (&i, &p) in unit.iter().zip(&carried) {
        tin[i] = p;
    }
    let tout = carried[unit.len()..].to_vec();
    let bufs: Vec<Value> = slots.iter().map(|&s| cx.b.ins().stack_addr(ptr, s, 0)).collect();
    // Where each stage's values are: its tile buffer, or the kept stage's part of the row
    // buffer while the row fits there.
    let mut addrs = bufs.clone();
    let fits = keep.map(|k| {
        let cap = cx.b.ins().iconst(ptr, ROW_CACHE as i64);
        let fits = cx.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, sp.inner(), cap);
        let row = cx.b.ins().stack_addr(ptr, k.slot, 0);
        let off = cx.b.ins().imul_imm_s(j0, f32_size);
        let at = cx.b.ins().iadd(row, off);
        addrs[k.stage] = cx.b.ins().select(fits, at, bufs[k.stage]);
        fits
    });
    // The tile as a space of its own: the inner size is the tile's length.
    let mut dims = sp.dims.to_vec();
    *dims.last_mut().expect("rank ≥ 1") = len;
    let one = cx.b.ins().iconst(ptr, 1);
    let tsp = Space { ptr, dims: &dims, strides: sp.strides, in_step: sp.in_step, o_rank: sp.o_rank, n_mid: one };

    // The value of each given stage at inner index `j` of the tile: a load from its buffer.
    let given = |cx: &mut FnEmitter, live: &[bool], j: Value, vt: Option<Type>| {
        let mut vals = vec![None; insts.len()];
        for (s, stage) in t.stages.iter().enumerate() {
            if live[stage.inst] {
                let off = cx.b.ins().imul_imm_s(j, f32_size);
                let addr = cx.b.ins().iadd(addrs[s], off);
                vals[stage.inst] = Some(cx.b.ins().load(vt.unwrap_or(types::F32), data_flags(), addr, 0));
            }
        }
        vals
    };

    for (s, stage) in t.stages.iter().enumerate() {
        // A reused stage's work runs only when the row did not fit the buffer.
        let reused = match (keep, fits) {
            (Some(k), Some(fits)) if k.stage == s && k.reuse => {
                let work = cx.b.create_block();
                let after = cx.b.create_block();
                cx.b.ins().brif(fits, after, &[], work, &[]);
                cx.b.switch_to_block(work);
                Some(after)
            }
            _ => None,
        };
        let src = match stage.source {
            Source::Draw => {
                let [a, b, c, d] = draws[stage.inst].expect("a draw's scalars are loaded before the loop");
                let index0 = index0.expect("a kernel that draws knows its rows' indices");
                let first = cx.b.ins().iadd(index0, j0);
                cx.call_void(stage.routine, &[a, b, c, d, first, addrs[s], len]);
                None
            }
            Source::Stage(e) => Some(addrs[e]),
            Source::Input(i) => Some(tin[i]),
            Source::Pass => {
                // Emitted per pass, so that few float values stay live across the routine's
                // call.
                let pre = pre(cx, &stage.live)?;
                let pass = Pass { inputs, insts, pre: &pre, vty, unroll: UNROLL, draws: &[], index0: None };
                let operand = match insts[stage.inst].op {
                    InstOp::Unary(_, a) => a as usize,
                    _ => unreachable!("a pass stage is a unary op"),
                };
                emit_runs(
                    cx,
                    &tsp,
                    &pass,
                    &tin,
                    |_, _| Vec::new(),
                    |cx, r, j, vt, _| {
                        let vals = given(cx, &stage.live, j, vt);
                        let vals = emit_values_given(cx, inputs, insts, &stage.live, r, j, vt, vals)?;
                        let off = cx.b.ins().imul_imm_s(j, f32_size);
                        let addr = cx.b.ins().iadd(bufs[s], off);
                        cx.b.ins().store(data_flags(), vals[operand].expect("the operand is live"), addr, 0);
                        Ok(())
                    },
                )?;
                Some(bufs[s])
            }
        };
        if let Some(src) = src {
            cx.call_void(stage.routine, &[src, addrs[s], len]);
        }
        if let Some(after) = reused {
            cx.b.ins().jump(after, &[]);
            cx.b.switch_to_block(after);
        }
    }

    let pre = pre(cx, &t.last)?;
    let pass = Pass { inputs, insts, pre: &pre, vty, unroll, draws: &[], index0: None };
    around(cx, true);
    emit_runs(
        cx,
        &tsp,
        &pass,
        &tin,
        move |_, _| tout,
        |cx, r, j, vt, u| {
            let vals = given(cx, &t.last, j, vt);
            let vals = emit_values_given(cx, inputs, insts, &t.last, r, j, vt, vals)?;
            finish(cx, r, j, vt, u, &vals)
        },
    )?;
    around(cx, false);
    let mut next = vec![BlockArg::Value(cx.b.ins().iadd_imm_s(j0, TILE as i64))];
    for (&p, &step) in carried.iter().zip(&steps) {
        next.push(BlockArg::Value(cx.b.ins().iadd_imm_s(p, step)));
    }
    cx.b.ins().jump(head, &next);
    cx.b.switch_to_block(done);
    Ok(())
}
