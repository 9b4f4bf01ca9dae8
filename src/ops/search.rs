//! Searching sorted values and finding distinct ones: `searchsorted`, `bucketize` (binary
//! searches, int64 results, not differentiable) and `unique` (distinct values, the inverse
//! map and counts).
//!
//! The binary search is PyTorch's, comparison for comparison, so NaN (in the values or at the
//! end of the sorted sequence) lands where PyTorch puts it. The operands are compared in their
//! promoted dtype. `unique` has a data-dependent shape: it reads its input at once, so inside
//! `kiln::compile` it is a graph break.

use super::kernel_op;
use super::reduce::{contiguous_elems, wrap};
use super::scan::no_cuda;
use crate::error::{bail, OrPanic, Result};
use crate::Tensor;
use kiln_runtime::cpu::reduce::{OrdElement, OrdValue};
use kiln_runtime::cpu::CpuBuf;
use kiln_runtime::{match_cpu, DType};
use std::cmp::Ordering;

/// `a` against `b` with NaN after every number and equal to NaN: the order `sort` uses.
fn nan_last<V: OrdValue>(a: V, b: V) -> Ordering {
    a.partial_cmp(&b).unwrap_or_else(|| a.is_nan().cmp(&b.is_nan()))
}

/// The positions of `x` in sorted order (stable, NaN last), and the lengths of the runs of
/// equal values in that order (each NaN a run of its own, as NaN equals nothing).
pub(crate) fn sorted_runs<T: OrdElement>(x: &[T]) -> (Vec<usize>, Vec<usize>) {
    let mut order: Vec<usize> = (0..x.len()).collect();
    order.sort_by(|&a, &b| nan_last(x[a].to_ord(), x[b].to_ord()));
    let mut runs: Vec<usize> = Vec::new();
    for (k, &i) in order.iter().enumerate() {
        match runs.last_mut() {
            Some(len) if x[order[k - 1]].to_ord() == x[i].to_ord() => *len += 1,
            _ => runs.push(1),
        }
    }
    (order, runs)
}

/// Where `v` goes in the ascending `seq`: before the equal values (`right`: after them), by
/// PyTorch's binary search, which moves right past NaN on either side.
fn bound<V: OrdValue>(seq: &[V], v: V, right: bool) -> i64 {
    let (mut lo, mut hi) = (0, seq.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let past = match seq[mid].partial_cmp(&v) {
            Some(Ordering::Less) | None => true,
            Some(Ordering::Equal) => right,
            Some(Ordering::Greater) => false,
        };
        if past {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo as i64
}

/// The insertion points of `values` in the rows of `seq` (rows of `m` elements; every
/// `per_row` values search one row).
fn search_kernel<T: OrdElement>(seq: &[T], values: &[T], (m, per_row): (usize, usize), right: bool) -> CpuBuf<i64> {
    let seq: Vec<T::Ord> = seq.iter().map(|&s| s.to_ord()).collect();
    CpuBuf::from_fn(values.len(), |i| {
        let row = i / per_row.max(1);
        bound(&seq[row * m..(row + 1) * m], values[i].to_ord(), right)
    })
}

/// An error unless `sorted` is 1-D or has `values`' leading dims (PyTorch's rule).
#[track_caller]
fn check_search_shapes(op: &'static str, sorted: &Tensor, values: &Tensor) -> Result<()> {
    let (s, v) = (sorted.shape(), values.shape());
    let leading_match = s.len() == v.len() && s[..s.len() - 1] == v[..v.len() - 1];
    if s.is_empty() || (s.len() > 1 && !leading_match) {
        bail!(
            op,
            Shape,
            "boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries tensor and input value tensor must match, but we got boundaries tensor {s:?} and input value tensor {v:?}"
        );
    }
    Ok(())
}

#[track_caller]
fn searchsorted_impl(op: &'static str, sorted: &Tensor, values: &Tensor, right: bool) -> Result<Tensor> {
    check_search_shapes(op, sorted, values)?;
    sorted.check_same_device(op, values)?;
    let dtype = sorted.dtype().promote(values.dtype());
    let (sorted, values) = (sorted.try_to_dtype(dtype)?, values.try_to_dtype(dtype)?);
    let m = sorted.shape()[sorted.dim() - 1];
    let per_row = if sorted.dim() == 1 { values.numel() } else { values.shape()[values.dim() - 1] };
    let cpu = move |ins: &[Tensor]| {
        let (seq, vals) = (ins[0].contiguous(), ins[1].contiguous());
        let out = seq.with_cpu2(&vals, op, |s, v| {
            let (ls, lv) = (seq.layout(), vals.layout());
            match_cpu!(s, |b: T| {
                let v = v.as_buf::<T>().expect("dtypes promoted alike");
                search_kernel(contiguous_elems(b, ls), contiguous_elems(v, lv), (m, per_row), right)
            })
        })?;
        Ok(Tensor::from_buf(out, vals.shape()))
    };
    kernel_op(op, &[&sorted, &values], (values.shape(), DType::I64), cpu, no_cuda(op))
}

/// What [`Tensor::unique`] returns: the distinct values, and when asked for, the inverse map
/// and the counts.
#[derive(Clone, Debug)]
pub struct Unique {
    /// The distinct values, ascending (NaN last, each NaN on its own), 1-D.
    pub values: Tensor,
    /// For each input element, the index of its value in `values` (i64, the input's shape).
    pub inverse: Option<Tensor>,
    /// How many input elements each value stands for (i64, shaped like `values`).
    pub counts: Option<Tensor>,
}

#[track_caller]
fn unique_impl(t: &Tensor, return_inverse: bool, return_counts: bool) -> Result<Unique> {
    let x = t.contiguous();
    let (values, inverse, counts) = x.with_cpu("unique", |s, l| {
        match_cpu!(s, |b: T| {
            let x = contiguous_elems(b, l);
            let (order, runs) = sorted_runs(x);
            let (mut values, mut inverse, mut start) = (Vec::with_capacity(runs.len()), vec![0i64; x.len()], 0);
            for (k, &len) in runs.iter().enumerate() {
                values.push(x[order[start]]);
                for &i in &order[start..start + len] {
                    inverse[i] = k as i64;
                }
                start += len;
            }
            let counts: Vec<i64> = runs.iter().map(|&n| n as i64).collect();
            (wrap(CpuBuf::from_slice(&values)), inverse, counts)
        })
    })?;
    let n = counts.len();
    Ok(Unique {
        values: Tensor::from_cpu_storage(values, &[n]),
        inverse: return_inverse.then(|| Tensor::from_vec(inverse, t.shape())),
        counts: return_counts.then(|| Tensor::from_vec(counts, [n])),
    })
}

impl Tensor {
    /// For each of `values`, the index where it would be inserted into this ascending sequence
    /// to keep it sorted (`torch.searchsorted(self, values, right=right)`), as i64 shaped like
    /// `values`: before equal entries, or after them with `right`. This tensor is 1-D, or has
    /// `values`' leading dims and searches its last dim row by row.
    #[track_caller]
    pub fn searchsorted(&self, values: &Tensor, right: bool) -> Tensor {
        self.try_searchsorted(values, right).or_panic()
    }

    /// [`Tensor::searchsorted`] returning an error for shapes that do not match or tensors on
    /// different devices.
    #[track_caller]
    pub fn try_searchsorted(&self, values: &Tensor, right: bool) -> Result<Tensor> {
        searchsorted_impl("searchsorted", self, values, right)
    }

    /// The bucket of each element among the ascending 1-D `boundaries`
    /// (`torch.bucketize(self, boundaries, right=right)`): the `i` with
    /// `boundaries[i-1] < x <= boundaries[i]`, or `boundaries[i-1] <= x < boundaries[i]` with
    /// `right`; i64, shaped like this tensor.
    #[track_caller]
    pub fn bucketize(&self, boundaries: &Tensor, right: bool) -> Tensor {
        self.try_bucketize(boundaries, right).or_panic()
    }

    /// [`Tensor::bucketize`] returning an error unless `boundaries` is 1-D.
    #[track_caller]
    pub fn try_bucketize(&self, boundaries: &Tensor, right: bool) -> Result<Tensor> {
        if boundaries.dim() != 1 {
            bail!(
                "bucketize",
                Shape,
                "boundaries tensor must be 1 dimension, but got dim({}) (shape {:?})",
                boundaries.dim(),
                boundaries.shape()
            );
        }
        searchsorted_impl("bucketize", boundaries, self, right)
    }

    /// The distinct elements, ascending, with the inverse map and the counts when asked for
    /// (`torch.unique(x, sorted, return_inverse, return_counts)`, over all elements; no `dim`).
    /// The values always come sorted, as PyTorch's CPU kernel gives them whatever `sorted`
    /// says; `-0.0` and `0.0` are one value, each NaN its own. The result's size depends on
    /// the data, so the input is read at once: inside `kiln::compile`, a graph break. Not
    /// differentiable.
    #[track_caller]
    pub fn unique(&self, sorted: bool, return_inverse: bool, return_counts: bool) -> Unique {
        self.try_unique(sorted, return_inverse, return_counts).or_panic()
    }

    /// [`Tensor::unique`] returning an error for a tensor not on the CPU.
    #[track_caller]
    pub fn try_unique(&self, sorted: bool, return_inverse: bool, return_counts: bool) -> Result<Unique> {
        let _ = sorted; // sorted either way, as PyTorch's CPU kernel
        unique_impl(self, return_inverse, return_counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_follows_pytorch_around_nan() {
        let seq = [1.0, 3.0, 3.0, 5.0, f64::NAN];
        assert_eq!([0.0, 3.0, 4.0, 6.0].map(|v| bound(&seq, v, false)), [0, 1, 5, 5]);
        // Past the equal 3s, the search meets the NaN and moves past it too, as PyTorch's.
        assert_eq!([3.0, f64::NAN].map(|v| bound(&seq, v, true)), [5, 5]);
        assert_eq!(bound::<f64>(&[], 1.0, false), 0);
    }

    #[test]
    fn runs_split_equal_values_and_every_nan() {
        let (order, runs) = sorted_runs(&[2.0f32, f32::NAN, 1.0, 2.0, f32::NAN]);
        assert_eq!((order, runs), (vec![2, 0, 3, 1, 4], vec![1, 2, 1, 1]));
    }
}
