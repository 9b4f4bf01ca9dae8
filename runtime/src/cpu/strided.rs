//! Walking N strided operands of one shape together, one innermost run at a time.
//!
//! A kernel over views never copies them first: it calls [`Collapsed::walk`] with each operand's strides,
//! and gets back, for each run of the innermost (collapsed) dimension, the storage offset of every
//! operand and their inner strides. Adjacent dims that are contiguous in every operand are merged
//! first, so a contiguous operand set is a single run.

use smallvec::SmallVec;
use std::ops::Range;

type Dims = SmallVec<[usize; 6]>;

/// A shape and N stride sets with size-1 dims dropped and mergeable neighbours merged.
#[derive(Clone, Debug)]
pub struct Collapsed<const N: usize> {
    /// Sizes after collapsing (may be empty: a single element).
    pub shape: Dims,
    /// Strides of each operand for `shape`.
    pub strides: [Dims; N],
}

/// Drops size-1 dims and merges dims `d, d+1` wherever every operand has
/// `stride[d] == stride[d+1] * shape[d+1]`.
pub fn collapse<const N: usize>(shape: &[usize], strides: [&[usize]; N]) -> Collapsed<N> {
    let mut out_shape: Dims = SmallVec::new();
    let mut out_strides: [Dims; N] = std::array::from_fn(|_| SmallVec::new());
    for d in 0..shape.len() {
        if shape[d] == 1 {
            continue;
        }
        let merge =
            !out_shape.is_empty() && (0..N).all(|k| *out_strides[k].last().unwrap() == strides[k][d] * shape[d]);
        if merge {
            *out_shape.last_mut().unwrap() *= shape[d];
            for k in 0..N {
                *out_strides[k].last_mut().unwrap() = strides[k][d];
            }
        } else {
            out_shape.push(shape[d]);
            for k in 0..N {
                out_strides[k].push(strides[k][d]);
            }
        }
    }
    Collapsed { shape: out_shape, strides: out_strides }
}

impl<const N: usize> Collapsed<N> {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Length of the innermost run (1 for a single element).
    pub fn inner_len(&self) -> usize {
        self.shape.last().copied().unwrap_or(1)
    }

    /// Visits the elements with row-major linear indices in `range`, calling
    /// `f(offsets, run_len, inner_strides)` for each piece of an innermost run, where `offsets`
    /// are the operands' storage offsets (added to `base`) of the run's first element.
    pub fn walk(&self, base: [usize; N], range: Range<usize>, mut f: impl FnMut([usize; N], usize, [usize; N])) {
        if range.is_empty() {
            return;
        }
        let nd = self.shape.len();
        if nd == 0 {
            f(base, 1, [0; N]);
            return;
        }
        let inner = self.shape[nd - 1];
        let inner_strides: [usize; N] = std::array::from_fn(|k| self.strides[k][nd - 1]);
        // Unravel the start index.
        let mut idx: Dims = SmallVec::from_elem(0, nd);
        let mut rest = range.start;
        for d in (0..nd).rev() {
            idx[d] = rest % self.shape[d];
            rest /= self.shape[d];
        }
        let mut offs = base;
        for k in 0..N {
            for d in 0..nd {
                offs[k] += idx[d] * self.strides[k][d];
            }
        }
        let mut pos = range.start;
        while pos < range.end {
            let run = (inner - idx[nd - 1]).min(range.end - pos);
            f(offs, run, inner_strides);
            pos += run;
            if pos >= range.end {
                break;
            }
            idx[nd - 1] += run;
            for k in 0..N {
                offs[k] += run * inner_strides[k];
            }
            if idx[nd - 1] == inner {
                idx[nd - 1] = 0;
                for k in 0..N {
                    offs[k] -= inner * inner_strides[k];
                }
                let mut d = nd - 1;
                while d > 0 {
                    d -= 1;
                    idx[d] += 1;
                    for k in 0..N {
                        offs[k] += self.strides[k][d];
                    }
                    if idx[d] < self.shape[d] {
                        break;
                    }
                    idx[d] = 0;
                    for k in 0..N {
                        offs[k] -= self.shape[d] * self.strides[k][d];
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Layout;

    #[test]
    fn contiguous_collapses_to_one_run() {
        let l = Layout::contiguous(&[2, 3, 4]);
        let c = collapse(l.shape(), [l.strides(), l.strides()]);
        assert_eq!(c.shape.as_slice(), &[24]);
    }

    #[test]
    fn walk_visits_transposed_in_row_major_order() {
        let l = Layout::contiguous(&[2, 3, 4]).transpose(0, 2); // [4,3,2]
        let c = collapse(l.shape(), [l.strides()]);
        for (start, end) in [(0, 24), (5, 17), (0, 1), (23, 24)] {
            let mut got = vec![];
            c.walk([l.offset()], start..end, |[o], n, [s]| {
                for i in 0..n {
                    got.push(o + i * s);
                }
            });
            let mut want = vec![];
            for i in 0..4 {
                for j in 0..3 {
                    for k in 0..2 {
                        want.push(l.index_of(&[i, j, k]));
                    }
                }
            }
            assert_eq!(got, want[start..end]);
        }
    }
}
