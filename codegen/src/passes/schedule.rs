//! Ordering the plan's steps and planning memory by liveness.
//!
//! The steps (fusion groups that run, and nodes run by themselves) form a petgraph graph, an
//! edge from each step to every step that reads its values (the condensation of the captured
//! graph by fusion's groups). Its topological order is Kahn's, walked here rather than by
//! `petgraph::algo::toposort` because the pick among ready steps matters (earliest trace
//! position first, a CPU matrix product paired with a ready one of similar size), which
//! petgraph's order doesn't keep; when steps are left unordered, petgraph's `toposort` names a
//! step on the cycle fusion made.

use super::concurrent::{balanced, cpu_product_work};
use super::groups::Fusion;
use crate::ir::{Graph, NodeId, NodeKind};
use petgraph::algo::toposort;
use petgraph::graph::{DiGraph, NodeIndex};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One unit of work of a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// Fusion group `g` (one kernel).
    Group(u32),
    /// One node run by itself (an opaque op or an assignment).
    Node(NodeId),
}

/// The steps in a valid order, and when each value can be freed.
#[derive(Clone, Debug, Default)]
pub struct Schedule {
    /// The steps, each after every step it reads from.
    pub steps: Vec<StepKind>,
    /// Per step, true when it runs at once with the next step (two independent CPU matrix
    /// products of similar size, see [`super::concurrent`]); the next step's flag is false.
    pub concurrent: Vec<bool>,
    /// Per step, the values (nodes) no later step reads, freed once it has run (graph outputs
    /// and inputs are never freed).
    pub frees: Vec<Vec<NodeId>>,
    /// The most bytes of intermediate values alive at once (inputs and outputs excluded).
    pub peak_bytes: usize,
}

/// Orders the live nodes' steps topologically (ties broken by trace order, except that a CPU
/// matrix product is followed by another ready one of similar size, the two marked to run at
/// once) and computes the last use of every intermediate value. Groups that materialize
/// nothing are dead (reductions recompute them) and get no step; members that stay inside
/// their kernel get no buffer ([`Fusion::materialized`]).
pub fn schedule(g: &Graph, live: &[bool], fusion: &Fusion) -> Schedule {
    let n = g.nodes.len();
    let materialized = |id: NodeId| fusion.materialized[id as usize];
    // The step of each live computed node, and each step's members.
    let mut step_of: Vec<Option<u32>> = vec![None; n];
    let mut steps: Vec<StepKind> = Vec::new();
    let mut members: Vec<Vec<NodeId>> = Vec::new();
    let mut group_step: Vec<Option<u32>> = vec![None; fusion.groups.len()];
    for id in 0..n {
        if !live[id] || matches!(g.nodes[id].kind, NodeKind::Input { .. } | NodeKind::Scalar { .. }) {
            continue;
        }
        let s = match fusion.group_of[id] {
            Some(gid) if !fusion.is_needed(gid) => continue,
            Some(gid) => *group_step[gid as usize].get_or_insert_with(|| {
                steps.push(StepKind::Group(gid));
                members.push(fusion.groups[gid as usize].clone());
                (steps.len() - 1) as u32
            }),
            None => {
                steps.push(StepKind::Node(id as NodeId));
                members.push(vec![id as NodeId]);
                (steps.len() - 1) as u32
            }
        };
        step_of[id] = Some(s);
    }
    // What each step reads from other steps' values: its members' reads of nodes it doesn't
    // compute itself.
    let external: Vec<Vec<NodeId>> = steps
        .iter()
        .zip(&members)
        .map(|(step, ms)| {
            let computes = |v: NodeId| match step {
                StepKind::Group(gid) => fusion.computes(*gid, v),
                StepKind::Node(_) => false,
            };
            let mut reads: Vec<NodeId> =
                ms.iter().flat_map(|&m| g.node(m).reads.iter().map(|u| u.node)).filter(|&v| !computes(v)).collect();
            reads.sort_unstable();
            reads.dedup();
            reads
        })
        .collect();
    let first_node: Vec<NodeId> = members.iter().map(|ms| *ms.iter().min().expect("steps are not empty")).collect();
    // Dependencies between steps: an edge from each step to every step that reads its values.
    let mut dag: DiGraph<(), (), u32> = DiGraph::with_capacity(steps.len(), steps.len() * 2);
    for _ in &steps {
        dag.add_node(());
    }
    let mut indegree = vec![0usize; steps.len()];
    for (s, reads) in external.iter().enumerate() {
        let mut preds: Vec<u32> =
            reads.iter().filter_map(|&v| step_of[v as usize]).filter(|&p| p != s as u32).collect();
        preds.sort_unstable();
        preds.dedup();
        indegree[s] = preds.len();
        for p in preds {
            dag.add_edge(NodeIndex::new(p as usize), NodeIndex::new(s), ());
        }
    }
    let mut ready: BinaryHeap<Reverse<(NodeId, u32)>> = (0..steps.len() as u32)
        .filter(|&s| indegree[s as usize] == 0)
        .map(|s| Reverse((first_node[s as usize], s)))
        .collect();
    let product_work = |s: u32| match steps[s as usize] {
        StepKind::Node(id) => cpu_product_work(g, id),
        StepKind::Group(_) => None,
    };
    let mut order: Vec<u32> = Vec::with_capacity(steps.len());
    let mut concurrent: Vec<bool> = Vec::with_capacity(steps.len());
    while let Some(Reverse((_, s))) = ready.pop() {
        // A partner is taken from what is ready before `s` ran, so it cannot read `s`.
        let partner =
            product_work(s).and_then(|w| take_ready(&mut ready, |t| product_work(t).is_some_and(|v| balanced(w, v))));
        order.push(s);
        concurrent.push(partner.is_some());
        if let Some(p) = partner {
            order.push(p);
            concurrent.push(false);
        }
        for done in std::iter::once(s).chain(partner) {
            for t in dag.neighbors(NodeIndex::new(done as usize)) {
                let t = t.index() as u32;
                indegree[t as usize] -= 1;
                if indegree[t as usize] == 0 {
                    ready.push(Reverse((first_node[t as usize], t)));
                }
            }
        }
    }
    if order.len() < steps.len() {
        let cycle = toposort(&dag, None).expect_err("steps were left unordered, so the step graph has a cycle");
        panic!("fusion made a cycle through {:?} (a bug in the fusion pass)", steps[cycle.node_id().index()]);
    }
    let position: Vec<usize> = {
        let mut p = vec![0; steps.len()];
        for (i, &s) in order.iter().enumerate() {
            p[s as usize] = i;
        }
        p
    };
    // Last use of each materialized intermediate.
    let mut last: Vec<Option<usize>> = vec![None; n];
    for (s, reads) in external.iter().enumerate() {
        let p = position[s];
        for &v in reads {
            let e = &mut last[v as usize];
            *e = Some(e.map_or(p, |q| q.max(p)));
        }
    }
    let mut is_output = vec![false; n];
    for &o in &g.outputs {
        is_output[o as usize] = true;
    }
    let mut frees: Vec<Vec<NodeId>> = vec![Vec::new(); order.len()];
    let mut bytes_at: Vec<isize> = vec![0; order.len() + 1];
    for id in 0..n {
        let Some(s) = step_of[id] else { continue };
        if is_output[id] || !materialized(id as NodeId) {
            continue;
        }
        // The two steps of a concurrent pair hold their values over both.
        let mut born = position[s as usize];
        if born > 0 && concurrent[born - 1] {
            born -= 1;
        }
        let mut dies = last[id].unwrap_or(born).max(born);
        if concurrent[dies] {
            dies += 1;
        }
        frees[dies].push(id as NodeId);
        let bytes = (g.nodes[id].numel() * g.nodes[id].dtype.size_in_bytes()) as isize;
        bytes_at[born] += bytes;
        bytes_at[dies + 1] -= bytes;
    }
    let mut live_bytes = 0isize;
    let mut peak = 0isize;
    for b in &bytes_at {
        live_bytes += b;
        peak = peak.max(live_bytes);
    }
    Schedule {
        steps: order.iter().map(|&s| steps[s as usize].clone()).collect(),
        concurrent,
        frees,
        peak_bytes: peak as usize,
    }
}

/// Removes and returns the first ready step (in the heap's order) that `wanted` accepts.
fn take_ready(ready: &mut BinaryHeap<Reverse<(NodeId, u32)>>, wanted: impl Fn(u32) -> bool) -> Option<u32> {
    let mut all = std::mem::take(ready).into_sorted_vec();
    // Sorted ascending by `Reverse`: the heap's next pop is last.
    let pos = all.iter().rposition(|Reverse((_, t))| wanted(*t));
    let found = pos.map(|p| all.remove(p).0 .1);
    *ready = all.into();
    found
}
