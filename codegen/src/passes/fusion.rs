//! Fusion: elementwise nodes of one iteration space become one kernel, and a reduction
//! recomputes the elementwise work it reduces inside its own kernel.
//!
//! Nodes are visited in trace order. An elementwise node joins the group of the first of its
//! producers that is an elementwise node of the same shape read element for element (no
//! broadcast, no transpose), unless joining would make a cycle (another of its reads depends,
//! through a node outside the group, on the group) or it reads a member of that group through a
//! view. A node with no such producer joins a recent group of the same shape that none of its
//! reads depends on and that has no member after more reductions than the node (horizontal
//! fusion: the optimizer's independent per-parameter updates, `m`, `v` and `p` of Adam, become
//! one kernel; a `Rand` node, which reads only scalars, joins this way or starts a group, and
//! its consumers join it). Otherwise it starts a group. Whether a read depends on a group is a
//! depth-first search of a petgraph graph of the nodes visited so far with each group condensed
//! into one vertex (`GroupGraph`, `passes/groups.rs`), grown node by node.
//!
//! A member's value is *materialized* (written to memory) when it leaves the step or is read
//! by a node that can't recompute it: anything but an elementwise node or a reduction reading
//! it element for element. Every other kernel that reads it recomputes it: its *cone*, the
//! non-materialized members behind the values it reads, joins the kernel as extra members
//! (they remain members of their own group too). So `Σ (x - m)²` reads `x` and `m`, never the
//! squares, and softmax's division recomputes `exp(x - max)` instead of loading it. A node
//! recomputed by more than [`MAX_RECOMPUTES`] kernels (reductions over the same rows counting
//! as one) is materialized instead, the last of a chain of such nodes first (the cones are
//! then found again: the nodes behind it may no longer be recomputed too often). A group none of
//! whose members is materialized is dead: the kernels that needed it recompute it. Each
//! reduction over trailing dims gets a kernel of its own, *closed* (nothing joins it), whose
//! members are its cone (the prologue) and, last, the reduction; one over leading dims runs
//! eagerly (its kernel sums whole rows in memory order, which a per-output loop can't). A
//! later reduction over the same rows that doesn't wait for an earlier one's kernel joins that
//! kernel as one more stage (`passes/stages.rs`: softmax's `Σ exp(x - max)` joins the max's
//! kernel), and
//! elementwise work over the rows that reads the reduced values joins as the epilogue
//! (`passes/epilogue.rs`).
//!
//! Every refusal is written down with its reason (printed under `KILN_DEBUG=fusion`).

use super::groups::{same_index, Fusion, GroupGraph, ReduceParts, StageParts};
use crate::ir::{Graph, NodeId, NodeKind};
use smallvec::SmallVec;

/// Groups the live elementwise nodes and reductions of `g` (`live[n]`: the node's value is
/// needed).
pub fn fuse(g: &Graph, live: &[bool]) -> Fusion {
    let n = g.nodes.len();
    let mut f = Fusion { group_of: vec![None; n], ..Fusion::default() };
    let levels = reduction_levels(g);
    let feeds = feeds_reduction(g);
    let mut group_level: Vec<u32> = Vec::new();
    // The nodes so far, groups condensed: what the cycle check searches.
    let mut steps = GroupGraph::new(g);
    for id in 0..n as NodeId {
        if !live[id as usize] {
            continue;
        }
        if g.node(id).kind.is_elementwise() {
            let gid = match choose_group(g, &f, &mut steps, id, &levels, &feeds, &group_level) {
                Ok(gid) => gid,
                Err(reason) => {
                    if let Some(reason) = reason {
                        f.refusals.push((id, format!("starts a new kernel: {reason}")));
                    }
                    f.start()
                }
            };
            f.groups[gid as usize].push(id);
            f.group_of[id as usize] = Some(gid);
            group_level.resize(f.groups.len(), 0);
            group_level[gid as usize] = group_level[gid as usize].max(levels[id as usize]);
        }
        steps.add(g, &f, id);
    }
    for id in 0..n as NodeId {
        // A reduction over leading dims (a bias gradient's sum over the batch) would walk
        // memory with a large stride: it stays an eager node, whose kernel sums rows in order.
        if live[id as usize] && g.node(id).reduces_trailing_dims() {
            let gid = f.start();
            f.closed[gid as usize] = true;
            f.groups[gid as usize].push(id);
            f.group_of[id as usize] = Some(gid);
        }
    }
    f.materialized = materialized(g, live, &f);
    // Cones, until no node is recomputed too often.
    let classes = kernel_classes(g, &f);
    let cones = loop {
        let cones: Vec<Vec<NodeId>> = (0..f.groups.len() as u32)
            .map(|gid| if f.is_needed(gid) { cone(g, &f, gid) } else { Vec::new() })
            .collect();
        let mut recomputes: Vec<(NodeId, u32)> =
            cones.iter().zip(&classes).flat_map(|(c, &class)| c.iter().map(move |&m| (m, class))).collect();
        recomputes.sort_unstable();
        recomputes.dedup();
        let mut count = vec![0usize; n];
        for &(c, _) in &recomputes {
            count[c as usize] += 1;
        }
        let over: Vec<usize> = (0..n).filter(|&c| count[c] > MAX_RECOMPUTES).collect();
        if over.is_empty() {
            break cones;
        }
        // Only the last of a chain: once it is materialized, the kernels that recomputed the
        // nodes behind it read it instead (dropout's `rand >= p`, its cast and its scale would
        // otherwise all be written, a Bool among them).
        let read_by_over =
            |c: usize| over.iter().any(|&d| g.node(d as NodeId).reads.iter().any(|u| u.node as usize == c));
        let last: Vec<usize> = over.iter().copied().filter(|&c| !read_by_over(c)).collect();
        for c in last {
            f.materialized[c] = true;
            f.refusals.push((c as NodeId, format!("materialized: {} kernels would recompute it", count[c])));
        }
    };
    for (gid, cone) in cones.into_iter().enumerate() {
        if f.closed[gid] {
            let reduce = f.groups[gid][0];
            f.parts[gid] = Some(ReduceParts {
                stages: vec![StageParts { prologue: cone.clone(), reduce, rows: Vec::new() }],
                ..ReduceParts::default()
            });
        }
        let members = &mut f.groups[gid];
        members.extend(cone);
        members.sort_unstable();
    }
    super::stages::absorb_stages(g, live, &mut f);
    super::epilogue::absorb_epilogues(g, live, &mut f);
    f
}

/// How many kernels may recompute one node before it is materialized instead (reductions
/// over the same rows count as one kernel: they will be its stages, see [`kernel_classes`]).
pub const MAX_RECOMPUTES: usize = 2;

/// Per group, the kernel it is expected to end in: reductions over the same trailing dims of
/// the same iteration space share one (the first's), as they join one kernel as stages
/// (`passes/stages.rs`); every other group is its own.
fn kernel_classes(g: &Graph, f: &Fusion) -> Vec<u32> {
    let row_key = |gid: usize| {
        let r = g.node(*f.groups[gid].first()?);
        match r.kind {
            NodeKind::Reduce { dims, .. } if f.closed[gid] => Some((r.iteration_shape().to_vec(), dims)),
            _ => None,
        }
    };
    // The first group of each key, found in one walk.
    let mut first: ahash::AHashMap<_, u32> = ahash::AHashMap::new();
    (0..f.groups.len()).map(|gid| row_key(gid).map_or(gid as u32, |k| *first.entry(k).or_insert(gid as u32))).collect()
}

/// Which nodes get a buffer (see [`Fusion::materialized`]).
fn materialized(g: &Graph, live: &[bool], f: &Fusion) -> Vec<bool> {
    // Nodes outside the elementwise groups (reductions included) always get a buffer.
    let mut m: Vec<bool> = f.group_of.iter().map(|gid| gid.is_none_or(|gid| f.closed[gid as usize])).collect();
    // Groups some other kernel may recompute a member of.
    let mut recomputed = vec![false; f.groups.len()];
    for (id, node) in g.nodes.iter().enumerate().filter(|(id, _)| live[*id]) {
        let fusable_reader = f.group_of[id].is_some();
        for u in &node.reads {
            let Some(home) = f.group_of[u.node as usize] else { continue };
            let inside = f.group_of[id] == Some(home) || fusable_reader;
            if !(inside && same_index(g, id as NodeId, u.node, &u.layout)) {
                m[u.node as usize] = true;
            } else if f.group_of[id] != Some(home) {
                recomputed[home as usize] = true;
            }
        }
    }
    // Draws are computed once, by their own kernel: reduction kernels can't draw, and a copy in
    // another kernel would draw again (a Philox block per four elements at best, far more than
    // a load).
    for (id, node) in g.nodes.iter().enumerate() {
        if matches!(node.kind, NodeKind::Rand(_)) && f.group_of[id].is_some_and(|h| recomputed[h as usize]) {
            m[id] = true;
        }
    }
    for &o in &g.outputs {
        m[o as usize] = true;
    }
    m
}

/// The nodes group `gid`'s kernel recomputes: the non-materialized members of other groups
/// behind what its members read element for element, in trace order.
fn cone(g: &Graph, f: &Fusion, gid: u32) -> Vec<NodeId> {
    let own = |n: NodeId| f.group_of[n as usize] == Some(gid);
    let mut cone: Vec<NodeId> = Vec::new();
    let mut stack: Vec<NodeId> = f.groups[gid as usize].clone();
    while let Some(m) = stack.pop() {
        for u in &g.node(m).reads {
            let v = u.node;
            let recomputed = f.group_of[v as usize].is_some() && !f.materialized[v as usize] && !own(v);
            if recomputed && !cone.contains(&v) {
                debug_assert!(same_index(g, m, v, &u.layout), "non-materialized values are read element for element");
                cone.push(v);
                stack.push(v);
            }
        }
    }
    cone.sort_unstable();
    cone
}

/// Whether `id` may join group `gid`: every read of a member is element for element, and no
/// other read waits for the group in `steps` (the nodes before `id`, groups condensed), which
/// would make a cycle.
fn may_join(g: &Graph, f: &Fusion, steps: &mut GroupGraph, id: NodeId, gid: u32) -> Result<(), String> {
    let node = g.node(id);
    for v in &node.reads {
        if f.group_of[v.node as usize] == Some(gid) && !same_index(g, id, v.node, &v.layout) {
            return Err(format!("reads member {} of kernel {gid} through a view", v.node));
        }
    }
    let outside: SmallVec<[NodeId; 3]> =
        node.reads.iter().map(|u| u.node).filter(|&r| f.group_of[r as usize] != Some(gid)).collect();
    if steps.waits_for_group(g, gid, &outside) {
        return Err(format!(
            "joining kernel {gid} would make a cycle (another read depends on it through a node outside it)"
        ));
    }
    Ok(())
}

/// Per node, the most reductions on one path from the inputs to it (a reduction counts for
/// the nodes after it).
fn reduction_levels(g: &Graph) -> Vec<u32> {
    let mut level = vec![0u32; g.nodes.len()];
    for (n, node) in g.nodes.iter().enumerate() {
        level[n] = node
            .reads
            .iter()
            .map(|u| level[u.node as usize] + matches!(g.node(u.node).kind, NodeKind::Reduce { .. }) as u32)
            .max()
            .unwrap_or(0);
    }
    level
}

/// Per node, whether a reduction reads it, directly or through elementwise nodes.
fn feeds_reduction(g: &Graph) -> Vec<bool> {
    let mut feeds = vec![false; g.nodes.len()];
    for (n, node) in g.nodes.iter().enumerate().rev() {
        let reduces = matches!(node.kind, NodeKind::Reduce { .. });
        if reduces || (feeds[n] && node.kind.is_elementwise()) {
            for u in &node.reads {
                feeds[u.node as usize] = true;
            }
        }
    }
    feeds
}

/// The group `id` joins, or why it cannot join any (`None`: it has no elementwise producer, so
/// there was nothing to refuse). Horizontally, `id` joins no group with a member after more
/// reductions than it (`levels` per node, `group_level` per group) when a reduction reads `id`
/// (`feeds`): the group's step would wait for a reduction `id` does not need, which can keep
/// that later reduction over the same rows from joining the earlier one's kernel
/// (cross-entropy's target cast beside `log Σ`). Nodes no reduction reads (an optimizer's
/// update beside its gradient's chain) may wait. `steps`: the nodes before `id`, groups
/// condensed (see [`may_join`]).
fn choose_group(
    g: &Graph,
    f: &Fusion,
    steps: &mut GroupGraph,
    id: NodeId,
    levels: &[u32],
    feeds: &[bool],
    group_level: &[u32],
) -> Result<u32, Option<String>> {
    let node = g.node(id);
    let mut reason = None;
    for u in &node.reads {
        let Some(gid) = f.group_of[u.node as usize] else {
            continue;
        };
        let producer = g.node(u.node);
        if producer.shape != node.shape {
            reason.get_or_insert_with(|| {
                format!(
                    "producer {} ({}) has shape {:?}, this node {:?}",
                    u.node,
                    producer.kind.name(),
                    producer.shape,
                    node.shape
                )
            });
            continue;
        }
        if !same_index(g, id, u.node, &u.layout) {
            reason.get_or_insert_with(|| {
                format!(
                    "producer {} ({}) is read through a view (strides {:?}, offset {})",
                    u.node,
                    producer.kind.name(),
                    u.layout.strides(),
                    u.layout.offset()
                )
            });
            continue;
        }
        match may_join(g, f, steps, id, gid) {
            Ok(()) => return Ok(gid),
            Err(why) => reason = Some(why),
        }
    }
    // Horizontal: the latest groups of this shape that nothing this node reads depends on.
    let recent =
        f.groups.iter().enumerate().rev().filter(|(_, m)| g.node(m[0]).shape == node.shape).take(HORIZONTAL_WINDOW);
    for (gid, _) in recent {
        if (group_level[gid] <= levels[id as usize] || !feeds[id as usize])
            && may_join(g, f, steps, id, gid as u32).is_ok()
        {
            return Ok(gid as u32);
        }
    }
    Err(reason)
}

/// How many of the latest groups of the same shape a node without a fusable producer tries.
const HORIZONTAL_WINDOW: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Node, NodeKind, Phase, Use};
    use kiln_runtime::op_kind::{BinaryOp, UnaryOp};
    use kiln_runtime::DType;
    use kiln_runtime::Layout;
    use smallvec::SmallVec;

    fn push(g: &mut Graph, kind: NodeKind, shape: &[usize], reads: &[(NodeId, Layout)]) -> NodeId {
        let reads: SmallVec<_> = reads.iter().map(|(n, l)| Use { node: *n, layout: l.clone() }).collect();
        g.push(Node { kind, shape: shape.into(), dtype: DType::F32, reads }, Phase::Forward)
    }

    #[test]
    fn chains_fuse_and_views_split() {
        let mut g = Graph::default();
        let c = Layout::contiguous(&[4, 4]);
        let x = push(&mut g, NodeKind::Input { slot: 0, len: 16 }, &[16], &[]);
        let a = push(&mut g, NodeKind::Unary(UnaryOp::Exp), &[4, 4], &[(x, c.clone())]);
        let b = push(&mut g, NodeKind::Binary(BinaryOp::Mul), &[4, 4], &[(a, c.clone()), (x, c.clone())]);
        let t = push(&mut g, NodeKind::Unary(UnaryOp::Neg), &[4, 4], &[(b, c.transpose(0, 1))]);
        g.outputs.push(t);
        let f = fuse(&g, &[true; 4]);
        assert_eq!(f.groups, vec![vec![a, b], vec![t]]);
        assert!(f.refusals[0].1.contains("through a view"), "{:?}", f.refusals);
    }

    #[test]
    fn no_cycle_through_an_opaque_node() {
        let mut g = Graph::default();
        let c = Layout::contiguous(&[4]);
        let x = push(&mut g, NodeKind::Input { slot: 0, len: 4 }, &[4], &[]);
        let a = push(&mut g, NodeKind::Unary(UnaryOp::Exp), &[4], &[(x, c.clone())]);
        let m = push(&mut g, NodeKind::Opaque { name: "sort", key: 1, index: 0 }, &[4], &[(a, c.clone())]);
        let b = push(&mut g, NodeKind::Binary(BinaryOp::Add), &[4], &[(a, c.clone()), (m, c.clone())]);
        g.outputs.push(b);
        let f = fuse(&g, &[true; 4]);
        assert_eq!(f.groups, vec![vec![a], vec![b]]);
        assert!(f.refusals[0].1.contains("cycle"), "{:?}", f.refusals);
    }

    /// The level rule holds for nodes a reduction reads, not for the others: beside a group
    /// after a row sum, a node of the same shape that no reduction reads (an optimizer's
    /// update) joins it; one whose value is summed again starts its own kernel.
    #[test]
    fn only_nodes_a_reduction_reads_keep_out_of_groups_after_a_reduction() {
        use kiln_runtime::op_kind::ReduceOp;
        for summed in [false, true] {
            let mut g = Graph::default();
            let c = Layout::contiguous(&[4, 4]);
            let x = push(&mut g, NodeKind::Input { slot: 0, len: 16 }, &[4, 4], &[]);
            let y = push(&mut g, NodeKind::Input { slot: 1, len: 16 }, &[4, 4], &[]);
            let sum = NodeKind::Reduce { op: ReduceOp::Sum, dims: 0b10, divide: None, index: 0 };
            let r = push(&mut g, sum.clone(), &[4, 1], &[(x, c.clone())]);
            let after = push(
                &mut g,
                NodeKind::Binary(BinaryOp::Mul),
                &[4, 4],
                &[(x, c.clone()), (r, Layout::contiguous(&[4, 1]).broadcast_to(&[4, 4]).expect("broadcasts"))],
            );
            let beside = push(&mut g, NodeKind::Unary(UnaryOp::Exp), &[4, 4], &[(y, c.clone())]);
            g.outputs.extend([after, beside]);
            if summed {
                let total = push(&mut g, sum, &[4, 1], &[(beside, c.clone())]);
                g.outputs.push(total);
            }
            let f = fuse(&g, &vec![true; g.nodes.len()]);
            assert_eq!(
                f.group_of[beside as usize] == f.group_of[after as usize],
                !summed,
                "summed: {summed}, groups {:?}",
                f.groups
            );
        }
    }

    /// A chain that three reduction kernels would recompute (dropout's `rand >= p`, cast and
    /// scale, read by three kernels): only its last node is materialized; the others are
    /// computed once, inside the kernel that writes it.
    #[test]
    fn only_the_last_of_an_overly_recomputed_chain_is_materialized() {
        use kiln_runtime::op_kind::ReduceOp;
        let mut g = Graph::default();
        let shape = [2, 2, 4];
        let c = Layout::contiguous(&shape);
        let x = push(&mut g, NodeKind::Input { slot: 0, len: 16 }, &shape, &[]);
        let a = push(&mut g, NodeKind::Unary(UnaryOp::Exp), &shape, &[(x, c.clone())]);
        let b = push(&mut g, NodeKind::Binary(BinaryOp::Mul), &shape, &[(a, c.clone()), (x, c.clone())]);
        let last = push(&mut g, NodeKind::Unary(UnaryOp::Neg), &shape, &[(b, c.clone())]);
        for (dims, out) in [(0b100u64, vec![2, 2, 1]), (0b110, vec![2, 1, 1]), (0b111, vec![1, 1, 1])] {
            let sum = NodeKind::Reduce { op: ReduceOp::Sum, dims, divide: None, index: 0 };
            let r = push(&mut g, sum, &out, &[(last, c.clone())]);
            g.outputs.push(r);
        }
        let f = fuse(&g, &vec![true; g.nodes.len()]);
        assert!(f.materialized[last as usize], "{:?}", f.refusals);
        assert!(!f.materialized[a as usize] && !f.materialized[b as usize], "{:?}", f.refusals);
        assert_eq!(f.refusals.iter().filter(|r| r.1.starts_with("materialized")).count(), 1, "{:?}", f.refusals);
    }

    /// Random DAGs of elementwise and opaque nodes over two shapes: fusion never makes a
    /// cycle, and the schedule runs every step after the steps it reads from.
    #[test]
    fn random_graphs_schedule_acyclically() {
        use crate::passes::schedule::{schedule, StepKind};
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..300 {
            let mut g = Graph::default();
            let shapes = [[4usize, 4], [2, 8]];
            let x = push(&mut g, NodeKind::Input { slot: 0, len: 16 }, &[16], &[]);
            let mut pool: Vec<(NodeId, usize)> = vec![];
            for _ in 0..(5 + next(25)) {
                let si = next(2) as usize;
                let shape = shapes[si];
                let c = Layout::contiguous(&shape);
                let pick = |next: &mut dyn FnMut(u64) -> u64, pool: &[(NodeId, usize)]| -> (NodeId, Layout) {
                    let same: Vec<_> = pool.iter().filter(|(_, s)| *s == si).collect();
                    if same.is_empty() || next(4) == 0 {
                        (x, Layout::contiguous(&shape))
                    } else {
                        let (n, _) = same[next(same.len() as u64) as usize];
                        let l = if next(5) == 0 {
                            Layout::contiguous(&shape).transpose(0, 1).permute(&[1, 0])
                        } else {
                            c.clone()
                        };
                        (*n, l)
                    }
                };
                let a = pick(&mut next, &pool);
                let b = pick(&mut next, &pool);
                let kind = if next(5) == 0 {
                    NodeKind::Opaque { name: "op", key: 0, index: 0 }
                } else {
                    NodeKind::Binary(BinaryOp::Add)
                };
                let id = push(&mut g, kind, &shape, &[a, b]);
                pool.push((id, si));
            }
            g.outputs = pool.iter().map(|(n, _)| *n).collect();
            let live = vec![true; g.nodes.len()];
            let f = fuse(&g, &live);
            let s = schedule(&g, &live, &f);
            let mut done = vec![false; g.nodes.len()];
            done[x as usize] = true;
            for step in &s.steps {
                let members: Vec<NodeId> = match step {
                    StepKind::Group(gid) => f.groups[*gid as usize].clone(),
                    StepKind::Node(n) => vec![*n],
                };
                for &m in &members {
                    for u in &g.node(m).reads {
                        assert!(
                            done[u.node as usize] || members.contains(&u.node),
                            "node {m} reads {} before it is computed",
                            u.node
                        );
                    }
                }
                for &m in &members {
                    done[m as usize] = true;
                }
            }
        }
    }
}
