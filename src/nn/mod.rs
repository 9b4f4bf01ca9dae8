//! `kiln::nn`: modules, layers, losses and initialisation (PyTorch's `torch.nn`).
//!
//! Deliberate differences from PyTorch:
//! - A module is a struct with `#[derive(Module)]` (which generates the walk over its
//!   parameters, buffers and children, and `Display`) plus `impl Module { fn forward }`.
//! - `train()`/`eval()`/`to()` take `&mut self`; the other methods take `&self`.
//! - Losses are structs with `forward(input, target)`, not `Module`s (a `Module` has one input).
//! - `ModuleList::forward` panics, as calling a `ModuleList` raises in PyTorch.
//! - Recurrent layers (`RNN`, `LSTM`, `GRU` and their cells) take PyTorch's keyword arguments as
//!   an [`RNNOpts`]; `forward` returns the output sequence and `forward_with_state` takes the
//!   initial state and returns the final one (PyTorch's `(output, h_n)` tuple).
//! - `F::pad` takes PyTorch's `mode` and `value` as one [`functional::PadMode`]
//!   (`PadMode::Constant(v)`, `Reflect`, `Replicate`, `Circular`), and its amounts as `&[i64]`
//!   (negative amounts crop). Circular padding refuses an amount larger than the dim left after
//!   cropping, where PyTorch returns unwritten memory.
//! - `F::interpolate` takes `size=` or `scale_factor=` as one [`functional::Resize`]: an integer
//!   or `[usize; N]` is a size, an `f64` or `[f64; N]` a scale factor. Its nearest modes also
//!   take integer dtypes (PyTorch's CPU kernels take only `uint8` of them).
//! - `MultiheadAttention` and the Transformer layers take their constructor keywords as an
//!   options struct ([`MhaOpts`], [`TransformerLayerOpts`], [`TransformerOpts`]) and their call
//!   keywords as an arguments struct with setters ([`MhaArgs`], [`EncoderArgs`],
//!   [`DecoderArgs`], [`TransformerArgs`]): `mha.forward_with(&q, &k, &v,
//!   MhaArgs::default().key_padding_mask(&m))` returns `(output, Option<weights>)`;
//!   `Module::forward(&x)` is self-attention (an encoder layer or stack with no masks).

mod activation;
mod attention;
mod bilinear;
mod container;
mod conv;
mod conv3d;
mod conv_transpose;
mod distance;
mod dropout;
mod flatten;
pub mod functional;
pub mod init;
mod linear;
mod loss;
mod module;
mod normalization;
mod padding;
pub mod parallel;
mod pooling;
mod pooling_nd;
mod repr;
mod rnn;
mod sparse;
mod summary;
mod transformer;
mod upsampling;
pub mod utils;

pub use activation::{
    Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSigmoid, LogSoftmax, Mish, PReLU, ReLU, ReLU6, SiLU, Sigmoid,
    Softmax, Softplus, Softsign, Tanh, Tanhshrink, CELU, ELU, GELU, GLU, SELU,
};
pub use attention::{MhaArgs, MhaOpts, MultiheadAttention};
pub use bilinear::Bilinear;
pub use container::{ModuleList, Sequential};
pub use conv::{Conv1d, Conv2d};
pub use conv3d::Conv3d;
pub use conv_transpose::{ConvTranspose1d, ConvTranspose2d};
pub use distance::CosineSimilarity;
pub use dropout::{Dropout, Dropout2d};
pub use flatten::Flatten;
pub use kiln_macros::Module;
pub use linear::{Identity, Linear};
pub use loss::*;
pub use module::{fmt_module, CompiledForward, FieldVisitor, FieldVisitorMut, LoadReport, Module, Visit, VisitField};
pub use normalization::{BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm};
pub use padding::{
    CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d, ConstantPad3d, Padding, ReflectionPad1d,
    ReflectionPad2d, ReflectionPad3d, ReplicationPad1d, ReplicationPad2d, ReplicationPad3d, ZeroPad1d, ZeroPad2d,
    ZeroPad3d,
};
pub use parallel::{DataParallel, DataParallelOpts};
pub use pooling::{AdaptiveAvgPool2d, AvgPool2d, MaxPool2d};
pub use pooling_nd::{AdaptiveMaxPool2d, AvgPool1d, MaxPool1d, MaxPool3d};
pub use rnn::{GRUCell, LSTMCell, RNNCell, RNNNonlinearity, RNNOpts, GRU, LSTM, RNN};
pub use sparse::Embedding;
pub use summary::{summary, summary_with_input, LayerSummary, ModelSummary};
pub use transformer::{
    DecoderArgs, EncoderArgs, Transformer, TransformerActivation, TransformerArgs, TransformerDecoder,
    TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer, TransformerLayerOpts, TransformerOpts,
};
pub use upsampling::{PixelShuffle, PixelUnshuffle, Upsample, UpsamplingBilinear2d, UpsamplingNearest2d};
