//! The function of an elementwise kernel: its liveness and vector plan, then the row loop over
//! `row_start..row_end` whose rows are one run of [`super::run_loops`] or, for f32 rows with
//! native transcendentals or random draws, tiles ([`super::tiled_rows`]); the values, loads and stores come from
//! [`super::emit`].
//!
//! A kernel holding f16 or bf16 values (inputs, live instructions) is never tiled: its rows are
//! one run (F32X4 vectors for bf16 and f32 values, see [`super::emit::plan`]; scalars with
//! f16), whose transcendentals are the eager routines called per element, so its results
//! equal eager ones bit for bit; the slice routines of tiles are f32 forms that are not.

use super::emit::{emit_element, emit_pre, live_set, load_draws, plan, store_outputs, Entry, Plan};
use super::ops::{value_type, FnEmitter};
use super::run_loops::{emit_runs, Pass, Space};
use super::tiled_rows::{self, TileBody};
use crate::kernel::ElementwiseKernel;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{BlockArg, Function, InstBuilder};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::JITModule;
use cranelift_module::Module;

/// Builds the body of `extern "C" fn(*const KernelArgs)` for `k` into `func` (whose
/// signature is already set): its plan, and whether its rows are tiled (only where `tile`
/// allows and [`tiled_rows::tiling`] applies).
pub(crate) fn build(
    k: &ElementwiseKernel,
    module: &mut JITModule,
    func: &mut Function,
    tile: bool,
) -> Result<(Plan, bool), String> {
    let live = live_set(k);
    for (n, inst) in k.insts.iter().enumerate() {
        if live[n] {
            value_type(inst.dtype)?;
        }
    }
    for i in &k.inputs {
        value_type(i.dtype)?;
    }
    let plan = plan(k, &live);
    let vty = match plan {
        Plan::Vector(t) => Some(t),
        Plan::Scalar => None,
    };
    let body = TileBody { inputs: &k.inputs, insts: &k.insts, roots: &k.outputs };
    // Half kernels are never tiled (`tiled_rows::tiling`; see the module documentation).
    let tiling = if tile { tiled_rows::tiling(&body, &live, vty, &vec![false; k.insts.len()]) } else { None };
    let ptr = module.target_config().pointer_type();
    let mut fctx = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(func, &mut fctx);
    let frontend_config = module.target_config();
    let mut cx = FnEmitter::new(&mut b, module);
    let rank = k.rank;
    let n_out = k.outputs.len();

    let entry = cx.b.create_block();
    cx.b.append_block_params_for_function_params(entry);
    cx.b.switch_to_block(entry);
    let args = cx.b.block_params(entry)[0];
    let a = Entry::load(&mut cx, args, ptr, &k.inputs, rank, n_out);
    let (row_start, row_end) = (a.row_start, a.row_end);
    let inner = a.dims[rank - 1];
    let out_base = &a.out_base;
    // Tiled rows emit their constants per pass (few float values live across a routine's call:
    // only the draws' scalars, loaded below).
    let pre = if tiling.is_some() {
        (vec![None; k.insts.len()], vec![None; k.insts.len()])
    } else {
        emit_pre(&mut cx, &k.insts, &live, a.scalars_p, vty)?
    };
    let draws = load_draws(&mut cx, &k.insts, &live, a.scalars_p);
    // A row is one run of the skeleton: every dim but the last is kept, so no middle loop.
    let sp = Space::new(&mut cx, ptr, &a.dims, &a.strides, &a.in_step, rank - 1);
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
    let in_ptr = sp.outer_ptrs(&mut cx, &a.in_base, row);
    let mut out_ptr = Vec::with_capacity(n_out);
    let row_elems = cx.b.ins().imul(row, inner);
    for (&base, &val) in out_base.iter().zip(&k.outputs) {
        let size = k.dtype(val).size_in_bytes() as i64;
        let off = cx.b.ins().imul_imm_s(row_elems, size);
        out_ptr.push(cx.b.ins().iadd(base, off));
    }
    let index0 = draws.iter().any(Option::is_some).then(|| cx.b.ins().iadd(a.index_base, row_elems));
    if let Some(t) = &tiling {
        let sizes: Vec<i64> = k.outputs.iter().map(|&o| k.dtype(o).size_in_bytes() as i64).collect();
        let scalars_p = a.scalars_p;
        tiled_rows::emit_row(
            &mut cx,
            &body,
            t,
            &sp,
            &in_ptr,
            &out_ptr,
            &sizes,
            tiled_rows::UNROLL,
            None,
            &draws,
            index0,
            |cx, live| emit_pre(cx, &k.insts, live, scalars_p, vty),
            |_, _| {},
            |cx, r, j, _, _, vals| {
                store_outputs(cx, k, r, j, vals);
                Ok(())
            },
        )?;
    } else {
        let pass = Pass { inputs: &k.inputs, insts: &k.insts, pre: &pre, vty, unroll: 1, draws: &draws, index0 };
        emit_runs(
            &mut cx,
            &sp,
            &pass,
            &in_ptr,
            |_, _| out_ptr,
            |cx, r, j, vt, _| emit_element(cx, k, &live, r, j, vt),
        )?;
    }

    let next_row = cx.b.ins().iadd_imm_s(row, 1);
    cx.b.ins().jump(row_head, &[BlockArg::Value(next_row)]);

    cx.b.switch_to_block(exit);
    cx.b.ins().return_(&[]);
    drop(cx);
    b.seal_all_blocks();
    b.finalize(frontend_config);
    Ok((plan, tiling.is_some()))
}
