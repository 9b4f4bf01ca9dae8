//! What fusion decides (`passes/fusion.rs`) and the later passes refine (`passes/stages.rs`,
//! `passes/epilogue.rs`) and lower (`passes/lower.rs`): the groups of a graph, the parts of each
//! reduction kernel, and the questions the passes ask of them.

use crate::ir::{Graph, NodeId};
use kiln_runtime::Layout;

/// The fusion groups of a graph.
#[derive(Clone, Debug, Default)]
pub struct Fusion {
    /// Each group's members, in trace order, with the nodes its kernel recomputes.
    pub groups: Vec<Vec<NodeId>>,
    /// The group of each node (`None` for nodes outside every group); a node other kernels
    /// recompute keeps its own group here.
    pub group_of: Vec<Option<u32>>,
    /// What fusion decided against (or, for epilogues, for) a node, and why (node, reason).
    pub refusals: Vec<(NodeId, String)>,
    /// Per group, true when it is a reduction's kernel (its reductions, their prologues and
    /// its epilogue, see [`Fusion::parts`]): no elementwise node joins it by the rules above.
    /// A reduction kernel absorbed by another as a stage is left empty and not closed.
    pub closed: Vec<bool>,
    /// Per node, true when its value gets a buffer: every node outside the groups, and the
    /// members read outside their group (see the module docs) or leaving the step.
    pub materialized: Vec<bool>,
    /// Per group, its reduction kernel's parts (for closed groups).
    pub parts: Vec<Option<ReduceParts>>,
}

/// One reduction of a reduction kernel and the prologue it recomputes (a
/// [`crate::kernel::ReduceStage`]).
#[derive(Clone, Debug, Default)]
pub struct StageParts {
    /// The elementwise nodes over the reduction's input, in trace order.
    pub prologue: Vec<NodeId>,
    /// The reduction.
    pub reduce: NodeId,
    /// Row values of the earlier stages (elementwise nodes over the reductions' result shape
    /// computed from their values: log_softmax's `log Σ`, which cross-entropy's pick reads) that
    /// the prologue reads broadcast, in trace order; recomputed once per output.
    pub rows: Vec<NodeId>,
}

/// The parts of a reduction kernel: its reductions (stages) with the prologues they recompute,
/// and the epilogue evaluated over the same iteration space once each output is reduced.
#[derive(Clone, Debug, Default)]
pub struct ReduceParts {
    /// The reductions in trace order, at least one: the group's own, then the later reductions
    /// over the same rows that read the earlier ones broadcast (`passes/stages.rs`).
    pub stages: Vec<StageParts>,
    /// The elementwise nodes of the epilogue, in trace order: nodes over the input shape, and
    /// the `rows` among them.
    pub epilogue: Vec<NodeId>,
    /// Epilogue nodes over the reductions' result shape (computed from the reduced values, read
    /// broadcast by the others), recomputed at every element.
    pub rows: Vec<NodeId>,
}

impl ReduceParts {
    /// The reductions, stage by stage.
    pub fn reductions(&self) -> Vec<NodeId> {
        self.stages.iter().map(|s| s.reduce).collect()
    }
}

impl Fusion {
    /// Starts an empty group.
    pub(crate) fn start(&mut self) -> u32 {
        self.groups.push(Vec::new());
        self.closed.push(false);
        self.parts.push(None);
        (self.groups.len() - 1) as u32
    }

    /// True when group `gid`'s kernel computes `node` (a member, or a node it recomputes), so
    /// reading it costs no memory.
    pub fn computes(&self, gid: u32, node: NodeId) -> bool {
        self.groups[gid as usize].binary_search(&node).is_ok()
    }

    /// True when group `gid` must run: it is a reduction's, or it materializes a member.
    pub fn is_needed(&self, gid: u32) -> bool {
        self.closed[gid as usize] || self.groups[gid as usize].iter().any(|&m| self.materialized[m as usize])
    }
}

/// True when `reader` reads `node`'s value element for element over its iteration space
/// (its shape, or a reduction's input shape).
pub fn same_index(g: &Graph, reader: NodeId, node: NodeId, layout: &Layout) -> bool {
    let (r, n) = (g.node(reader), g.node(node));
    r.iteration_shape() == n.shape.as_slice() && *layout == Layout::contiguous(&n.shape)
}
