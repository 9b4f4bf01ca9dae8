//! Packing and unpacking: `pack_padded_sequence`, `pad_packed_sequence`, `pack_sequence`,
//! `unpack_sequence` and `unpad_sequence` (PyTorch's `torch.nn.utils.rnn`).
//!
//! Each direction is one `index_select` of rows planned on the host from the lengths (padding
//! adds one row of the padding value to select from), so the gradient flows through both and
//! `kiln::compile` captures them like any other op.

use super::packed::{index_tensor, rows, PackedSequence};
use super::{try_pad_sequence, PaddingSide};
use crate::error::{bail, AtCaller, OrPanic, Result};
use crate::Tensor;

/// The sequences of a padded batch packed (`pack_padded_sequence(input, lengths, batch_first,
/// enforce_sorted)`): `input` is `(L, B, *)`, or `(B, L, *)` with `batch_first`, and sequence
/// `b` has `lengths[b]` valid steps. With `enforce_sorted` the lengths must be non-increasing
/// (the batch is packed in its own order); without it the batch is sorted by decreasing length
/// (ties keep their order) and the result remembers the permutation. Panics on bad lengths,
/// naming them.
#[track_caller]
pub fn pack_padded_sequence(
    input: &Tensor,
    lengths: &[usize],
    batch_first: bool,
    enforce_sorted: bool,
) -> PackedSequence {
    try_pack_padded_sequence(input, lengths, batch_first, enforce_sorted).or_panic()
}

/// [`pack_padded_sequence`] returning an error for an input of fewer than 2 dims or no
/// elements, a length count that is not the batch size, a zero length, a length beyond the
/// input's steps, or (with `enforce_sorted`) lengths that increase.
#[track_caller]
pub fn try_pack_padded_sequence(
    input: &Tensor,
    lengths: &[usize],
    batch_first: bool,
    enforce_sorted: bool,
) -> Result<PackedSequence> {
    const OP: &str = "pack_padded_sequence";
    let shape = input.shape();
    let layout = if batch_first { "(B, L, *)" } else { "(L, B, *)" };
    if shape.len() < 2 {
        bail!(OP, Shape, "expected input of at least 2 dims {layout}, got shape {shape:?}");
    }
    if input.numel() == 0 {
        bail!(OP, Shape, "cannot pack empty tensors: input of shape {shape:?}");
    }
    let (steps, batch) = if batch_first { (shape[1], shape[0]) } else { (shape[0], shape[1]) };
    if lengths.len() != batch {
        bail!(
            OP,
            Shape,
            "expected len(lengths) to be equal to batch_size, but got {} (batch_size={batch}, input of shape {shape:?} {layout})",
            lengths.len()
        );
    }
    if let Some(i) = lengths.iter().position(|&n| n == 0) {
        bail!(
            OP,
            Value,
            "the length of every sequence has to be greater than 0, but lengths[{i}] is 0 (lengths {lengths:?})"
        );
    }
    if let Some(i) = lengths.iter().position(|&n| n > steps) {
        bail!(
            OP,
            Value,
            "lengths[{i}] = {} is longer than the input's {steps} steps (input of shape {shape:?} {layout}, lengths {lengths:?})",
            lengths[i]
        );
    }
    let order = if enforce_sorted {
        if let Some(i) = (1..batch).find(|&i| lengths[i] > lengths[i - 1]) {
            bail!(
                OP,
                Value,
                "`lengths` must be sorted in decreasing order when `enforce_sorted` is true, but lengths[{i}] = {} follows {} (lengths {lengths:?}); pass `enforce_sorted = false` to have them sorted",
                lengths[i],
                lengths[i - 1]
            );
        }
        None
    } else {
        let mut order: Vec<usize> = (0..batch).collect();
        order.sort_by(|&a, &b| lengths[b].cmp(&lengths[a]));
        Some(order)
    };
    let sorted: Vec<usize> = match &order {
        Some(order) => order.iter().map(|&b| lengths[b]).collect(),
        None => lengths.to_vec(),
    };
    let batch_sizes: Vec<usize> = (0..sorted[0]).map(|t| sorted.iter().take_while(|&&n| n > t).count()).collect();
    let index = rows(&batch_sizes, order.as_deref())
        .map(|(t, b)| if batch_first { b * steps + t } else { t * batch + b })
        .collect();
    let data = input.flatten(0, 1).try_index_select(0, &index_tensor(index, input.device()))?;
    PackedSequence::try_new(data, batch_sizes, order)
}

/// A packed batch padded back (`pad_packed_sequence(sequence, batch_first, padding_value,
/// total_length)`): `(T, B, *)`, or `(B, T, *)` with `batch_first`, in the original batch's
/// order, with `padding_value` after each sequence's end, where `T` is `total_length` or, when
/// `None`, the longest length; and each sequence's length. Panics when `total_length` is
/// shorter than the longest sequence.
#[track_caller]
pub fn pad_packed_sequence(
    sequence: &PackedSequence,
    batch_first: bool,
    padding_value: f64,
    total_length: Option<usize>,
) -> (Tensor, Vec<usize>) {
    try_pad_packed_sequence(sequence, batch_first, padding_value, total_length).or_panic()
}

/// [`pad_packed_sequence`] returning an error for a `total_length` shorter than the longest
/// sequence or a padding value the data's dtype cannot hold.
#[track_caller]
pub fn try_pad_packed_sequence(
    sequence: &PackedSequence,
    batch_first: bool,
    padding_value: f64,
    total_length: Option<usize>,
) -> Result<(Tensor, Vec<usize>)> {
    const OP: &str = "pad_packed_sequence";
    let longest = sequence.batch_sizes().len();
    let steps = match total_length {
        Some(t) if t < longest => bail!(
            OP,
            Value,
            "expected total_length to be at least the length of the longest sequence in input, but got total_length={t} and max sequence length being {longest}"
        ),
        Some(t) => t,
        None => longest,
    };
    let data = sequence.data();
    let (rows, trailing) = (data.shape()[0], &data.shape()[1..]);
    let batch = sequence.batch_size();
    let lengths = sequence.lengths();
    let offsets = sequence.offsets();
    // Row `rows` of the source is the padding.
    let at = |t: usize, b: usize| if t < lengths[b] { offsets[t] + sequence.rank(b) } else { rows };
    let index: Vec<usize> = if batch_first {
        (0..batch).flat_map(|b| (0..steps).map(move |t| (t, b))).map(|(t, b)| at(t, b)).collect()
    } else {
        (0..steps).flat_map(|t| (0..batch).map(move |b| (t, b))).map(|(t, b)| at(t, b)).collect()
    };
    let pad_shape: Vec<usize> = [1].iter().chain(trailing).copied().collect();
    let pad = Tensor::try_full_opts(&pad_shape, padding_value, data.dtype(), data.device())?;
    let source = Tensor::try_cat(&[data, &pad], 0)?;
    let mut shape: Vec<i64> =
        if batch_first { vec![batch as i64, steps as i64] } else { vec![steps as i64, batch as i64] };
    shape.extend(trailing.iter().map(|&n| n as i64));
    let padded = source.try_index_select(0, &index_tensor(index, data.device()))?.try_reshape(&shape)?;
    Ok((padded, lengths))
}

/// Sequences of different lengths `(L_i, *)` packed (`pack_sequence(sequences,
/// enforce_sorted)`): [`pad_sequence`](super::pad_sequence) then [`pack_padded_sequence`], as
/// PyTorch does. Panics on what either refuses.
#[track_caller]
pub fn pack_sequence(sequences: &[&Tensor], enforce_sorted: bool) -> PackedSequence {
    try_pack_sequence(sequences, enforce_sorted).or_panic()
}

/// [`pack_sequence`] returning an error for no sequences, trailing shapes that differ, an empty
/// sequence, or (with `enforce_sorted`) lengths that increase.
#[track_caller]
pub fn try_pack_sequence(sequences: &[&Tensor], enforce_sorted: bool) -> Result<PackedSequence> {
    let padded = try_pad_sequence(sequences, false, 0.0, PaddingSide::Right)?;
    let lengths: Vec<usize> = sequences.iter().map(|s| s.shape()[0]).collect();
    try_pack_padded_sequence(&padded, &lengths, false, enforce_sorted)
}

/// The sequences of a packed batch, each `(L_i, *)`, in the original batch's order
/// (`unpack_sequence(packed_sequences)`).
#[track_caller]
pub fn unpack_sequence(packed: &PackedSequence) -> Vec<Tensor> {
    let (padded, lengths) = pad_packed_sequence(packed, true, 0.0, None);
    unpad_sequence(&padded, &lengths, true)
}

/// The sequences of a padded batch, each cut to its length (`unpad_sequence(padded_sequences,
/// lengths, batch_first)`): `padded` is `(L, B, *)`, or `(B, L, *)` with `batch_first`. Panics
/// on lengths that do not fit, naming them.
#[track_caller]
pub fn unpad_sequence(padded: &Tensor, lengths: &[usize], batch_first: bool) -> Vec<Tensor> {
    try_unpad_sequence(padded, lengths, batch_first).or_panic()
}

/// [`unpad_sequence`] returning an error for a `padded` of fewer than 2 dims, a length count
/// that is not the batch size, or a length beyond the padded steps.
#[track_caller]
pub fn try_unpad_sequence(padded: &Tensor, lengths: &[usize], batch_first: bool) -> Result<Vec<Tensor>> {
    const OP: &str = "unpad_sequence";
    let shape = padded.shape();
    let layout = if batch_first { "(B, L, *)" } else { "(L, B, *)" };
    if shape.len() < 2 {
        bail!(OP, Shape, "expected padded sequences of at least 2 dims {layout}, got shape {shape:?}");
    }
    let (steps, batch) = if batch_first { (shape[1], shape[0]) } else { (shape[0], shape[1]) };
    if lengths.len() != batch {
        bail!(OP, Shape, "got {} lengths for {batch} sequences (padded shape {shape:?} {layout})", lengths.len());
    }
    if let Some(i) = lengths.iter().position(|&n| n > steps) {
        bail!(
            OP,
            Value,
            "lengths[{i}] = {} is longer than the {steps} padded steps (shape {shape:?} {layout})",
            lengths[i]
        );
    }
    let batch_dim = if batch_first { 0 } else { 1 };
    lengths
        .iter()
        .enumerate()
        .map(|(b, &n)| padded.try_select(batch_dim, b as i64)?.try_narrow(0, 0, n))
        .collect::<Result<Vec<Tensor>>>()
        .at_caller()
}
