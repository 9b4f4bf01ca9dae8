//! Eager layer norm and class-index cross-entropy on CPU f32 tensors as whole-row kernels
//! (`kiln_runtime::cpu::row_kernels`): each row is read from memory once and the result written
//! once, where the op-by-op compositions of `norm.rs` and `loss.rs` make a pass over the whole
//! tensor per op (PyTorch likewise runs one native kernel for each).
//!
//! The compositions stay the definition: they run everywhere else (inside `kiln::compile`,
//! whose generated kernels fuse them and call the same row routines; other dtypes and devices;
//! the cases listed below), and the row kernels equal them within f32 rounding (tests in
//! `tests/fused_rows.rs`, against the composition in f64).
//!
//! Taken when nothing is being captured and every tensor is a CPU f32 one, and:
//! - layer norm: no input requires a gradient (or grad mode is off); the composition is
//!   differentiated otherwise;
//! - cross-entropy: the input is `[N, C]`, the targets are class indices, and there is no class
//!   weight and no label smoothing. Its backward (`CrossEntropyBackward0`) is a row kernel too,
//!   `(softmax(x) - onehot(target))·scale`, from the forward's row statistics; under
//!   `create_graph` it is written with differentiable ops instead, so it differentiates again.

use super::loss::Reduction;
use crate::autograd::{self, grads, Saved};
use crate::error::{bail, Result};
use crate::ops::reduce::contiguous_elems;
use crate::tensor::Tensor;
use kiln_runtime::cpu::row_kernels::{self, RowSoftmaxStats};
use kiln_runtime::cpu::CpuBuf;
use kiln_runtime::{CpuStorage, DType, Device};
use std::sync::Arc;

/// Whether the eager row kernels can take these tensors: not capturing, all CPU f32.
fn on_cpu_f32(ts: &[&Tensor]) -> bool {
    !crate::capture::is_active() && ts.iter().all(|t| t.device() == Device::Cpu && t.dtype() == DType::F32)
}

/// Runs `f` on `t`'s elements (a CPU f32 tensor, read contiguously).
#[track_caller]
fn with_f32<R>(op: &'static str, t: &Tensor, f: impl FnOnce(&[f32]) -> R) -> Result<R> {
    let t = t.detach().contiguous();
    match t.with_cpu(op, |s, l| match s {
        CpuStorage::F32(b) => Some(f(contiguous_elems(b, l))),
        _ => None,
    })? {
        Some(r) => Ok(r),
        None => {
            bail!(op, DType, "expected a float32 tensor on the CPU, got dtype {} (shape {:?})", t.dtype(), t.shape())
        }
    }
}

/// Layer norm of `input` over its last `n` elements as a row kernel, or `None` when the
/// composition must run (see the module doc). Shapes were checked by the caller.
#[track_caller]
pub(super) fn layer_norm(
    input: &Tensor,
    n: usize,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Option<Result<Tensor>> {
    let all: Vec<&Tensor> = [Some(input), weight, bias].into_iter().flatten().collect();
    if !on_cpu_f32(&all) || autograd::is_recording(&all) || input.numel() == 0 || n == 0 {
        return None;
    }
    Some(layer_norm_rows(input, n, weight, bias, eps))
}

/// [`layer_norm`]'s row kernel, once it is taken.
#[track_caller]
fn layer_norm_rows(
    input: &Tensor,
    n: usize,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<Tensor> {
    const OP: &str = "layer_norm";
    let param = |p: Option<&Tensor>| p.map(|p| with_f32(OP, p, <[f32]>::to_vec)).transpose();
    let (w, b) = (param(weight)?, param(bias)?);
    let out = with_f32(OP, input, |x| {
        let mut out = CpuBuf::<f32>::uninit(x.len());
        row_kernels::layer_norm_f32(x, n, w.as_deref(), b.as_deref(), eps as f32, &mut out);
        out
    })?;
    Ok(Tensor::from_buf(out, input.shape()))
}

/// Whether [`cross_entropy`] takes this input and these class-index targets and options (the
/// targets on the CPU too: the composition reports a device mismatch).
pub(super) fn takes_cross_entropy(input: &Tensor, target: &Tensor, weighted: bool, label_smoothing: f64) -> bool {
    on_cpu_f32(&[input])
        && target.device() == Device::Cpu
        && input.dim() == 2
        && input.numel() > 0
        && !weighted
        && label_smoothing == 0.0
}

/// Cross-entropy of logits `input` `[N, C]` against class indices `targets` (checked by the
/// caller: each is `ignore_index` or in `0..C`) as row kernels, recording its backward rule
/// when `input` requires a gradient.
#[track_caller]
pub(super) fn cross_entropy(
    input: &Tensor,
    targets: &[i64],
    ignore_index: i64,
    reduction: Reduction,
) -> Result<Tensor> {
    const OP: &str = "cross_entropy";
    let (rows, n) = (input.shape()[0], input.shape()[1]);
    // Ignored rows' targets become -1: they pick no class and take no gradient.
    let targets: Arc<Vec<i64>> = Arc::new(targets.iter().map(|&t| if t == ignore_index { -1 } else { t }).collect());
    let mut stats = vec![RowSoftmaxStats { max: 0.0, sum: 0.0 }; rows];
    let losses: Vec<f64> = with_f32(OP, input, |x| {
        row_kernels::softmax_stats_f32(x, n, &mut stats);
        (0..rows)
            .map(|r| match targets[r] {
                -1 => 0.0,
                t => stats[r].max as f64 + stats[r].sum.ln() - x[r * n + t as usize] as f64,
            })
            .collect()
    })?;
    let kept = targets.iter().filter(|&&t| t >= 0).count();
    let out = match reduction {
        Reduction::None => Tensor::from_vec(losses.iter().map(|&l| l as f32).collect(), [rows]),
        Reduction::Sum => Tensor::from_vec(vec![losses.iter().sum::<f64>() as f32], ()),
        Reduction::Mean => Tensor::from_vec(vec![(losses.iter().sum::<f64>() / kept as f64) as f32], ()),
    };
    if !autograd::is_recording(&[input]) {
        return Ok(out);
    }
    let stats = Arc::new(stats);
    Ok(autograd::record(out, "CrossEntropyBackward0", &[input], [Saved::of(input)], move |_, g, s| {
        // The gradient's factor for each row: dL/d(loss_r).
        let scale = |g: &Tensor| -> Tensor {
            match reduction {
                Reduction::None => g.unsqueeze(1),
                Reduction::Sum => g.clone(),
                Reduction::Mean => g / kept as f64,
            }
        };
        if autograd::is_grad_enabled() {
            // `create_graph`: the same rule in differentiable ops.
            let mut onehot = vec![0f32; rows * n];
            let mut keep = vec![0f32; rows];
            for (r, &t) in targets.iter().enumerate() {
                if t >= 0 {
                    onehot[r * n + t as usize] = 1.0;
                    keep[r] = 1.0;
                }
            }
            let p = s[0].softmax(1) * Tensor::from_vec(keep, [rows, 1]);
            return grads![Some((p - Tensor::from_vec(onehot, [rows, n])) * scale(g))];
        }
        let row_scale: Vec<f32> = match reduction {
            Reduction::None => g.to_vec::<f32>(),
            _ => vec![scale(g).item::<f32>(); rows],
        };
        let row_scale: Vec<f32> =
            row_scale.iter().zip(targets.iter()).map(|(&v, &t)| if t >= 0 { v } else { 0.0 }).collect();
        let grad = with_f32(OP, &s[0], |x| {
            let mut out = CpuBuf::<f32>::uninit(x.len());
            row_kernels::cross_entropy_grad_f32(x, n, &stats, &targets, &row_scale, &mut out);
            out
        })
        .map(|out| Tensor::from_buf(out, &[rows, n]));
        grads![Some(grad.expect("the saved logits are a CPU f32 tensor"))]
    }))
}
