//! Which steps of a CPU plan run two at once: independent matrix products of similar size.
//!
//! A training step's backward has pairs of products that read the same gradient and nothing of
//! each other (a linear layer's `dW = gᵀ·x` and `dX = g·W`). The `gemm` crate splits one product
//! across threads, but small products scale poorly (measured on 2 threads: 1.15-1.6x for the
//! MLP's 128-512-wide products, slower than one thread for those with a side of 10), while
//! two products on one thread each run side by side. The scheduler places such a pair next to
//! each other and marks it; the executor runs a marked pair with one thread per product.
//!
//! Two products pair when both are ready at once (neither reads the other) and the larger does
//! at most twice the multiply-adds of the smaller: with `s` the 2-thread speed-up of one
//! product, the pair wins when `max(w, v) < (w + v) / s`, which for `s ≈ 1.5` needs the smaller
//! above half the larger. Both must also do at least [`MIN_PAIR_WORK`] multiply-adds: handing
//! one to another thread costs a wake-up (µs), which a tiny model's products do not repay.

use crate::ir::{Graph, NodeId, NodeKind};
use kiln_runtime::Device;

/// The names of the opaque matrix-product ops (`kiln::ops::matmul`'s).
const PRODUCTS: [&str; 5] = ["matmul", "mm", "bmm", "mv", "dot"];

/// The largest ratio of two paired products' multiply-adds.
const MAX_WORK_RATIO: usize = 2;

/// The fewest multiply-adds of a paired product: 2^18, about 10 µs on one core, several times
/// a thread's wake-up (a 16x8x2 product of a tiny MLP takes well under 1 µs).
pub const MIN_PAIR_WORK: usize = 1 << 18;

/// The multiply-adds of node `id` when it is a matrix product on the CPU (output elements times
/// the shared dimension), else `None`.
pub fn cpu_product_work(g: &Graph, id: NodeId) -> Option<usize> {
    let n = g.node(id);
    match n.kind {
        NodeKind::Opaque { name, .. } if PRODUCTS.contains(&name) && g.device(id) == Device::Cpu => {
            let k = n.reads.first()?.layout.shape().last().copied().unwrap_or(1);
            Some(n.numel().max(1) * k.max(1))
        }
        _ => None,
    }
}

/// Whether products of `a` and `b` multiply-adds run better side by side than one after the
/// other.
pub fn balanced(a: usize, b: usize) -> bool {
    a.min(b) >= MIN_PAIR_WORK && a.max(b) <= MAX_WORK_RATIO.saturating_mul(a.min(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Node, Phase, Use};
    use kiln_runtime::{DType, Layout};
    use smallvec::SmallVec;

    fn node(kind: NodeKind, shape: &[usize], reads: &[(NodeId, &[usize])]) -> Node {
        let reads: SmallVec<[Use; 3]> =
            reads.iter().map(|&(node, s)| Use { node, layout: Layout::contiguous(s) }).collect();
        Node { kind, shape: shape.into(), dtype: DType::F32, reads }
    }

    #[test]
    fn cpu_products_count_their_multiply_adds_and_nothing_else_pairs() {
        let mut g = Graph::default();
        let a = g.push(node(NodeKind::Input { slot: 0, len: 128 * 512 }, &[128, 512], &[]), Phase::Forward);
        let b = g.push(node(NodeKind::Input { slot: 1, len: 512 * 64 }, &[512, 64], &[]), Phase::Forward);
        let mm = NodeKind::Opaque { name: "mm", key: 0, index: 0 };
        let p = g.push(node(mm.clone(), &[128, 64], &[(a, &[128, 512]), (b, &[512, 64])]), Phase::Forward);
        let conv = g.push(
            node(NodeKind::Opaque { name: "conv2d", key: 0, index: 1 }, &[128, 64], &[(a, &[128, 512])]),
            Phase::Forward,
        );
        let on_gpu =
            g.push_on(node(mm, &[128, 64], &[(a, &[128, 512]), (b, &[512, 64])]), Phase::Forward, Device::Cuda(0));
        assert_eq!(cpu_product_work(&g, p), Some(128 * 64 * 512));
        assert_eq!([conv, on_gpu, a].map(|n| cpu_product_work(&g, n)), [None; 3]);
    }

    #[test]
    fn pairs_are_within_twice_each_other_and_large() {
        let w = MIN_PAIR_WORK;
        assert!(balanced(w, 2 * w) && balanced(2 * w, w) && balanced(w, w));
        assert!(!balanced(w, 2 * w + 1) && !balanced(w, 3 * w));
        assert!(!balanced(w - 1, w - 1) && !balanced(16 * 8 * 2, 16 * 8 * 2), "too small to pay a hand-over");
    }
}
