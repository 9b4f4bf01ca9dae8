//! Transformer layers (PyTorch's `torch.nn.modules.transformer`): `TransformerEncoderLayer`,
//! `TransformerDecoderLayer`, the stacks `TransformerEncoder` and `TransformerDecoder`, and the
//! encoder-decoder `Transformer`, built from `MultiheadAttention`, `Linear`, `LayerNorm` and
//! `Dropout` so that autograd and `kiln::compile` handle them like any other module.
//!
//! What matches PyTorch exactly: the sub-modules and their names in the state dict
//! (`self_attn.in_proj_weight`, `linear1.weight`, `norm1.weight`, `multihead_attn.*` and
//! `norm3` in a decoder layer; `layers.0.…` and `norm.…` in the stacks; `encoder.…` and
//! `decoder.…` in `Transformer`), the computation (post-norm
//! `x = norm1(x + sa(x)); x = norm2(x + ff(x))`, or pre-norm with `norm_first`
//! `x = x + sa(norm1(x)); x = x + ff(norm2(x))`, `ff(x) = linear2(dropout(act(linear1(x))))`,
//! dropout after each block in train mode), the defaults (`dim_feedforward` 2048, dropout 0.1,
//! relu, `layer_norm_eps` 1e-5, sequence-first), the stacks holding `num_layers` copies of the
//! layer they are given (equal parameters, as PyTorch's deep copies), and `Transformer`'s
//! Xavier-uniform initialisation of every matrix. A PyTorch `state_dict()` loads unchanged.
//!
//! Where the API differs (Rust has no keyword arguments):
//! - **Options.** The layers take `with_opts(d_model, nhead, TransformerLayerOpts { … })`;
//!   `Transformer::with_opts` takes a [`TransformerOpts`] of every constructor keyword;
//!   `activation` is the enum [`TransformerActivation`] (relu or gelu; PyTorch also accepts a
//!   callable).
//! - **Masks.** `forward_with(&src, EncoderArgs::default().src_key_padding_mask(&m))` and, for
//!   the decoders and `Transformer`, [`DecoderArgs`] and [`TransformerArgs`] carry PyTorch's
//!   keyword arguments (the encoder stack's `mask` is `src_mask` here too). Mask rules are
//!   `MultiheadAttention`'s (Bool true = ignore, or float added).
//! - **`Module::forward`.** An encoder layer or stack's `forward(&src)` is
//!   `forward_with(&src, EncoderArgs::default())`. The decoders and `Transformer` need two
//!   inputs; their `Module::forward` panics (as a `ModuleList` has none) and names
//!   `forward_with`.
//! - PyTorch's inference fast path (nested tensors, which also zero the padded positions of an
//!   encoder's output in eval mode without gradients) does not exist: padded positions hold
//!   what the computation gives, as in PyTorch's training path.

use super::attention::{setters, MhaArgs, MhaOpts, MultiheadAttention};
use super::init::xavier_uniform_;
use super::repr::py_float;
use super::{functional as F, Dropout, LayerNorm, Linear, Module};
use crate::error::{bail, AtCaller, Error, OrPanic, Result};
use crate::Tensor;

/// The feed-forward activation of the Transformer layers (PyTorch's `activation="relu"` or
/// `"gelu"`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TransformerActivation {
    /// `F::relu` (the default).
    #[default]
    Relu,
    /// `F::gelu`, the exact (erf) form.
    Gelu,
}

impl TransformerActivation {
    #[track_caller]
    fn apply(self, x: &Tensor) -> Tensor {
        match self {
            TransformerActivation::Relu => F::relu(x),
            TransformerActivation::Gelu => F::gelu(x),
        }
    }
}

/// The keyword arguments of `nn.TransformerEncoderLayer` and `nn.TransformerDecoderLayer`
/// beyond `d_model` and `nhead`; `Default` is PyTorch's defaults, with chainable setters of
/// the same names.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TransformerLayerOpts {
    /// The feed-forward hidden size (2048).
    pub dim_feedforward: usize,
    /// Dropout probability, in train mode (0.1).
    pub dropout: f64,
    /// The feed-forward activation (relu).
    pub activation: TransformerActivation,
    /// The layer norms' eps (1e-5).
    pub layer_norm_eps: f64,
    /// Inputs and output as `(N, L, E)` instead of `(L, N, E)` (false).
    pub batch_first: bool,
    /// Layer norm before each block (pre-norm) instead of after the residual sum (false).
    pub norm_first: bool,
    /// Whether the linear layers and layer norms have biases (true).
    pub bias: bool,
}

impl Default for TransformerLayerOpts {
    /// PyTorch's defaults: 2048, 0.1, relu, 1e-5, sequence-first, post-norm, with biases.
    fn default() -> Self {
        TransformerLayerOpts {
            dim_feedforward: 2048,
            dropout: 0.1,
            activation: TransformerActivation::Relu,
            layer_norm_eps: 1e-5,
            batch_first: false,
            norm_first: false,
            bias: true,
        }
    }
}

setters!(TransformerLayerOpts, dim_feedforward: usize, dropout: f64, activation: TransformerActivation, layer_norm_eps: f64, batch_first: bool, norm_first: bool, bias: bool);

/// The keyword arguments of `nn.Transformer`; `Default` is PyTorch's defaults, with chainable
/// setters of the same names.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TransformerOpts {
    /// The model's feature size (512).
    pub d_model: usize,
    /// The number of attention heads (8).
    pub nhead: usize,
    /// Encoder layers (6).
    pub num_encoder_layers: usize,
    /// Decoder layers (6).
    pub num_decoder_layers: usize,
    /// The feed-forward hidden size (2048).
    pub dim_feedforward: usize,
    /// Dropout probability, in train mode (0.1).
    pub dropout: f64,
    /// The feed-forward activation (relu).
    pub activation: TransformerActivation,
    /// The layer norms' eps (1e-5).
    pub layer_norm_eps: f64,
    /// Inputs and output as `(N, L, E)` (false).
    pub batch_first: bool,
    /// Pre-norm layers (false).
    pub norm_first: bool,
    /// Biases in the linear layers and layer norms (true).
    pub bias: bool,
}

impl Default for TransformerOpts {
    /// PyTorch's defaults: 512, 8 heads, 6 + 6 layers, and the layer defaults.
    fn default() -> Self {
        let l = TransformerLayerOpts::default();
        TransformerOpts {
            d_model: 512,
            nhead: 8,
            num_encoder_layers: 6,
            num_decoder_layers: 6,
            dim_feedforward: l.dim_feedforward,
            dropout: l.dropout,
            activation: l.activation,
            layer_norm_eps: l.layer_norm_eps,
            batch_first: l.batch_first,
            norm_first: l.norm_first,
            bias: l.bias,
        }
    }
}

impl TransformerOpts {
    /// The options each layer is built with.
    pub fn layer_opts(&self) -> TransformerLayerOpts {
        TransformerLayerOpts {
            dim_feedforward: self.dim_feedforward,
            dropout: self.dropout,
            activation: self.activation,
            layer_norm_eps: self.layer_norm_eps,
            batch_first: self.batch_first,
            norm_first: self.norm_first,
            bias: self.bias,
        }
    }
}

setters!(TransformerOpts, d_model: usize, nhead: usize, num_encoder_layers: usize, num_decoder_layers: usize, dim_feedforward: usize, dropout: f64, activation: TransformerActivation, layer_norm_eps: f64, batch_first: bool, norm_first: bool, bias: bool);

/// The keyword arguments of an encoder layer's or stack's forward (PyTorch's `src_mask` (the
/// stack's `mask`), `src_key_padding_mask`, `is_causal`), all off by default.
#[derive(Clone, Copy, Debug, Default)]
pub struct EncoderArgs<'a> {
    /// `(S, S)` or `(N·nhead, S, S)` attention mask (Bool true = ignore, or float added).
    pub src_mask: Option<&'a Tensor>,
    /// `(N, S)` key padding mask (Bool true = ignore, or float added).
    pub src_key_padding_mask: Option<&'a Tensor>,
    /// A hint that `src_mask` is causal (it requires `src_mask`).
    pub is_causal: bool,
}

setters!(EncoderArgs<'a>, src_mask: &'a Tensor, src_key_padding_mask: &'a Tensor, is_causal: bool);

/// The keyword arguments of a decoder layer's or stack's forward, all off by default.
#[derive(Clone, Copy, Debug, Default)]
pub struct DecoderArgs<'a> {
    /// `(T, T)` or `(N·nhead, T, T)` self-attention mask.
    pub tgt_mask: Option<&'a Tensor>,
    /// `(T, S)` or `(N·nhead, T, S)` mask of the attention over the memory.
    pub memory_mask: Option<&'a Tensor>,
    /// `(N, T)` key padding mask of the target.
    pub tgt_key_padding_mask: Option<&'a Tensor>,
    /// `(N, S)` key padding mask of the memory.
    pub memory_key_padding_mask: Option<&'a Tensor>,
    /// A hint that `tgt_mask` is causal (it requires `tgt_mask`).
    pub tgt_is_causal: bool,
    /// A hint that `memory_mask` is causal (it requires `memory_mask`).
    pub memory_is_causal: bool,
}

setters!(DecoderArgs<'a>, tgt_mask: &'a Tensor, memory_mask: &'a Tensor, tgt_key_padding_mask: &'a Tensor, memory_key_padding_mask: &'a Tensor, tgt_is_causal: bool, memory_is_causal: bool);

/// The keyword arguments of `Transformer`'s forward, all off by default.
#[derive(Clone, Copy, Debug, Default)]
pub struct TransformerArgs<'a> {
    /// The encoder's `(S, S)` attention mask.
    pub src_mask: Option<&'a Tensor>,
    /// The decoder's `(T, T)` self-attention mask.
    pub tgt_mask: Option<&'a Tensor>,
    /// The decoder's `(T, S)` mask over the memory.
    pub memory_mask: Option<&'a Tensor>,
    /// `(N, S)` key padding mask of the source.
    pub src_key_padding_mask: Option<&'a Tensor>,
    /// `(N, T)` key padding mask of the target.
    pub tgt_key_padding_mask: Option<&'a Tensor>,
    /// `(N, S)` key padding mask of the memory.
    pub memory_key_padding_mask: Option<&'a Tensor>,
    /// A hint that `src_mask` is causal.
    pub src_is_causal: bool,
    /// A hint that `tgt_mask` is causal.
    pub tgt_is_causal: bool,
    /// A hint that `memory_mask` is causal.
    pub memory_is_causal: bool,
}

setters!(TransformerArgs<'a>, src_mask: &'a Tensor, tgt_mask: &'a Tensor, memory_mask: &'a Tensor, src_key_padding_mask: &'a Tensor, tgt_key_padding_mask: &'a Tensor, memory_key_padding_mask: &'a Tensor, src_is_causal: bool, tgt_is_causal: bool, memory_is_causal: bool);

/// An error from a part of `layer`, renamed to name the layer and the part.
fn within<T>(layer: &'static str, part: &str, r: Result<T>) -> Result<T> {
    r.map_err(|e| Error { op: layer, message: format!("{part} ({}): {}", e.op, e.message), ..e })
}

/// Checks the layer options; panics naming the layer.
#[track_caller]
fn check_opts(layer: &'static str, d_model: usize, nhead: usize, opts: &TransformerLayerOpts) {
    let problem = if d_model == 0 || nhead == 0 || !d_model.is_multiple_of(nhead) {
        Some(format!("d_model must be a positive multiple of nhead, got d_model={d_model} and nhead={nhead}"))
    } else if !(0.0..=1.0).contains(&opts.dropout) {
        Some(format!("dropout should be a number in range [0, 1], got {}", opts.dropout))
    } else {
        None
    };
    if let Some(message) = problem {
        crate::error::fail(layer, crate::ErrorKind::Value, message);
    }
}

/// `LayerNorm((d,), eps)` with or without its bias (PyTorch's `LayerNorm(bias=…)`).
#[track_caller]
fn layer_norm(d: usize, eps: f64, bias: bool) -> LayerNorm {
    let mut norm = LayerNorm::with_opts([d], eps, true);
    if !bias {
        norm.bias = None;
    }
    norm
}

/// A detached copy of a parameter with its own storage, keeping `requires_grad`.
fn dup(t: &Tensor) -> Tensor {
    let c = t.detach().deep_clone();
    if t.requires_grad() {
        c.requires_grad_(true)
    } else {
        c
    }
}

fn dup_linear(l: &Linear) -> Linear {
    Linear { weight: dup(&l.weight), bias: l.bias.as_ref().map(dup), ..*l }
}

fn dup_norm(n: &LayerNorm) -> LayerNorm {
    LayerNorm {
        weight: n.weight.as_ref().map(dup),
        bias: n.bias.as_ref().map(dup),
        normalized_shape: n.normalized_shape.clone(),
        eps: n.eps,
    }
}

fn dup_mha(m: &MultiheadAttention) -> MultiheadAttention {
    MultiheadAttention {
        in_proj_weight: m.in_proj_weight.as_ref().map(dup),
        q_proj_weight: m.q_proj_weight.as_ref().map(dup),
        k_proj_weight: m.k_proj_weight.as_ref().map(dup),
        v_proj_weight: m.v_proj_weight.as_ref().map(dup),
        in_proj_bias: m.in_proj_bias.as_ref().map(dup),
        bias_k: m.bias_k.as_ref().map(dup),
        bias_v: m.bias_v.as_ref().map(dup),
        out_proj: dup_linear(&m.out_proj),
        ..*m
    }
}

/// `linear2(dropout(act(linear1(x))))`, then `dropout_out`.
#[track_caller]
fn feed_forward(
    x: &Tensor,
    linear1: &Linear,
    act: TransformerActivation,
    dropout: &Dropout,
    linear2: &Linear,
    dropout_out: &Dropout,
) -> Tensor {
    let h = dropout.forward(&act.apply(&linear1.forward(x)));
    dropout_out.forward(&linear2.forward(&h))
}

/// Attention of `x` over `kv` without weights, then `dropout`; errors name `layer` and `part`.
#[track_caller]
#[allow(clippy::too_many_arguments)]
fn attend(
    layer: &'static str,
    part: &str,
    attn: &MultiheadAttention,
    x: &Tensor,
    kv: &Tensor,
    attn_mask: Option<&Tensor>,
    key_padding_mask: Option<&Tensor>,
    is_causal: bool,
    dropout: &Dropout,
) -> Result<Tensor> {
    let args = MhaArgs { key_padding_mask, need_weights: false, attn_mask, average_attn_weights: true, is_causal };
    let out = within(layer, part, attn.try_forward_with(x, kv, kv, args))?.0;
    Ok(dropout.forward(&out))
}

/// One encoder layer (`nn.TransformerEncoderLayer`): self-attention and a feed-forward block,
/// each with a residual connection and a layer norm (after the sum, or before the block with
/// `norm_first`). Input `(S, N, E)`, `(N, S, E)` with `batch_first`, or unbatched `(S, E)`;
/// output of the same shape.
#[derive(crate::nn::Module)]
#[module(extra_repr = "describe")]
pub struct TransformerEncoderLayer {
    /// The self-attention.
    pub self_attn: MultiheadAttention,
    /// `d_model → dim_feedforward`.
    pub linear1: Linear,
    /// Dropout after the activation.
    pub dropout: Dropout,
    /// `dim_feedforward → d_model`.
    pub linear2: Linear,
    /// The norm of the attention block.
    pub norm1: LayerNorm,
    /// The norm of the feed-forward block.
    pub norm2: LayerNorm,
    /// Dropout after the attention.
    pub dropout1: Dropout,
    /// Dropout after the feed-forward block.
    pub dropout2: Dropout,
    /// Pre-norm instead of post-norm.
    pub norm_first: bool,
    /// The feed-forward activation.
    #[module(skip)]
    pub activation: TransformerActivation,
}

impl TransformerEncoderLayer {
    /// `nn.TransformerEncoderLayer(d_model, nhead)` with PyTorch's defaults.
    #[track_caller]
    pub fn new(d_model: usize, nhead: usize) -> TransformerEncoderLayer {
        TransformerEncoderLayer::with_opts(d_model, nhead, TransformerLayerOpts::default())
    }

    /// `nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=…, dropout=…, activation=…,
    /// layer_norm_eps=…, batch_first=…, norm_first=…, bias=…)`; panics when `d_model` is not a
    /// multiple of `nhead` or the dropout probability is outside `[0, 1]`.
    #[track_caller]
    pub fn with_opts(d_model: usize, nhead: usize, opts: TransformerLayerOpts) -> TransformerEncoderLayer {
        const LAYER: &str = "TransformerEncoderLayer";
        check_opts(LAYER, d_model, nhead, &opts);
        let mha =
            MhaOpts { dropout: opts.dropout, bias: opts.bias, batch_first: opts.batch_first, ..Default::default() };
        TransformerEncoderLayer {
            self_attn: MultiheadAttention::with_opts(d_model, nhead, mha),
            linear1: Linear::with_bias(d_model, opts.dim_feedforward, opts.bias),
            dropout: Dropout::new(opts.dropout),
            linear2: Linear::with_bias(opts.dim_feedforward, d_model, opts.bias),
            norm1: layer_norm(d_model, opts.layer_norm_eps, opts.bias),
            norm2: layer_norm(d_model, opts.layer_norm_eps, opts.bias),
            dropout1: Dropout::new(opts.dropout),
            dropout2: Dropout::new(opts.dropout),
            norm_first: opts.norm_first,
            activation: opts.activation,
        }
    }

    /// PyTorch's `layer(src, src_mask=…, src_key_padding_mask=…, is_causal=…)`. Panics on
    /// shapes that do not fit, naming the layer and them.
    #[track_caller]
    pub fn forward_with(&self, src: &Tensor, args: EncoderArgs<'_>) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        let out = self.try_forward_with(src, args).or_panic();
        layer.record(&out);
        out
    }

    /// [`TransformerEncoderLayer::forward_with`] returning an error for an input or mask of a
    /// shape, dtype or device that does not fit.
    #[track_caller]
    pub fn try_forward_with(&self, src: &Tensor, args: EncoderArgs<'_>) -> Result<Tensor> {
        self.run("TransformerEncoderLayer", src, args)
    }

    #[track_caller]
    fn run(&self, layer: &'static str, src: &Tensor, a: EncoderArgs<'_>) -> Result<Tensor> {
        let sa = |x: &Tensor| {
            let (m, kpm) = (a.src_mask, a.src_key_padding_mask);
            attend(layer, "self_attn", &self.self_attn, x, x, m, kpm, a.is_causal, &self.dropout1)
        };
        let ff =
            |x: &Tensor| feed_forward(x, &self.linear1, self.activation, &self.dropout, &self.linear2, &self.dropout2);
        Ok(if self.norm_first {
            let x = src + &sa(&self.norm1.forward(src)).at_caller()?;
            &x + &ff(&self.norm2.forward(&x))
        } else {
            let x = self.norm1.forward(&(src + &sa(src).at_caller()?));
            self.norm2.forward(&(&x + &ff(&x)))
        })
    }

    /// A copy with its own parameters (PyTorch's `copy.deepcopy`).
    fn duplicate(&self) -> TransformerEncoderLayer {
        TransformerEncoderLayer {
            self_attn: dup_mha(&self.self_attn),
            linear1: dup_linear(&self.linear1),
            linear2: dup_linear(&self.linear2),
            norm1: dup_norm(&self.norm1),
            norm2: dup_norm(&self.norm2),
            ..*self
        }
    }

    fn describe(&self) -> String {
        describe_layer(self.norm_first, self.activation, self.dropout.p)
    }
}

fn describe_layer(norm_first: bool, activation: TransformerActivation, p: f64) -> String {
    let act = match activation {
        TransformerActivation::Relu => "relu",
        TransformerActivation::Gelu => "gelu",
    };
    let mut s = format!("activation={act}, dropout={}", py_float(p));
    if norm_first {
        s += ", norm_first=True";
    }
    s
}

impl Module for TransformerEncoderLayer {
    /// `forward_with(src, EncoderArgs::default())`.
    #[track_caller]
    fn forward(&self, src: &Tensor) -> Tensor {
        self.forward_with(src, EncoderArgs::default())
    }
}

/// One decoder layer (`nn.TransformerDecoderLayer`): self-attention over the target, attention
/// over the encoder's output (`memory`), and a feed-forward block, each with a residual
/// connection and a layer norm (`norm1`, `norm2`, `norm3`).
#[derive(crate::nn::Module)]
#[module(extra_repr = "describe")]
pub struct TransformerDecoderLayer {
    /// The self-attention over the target.
    pub self_attn: MultiheadAttention,
    /// The attention over the memory.
    pub multihead_attn: MultiheadAttention,
    /// `d_model → dim_feedforward`.
    pub linear1: Linear,
    /// Dropout after the activation.
    pub dropout: Dropout,
    /// `dim_feedforward → d_model`.
    pub linear2: Linear,
    /// The norm of the self-attention block.
    pub norm1: LayerNorm,
    /// The norm of the memory-attention block.
    pub norm2: LayerNorm,
    /// The norm of the feed-forward block.
    pub norm3: LayerNorm,
    /// Dropout after the self-attention.
    pub dropout1: Dropout,
    /// Dropout after the memory attention.
    pub dropout2: Dropout,
    /// Dropout after the feed-forward block.
    pub dropout3: Dropout,
    /// Pre-norm instead of post-norm.
    pub norm_first: bool,
    /// The feed-forward activation.
    #[module(skip)]
    pub activation: TransformerActivation,
}

impl TransformerDecoderLayer {
    /// `nn.TransformerDecoderLayer(d_model, nhead)` with PyTorch's defaults.
    #[track_caller]
    pub fn new(d_model: usize, nhead: usize) -> TransformerDecoderLayer {
        TransformerDecoderLayer::with_opts(d_model, nhead, TransformerLayerOpts::default())
    }

    /// `nn.TransformerDecoderLayer(d_model, nhead, dim_feedforward=…, dropout=…, activation=…,
    /// layer_norm_eps=…, batch_first=…, norm_first=…, bias=…)`; panics as
    /// [`TransformerEncoderLayer::with_opts`] does.
    #[track_caller]
    pub fn with_opts(d_model: usize, nhead: usize, opts: TransformerLayerOpts) -> TransformerDecoderLayer {
        const LAYER: &str = "TransformerDecoderLayer";
        check_opts(LAYER, d_model, nhead, &opts);
        let mha =
            MhaOpts { dropout: opts.dropout, bias: opts.bias, batch_first: opts.batch_first, ..Default::default() };
        TransformerDecoderLayer {
            self_attn: MultiheadAttention::with_opts(d_model, nhead, mha),
            multihead_attn: MultiheadAttention::with_opts(d_model, nhead, mha),
            linear1: Linear::with_bias(d_model, opts.dim_feedforward, opts.bias),
            dropout: Dropout::new(opts.dropout),
            linear2: Linear::with_bias(opts.dim_feedforward, d_model, opts.bias),
            norm1: layer_norm(d_model, opts.layer_norm_eps, opts.bias),
            norm2: layer_norm(d_model, opts.layer_norm_eps, opts.bias),
            norm3: layer_norm(d_model, opts.layer_norm_eps, opts.bias),
            dropout1: Dropout::new(opts.dropout),
            dropout2: Dropout::new(opts.dropout),
            dropout3: Dropout::new(opts.dropout),
            norm_first: opts.norm_first,
            activation: opts.activation,
        }
    }

    /// PyTorch's `layer(tgt, memory, tgt_mask=…, memory_mask=…, tgt_key_padding_mask=…,
    /// memory_key_padding_mask=…, tgt_is_causal=…, memory_is_causal=…)`. Panics on shapes that
    /// do not fit, naming the layer and them.
    #[track_caller]
    pub fn forward_with(&self, tgt: &Tensor, memory: &Tensor, args: DecoderArgs<'_>) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        let out = self.try_forward_with(tgt, memory, args).or_panic();
        layer.record(&out);
        out
    }

    /// [`TransformerDecoderLayer::forward_with`] returning an error for inputs or masks that do
    /// not fit.
    #[track_caller]
    pub fn try_forward_with(&self, tgt: &Tensor, memory: &Tensor, args: DecoderArgs<'_>) -> Result<Tensor> {
        self.run("TransformerDecoderLayer", tgt, memory, args)
    }

    #[track_caller]
    fn run(&self, layer: &'static str, tgt: &Tensor, memory: &Tensor, a: DecoderArgs<'_>) -> Result<Tensor> {
        let sa = |x: &Tensor| {
            let (m, kpm) = (a.tgt_mask, a.tgt_key_padding_mask);
            attend(layer, "self_attn", &self.self_attn, x, x, m, kpm, a.tgt_is_causal, &self.dropout1)
        };
        let mha = |x: &Tensor| {
            let (m, kpm) = (a.memory_mask, a.memory_key_padding_mask);
            attend(layer, "multihead_attn", &self.multihead_attn, x, memory, m, kpm, a.memory_is_causal, &self.dropout2)
        };
        let ff =
            |x: &Tensor| feed_forward(x, &self.linear1, self.activation, &self.dropout, &self.linear2, &self.dropout3);
        Ok(if self.norm_first {
            let x = tgt + &sa(&self.norm1.forward(tgt)).at_caller()?;
            let x = &x + &mha(&self.norm2.forward(&x)).at_caller()?;
            &x + &ff(&self.norm3.forward(&x))
        } else {
            let x = self.norm1.forward(&(tgt + &sa(tgt).at_caller()?));
            let x = self.norm2.forward(&(&x + &mha(&x).at_caller()?));
            self.norm3.forward(&(&x + &ff(&x)))
        })
    }

    /// A copy with its own parameters (PyTorch's `copy.deepcopy`).
    fn duplicate(&self) -> TransformerDecoderLayer {
        TransformerDecoderLayer {
            self_attn: dup_mha(&self.self_attn),
            multihead_attn: dup_mha(&self.multihead_attn),
            linear1: dup_linear(&self.linear1),
            linear2: dup_linear(&self.linear2),
            norm1: dup_norm(&self.norm1),
            norm2: dup_norm(&self.norm2),
            norm3: dup_norm(&self.norm3),
            ..*self
        }
    }

    fn describe(&self) -> String {
        describe_layer(self.norm_first, self.activation, self.dropout.p)
    }
}

impl Module for TransformerDecoderLayer {
    /// Panics: a decoder layer takes the target and the memory; call
    /// [`TransformerDecoderLayer::forward_with`].
    #[track_caller]
    fn forward(&self, _input: &Tensor) -> Tensor {
        crate::error::fail(
            "TransformerDecoderLayer",
            crate::ErrorKind::Unsupported,
            "a decoder layer takes (tgt, memory): call forward_with(&tgt, &memory, DecoderArgs::default())",
        )
    }
}

/// `layer` followed by `n - 1` copies of it made by `duplicate` (none for `n = 0`): the layers
/// of a stack, as PyTorch's `_get_clones`.
fn copies<L>(layer: L, n: usize, duplicate: impl Fn(&L) -> L) -> Vec<L> {
    let mut layers: Vec<L> = (1..n).map(|_| duplicate(&layer)).collect();
    if n > 0 {
        layers.insert(0, layer);
    }
    layers
}

/// A stack of `num_layers` encoder layers (`nn.TransformerEncoder`), each a copy of the layer
/// it was built from, and an optional final norm.
#[derive(crate::nn::Module)]
pub struct TransformerEncoder {
    /// The layers, `layers.0`, `layers.1`, … in the state dict.
    pub layers: Vec<TransformerEncoderLayer>,
    /// The final norm, if any.
    pub norm: Option<LayerNorm>,
    /// The number of layers.
    pub num_layers: usize,
}

impl TransformerEncoder {
    /// `nn.TransformerEncoder(encoder_layer, num_layers, norm)`: `num_layers` copies of
    /// `encoder_layer` with equal, separate parameters.
    #[track_caller]
    pub fn new(
        encoder_layer: TransformerEncoderLayer,
        num_layers: usize,
        norm: Option<LayerNorm>,
    ) -> TransformerEncoder {
        let layers = copies(encoder_layer, num_layers, |l| l.duplicate());
        TransformerEncoder { layers, norm, num_layers }
    }

    /// PyTorch's `encoder(src, mask=…, src_key_padding_mask=…, is_causal=…)` (`mask` is
    /// [`EncoderArgs::src_mask`]). Panics on shapes that do not fit, naming them.
    #[track_caller]
    pub fn forward_with(&self, src: &Tensor, args: EncoderArgs<'_>) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        let out = self.try_forward_with(src, args).or_panic();
        layer.record(&out);
        out
    }

    /// [`TransformerEncoder::forward_with`] returning an error for inputs or masks that do not
    /// fit.
    #[track_caller]
    pub fn try_forward_with(&self, src: &Tensor, args: EncoderArgs<'_>) -> Result<Tensor> {
        let mut x = src.clone();
        for layer in &self.layers {
            x = layer.run("TransformerEncoder", &x, args)?;
        }
        Ok(match &self.norm {
            Some(norm) => norm.forward(&x),
            None => x,
        })
    }
}

impl Module for TransformerEncoder {
    /// `forward_with(src, EncoderArgs::default())`.
    #[track_caller]
    fn forward(&self, src: &Tensor) -> Tensor {
        self.forward_with(src, EncoderArgs::default())
    }
}

/// A stack of `num_layers` decoder layers (`nn.TransformerDecoder`), each a copy of the layer
/// it was built from, and an optional final norm.
#[derive(crate::nn::Module)]
pub struct TransformerDecoder {
    /// The layers, `layers.0`, `layers.1`, … in the state dict.
    pub layers: Vec<TransformerDecoderLayer>,
    /// The final norm, if any.
    pub norm: Option<LayerNorm>,
    /// The number of layers.
    pub num_layers: usize,
}

impl TransformerDecoder {
    /// `nn.TransformerDecoder(decoder_layer, num_layers, norm)`: `num_layers` copies of
    /// `decoder_layer` with equal, separate parameters.
    #[track_caller]
    pub fn new(
        decoder_layer: TransformerDecoderLayer,
        num_layers: usize,
        norm: Option<LayerNorm>,
    ) -> TransformerDecoder {
        let layers = copies(decoder_layer, num_layers, |l| l.duplicate());
        TransformerDecoder { layers, norm, num_layers }
    }

    /// PyTorch's `decoder(tgt, memory, tgt_mask=…, memory_mask=…, tgt_key_padding_mask=…,
    /// memory_key_padding_mask=…, tgt_is_causal=…, memory_is_causal=…)`. Panics on shapes that
    /// do not fit, naming them.
    #[track_caller]
    pub fn forward_with(&self, tgt: &Tensor, memory: &Tensor, args: DecoderArgs<'_>) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        let out = self.try_forward_with(tgt, memory, args).or_panic();
        layer.record(&out);
        out
    }

    /// [`TransformerDecoder::forward_with`] returning an error for inputs or masks that do not
    /// fit.
    #[track_caller]
    pub fn try_forward_with(&self, tgt: &Tensor, memory: &Tensor, args: DecoderArgs<'_>) -> Result<Tensor> {
        let mut x = tgt.clone();
        for layer in &self.layers {
            x = layer.run("TransformerDecoder", &x, memory, args)?;
        }
        Ok(match &self.norm {
            Some(norm) => norm.forward(&x),
            None => x,
        })
    }
}

impl Module for TransformerDecoder {
    /// Panics: a decoder takes the target and the memory; call
    /// [`TransformerDecoder::forward_with`].
    #[track_caller]
    fn forward(&self, _input: &Tensor) -> Tensor {
        crate::error::fail(
            "TransformerDecoder",
            crate::ErrorKind::Unsupported,
            "a decoder takes (tgt, memory): call forward_with(&tgt, &memory, DecoderArgs::default())",
        )
    }
}

/// The encoder-decoder Transformer (`nn.Transformer`): an encoder stack and a decoder stack,
/// each with a final layer norm, every matrix parameter drawn Xavier-uniform.
#[derive(crate::nn::Module)]
pub struct Transformer {
    /// The encoder stack (with its final norm).
    pub encoder: TransformerEncoder,
    /// The decoder stack (with its final norm).
    pub decoder: TransformerDecoder,
    /// The model's feature size.
    pub d_model: usize,
    /// The number of heads.
    pub nhead: usize,
    /// Inputs and output as `(N, L, E)`.
    pub batch_first: bool,
}

impl Transformer {
    /// `nn.Transformer()`: PyTorch's defaults (d_model 512, 8 heads, 6 + 6 layers).
    #[track_caller]
    pub fn new() -> Transformer {
        Transformer::with_opts(TransformerOpts::default())
    }

    /// `nn.Transformer(d_model=…, nhead=…, num_encoder_layers=…, num_decoder_layers=…,
    /// dim_feedforward=…, dropout=…, activation=…, layer_norm_eps=…, batch_first=…,
    /// norm_first=…, bias=…)`.
    #[track_caller]
    pub fn with_opts(opts: TransformerOpts) -> Transformer {
        let (d, h, layer) = (opts.d_model, opts.nhead, opts.layer_opts());
        let encoder = TransformerEncoder::new(
            TransformerEncoderLayer::with_opts(d, h, layer),
            opts.num_encoder_layers,
            Some(layer_norm(d, opts.layer_norm_eps, opts.bias)),
        );
        let decoder = TransformerDecoder::new(
            TransformerDecoderLayer::with_opts(d, h, layer),
            opts.num_decoder_layers,
            Some(layer_norm(d, opts.layer_norm_eps, opts.bias)),
        );
        let t = Transformer { encoder, decoder, d_model: d, nhead: h, batch_first: opts.batch_first };
        let _guard = crate::no_grad_guard();
        for p in t.parameters() {
            if p.dim() > 1 {
                xavier_uniform_(&p, 1.0);
            }
        }
        t
    }

    /// PyTorch's `transformer(src, tgt, src_mask=…, tgt_mask=…, memory_mask=…,
    /// src_key_padding_mask=…, tgt_key_padding_mask=…, memory_key_padding_mask=…,
    /// src_is_causal=…, tgt_is_causal=…, memory_is_causal=…)`: the decoder's output, the
    /// target's shape. Panics on shapes that do not fit, naming them.
    #[track_caller]
    pub fn forward_with(&self, src: &Tensor, tgt: &Tensor, args: TransformerArgs<'_>) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        let out = self.try_forward_with(src, tgt, args).or_panic();
        layer.record(&out);
        out
    }

    /// [`Transformer::forward_with`] returning an error for inputs or masks that do not fit.
    #[track_caller]
    pub fn try_forward_with(&self, src: &Tensor, tgt: &Tensor, args: TransformerArgs<'_>) -> Result<Tensor> {
        const NAME: &str = "Transformer";
        let (s, t) = (src.shape(), tgt.shape());
        let batch_dim = usize::from(!self.batch_first);
        if s.len() == 3 && (t.len() != 3 || s[batch_dim] != t[batch_dim]) {
            bail!(
                NAME,
                Shape,
                "the batch number of src and tgt must be equal, got src of shape {s:?} and tgt of shape {t:?}"
            );
        }
        if s.last() != Some(&self.d_model) || t.last() != Some(&self.d_model) {
            bail!(
                NAME,
                Shape,
                "the feature number of src and tgt must be equal to d_model ({}), got src of shape {s:?} and tgt of shape {t:?}",
                self.d_model
            );
        }
        let enc = EncoderArgs {
            src_mask: args.src_mask,
            src_key_padding_mask: args.src_key_padding_mask,
            is_causal: args.src_is_causal,
        };
        let memory = within(NAME, "encoder", self.encoder.try_forward_with(src, enc))?;
        let dec = DecoderArgs {
            tgt_mask: args.tgt_mask,
            memory_mask: args.memory_mask,
            tgt_key_padding_mask: args.tgt_key_padding_mask,
            memory_key_padding_mask: args.memory_key_padding_mask,
            tgt_is_causal: args.tgt_is_causal,
            memory_is_causal: args.memory_is_causal,
        };
        within(NAME, "decoder", self.decoder.try_forward_with(tgt, &memory, dec))
    }

    /// The float causal mask of size `(sz, sz)`: −∞ above the diagonal, 0 on and below it
    /// (`nn.Transformer.generate_square_subsequent_mask(sz)`); f32 on the CPU, convert with
    /// `to_dtype`/`to` for other dtypes and devices.
    #[track_caller]
    pub fn generate_square_subsequent_mask(sz: usize) -> Tensor {
        let above = Tensor::ones_opts([sz, sz], crate::DType::Bool, crate::Device::Cpu).triu(1);
        Tensor::zeros([sz, sz]).masked_fill(&above, f64::NEG_INFINITY)
    }
}

impl Default for Transformer {
    /// `Transformer::new()`.
    fn default() -> Self {
        Transformer::new()
    }
}

impl Module for Transformer {
    /// Panics: a Transformer takes the source and the target; call
    /// [`Transformer::forward_with`].
    #[track_caller]
    fn forward(&self, _input: &Tensor) -> Tensor {
        crate::error::fail(
            "Transformer",
            crate::ErrorKind::Unsupported,
            "a Transformer takes (src, tgt): call forward_with(&src, &tgt, TransformerArgs::default())",
        )
    }
}
