//! A [`ReduceKernel`]'s [`Epilogue`]: once an output's stage values are stored, one more pass
//! over that output's reduced sub-space (the loops of [`super::run_loops`]) evaluates the epilogue's
//! instructions with [`super::emit::emit_element`], as an elementwise kernel over the same
//! inputs would, and stores its outputs contiguously at `(o·R + r)`.
//!
//! The pass chooses its own plan with the elementwise rules ([`super::emit::plan`] on the
//! epilogue seen as an elementwise kernel): each [`InstOp::Reduced`] enters it like a run-time
//! scalar, through the per-instruction `pre` slots that [`super::emit::emit_values`] reads —
//! the output's converted stage value, splatted on the vector plan. Instructions of those
//! values, scalars and constants alone (log_softmax's `log Σ`, layer norm's `rsqrt(var + eps)`)
//! are computed once per output the same way, not at every element
//! ([`super::emit::per_output_pre`], which later stages' prologues share).
//!
//! Layer norm's and the cross-entropy gradient's epilogues call a native routine per output
//! instead of the loops ([`super::native_epilogue`]).
//!
//! [`InstOp::Reduced`]: crate::kernel::InstOp::Reduced

use super::emit::{emit_element, emit_pre, live_set, per_output_pre, plan, store_outputs, PerValue, Plan};
use super::kept_tile_values::{self, ROW_CACHE};
use super::native_epilogue::{native_epilogue, KeptSource, NativeEpilogue};
use super::native_rows::per_output_arg;
use super::ops::{value_type, FnEmitter};
use super::run_loops::{emit_runs, Pass, Space};
use super::tiled_rows::{self, RowKeep, TileBody, Tiling};
use crate::kernel::{ElementwiseKernel, Epilogue, Inst, ReduceKernel, Val};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Type, Value};
use kiln_runtime::cpu::row_reduce::STREAM_BYTES;

/// The epilogue's code-generation state, set up in the entry block.
pub(crate) struct EpiloguePass {
    /// The epilogue seen as an elementwise kernel over the reduction's inputs and scalars.
    ek: ElementwiseKernel,
    /// Which of its instructions the outputs depend on.
    live: Vec<bool>,
    /// Its vector type (F32X4/F64X2), or `None` for the scalar plan.
    vty: Option<Type>,
    /// Its constants and run-time scalars, converted once (and splatted).
    pre: PerValue,
    /// How its rows are tiled, when its transcendentals run as slice routines
    /// ([`super::tiled_rows`]; softmax's `exp(x - max)`).
    tiling: Option<Tiling>,
    /// The native routine that sweeps each output's row, when one fits
    /// ([`super::native_epilogue`]; see [`EpiloguePass::native_for`]).
    native: Option<NativeEpilogue>,
    /// With a native routine: its `stream` argument, computed once per call from the sizes
    /// ([`streams_output`]).
    stream: Option<Value>,
}

impl EpiloguePass {
    /// Checks the epilogue's types, picks its plan and emits its constants and scalars (in the
    /// entry block: `scalars_p` is the scalars pointer, `sp` the kernel's space).
    /// Log-softmax's `exp(x - max - log Σ)` is first rewritten to share the Σ stage's exp
    /// ([`kept_tile_values::share_exps`]).
    pub(crate) fn new(
        cx: &mut FnEmitter,
        k: &ReduceKernel,
        ep: &Epilogue,
        scalars_p: Value,
        sp: &Space,
    ) -> Result<EpiloguePass, String> {
        let (insts, at) = kept_tile_values::share_exps(&ep.insts, &k.stages);
        let ek = ElementwiseKernel {
            rank: k.rank,
            inputs: k.inputs.clone(),
            scalars: k.scalars,
            insts,
            outputs: ep.outputs.iter().map(|&v| at[v as usize]).collect(),
        };
        let live = live_set(&ek);
        for (n, inst) in ek.insts.iter().enumerate() {
            if live[n] {
                value_type(inst.dtype)?;
            }
        }
        let vty = match plan(&ek, &live) {
            Plan::Vector(t) => Some(t),
            Plan::Scalar => None,
        };
        let pre = emit_pre(cx, &ek.insts, &live, scalars_p, vty)?;
        let tiling = tiled_rows::reduction_tiling(k, &Self::body(&ek), &live, vty);
        let native = native_epilogue(&ek.inputs, k.reduce_rank, &ek.insts, &ek.outputs);
        let stream = native.map(|_| streams_output(cx, sp));
        Ok(EpiloguePass { ek, live, vty, pre, tiling, native, stream })
    }

    /// What the epilogue's sweep computes, as a tiled pass sees it.
    fn body(ek: &ElementwiseKernel) -> TileBody<'_> {
        TileBody { inputs: &ek.inputs, insts: &ek.insts, roots: &ek.outputs }
    }

    /// True when its rows are tiled.
    pub(crate) fn is_tiled(&self) -> bool {
        self.tiling.is_some()
    }

    /// How its rows are tiled, if they are.
    pub(crate) fn tiling(&self) -> Option<&Tiling> {
        self.tiling.as_ref()
    }

    /// Its instructions (after [`kept_tile_values::share_exps`]).
    pub(crate) fn insts(&self) -> &[Inst] {
        &self.ek.insts
    }

    /// Emits the pass for output `row` (in the current block, after every stage's value is
    /// stored; `reduced[s]` is stage `s`'s value, of its output dtype): `base` holds the inputs'
    /// addresses at the output's outer index, `out_base` the epilogue's output pointers;
    /// `keep` a tiled stage whose values a reduction stage left in the row buffer. Leaves the
    /// builder in a new block after the loops (or the native routine's call).
    pub(crate) fn emit(
        &self,
        cx: &mut FnEmitter,
        sp: &Space,
        base: &[Value],
        row: Value,
        reduced: &[Value],
        out_base: &[Value],
        keep: Option<RowKeep>,
    ) -> Result<(), String> {
        // Run m of this output starts at element (row·n_mid + m)·inner of each output.
        let first_run = cx.b.ins().imul(row, sp.n_mid);
        // The per-output values, once per output (every pass of every tile reads them).
        let pre = per_output_pre(cx, &self.ek.insts, &self.live, &self.pre, self.vty, reduced)?;
        let Some(native) = self.native_for(keep) else {
            return self.emit_loops(cx, sp, base, first_run, out_base, &pre, keep);
        };
        let zero = cx.b.ins().iconst(sp.ptr, 0);
        let dst = self.out_ptrs(cx, sp, first_run, out_base, zero)[0];
        let arg = |cx: &mut FnEmitter, v: Val| per_output_arg(cx, &self.ek.inputs, &self.ek.insts, &pre, base, v);
        let n = sp.inner();
        let stream = self.stream.expect("a native epilogue's stream flag is set up with it (`new`)");
        match native {
            NativeEpilogue::NormAffine { x, m, r, w, b } => {
                let (m, r) = (arg(cx, m), arg(cx, r));
                let null = cx.b.ins().iconst(sp.ptr, 0);
                let (w, b) = (w.map_or(null, |i| base[i]), b.map_or(null, |i| base[i]));
                cx.call_void(native.helper(), &[base[x], m, r, w, b, dst, n, stream]);
            }
            NativeEpilogue::OneHotSub { iota, t, a, z, k, e, s } => {
                let args = [t, a, z, e, s].map(|v| arg(cx, v));
                let call = |cx: &mut FnEmitter, k: Value| {
                    cx.call_void(
                        native.helper(),
                        &[base[iota], args[0], args[1], args[2], k, args[3], args[4], dst, n, stream],
                    )
                };
                match k {
                    KeptSource::Input(i) => call(cx, base[i]),
                    KeptSource::Kept(_) => {
                        // The routine for rows the buffer holds, the loops for longer ones.
                        let keep = keep.expect("a kept k comes with the row buffer (see `native_for`)");
                        let (native_block, loops, done) =
                            (cx.b.create_block(), cx.b.create_block(), cx.b.create_block());
                        let fits = cx.b.ins().icmp_imm_u(IntCC::UnsignedLessThanOrEqual, n, ROW_CACHE as i64);
                        cx.b.ins().brif(fits, native_block, &[], loops, &[]);
                        cx.b.switch_to_block(native_block);
                        let kept = cx.b.ins().stack_addr(sp.ptr, keep.slot, 0);
                        call(cx, kept);
                        cx.b.ins().jump(done, &[]);
                        cx.b.switch_to_block(loops);
                        self.emit_loops(cx, sp, base, first_run, out_base, &pre, Some(keep))?;
                        cx.b.ins().jump(done, &[]);
                        cx.b.switch_to_block(done);
                    }
                }
            }
        }
        Ok(())
    }

    /// The routine this pass calls for an output, when it has one: [`native_epilogue`]'s, if
    /// the row buffer `keep` holds the `k` it reads from there.
    pub(crate) fn native_for(&self, keep: Option<RowKeep>) -> Option<NativeEpilogue> {
        self.native.filter(|n| match *n {
            NativeEpilogue::OneHotSub { k: KeptSource::Kept(v), .. } => {
                let kept = keep.and_then(|kp| self.tiling.as_ref()?.stage_values().nth(kp.stage));
                kept.is_some_and(|(inst, _)| inst == v as usize)
            }
            _ => true,
        })
    }

    /// The epilogue's output pointers for run `m` of the output whose first run is `first_run`.
    fn out_ptrs(&self, cx: &mut FnEmitter, sp: &Space, first_run: Value, out_base: &[Value], m: Value) -> Vec<Value> {
        let run = cx.b.ins().iadd(first_run, m);
        let elems = cx.b.ins().imul(run, sp.inner());
        out_base
            .iter()
            .zip(&self.ek.outputs)
            .map(|(&p, &v)| {
                let off = cx.b.ins().imul_imm_s(elems, self.ek.dtype(v).size_in_bytes() as i64);
                cx.b.ins().iadd(p, off)
            })
            .collect()
    }

    /// The loops of the pass (tiled or not) for the output whose first run is `first_run`,
    /// with its per-output values `pre`.
    #[allow(clippy::too_many_arguments)]
    fn emit_loops(
        &self,
        cx: &mut FnEmitter,
        sp: &Space,
        base: &[Value],
        first_run: Value,
        out_base: &[Value],
        pre: &PerValue,
        keep: Option<RowKeep>,
    ) -> Result<(), String> {
        if let Some(t) = &self.tiling {
            // One reduced dim: the output's row is one run.
            let zero = cx.b.ins().iconst(sp.ptr, 0);
            let out_ptr = self.out_ptrs(cx, sp, first_run, out_base, zero);
            let sizes: Vec<i64> = self.ek.outputs.iter().map(|&o| self.ek.dtype(o).size_in_bytes() as i64).collect();
            return tiled_rows::emit_row(
                cx,
                &Self::body(&self.ek),
                t,
                sp,
                base,
                &out_ptr,
                &sizes,
                tiled_rows::UNROLL,
                keep,
                &[],
                None,
                |_, _| Ok(pre.clone()),
                |_, _| {},
                |cx, r, j, _, _, vals| {
                    store_outputs(cx, &self.ek, r, j, vals);
                    Ok(())
                },
            );
        }
        let pass = Pass {
            inputs: &self.ek.inputs,
            insts: &self.ek.insts,
            pre,
            vty: self.vty,
            unroll: 1,
            draws: &[],
            index0: None,
        };
        emit_runs(
            cx,
            sp,
            &pass,
            base,
            |cx, m| self.out_ptrs(cx, sp, first_run, out_base, m),
            |cx, r, j, vt, _| emit_element(cx, &self.ek, &self.live, r, j, vt),
        )
    }
}

/// 1 when the epilogue's f32 output (the whole space `sp`) has at least [`STREAM_BYTES`] bytes,
/// else 0 (a value of the call, emitted in the entry block: sizes are kernel arguments).
fn streams_output(cx: &mut FnEmitter, sp: &Space) -> Value {
    let mut elems = cx.b.ins().iconst(sp.ptr, 1);
    for &d in sp.dims {
        elems = cx.b.ins().imul(elems, d);
    }
    let big = cx.b.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, elems, (STREAM_BYTES / 4) as i64);
    cx.b.ins().uextend(sp.ptr, big)
}
