//! `softmax` and `log_softmax` along one dim.
//!
//! Both subtract each row's max before exponentiating (no overflow for large inputs), compute in
//! f32 for f16/bf16 input, and accept floating-point input only: PyTorch raises
//! `"softmax_lastdim_kernel_impl" not implemented for 'Long'` for integers, and so does kiln.
//! Non-contiguous input is copied to a contiguous one first; the kernel then takes the innermost
//! dim row by row, or an outer dim a tile of columns at a time (see
//! `kiln_runtime::cpu::reduce::softmax`). On CUDA one kernel reads any view, a row per warp or
//! block (`kiln_codegen::cuda::reduce`). The result is contiguous.
//!
//! Inside a compiled step (f32/f64) both are written with primitives instead (the row max, then
//! a sum of shifted exponentials, one kernel of two stages that divides, or subtracts the log,
//! in its epilogue),
//! so they fuse with their neighbours; the inline `exp`/`log` differ from the eager kernel's
//! by a few ulp.
//!
//! Both record their backward rule, written with tensor ops from the saved output `y`:
//! `y · (g - Σ g·y)` for softmax and `g - exp(y) · Σ g` for log_softmax (sums along `dim`).
//!
//! PyTorch's `dtype=` keyword (`x.softmax(dim, dtype=torch.float64)`: the input is cast to
//! `dtype` first, so an f16 or integer input can be normalized in f32/f64) is the method
//! [`Tensor::softmax_dtype`] (and `log_softmax_dtype`, `F::softmax_dtype`, …): the cast records
//! `ToCopyBackward0`, so the gradient comes back in the input's dtype.

use super::kernel_op;
use super::reduce::{contiguous_elems, match_float, scalar_type_name, split_at_dim, wrap};
use crate::autograd::{self, grads, Saved};
use crate::error::{bail, OrPanic, Result};
use crate::tensor::Tensor;
use kiln_runtime::cpu::reduce as kernel;
use kiln_runtime::cpu::CpuBuf;
use kiln_runtime::{CpuStorage, DType};

#[track_caller]
fn softmax_impl(t: &Tensor, op: &'static str, dim: i64, log: bool) -> Result<Tensor> {
    if let Some(c) = crate::amp::autocast::operands(op, &[Some(t)])? {
        return softmax_impl(c.arg(0), op, dim, log);
    }
    let d = t.normalize_dim(op, dim)?;
    if !t.dtype().is_float() {
        bail!(op, DType, "not implemented for '{}' (the input must be floating point)", scalar_type_name(t.dtype()));
    }
    let half = matches!(t.dtype(), DType::F16 | DType::BF16);
    // An empty input has no rows to reduce: the eager kernel (an opaque node inside a
    // compiled step) returns it empty, where the captured max over an empty dim would be refused.
    let capture = crate::capture::is_active() && t.numel() > 0;
    let out = if capture && matches!(t.dtype(), DType::F32 | DType::F64) {
        captured(t, d as i64, log)
    } else if capture && half && crate::capture::captures_as_cuda(t.device()) {
        // On CUDA, f16/bf16 as the eager kernel computes them: in f32, rounded once.
        let _no_grad = crate::no_grad_guard();
        captured(&t.try_to_dtype(DType::F32)?, d as i64, log).try_to_dtype(t.dtype())?
    } else {
        eager(t, op, d, log)?
    };
    if !autograd::is_recording(&[t]) {
        return Ok(out);
    }
    let d = d as i64;
    Ok(if log {
        autograd::record(out, "LogSoftmaxBackward0", &[t], [Saved::Output], move |_, g, s| {
            grads![Some(g - s[0].exp() * g.sum_dim_keepdim(d))]
        })
    } else {
        autograd::record(out, "SoftmaxBackward0", &[t], [Saved::Output], move |_, g, s| {
            grads![Some(&s[0] * (g - (g * &s[0]).sum_dim_keepdim(d)))]
        })
    })
}

/// Inside a compiled step: the row max, then the shifted exponentials' sum with the division
/// (or the log subtracted) as the reduction kernel's epilogue: one generated kernel (the sum
/// is the max kernel's second stage). Its nodes carry the caller's line (`#[track_caller]`).
#[track_caller]
fn captured(t: &Tensor, d: i64, log: bool) -> Tensor {
    let _no_grad = crate::no_grad_guard();
    let z = t - t.amax_keepdim(d);
    if log {
        &z - z.exp().sum_dim_keepdim(d).log()
    } else {
        let e = z.exp();
        &e / e.sum_dim_keepdim(d)
    }
}

/// The eager kernel along dim `d` (inside a compiled step, an opaque node running it). The
/// CUDA kernel is strided (any view, no contiguous copy first); the CPU one reads rows.
#[track_caller]
fn eager(t: &Tensor, op: &'static str, d: usize, log: bool) -> Result<Tensor> {
    let cuda =
        move |ins: &[Tensor]| crate::cuda::along(op, kiln_codegen::cuda::CudaReduce::Softmax { log }, &ins[0], d);
    let (outer, n, inner) = split_at_dim(t.shape(), d);
    let cpu = move |ins: &[Tensor]| {
        let x = ins[0].contiguous();
        let storage = x.with_cpu(op, |s, l| {
            match_float!(s, |b: T| {
                let src = contiguous_elems(b, l);
                let mut out = CpuBuf::<T>::uninit(src.len());
                kernel::softmax(src, &mut out, outer, n, inner, log);
                wrap(out)
            })
        })?;
        Ok(Tensor::from_cpu_storage(storage, x.shape()))
    };
    kernel_op(op, &[t], (t.shape(), t.dtype()), cpu, cuda)
}

impl Tensor {
    /// exp(x) / Σ exp(x) along `dim` (`x.softmax(dim)`), computed stably; floating-point input
    /// only.
    #[track_caller]
    pub fn softmax(&self, dim: i64) -> Tensor {
        self.try_softmax(dim).or_panic()
    }

    /// [`Tensor::softmax`] returning an error for a dim out of range or a non-floating-point
    /// input.
    #[track_caller]
    pub fn try_softmax(&self, dim: i64) -> Result<Tensor> {
        softmax_impl(self, "softmax", dim, false)
    }

    /// x - log Σ exp(x) along `dim` (`x.log_softmax(dim)`), computed stably; floating-point
    /// input only.
    #[track_caller]
    pub fn log_softmax(&self, dim: i64) -> Tensor {
        self.try_log_softmax(dim).or_panic()
    }

    /// [`Tensor::log_softmax`] returning an error for a dim out of range or a
    /// non-floating-point input.
    #[track_caller]
    pub fn try_log_softmax(&self, dim: i64) -> Result<Tensor> {
        softmax_impl(self, "log_softmax", dim, true)
    }

    /// [`Tensor::softmax`] of this tensor cast to `dtype` first (`x.softmax(dim, dtype=d)`):
    /// `x.softmax_dtype(1, DType::F64)` normalizes an f32 (or f16, or integer) input in f64.
    /// `dtype` must be a floating-point dtype.
    #[track_caller]
    pub fn softmax_dtype(&self, dim: i64, dtype: DType) -> Tensor {
        self.try_softmax_dtype(dim, dtype).or_panic()
    }

    /// [`Tensor::softmax_dtype`] returning an error for a dim out of range or a
    /// non-floating-point `dtype`.
    #[track_caller]
    pub fn try_softmax_dtype(&self, dim: i64, dtype: DType) -> Result<Tensor> {
        softmax_impl(&self.try_to_dtype(dtype)?, "softmax", dim, false)
    }

    /// [`Tensor::log_softmax`] of this tensor cast to `dtype` first (`x.log_softmax(dim,
    /// dtype=d)`).
    #[track_caller]
    pub fn log_softmax_dtype(&self, dim: i64, dtype: DType) -> Tensor {
        self.try_log_softmax_dtype(dim, dtype).or_panic()
    }

    /// [`Tensor::log_softmax_dtype`] returning an error for a dim out of range or a
    /// non-floating-point `dtype`.
    #[track_caller]
    pub fn try_log_softmax_dtype(&self, dim: i64, dtype: DType) -> Result<Tensor> {
        softmax_impl(&self.try_to_dtype(dtype)?, "log_softmax", dim, true)
    }
}

#[cfg(test)]
mod tests {
    use crate::Tensor;

    #[test]
    fn rows_sum_to_one_along_any_dim() {
        let x = Tensor::new(&[[1.0f32, 2.0, 3.0], [-1.0, 0.0, 1000.0]]);
        for dim in [0, 1, -1] {
            let s = x.softmax(dim).sum_dim(dim).to_vec::<f32>();
            assert!(s.iter().all(|&v| (v - 1.0).abs() < 1e-6), "{dim}: {s:?}");
        }
        // A large entry does not overflow: its row is one-hot.
        assert_eq!(x.softmax(1).to_vec2::<f32>()[1], vec![0.0, 0.0, 1.0]);
    }

    #[test]
    fn integer_input_and_bad_dims_are_errors() {
        let e = Tensor::new(&[1i64, 2]).try_softmax(0).unwrap_err().to_string();
        assert!(e.starts_with("softmax: not implemented for 'Long'"), "{e}");
        let e = Tensor::new(&[1.0f32, 2.0]).try_log_softmax(1).unwrap_err().to_string();
        assert!(
            e.starts_with("log_softmax: dimension out of range (expected to be in range of [-1, 0], but got 1)"),
            "{e}"
        );
    }
}
