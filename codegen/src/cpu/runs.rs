//! The loop skeleton over one output's reduced sub-space, shared by a [`ReduceKernel`]'s
//! reduction and its epilogue (and by elementwise rows, a sub-space of one run): the middle
//! reduced dims (all reduced dims but the last) are walked by one counter `m` decomposed into
//! a multi-index; each run along the last dim is an F32X4/F64X2 loop of `unroll` vectors per
//! iteration (when the pass has a vector type) and a scalar tail. What is done at each
//! position is the caller's closure.
//!
//! [`ReduceKernel`]: crate::kernel::ReduceKernel

use super::emit::{load_bcast, PerValue, Row};
use super::ops::Cx;
use crate::kernel::{Inst, KernelInput};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{Block, BlockArg, InstBuilder, Type, Value};

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
    pub fn new(cx: &mut Cx, ptr: Type, dims: &'a [Value], strides: &'a [Vec<Value>], in_step: &'a [Option<Value>], o_rank: usize) -> Space<'a> {
        let mut n_mid = cx.b.ins().iconst(ptr, 1);
        for &d in &dims[o_rank..dims.len() - 1] {
            n_mid = cx.b.ins().imul(n_mid, d);
        }
        Space { ptr, dims, strides, in_step, o_rank, n_mid }
    }

    /// Per input, the address of its element at the outer index `row` (decomposed over the
    /// kept dims, row-major) with the reduced indices 0: `base` plus the offsets.
    pub fn outer_ptrs(&self, cx: &mut Cx, base: &[Value], row: Value) -> Vec<Value> {
        self.offset_ptrs(cx, base, row, 0..self.o_rank)
    }

    /// `base` plus, per input, the offset of `counter` decomposed (row-major) over `dims`.
    fn offset_ptrs(&self, cx: &mut Cx, base: &[Value], counter: Value, dims: std::ops::Range<usize>) -> Vec<Value> {
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
    cx: &mut Cx<'a, 'b>,
    sp: &Space,
    pass: &Pass,
    base: &[Value],
    out_ptrs: impl FnOnce(&mut Cx<'a, 'b>, Value) -> Vec<Value>,
    mut body: impl FnMut(&mut Cx<'a, 'b>, &Row, Value, Option<Type>, usize) -> Result<(), String>,
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
/// `next`.
fn emit_run<'a, 'b>(
    cx: &mut Cx<'a, 'b>,
    sp: &Space,
    pass: &Pass,
    in_ptr: &[Value],
    out_ptr: &[Value],
    body: &mut impl FnMut(&mut Cx<'a, 'b>, &Row, Value, Option<Type>, usize) -> Result<(), String>,
    next: Block,
) -> Result<(), String> {
    let ptr = sp.ptr;
    let t_head = cx.b.create_block();
    let t_body = cx.b.create_block();
    let tj = cx.b.append_block_param(t_head, ptr);
    let (bcast, bcast_v) = load_bcast(cx, pass.inputs, pass.insts, in_ptr, pass.vty)?;
    let inner = sp.inner();
    let zero = cx.b.ins().iconst(ptr, 0);
    if let Some(vt) = pass.vty {
        let lanes = vt.lane_count() as i64;
        let v_head = cx.b.create_block();
        let v_body = cx.b.create_block();
        let vj = cx.b.append_block_param(v_head, ptr);
        let step_len = lanes * pass.unroll as i64;
        debug_assert!(step_len.count_ones() == 1, "lanes × unroll must be a power of two");
        let n_vec = cx.b.ins().band_imm_s(inner, !(step_len - 1));
        cx.b.ins().jump(v_head, &[BlockArg::Value(zero)]);
        cx.b.switch_to_block(v_head);
        let more = cx.b.ins().icmp(IntCC::UnsignedLessThan, vj, n_vec);
        cx.b.ins().brif(more, v_body, &[], t_head, &[BlockArg::Value(vj)]);
        cx.b.switch_to_block(v_body);
        let rv = Row { in_ptr, in_step: sp.in_step, bcast: &bcast_v, pre: &pass.pre.1, out_ptr, draws: pass.draws, index0: pass.index0 };
        for u in 0..pass.unroll {
            let ju = cx.b.ins().iadd_imm_s(vj, lanes * u as i64);
            body(cx, &rv, ju, Some(vt), u)?;
        }
        let next_v = cx.b.ins().iadd_imm_s(vj, step_len);
        cx.b.ins().jump(v_head, &[BlockArg::Value(next_v)]);
    } else {
        cx.b.ins().jump(t_head, &[BlockArg::Value(zero)]);
    }

    cx.b.switch_to_block(t_head);
    let more = cx.b.ins().icmp(IntCC::UnsignedLessThan, tj, inner);
    cx.b.ins().brif(more, t_body, &[], next, &[]);
    cx.b.switch_to_block(t_body);
    let rs = Row { in_ptr, in_step: sp.in_step, bcast: &bcast, pre: &pass.pre.0, out_ptr, draws: pass.draws, index0: pass.index0 };
    body(cx, &rs, tj, None, 0)?;
    let next_t = cx.b.ins().iadd_imm_s(tj, 1);
    cx.b.ins().jump(t_head, &[BlockArg::Value(next_t)]);
    Ok(())
}
