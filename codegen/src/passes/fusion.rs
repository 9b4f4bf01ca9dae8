//! Fusion: elementwise nodes of one iteration space become one kernel.
//!
//! Nodes are visited in trace order. An elementwise node joins the group of the first of its
//! producers that is an elementwise node of the same shape read element for element (no
//! broadcast, no transpose), unless joining would make a cycle (another of its reads depends,
//! through a node outside the group, on the group) or it reads a member of that group through a
//! view. Otherwise it starts a group. Every refusal is written down with its reason (printed
//! under `KILN_DEBUG=fusion`). Members read by anything outside the group, or leaving the step,
//! are the group's outputs; the others never touch memory.

use crate::ir::{Graph, NodeId};
use kiln_runtime::Layout;

/// The fusion groups of a graph.
#[derive(Clone, Debug, Default)]
pub struct Fusion {
    /// Each group's members, in trace order.
    pub groups: Vec<Vec<NodeId>>,
    /// The group of each node (`None` for nodes outside every group).
    pub group_of: Vec<Option<u32>>,
    /// Why a node started a new group instead of joining a producer's (node, reason).
    pub refusals: Vec<(NodeId, String)>,
}

/// A small growable bitset over group ids.
#[derive(Clone, Default)]
struct Bits(Vec<u64>);

impl Bits {
    fn set(&mut self, i: u32) {
        let w = (i / 64) as usize;
        if self.0.len() <= w {
            self.0.resize(w + 1, 0);
        }
        self.0[w] |= 1 << (i % 64);
    }
    fn has(&self, i: u32) -> bool {
        self.0.get((i / 64) as usize).is_some_and(|w| w & (1 << (i % 64)) != 0)
    }
    fn union(&mut self, o: &Bits) {
        if self.0.len() < o.0.len() {
            self.0.resize(o.0.len(), 0);
        }
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            *a |= b;
        }
    }
}

/// True when `reader` reads `node`'s value element for element over the same shape.
pub fn same_index(g: &Graph, reader: NodeId, node: NodeId, layout: &Layout) -> bool {
    let (r, n) = (g.node(reader), g.node(node));
    r.shape == n.shape && *layout == Layout::contiguous(&n.shape)
}

/// Groups the live elementwise nodes of `g` (`live[n]`: the node's value is needed).
pub fn fuse(g: &Graph, live: &[bool]) -> Fusion {
    let n = g.nodes.len();
    let mut f = Fusion { groups: Vec::new(), group_of: vec![None; n], refusals: Vec::new() };
    // anc[i]: the groups node i depends on (its own included).
    let mut anc: Vec<Bits> = vec![Bits::default(); n];
    for id in 0..n as NodeId {
        let node = g.node(id);
        let mut deps = Bits::default();
        for u in &node.reads {
            deps.union(&anc[u.node as usize]);
        }
        if live[id as usize] && node.kind.is_elementwise() {
            let chosen = choose_group(g, &f, &anc, id);
            let gid = match chosen {
                Ok(gid) => gid,
                Err(reason) => {
                    if let Some(reason) = reason {
                        f.refusals.push((id, reason));
                    }
                    f.groups.push(Vec::new());
                    (f.groups.len() - 1) as u32
                }
            };
            f.groups[gid as usize].push(id);
            f.group_of[id as usize] = Some(gid);
            deps.set(gid);
        }
        anc[id as usize] = deps;
    }
    f
}

/// The group `id` joins, or why it cannot join any (`None`: it has no elementwise producer, so
/// there was nothing to refuse).
fn choose_group(g: &Graph, f: &Fusion, anc: &[Bits], id: NodeId) -> Result<u32, Option<String>> {
    let node = g.node(id);
    let mut reason = None;
    for u in &node.reads {
        let Some(gid) = f.group_of[u.node as usize] else {
            continue;
        };
        let producer = g.node(u.node);
        if producer.shape != node.shape {
            reason.get_or_insert_with(|| format!("producer {} ({}) has shape {:?}, this node {:?}", u.node, producer.kind.name(), producer.shape, node.shape));
            continue;
        }
        if !same_index(g, id, u.node, &u.layout) {
            reason.get_or_insert_with(|| format!("producer {} ({}) is read through a view (strides {:?}, offset {})", u.node, producer.kind.name(), u.layout.strides(), u.layout.offset()));
            continue;
        }
        let mut ok = true;
        for v in &node.reads {
            if f.group_of[v.node as usize] == Some(gid) {
                if !same_index(g, id, v.node, &v.layout) {
                    reason = Some(format!("reads member {} of kernel {gid} through a view", v.node));
                    ok = false;
                    break;
                }
            } else if anc[v.node as usize].has(gid) {
                reason = Some(format!("joining kernel {gid} would make a cycle through node {} ({})", v.node, g.node(v.node).kind.name()));
                ok = false;
                break;
            }
        }
        if ok {
            return Ok(gid);
        }
    }
    Err(reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Node, NodeKind, Phase, Use};
    use kiln_runtime::op_kind::{BinaryOp, UnaryOp};
    use kiln_runtime::DType;
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
}
