//! What one compiled call did, gathered while it runs: the graphs realized (with their plans
//! and timings) and the graph breaks.

use super::exec::RunCounts;
use super::plan::Plan;
use crate::debug::{self, Topic};
use kiln_codegen::ir::{Graph, NodeKind};
use std::cell::RefCell;
use std::panic::Location;
use std::sync::Arc;
use std::time::Duration;

/// One realized graph.
pub(crate) struct Realization {
    /// The plan it ran.
    pub(crate) plan: Arc<Plan>,
    /// Whether the plan came from the cache.
    pub(crate) plan_hit: bool,
    /// Whether it was the plan the step's previous call ran there, recognized node by node.
    pub(crate) plan_expected: bool,
    /// Time from the first op of the trace to its realization.
    pub(crate) trace_time: Duration,
    /// Time spent building the plan (zero on a hit).
    pub(crate) build_time: Duration,
    /// Time spent hashing and looking up.
    pub(crate) hash_time: Duration,
    /// Time spent running it.
    pub(crate) run_time: Duration,
    /// What running it counted.
    pub(crate) counts: RunCounts,
}

/// Everything one compiled call did.
#[derive(Default)]
pub(crate) struct CallReport {
    /// The graphs realized, in order.
    pub(crate) realizations: Vec<Realization>,
    /// Where the step read a lazy value (each one split the step's graph).
    pub(crate) breaks: Vec<&'static Location<'static>>,
    /// Per realized graph: its hash and (under `KILN_DEBUG=recompiles`) a description of its
    /// inputs and nodes, to say what changed on a miss.
    pub(crate) graphs: Vec<(u64, bool, Vec<String>)>,
    /// Per realized graph, the plan built for the trace's target device when it has one
    /// (`CompiledStep::call_planning_for`): built, never run.
    pub(crate) planned: Vec<Arc<Plan>>,
}

thread_local! {
    static REPORT: RefCell<CallReport> = RefCell::new(CallReport::default());
}

/// Notes a graph break at the user's line.
pub(crate) fn note_break(at: &'static Location<'static>) {
    REPORT.with(|r| r.borrow_mut().breaks.push(at));
}

/// Notes a graph about to run (its hash, and whether its plan was cached).
pub(crate) fn note_graph(hash: u64, graph: &Graph, hit: bool) {
    let signature = if debug::enabled(Topic::Recompiles) { signature(graph) } else { Vec::new() };
    REPORT.with(|r| r.borrow_mut().graphs.push((hash, hit, signature)));
}

/// Notes a plan built for the trace's target device.
pub(crate) fn note_planned(plan: Arc<Plan>) {
    REPORT.with(|rep| rep.borrow_mut().planned.push(plan));
}

/// Notes a realized graph.
pub(crate) fn note_realization(r: Realization) {
    REPORT.with(|rep| rep.borrow_mut().realizations.push(r));
}

/// Takes this thread's report (starting an empty one).
pub(crate) fn take() -> CallReport {
    REPORT.with(|r| std::mem::take(&mut *r.borrow_mut()))
}

/// One line per node: what it is, its shape and dtype (inputs with the views read of them).
fn signature(g: &Graph) -> Vec<String> {
    g.nodes
        .iter()
        .enumerate()
        .map(|(i, n)| match n.kind {
            NodeKind::Input { slot, .. } => {
                let views: Vec<String> = g
                    .nodes
                    .iter()
                    .flat_map(|m| m.reads.iter())
                    .filter(|u| u.node as usize == i)
                    .map(|u| format!("{:?}", u.layout.shape()))
                    .collect();
                format!("input {slot} ({} storage of {} elements, read as {})", n.dtype, n.numel(), views.join(", "))
            }
            _ => format!("node {i} ({}): {:?} {}", n.kind.name(), n.shape.as_slice(), n.dtype),
        })
        .collect()
}

/// What differs between two signatures, in words (the first few differences).
pub(crate) fn what_changed(old: &[String], new: &[String]) -> String {
    let mut diffs: Vec<String> =
        old.iter().zip(new).filter(|(a, b)| a != b).take(3).map(|(a, b)| format!("{a} → {b}")).collect();
    if old.len() != new.len() {
        diffs.push(format!("{} nodes → {}", old.len(), new.len()));
    }
    if diffs.is_empty() {
        "the output set changed".into()
    } else {
        diffs.join("; ")
    }
}
