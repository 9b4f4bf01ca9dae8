//! What fusion decides (`passes/fusion.rs`) and the later passes refine (`passes/stages.rs`,
//! `passes/epilogue.rs`) and lower (`passes/lower.rs`): the groups of a graph, the parts of each
//! reduction kernel, and the questions the passes ask of them. Which step waits for which is
//! asked of a [`GroupGraph`], a petgraph graph of the nodes with each group condensed into one
//! vertex, searched depth-first.

use crate::ir::{Graph, NodeId, NodeKind};
use kiln_runtime::Layout;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::{Dfs, Visitable};

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

/// The graph's nodes with each fusion group condensed into one vertex, for the questions of
/// which step waits for which (built at plan-build time only; the captured graph stays a `Vec`
/// in trace order). Vertex `id` is node `id`, vertex `nodes + gid` is group `gid`. A live
/// node's reads are edges into it; a group's vertex and each member are joined both ways (a
/// group runs as one step: it waits for whatever a member waits for, and every member waits
/// for the whole group, so an old member stands for the group's newer members too, as the
/// random-graph property tests found); a node a group's kernel recomputes is an edge into
/// that group. Node
/// `a` waits for node `b` when a path leads from `b` to `a`. Inputs and scalars read nothing
/// and join no group, so no path reaches them: their edges are left out, and a question about
/// them is answered without a search.
pub(crate) struct GroupGraph {
    /// The vertices and edges.
    graph: DiGraph<(), (), u32>,
    /// Vertices that stand for nodes (those before the groups').
    nodes: usize,
    /// The depth-first search, its stack and visited set reused across questions.
    dfs: Dfs<NodeIndex, <DiGraph<(), (), u32> as Visitable>::Map>,
}

impl GroupGraph {
    /// The graph of `g`'s nodes alone; [`GroupGraph::add`] joins each node once its group is
    /// known.
    pub(crate) fn new(g: &Graph) -> GroupGraph {
        let nodes = g.nodes.len();
        let mut graph = DiGraph::with_capacity(nodes, nodes * 2);
        for _ in 0..nodes {
            graph.add_node(());
        }
        let dfs = Dfs::empty(&graph);
        GroupGraph { graph, nodes, dfs }
    }

    /// The graph of every live node of `g` in the groups of `f` (their members and the nodes
    /// their kernels recompute).
    pub(crate) fn of(g: &Graph, live: &[bool], f: &Fusion) -> GroupGraph {
        let mut gg = GroupGraph::new(g);
        for id in (0..g.nodes.len() as NodeId).filter(|&id| live[id as usize]) {
            gg.add(g, f, id);
        }
        for (gid, members) in f.groups.iter().enumerate() {
            let group = gg.group(gid as u32);
            for &m in members.iter().filter(|&&m| f.group_of[m as usize] != Some(gid as u32)) {
                gg.graph.add_edge(NodeIndex::new(m as usize), group, ());
            }
        }
        gg
    }

    /// The vertex of group `gid` (added with the vertices of the groups before it).
    fn group(&mut self, gid: u32) -> NodeIndex {
        let v = self.nodes + gid as usize;
        while self.graph.node_count() <= v {
            self.graph.add_node(());
        }
        NodeIndex::new(v)
    }

    /// Joins live node `id`: its reads, and its group in `f` if it has one.
    pub(crate) fn add(&mut self, g: &Graph, f: &Fusion, id: NodeId) {
        let v = NodeIndex::new(id as usize);
        for u in g.node(id).reads.iter().filter(|u| reachable(g, u.node)) {
            self.graph.add_edge(NodeIndex::new(u.node as usize), v, ());
        }
        if let Some(gid) = f.group_of[id as usize] {
            let group = self.group(gid);
            self.graph.add_edge(v, group, ());
            self.graph.add_edge(group, v, ());
        }
    }

    /// True when one of `nodes` (of `g`) waits for group `gid`.
    pub(crate) fn waits_for_group(&mut self, g: &Graph, gid: u32, nodes: &[NodeId]) -> bool {
        if !nodes.iter().any(|&n| reachable(g, n)) {
            return false;
        }
        let start = self.group(gid);
        self.dfs.reset(&self.graph);
        self.dfs.move_to(start);
        while let Some(v) = self.dfs.next(&self.graph) {
            if v.index() < self.nodes && nodes.contains(&(v.index() as NodeId)) {
                return true;
            }
        }
        false
    }

    /// Per node, true when it waits for node `r` (`r` included).
    pub(crate) fn waiting_for(&mut self, r: NodeId) -> Vec<bool> {
        let mut late = vec![false; self.nodes];
        self.dfs.reset(&self.graph);
        self.dfs.move_to(NodeIndex::new(r as usize));
        while let Some(v) = self.dfs.next(&self.graph) {
            if let Some(l) = late.get_mut(v.index()) {
                *l = true;
            }
        }
        late
    }
}

/// False for the nodes no path of a [`GroupGraph`] reaches: inputs and scalars read nothing and
/// join no group.
fn reachable(g: &Graph, n: NodeId) -> bool {
    !matches!(g.node(n).kind, NodeKind::Input { .. } | NodeKind::Scalar { .. })
}
