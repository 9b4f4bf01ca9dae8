//! Fused scaled dot-product attention on CPU tensors (`kiln_runtime::cpu::attention`): one
//! kernel for `softmax(q·kᵀ·scale [+ causal mask])` with dropout, times `v`, recording
//! `ScaledDotProductFlashAttentionForCpuBackward0` (PyTorch's name for its CPU flash kernel),
//! whose rule is a second kernel that recomputes the weights a block of rows at a time. Neither
//! materializes the `[…, L, S]` weights. Inside `kiln::compile` both are opaque nodes of the
//! trace. Under `create_graph` the rule is written with tensor ops instead, so it can be
//! differentiated again.
//!
//! `F::scaled_dot_product_attention` picks this path for CPU f32/f64 operands without an
//! explicit mask when the weights are not returned; everything else takes the decomposition
//! in `nn::functional::attention`.

use super::{kernel_op, kernel_ops};
use crate::autograd::{self, grads, Saved};
use crate::error::Result;
use crate::tensor::Tensor;
use kiln_runtime::cpu::attention::{
    attention_backward, attention_forward, AttentionDropout, AttentionElement, AttentionGeom,
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

/// `softmax(q·kᵀ·scale [+ causal mask])·v` of contiguous `q` `[B, L, E]`, `k` `[B, S, E]`,
/// `v` `[B, S, Ev]` (CPU, one float dtype), the weights dropped out with probability
/// `dropout_p` (`0 ≤ dropout_p < 1`; the mask is the one `F::dropout` would draw from the
/// global generator).
#[track_caller]
pub(crate) fn fused_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
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
    let cpu = move |ins: &[Tensor]| {
        let ins = contiguous(ins);
        Ok(typed!(ins[0].dtype(), T => {
            let (q, k, v) = (ins[0].as_slice::<T>(), ins[1].as_slice::<T>(), ins[2].as_slice::<T>());
            let out = attention_forward(&geom, &q, &k, &v, dropout.as_ref());
            Tensor::from_buf(out, &[geom.batch, geom.l, geom.ev])
        }))
    };
    let out = kernel_op(
        "scaled_dot_product_attention",
        &[q, k, v],
        (&[geom.batch, geom.l, geom.ev], q.dtype()),
        cpu,
        cpu_only,
    )?;
    if !autograd::is_recording(&[q, k, v]) {
        return Ok(out);
    }
    let saved = [Saved::of(q), Saved::of(k), Saved::of(v)];
    Ok(autograd::record(out, "ScaledDotProductFlashAttentionForCpuBackward0", &[q, k, v], saved, move |_, g, s| {
        let [dq, dk, dv] = if autograd::is_recording(&[g, &s[0], &s[1], &s[2]]) {
            math_backward(&geom, dropout.as_ref(), (&s[0], &s[1], &s[2]), g)
        } else {
            fused_backward(geom, dropout, (&s[0], &s[1], &s[2]), g).expect("scaled_dot_product_attention backward")
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
    dropout: Option<AttentionDropout>,
    (q, k, v): (&Tensor, &Tensor, &Tensor),
    g: &Tensor,
) -> Result<[Tensor; 3]> {
    let outs = [(q.shape(), q.dtype()), (k.shape(), k.dtype()), (v.shape(), v.dtype())];
    let shapes = [q.shape().to_vec(), k.shape().to_vec(), v.shape().to_vec()];
    let cpu = move |ins: &[Tensor]| {
        let ins = contiguous(ins);
        Ok(typed!(ins[0].dtype(), T => backward_bufs::<T>(&geom, dropout.as_ref(), &ins, &shapes)))
    };
    kernel_ops("scaled_dot_product_attention_backward", &[q, k, v, g], outs, cpu, cpu_only)
}

/// [`attention_backward`] on realized `ins` (`q`, `k`, `v`, output gradient), as tensors of
/// `shapes`.
fn backward_bufs<T: AttentionElement + StorageElement>(
    geom: &AttentionGeom,
    dropout: Option<&AttentionDropout>,
    ins: &[Tensor],
    shapes: &[Vec<usize>; 3],
) -> [Tensor; 3] {
    let (q, k, v, g) = (ins[0].as_slice::<T>(), ins[1].as_slice::<T>(), ins[2].as_slice::<T>(), ins[3].as_slice::<T>());
    let [dq, dk, dv] = attention_backward(geom, (&q, &k, &v), &g, dropout);
    [Tensor::from_buf(dq, &shapes[0]), Tensor::from_buf(dk, &shapes[1]), Tensor::from_buf(dv, &shapes[2])]
}

/// The gradients of [`fused_attention`] written with differentiable tensor ops (for
/// `create_graph`): the weights `P` recomputed, `dV = P'ᵀ·g`, `dP = (g·Vᵀ)∘M`,
/// `dS = P∘(dP − rowsum(P∘dP))`, `dQ = scale·dS·K`, `dK = scale·dSᵀ·Q`, where `M` is the dropout
/// mask and `P' = P∘M`.
#[track_caller]
fn math_backward(
    geom: &AttentionGeom,
    dropout: Option<&AttentionDropout>,
    (q, k, v): (&Tensor, &Tensor, &Tensor),
    g: &Tensor,
) -> [Tensor; 3] {
    let scores = q.matmul(&k.transpose(-2, -1)) * geom.scale;
    let scores = if geom.causal {
        let keep = Tensor::ones_opts([geom.l, geom.s], DType::Bool, q.device()).tril(0);
        scores.masked_fill(&keep.logical_not(), f64::NEG_INFINITY)
    } else {
        scores
    };
    let p = scores.softmax(-1);
    let mask = dropout.map(|d| {
        typed!(q.dtype(), T => {
            let mut mask = CpuBuf::<T>::uninit(geom.batch * geom.l * geom.s);
            for (b, problem) in mask.chunks_exact_mut((geom.l * geom.s).max(1)).enumerate() {
                d.mask_into(geom, b, 0..geom.l, geom.s, problem);
            }
            Tensor::from_buf(mask, &[geom.batch, geom.l, geom.s])
        })
    });
    let (dp, p_dropped) = match &mask {
        Some(m) => (g.matmul(&v.transpose(-2, -1)) * m, &p * m),
        None => (g.matmul(&v.transpose(-2, -1)), p.clone()),
    };
    let ds = &p * (&dp - (&p * &dp).sum_dim_keepdim(-1));
    let dq = ds.matmul(k) * geom.scale;
    let dk = ds.transpose(-2, -1).matmul(q) * geom.scale;
    let dv = p_dropped.transpose(-2, -1).matmul(g);
    [dq, dk, dv]
}
