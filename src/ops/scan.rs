//! Cumulative ops along a dim beside `cumsum`: `cumprod`, `cummax`/`cummin` (values and
//! indices) and `logcumsumexp`, each a scan kernel of its own with a backward rule written in
//! tensor ops (so it is differentiable again and `kiln::compile` captures it).
//!
//! As PyTorch: `cumprod` of integer or bool input gives i64 (floats accumulate in f64);
//! `cummax`/`cummin` keep the dtype, take the LAST index among equal extremes and, once a NaN is
//! seen, keep NaN with the index of the latest NaN; `logcumsumexp` needs a floating-point input
//! and adds pairwise as `log(exp(a) + exp(b))` in f64, exact for infinities. On CUDA each is
//! a scan kernel from `kiln_codegen::cuda::scan` (`crate::cuda::scan`) with the same order and
//! arithmetic, and the backward rules run on the device through the ops they are written in.
//!
//! Autograd: `cumprod`'s gradient is exact where the input holds zeros, to second order (see
//! [`cumprod_backward`]); `cummax`/`cummin` add the gradient into the indices they returned
//! (`scatter_add`, as PyTorch's `cummaxmin_backward`); `logcumsumexp`'s is PyTorch's, a
//! reversed `logcumsumexp` of the gradient's positive and negative parts.

use super::reduce::{contiguous_elems, match_float, split_at_dim, wrap};
use super::{kernel_op, kernel_op2};
use crate::autograd::{self, grads, Saved};
use crate::error::{bail, OrPanic, Result};
use crate::Tensor;
use kiln_codegen::cuda::ScanKind;
use kiln_runtime::cpu::reduce::{Accum, OrdElement, OrdValue, SumElement};
use kiln_runtime::cpu::CpuBuf;
use kiln_runtime::{match_cpu, CpuStorage, DType, Element, Shape};

/// A line split of a contiguous tensor around its scanned dim: `(outer, n, inner)`.
type Lines = (usize, usize, usize);

/// Calls `f(line, elements, positions)` for every line along the middle dim of the contiguous
/// `[outer, n, inner]` array `x`: the line's number (`outer` then `inner` order), its elements
/// in order and their positions in `x`.
pub(crate) fn for_each_line<T: Copy>(x: &[T], (outer, n, inner): Lines, mut f: impl FnMut(usize, &[T], &[usize])) {
    let (mut elems, mut at) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for o in 0..outer {
        for c in 0..inner {
            at.clear();
            at.extend((0..n).map(|i| (o * n + i) * inner + c));
            elems.clear();
            elems.extend(at.iter().map(|&p| x[p]));
            f(o * inner + c, &elems, &at);
        }
    }
}

/// Runs `kernel` on the elements of `t` (made contiguous) split into lines along `d`; an error
/// naming `op` for a tensor not on the CPU.
pub(crate) fn on_lines<R>(
    op: &'static str,
    t: &Tensor,
    d: usize,
    kernel: impl FnOnce(&CpuStorage, &kiln_runtime::Layout, Lines) -> R,
) -> Result<R> {
    let x = t.contiguous();
    x.with_cpu(op, |s, l| kernel(s, l, split_at_dim(x.shape(), d)))
}

/// The CUDA side of an op with only a CPU kernel (`searchsorted`, `quantile`, `mode`): an error
/// naming `op`.
pub(crate) fn no_cuda<R>(op: &'static str) -> impl FnOnce(&[Tensor]) -> Result<R> + Send + 'static {
    move |_| Err(crate::tensor::not_on_cuda(op))
}

/// Cumulative products of the contiguous lines of `x`, accumulated as products are.
fn cumprod_kernel<T: SumElement>(x: &[T], lines: Lines) -> CpuBuf<T::Out> {
    let mut out = CpuBuf::<T::Out>::uninit(x.len());
    for_each_line(x, lines, |_, elems, at| {
        let mut acc = T::Acc::ONE;
        for (&v, &p) in elems.iter().zip(at) {
            acc = acc.mul(v.to_acc());
            out[p] = T::from_acc(acc);
        }
    });
    out
}

/// Running extremes (`MAX`: maxima) of the contiguous lines of `x` and their indices, as
/// PyTorch's `cummax_cummin_helper`: a later element replaces the extreme when it is NaN, or
/// when the extreme is not NaN and the element is at least as large (small).
fn cum_extreme_kernel<T: OrdElement, const MAX: bool>(x: &[T], lines: Lines) -> (CpuBuf<T>, CpuBuf<i64>) {
    let (mut values, mut indices) = (CpuBuf::<T>::uninit(x.len()), CpuBuf::<i64>::uninit(x.len()));
    for_each_line(x, lines, |_, elems, at| {
        let Some(&first) = elems.first() else { return };
        let (mut best, mut index) = (first.to_ord(), 0);
        for (i, (&v, &p)) in elems.iter().zip(at).enumerate() {
            let v = v.to_ord();
            let beats = if MAX { v >= best } else { v <= best };
            if v.is_nan() || (!best.is_nan() && beats) {
                (best, index) = (v, i as i64);
            }
            values[p] = T::from_ord(best);
            indices[p] = index;
        }
    });
    (values, indices)
}

/// `log(exp(a) + exp(b))` as PyTorch's `_log_add_exp_helper`: NaN propagates, and two equal
/// infinities give themselves.
fn log_add_exp(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        return f64::NAN;
    }
    let (lo, hi) = (a.min(b), a.max(b));
    if lo != hi || lo.is_finite() {
        hi + (lo - hi).exp().ln_1p()
    } else {
        a
    }
}

/// `log Σ_{j≤i} exp(x_j)` along the contiguous lines of `x`, in f64.
fn logcumsumexp_kernel<T: Element>(x: &[T], lines: Lines) -> CpuBuf<T> {
    let mut out = CpuBuf::<T>::uninit(x.len());
    for_each_line(x, lines, |_, elems, at| {
        let mut acc = f64::NEG_INFINITY;
        for (&v, &p) in elems.iter().zip(at) {
            acc = log_add_exp(v.to_f64(), acc);
            out[p] = T::from_f64(acc);
        }
    });
    out
}

/// `g`'s sums from each position to the end along `d`: `Σ_{j≥i} g_j`.
fn reversed_cumsum(g: &Tensor, d: i64) -> Tensor {
    g.sum_dim_keepdim(d) - g.cumsum(d) + g
}

/// `x` with one element of `value` appended along `d`: a pad that gathers at index `n` read.
fn pad_one(x: &Tensor, d: i64, value: f64) -> Tensor {
    let mut shape = x.shape().to_vec();
    shape[d as usize] = 1;
    Tensor::cat(&[x, &Tensor::full_opts(&shape, value, x.dtype(), x.device())], d)
}

/// For each position `i` along `d`, the position of the first zero of `x` after `i` (`n`, the
/// dim's size, where none follows), as i64.
fn next_zero_after(x: &Tensor, d: i64) -> Tensor {
    let n = x.shape()[d as usize];
    let mut along = vec![1; x.dim()];
    along[d as usize] = n as i64;
    let positions = Tensor::arange(n as i64).reshape(&along).to(&x.device());
    let zeros_at = Tensor::where_cond(&x.eq(0.0), &positions, n as i64);
    // The first zero at or after each position, then shifted one place back.
    let at_or_after = zeros_at.flip(d).cummin(d).0.flip(d);
    pad_one(&at_or_after, d, n as f64).narrow(d, 1, n)
}

/// The gradient of `out = x.cumprod(d)` for `g`, written so that zeros in `x` need no
/// division by them and its own gradient is exact too.
///
/// `dx_i = P_i · R_i` with `P_i = Π_{k<i} x_k` (the output shifted one place) and
/// `R_i = Σ_{j≥i} g_j Π_{i<k≤j} x_k`. With the zeros of `x` replaced by ones (`C`: their
/// cumulative product, `S`: the reversed cumulative sum of `g·C`), the terms of `R_i` up to the
/// first zero `z1` after `i` are `(S_i − S_{z1}) / C_i`, and those up to the second zero `z2`
/// hold the factor `x_{z1}` once: `x_{z1}·(S_{z1} − S_{z2}) / C_i`. Terms with two zeros or
/// more vanish with their first derivatives, so the rule is exact to second order (PyTorch
/// switches to an O(n²) loop for that).
fn cumprod_backward(x: &Tensor, out: &Tensor, g: &Tensor, d: i64) -> Tensor {
    let n = x.shape().get(d as usize).copied().unwrap_or(1);
    if n <= 1 {
        return g.clone();
    }
    let ones = x + x.eq(0.0).to_dtype(x.dtype());
    let c = ones.cumprod(d);
    let s = pad_one(&reversed_cumsum(&(g * &c), d), d, 0.0);
    let z1 = next_zero_after(x, d);
    let z2 = pad_one(&z1, d, n as f64).gather(d, &z1);
    let (s_z1, s_z2) = (s.gather(d, &z1), s.gather(d, &z2));
    let x_z1 = pad_one(x, d, 0.0).gather(d, &z1);
    let r = (s.narrow(d, 0, n) - &s_z1) + x_z1 * (s_z1 - s_z2);
    // P: `[1, out_0, …, out_{n-2}]`, the output shifted one place along `d`.
    let before = pad_one(&out.narrow(d, 0, n - 1), d, 1.0).roll(&[1], &[d]);
    before * r / c
}

/// The smallest finite value of a floating-point dtype, as an f64.
fn lowest(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => f64::MIN,
        DType::F32 => f32::MIN as f64,
        DType::F16 => half::f16::MIN.to_f64(),
        _ => half::bf16::MIN.to_f64(),
    }
}

/// The gradient of `out = x.logcumsumexp(d)` for `g`, as PyTorch's `logcumsumexp_backward`:
/// `dx_i = Σ_{j≥i} g_j exp(x_i − out_j)`, summed in log space apart for the positive and the
/// negative entries of `g`.
fn logcumsumexp_backward(x: &Tensor, out: &Tensor, g: &Tensor, d: i64) -> Tensor {
    let lowest = lowest(g.dtype());
    let log_abs = g.abs().log();
    let part = |sign: Tensor| {
        let log_part = Tensor::where_cond(&sign, &log_abs, lowest) - out;
        (log_part.flip(d).logcumsumexp(d).flip(d) + x).exp()
    };
    part(g.gt(0.0)) - part(g.lt(0.0))
}

/// `kind` of the CUDA tensor `t` along `d`: the values and, for cummax/cummin, the indices.
#[track_caller]
fn on_cuda(op: &'static str, kind: ScanKind, t: &Tensor, d: usize) -> Result<(Tensor, Option<Tensor>)> {
    crate::cuda::scan::scan(op, kind, t, split_at_dim(t.shape(), d))
}

#[track_caller]
fn cumprod_impl(t: &Tensor, dim: i64) -> Result<Tensor> {
    if let Some(c) = crate::amp::autocast::operands("cumprod", &[Some(t)])? {
        return cumprod_impl(c.arg(0), dim);
    }
    const OP: &str = "cumprod";
    let d = t.normalize_dim(OP, dim)?;
    let cpu = move |ins: &[Tensor]| {
        let storage = on_lines(OP, &ins[0], d, |s, l, lines| {
            match_cpu!(s, |b: T| wrap(cumprod_kernel(contiguous_elems(b, l), lines)))
        })?;
        Ok(Tensor::from_cpu_storage(storage, ins[0].shape()))
    };
    let cuda = move |ins: &[Tensor]| Ok(on_cuda(OP, ScanKind::CumProd, &ins[0], d)?.0);
    let out = kernel_op(OP, &[t], (t.shape(), ScanKind::CumProd.out_dtype(t.dtype())), cpu, cuda)?;
    if !(out.dtype().is_float() && autograd::is_recording(&[t])) {
        return Ok(out);
    }
    let d = d as i64;
    Ok(autograd::record(out, "CumprodBackward0", &[t], [Saved::of(t), Saved::Output], move |_, g, s| {
        grads![Some(cumprod_backward(&s[0], &s[1], g, d))]
    }))
}

/// cummax (`MAX`) or cummin along `dim`: values and i64 indices, the values recorded.
#[track_caller]
fn cum_extreme_impl<const MAX: bool>(t: &Tensor, op: &'static str, dim: i64) -> Result<(Tensor, Tensor)> {
    let d = t.normalize_dim(op, dim)?;
    let cpu = move |ins: &[Tensor]| {
        let (values, indices) = on_lines(op, &ins[0], d, |s, l, lines| {
            match_cpu!(s, |b: T| {
                let (v, i) = cum_extreme_kernel::<T, MAX>(contiguous_elems(b, l), lines);
                (wrap(v), i)
            })
        })?;
        let shape = ins[0].shape();
        Ok((Tensor::from_cpu_storage(values, shape), Tensor::from_buf(indices, shape)))
    };
    let kind = if MAX { ScanKind::CumMax } else { ScanKind::CumMin };
    let cuda = move |ins: &[Tensor]| match on_cuda(op, kind, &ins[0], d)? {
        (values, Some(indices)) => Ok((values, indices)),
        (_, None) => unreachable!("cummax and cummin kernels write indices"),
    };
    let outs = [(t.shape(), t.dtype()), (t.shape(), DType::I64)];
    let (values, indices) = kernel_op2(op, &[t], outs, cpu, cuda)?;
    let name = if MAX { "CummaxBackward0" } else { "CumminBackward0" };
    Ok((add_into_indices(name, t, d, values, &indices), indices))
}

/// Records `values`, taken from `x` along `d` at `indices` (shaped like `values`), for
/// autograd under `name`: the gradient adds into the taken positions (a `scatter_add` into
/// zeros, differentiable again). Shared with `mode`.
pub(crate) fn add_into_indices(name: &'static str, x: &Tensor, d: usize, values: Tensor, indices: &Tensor) -> Tensor {
    if !(values.dtype().is_float() && autograd::is_recording(&[x])) {
        return values;
    }
    let shape: Shape = x.shape().into();
    autograd::record(values, name, &[x], [Saved::of(indices)], move |_, g, s| {
        let zeros = Tensor::zeros_opts(&shape, g.dtype(), g.device());
        grads![Some(if shape.is_empty() { g.clone() } else { zeros.scatter_add(d as i64, &s[0], g) })]
    })
}

#[track_caller]
fn logcumsumexp_impl(t: &Tensor, dim: i64) -> Result<Tensor> {
    const OP: &str = "logcumsumexp";
    let d = t.normalize_dim(OP, dim)?;
    if !t.dtype().is_float() {
        bail!(OP, DType, "expected a floating-point input, got {} (shape {:?})", t.dtype(), t.shape());
    }
    let cpu = move |ins: &[Tensor]| {
        let storage = on_lines(OP, &ins[0], d, |s, l, lines| {
            match_float!(s, |b: T| wrap(logcumsumexp_kernel::<T>(contiguous_elems(b, l), lines)))
        })?;
        Ok(Tensor::from_cpu_storage(storage, ins[0].shape()))
    };
    let cuda = move |ins: &[Tensor]| Ok(on_cuda(OP, ScanKind::LogCumSumExp, &ins[0], d)?.0);
    let out = kernel_op(OP, &[t], (t.shape(), t.dtype()), cpu, cuda)?;
    if !autograd::is_recording(&[t]) {
        return Ok(out);
    }
    let d = d as i64;
    Ok(autograd::record(out, "LogcumsumexpBackward0", &[t], [Saved::of(t), Saved::Output], move |_, g, s| {
        grads![Some(logcumsumexp_backward(&s[0], &s[1], g, d))]
    }))
}

impl Tensor {
    /// Cumulative products along `dim` (`x.cumprod(dim)`); integer and bool inputs give i64.
    /// The gradient is exact where the input holds zeros.
    #[track_caller]
    pub fn cumprod(&self, dim: i64) -> Tensor {
        self.try_cumprod(dim).or_panic()
    }

    /// [`Tensor::cumprod`] returning an error for a dim out of range.
    #[track_caller]
    pub fn try_cumprod(&self, dim: i64) -> Result<Tensor> {
        cumprod_impl(self, dim)
    }

    /// Running maxima along `dim` and their indices (i64) (`x.cummax(dim)`): among equal
    /// maxima the last index, as PyTorch; from the first NaN on the value is NaN, at the index
    /// of the latest NaN.
    #[track_caller]
    pub fn cummax(&self, dim: i64) -> (Tensor, Tensor) {
        self.try_cummax(dim).or_panic()
    }

    /// [`Tensor::cummax`] returning an error for a dim out of range.
    #[track_caller]
    pub fn try_cummax(&self, dim: i64) -> Result<(Tensor, Tensor)> {
        cum_extreme_impl::<true>(self, "cummax", dim)
    }

    /// Running minima along `dim` and their indices (`x.cummin(dim)`), with
    /// [`Tensor::cummax`]'s rules for ties (the last index) and NaN.
    #[track_caller]
    pub fn cummin(&self, dim: i64) -> (Tensor, Tensor) {
        self.try_cummin(dim).or_panic()
    }

    /// [`Tensor::cummin`] returning an error for a dim out of range.
    #[track_caller]
    pub fn try_cummin(&self, dim: i64) -> Result<(Tensor, Tensor)> {
        cum_extreme_impl::<false>(self, "cummin", dim)
    }

    /// `log Σ_{j≤i} exp(x_j)` along `dim` (`x.logcumsumexp(dim)`), computed stably (in f64,
    /// pairwise); floating-point input only.
    #[track_caller]
    pub fn logcumsumexp(&self, dim: i64) -> Tensor {
        self.try_logcumsumexp(dim).or_panic()
    }

    /// [`Tensor::logcumsumexp`] returning an error for a dim out of range or an integer or
    /// bool input.
    #[track_caller]
    pub fn try_logcumsumexp(&self, dim: i64) -> Result<Tensor> {
        logcumsumexp_impl(self, dim)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_walk_the_middle_dim() {
        let x: Vec<i32> = (0..12).collect();
        let mut seen = vec![];
        for_each_line(&x, (2, 3, 2), |line, elems, at| seen.push((line, elems.to_vec(), at.to_vec())));
        assert_eq!(seen[1], (1, vec![1, 3, 5], vec![1, 3, 5]));
        assert_eq!(seen[2], (2, vec![6, 8, 10], vec![6, 8, 10]));
        assert_eq!(seen.len(), 4);
    }

    #[test]
    fn log_add_exp_handles_infinities_and_nan() {
        assert_eq!(log_add_exp(f64::NEG_INFINITY, f64::NEG_INFINITY), f64::NEG_INFINITY);
        assert_eq!(log_add_exp(f64::INFINITY, 1.0), f64::INFINITY);
        assert!(log_add_exp(f64::NAN, 1.0).is_nan() && log_add_exp(1.0, f64::NAN).is_nan());
        assert!((log_add_exp(0.0, 0.0) - 2f64.ln()).abs() < 1e-15);
    }
}
