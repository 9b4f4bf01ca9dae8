//! The gradients that have arrived at one node during backward, and their sum when the node
//! runs.
//!
//! Dense gradients are summed as they arrive. Gradients of slices of the node's output (from
//! `narrow`, `split`, `chunk`, `select`) are kept apart until then: pieces that tile the output
//! along one dim become one `cat` (PyTorch's `split` backward), not a zero-padded copy each
//! added to the others. An LSTM's gates are four chunks of one product per step, and each step
//! is a slice of the input product over the whole sequence, so this turns O(pieces) full-size
//! sums into one copy.

use super::node::SliceOf;
use crate::tensor::Tensor;
use kiln_runtime::Shape;

/// A slice's gradient: `grad` is the gradient of `input.narrow(dim, start, grad.size(dim))`.
pub(super) struct Piece {
    dim: usize,
    start: usize,
    grad: Tensor,
}

impl Piece {
    /// The piece that the gradient `g` of the slice `slice` makes.
    pub(super) fn new(slice: SliceOf, g: Tensor) -> Piece {
        let grad = if slice.squeezed { g.unsqueeze(slice.dim as i64) } else { g };
        Piece { dim: slice.dim, start: slice.start, grad }
    }
}

/// The gradients arrived so far at a node whose output has shape `shape`.
#[derive(Default)]
pub(super) struct Arrived {
    sum: Option<Tensor>,
    pieces: Vec<Piece>,
    /// The output's shape, known from the first piece (the slice node's input shape).
    shape: Option<Shape>,
}

impl Arrived {
    /// Adds a dense gradient.
    pub(super) fn add(&mut self, g: Tensor) {
        self.sum = Some(match self.sum.take() {
            None => g,
            Some(b) => add_in_storage_order(&b, &g),
        });
    }

    /// Adds the gradient of a slice of an output of shape `shape`.
    pub(super) fn add_piece(&mut self, piece: Piece, shape: &[usize]) {
        self.shape.get_or_insert_with(|| shape.into());
        self.pieces.push(piece);
    }

    /// The total gradient (an op: recorded under `create_graph`), `None` when none arrived.
    pub(super) fn total(self) -> Option<Tensor> {
        let Arrived { sum, mut pieces, shape } = self;
        let Some(shape) = shape else { return sum };
        if sum.is_none() {
            if let Some(t) = tile(&mut pieces, &shape) {
                return Some(t);
            }
        }
        let mut total = Arrived { sum, ..Arrived::default() };
        for p in pieces {
            total.add(embed(&p.grad, &shape, p.dim, p.start));
        }
        total.sum
    }
}

/// The pieces as one tensor of `shape` when they lie along one dim without overlapping: `cat`
/// of them in order, with zeros in the gaps; `None` otherwise.
fn tile(pieces: &mut [Piece], shape: &[usize]) -> Option<Tensor> {
    let dim = pieces[0].dim;
    if pieces.iter().any(|p| p.dim != dim) {
        return None;
    }
    pieces.sort_by_key(|p| p.start);
    let (dtype, device) = (pieces[0].grad.dtype(), pieces[0].grad.device());
    let gap = |len: usize| {
        let mut s = shape.to_vec();
        s[dim] = len;
        Tensor::zeros_opts(&s, dtype, device)
    };
    let mut parts = Vec::with_capacity(pieces.len() + 1);
    let mut at = 0;
    for p in pieces.iter() {
        if p.start < at {
            return None; // overlapping slices: summed instead
        }
        if p.start > at {
            parts.push(gap(p.start - at));
        }
        parts.push(p.grad.clone());
        at = p.start + p.grad.shape()[dim];
    }
    if at < shape[dim] {
        parts.push(gap(shape[dim] - at));
    }
    Some(if parts.len() == 1 { parts.pop().expect("one part") } else { Tensor::cat(&parts, dim as i64) })
}

/// `g` placed at `start..start + g.size(dim)` along `dim` of a zero tensor of `shape`: the
/// gradient of `narrow`/`select` (itself differentiable: its gradient is `narrow` again).
fn embed(g: &Tensor, shape: &[usize], dim: usize, start: usize) -> Tensor {
    let out = Tensor::zeros_opts(shape, g.dtype(), g.device());
    let len = g.shape()[dim];
    {
        let _off = super::no_grad_guard();
        out.narrow(dim as i64, start as i64, len).copy_(g);
    }
    if super::is_recording(&[g]) {
        return super::record(out, "SliceBackwardBackward0", &[g], [], move |_, gg, _| {
            super::grads![Some(gg.narrow(dim as i64, start as i64, len))]
        });
    }
    out
}

/// `a + b` (same shape). When both have the same strides and those are a permutation of a
/// contiguous layout (the transposed weight gradients of a recurrent layer's steps), the sum
/// is computed in memory order, one contiguous pass, and returned with those strides.
fn add_in_storage_order(a: &Tensor, b: &Tensor) -> Tensor {
    if a.stride() == b.stride() && a.shape() == b.shape() && !a.is_contiguous() {
        let mut order: Vec<usize> = (0..a.dim()).collect();
        order.sort_by_key(|&d| std::cmp::Reverse(a.stride()[d]));
        let perm: Vec<i64> = order.iter().map(|&d| d as i64).collect();
        let (pa, pb) = (a.permute(&perm), b.permute(&perm));
        if pa.is_contiguous() && pb.is_contiguous() {
            let mut inverse = vec![0i64; order.len()];
            for (i, &d) in order.iter().enumerate() {
                inverse[d] = i as i64;
            }
            return (&pa + &pb).permute(&inverse);
        }
    }
    a + b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;

    fn piece(dim: usize, start: usize, grad: Tensor) -> Piece {
        Piece { dim, start, grad }
    }

    #[test]
    fn pieces_that_tile_become_one_cat_with_zero_gaps() {
        let (a, b) = (Tensor::full([2, 1], 1.0), Tensor::full([2, 2], 2.0));
        let mut arrived = Arrived::default();
        // Out of order, with a gap at column 1 and one at the end.
        arrived.add_piece(piece(1, 2, b), &[2, 5]);
        arrived.add_piece(piece(1, 0, a), &[2, 5]);
        let t = arrived.total().expect("a total");
        assert_eq!(t.shape(), &[2, 5]);
        assert_eq!(t.to_vec::<f32>(), vec![1., 0., 2., 2., 0., 1., 0., 2., 2., 0.]);
    }

    #[test]
    fn overlapping_or_mixed_pieces_and_dense_gradients_are_summed() {
        let shape = [3, 2];
        let mut arrived = Arrived::default();
        arrived.add_piece(piece(0, 0, Tensor::full([2, 2], 1.0)), &shape);
        arrived.add_piece(piece(0, 1, Tensor::full([2, 2], 10.0)), &shape);
        arrived.add_piece(piece(1, 1, Tensor::full([3, 1], 100.0)), &shape);
        arrived.add(Tensor::full([3, 2], 1000.0));
        let t = arrived.total().expect("a total");
        assert_eq!(t.to_vec::<f32>(), vec![1001., 1101., 1011., 1111., 1010., 1110.]);
    }

    #[test]
    fn a_squeezed_piece_is_a_slice_of_length_one() {
        let p = Piece::new(SliceOf { dim: 1, start: 2, squeezed: true }, Tensor::full([4], 3.0));
        assert_eq!(p.grad.shape(), &[4, 1]);
        let mut arrived = Arrived::default();
        arrived.add_piece(p, &[4, 3]);
        let t = arrived.total().expect("a total");
        assert_eq!(t.sum().item::<f32>(), 12.0);
        assert_eq!(t.select(1, 2).to_vec::<f32>(), vec![3.0; 4]);
    }

    #[test]
    fn transposed_sums_keep_their_strides_and_values() {
        let a = Tensor::arange(12).to_dtype(DType::F32).view([3, 4]).t();
        let b = (Tensor::arange(12).to_dtype(DType::F32) * 0.5).view([3, 4]).t();
        let s = add_in_storage_order(&a, &b);
        assert_eq!(s.shape(), &[4, 3]);
        assert_eq!(s.stride(), a.stride());
        assert_eq!(s.to_vec::<f32>(), (&a.contiguous() + &b.contiguous()).to_vec::<f32>());
        // Different strides: an ordinary sum.
        let c = Tensor::arange(12).to_dtype(DType::F32).view([4, 3]);
        assert_eq!(add_in_storage_order(&a, &c).to_vec::<f32>(), (&a.contiguous() + &c).to_vec::<f32>());
    }
}
