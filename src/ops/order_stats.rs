//! Order statistics along a dim: `kthvalue` and `median` (values and indices), as
//! decompositions into a stable `sort` and a `narrow`, so their gradient is sort's (to the
//! position the value came from) and `kiln::compile` captures them. Among tied values the index
//! is that of the first occurrence; PyTorch leaves the choice unspecified.

use super::keepdim::keepdim_forms;
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
                t.shape().iter().enumerate().filter(|&(i, _)| i != d).map(|(_, &n)| n as i64).collect::<Vec<_>>(),
            )
        }
    };
    Ok((pick(&sorted)?, pick(&order)?))
}

impl Tensor {
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
        Ok(self.try_reshape([-1])?.try_median_dim(0)?.0)
    }
}
/// The `k`-th smallest values of `x` along `dim` and their indices, for `kthvalue`.
#[track_caller]
fn kthvalue_impl(x: &Tensor, k: usize, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
    let d = x.normalize_dim("kthvalue", dim)?;
    let n = x.shape().get(d).copied().unwrap_or(1);
    if k == 0 || k > n {
        bail!("kthvalue", Index, "selected number k out of range for dimension {d} (k = {k}, shape {:?})", x.shape());
    }
    kth(x, k, d, keepdim)
}

/// The lower medians of `x` along `dim` and their indices, for `median_dim`.
#[track_caller]
fn median_impl(x: &Tensor, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
    let d = x.normalize_dim("median", dim)?;
    let n = x.shape().get(d).copied().unwrap_or(1);
    if n == 0 {
        bail!("median", Index, "cannot compute the median along dimension {d} of size 0 (shape {:?})", x.shape());
    }
    let (values, indices) = kth(x, n.div_ceil(2), d, keepdim)?;
    if !x.dtype().is_float() || x.dim() == 0 {
        return Ok((values, indices));
    }
    // NaN sorts last; a row holding one has NaN as its median, at its first NaN.
    let nan = x.ne(x);
    let nan = nan.to_dtype(kiln_runtime::DType::U8);
    let (has_nan, first_nan) = if keepdim { nan.max_dim_keepdim(d as i64) } else { nan.max_dim(d as i64) };
    let has_nan = has_nan.ne(0);
    Ok((Tensor::where_cond(&has_nan, f64::NAN, &values), Tensor::where_cond(&has_nan, &first_nan, &indices)))
}

keepdim_forms! {
    #[doc = "The `k`-th smallest values along `dim` (1-based) and their indices (`x.kthvalue(k, dim)`); NaN \
        sorts as the largest value."]
    #[errors = "a bad dim or `k` outside `1..=size`"]
    kthvalue try_kthvalue kthvalue_keepdim try_kthvalue_keepdim (k: usize, dim: i64) -> (Tensor, Tensor)
        = |x, keepdim| kthvalue_impl(x, k, dim, keepdim);

    #[doc = "The lower medians along `dim` and their indices (`x.median(dim)`): where a row holds NaN, the \
        value is NaN and the index that of its first NaN, as PyTorch."]
    #[errors = "a bad dim or an empty dim"]
    median_dim try_median_dim median_dim_keepdim try_median_dim_keepdim (dim: i64) -> (Tensor, Tensor)
        = |x, keepdim| median_impl(x, dim, keepdim);
}
