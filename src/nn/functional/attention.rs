//! Scaled dot-product attention (`F.scaled_dot_product_attention`): CPU f32/f64 operands take
//! the fused kernel of `ops::attention` (no `[…, L, S]` weights in memory, eagerly or
//! compiled, forward or backward) unless the weights are asked for or a float mask requires
//! grad; everything else is decomposed into ordinary ops (product, scale, mask, softmax, dropout,
//! product) that autograd and `kiln::compile` treat like any other chain of ops. Both give the
//! same numbers up to rounding, the same dropout mask included.
//!
//! PyTorch's semantics: `softmax(q·kᵀ · scale + bias) · v` over the last two dims, with any
//! leading batch dims (broadcast), `L` query and `S` key positions (`L != S` allowed) and a
//! value feature size of its own. `scale` defaults to `1/√E`. A Bool `attn_mask` marks the
//! positions that *take part* (true = attend; false adds −∞); a float mask is added to the
//! scores. `is_causal` masks a top-left aligned lower triangle (query `i` attends keys `0..=i`),
//! as PyTorch does, and cannot be combined with an explicit mask. A query row whose every key
//! is masked out gives zeros (PyTorch's `_safe_softmax`), not NaN, and passes no gradient.
//! Dropout with `dropout_p > 0` is applied to the attention weights whenever it is asked for:
//! like PyTorch's function, this one has no train flag (pass `0.0` in eval mode).

use super::loss::{check_float, err};
use crate::error::{bail, ErrorKind, OrPanic, Result};
use crate::ops::ScoreMask;
use crate::tensor::Tensor;
use kiln_runtime::layout::broadcast_shapes;
use kiln_runtime::DType;

/// The mask an attention call applies, once checked.
pub(crate) enum AttnMask {
    /// No mask.
    None,
    /// Bool, true = attend; broadcastable to the scores.
    Keep(Tensor),
    /// Added to the scores; broadcastable to them, of the scores' dtype.
    Add(Tensor),
    /// A top-left aligned lower-triangular (causal) mask.
    Causal,
}

/// `softmax(q·kᵀ·scale + mask)·v` with the weights (after dropout) when `want_weights`: the
/// unchecked core shared by [`scaled_dot_product_attention`] and `nn::MultiheadAttention`.
#[track_caller]
pub(crate) fn attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: AttnMask,
    dropout_p: f64,
    scale: f64,
    want_weights: bool,
) -> (Tensor, Option<Tensor>) {
    if let Some(out) = fused(q, k, v, &mask, dropout_p, scale, want_weights) {
        return (out, None);
    }
    let scores = (q * scale).matmul(&k.transpose(-2, -1));
    let (l, s) = (q.shape()[q.dim() - 2], k.shape()[k.dim() - 2]);
    let (weights, masked) = match mask {
        AttnMask::None => (scores.softmax(-1), false),
        AttnMask::Causal => {
            let keep = Tensor::ones_opts([l, s], DType::Bool, q.device()).tril(0);
            (scores.masked_fill(&keep.logical_not(), f64::NEG_INFINITY).softmax(-1), false)
        }
        AttnMask::Keep(keep) => (scores.masked_fill(&keep.logical_not(), f64::NEG_INFINITY), true),
        AttnMask::Add(bias) => (&scores + &bias, true),
    };
    let weights = if masked {
        // PyTorch's `_safe_softmax`: a row with no key left gives zeros. The row is replaced
        // by zeros before the softmax too, so that neither value nor gradient is NaN.
        let dead = weights.eq(f64::NEG_INFINITY).all_dim_keepdim(-1);
        Tensor::where_cond(&dead, 0.0, Tensor::where_cond(&dead, 0.0, &weights).softmax(-1))
    } else {
        weights
    };
    let weights = if dropout_p > 0.0 { super::dropout(&weights, dropout_p, true) } else { weights };
    let out = weights.matmul(v);
    (out, want_weights.then_some(weights))
}

/// The fused kernel's result where it applies: CPU f32/f64 operands, a mask (if any) that
/// needs no gradient, the weights not asked for, `dropout_p < 1`. Batch dims are broadcast and
/// flattened into one; a mask keeps its own (broadcast) shape.
#[track_caller]
fn fused(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: &AttnMask,
    dropout_p: f64,
    scale: f64,
    want_weights: bool,
) -> Option<Tensor> {
    let on_cpu = [q, k, v].iter().all(|t| t.device().is_cpu());
    if want_weights || dropout_p >= 1.0 || !on_cpu || !matches!(q.dtype(), DType::F32 | DType::F64) {
        return None;
    }
    let lead = |t: &Tensor| t.shape()[..t.dim() - 2].to_vec();
    let batch = broadcast_shapes(&lead(q), &lead(k)).and_then(|b| broadcast_shapes(&b, &lead(v)))?;
    // The mask as values added to the scores, of the scores' rank.
    let values = match mask {
        AttnMask::None | AttnMask::Causal => None,
        AttnMask::Add(bias) if bias.requires_grad() => return None,
        AttnMask::Add(bias) => Some(bias.clone()),
        AttnMask::Keep(keep) => Some(
            Tensor::zeros_opts(keep.shape(), q.dtype(), q.device()).masked_fill(&keep.logical_not(), f64::NEG_INFINITY),
        ),
    };
    let values = values.map(|m| {
        let rank = batch.len() + 2;
        let shape: Vec<usize> = std::iter::repeat_n(1, rank - m.dim()).chain(m.shape().iter().copied()).collect();
        m.reshape(&shape).contiguous()
    });
    let problems: usize = batch.iter().product();
    let flat = |t: &Tensor| {
        let (rows, cols) = (t.shape()[t.dim() - 2], t.shape()[t.dim() - 1]);
        let full: Vec<usize> = batch.iter().copied().chain([rows, cols]).collect();
        t.expand(&full).reshape([problems, rows, cols]).contiguous()
    };
    let causal = matches!(mask, AttnMask::Causal);
    let mask = values.as_ref().map(|values| ScoreMask { values, batch: &batch });
    let qkv = (&flat(q), &flat(k), &flat(v));
    let out = crate::ops::fused_attention(qkv, mask, scale, causal, dropout_p).or_panic();
    let shape: Vec<usize> = batch.iter().copied().chain([out.shape()[1], out.shape()[2]]).collect();
    Some(out.reshape(&shape))
}

/// Attention of `query` `(…, L, E)` over `key` `(…, S, E)` and `value` `(…, S, Ev)`, giving
/// `(…, L, Ev)` (`F.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p,
/// is_causal, scale)`; PyTorch's defaults are `None, 0.0, false, None`). See the module doc
/// for the mask rules. Panics on shapes or dtypes that do not fit, naming them.
#[track_caller]
pub fn scaled_dot_product_attention(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    attn_mask: Option<&Tensor>,
    dropout_p: f64,
    is_causal: bool,
    scale: Option<f64>,
) -> Tensor {
    try_scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale).or_panic()
}

/// [`scaled_dot_product_attention`] returning an error for inputs of fewer than 2 dims,
/// feature or sequence sizes that do not match, batch dims that do not broadcast, a mask that
/// does not broadcast to `(…, L, S)` or is neither Bool nor the query's dtype, `is_causal` with
/// a mask, non-float or mixed dtypes, or `dropout_p` outside `[0, 1]`.
#[track_caller]
pub fn try_scaled_dot_product_attention(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    attn_mask: Option<&Tensor>,
    dropout_p: f64,
    is_causal: bool,
    scale: Option<f64>,
) -> Result<Tensor> {
    if let Some(c) = crate::amp::autocast::operands(
        "scaled_dot_product_attention",
        &[Some(query), Some(key), Some(value), attn_mask],
    )? {
        return try_scaled_dot_product_attention(c.arg(0), c.arg(1), c.arg(2), c.opt(3), dropout_p, is_causal, scale);
    }
    const OP: &str = "scaled_dot_product_attention";
    let (q, k, v) = (query.shape(), key.shape(), value.shape());
    if q.len() < 2 || k.len() < 2 || v.len() < 2 {
        bail!(OP, Shape, "expected query (…, L, E), key (…, S, E) and value (…, S, Ev) of at least 2 dims, got shapes {q:?}, {k:?} and {v:?}");
    }
    check_float(OP, "query", query)?;
    for (what, t) in [("key", key), ("value", value)] {
        if t.dtype() != query.dtype() {
            return Err(err(
                OP,
                ErrorKind::DType,
                format!(
                    "expected query, key and value of one dtype, got query {} and {what} {}",
                    query.dtype(),
                    t.dtype()
                ),
            ));
        }
        if t.device() != query.device() {
            return Err(err(
                OP,
                ErrorKind::Device,
                format!(
                    "expected query, key and value on one device, got query on {} and {what} on {}",
                    query.device(),
                    t.device()
                ),
            ));
        }
    }
    let (l, e, s) = (q[q.len() - 2], q[q.len() - 1], k[k.len() - 2]);
    if k[k.len() - 1] != e {
        bail!(
            OP,
            Shape,
            "query of shape {q:?} and key of shape {k:?} have different feature sizes (E = {e} and {})",
            k[k.len() - 1]
        );
    }
    if v[v.len() - 2] != s {
        bail!(
            OP,
            Shape,
            "key of shape {k:?} and value of shape {v:?} have different sequence lengths (S = {s} and {})",
            v[v.len() - 2]
        );
    }
    let batch =
        broadcast_shapes(&q[..q.len() - 2], &k[..k.len() - 2]).and_then(|b| broadcast_shapes(&b, &v[..v.len() - 2]));
    let Some(batch) = batch else {
        bail!(OP, Shape, "the batch dims of query {q:?}, key {k:?} and value {v:?} do not broadcast");
    };
    if !(0.0..=1.0).contains(&dropout_p) {
        return Err(err(OP, ErrorKind::Value, format!("dropout_p has to be between 0 and 1, but got {dropout_p}")));
    }
    let mask = match (attn_mask, is_causal) {
        (Some(_), true) => {
            return Err(err(OP, ErrorKind::Value, "explicit attn_mask should not be set when is_causal=true".into()))
        }
        (None, true) => AttnMask::Causal,
        (None, false) => AttnMask::None,
        (Some(m), false) => {
            let mut scores: Vec<usize> = batch.to_vec();
            scores.extend([l, s]);
            if broadcast_shapes(m.shape(), &scores).as_deref() != Some(scores.as_slice()) {
                bail!(OP, Shape, "attn_mask of shape {:?} does not broadcast to the attention scores' shape {scores:?} (…, L, S) of query {q:?} and key {k:?}",
                    m.shape());
            }
            if m.device() != query.device() {
                return Err(err(
                    OP,
                    ErrorKind::Device,
                    format!("attn_mask is on {}, but query is on {}", m.device(), query.device()),
                ));
            }
            match m.dtype() {
                DType::Bool => AttnMask::Keep(m.clone()),
                d if d == query.dtype() => AttnMask::Add(m.clone()),
                d => {
                    return Err(err(
                        OP,
                        ErrorKind::DType,
                        format!("expected attn_mask of dtype bool or the query's dtype {}, got {d}", query.dtype()),
                    ))
                }
            }
        }
    };
    let scale = scale.unwrap_or(1.0 / (e as f64).sqrt());
    Ok(attention(query, key, value, mask, dropout_p, scale, false).0)
}
