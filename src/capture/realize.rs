//! Realizing a trace: its outputs found, its plan looked up or built, run, and the results
//! installed into the storages that wait for them.

use super::exec;
use super::plan;
use super::report::{self, Realization};
use super::trace::{self, Finished, Trace};
use crate::debug::{self, Topic};
use crate::tensor::{StorageCell, Tensor};
use ahash::AHashMap;
use kiln_codegen::ir::{NodeId, NodeKind};
use std::panic::Location;
use std::sync::Arc;
use std::time::Instant;

/// Realizes this thread's trace. `at` is the user's line for a graph break (`None` at the end
/// of a compiled call, which does not resume capturing).
pub(crate) fn realize(at: Option<&'static Location<'static>>) {
    let Some(trace) = trace::take_for_realize(at.is_some()) else {
        trace::finish_realize();
        return;
    };
    struct Finish;
    impl Drop for Finish {
        fn drop(&mut self) {
            trace::finish_realize();
        }
    }
    let _finish = Finish;
    if let Some(loc) = at {
        if debug::enabled(Topic::Breaks) {
            debug::log(
                Topic::Breaks,
                format!(
                    "graph break at {}: a value computed inside the compiled step was read ({} nodes realized)",
                    super::break_site::describe(loc),
                    trace.node_count()
                ),
            );
        }
        report::note_break(loc);
    }
    realize_trace(trace, at.is_none());
}

/// Runs `trace` and installs its outputs. `last`: the compiled call ends with this
/// realization, so nothing after it can fail and its outputs may be written over the storages
/// they replace (see [`in_place`]).
fn realize_trace(mut trace: Trace, last: bool) {
    let traced = trace.started.elapsed();
    // The outputs: storages still alive whose current value this trace holds.
    let mut outputs: Vec<(Arc<StorageCell>, NodeId)> = Vec::new();
    for w in std::mem::take(&mut trace.cells) {
        let Some(cell) = w.upgrade() else { continue };
        if !cell.capture.is_lazy() || outputs.iter().any(|(c, _)| Arc::ptr_eq(c, &cell)) {
            continue;
        }
        let Some(node) = cell.capture.node_in(trace.id) else { continue };
        outputs.push((cell, node));
    }
    if outputs.is_empty() {
        clear_inputs(&trace);
        return;
    }
    let mut output_nodes: Vec<NodeId> = outputs.iter().map(|(_, n)| *n).collect();
    output_nodes.sort_unstable();
    output_nodes.dedup();
    let hashing = Instant::now();
    let (plan, hit, expected) = match trace.finish(output_nodes) {
        Finished::Expected(expected) => (expected, true, true),
        Finished::Recorded(mut graph) => {
            if trace.target.is_some() {
                // Planned for the target (not run, not cached); the tensors are the CPU's, and
                // so is the plan that runs.
                let hash = kiln_codegen::ir::structural_hash(&graph);
                report::note_planned(Arc::new(plan::build(graph.clone(), hash)));
                graph.devices.fill(kiln_runtime::Device::Cpu);
            }
            let (plan, hit) = plan::lookup_or_build(graph);
            (plan, hit, false)
        }
    };
    let hash_and_build = hashing.elapsed();
    if debug::enabled(Topic::Cache) {
        let (hash, nodes, steps) = (plan.hash, plan.captured.nodes.len(), plan.steps.len());
        let how = if hit { "hit" } else { "miss" };
        debug::log(Topic::Cache, format!("plan {hash:016x} {how} ({nodes} nodes, {steps} steps)"));
    }
    report::note_graph(plan.hash, &plan.captured, hit);
    let running = Instant::now();
    // Until the outputs are installed, a failure (an op's error, a panic in a kernel) leaves
    // every storage the trace touched as it was.
    let mut rollback = RollBack {
        id: trace.id,
        cells: trace.inputs.iter().chain(outputs.iter().map(|(c, _)| c)).cloned().collect(),
        armed: true,
    };
    // How many storages take each node's value.
    let mut remaining: Vec<u32> = vec![0; plan.graph.nodes.len()];
    for (_, node) in &outputs {
        remaining[plan.canonical[*node as usize] as usize] += 1;
    }
    let donated = if last { in_place(&plan, &trace, &outputs, &remaining) } else { Vec::new() };
    let (mut values, counts) = match exec::run(&plan, &mut trace, &donated) {
        Ok(v) => v,
        Err(e) => panic!("kiln::compile: an op failed while the step ran: {e}"),
    };
    rollback.armed = false;
    // Install: each output storage takes its node's value (a copy when two storages end with
    // the same value, or when the value is another input's storage). The data an older
    // storage held is journaled, so that a call failing after this graph break undoes it.
    for (cell, node) in &outputs {
        let n = plan.canonical[*node as usize] as usize;
        remaining[n] -= 1;
        if values[n].as_ref().is_some_and(|v| Arc::ptr_eq(v.cell(), cell)) {
            // Computed in place, over this storage's old data.
            cell.capture.clear();
            continue;
        }
        let source = matches!(plan.graph.nodes[n].kind, NodeKind::Input { .. } | NodeKind::Scalar { .. });
        let storage = if remaining[n] > 0 || source {
            let value = values[n].as_ref().expect("outputs are kept");
            value.deep_clone().cell().take()
        } else {
            take_storage(values[n].take().expect("outputs are kept"))
        };
        let had_data = !cell.capture.is_unwritten();
        let old = cell.install(storage);
        cell.capture.clear();
        if had_data {
            trace::journal_installed(cell, old);
        }
    }
    clear_inputs(&trace);
    report::note_realization(Realization {
        plan: plan.clone(),
        plan_hit: hit,
        plan_expected: expected,
        trace_time: traced,
        build_time: if hit { std::time::Duration::ZERO } else { plan.build_time },
        hash_time: hash_and_build.saturating_sub(if hit { std::time::Duration::ZERO } else { plan.build_time }),
        run_time: running.elapsed(),
        counts,
    });
}

/// The plan's donatable `(output, input)` pairs (`Plan::donatable`) that this run may write in
/// place, sorted: the output is installed into the input's storage, and into no other
/// (`takers`: per plan node, how many of `outputs` take its value).
fn in_place(
    plan: &plan::Plan,
    trace: &Trace,
    outputs: &[(Arc<StorageCell>, NodeId)],
    takers: &[u32],
) -> Vec<(NodeId, NodeId)> {
    if plan.donors.is_empty() {
        return Vec::new();
    }
    let address = |cell: &Arc<StorageCell>| Arc::as_ptr(cell) as usize;
    let donor_of_cell: AHashMap<usize, NodeId> = plan
        .donors
        .iter()
        .map(|&i| {
            let NodeKind::Input { slot, .. } = plan.graph.node(i).kind else { unreachable!("donors are inputs") };
            (address(&trace.inputs[slot as usize]), i)
        })
        .collect();
    let mut pairs: Vec<(NodeId, NodeId)> = outputs
        .iter()
        .filter_map(|(cell, node)| {
            let o = plan.canonical[*node as usize];
            let &input = donor_of_cell.get(&address(cell))?;
            (takers[o as usize] == 1 && plan.donatable.binary_search(&(o, input)).is_ok()).then_some((o, input))
        })
        .collect();
    pairs.sort_unstable();
    pairs
}

/// Rolls back the storages a trace reads and writes when dropped armed (see
/// [`Trace::roll_back`]): a realization that fails before installing its outputs.
struct RollBack {
    /// The trace's id.
    id: u64,
    /// Its inputs and outputs.
    cells: Vec<Arc<StorageCell>>,
    /// Still to be rolled back on drop.
    armed: bool,
}

impl Drop for RollBack {
    fn drop(&mut self) {
        if self.armed {
            for cell in &self.cells {
                if cell.capture.trace() == self.id {
                    cell.capture.roll_back();
                }
            }
        }
    }
}

/// The storage of a value tensor, moved out (copied when someone else shares it).
fn take_storage(value: Tensor) -> kiln_runtime::Storage {
    if Arc::strong_count(value.cell()) == 1 {
        value.cell().take()
    } else {
        value.deep_clone().cell().take()
    }
}

/// The trace's inputs no longer refer to it.
fn clear_inputs(trace: &Trace) {
    for cell in &trace.inputs {
        if cell.capture.node_in(trace.id).is_some() {
            cell.capture.clear();
        }
    }
}
