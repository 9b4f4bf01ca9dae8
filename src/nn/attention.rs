//! `MultiheadAttention` (PyTorch's `nn.MultiheadAttention`): multi-head attention with
//! PyTorch's packed input projection, parameter names, initialisation and mask rules, built on
//! `F::scaled_dot_product_attention`'s decomposition so that autograd and `kiln::compile`
//! handle it like any other module.
//!
//! What matches PyTorch exactly: the parameters and their order in the state dict
//! (`in_proj_weight` `(3E, E)` when key and value have the query's size, else `q_proj_weight`,
//! `k_proj_weight`, `v_proj_weight`; then `in_proj_bias` `(3E)`, `bias_k`/`bias_v` `(1, 1, E)`
//! with `add_bias_kv`, `out_proj.weight`, `out_proj.bias`), their initialisation (Xavier-uniform
//! projections, zero biases, Xavier-normal `bias_k`/`bias_v`), the shapes (`(L, N, E)`, or
//! `(N, L, E)` with `batch_first`, or unbatched `(L, E)`), and the masks: a Bool
//! `key_padding_mask` `(N, S)` or `attn_mask` `(L, S)` / `(N·num_heads, L, S)` marks positions
//! to *ignore* (true = masked, the opposite of `F::scaled_dot_product_attention`'s Bool mask),
//! a float mask is added to the scores. A PyTorch `state_dict()` loads unchanged.
//!
//! Where the API differs (Rust has no keyword arguments):
//! - **Options.** `MultiheadAttention::with_opts(embed_dim, num_heads, MhaOpts { … })` takes
//!   PyTorch's constructor keywords (`dropout`, `bias`, `add_bias_kv`, `add_zero_attn`, `kdim`,
//!   `vdim`, `batch_first`); `MhaOpts::default()` is PyTorch's defaults, with chainable setters
//!   of the same names.
//! - **Call.** `mha.forward_with(&query, &key, &value, MhaArgs::default())` is PyTorch's
//!   `mha(query, key, value)` and returns `(attn_output, Option<attn_weights>)`; the keyword
//!   arguments are the setters of [`MhaArgs`]
//!   (`MhaArgs::default().key_padding_mask(&m).need_weights(false)`), with PyTorch's defaults
//!   (`need_weights` and `average_attn_weights` true). `Module::forward(&x)` is self-attention
//!   without weights: `forward_with(&x, &x, &x, MhaArgs::default().need_weights(false)).0`.
//! - **Fully masked rows.** A query whose every key is masked gives zeros (and no gradient) in
//!   both the output and the weights; PyTorch gives zeros in the output without weights
//!   (through `scaled_dot_product_attention`) but NaN when it computes the weights.
//! - **Errors.** `forward_with` panics on a wrong rank, feature size, mask shape, dtype or device
//!   with a message naming `MultiheadAttention` and the shapes, at the caller's line;
//!   `try_forward_with` returns the error instead.

use super::functional::attention::{attention, AttnMask};
use super::init::{constant_, xavier_normal_, xavier_uniform_};
use super::{functional as F, Linear, Module};
use crate::error::{bail, OrPanic, Result};
use crate::{DType, Tensor};

const NAME: &str = "MultiheadAttention";

/// The keyword arguments of `nn.MultiheadAttention` beyond `embed_dim` and `num_heads`;
/// `Default` is PyTorch's defaults. Set fields with struct-update syntax or the chainable
/// setters of the same names (`MhaOpts::default().batch_first(true)`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MhaOpts {
    /// Dropout probability on the attention weights, in train mode (0).
    pub dropout: f64,
    /// Whether the input and output projections have biases (true).
    pub bias: bool,
    /// Adds learned `bias_k`/`bias_v` as one more key and value position (false).
    pub add_bias_kv: bool,
    /// Adds a zero key and value position after the projections (false).
    pub add_zero_attn: bool,
    /// The key's feature size (`None`: `embed_dim`).
    pub kdim: Option<usize>,
    /// The value's feature size (`None`: `embed_dim`).
    pub vdim: Option<usize>,
    /// Inputs and output as `(N, L, E)` instead of `(L, N, E)` (false).
    pub batch_first: bool,
}

impl Default for MhaOpts {
    /// No dropout, with biases, no `bias_k`/`bias_v`, no zero attention, key and value of
    /// `embed_dim` features, sequence-first.
    fn default() -> Self {
        MhaOpts {
            dropout: 0.0,
            bias: true,
            add_bias_kv: false,
            add_zero_attn: false,
            kdim: None,
            vdim: None,
            batch_first: false,
        }
    }
}

/// Chainable setters, one per field, named as the field.
macro_rules! setters {
    ($ty:ident$(<$lt:lifetime>)?, $($field:ident: $t:ty),* $(,)?) => {
        impl$(<$lt>)? $ty$(<$lt>)? {
            $(
                #[doc = concat!("Sets [`", stringify!($ty), "::", stringify!($field), "`].")]
                #[allow(clippy::useless_conversion)]
                pub fn $field(mut self, $field: $t) -> Self {
                    self.$field = $field.into();
                    self
                }
            )*
        }
    };
}
pub(crate) use setters;

setters!(MhaOpts, dropout: f64, bias: bool, add_bias_kv: bool, add_zero_attn: bool, kdim: usize, vdim: usize, batch_first: bool);

/// The keyword arguments of `MultiheadAttention.forward` (PyTorch's defaults from `Default`):
/// set them with the chainable setters, `MhaArgs::default().attn_mask(&mask)`.
#[derive(Clone, Copy, Debug)]
pub struct MhaArgs<'a> {
    /// `(N, S)` (unbatched `(S)`): Bool true, or a float added, for the keys to ignore (None).
    pub key_padding_mask: Option<&'a Tensor>,
    /// Whether to return the attention weights (true).
    pub need_weights: bool,
    /// `(L, S)` or `(N·num_heads, L, S)`: Bool true, or a float added, for the pairs to ignore
    /// (None).
    pub attn_mask: Option<&'a Tensor>,
    /// Whether the returned weights are averaged over the heads, `(N, L, S)`, rather than
    /// per head, `(N, num_heads, L, S)` (true).
    pub average_attn_weights: bool,
    /// A hint that `attn_mask` is the causal mask; it requires `attn_mask`, and without a
    /// `key_padding_mask` or weights the causal mask is applied in its place, as PyTorch does
    /// (false).
    pub is_causal: bool,
}

impl Default for MhaArgs<'_> {
    /// No masks, weights averaged over the heads, not causal.
    fn default() -> Self {
        MhaArgs {
            key_padding_mask: None,
            need_weights: true,
            attn_mask: None,
            average_attn_weights: true,
            is_causal: false,
        }
    }
}

setters!(MhaArgs<'a>, key_padding_mask: &'a Tensor, need_weights: bool, attn_mask: &'a Tensor, average_attn_weights: bool, is_causal: bool);

/// Multi-head attention (`nn.MultiheadAttention`): `out_proj(concat(head_1, …, head_h))` with
/// `head_i = softmax(q_i·k_iᵀ/√d + mask)·v_i` over `num_heads` heads of `embed_dim / num_heads`
/// features, `q, k, v` the input projections of query, key and value. See the module doc for
/// the shapes, masks and API.
#[derive(crate::nn::Module)]
pub struct MultiheadAttention {
    /// The packed query, key and value projection `(3·embed_dim, embed_dim)`, when key and
    /// value have `embed_dim` features.
    pub in_proj_weight: Option<Tensor>,
    /// The query projection `(embed_dim, embed_dim)`, when `kdim` or `vdim` differ.
    pub q_proj_weight: Option<Tensor>,
    /// The key projection `(embed_dim, kdim)`, when `kdim` or `vdim` differ.
    pub k_proj_weight: Option<Tensor>,
    /// The value projection `(embed_dim, vdim)`, when `kdim` or `vdim` differ.
    pub v_proj_weight: Option<Tensor>,
    /// The packed projection biases `(3·embed_dim)`, when built with biases.
    pub in_proj_bias: Option<Tensor>,
    /// The extra key `(1, 1, embed_dim)`, with `add_bias_kv`.
    pub bias_k: Option<Tensor>,
    /// The extra value `(1, 1, embed_dim)`, with `add_bias_kv`.
    pub bias_v: Option<Tensor>,
    /// The output projection (PyTorch's `NonDynamicallyQuantizableLinear`).
    pub out_proj: Linear,
    /// The model's feature size `E`.
    pub embed_dim: usize,
    /// The key's feature size.
    pub kdim: usize,
    /// The value's feature size.
    pub vdim: usize,
    /// The number of heads.
    pub num_heads: usize,
    /// `embed_dim / num_heads`.
    pub head_dim: usize,
    /// Dropout probability on the attention weights, in train mode.
    pub dropout: f64,
    /// Inputs and output as `(N, L, E)`.
    pub batch_first: bool,
    /// Whether a zero key and value position is appended.
    pub add_zero_attn: bool,
    /// Train mode flag.
    pub training: bool,
}

impl MultiheadAttention {
    /// `nn.MultiheadAttention(embed_dim, num_heads)`: no dropout, with biases, sequence-first.
    #[track_caller]
    pub fn new(embed_dim: usize, num_heads: usize) -> MultiheadAttention {
        MultiheadAttention::with_opts(embed_dim, num_heads, MhaOpts::default())
    }

    /// `nn.MultiheadAttention(embed_dim, num_heads, dropout=…, bias=…, add_bias_kv=…,
    /// add_zero_attn=…, kdim=…, vdim=…, batch_first=…)`; panics when `embed_dim` is not
    /// divisible by `num_heads` or the dropout probability is outside `[0, 1]`.
    #[track_caller]
    pub fn with_opts(embed_dim: usize, num_heads: usize, opts: MhaOpts) -> MultiheadAttention {
        let problem = if embed_dim == 0 || num_heads == 0 {
            Some(format!("embed_dim and num_heads must be greater than zero, got embed_dim={embed_dim} and num_heads={num_heads}"))
        } else if !embed_dim.is_multiple_of(num_heads) {
            Some(format!(
                "embed_dim must be divisible by num_heads, got embed_dim={embed_dim} and num_heads={num_heads}"
            ))
        } else if !(0.0..=1.0).contains(&opts.dropout) {
            Some(format!("dropout should be a number in range [0, 1], got {}", opts.dropout))
        } else {
            None
        };
        if let Some(message) = problem {
            crate::error::fail(NAME, crate::ErrorKind::Value, message);
        }
        let (kdim, vdim) = (opts.kdim.unwrap_or(embed_dim), opts.vdim.unwrap_or(embed_dim));
        let xavier = |shape: &[usize]| {
            let t = Tensor::empty(shape);
            xavier_uniform_(&t, 1.0);
            Some(t.requires_grad_(true))
        };
        let packed = kdim == embed_dim && vdim == embed_dim;
        let (in_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight) = if packed {
            (xavier(&[3 * embed_dim, embed_dim]), None, None, None)
        } else {
            (None, xavier(&[embed_dim, embed_dim]), xavier(&[embed_dim, kdim]), xavier(&[embed_dim, vdim]))
        };
        let in_proj_bias = opts.bias.then(|| Tensor::zeros([3 * embed_dim]).requires_grad_(true));
        let out_proj = Linear::with_bias(embed_dim, embed_dim, opts.bias);
        if let Some(b) = &out_proj.bias {
            let _guard = crate::no_grad_guard();
            constant_(b, 0.0);
        }
        let extra = || {
            let t = Tensor::empty([1, 1, embed_dim]);
            xavier_normal_(&t, 1.0);
            t.requires_grad_(true)
        };
        let (bias_k, bias_v) = if opts.add_bias_kv { (Some(extra()), Some(extra())) } else { (None, None) };
        MultiheadAttention {
            in_proj_weight,
            q_proj_weight,
            k_proj_weight,
            v_proj_weight,
            in_proj_bias,
            bias_k,
            bias_v,
            out_proj,
            embed_dim,
            kdim,
            vdim,
            num_heads,
            head_dim: embed_dim / num_heads,
            dropout: opts.dropout,
            batch_first: opts.batch_first,
            add_zero_attn: opts.add_zero_attn,
            training: true,
        }
    }

    /// PyTorch's `mha(query, key, value, key_padding_mask=…, need_weights=…, attn_mask=…,
    /// average_attn_weights=…, is_causal=…)`: the output (the query's shape and layout) and,
    /// with `need_weights`, the attention weights `(N, L, S)` (per head `(N, num_heads, L, S)`;
    /// without `N` when unbatched). Panics on shapes that do not fit, naming them.
    #[track_caller]
    pub fn forward_with(
        &self,
        query: &Tensor,
        key: &Tensor,
        value: &Tensor,
        args: MhaArgs<'_>,
    ) -> (Tensor, Option<Tensor>) {
        let layer = crate::nn::summary::enter(self);
        let out = self.try_forward_with(query, key, value, args).or_panic();
        layer.record(&out.0);
        out
    }

    /// [`MultiheadAttention::forward_with`] returning an error for a wrong rank, feature size,
    /// batch or sequence size, mask shape or dtype, parameter dtype or device, or `is_causal`
    /// without `attn_mask`.
    #[track_caller]
    pub fn try_forward_with(
        &self,
        query: &Tensor,
        key: &Tensor,
        value: &Tensor,
        args: MhaArgs<'_>,
    ) -> Result<(Tensor, Option<Tensor>)> {
        let (qs, ks, vs) = (query.shape(), key.shape(), value.shape());
        let batched = match qs.len() {
            3 => true,
            2 => false,
            _ => bail!(NAME, Shape, "expected query to be unbatched 2-d (L, E) or batched 3-d, got shape {qs:?}"),
        };
        let rank = qs.len();
        let layout = if !batched {
            "(L, E)"
        } else if self.batch_first {
            "(N, L, E)"
        } else {
            "(L, N, E)"
        };
        if ks.len() != rank || vs.len() != rank {
            bail!(NAME, Shape, "for a {rank}-d query {layout} of shape {qs:?}, expected {rank}-d key and value, got shapes {ks:?} and {vs:?}");
        }
        let weight = self.in_proj_weight.as_ref().or(self.q_proj_weight.as_ref()).expect("an input projection");
        for (what, t) in [("query", query), ("key", key), ("value", value)] {
            if t.dtype() != weight.dtype() {
                bail!(
                    NAME,
                    DType,
                    "{what} has dtype {}, but the layer's parameters have dtype {}",
                    t.dtype(),
                    weight.dtype()
                );
            }
            if t.device() != weight.device() {
                bail!(
                    NAME,
                    Device,
                    "{what} is on {}, but the layer's parameters are on {}",
                    t.device(),
                    weight.device()
                );
            }
        }
        // Internally batch-first: (N, L, E).
        let to_internal = |t: &Tensor| {
            if !batched {
                t.unsqueeze(0)
            } else if self.batch_first {
                t.clone()
            } else {
                t.transpose(0, 1)
            }
        };
        let (xq, xk, xv) = (to_internal(query), to_internal(key), to_internal(value));
        let (n, l, e) = (xq.shape()[0], xq.shape()[1], xq.shape()[2]);
        let s = xk.shape()[1];
        for (what, shape, want) in [("query", qs, self.embed_dim), ("key", ks, self.kdim), ("value", vs, self.vdim)] {
            let got = shape[shape.len() - 1];
            if got != want {
                let dim = if what == "query" {
                    "embed_dim"
                } else if what == "key" {
                    "kdim"
                } else {
                    "vdim"
                };
                bail!(NAME, Shape, "{what} of shape {shape:?} {layout} has {got} features, expected {dim} = {want}");
            }
        }
        if xk.shape()[..2] != xv.shape()[..2] {
            bail!(NAME, Shape, "key of shape {ks:?} and value of shape {vs:?} have different batch or sequence sizes");
        }
        if xk.shape()[0] != n {
            bail!(NAME, Shape, "query of shape {qs:?} and key of shape {ks:?} have different batch sizes {layout}");
        }
        let kpm_shape: Vec<usize> = if batched { vec![n, s] } else { vec![s] };
        if let Some(m) = args.key_padding_mask {
            check_mask("key_padding_mask", m, &[kpm_shape.clone()], query)?;
        }
        if let Some(m) = args.attn_mask {
            check_mask("attn_mask", m, &[vec![l, s], vec![n * self.num_heads, l, s]], query)?;
        }
        if args.is_causal && args.attn_mask.is_none() {
            bail!(NAME, Value, "is_causal is a hint that needs attn_mask (use Transformer::generate_square_subsequent_mask to make one)");
        }

        // The masks as one float bias, broadcastable to (N, num_heads, L, S).
        let (dtype, device) = (query.dtype(), query.device());
        let as_bias = |m: &Tensor| {
            if m.dtype() == DType::Bool {
                Tensor::zeros_opts(m.shape(), dtype, device).masked_fill(m, f64::NEG_INFINITY)
            } else {
                m.to_dtype(dtype)
            }
        };
        let use_causal = args.is_causal && args.key_padding_mask.is_none() && !args.need_weights;
        let h = self.num_heads;
        let (ni, hi, li, si) = (n as i64, h as i64, l as i64, s as i64);
        let mut bias = match args.attn_mask {
            Some(m) if !use_causal => {
                let b = as_bias(m);
                Some(if m.dim() == 2 { b.view([1, 1, li, si]) } else { b.reshape([ni, hi, li, si]) })
            }
            _ => None,
        };
        if let Some(m) = args.key_padding_mask {
            let b = as_bias(m).reshape([ni, 1, 1, si]);
            bias = Some(match bias {
                Some(a) => &a + &b,
                None => b,
            });
        }
        let pad = |b: Tensor| {
            let mut shape = b.shape().to_vec();
            *shape.last_mut().expect("4-d") = 1;
            Tensor::cat(&[b.clone(), Tensor::zeros_opts(&shape, dtype, device)], -1)
        };

        // The input projections.
        let bias_chunks = self.in_proj_bias.as_ref().map(|b| b.chunk(3, 0));
        let b = |i: usize| bias_chunks.as_ref().map(|c| c[i].clone());
        let (q, k, v) = match &self.in_proj_weight {
            Some(w) if query.is_same(key) && key.is_same(value) => {
                let qkv = F::linear(&xq, w, self.in_proj_bias.as_ref()).chunk(3, -1);
                (qkv[0].clone(), qkv[1].clone(), qkv[2].clone())
            }
            Some(w) => {
                let w = w.chunk(3, 0);
                (
                    F::linear(&xq, &w[0], b(0).as_ref()),
                    F::linear(&xk, &w[1], b(1).as_ref()),
                    F::linear(&xv, &w[2], b(2).as_ref()),
                )
            }
            None => {
                let [wq, wk, wv] = [&self.q_proj_weight, &self.k_proj_weight, &self.v_proj_weight]
                    .map(|w| w.as_ref().expect("separate projections"));
                (
                    F::linear(&xq, wq, b(0).as_ref()),
                    F::linear(&xk, wk, b(1).as_ref()),
                    F::linear(&xv, wv, b(2).as_ref()),
                )
            }
        };
        let (mut k, mut v) = (k, v);
        if let (Some(bk), Some(bv)) = (&self.bias_k, &self.bias_v) {
            k = Tensor::cat(&[k, bk.expand([ni, 1, e as i64])], 1);
            v = Tensor::cat(&[v, bv.expand([ni, 1, e as i64])], 1);
            bias = bias.map(pad);
        }
        let heads = |t: &Tensor| t.reshape([ni, -1, hi, self.head_dim as i64]).transpose(1, 2);
        let (q, mut k, mut v) = (heads(&q), heads(&k), heads(&v));
        if self.add_zero_attn {
            let zeros = Tensor::zeros_opts([n, h, 1, self.head_dim], dtype, device);
            k = Tensor::cat(&[k, zeros.clone()], 2);
            v = Tensor::cat(&[v, zeros], 2);
            bias = bias.map(pad);
        }
        let mask = match bias {
            _ if use_causal => AttnMask::Causal,
            Some(b) => AttnMask::Add(b),
            None => AttnMask::None,
        };
        let p = if self.training { self.dropout } else { 0.0 };
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        let (out, weights) = attention(&q, &k, &v, mask, p, scale, args.need_weights);
        let out = self.out_proj.forward(&out.transpose(1, 2).reshape([ni, li, e as i64]));
        let out = if !batched {
            out.squeeze_dim(0)
        } else if self.batch_first {
            out
        } else {
            out.transpose(0, 1)
        };
        let weights = weights.map(|w| {
            let w = if args.average_attn_weights { w.mean_dim(1) } else { w };
            if batched {
                w
            } else {
                w.squeeze_dim(0)
            }
        });
        Ok((out, weights))
    }

    /// PyTorch's `_qkv_same_embed_dim`: whether the projections are packed in
    /// `in_proj_weight`.
    pub fn qkv_same_embed_dim(&self) -> bool {
        self.in_proj_weight.is_some()
    }
}

/// Checks a mask's shape (one of `shapes`), dtype (Bool or floating point) and device.
#[track_caller]
fn check_mask(what: &str, mask: &Tensor, shapes: &[Vec<usize>], query: &Tensor) -> Result<()> {
    if !shapes.iter().any(|s| s.as_slice() == mask.shape()) {
        let want: Vec<String> = shapes.iter().map(|s| format!("{s:?}")).collect();
        bail!(
            NAME,
            Shape,
            "expected {what} of shape {} for a query of shape {:?}, got {what} of shape {:?}",
            want.join(" or "),
            query.shape(),
            mask.shape()
        );
    }
    if mask.dtype() != DType::Bool && !mask.dtype().is_float() {
        bail!(NAME, DType, "only bool and floating types of {what} are supported, got {}", mask.dtype());
    }
    if mask.device() != query.device() {
        bail!(NAME, Device, "{what} is on {}, but the query is on {}", mask.device(), query.device());
    }
    Ok(())
}

impl Module for MultiheadAttention {
    /// Self-attention of `input` without weights.
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        self.forward_with(input, input, input, MhaArgs::default().need_weights(false)).0
    }
}
