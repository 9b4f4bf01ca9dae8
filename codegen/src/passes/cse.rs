//! Dead-node removal and common subexpressions.

use crate::ir::{Graph, NodeId, NodeKind};
use ahash::AHashMap;

/// Which nodes the outputs need (`live[n]`), walking reads back from the outputs.
pub fn live_nodes(g: &Graph) -> Vec<bool> {
    let mut live = vec![false; g.nodes.len()];
    for &o in &g.outputs {
        live[o as usize] = true;
    }
    for id in (0..g.nodes.len()).rev() {
        if live[id] {
            for u in &g.nodes[id].reads {
                live[u.node as usize] = true;
            }
        }
    }
    live
}

/// Merges elementwise nodes and reductions that compute the same op of the same reads
/// (`x.exp()` written twice): reads of later copies, and the output list, are rewritten to the
/// first. Returns, per node, the node that now computes its value (itself when it was not
/// merged). `Rand` nodes merge only when they read the same `Scalar` nodes, i.e. the same draw;
/// every captured `rand` reads scalars of its own, so two draws never merge.
pub fn eliminate_common_subexpressions(g: &mut Graph) -> Vec<NodeId> {
    let mut replace: Vec<NodeId> = (0..g.nodes.len() as NodeId).collect();
    let mut seen: AHashMap<String, NodeId> = AHashMap::new();
    for id in 0..g.nodes.len() {
        for u in g.nodes[id].reads.iter_mut() {
            u.node = replace[u.node as usize];
        }
        let n = &g.nodes[id];
        // Opaque ops may draw random numbers: never merged. A reduction's closure index only
        // names its eager fallback, so it is left out of the key.
        let kind = match n.kind {
            NodeKind::Reduce { op, dims, divide, .. } => NodeKind::Reduce { op, dims, divide, index: 0 },
            ref k if k.is_elementwise() => k.clone(),
            _ => continue,
        };
        let key = format!("{:?}|{:?}|{:?}|{:?}", kind, n.shape, n.dtype, n.reads);
        match seen.get(&key) {
            Some(&first) => replace[id] = first,
            None => {
                seen.insert(key, id as NodeId);
            }
        }
    }
    for o in g.outputs.iter_mut() {
        *o = replace[*o as usize];
    }
    g.outputs.sort_unstable();
    g.outputs.dedup();
    replace
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Node, Phase, Use};
    use kiln_runtime::op_kind::{BinaryOp, UnaryOp};
    use kiln_runtime::{DType, Layout};
    use smallvec::smallvec;

    #[test]
    fn duplicates_merge_and_dead_nodes_drop() {
        let l = Layout::contiguous(&[3]);
        let mut g = Graph::default();
        let node = |kind, reads: &[NodeId]| Node {
            kind,
            shape: smallvec![3],
            dtype: DType::F32,
            reads: reads.iter().map(|&n| Use { node: n, layout: l.clone() }).collect(),
        };
        let x = g.push(node(NodeKind::Input { slot: 0, len: 3 }, &[]), Phase::Forward);
        let a = g.push(node(NodeKind::Unary(UnaryOp::Exp), &[x]), Phase::Forward);
        let b = g.push(node(NodeKind::Unary(UnaryOp::Exp), &[x]), Phase::Forward);
        let s = g.push(node(NodeKind::Binary(BinaryOp::Add), &[a, b]), Phase::Forward);
        let _dead = g.push(node(NodeKind::Unary(UnaryOp::Log), &[x]), Phase::Forward);
        g.outputs.push(s);
        let replace = eliminate_common_subexpressions(&mut g);
        assert_eq!(replace, vec![x, a, a, s, 4]);
        assert_eq!(g.node(s).reads[1].node, a);
        assert_eq!(live_nodes(&g), vec![true, true, false, true, false]);
    }

    #[test]
    fn draws_of_different_scalars_never_merge() {
        use crate::ir::RandDist;
        let mut g = Graph::default();
        let scalar = |g: &mut Graph, slot| {
            g.push(
                Node { kind: NodeKind::Scalar { slot }, shape: smallvec![], dtype: DType::I64, reads: smallvec![] },
                Phase::Forward,
            )
        };
        let draw = |g: &mut Graph, s: &[NodeId]| {
            let reads = s.iter().map(|&n| Use { node: n, layout: Layout::contiguous(&[]) }).collect();
            g.push(
                Node { kind: NodeKind::Rand(RandDist::Uniform), shape: smallvec![3], dtype: DType::F32, reads },
                Phase::Forward,
            )
        };
        let first: Vec<NodeId> = (0..4).map(|k| scalar(&mut g, k)).collect();
        let second: Vec<NodeId> = (4..8).map(|k| scalar(&mut g, k)).collect();
        let a = draw(&mut g, &first);
        let b = draw(&mut g, &second);
        let again = draw(&mut g, &first);
        g.outputs = vec![a, b, again];
        let replace = eliminate_common_subexpressions(&mut g);
        assert_eq!((replace[a as usize], replace[b as usize], replace[again as usize]), (a, b, a));
    }
}
