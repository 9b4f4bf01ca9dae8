//! Batching sequences of different lengths for the recurrent layers (PyTorch's
//! `torch.nn.utils.rnn`): `pad_sequence` here; [`PackedSequence`] and the functions that pack
//! and unpack it (`pack_padded_sequence`, `pad_packed_sequence`, `pack_sequence`,
//! `unpack_sequence`, `unpad_sequence`) in `pack` and `packed`.
//!
//! Where Rust differs from PyTorch: lengths are a host `&[usize]` (PyTorch takes a list or a
//! CPU int64 tensor), `pad_packed_sequence` returns them as a `Vec<usize>`, and a
//! `PackedSequence` keeps its `batch_sizes` and indices as host vectors (see its doc). The
//! recurrent layers take one through `forward_packed` (`nn::LSTM::forward_packed`).

mod pack;
mod packed;

pub use pack::{
    pack_padded_sequence, pack_sequence, pad_packed_sequence, try_pack_padded_sequence, try_pack_sequence,
    try_pad_packed_sequence, try_unpad_sequence, unpack_sequence, unpad_sequence,
};
pub(crate) use packed::index_tensor;
pub use packed::PackedSequence;

use crate::error::{bail, OrPanic, Result};
use crate::nn::functional as F;
use crate::Tensor;

/// Which end of each sequence the padding goes to (PyTorch's `padding_side`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PaddingSide {
    /// After the sequence (`'right'`, PyTorch's default).
    #[default]
    Right,
    /// Before it (`'left'`).
    Left,
}

/// The sequences `(L_i, *)` padded with `padding_value` to the longest and stacked: `(L, B, *)`,
/// or `(B, L, *)` with `batch_first` (`pad_sequence(sequences, batch_first, padding_value,
/// padding_side)`).
#[track_caller]
pub fn pad_sequence(sequences: &[&Tensor], batch_first: bool, padding_value: f64, side: PaddingSide) -> Tensor {
    try_pad_sequence(sequences, batch_first, padding_value, side).or_panic()
}

/// [`pad_sequence`] returning an error for no sequences, a 0-dim one, or trailing shapes that
/// differ.
#[track_caller]
pub fn try_pad_sequence(
    sequences: &[&Tensor],
    batch_first: bool,
    padding_value: f64,
    side: PaddingSide,
) -> Result<Tensor> {
    let Some(first) = sequences.first() else { bail!("pad_sequence", Value, "received an empty list of sequences") };
    if let Some((i, s)) = sequences.iter().enumerate().find(|(_, s)| s.dim() == 0) {
        bail!("pad_sequence", Shape, "sequence {i} is a 0-dim tensor (shape {:?}); sequences are (L, *)", s.shape());
    }
    let trailing = &first.shape()[1..];
    if let Some((i, s)) = sequences.iter().enumerate().find(|(_, s)| &s.shape()[1..] != trailing) {
        bail!(
            "pad_sequence",
            Shape,
            "sequence {i} has shape {:?}, whose trailing dims differ from sequence 0's {:?}",
            s.shape(),
            first.shape()
        );
    }
    let longest = sequences.iter().map(|s| s.shape()[0]).max().unwrap_or(0);
    let padded = sequences
        .iter()
        .map(|s| {
            // F::pad's amounts run from the last dim back: dim 0's pair comes last.
            let mut amounts = vec![0i64; 2 * s.dim()];
            let extra = (longest - s.shape()[0]) as i64;
            let at = if side == PaddingSide::Left { 2 * s.dim() - 2 } else { 2 * s.dim() - 1 };
            amounts[at] = extra;
            F::try_pad(s, &amounts, F::PadMode::Constant(padding_value))
        })
        .collect::<Result<Vec<Tensor>>>()?;
    Tensor::try_stack(&padded, if batch_first { 0 } else { 1 })
}
