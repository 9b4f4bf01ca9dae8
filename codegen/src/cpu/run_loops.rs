//! The loop skeleton over one output's reduced sub-space, shared by a [`ReduceKernel`]'s
//! reduction and its epilogue (and by elementwise rows, a sub-space of one run): the middle
//! reduced dims (all reduced dims but the last) are walked by one counter `m` decomposed into
//! a multi-index; each run along the last dim is an F32X4/F64X2 loop of `unroll` vectors per
//! iteration (when the pass has a vector type) and a scalar tail. What is done at each
//! position is the caller's closure. An elementwise kernel's bf16 values ride the F32X4 loop
//! (four elements per vector, two bytes each in memory) and the tail's elements are the scalar
//! forms of the same loads, roundings and stores, so a row's results do not depend on which
//! of its elements fall in the tail.
//!
//! [`ReduceKernel`]: crate::kernel::ReduceKernel

use super::emit::{load_bcast, PerValue, Row};
use super::ops::FnEmitter;
use crate::kernel::{Inst, KernelInput};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{Block, BlockArg, InstBuilder, Opcode, Type, Value, ValueDef};

/// The run-time sizes and strides the loops walk (read in the entry block).
pub(crate) struct Space<'a> {
    /// The pointer type.
    pub ptr: Type,
    /// The `rank` sizes.
    pub dims: &'a [Value],
    /// Per input, its `rank` strides in bytes.
    pub strides: &'a [Vec<Value>],
    /// Per input, the inner stride in bytes (Strided inputs only).
    pub in_step: &'a [Option<Value>],
    /// The number of kept (output) dims: the reduced ones are `o_rank..rank`.
    pub o_rank: usize,
    /// The product of the middle reduced dims (`o_rank..rank - 1`): the number of runs.
    pub n_mid: Value,
}

impl<'a> Space<'a> {
    /// The space of `dims` with the first `o_rank` dims kept; emits `n_mid`, so it is called
    /// in the entry block.
    pub fn new(
        cx: &mut FnEmitter,
        ptr: Type,
        dims: &'a [Value],
        strides: &'a [Vec<Value>],
        in_step: &'a [Option<Value>],
        o_rank: usize,
    ) -> Space<'a> {
        let mut n_mid = cx.b.ins().iconst(ptr, 1);
        for &d in &dims[o_rank..dims.len() - 1] {
            n_mid = cx.b.ins().imul(n_mid, d);
        }
        Space { ptr, dims, strides, in_step, o_rank, n_mid }
    }

    /// Per input, the address of its element at the outer index `row` (decomposed over the
    /// kept dims, row-major) with the reduced indices 0: `base` plus the offsets.
    pub fn outer_ptrs(&self, cx: &mut FnEmitter, base: &[Value], row: Value) -> Vec<Value> {
        self.offset_ptrs(cx, base, row, 0..self.o_rank)
    }

    /// `base` plus, per input, the offset of `counter` decomposed (row-major) over `dims`.
    fn offset_ptrs(
        &self,
        cx: &mut FnEmitter,
        base: &[Value],
        counter: Value,
        dims: std::ops::Range<usize>,
    ) -> Vec<Value> {
        let mut ptrs = base.to_vec();
        let mut rem = counter;
        for d in dims.clone().rev() {
            let idx = cx.b.ins().urem(rem, self.dims[d]);
            if d > dims.start {
                rem = cx.b.ins().udiv(rem, self.dims[d]);
            }
            for (i, p) in ptrs.iter_mut().enumerate() {
                let off = cx.b.ins().imul(idx, self.strides[i][d]);
                *p = cx.b.ins().iadd(*p, off);
            }
        }
        ptrs
    }

    /// The size of the last dim (the length of each run).
    pub fn inner(&self) -> Value {
        self.dims[self.dims.len() - 1]
    }
}

/// What one pass over the sub-space evaluates.
pub(crate) struct Pass<'a> {
    /// The kernel's inputs.
    pub inputs: &'a [KernelInput],
    /// The pass's instructions (their broadcast loads are done once per run).
    pub insts: &'a [Inst],
    /// Per instruction, its value computed before the loops, and its splat.
    pub pre: &'a PerValue,
    /// The vector type of the vector loop; `None` for the scalar loop only.
    pub vty: Option<Type>,
    /// Vectors per iteration of the vector loop.
    pub unroll: usize,
    /// Per instruction, the four f64 scalars of an [`InstOp::Rand`]'s draw (empty when
    /// nothing draws, as in reductions).
    ///
    /// [`InstOp::Rand`]: crate::kernel::InstOp::Rand
    pub draws: &'a [Option<[Value; 4]>],
    /// The linear index of the run's element 0 (kernels that draw; one run per row).
    pub index0: Option<Value>,
}

/// Emits, from the current block, the loops of `pass` over the sub-space of the output whose
/// inputs start at `base`, and leaves the builder in a new block after them. Without middle
/// dims (`o_rank + 1 == rank`, as for elementwise rows) there is one run and no middle loop.
///
/// `out_ptrs(cx, m)` gives per output of the pass the address of its element 0 of run `m`
/// (empty for the reduction). `body(cx, row, j, vty, u)` emits the work at inner index `j`:
/// one vector of `vty` (the `u`-th of an unrolled iteration) or, with `vty` `None`, one
/// element of the tail (`u` = 0).
pub(crate) fn emit_runs<'a, 'b>(
    cx: &mut FnEmitter<'a, 'b>,
    sp: &Space,
    pass: &Pass,
    base: &[Value],
    out_ptrs: impl FnOnce(&mut FnEmitter<'a, 'b>, Value) -> Vec<Value>,
    mut body: impl FnMut(&mut FnEmitter<'a, 'b>, &Row, Value, Option<Type>, usize) -> Result<(), String>,
) -> Result<(), String> {
    let ptr = sp.ptr;
    let done = cx.b.create_block();
    if sp.o_rank + 1 == sp.dims.len() {
        let zero = cx.b.ins().iconst(ptr, 0);
        let out_ptr = out_ptrs(cx, zero);
        emit_run(cx, sp, pass, base, &out_ptr, &mut body, done)?;
    } else {
        let mid_head = cx.b.create_block();
        let mid_body = cx.b.create_block();
        let mid_next = cx.b.create_block();
        let m = cx.b.append_block_param(mid_head, ptr);
        let zero = cx.b.ins().iconst(ptr, 0);
        cx.b.ins().jump(mid_head, &[BlockArg::Value(zero)]);
        cx.b.switch_to_block(mid_head);
        let more = cx.b.ins().icmp(IntCC::UnsignedLessThan, m, sp.n_mid);
        cx.b.ins().brif(more, mid_body, &[], done, &[]);
        cx.b.switch_to_block(mid_body);
        // Run m's middle multi-index.
        let in_ptr = sp.offset_ptrs(cx, base, m, sp.o_rank..sp.dims.len() - 1);
        let out_ptr = out_ptrs(cx, m);
        emit_run(cx, sp, pass, &in_ptr, &out_ptr, &mut body, mid_next)?;
        cx.b.switch_to_block(mid_next);
        let next_m = cx.b.ins().iadd_imm_s(m, 1);
        cx.b.ins().jump(mid_head, &[BlockArg::Value(next_m)]);
    }
    cx.b.switch_to_block(done);
    Ok(())
}

/// One run along the last dim from the current block, the inputs' and outputs' element 0 at
/// `in_ptr` and `out_ptr`: the broadcast loads, the vector loop, the tail; then a jump to
/// `next`. Each loop receives the values it reads unchanged as parameters of its head block
/// ([`Carried`]).
fn emit_run<'a, 'b>(
    cx: &mut FnEmitter<'a, 'b>,
    sp: &Space,
    pass: &Pass,
    in_ptr: &[Value],
    out_ptr: &[Value],
    body: &mut impl FnMut(&mut FnEmitter<'a, 'b>, &Row, Value, Option<Type>, usize) -> Result<(), String>,
    next: Block,
) -> Result<(), String> {
    let ptr = sp.ptr;
    let t_head = cx.b.create_block();
    let t_body = cx.b.create_block();
    let tj = cx.b.append_block_param(t_head, ptr);
    let (bcast, bcast_v) = load_bcast(cx, pass.inputs, pass.insts, in_ptr, pass.vty)?;
    let inner = sp.inner();
    let zero = cx.b.ins().iconst(ptr, 0);
    let row =
        |bcast, pre| Row { in_ptr, in_step: sp.in_step, bcast, pre, out_ptr, draws: pass.draws, index0: pass.index0 };
    let t_row = row(&bcast, &pass.pre.0);
    let t_carried = Carried::new(cx, t_head, &t_row);
    if let Some(vt) = pass.vty {
        let lanes = vt.lane_count() as i64;
        let v_head = cx.b.create_block();
        let v_body = cx.b.create_block();
        let vj = cx.b.append_block_param(v_head, ptr);
        let v_carried = Carried::new(cx, v_head, &row(&bcast_v, &pass.pre.1));
        let step_len = lanes * pass.unroll as i64;
        debug_assert!(step_len.count_ones() == 1, "lanes × unroll must be a power of two");
        let n_vec = cx.b.ins().band_imm_s(inner, !(step_len - 1));
        cx.b.ins().jump(v_head, &v_carried.entry(zero));
        cx.b.switch_to_block(v_head);
        let more = cx.b.ins().icmp(IntCC::UnsignedLessThan, vj, n_vec);
        // The tail's parameters, from the vector loop's where it carries them.
        let to_tail: Vec<BlockArg> = std::iter::once(vj)
            .chain(t_carried.outside.iter().map(|v| v_carried.inside(*v)))
            .map(BlockArg::Value)
            .collect();
        cx.b.ins().brif(more, v_body, &[], t_head, &to_tail);
        cx.b.switch_to_block(v_body);
        let rv = v_carried.inside_row();
        let rv = rv.as_row();
        for u in 0..pass.unroll {
            let ju = cx.b.ins().iadd_imm_s(vj, lanes * u as i64);
            body(cx, &rv, ju, Some(vt), u)?;
        }
        let next_v = cx.b.ins().iadd_imm_s(vj, step_len);
        let back = v_carried.back(cx, next_v);
        cx.b.ins().jump(v_head, &back);
    } else {
        cx.b.ins().jump(t_head, &t_carried.entry(zero));
    }

    cx.b.switch_to_block(t_head);
    let more = cx.b.ins().icmp(IntCC::UnsignedLessThan, tj, inner);
    cx.b.ins().brif(more, t_body, &[], next, &[]);
    cx.b.switch_to_block(t_body);
    let rs = t_carried.inside_row();
    let rs = rs.as_row();
    body(cx, &rs, tj, None, 0)?;
    let next_t = cx.b.ins().iadd_imm_s(tj, 1);
    let back = t_carried.back(cx, next_t);
    cx.b.ins().jump(t_head, &back);
    Ok(())
}

/// The values a loop reads unchanged that were computed before it (a row's addresses, the
/// strides, broadcast and per-output values, run-time scalars and their splats), passed as
/// parameters of the loop's head block: Cranelift's optimizer places pure code at its uses
/// and was seen rebuilding each input's row address (a multiply and three adds) and the
/// splats of per-output values inside vector loops; a block parameter it cannot rebuild.
/// Constants are not carried (they rematerialize for nothing).
struct Carried {
    /// The row the loop reads, as given.
    row: RowValues,
    /// The carried values, as computed before the loop (distinct, in order).
    outside: Vec<Value>,
    /// The head block's parameter of each carried value.
    params: Vec<Value>,
    /// The head block's first parameter (the loop counter).
    counter: Value,
}

/// A [`Row`]'s values, owned (the fields are [`Row`]'s).
struct RowValues {
    in_ptr: Vec<Value>,
    out_ptr: Vec<Value>,
    in_step: Vec<Option<Value>>,
    bcast: Vec<Option<Value>>,
    pre: Vec<Option<Value>>,
    draws: Vec<Option<[Value; 4]>>,
    index0: Option<Value>,
}

impl RowValues {
    /// The values of `row`.
    fn of(row: &Row) -> RowValues {
        RowValues {
            in_ptr: row.in_ptr.to_vec(),
            out_ptr: row.out_ptr.to_vec(),
            in_step: row.in_step.to_vec(),
            bcast: row.bcast.to_vec(),
            pre: row.pre.to_vec(),
            draws: row.draws.to_vec(),
            index0: row.index0,
        }
    }

    /// The row, borrowed.
    fn as_row(&self) -> Row<'_> {
        Row {
            in_ptr: &self.in_ptr,
            in_step: &self.in_step,
            bcast: &self.bcast,
            pre: &self.pre,
            out_ptr: &self.out_ptr,
            draws: &self.draws,
            index0: self.index0,
        }
    }
}

impl Carried {
    /// Adds to `head` (whose first parameter is the loop counter) one parameter per
    /// non-constant value of `row`.
    fn new(cx: &mut FnEmitter, head: Block, row: &Row) -> Carried {
        let row = RowValues::of(row);
        let all = row
            .in_ptr
            .iter()
            .chain(&row.out_ptr)
            .copied()
            .chain(row.in_step.iter().flatten().copied())
            .chain(row.bcast.iter().flatten().copied());
        let all = all
            .chain(row.pre.iter().flatten().copied())
            .chain(row.draws.iter().flatten().flatten().copied())
            .chain(row.index0);
        let mut outside: Vec<Value> = Vec::new();
        for v in all {
            if !outside.contains(&v) && !is_constant(cx, v) {
                outside.push(v);
            }
        }
        let params = outside
            .iter()
            .map(|&v| {
                let ty = cx.ty(v);
                cx.b.append_block_param(head, ty)
            })
            .collect();
        let counter = cx.b.block_params(head)[0];
        Carried { row, outside, params, counter }
    }

    /// The head block's parameter for `v` (or `v` itself when it is not carried).
    fn inside(&self, v: Value) -> Value {
        self.outside.iter().position(|&o| o == v).map_or(v, |n| self.params[n])
    }

    /// The arguments of the jump into the loop: the counter's start, then the carried values.
    fn entry(&self, start: Value) -> Vec<BlockArg> {
        std::iter::once(start).chain(self.outside.iter().copied()).map(BlockArg::Value).collect()
    }

    /// The arguments of the loop's back edge: the next counter, then the parameters, each
    /// through an identity (`x + 0`, `x | x`): Cranelift removes a parameter whose every
    /// incoming value is the same before it optimizes, so a parameter passed back as itself
    /// would be gone; the identities fold away only after that.
    fn back(&self, cx: &mut FnEmitter, next: Value) -> Vec<BlockArg> {
        debug_assert!(next != self.counter);
        let same = self
            .params
            .iter()
            .map(|&p| if cx.ty(p).is_int() { cx.b.ins().iadd_imm_s(p, 0) } else { cx.b.ins().bor(p, p) })
            .collect::<Vec<_>>();
        std::iter::once(next).chain(same).map(BlockArg::Value).collect()
    }

    /// The row inside the loop: every carried value replaced by its parameter.
    fn inside_row(&self) -> RowValues {
        let r = &self.row;
        let map = |v: &Value| self.inside(*v);
        let map_opt = |v: &Option<Value>| v.map(|v| self.inside(v));
        RowValues {
            in_ptr: r.in_ptr.iter().map(map).collect(),
            out_ptr: r.out_ptr.iter().map(map).collect(),
            in_step: r.in_step.iter().map(map_opt).collect(),
            bcast: r.bcast.iter().map(map_opt).collect(),
            pre: r.pre.iter().map(map_opt).collect(),
            draws: r.draws.iter().map(|d| d.map(|d| d.map(|v| self.inside(v)))).collect(),
            index0: r.index0.map(|v| self.inside(v)),
        }
    }
}

/// True when `v` is a constant, or a splat of one.
fn is_constant(cx: &FnEmitter, v: Value) -> bool {
    let dfg = &cx.b.func.dfg;
    let ValueDef::Result(inst, _) = dfg.value_def(v) else { return false };
    match dfg.insts[inst].opcode() {
        Opcode::Iconst | Opcode::F32const | Opcode::F64const | Opcode::Vconst => true,
        Opcode::Splat => is_constant(cx, dfg.inst_args(inst)[0]),
        _ => false,
    }
}
