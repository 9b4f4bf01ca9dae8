//! Quantiles and modes along a dim: `quantile` (a decomposition into a stable `sort`, `narrow`
//! and `lerp`, so its gradient is sort's and `kiln::compile` captures it) and `mode` (the most
//! frequent value and its index, a kernel of its own).
//!
//! As PyTorch: `quantile` takes a scalar `q` in `[0, 1]` (a tensor of `q`s is not supported),
//! floating-point (f32, f64) non-empty input, and gives NaN for a row holding NaN; its rank
//! `q·(n − 1)` is computed in the input's dtype and rounded per [`QuantileInterpolation`].
//! `mode` picks the smallest of the most frequent values (each NaN counts once) and returns the
//! index of its LAST occurrence; its gradient goes to that index.

use super::keepdim::keepdim_forms;
use super::kernel_op2;
use super::reduce::{contiguous_elems, wrap};
use super::scan::{add_into_indices, for_each_line, no_cuda, on_lines};
use super::search::sorted_runs;
use crate::error::{bail, OrPanic, Result};
use crate::Tensor;
use kiln_runtime::cpu::reduce::OrdElement;
use kiln_runtime::cpu::CpuBuf;
use kiln_runtime::{match_cpu, DType, Shape};

/// How [`Tensor::quantile`] picks a value when the quantile falls between two sorted
/// elements `a ≤ b` (PyTorch's `interpolation=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QuantileInterpolation {
    /// `a + (b − a)·frac`, the fractional part of the rank (`'linear'`, the default).
    #[default]
    Linear,
    /// `a` (`'lower'`).
    Lower,
    /// `b` (`'higher'`).
    Higher,
    /// `(a + b) / 2` (`'midpoint'`).
    Midpoint,
    /// The element at the rank rounded half to even (`'nearest'`).
    Nearest,
}

/// The sorted positions below and above the quantile `q` of `n` elements of `dtype`, and the
/// weight of the one above, per `interpolation` (PyTorch's `quantile_compute`).
fn ranks(q: f64, n: usize, dtype: DType, interpolation: QuantileInterpolation) -> (usize, usize, f64) {
    let last = (n - 1) as f64;
    let rank = if dtype == DType::F32 { f64::from(q as f32 * last as f32) } else { q * last };
    let rank = match interpolation {
        QuantileInterpolation::Lower => rank.floor(),
        QuantileInterpolation::Higher => rank.ceil(),
        QuantileInterpolation::Nearest => rank.round_ties_even(),
        QuantileInterpolation::Linear | QuantileInterpolation::Midpoint => rank,
    };
    let (below, above) = (rank.floor(), rank.ceil());
    let weight = if interpolation == QuantileInterpolation::Midpoint { 0.5 } else { rank - below };
    (below as usize, above as usize, weight)
}

/// The result shape of a reduction of `shape` over `dim` (every dim for `None`).
fn reduced_shape(shape: &[usize], dim: Option<usize>, keepdim: bool) -> Vec<i64> {
    let kept = |d: usize| dim.is_some_and(|k| k != d);
    (0..shape.len()).filter(|&d| keepdim || kept(d)).map(|d| if kept(d) { shape[d] as i64 } else { 1 }).collect()
}

#[track_caller]
fn quantile_impl(
    t: &Tensor,
    q: f64,
    dim: Option<i64>,
    keepdim: bool,
    interpolation: QuantileInterpolation,
) -> Result<Tensor> {
    const OP: &str = "quantile";
    if !matches!(t.dtype(), DType::F32 | DType::F64) {
        bail!(OP, DType, "quantile() input tensor must be either float or double dtype, got {}", t.dtype());
    }
    if t.numel() == 0 {
        bail!(OP, Value, "quantile() input tensor must be non-empty (shape {:?})", t.shape());
    }
    if !(0.0..=1.0).contains(&q) {
        bail!(OP, Value, "quantile() q must be in the range [0, 1] but got {q}");
    }
    let dim = dim.map(|d| t.normalize_dim(OP, d)).transpose()?;
    let (x, d) = match dim {
        Some(d) if t.dim() > 0 => (t.clone(), d),
        _ => (t.try_reshape([-1])?, 0),
    };
    let (below, above, weight) = ranks(q, x.shape()[d], t.dtype(), interpolation);
    let sorted = x.try_sort(d as i64, false)?.0;
    let low = sorted.try_narrow(d as i64, below as i64, 1)?;
    let value = if above == below { low } else { low.lerp(&sorted.try_narrow(d as i64, above as i64, 1)?, weight) };
    // NaN sorts last: a row holding one has NaN as its quantile, as PyTorch.
    let has_nan = x.ne(&x).any_dim_keepdim(d as i64);
    Tensor::where_cond(&has_nan, f64::NAN, &value).try_reshape(reduced_shape(t.shape(), dim, keepdim))
}

/// The mode of every line of `x` (split as `lines`): the smallest most frequent value and the
/// position of its last occurrence.
fn mode_kernel<T: OrdElement>(x: &[T], lines: (usize, usize, usize)) -> (CpuBuf<T>, CpuBuf<i64>) {
    let count = lines.0 * lines.2;
    let (mut values, mut indices) = (CpuBuf::<T>::uninit(count), CpuBuf::<i64>::uninit(count));
    for_each_line(x, lines, |line, elems, _| {
        let (order, runs) = sorted_runs(elems);
        let (mut start, mut best) = (0, (0, 0));
        for &len in &runs {
            if len > best.1 {
                best = (start, len);
            }
            start += len;
        }
        values[line] = elems[order[best.0]];
        indices[line] = order[best.0 + best.1 - 1] as i64;
    });
    (values, indices)
}

#[track_caller]
fn mode_impl(t: &Tensor, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
    const OP: &str = "mode";
    let d = t.normalize_dim(OP, dim)?;
    if t.shape().get(d) == Some(&0) {
        bail!(OP, Index, "expected reduction dim {d} to have non-zero size (input shape {:?})", t.shape());
    }
    let mut kept = Shape::from_slice(t.shape());
    if let Some(n) = kept.get_mut(d) {
        *n = 1;
    }
    let out_shape = kept.clone();
    let cpu = move |ins: &[Tensor]| {
        let (values, indices) = on_lines(OP, &ins[0], d, |s, l, lines| {
            match_cpu!(s, |b: T| {
                let (v, i) = mode_kernel(contiguous_elems(b, l), lines);
                (wrap(v), i)
            })
        })?;
        Ok((Tensor::from_cpu_storage(values, &out_shape), Tensor::from_buf(indices, &out_shape)))
    };
    let outs = [(&kept[..], t.dtype()), (&kept[..], DType::I64)];
    let (values, indices) = kernel_op2(OP, &[t], outs, cpu, no_cuda(OP))?;
    let values = add_into_indices("ModeBackward0", t, d, values, &indices);
    if keepdim || t.dim() == 0 {
        return Ok((values, indices));
    }
    Ok((values.squeeze_dim(d as i64), indices.squeeze_dim(d as i64)))
}

impl Tensor {
    /// The `q`-quantile (`q` in `[0, 1]`) along `dim`, or of all elements for `None`
    /// (`torch.quantile(x, q, dim, keepdim, interpolation=…)`), the reduced dims kept with
    /// size 1 when `keepdim`. f32 and f64 input only; NaN where a row holds NaN.
    /// Differentiable (the gradient goes to the sorted elements it interpolates).
    #[track_caller]
    pub fn quantile(&self, q: f64, dim: Option<i64>, keepdim: bool, interpolation: QuantileInterpolation) -> Tensor {
        self.try_quantile(q, dim, keepdim, interpolation).or_panic()
    }

    /// [`Tensor::quantile`] returning an error for `q` outside `[0, 1]`, a bad dim, an empty
    /// input or a dtype other than f32 and f64.
    #[track_caller]
    pub fn try_quantile(
        &self,
        q: f64,
        dim: Option<i64>,
        keepdim: bool,
        interpolation: QuantileInterpolation,
    ) -> Result<Tensor> {
        if let Some(c) = crate::amp::autocast::operands("quantile", &[Some(self)])? {
            return c.arg(0).try_quantile(q, dim, keepdim, interpolation);
        }
        quantile_impl(self, q, dim, keepdim, interpolation)
    }
}

keepdim_forms! {
    #[doc = "The most frequent value along `dim` and the index of its last occurrence (i64) (`x.mode(dim)`): \
        the smallest one among equally frequent values, as PyTorch."]
    #[errors = "a bad dim or a dim of size 0"]
    mode try_mode mode_keepdim try_mode_keepdim (dim: i64) -> (Tensor, Tensor) = |x, keepdim| mode_impl(x, dim, keepdim);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_follow_each_interpolation() {
        use QuantileInterpolation::*;
        assert_eq!(ranks(0.4, 5, DType::F64, Linear), (1, 2, 0.6000000000000001));
        assert_eq!(ranks(0.4, 5, DType::F64, Lower), (1, 1, 0.0));
        assert_eq!(ranks(0.4, 5, DType::F64, Higher), (2, 2, 0.0));
        assert_eq!(ranks(0.4, 5, DType::F64, Midpoint), (1, 2, 0.5));
        assert_eq!(ranks(0.5, 2, DType::F64, Nearest), (0, 0, 0.0));
        assert_eq!(reduced_shape(&[2, 3], Some(1), false), [2]);
        assert_eq!(reduced_shape(&[2, 3], None, true), [1, 1]);
    }
}
