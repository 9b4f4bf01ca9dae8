//! Vector norms (`x.norm(p)`, `x.norm_dim(p, dims)`: PyTorch's `torch.norm` and
//! `torch.linalg.vector_norm`), as decompositions into `abs`, `pow`, sums and `amax`/`amin`.
//!
//! The gradient is PyTorch's, zero where the norm is zero (and, for `0 < p < 1` or `p < 0`,
//! zero at zero elements), rather than the NaN a plain `sqrt(sum(x²))` would give there: each
//! root or power that is not differentiable at zero reads its argument through a `where` that
//! replaces zeros by one and puts the zero result back afterwards, so no infinite derivative is
//! ever multiplied by zero, to any order.

use super::keepdim::keepdim_forms;
use super::reduce::{scalar_type_name, Dims};
use crate::error::{bail, OrPanic, Result};
use crate::Tensor;

impl Tensor {
    /// The `p`-norm of all elements, `(Σ|x|^p)^(1/p)` (`x.norm(p)`; `torch.linalg.vector_norm`):
    /// `p = 2.0` is the Euclidean (and Frobenius) norm, `f64::INFINITY` the largest `|x|`,
    /// `f64::NEG_INFINITY` the smallest, `0.0` the count of non-zero elements. Floating-point
    /// input only; a 0-dim result of the input's dtype.
    #[track_caller]
    pub fn norm(&self, p: f64) -> Tensor {
        self.try_norm(p).or_panic()
    }

    /// [`Tensor::norm`] returning an error for a non-floating-point input or an empty input
    /// with `p = ±∞`.
    #[track_caller]
    pub fn try_norm(&self, p: f64) -> Result<Tensor> {
        vector_norm(self, p, &[], false)
    }
}

keepdim_forms! {
    #[doc = "The `p`-norm over `dims` (`x.norm(p, dim)`); an empty list of dims reduces every dim."]
    #[errors = "a bad dim, a non-floating-point input or an empty reduction with `p = ±∞`"]
    norm_dim try_norm_dim norm_dim_keepdim try_norm_dim_keepdim (p: f64, dims: impl Into<Dims>) -> Tensor
        = |x, keepdim| vector_norm(x, p, &dims.into().0, keepdim);
}

/// The `p`-norm of `x` over `dims` (every dim when empty).
#[track_caller]
fn vector_norm(x: &Tensor, p: f64, dims: &[i64], keepdim: bool) -> Result<Tensor> {
    if let Some(c) = crate::amp::autocast::operands("norm", &[Some(x)])? {
        return vector_norm(c.arg(0), p, dims, keepdim);
    }
    if !x.dtype().is_float() {
        bail!("norm", DType, "Expected a floating point tensor as input. Got {}", scalar_type_name(x.dtype()));
    }
    if p.is_nan() {
        bail!("norm", Value, "the order p must be a number, but got NaN");
    }
    if p.is_infinite() && reduces_nothing(x, dims) {
        bail!(
            "norm",
            Index,
            "cannot compute the {p} norm of an empty tensor (shape {:?}, dims {dims:?}): the operation has no identity",
            x.shape()
        );
    }
    let a = x.abs();
    let dims = dims.to_vec();
    let sum = |t: &Tensor| if keepdim { t.try_sum_dim_keepdim(&dims) } else { t.try_sum_dim(&dims) };
    if p == f64::INFINITY {
        return if keepdim { a.try_amax_keepdim(dims) } else { a.try_amax(dims) };
    }
    if p == f64::NEG_INFINITY {
        return if keepdim { a.try_amin_keepdim(dims) } else { a.try_amin(dims) };
    }
    if p == 0.0 {
        return sum(&a.ne(0.0).to_dtype(x.dtype()));
    }
    if p == 1.0 {
        return sum(&a);
    }
    let powered = if p == 2.0 { x * x } else { power_at_zero(&a, p) };
    let sum = sum(&powered)?;
    Ok(if p > 0.0 { root_at_zero(&sum, p) } else { sum.pow(1.0 / p) })
}

/// True when a reduction of `x` over `dims` (every dim when empty) has an output that reduces
/// no element (dims out of range are left to the reduction to report).
fn reduces_nothing(x: &Tensor, dims: &[i64]) -> bool {
    let size = |d: i64| {
        let d = if d < 0 { d + x.dim() as i64 } else { d };
        x.shape().get(d as usize).copied()
    };
    if dims.is_empty() {
        return x.numel() == 0;
    }
    dims.iter().any(|&d| size(d) == Some(0))
}

/// `a^p` for `a ≥ 0` whose derivative is zero at `a = 0`: 0 there for `p > 0`, +∞ for `p < 0`.
fn power_at_zero(a: &Tensor, p: f64) -> Tensor {
    let zero = a.eq(0.0);
    let powered = Tensor::where_cond(&zero, 1.0, a).pow(p);
    Tensor::where_cond(&zero, if p > 0.0 { 0.0 } else { f64::INFINITY }, &powered)
}

/// `s^(1/p)` for `s ≥ 0` and `p > 0`, 0 with a zero derivative at `s = 0`.
fn root_at_zero(s: &Tensor, p: f64) -> Tensor {
    let zero = s.eq(0.0);
    let safe = Tensor::where_cond(&zero, 1.0, s);
    let root = if p == 2.0 { safe.sqrt() } else { safe.pow(1.0 / p) };
    Tensor::where_cond(&zero, 0.0, &root)
}
