//! Stages: a reduction kernel absorbs a later reduction over the same rows as one more stage
//! ([`crate::kernel::ReduceStage`]): per output, the later stage sweeps the row again while it
//! is still in cache, so the kernel reads memory once. The later reduction may read the
//! earlier ones' reduced values broadcast back over the reduced dims (softmax's `Σ exp(x -
//! max)` reads the max, layer norm's `Σ (x - mean)²` the mean), row values computed from them
//! (cross-entropy's pick `Σ where(c == t, x - max - log Σ, 0)` reads `log Σ`: recomputed once
//! per output, its own kernel is dead when nothing else needs it), or nothing of them
//! (cross-entropy's backward `Σ_c where(c == t, g, 0)` over the logits' rows).
//!
//! A reduction's kernel `h` joins an earlier kernel `k` when both reduce the same dims of the
//! same iteration space into the same result shape (over trailing dims), every value `h`
//! reads from outside is one of `k`'s reduced values or row values through the broadcast view,
//! a scalar, or a materialized value whose step doesn't wait for `k`, and nothing `k` reads
//! waits for `h` (the merged step would wait for itself).

use super::epilogue::{depends_on, read_elsewhere, reads_only, row_closure, row_layout, row_nodes, same_view};
use super::groups::{Fusion, GroupGraph};
use crate::ir::{Graph, NodeId, NodeKind};

/// Joins every reduction kernel that qualifies (see the module docs) to the earliest kernel it
/// can join, as its next stage; runs before the epilogues are absorbed.
pub(crate) fn absorb_stages(g: &Graph, live: &[bool], f: &mut Fusion) {
    for k in 0..f.groups.len() as u32 {
        let Some(first) = f.parts[k as usize].as_ref().map(|p| p.stages[0].reduce) else { continue };
        let node = g.node(first);
        let NodeKind::Reduce { dims: mask, .. } = node.kind else { unreachable!("closed groups end with a reduction") };
        if node.iteration_shape().len() > 63 || !node.reduces_trailing_dims() {
            continue;
        }
        let row_view = row_layout(node.iteration_shape(), mask);
        // What `k` offers a later reduction (its steps' graph, its stages, the nodes that wait
        // for it, its row values), found when first asked and again after each merge.
        let mut offer: Option<(GroupGraph, Vec<NodeId>, Vec<bool>, Vec<NodeId>)> = None;
        for h in k + 1..f.groups.len() as u32 {
            let Some(later) = f.parts[h as usize].as_ref().map(|p| p.stages[0].clone()) else { continue };
            let n2 = g.node(later.reduce);
            let NodeKind::Reduce { dims: mask2, .. } = n2.kind else {
                unreachable!("closed groups end with a reduction")
            };
            if mask2 != mask || n2.iteration_shape() != node.iteration_shape() || n2.shape != node.shape {
                continue;
            }
            let (steps, stages, late, rows) = offer.get_or_insert_with(|| {
                let mut steps = GroupGraph::of(g, live, f);
                let stages = f.parts[k as usize].as_ref().expect("k is a reduction kernel").reductions();
                let late = steps.waiting_for(first);
                let rows = row_nodes(g, live, f, &stages, &depends_on(g, &stages), &late);
                (steps, stages, late, rows)
            });
            let mut used_rows: Vec<NodeId> = Vec::new();
            let ok = reads_only(g, f, h, late, |u| {
                let row = rows.contains(&u.node);
                (stages.contains(&u.node) || row).then(|| {
                    if row {
                        used_rows.push(u.node);
                    }
                    same_view(&u.layout, &row_view)
                })
            });
            if !ok {
                continue;
            }
            let late_h = steps.waiting_for(later.reduce);
            let k_waits = f.groups[k as usize]
                .iter()
                .any(|&m| g.node(m).reads.iter().any(|u| !f.computes(k, u.node) && late_h[u.node as usize]));
            if k_waits {
                f.refusals.push((later.reduce, format!("can't join reduction {first}'s kernel as a stage: that kernel reads a value that waits for this one")));
                continue;
            }
            let used_rows = row_closure(g, rows, used_rows);
            let parts = f.parts[k as usize].as_mut().expect("k is a reduction kernel");
            f.refusals
                .push((later.reduce, format!("joins reduction {first}'s kernel as its stage {}", parts.stages.len())));
            parts.stages.push(super::groups::StageParts { rows: used_rows.clone(), ..later.clone() });
            let moved = std::mem::take(&mut f.groups[h as usize]);
            let members = &mut f.groups[k as usize];
            members.extend(moved);
            members.extend(&used_rows);
            members.sort_unstable();
            members.dedup();
            // Consumers first, so that a row value only this stage needed is dropped too.
            for &q in used_rows.iter().rev() {
                f.materialized[q as usize] = false;
                f.materialized[q as usize] = read_elsewhere(g, live, f, k, q, &used_rows);
            }
            f.group_of[later.reduce as usize] = Some(k);
            f.closed[h as usize] = false;
            f.parts[h as usize] = None;
            offer = None;
        }
    }
}
