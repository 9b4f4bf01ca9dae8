//! Lowering a fusion group to a kernel ([`ElementwiseKernel`], or [`ReduceKernel`] for a group
//! that ends with a reduction) and the arguments of its calls.

use super::groups::same_index;
use super::groups::ReduceParts;
use crate::ir::{Graph, Node, NodeId, NodeKind, Use};
use crate::kernel::{
    ElementwiseKernel, Epilogue, InnerStride, Inst, InstOp, KernelInput, ReduceKernel, ReduceStage, Val,
};
use ahash::AHashMap;
use kiln_runtime::Layout;
use kiln_runtime::Shape;
use smallvec::SmallVec;

/// The kernel of a lowered group.
#[derive(Clone, Debug)]
pub enum GroupKernel {
    /// Elementwise members only.
    Elementwise(ElementwiseKernel),
    /// Elementwise members (the prologue) and the reduction that ends the group.
    Reduce(ReduceKernel),
}

impl GroupKernel {
    /// The kernel's structural hash (the kernel cache's key).
    pub fn structural_hash(&self) -> u64 {
        match self {
            GroupKernel::Elementwise(k) => k.structural_hash(),
            GroupKernel::Reduce(k) => k.structural_hash(),
        }
    }
}

/// Where a kernel's run-time scalar comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ScalarArg {
    /// The value of this `Scalar` node.
    Node(NodeId),
    /// A number the plan fixes (a mean's `1/count`).
    Value(f64),
}

/// A group lowered: the kernel, what each of its inputs, scalars and outputs is bound to, and
/// the iteration space with dims merged wherever every input allows.
#[derive(Clone, Debug)]
pub struct LoweredGroup {
    /// The kernel (sizes and strides are not part of it: they are [`LoweredGroup::shape`] and
    /// [`LoweredGroup::strides`]).
    pub kernel: GroupKernel,
    /// Kernel input `k` reads this (a node's value through a view of the iteration space).
    pub loads: Vec<Use>,
    /// Where kernel scalar `j` comes from (a node may appear more than once: each `Rand`
    /// member has four consecutive scalars of its own).
    pub scalars: Vec<ScalarArg>,
    /// Kernel output `o` is the value of this member.
    pub outputs: Vec<NodeId>,
    /// The iteration space after merging dims (rank ≥ 1); for a reduction, the kept dims
    /// first and the [`LoweredGroup::reduce_rank`] reduced dims last.
    pub shape: Shape,
    /// Per input, its element strides over [`LoweredGroup::shape`] (input-major).
    pub strides: Vec<isize>,
    /// How many trailing dims of [`LoweredGroup::shape`] a reduction reduces (0: elementwise).
    pub reduce_rank: usize,
    /// Per instruction (an elementwise kernel's; a reduction's, each stage's prologue in order
    /// and then the epilogue's), the node it computes or reads (a load's or scalar's source, a
    /// stage value's reduction): what a listing names.
    pub origins: Vec<NodeId>,
}

/// The instructions of a group's elementwise members, with the loads and scalars they read.
#[derive(Default)]
struct Body {
    insts: Vec<Inst>,
    /// Per instruction, the node it computes or reads ([`LoweredGroup::origins`]).
    origins: Vec<NodeId>,
    loads: Vec<Use>,
    scalars: Vec<ScalarArg>,
    val_of: AHashMap<NodeId, Val>,
    load_of: AHashMap<Use, u32>,
    scalar_of: AHashMap<NodeId, u32>,
    /// The reductions of the stages lowered so far: a later stage's prologue reads each as
    /// [`InstOp::Reduced`] of its stage (and dtype).
    stage_of: AHashMap<NodeId, (u32, kiln_runtime::DType)>,
    /// The row values the stage being lowered computed: its prologue reads them broadcast, as
    /// they are.
    rows: Vec<NodeId>,
}

impl Body {
    /// Appends an instruction computing (or reading) `node`'s value.
    fn push(&mut self, op: InstOp, dtype: kiln_runtime::DType, node: NodeId) -> Val {
        self.insts.push(Inst { op, dtype });
        self.origins.push(node);
        (self.insts.len() - 1) as Val
    }

    /// The value `reader` reads through `u`: an earlier stage's value, a member's value when read
    /// element for element, else a scalar argument or a load.
    fn operand(&mut self, g: &Graph, reader: NodeId, u: &Use) -> Val {
        if let Some(&(s, dtype)) = self.stage_of.get(&u.node) {
            // An earlier stage's value, read broadcast over the reduced dims.
            if let Some(&v) = self.val_of.get(&u.node) {
                return v;
            }
            let v = self.push(InstOp::Reduced(s), dtype, u.node);
            self.val_of.insert(u.node, v);
            return v;
        }
        let src = g.node(u.node);
        if let (Some(&v), true) =
            (self.val_of.get(&u.node), self.rows.contains(&u.node) || same_index(g, reader, u.node, &u.layout))
        {
            return v;
        }
        if let NodeKind::Scalar { .. } = src.kind {
            let scalars = &mut self.scalars;
            let j = *self.scalar_of.entry(u.node).or_insert_with(|| {
                scalars.push(ScalarArg::Node(u.node));
                (scalars.len() - 1) as u32
            });
            return self.push(InstOp::Scalar(j), src.dtype, u.node);
        }
        let loads = &mut self.loads;
        let k = *self.load_of.entry(u.clone()).or_insert_with(|| {
            loads.push(u.clone());
            (loads.len() - 1) as u32
        });
        self.push(InstOp::Load(k), src.dtype, u.node)
    }

    /// Appends elementwise member `m`.
    fn member(&mut self, g: &Graph, m: NodeId) {
        let node = g.node(m);
        if let NodeKind::Rand(dist) = node.kind {
            // The draw's four Scalar reads become four consecutive kernel scalars of its own.
            let params = self.scalars.len() as u32;
            self.scalars.extend(node.reads.iter().map(|u| ScalarArg::Node(u.node)));
            let v = self.push(InstOp::Rand { dist, params }, node.dtype, m);
            self.val_of.insert(m, v);
            return;
        }
        let args: SmallVec<[Val; 3]> = node.reads.iter().map(|u| self.operand(g, m, u)).collect();
        self.finish_member(node, m, &args);
    }

    /// Appends `m`'s instruction on operands `args`.
    fn finish_member(&mut self, node: &Node, m: NodeId, args: &[Val]) {
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
        let v = self.push(op, node.dtype, m);
        self.val_of.insert(m, v);
    }

    /// Appends epilogue member `m`: values the epilogue computed (the reduced value, row
    /// values read broadcast, members) are used as they are.
    fn epilogue_member(&mut self, g: &Graph, m: NodeId) {
        let node = g.node(m);
        let args: SmallVec<[Val; 3]> = node
            .reads
            .iter()
            .map(|u| self.val_of.get(&u.node).copied().unwrap_or_else(|| self.operand(g, m, u)))
            .collect();
        self.finish_member(node, m, &args);
    }

    /// Appends row value `m` (over the reduction's result), recomputed at every element of the
    /// iteration space `input` (reduced dims `mask`): its loads are seen through the same
    /// broadcast.
    fn row_member(&mut self, g: &Graph, m: NodeId, input: &[usize], mask: u64) {
        let node = g.node(m);
        let args: SmallVec<[Val; 3]> = node
            .reads
            .iter()
            .map(|u| match self.val_of.get(&u.node) {
                Some(&v) => v,
                None => {
                    let rebased = Use { node: u.node, layout: broadcast_rows(&u.layout, input, mask) };
                    self.operand(g, m, &rebased)
                }
            })
            .collect();
        self.finish_member(node, m, &args);
    }

    /// Each load's element strides over `dims` of the iteration space (in that order).
    fn strides(&self, dims: &[usize]) -> Vec<SmallVec<[isize; 8]>> {
        self.loads.iter().map(|u| dims.iter().map(|&d| u.layout.strides()[d] as isize).collect()).collect()
    }

    /// The kernel inputs, their inner strides read off `strides` (input-major over `rank` dims).
    fn inputs(&self, g: &Graph, strides: &[isize], rank: usize) -> Vec<KernelInput> {
        let inner = |k: usize| match strides[k * rank + rank - 1] {
            0 => InnerStride::Broadcast,
            1 => InnerStride::Unit,
            _ => InnerStride::Strided,
        };
        self.loads
            .iter()
            .enumerate()
            .map(|(k, u)| KernelInput { dtype: g.node(u.node).dtype, inner: inner(k) })
            .collect()
    }
}

/// Lowers `members` (one fusion group, trace order) of `g`, a reduction's kernel when `parts`
/// are given; `is_output(n)` says whether a member's value must be written out (a reduction's
/// value always is).
pub fn lower_group(
    g: &Graph,
    members: &[NodeId],
    parts: Option<&ReduceParts>,
    is_output: impl Fn(NodeId) -> bool,
) -> LoweredGroup {
    if let Some(parts) = parts {
        return lower_reduce(g, parts, is_output);
    }
    let mut body = Body::default();
    for &m in members {
        body.member(g, m);
    }
    let shape = g.node(members[0]).shape.clone();
    let all: Vec<usize> = (0..shape.len()).collect();
    let outputs: Vec<NodeId> = members.iter().copied().filter(|&m| is_output(m)).collect();
    let (merged, strides) = merge_dims(&shape, &body.strides(&all));
    let kernel = ElementwiseKernel {
        rank: merged.len(),
        inputs: body.inputs(g, &strides, merged.len()),
        scalars: body.scalars.len(),
        outputs: outputs.iter().map(|m| body.val_of[m]).collect(),
        insts: body.insts,
    };
    LoweredGroup {
        kernel: GroupKernel::Elementwise(kernel),
        loads: body.loads,
        scalars: body.scalars,
        outputs,
        shape: merged,
        strides,
        reduce_rank: 0,
        origins: body.origins,
    }
}

/// Lowers a reduction kernel: the kept dims come first, the reduced ones last, each part
/// merged (with an epilogue the reduced dims are already last, so its outputs keep the
/// iteration space's row-major order). Each stage's prologue reads the earlier stages' values
/// (read broadcast in the graph) as [`InstOp::Reduced`], and computes the row values it reads
/// from them first.
fn lower_reduce(g: &Graph, parts: &ReduceParts, is_output: impl Fn(NodeId) -> bool) -> LoweredGroup {
    let first = g.node(parts.stages[0].reduce);
    let NodeKind::Reduce { dims: mask, .. } = first.kind else { unreachable!("the parts name a reduction") };
    let in_shape = first.iteration_shape();
    let mut body = Body::default();
    let mut stages = Vec::with_capacity(parts.stages.len());
    let mut divides = Vec::with_capacity(parts.stages.len());
    let mut outputs = Vec::new();
    let mut origins = Vec::new();
    for (s, stage) in parts.stages.iter().enumerate() {
        let r = stage.reduce;
        let node = g.node(r);
        let NodeKind::Reduce { op, divide, .. } = node.kind else { unreachable!("the parts name reductions") };
        body.val_of.clear();
        for &m in &stage.rows {
            body.row_member(g, m, in_shape, mask);
        }
        body.rows.clone_from(&stage.rows);
        for &m in &stage.prologue {
            body.member(g, m);
        }
        // The reduction itself may read a row value (`Σ_j broadcast(max + c)`), so the rows
        // stay known until its operand is taken.
        let reduced = body.operand(g, r, &node.reads[0]);
        body.rows.clear();
        origins.append(&mut body.origins);
        stages.push(ReduceStage {
            insts: std::mem::take(&mut body.insts),
            reduced,
            op,
            output: node.dtype,
            scale: None,
        });
        divides.push(divide);
        body.stage_of.insert(r, (s as u32, node.dtype));
        outputs.push(r);
    }
    body.val_of.clear();
    let n_stages = stages.len();
    let epilogue = (!parts.epilogue.is_empty()).then(|| {
        for (s, stage) in parts.stages.iter().enumerate() {
            let reduced_value = body.push(InstOp::Reduced(s as u32), g.node(stage.reduce).dtype, stage.reduce);
            body.val_of.insert(stage.reduce, reduced_value);
        }
        for &m in &parts.epilogue {
            if parts.rows.contains(&m) {
                body.row_member(g, m, in_shape, mask);
            } else {
                body.epilogue_member(g, m);
            }
        }
        outputs.extend(parts.epilogue.iter().copied().filter(|&m| is_output(m) && !parts.rows.contains(&m)));
        origins.append(&mut body.origins);
        Epilogue {
            outputs: outputs[n_stages..].iter().map(|m| body.val_of[m]).collect(),
            insts: std::mem::take(&mut body.insts),
        }
    });
    let (kept, red): (Vec<usize>, Vec<usize>) = (0..in_shape.len()).partition(|&d| mask & (1 << d) == 0);
    let sizes = |dims: &[usize]| -> Vec<usize> { dims.iter().map(|&d| in_shape[d]).collect() };
    let (k_shape, k_strides) = merge_dims(&sizes(&kept), &body.strides(&kept));
    let (r_shape, r_strides) = merge_dims(&sizes(&red), &body.strides(&red));
    let (kr, rr) = (k_shape.len(), r_shape.len());
    let shape: Shape = k_shape.iter().chain(&r_shape).copied().collect();
    let mut strides = Vec::with_capacity(body.loads.len() * shape.len());
    for k in 0..body.loads.len() {
        strides.extend_from_slice(&k_strides[k * kr..(k + 1) * kr]);
        strides.extend_from_slice(&r_strides[k * rr..(k + 1) * rr]);
    }
    let count: usize = red.iter().map(|&d| in_shape[d]).product();
    for (stage, divide) in stages.iter_mut().zip(divides) {
        stage.scale = divide.map(|c| {
            body.scalars.push(ScalarArg::Value(1.0 / (count as f64 - c as f64).max(0.0)));
            (body.scalars.len() - 1) as u32
        });
    }
    let kernel = ReduceKernel {
        rank: shape.len(),
        reduce_rank: rr,
        inputs: body.inputs(g, &strides, shape.len()),
        scalars: body.scalars.len(),
        stages,
        epilogue,
    };
    LoweredGroup {
        kernel: GroupKernel::Reduce(kernel),
        loads: body.loads,
        scalars: body.scalars,
        outputs,
        shape,
        strides,
        reduce_rank: rr,
        origins,
    }
}

/// `layout` (a view over a reduction's result: the kept dims of `input`, with or without the
/// reduced dims as size 1) seen over `input`, broadcast along the reduced dims `mask`.
fn broadcast_rows(layout: &Layout, input: &[usize], mask: u64) -> Layout {
    let keepdim = layout.shape().len() == input.len();
    let mut kept = 0;
    let strides: Vec<usize> = (0..input.len())
        .map(|d| {
            if mask & (1 << d) != 0 {
                return 0;
            }
            let o = if keepdim { d } else { kept };
            kept += 1;
            layout.strides()[o]
        })
        .collect();
    Layout::new(input.into(), strides.into(), layout.offset())
}

/// Drops size-1 dims and merges neighbours `d, d+1` wherever every input steps through them as
/// one dim (the outputs are contiguous, so they always allow it); `strides[k]` are input `k`'s
/// strides over `shape`. Returns the merged shape (rank ≥ 1) and each input's strides over it
/// (input-major).
fn merge_dims(shape: &[usize], strides: &[SmallVec<[isize; 8]>]) -> (Shape, Vec<isize>) {
    let keep: Vec<usize> = (0..shape.len()).filter(|&d| shape[d] != 1).collect();
    let mut dims: Vec<(usize, SmallVec<[isize; 8]>)> = Vec::new();
    for &d in &keep {
        let st: SmallVec<[isize; 8]> = strides.iter().map(|s| s[d]).collect();
        if let Some((size, prev)) = dims.last_mut() {
            if prev.iter().zip(&st).all(|(&p, &s)| p == s * shape[d] as isize) {
                *size *= shape[d];
                *prev = st;
                continue;
            }
        }
        dims.push((shape[d], st));
    }
    if dims.is_empty() {
        dims.push((shape.iter().product(), strides.iter().map(|_| 0).collect()));
    }
    let merged: Shape = dims.iter().map(|(s, _)| *s).collect();
    let mut out = Vec::with_capacity(strides.len() * dims.len());
    for k in 0..strides.len() {
        out.extend(dims.iter().map(|(_, st)| st[k]));
    }
    (merged, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_merge_where_every_input_allows() {
        let st = |l: &Layout| -> SmallVec<[isize; 8]> { l.strides().iter().map(|&s| s as isize).collect() };
        let c = st(&Layout::contiguous(&[2, 3, 4]));
        let t = st(&Layout::contiguous(&[3, 2, 4]).permute(&[1, 0, 2]));
        let (s, strides) = merge_dims(&[2, 3, 4], &[c.clone()]);
        assert_eq!((s.as_slice(), strides), (&[24usize][..], vec![1]));
        let (s, strides) = merge_dims(&[2, 3, 4], &[c, t]);
        assert_eq!(s.as_slice(), &[2, 3, 4]);
        assert_eq!(strides, vec![12, 4, 1, 4, 8, 1]);
        let b = st(&Layout::contiguous(&[1, 4]).broadcast_to(&[3, 4]).unwrap());
        let (s, strides) = merge_dims(&[3, 4], &[b]);
        assert_eq!((s.as_slice(), strides), (&[3usize, 4][..], vec![0, 1]));
        let (s, _) = merge_dims(&[1, 1], &[]);
        assert_eq!(s.as_slice(), &[1]);
        let (s, _) = merge_dims(&[], &[]);
        assert_eq!(s.as_slice(), &[1]);
    }
}
