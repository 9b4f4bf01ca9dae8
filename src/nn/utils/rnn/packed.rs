//! `PackedSequence` (PyTorch's `torch.nn.utils.rnn.PackedSequence`): a batch of sequences of
//! different lengths as one tensor of their valid steps, time-major, and the bookkeeping that
//! says which row belongs to which sequence and step.

use crate::error::{bail, OrPanic, Result};
use crate::{DType, Device, Tensor};

/// A batch of sequences of different lengths, packed: the valid steps of every sequence, step
/// by step, longest sequence first (PyTorch's `PackedSequence`). Made by
/// [`pack_padded_sequence`](super::pack_padded_sequence) or
/// [`pack_sequence`](super::pack_sequence), read by the recurrent layers' `forward_packed` and
/// undone by [`pad_packed_sequence`](super::pad_packed_sequence).
///
/// - [`data`](Self::data): `(Σ lengths, *)`; its first `batch_sizes[0]` rows are step 0 of every
///   sequence, the next `batch_sizes[1]` rows step 1 of those at least 2 long, and so on, each
///   step's rows in the order of decreasing length.
/// - [`batch_sizes`](Self::batch_sizes): how many sequences have each step (non-increasing).
/// - [`sorted_indices`](Self::sorted_indices): for each position in that order, which sequence
///   of the original batch it is; `None` when the batch was already in that order
///   (`enforce_sorted`). [`unsorted_indices`](Self::unsorted_indices) is its inverse.
///
/// Unlike PyTorch, whose `batch_sizes` and indices are int64 tensors, these are host
/// `Vec<usize>`: they are only ever read on the host to plan the packing, and keeping them
/// there lets `kiln::compile` capture packing, the recurrent layers and unpacking without a
/// graph break.
#[derive(Clone, Debug)]
pub struct PackedSequence {
    data: Tensor,
    batch_sizes: Vec<usize>,
    sorted_indices: Option<Vec<usize>>,
    unsorted_indices: Option<Vec<usize>>,
}

impl PackedSequence {
    /// A packed sequence from its parts (`PackedSequence(data, batch_sizes, sorted_indices)`);
    /// `unsorted_indices` is computed. Panics on parts that do not fit together, naming them.
    #[track_caller]
    pub fn new(data: Tensor, batch_sizes: Vec<usize>, sorted_indices: Option<Vec<usize>>) -> PackedSequence {
        PackedSequence::try_new(data, batch_sizes, sorted_indices).or_panic()
    }

    /// [`PackedSequence::new`] returning an error for a 0-dim `data`, empty, zero or increasing
    /// `batch_sizes`, batch sizes that do not add up to `data`'s rows, or `sorted_indices`
    /// that are not a permutation of the batch.
    #[track_caller]
    pub fn try_new(
        data: Tensor,
        batch_sizes: Vec<usize>,
        sorted_indices: Option<Vec<usize>>,
    ) -> Result<PackedSequence> {
        const OP: &str = "PackedSequence";
        if data.dim() == 0 {
            bail!(OP, Shape, "data must have a dim of steps, got a 0-dim tensor");
        }
        if batch_sizes.first().is_none_or(|&b| b == 0) || batch_sizes.windows(2).any(|w| w[1] > w[0]) {
            bail!(OP, Value, "batch_sizes must be positive and non-increasing, got {batch_sizes:?}");
        }
        let rows: usize = batch_sizes.iter().sum();
        if rows != data.shape()[0] {
            bail!(
                OP,
                Shape,
                "batch_sizes {batch_sizes:?} add up to {rows} rows, but data has shape {:?}",
                data.shape()
            );
        }
        let unsorted_indices = match &sorted_indices {
            Some(sorted) => Some(invert(OP, sorted, batch_sizes[0])?),
            None => None,
        };
        Ok(PackedSequence { data, batch_sizes, sorted_indices, unsorted_indices })
    }

    /// The packed steps, `(Σ lengths, *)`.
    pub fn data(&self) -> &Tensor {
        &self.data
    }

    /// How many sequences have each step: `batch_sizes[t]` rows of [`data`](Self::data) are
    /// step `t`.
    pub fn batch_sizes(&self) -> &[usize] {
        &self.batch_sizes
    }

    /// For each position in the order of decreasing length, its sequence's index in the
    /// original batch (`None` when the batch was packed in its own order).
    pub fn sorted_indices(&self) -> Option<&[usize]> {
        self.sorted_indices.as_deref()
    }

    /// For each sequence of the original batch, its position in the packed order: the inverse
    /// of [`sorted_indices`](Self::sorted_indices).
    pub fn unsorted_indices(&self) -> Option<&[usize]> {
        self.unsorted_indices.as_deref()
    }

    /// The number of sequences (`batch_sizes[0]`).
    pub fn batch_size(&self) -> usize {
        self.batch_sizes[0]
    }

    /// Each sequence's length, in the original batch's order.
    pub fn lengths(&self) -> Vec<usize> {
        let sorted = self.sorted_lengths();
        (0..self.batch_size()).map(|b| sorted[self.rank(b)]).collect()
    }

    /// The same sequences with [`data`](Self::data) on `device` (`packed.to(device)`); the
    /// gradient moves back.
    #[track_caller]
    pub fn to(&self, device: &Device) -> PackedSequence {
        self.with_data(self.data.to(device))
    }

    /// The same sequences with [`data`](Self::data) converted to `dtype`.
    #[track_caller]
    pub fn to_dtype(&self, dtype: DType) -> PackedSequence {
        self.with_data(self.data.to_dtype(dtype))
    }

    /// The same bookkeeping around new data with as many rows (a recurrent layer's output).
    pub(crate) fn with_data(&self, data: Tensor) -> PackedSequence {
        debug_assert_eq!(data.shape()[0], self.data.shape()[0], "packed data keeps its rows");
        PackedSequence { data, ..self.clone() }
    }

    /// The position in the packed order of the original batch's sequence `b`.
    pub(crate) fn rank(&self, b: usize) -> usize {
        self.unsorted_indices.as_ref().map_or(b, |u| u[b])
    }

    /// The lengths in the packed order (non-increasing).
    fn sorted_lengths(&self) -> Vec<usize> {
        let mut lengths = vec![0; self.batch_size()];
        for &bs in &self.batch_sizes {
            lengths[..bs].iter_mut().for_each(|l| *l += 1);
        }
        lengths
    }

    /// The first row of each step in [`data`](Self::data).
    pub(crate) fn offsets(&self) -> Vec<usize> {
        self.batch_sizes
            .iter()
            .scan(0, |start, &bs| {
                let at = *start;
                *start += bs;
                Some(at)
            })
            .collect()
    }
}

/// `(step, sequence of the original batch)` of each row of a packed batch's data, in order:
/// step by step, each step's sequences in the packed `order` (`sorted_indices`).
pub(super) fn rows<'a>(
    batch_sizes: &'a [usize],
    order: Option<&'a [usize]>,
) -> impl Iterator<Item = (usize, usize)> + 'a {
    batch_sizes.iter().enumerate().flat_map(move |(t, &bs)| (0..bs).map(move |i| (t, order.map_or(i, |o| o[i]))))
}

/// The inverse of the permutation `sorted` of `0..n`, or an error naming what is wrong.
#[track_caller]
fn invert(op: &'static str, sorted: &[usize], n: usize) -> Result<Vec<usize>> {
    if sorted.len() != n {
        bail!(op, Shape, "sorted_indices has {} entries for a batch of {n} sequences: {sorted:?}", sorted.len());
    }
    let mut inverse = vec![usize::MAX; n];
    for (i, &b) in sorted.iter().enumerate() {
        if b >= n || inverse[b] != usize::MAX {
            bail!(op, Index, "sorted_indices must be a permutation of 0..{n}, got {sorted:?}");
        }
        inverse[b] = i;
    }
    Ok(inverse)
}

/// An int64 index vector on `device`, for `index_select`.
pub(crate) fn index_tensor(index: Vec<usize>, device: Device) -> Tensor {
    let n = index.len();
    Tensor::from_vec(index.into_iter().map(|i| i as i64).collect::<Vec<i64>>(), [n]).to(&device)
}
