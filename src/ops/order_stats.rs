//! Order statistics along a dim: `kthvalue` and `median` (values and indices), as
//! decompositions into a stable `sort` and a `narrow`, so their gradient is sort's (to the
//! position the value came from) and `kiln::compile` captures them. Among tied values the index
//! is that of the first occurrence; PyTorch leaves the choice unspecified.

use crate::error::{bail, OrPanic, Result};
use crate::Tensor;

/// The `k`-th smallest values along `d` of `x` (1-based) and their indices, with the dim kept
/// or removed.
#[track_caller]
fn kth(x: &Tensor, k: usize, d: usize, keepdim: bool) -> Result<(Tensor, Tensor)> {
    let (sorted, order) = x.try_sort(d as i64, false)?;
    let pick = |t: &Tensor| -> Result<Tensor> {
        if x.dim() == 0 {
            return Ok(t.clone());
        }
        let one = t.try_narrow(d as i64, k as i64 - 1, 1)?;
        if keepdim {
            Ok(one)
        } else {
            one.try_reshape(
                &t.shape().iter().enumerate().filter(|&(i, _)| i != d).map(|(_, &n)| n as i64).collect::<Vec<_>>(),
            )
        }
    };
    Ok((pick(&sorted)?, pick(&order)?))
}

impl Tensor {
    /// The `k`-th smallest values along `dim` (1-based) and their indices
    /// (`x.kthvalue(k, dim, keepdim)`); NaN sorts as the largest value.
    #[track_caller]
    pub fn kthvalue(&self, k: usize, dim: i64, keepdim: bool) -> (Tensor, Tensor) {
        self.try_kthvalue(k, dim, keepdim).or_panic()
    }

    /// [`Tensor::kthvalue`] returning an error for a bad dim or `k` outside `1..=size`.
    #[track_caller]
    pub fn try_kthvalue(&self, k: usize, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        let d = self.normalize_dim("kthvalue", dim)?;
        let n = self.shape().get(d).copied().unwrap_or(1);
        if k == 0 || k > n {
            bail!(
                "kthvalue",
                Index,
                "selected number k out of range for dimension {d} (k = {k}, shape {:?})",
                self.shape()
            );
        }
        kth(self, k, d, keepdim)
    }

    /// The lower median of all elements, as a 0-dim tensor (`x.median()`); NaN if there is one.
    #[track_caller]
    pub fn median(&self) -> Tensor {
        self.try_median().or_panic()
    }

    /// [`Tensor::median`] returning an error for an empty tensor.
    #[track_caller]
    pub fn try_median(&self) -> Result<Tensor> {
        if self.numel() == 0 {
            bail!("median", Index, "median() input tensor cannot be empty (shape {:?})", self.shape());
        }
        Ok(self.try_reshape(&[-1])?.try_median_dim(0, false)?.0)
    }

    /// The lower medians along `dim` and their indices (`x.median(dim, keepdim)`): where a row
    /// holds NaN, the value is NaN and the index that of its first NaN, as PyTorch.
    #[track_caller]
    pub fn median_dim(&self, dim: i64, keepdim: bool) -> (Tensor, Tensor) {
        self.try_median_dim(dim, keepdim).or_panic()
    }

    /// [`Tensor::median_dim`] returning an error for a bad dim or an empty dim.
    #[track_caller]
    pub fn try_median_dim(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        let d = self.normalize_dim("median", dim)?;
        let n = self.shape().get(d).copied().unwrap_or(1);
        if n == 0 {
            bail!(
                "median",
                Index,
                "cannot compute the median along dimension {d} of size 0 (shape {:?})",
                self.shape()
            );
        }
        let (values, indices) = kth(self, n.div_ceil(2), d, keepdim)?;
        if !self.dtype().is_float() || self.dim() == 0 {
            return Ok((values, indices));
        }
        // NaN sorts last; a row holding one has NaN as its median, at its first NaN.
        let nan = self.ne(self);
        let (has_nan, first_nan) = nan.to_dtype(kiln_runtime::DType::U8).max_dim(d as i64, keepdim);
        let has_nan = has_nan.ne(0);
        Ok((Tensor::where_cond(&has_nan, f64::NAN, &values), Tensor::where_cond(&has_nan, &first_nan, &indices)))
    }
}
