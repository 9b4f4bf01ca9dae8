//! Fused scaled dot-product attention on CPU tensors (`kiln_runtime::cpu::attention`): one
//! kernel for `softmax(q·kᵀ·scale [+ mask])` with dropout, times `v`, recording
//! `ScaledDotProductFlashAttentionForCpuBackward0` (PyTorch's name for its CPU flash kernel),
//! whose rule is a second kernel that recomputes the weights a block of rows at a time. Neither
//! materializes the `[…, L, S]` weights; a mask is read through its broadcast shape. Inside `kiln::compile` both are opaque nodes of the
//! trace. Under `create_graph` the rule is written with tensor ops instead, so it can be
//! differentiated again.
//!
//! `F::scaled_dot_product_attention` picks this path for CPU f32/f64 operands when the weights
//! are not returned and a mask, if any, needs no gradient; everything else takes the
//! decomposition in `nn::functional::attention`.

use super::{kernel_op, kernel_ops};
use crate::autograd::{self, grads, Saved};
use crate::error::Result;
use crate::tensor::Tensor;
use kiln_runtime::cpu::attention::{
    attention_backward, attention_forward, AttentionBias, AttentionDropout, AttentionElement, AttentionGeom,
};
use kiln_runtime::cpu::CpuBuf;
use kiln_runtime::storage::StorageElement;
use kiln_runtime::DType;

/// Runs the body with `T` the element type of a float `dtype` (f32 or f64).
macro_rules! typed {
    ($dtype:expr, $t:ident => $body:expr) => {
        match $dtype {
            DType::F64 => {
                type $t = f64;
                $body
            }
            _ => {
                type $t = f32;
                $body
            }
        }
    };
}

/// An additive mask of the scores for [`fused_attention`]: `values` has the scores' rank (the
/// batch dims `batch`, then `L`, `S`), each dim the scores' size or 1 (broadcast), the query's
/// dtype, and needs no gradient. A Bool mask arrives as 0 (attend) and −∞.
pub(crate) struct ScoreMask<'a> {
    /// The mask's values.
    pub values: &'a Tensor,
    /// The scores' batch dims (before they were flattened into one).
    pub batch: &'a [usize],
}

/// Where [`AttentionBias`] finds each score's mask value in a contiguous `values` tensor.
#[derive(Clone, Debug)]
struct MaskLayout {
    offsets: Vec<usize>,
    row_stride: usize,
    col_stride: usize,
}

impl MaskLayout {
    /// The layout of `m` broadcast to `m.batch` + `[l, s]`.
    fn of(m: &ScoreMask<'_>, l: usize, s: usize) -> MaskLayout {
        let full: Vec<usize> = m.batch.iter().copied().chain([l, s]).collect();
        let shape = m.values.shape();
        debug_assert_eq!(shape.len(), full.len());
        // Contiguous strides of `values`, 0 where a dim of 1 is broadcast.
        let mut strides = vec![0; shape.len()];
        let mut step = 1;
        for d in (0..shape.len()).rev() {
            strides[d] = if shape[d] == 1 && full[d] != 1 { 0 } else { step };
            step *= shape[d];
        }
        let nb = m.batch.len();
        let problems: usize = m.batch.iter().product();
        let offsets = (0..problems)
            .map(|mut b| {
                let mut offset = 0;
                for d in (0..nb).rev() {
                    offset += (b % full[d]) * strides[d];
                    b /= full[d];
                }
                offset
            })
            .collect();
        MaskLayout { offsets, row_stride: strides[nb], col_stride: strides[nb + 1] }
    }

    /// The kernel's view of `values` (realized, contiguous).
    fn bias<'a, T>(&'a self, values: &'a [T]) -> AttentionBias<'a, T> {
        AttentionBias { values, offsets: &self.offsets, row_stride: self.row_stride, col_stride: self.col_stride }
    }
}

/// `softmax(q·kᵀ·scale [+ mask])·v` of contiguous `q` `[B, L, E]`, `k` `[B, S, E]`, `v`
/// `[B, S, Ev]` (CPU, one float dtype), the mask causal or `mask`, the weights dropped out with
/// probability `dropout_p` (`0 ≤ dropout_p < 1`; the mask is the one `F::dropout` would draw
/// from the global generator).
#[track_caller]
pub(crate) fn fused_attention(
    (q, k, v): (&Tensor, &Tensor, &Tensor),
    mask: Option<ScoreMask<'_>>,
    scale: f64,
    causal: bool,
    dropout_p: f64,
) -> Result<Tensor> {
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    let geom = AttentionGeom { batch: qs[0], l: qs[1], s: ks[1], e: qs[2], ev: vs[2], scale, causal };
    let dropout = (dropout_p > 0.0).then(|| AttentionDropout {
        draw: crate::random::default_generator().draw(geom.batch * geom.l * geom.s),
        p: dropout_p,
    });
    let layout = mask.as_ref().map(|m| MaskLayout::of(m, geom.l, geom.s));
    let fwd_layout = layout.clone();
    let cpu = move |ins: &[Tensor]| {
        let ins = contiguous(ins);
        Ok(typed!(ins[0].dtype(), T => {
            let (q, k, v) = (ins[0].as_slice::<T>(), ins[1].as_slice::<T>(), ins[2].as_slice::<T>());
            let values = ins.get(3).map(|m| m.as_slice::<T>());
            let bias = fwd_layout.as_ref().zip(values.as_deref()).map(|(l, v)| l.bias(v));
            let out = attention_forward(&geom, &q, &k, &v, bias.as_ref(), dropout.as_ref());
            Tensor::from_buf(out, &[geom.batch, geom.l, geom.ev])
        }))
    };
    let mut operands = vec![q, k, v];
    operands.extend(mask.as_ref().map(|m| m.values));
    let out_shape = [geom.batch, geom.l, geom.ev];
    let out = kernel_op("scaled_dot_product_attention", &operands, (&out_shape, q.dtype()), cpu, cpu_only)?;
    if !autograd::is_recording(&[q, k, v]) {
        return Ok(out);
    }
    let mut saved = vec![Saved::of(q), Saved::of(k), Saved::of(v)];
    saved.extend(mask.as_ref().map(|m| Saved::of(m.values)));
    let batch: Vec<usize> = mask.as_ref().map_or_else(Vec::new, |m| m.batch.to_vec());
    Ok(autograd::record(out, "ScaledDotProductFlashAttentionForCpuBackward0", &[q, k, v], saved, move |_, g, s| {
        let qkv = (&s[0], &s[1], &s[2]);
        let mask = s.get(3).map(|values| ScoreMask { values, batch: &batch });
        let [dq, dk, dv] = if autograd::is_recording(&[g, &s[0], &s[1], &s[2]]) {
            math_backward(&geom, mask, dropout.as_ref(), qkv, g)
        } else {
            fused_backward(geom, layout.clone(), dropout, qkv, s.get(3), g)
                .expect("scaled_dot_product_attention backward")
        };
        grads![Some(dq), Some(dk), Some(dv)]
    }))
}

/// The realized operands, each contiguous (itself when it is), without recording.
fn contiguous(ins: &[Tensor]) -> Vec<Tensor> {
    let _off = autograd::no_grad_guard();
    ins.iter().map(Tensor::contiguous).collect()
}

/// The CUDA kernel slot of [`kernel_op`]: the fused path takes only CPU operands.
fn cpu_only<R>(_: &[Tensor]) -> Result<R> {
    crate::error::bail!("scaled_dot_product_attention", Device, "the fused attention kernel runs on the CPU only")
}

/// The gradients of [`fused_attention`] by the backward kernel.
#[track_caller]
fn fused_backward(
    geom: AttentionGeom,
    layout: Option<MaskLayout>,
    dropout: Option<AttentionDropout>,
    (q, k, v): (&Tensor, &Tensor, &Tensor),
    mask: Option<&Tensor>,
    g: &Tensor,
) -> Result<[Tensor; 3]> {
    let outs = [(q.shape(), q.dtype()), (k.shape(), k.dtype()), (v.shape(), v.dtype())];
    let shapes = [q.shape().to_vec(), k.shape().to_vec(), v.shape().to_vec()];
    let cpu = move |ins: &[Tensor]| {
        let ins = contiguous(ins);
        Ok(typed!(ins[0].dtype(), T => backward_bufs::<T>(&geom, layout.as_ref(), dropout.as_ref(), &ins, &shapes)))
    };
    let mut operands = vec![q, k, v, g];
    operands.extend(mask);
    kernel_ops("scaled_dot_product_attention_backward", &operands, outs, cpu, cpu_only)
}

/// [`attention_backward`] on realized `ins` (`q`, `k`, `v`, output gradient, then the mask's
/// values when `layout` is given), as tensors of `shapes`.
fn backward_bufs<T: AttentionElement + StorageElement>(
    geom: &AttentionGeom,
    layout: Option<&MaskLayout>,
    dropout: Option<&AttentionDropout>,
    ins: &[Tensor],
    shapes: &[Vec<usize>; 3],
) -> [Tensor; 3] {
    let (q, k, v, g) = (ins[0].as_slice::<T>(), ins[1].as_slice::<T>(), ins[2].as_slice::<T>(), ins[3].as_slice::<T>());
    let values = ins.get(4).map(|m| m.as_slice::<T>());
    let bias = layout.zip(values.as_deref()).map(|(l, v)| l.bias(v));
    let [dq, dk, dv] = attention_backward(geom, (&q, &k, &v), &g, bias.as_ref(), dropout);
    [Tensor::from_buf(dq, &shapes[0]), Tensor::from_buf(dk, &shapes[1]), Tensor::from_buf(dv, &shapes[2])]
}

/// The gradients of [`fused_attention`] written with differentiable tensor ops (for
/// `create_graph`): the weights `P` recomputed, `dV = P'ᵀ·g`, `dP = (g·Vᵀ)∘M`,
/// `dS = P∘(dP − rowsum(P∘dP))`, `dQ = scale·dS·K`, `dK = scale·dSᵀ·Q`, where `M` is the dropout
/// mask and `P' = P∘M`.
#[track_caller]
fn math_backward(
    geom: &AttentionGeom,
    mask: Option<ScoreMask<'_>>,
    dropout: Option<&AttentionDropout>,
    (q, k, v): (&Tensor, &Tensor, &Tensor),
    g: &Tensor,
) -> [Tensor; 3] {
    let scores = q.matmul(&k.transpose(-2, -1)) * geom.scale;
    let p = if geom.causal {
        let keep = Tensor::ones_opts([geom.l, geom.s], DType::Bool, q.device()).tril(0);
        scores.masked_fill(&keep.logical_not(), f64::NEG_INFINITY).softmax(-1)
    } else if let Some(m) = mask {
        // PyTorch's `_safe_softmax`: a row of −∞ only gives zeros, without NaN.
        let full: Vec<usize> = m.batch.iter().copied().chain([geom.l, geom.s]).collect();
        let scores = scores + m.values.expand(&full).reshape([geom.batch, geom.l, geom.s]);
        let dead = scores.eq(f64::NEG_INFINITY).all_dim_keepdim(-1);
        Tensor::where_cond(&dead, 0.0, Tensor::where_cond(&dead, 0.0, &scores).softmax(-1))
    } else {
        scores.softmax(-1)
    };
    let dropped = dropout.map(|d| {
        typed!(q.dtype(), T => {
            let mut mask = CpuBuf::<T>::uninit(geom.batch * geom.l * geom.s);
            for (b, problem) in mask.chunks_exact_mut((geom.l * geom.s).max(1)).enumerate() {
                d.mask_into(geom, b, 0..geom.l, geom.s, problem);
            }
            Tensor::from_buf(mask, &[geom.batch, geom.l, geom.s])
        })
    });
    let (dp, p_dropped) = match &dropped {
        Some(m) => (g.matmul(&v.transpose(-2, -1)) * m, &p * m),
        None => (g.matmul(&v.transpose(-2, -1)), p.clone()),
    };
    let ds = &p * (&dp - (&p * &dp).sum_dim_keepdim(-1));
    let dq = ds.matmul(k) * geom.scale;
    let dk = ds.transpose(-2, -1).matmul(q) * geom.scale;
    let dv = p_dropped.transpose(-2, -1).matmul(g);
    [dq, dk, dv]
}
