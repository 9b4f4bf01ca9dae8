//! Sorting along a dim: `sort` (always stable), `argsort`, `topk`.
//!
//! NaN sorts as the largest value and `-0.0` equals `0.0`, as in PyTorch. Every dtype sorts
//! (bool as false < true), on the CPU and on CUDA (`crate::cuda::sort`, the same order).
//!
//! Autograd: the values of `sort` and `topk` are differentiable; their gradient goes back to the
//! positions the values came from (a `scatter` into zeros, differentiable again).

use super::kernel_op2;
use crate::autograd::{self, grads, Saved};
use crate::error::{bail, OrPanic, Result};
use crate::tensor::Tensor;
use kiln_runtime::cpu::sort as kernels;
use kiln_runtime::storage::StorageElement;
use kiln_runtime::{match_cpu, CpuStorage, DType, Layout, Shape};

/// Runs a row kernel along `dim` (0-dim tensors are seen as one row of one element) and wraps
/// its values and positions as tensors of `self`'s shape with `dim` of size `k`. A CUDA `x`
/// takes the first `k` of each row sorted instead (`descending` for `sort`'s order or `topk`'s
/// `largest`): what both kernels pick, `topk` always in sorted order there.
#[track_caller]
fn along_dim(
    op: &'static str,
    x: &Tensor,
    (d, k, descending): (usize, usize, bool),
    kernel: impl FnOnce(&CpuStorage, &Layout) -> (CpuStorage, CpuStorage) + Send + 'static,
) -> Result<(Tensor, Tensor)> {
    let mut shape = Shape::from_slice(x.shape());
    if let Some(n) = shape.get_mut(d) {
        *n = k;
    }
    let out = shape.clone();
    let cpu = move |ins: &[Tensor]| {
        let x = &ins[0];
        let (values, indices) =
            x.with_cpu(op, |s, l| if x.dim() == 0 { kernel(s, &l.unsqueeze(0)) } else { kernel(s, l) })?;
        Ok((Tensor::from_cpu_storage(values, &out), Tensor::from_cpu_storage(indices, &out)))
    };
    let cuda = move |ins: &[Tensor]| crate::cuda::sort::sorted_rows(op, &ins[0], d, k, descending);
    kernel_op2(op, &[x], [(&shape, x.dtype()), (&shape, DType::I64)], cpu, cuda)
}

/// Records `values` (picked from `x` along dim `d` at `indices`) for autograd under `name`: the
/// gradient scatters back to the picked positions.
#[track_caller]
fn record_values(name: &'static str, x: &Tensor, d: usize, (values, indices): (Tensor, Tensor)) -> (Tensor, Tensor) {
    if !autograd::is_recording(&[x]) {
        return (values, indices);
    }
    let (shape, dtype, device) = (x.shape().to_vec(), x.dtype(), x.device());
    let values = autograd::record(values, name, &[x], [Saved::of(&indices)], move |_, g, s| {
        grads![Some(Tensor::zeros_opts(&shape, dtype, device).scatter(d as i64, &s[0], g))]
    });
    (values, indices)
}

/// `sort` without autograd (`argsort` needs no history); `op` names the public op in errors.
#[track_caller]
fn sort(op: &'static str, x: &Tensor, d: usize, descending: bool) -> Result<(Tensor, Tensor)> {
    let n = x.shape().get(d).copied().unwrap_or(1);
    along_dim(op, x, (d, n, descending), move |s, l| {
        match_cpu!(s, |b: T| {
            let (v, i) = kernels::sort(b, l, d, descending);
            (T::wrap(v), i64::wrap(i))
        })
    })
}

impl Tensor {
    /// The values sorted along `dim` and their original positions (int64)
    /// (`x.sort(dim, descending, stable=True)`). Always stable: equal values keep their order.
    #[track_caller]
    pub fn sort(&self, dim: i64, descending: bool) -> (Tensor, Tensor) {
        self.try_sort(dim, descending).or_panic()
    }

    /// [`Tensor::sort`] returning an error for a dim out of range.
    #[track_caller]
    pub fn try_sort(&self, dim: i64, descending: bool) -> Result<(Tensor, Tensor)> {
        let d = self.normalize_dim("sort", dim)?;
        Ok(record_values("SortBackward0", self, d, sort("sort", self, d, descending)?))
    }

    /// The positions that sort the values along `dim` (`x.argsort(dim, descending)`); stable.
    #[track_caller]
    pub fn argsort(&self, dim: i64, descending: bool) -> Tensor {
        self.try_argsort(dim, descending).or_panic()
    }

    /// [`Tensor::argsort`] returning an error for a dim out of range.
    #[track_caller]
    pub fn try_argsort(&self, dim: i64, descending: bool) -> Result<Tensor> {
        let d = self.normalize_dim("argsort", dim)?;
        Ok(sort("argsort", self, d, descending)?.1)
    }

    /// The `k` largest (or smallest, when `largest` is false) values along `dim` and their
    /// positions (`x.topk(k, dim, largest, sorted)`). When `sorted`, they come in order, largest
    /// first for `largest`; otherwise in an unspecified (but deterministic) order. Among equal
    /// values the earlier position comes first; NaN counts as the largest value.
    #[track_caller]
    pub fn topk(&self, k: usize, dim: i64, largest: bool, sorted: bool) -> (Tensor, Tensor) {
        self.try_topk(k, dim, largest, sorted).or_panic()
    }

    /// [`Tensor::topk`] returning an error for a dim out of range or `k` larger than the dim.
    #[track_caller]
    pub fn try_topk(&self, k: usize, dim: i64, largest: bool, sorted: bool) -> Result<(Tensor, Tensor)> {
        let d = self.normalize_dim("topk", dim)?;
        let n = self.shape().get(d).copied().unwrap_or(1);
        if k > n {
            bail!(
                "topk",
                Index,
                "selected index k out of range (k = {k}, dim {d} of shape {:?} has size {n})",
                self.shape()
            );
        }
        // PyTorch returns a 0-dim tensor's element for k = 0 too: a 0-dim result has one.
        let k = if self.dim() == 0 { 1 } else { k };
        let picked = along_dim("topk", self, (d, k, largest), move |s, l| {
            match_cpu!(s, |b: T| {
                let (v, i) = kernels::topk(b, l, d, k, largest, sorted);
                (T::wrap(v), i64::wrap(i))
            })
        })?;
        Ok(record_values("TopkBackward0", self, d, picked))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_dim_sorts_as_one_element() {
        let x = Tensor::scalar(4.5f32);
        let (v, i) = x.sort(-1, false);
        assert_eq!((v.shape(), i.shape()), (&[] as &[usize], &[] as &[usize]));
        assert_eq!((v.item::<f32>(), i.item::<i64>()), (4.5, 0));
        assert_eq!(x.topk(1, 0, true, true).0.item::<f32>(), 4.5);
        assert!(x.try_topk(2, 0, true, true).is_err());
        assert!(x.try_sort(1, false).is_err());
    }

    #[test]
    fn errors_name_the_op() {
        let x = Tensor::new(&[[1i32, 2, 3]]);
        let e = x.try_sort(2, false).unwrap_err().to_string();
        assert!(e.starts_with("sort: dimension out of range (expected to be in range of [-2, 1], but got 2)"), "{e}");
        let e = x.try_topk(4, -1, true, true).unwrap_err().to_string();
        assert!(e.starts_with("topk: selected index k out of range (k = 4, dim 1 of shape [1, 3] has size 3)"), "{e}");
        assert_eq!(x.argsort(1, true).dtype(), DType::I64);
    }
}
