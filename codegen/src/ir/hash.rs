//! The structural hash of a graph: equal for steps that can run the same plan.

use super::{Graph, NodeKind};
use crate::kernel::ahash_hasher;
use std::hash::{Hash, Hasher};

/// Hashes everything a plan depends on: each node's kind and attributes (an opaque op's key),
/// device, shape, dtype and reads (node and exact layout), and the output list.
/// Values of inputs and scalars are not part of it: they are arguments of the plan.
pub fn structural_hash(g: &Graph) -> u64 {
    let mut h = ahash_hasher();
    g.nodes.len().hash(&mut h);
    for (n, d) in g.nodes.iter().zip(&g.devices) {
        hash_kind(&n.kind, &mut h);
        d.hash(&mut h);
        n.shape.hash(&mut h);
        n.dtype.hash(&mut h);
        n.reads.len().hash(&mut h);
        for u in &n.reads {
            u.hash(&mut h);
        }
    }
    g.outputs.hash(&mut h);
    h.finish()
}

fn hash_kind(k: &NodeKind, h: &mut impl Hasher) {
    std::mem::discriminant(k).hash(h);
    match k {
        NodeKind::Input { slot, len } => (slot, len).hash(h),
        NodeKind::Scalar { slot } => slot.hash(h),
        NodeKind::Unary(op) => op.hash(h),
        NodeKind::Binary(op) => op.hash(h),
        NodeKind::Cmp(op) => op.hash(h),
        NodeKind::Logical(op) => op.hash(h),
        NodeKind::Not | NodeKind::Where | NodeKind::Cast => {}
        NodeKind::Rand(dist) => dist.hash(h),
        NodeKind::Assign { len, region } => (len, region).hash(h),
        NodeKind::Reduce { op, dims, divide, index } => (op, dims, divide, index).hash(h),
        NodeKind::Opaque { key, index, .. } => (key, index).hash(h),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Node, Phase, Use};
    use kiln_runtime::op_kind::UnaryOp;
    use kiln_runtime::{DType, Device, Layout};
    use smallvec::smallvec;

    fn chain(len: usize, op: UnaryOp) -> Graph {
        let mut g = Graph::default();
        let x = g.push(
            Node {
                kind: NodeKind::Input { slot: 0, len },
                shape: smallvec![len],
                dtype: DType::F32,
                reads: smallvec![],
            },
            Phase::Forward,
        );
        let y = g.push(
            Node {
                kind: NodeKind::Unary(op),
                shape: smallvec![len],
                dtype: DType::F32,
                reads: smallvec![Use { node: x, layout: Layout::contiguous(&[len]) }],
            },
            Phase::Forward,
        );
        g.outputs.push(y);
        g
    }

    #[test]
    fn hash_follows_structure_not_identity() {
        assert_eq!(structural_hash(&chain(4, UnaryOp::Exp)), structural_hash(&chain(4, UnaryOp::Exp)));
        assert_ne!(structural_hash(&chain(4, UnaryOp::Exp)), structural_hash(&chain(5, UnaryOp::Exp)));
        assert_ne!(structural_hash(&chain(4, UnaryOp::Exp)), structural_hash(&chain(4, UnaryOp::Log)));
    }

    #[test]
    fn hash_holds_the_device() {
        let on = |device| {
            let mut g = chain(4, UnaryOp::Exp);
            g.devices = vec![device; 2];
            structural_hash(&g)
        };
        assert_eq!(on(Device::Cpu), structural_hash(&chain(4, UnaryOp::Exp)));
        assert_ne!(on(Device::Cpu), on(Device::Cuda(0)));
        assert_ne!(on(Device::Cuda(0)), on(Device::Cuda(1)));
    }

    #[test]
    fn draws_hash_by_distribution_not_by_seed() {
        use crate::ir::RandDist;
        let draw = |dist| {
            let mut g = Graph::default();
            let reads = (0..4)
                .map(|slot| {
                    let s = g.push(
                        Node {
                            kind: NodeKind::Scalar { slot },
                            shape: smallvec![],
                            dtype: DType::I64,
                            reads: smallvec![],
                        },
                        Phase::Forward,
                    );
                    Use { node: s, layout: Layout::contiguous(&[]) }
                })
                .collect();
            let r = g.push(
                Node { kind: NodeKind::Rand(dist), shape: smallvec![8], dtype: DType::F32, reads },
                Phase::Forward,
            );
            g.outputs.push(r);
            structural_hash(&g)
        };
        // The seed and offset are scalar values, which the hash never sees.
        assert_eq!(draw(RandDist::Uniform), draw(RandDist::Uniform));
        assert_ne!(draw(RandDist::Uniform), draw(RandDist::Normal));
    }
}
