//! Epilogues: an elementwise kernel over a reduction's input that reads the reduced value (of
//! any of the kernel's stages) broadcast back over the reduced dims (softmax's division,
//! log_softmax's subtraction, layer norm's normalisation) joins the reduction's kernel, which
//! computes it in one more sweep of each output's elements once the output is reduced.
//!
//! A group joins when the reduced dims are the input's trailing dims (the epilogue's outputs are
//! then written in the group's own row-major order) and each value it reads from outside is
//! the reduced value or a *row* value broadcast the same way, a scalar, or a materialized value
//! whose step doesn't wait for the reduction. Row values are elementwise nodes over the
//! reduction's result computed from it (layer norm's `rsqrt(var + eps)`): the epilogue
//! recomputes them at every element, so their own kernel is dead when nothing else needs them.

use super::groups::{Fusion, GroupGraph};
use crate::ir::{Graph, NodeId, NodeKind, Use};
use kiln_runtime::Layout;

/// Joins every group that qualifies (see the module docs) to the reduction kernel it reads.
pub(crate) fn absorb_epilogues(g: &Graph, live: &[bool], f: &mut Fusion) {
    for k in 0..f.groups.len() as u32 {
        let Some(parts) = f.parts[k as usize].clone() else { continue };
        let rs = parts.reductions();
        let r = rs[0];
        let node = g.node(r);
        let NodeKind::Reduce { dims: mask, .. } = node.kind else { unreachable!("closed groups end with a reduction") };
        let input = node.iteration_shape().to_vec();
        let rank = input.len();
        if rank > 63 || !node.reduces_trailing_dims() {
            continue; // the epilogue's outputs would be permuted
        }
        let dep = depends_on(g, &rs);
        let late = GroupGraph::of(g, live, f).waiting_for(r);
        let row_view = row_layout(&input, mask);
        let rows = row_nodes(g, live, f, &rs, &dep, &late);
        let mut epilogue = Vec::new();
        let mut used_rows: Vec<NodeId> = Vec::new();
        for h in 0..f.groups.len() as u32 {
            if f.closed[h as usize]
                || !f.is_needed(h)
                || g.node(f.groups[h as usize][0]).shape.as_slice() != input.as_slice()
            {
                continue;
            }
            let own: Vec<NodeId> =
                f.groups[h as usize].iter().copied().filter(|&m| f.group_of[m as usize] == Some(h)).collect();
            let draws = f.groups[h as usize].iter().any(|&m| matches!(g.node(m).kind, NodeKind::Rand(_)));
            if draws || !own.iter().all(|&m| dep[m as usize]) {
                continue; // reduction kernels don't draw; members before the reduction can't follow it
            }
            let mut reads_r = false;
            let mut uses: Vec<NodeId> = Vec::new();
            let ok = reads_only(g, f, h, &late, |u| {
                ((rs.contains(&u.node) || rows.contains(&u.node)) && same_view(&u.layout, &row_view)).then(|| {
                    reads_r = true;
                    uses.push(u.node);
                    true
                })
            });
            if !ok || !reads_r {
                continue;
            }
            f.refusals.push((own[0], format!("joins reduction {r}'s kernel as its epilogue")));
            epilogue.extend(f.groups[h as usize].iter().copied());
            for &m in &own {
                f.group_of[m as usize] = Some(k);
            }
            f.groups[h as usize].clear();
            used_rows.extend(uses.into_iter().filter(|u| !rs.contains(u)));
        }
        if epilogue.is_empty() {
            continue;
        }
        let used_rows = row_closure(g, &rows, used_rows);
        epilogue.extend(&used_rows);
        epilogue.sort_unstable();
        epilogue.dedup();
        let members = &mut f.groups[k as usize];
        members.extend(&epilogue);
        members.sort_unstable();
        members.dedup();
        // Consumers first, so that a row value only its absorbed readers needed is dropped too.
        for &q in used_rows.iter().rev() {
            f.materialized[q as usize] = false;
            f.materialized[q as usize] = read_elsewhere(g, live, f, k, q, &used_rows);
        }
        f.parts[k as usize] = Some(super::groups::ReduceParts { epilogue, rows: used_rows, ..parts });
    }
}

/// True when every value group `h` reads from outside its kernel passes: `special(u)` decides
/// a read when it answers (`Some`), otherwise the value must be a scalar or a materialized
/// value whose step doesn't wait for the kernel being joined (`late`).
pub(crate) fn reads_only(
    g: &Graph,
    f: &Fusion,
    h: u32,
    late: &[bool],
    mut special: impl FnMut(&Use) -> Option<bool>,
) -> bool {
    f.groups[h as usize].iter().all(|&m| {
        g.node(m).reads.iter().filter(|u| !f.computes(h, u.node)).all(|u| {
            special(u).unwrap_or_else(|| {
                matches!(g.node(u.node).kind, NodeKind::Scalar { .. })
                    || (f.materialized[u.node as usize] && !late[u.node as usize])
            })
        })
    })
}

/// True when `q` leaves the step or a step other than group `k`'s reads it: a node outside
/// the groups, or a member (own or recomputed) of another group that runs, unless that member
/// is a row value `k` recomputes (`rows`) that nothing else needs.
pub(crate) fn read_elsewhere(g: &Graph, live: &[bool], f: &Fusion, k: u32, q: NodeId, rows: &[NodeId]) -> bool {
    let reads_q =
        |n: NodeId| g.node(n).reads.iter().any(|u| u.node == q) && (!rows.contains(&n) || f.materialized[n as usize]);
    let eager_reader = (0..g.nodes.len()).any(|n| live[n] && f.group_of[n].is_none() && reads_q(n as NodeId));
    let kernel_reader = (0..f.groups.len() as u32)
        .any(|h| h != k && f.is_needed(h) && f.groups[h as usize].iter().any(|&m| reads_q(m)));
    g.outputs.contains(&q) || eager_reader || kernel_reader
}

/// Per node, whether its value depends on one of `rs` (in trace order).
pub(crate) fn depends_on(g: &Graph, rs: &[NodeId]) -> Vec<bool> {
    let mut dep = vec![false; g.nodes.len()];
    for &r in rs {
        dep[r as usize] = true;
    }
    for n in rs[0] as usize + 1..g.nodes.len() {
        dep[n] = dep[n] || g.nodes[n].reads.iter().any(|u| dep[u.node as usize]);
    }
    dep
}

/// The row values of reductions `rs` (one kernel's stages, of one result shape; none when they
/// reduce nothing): live elementwise nodes of their result's shape computed from them, element
/// for element, with scalars and materialized values that don't wait for them.
pub(crate) fn row_nodes(
    g: &Graph,
    live: &[bool],
    f: &Fusion,
    rs: &[NodeId],
    dep: &[bool],
    late: &[bool],
) -> Vec<NodeId> {
    let shape = &g.node(rs[0]).shape;
    let mut rows: Vec<NodeId> = Vec::new();
    if shape.iter().product::<usize>() == g.node(rs[0]).iteration_shape().iter().product::<usize>() {
        // Nothing is reduced: a value over the result is one over the input too, and is an
        // epilogue member rather than a row value.
        return rows;
    }
    for n in rs[0] as usize + 1..g.nodes.len() {
        let node = &g.nodes[n];
        if !live[n] || !dep[n] || !node.kind.is_elementwise() || node.shape != *shape {
            continue;
        }
        let ok = node.reads.iter().all(|u| {
            let same = u.layout == Layout::contiguous(shape) && g.node(u.node).shape == *shape;
            ((rs.contains(&u.node) || rows.contains(&u.node)) && same)
                || matches!(g.node(u.node).kind, NodeKind::Scalar { .. })
                || (f.materialized[u.node as usize] && !late[u.node as usize])
        });
        if ok {
            rows.push(n as NodeId);
        }
    }
    rows
}

/// `used` and the row values they are computed from, in trace order.
pub(crate) fn row_closure(g: &Graph, rows: &[NodeId], mut used: Vec<NodeId>) -> Vec<NodeId> {
    let mut i = 0;
    while i < used.len() {
        let q = used[i];
        for u in &g.node(q).reads {
            if rows.contains(&u.node) && !used.contains(&u.node) {
                used.push(u.node);
            }
        }
        i += 1;
    }
    used.sort_unstable();
    used
}

/// The view over `input` of a value indexed by the kept dims (the reduction's result),
/// broadcast along the reduced dims `mask`.
pub(crate) fn row_layout(input: &[usize], mask: u64) -> Layout {
    let mut strides = vec![0usize; input.len()];
    let mut step = 1;
    for d in (0..input.len()).rev() {
        if mask & (1 << d) == 0 {
            strides[d] = step;
            step *= input[d];
        }
    }
    Layout::new(input.into(), strides.into(), 0)
}

/// True when two views address the same elements (strides of size-1 dims don't matter).
pub(crate) fn same_view(a: &Layout, b: &Layout) -> bool {
    a.shape() == b.shape()
        && a.offset() == b.offset()
        && a.shape().iter().zip(a.strides().iter().zip(b.strides())).all(|(&n, (x, y))| n <= 1 || x == y)
}
