//! Which parameters an output's autograd graph reaches: what `find_unused_parameters` asks
//! after each forward (PyTorch's `prepare_for_backward` walks the graph from the outputs the
//! same way).

use crate::tensor::Tensor;
use std::collections::HashSet;
use std::sync::Arc;

/// Per parameter of `params`: whether backward from `output` can reach it (its
/// `AccumulateGrad` is in `output`'s graph, or `output` is the parameter itself).
pub(crate) fn reached(output: &Tensor, params: &[Tensor]) -> Vec<bool> {
    let mut hit = vec![false; params.len()];
    let mut mark = |leaf: &Tensor| {
        if let Some(i) = params.iter().position(|p| p.is_same(leaf)) {
            hit[i] = true;
        }
    };
    let Some(root) = output.grad_fn() else {
        mark(output);
        return hit;
    };
    let mut seen = HashSet::new();
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        if !seen.insert(Arc::as_ptr(&node.0)) {
            continue;
        }
        if let Some(leaf) = node.variable() {
            mark(&leaf);
        }
        stack.extend(node.next_functions().into_iter().flatten());
    }
    hit
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_parameters_an_output_depends_on() {
        let [a, b, c] = [0, 1, 2].map(|_| Tensor::ones([2]).requires_grad_(true));
        let y = (&(&a * &b) + &a).sum();
        assert_eq!(reached(&y, &[a.clone(), b.clone(), c.clone()]), vec![true, true, false]);
        assert_eq!(reached(&c, &[a.clone(), c.clone()]), vec![false, true]);
        let detached = (&c * 2.0).detach();
        assert_eq!(reached(&detached, &[c]), vec![false]);
    }
}
