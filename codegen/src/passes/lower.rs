//! Lowering a fusion group to an [`ElementwiseKernel`] and the arguments of its calls.

use super::fusion::same_index;
use crate::ir::{Graph, NodeId, NodeKind, Use};
use crate::kernel::{ElementwiseKernel, InnerStride, Inst, InstOp, KernelInput, Val};
use ahash::AHashMap;
use kiln_runtime::Shape;
use smallvec::SmallVec;

/// A group lowered: the kernel, what each of its inputs, scalars and outputs is bound to, and
/// the iteration space with dims merged wherever every input allows.
#[derive(Clone, Debug)]
pub struct LoweredGroup {
    /// The kernel (sizes and strides are not part of it: they are [`LoweredGroup::shape`] and
    /// [`LoweredGroup::strides`]).
    pub kernel: ElementwiseKernel,
    /// Kernel input `k` reads this (a node's value through a view of the group's shape).
    pub loads: Vec<Use>,
    /// Kernel scalar `j` is the value of this `Scalar` node (a node may appear more than once:
    /// each `Rand` member has four consecutive scalars of its own).
    pub scalars: Vec<NodeId>,
    /// Kernel output `o` is the value of this member.
    pub outputs: Vec<NodeId>,
    /// The iteration space after merging dims (rank ≥ 1).
    pub shape: Shape,
    /// Per input, its element strides over [`LoweredGroup::shape`] (input-major).
    pub strides: Vec<isize>,
}

/// Lowers `members` (one fusion group, trace order) of `g`; `is_output(n)` says whether a
/// member's value must be written out.
pub fn lower_group(g: &Graph, members: &[NodeId], is_output: impl Fn(NodeId) -> bool) -> LoweredGroup {
    let shape = g.node(members[0]).shape.clone();
    let mut val_of: AHashMap<NodeId, Val> = AHashMap::new();
    let mut load_of: AHashMap<Use, u32> = AHashMap::new();
    let mut scalar_of: AHashMap<NodeId, u32> = AHashMap::new();
    let mut insts: Vec<Inst> = Vec::new();
    let mut loads: Vec<Use> = Vec::new();
    let mut scalars: Vec<NodeId> = Vec::new();
    for &m in members {
        let node = g.node(m);
        if let NodeKind::Rand(dist) = node.kind {
            // The draw's four Scalar reads become four consecutive kernel scalars of its own.
            let params = scalars.len() as u32;
            scalars.extend(node.reads.iter().map(|u| u.node));
            insts.push(Inst { op: InstOp::Rand { dist, params }, dtype: node.dtype });
            val_of.insert(m, (insts.len() - 1) as Val);
            continue;
        }
        let mut args: SmallVec<[Val; 3]> = SmallVec::new();
        for u in &node.reads {
            let src = g.node(u.node);
            let v = if let (Some(&v), true) = (val_of.get(&u.node), same_index(g, m, u.node, &u.layout)) {
                v
            } else if let NodeKind::Scalar { .. } = src.kind {
                let j = *scalar_of.entry(u.node).or_insert_with(|| {
                    scalars.push(u.node);
                    (scalars.len() - 1) as u32
                });
                insts.push(Inst { op: InstOp::Scalar(j), dtype: src.dtype });
                (insts.len() - 1) as Val
            } else {
                let k = *load_of.entry(u.clone()).or_insert_with(|| {
                    loads.push(u.clone());
                    (loads.len() - 1) as u32
                });
                insts.push(Inst { op: InstOp::Load(k), dtype: src.dtype });
                (insts.len() - 1) as Val
            };
            args.push(v);
        }
        let op = match node.kind {
            NodeKind::Unary(op) => InstOp::Unary(op, args[0]),
            NodeKind::Binary(op) => InstOp::Binary(op, args[0], args[1]),
            NodeKind::Cmp(op) => InstOp::Cmp(op, args[0], args[1]),
            NodeKind::Logical(op) => InstOp::Logical(op, args[0], args[1]),
            NodeKind::Not => InstOp::Not(args[0]),
            NodeKind::Where => InstOp::Where(args[0], args[1], args[2]),
            NodeKind::Cast => InstOp::Cast(args[0]),
            ref k => unreachable!("{} is not elementwise", k.name()),
        };
        insts.push(Inst { op, dtype: node.dtype });
        val_of.insert(m, (insts.len() - 1) as Val);
    }
    let outputs: Vec<NodeId> = members.iter().copied().filter(|&m| is_output(m)).collect();
    let (merged, strides) = merge_dims(&shape, &loads);
    let inner = |k: usize| match strides[k * merged.len() + merged.len() - 1] {
        0 => InnerStride::Broadcast,
        1 => InnerStride::Unit,
        _ => InnerStride::Strided,
    };
    let kernel = ElementwiseKernel {
        rank: merged.len(),
        inputs: loads.iter().enumerate().map(|(k, u)| KernelInput { dtype: g.node(u.node).dtype, inner: inner(k) }).collect(),
        scalars: scalars.len(),
        outputs: outputs.iter().map(|m| val_of[m]).collect(),
        insts,
    };
    LoweredGroup { kernel, loads, scalars, outputs, shape: merged, strides }
}

/// Drops size-1 dims and merges neighbours `d, d+1` wherever every input steps through them as
/// one dim (the outputs are contiguous, so they always allow it). Returns the merged shape
/// (rank ≥ 1) and each input's strides over it.
fn merge_dims(shape: &[usize], loads: &[Use]) -> (Shape, Vec<isize>) {
    let keep: Vec<usize> = (0..shape.len()).filter(|&d| shape[d] != 1).collect();
    let mut dims: Vec<(usize, SmallVec<[usize; 8]>)> = Vec::new();
    for &d in &keep {
        let st: SmallVec<[usize; 8]> = loads.iter().map(|u| u.layout.strides()[d]).collect();
        if let Some((size, prev)) = dims.last_mut() {
            if prev.iter().zip(&st).all(|(&p, &s)| p == s * shape[d]) {
                *size *= shape[d];
                *prev = st;
                continue;
            }
        }
        dims.push((shape[d], st));
    }
    if dims.is_empty() {
        dims.push((shape.iter().product(), loads.iter().map(|_| 0).collect()));
    }
    let merged: Shape = dims.iter().map(|(s, _)| *s).collect();
    let mut strides = Vec::with_capacity(loads.len() * dims.len());
    for k in 0..loads.len() {
        strides.extend(dims.iter().map(|(_, st)| st[k] as isize));
    }
    (merged, strides)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_runtime::Layout;

    #[test]
    fn dims_merge_where_every_input_allows() {
        let c = Use { node: 0, layout: Layout::contiguous(&[2, 3, 4]) };
        let t = Use { node: 1, layout: Layout::contiguous(&[3, 2, 4]).permute(&[1, 0, 2]) };
        let (s, st) = merge_dims(&[2, 3, 4], &[c.clone()]);
        assert_eq!((s.as_slice(), st), (&[24usize][..], vec![1]));
        let (s, st) = merge_dims(&[2, 3, 4], &[c, t]);
        assert_eq!(s.as_slice(), &[2, 3, 4]);
        assert_eq!(st, vec![12, 4, 1, 4, 8, 1]);
        let b = Use { node: 2, layout: Layout::contiguous(&[1, 4]).broadcast_to(&[3, 4]).unwrap() };
        let (s, st) = merge_dims(&[3, 4], &[b]);
        assert_eq!((s.as_slice(), st), (&[3usize, 4][..], vec![0, 1]));
        let (s, _) = merge_dims(&[1, 1], &[]);
        assert_eq!(s.as_slice(), &[1]);
    }
}
