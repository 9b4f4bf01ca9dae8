//! A [`ReduceKernel`]'s [`Epilogue`]: once an output's reduced value is stored, a second pass
//! over that output's reduced sub-space (the loops of [`super::runs`]) evaluates the epilogue's
//! instructions with [`super::emit::emit_element`], as an elementwise kernel over the same
//! inputs would, and stores its outputs contiguously at `(o·R + r)`.
//!
//! The pass chooses its own plan with the elementwise rules ([`super::emit::plan`] on the
//! epilogue seen as an elementwise kernel): [`InstOp::Reduced`] enters it like a run-time
//! scalar, through the per-instruction `pre` slots that [`super::emit::emit_values`] reads —
//! the row's converted value, splatted on the vector plan. Instructions of that value, scalars
//! and constants alone (log_softmax's `log Σ`, layer norm's `rsqrt(var + eps)`) are computed
//! once per output the same way, not at every element.

use super::emit::{emit_element, emit_pre, live_set, plan, PerValue, Plan};
use super::ops::{clif_type, Cx};
use super::runs::{emit_runs, Pass, Space};
use crate::kernel::{ElementwiseKernel, Epilogue, InstOp, ReduceKernel, Val};
use kiln_runtime::DType;
use cranelift_codegen::ir::{InstBuilder, Type, Value};

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
}

impl EpiloguePass {
    /// Checks the epilogue's types, picks its plan and emits its constants and scalars (in the
    /// entry block: `scalars_p` is the scalars pointer).
    pub(crate) fn new(cx: &mut Cx, k: &ReduceKernel, ep: &Epilogue, scalars_p: Value) -> Result<EpiloguePass, String> {
        let ek = ElementwiseKernel { rank: k.rank, inputs: k.inputs.clone(), scalars: k.scalars, insts: ep.insts.clone(), outputs: ep.outputs.clone() };
        let live = live_set(&ek);
        for (n, inst) in ek.insts.iter().enumerate() {
            if live[n] {
                clif_type(inst.dtype)?;
            }
        }
        let vty = match plan(&ek, &live) {
            Plan::Vector(t) => Some(t),
            Plan::Scalar => None,
        };
        let pre = emit_pre(cx, &ek.insts, &live, scalars_p, vty)?;
        Ok(EpiloguePass { ek, live, vty, pre })
    }

    /// Instruction `n` computed once for the output, when it is a non-Bool unary, binary or
    /// cast op whose operands are all known before the loops (`pre`: constants, scalars, the
    /// reduced value and values of those alone, like layer norm's `rsqrt(var + eps)`).
    fn hoisted(&self, cx: &mut Cx, pre: &[Option<Value>], n: usize) -> Result<Option<Value>, String> {
        let inst = self.ek.insts[n];
        if inst.dtype == DType::Bool {
            return Ok(None);
        }
        let known = |v: Val| pre[v as usize];
        Ok(match inst.op {
            InstOp::Unary(op, a) => match known(a) {
                Some(x) => Some(cx.unary(op, inst.dtype, x)?),
                None => None,
            },
            InstOp::Binary(op, a, b) => match (known(a), known(b)) {
                (Some(x), Some(y)) => Some(cx.binary(op, inst.dtype, x, y)?),
                _ => None,
            },
            InstOp::Cast(a) if self.ek.dtype(a) != DType::Bool => match known(a) {
                Some(x) => Some(cx.cast(x, self.ek.dtype(a), inst.dtype)?),
                None => None,
            },
            _ => None,
        })
    }

    /// Emits the pass for output `row` (in the current block, after its reduced value `red`,
    /// of the output dtype, is stored): `base` holds the inputs' addresses at the output's
    /// outer index, `out_base` the epilogue's output pointers. Leaves the builder in a new
    /// block after the loops.
    pub(crate) fn emit(&self, cx: &mut Cx, sp: &Space, base: &[Value], row: Value, red: Value, out_base: &[Value]) -> Result<(), String> {
        let mut pre = self.pre.clone();
        for (n, inst) in self.ek.insts.iter().enumerate() {
            if !self.live[n] {
                continue;
            }
            let value = if inst.op == InstOp::Reduced { Some(red) } else { self.hoisted(cx, &pre.0, n)? };
            if let Some(s) = value {
                pre.0[n] = Some(s);
                pre.1[n] = self.vty.map(|vt| cx.b.ins().splat(vt, s));
            }
        }
        // Run m of this output starts at element (row·n_mid + m)·inner of each output.
        let first_run = cx.b.ins().imul(row, sp.n_mid);
        let inner = sp.inner();
        let out_ptrs = |cx: &mut Cx, m: Value| -> Vec<Value> {
            let run = cx.b.ins().iadd(first_run, m);
            let elems = cx.b.ins().imul(run, inner);
            out_base
                .iter()
                .zip(&self.ek.outputs)
                .map(|(&p, &v)| {
                    let off = cx.b.ins().imul_imm_s(elems, self.ek.dtype(v).size_in_bytes() as i64);
                    cx.b.ins().iadd(p, off)
                })
                .collect()
        };
        let pass = Pass { inputs: &self.ek.inputs, insts: &self.ek.insts, pre: &pre, vty: self.vty, unroll: 1, draws: &[], index0: None };
        emit_runs(cx, sp, &pass, base, out_ptrs, |cx, r, j, vt, _| emit_element(cx, &self.ek, &self.live, r, j, vt))
    }
}
