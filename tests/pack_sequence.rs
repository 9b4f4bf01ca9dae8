//! `nn::utils::rnn` packing: `pack_padded_sequence`, `pad_packed_sequence`, `pack_sequence`,
//! `unpack_sequence`, `unpad_sequence` and `PackedSequence` — values against PyTorch's (the
//! printed results of the same calls), the gradient through packing and unpacking, and errors
//! that name the op, the shapes or lengths, and the caller's line. The recurrent layers on
//! packed batches are in `tests/nn_rnn_packed.rs`.

use kiln::nn::utils::rnn::{
    pack_padded_sequence, pack_sequence, pad_packed_sequence, pad_sequence, try_pack_padded_sequence,
    try_pack_sequence, try_pad_packed_sequence, try_unpad_sequence, unpack_sequence, unpad_sequence, PackedSequence,
    PaddingSide,
};
use kiln::prelude::*;
use kiln::Error;

#[path = "common/rnn_fixture.rs"]
mod rnn_fixture;
use rnn_fixture::panic_text;

const HERE: &str = "tests/pack_sequence.rs";

/// `(3, 3, 1)`, time-major: step `t` of sequence `b` holds `10·t + b`.
fn steps() -> Tensor {
    let values: Vec<f32> = (0..3).flat_map(|t| (0..3).map(move |b| (10 * t + b) as f32)).collect();
    Tensor::from_vec(values, [3, 3, 1])
}

#[test]
fn pack_and_pad_match_pytorch() {
    // pack_padded_sequence(x, [1, 3, 2], enforce_sorted=False) in PyTorch.
    let x = steps();
    let packed = pack_padded_sequence(&x, &[1, 3, 2], false, false);
    assert_eq!(packed.data().shape(), [6, 1]);
    assert_eq!(packed.data().to_vec::<f32>(), [1.0, 2.0, 0.0, 11.0, 12.0, 21.0]);
    assert_eq!(packed.batch_sizes(), [3, 2, 1]);
    assert_eq!(packed.sorted_indices(), Some(&[1, 2, 0][..]));
    assert_eq!(packed.unsorted_indices(), Some(&[2, 0, 1][..]));
    assert_eq!(packed.lengths(), [1, 3, 2]);
    // The same batch given batch-first packs the same.
    let batch_first = pack_padded_sequence(&x.transpose(0, 1).contiguous(), &[1, 3, 2], true, false);
    assert_eq!(batch_first.data().to_vec::<f32>(), packed.data().to_vec::<f32>());
    assert_eq!(batch_first.batch_sizes(), packed.batch_sizes());

    // pad_packed_sequence(packed, batch_first=True, padding_value=-1, total_length=4).
    let (padded, lengths) = pad_packed_sequence(&packed, true, -1.0, Some(4));
    assert_eq!(lengths, [1, 3, 2]);
    assert_eq!(padded.shape(), [3, 4, 1]);
    let want = [0.0, -1.0, -1.0, -1.0, 1.0, 11.0, 21.0, -1.0, 2.0, 12.0, -1.0, -1.0];
    assert_eq!(padded.to_vec::<f32>(), want);
    // Time-major without total_length: the longest length, the original order.
    let (time_major, _) = pad_packed_sequence(&packed, false, 0.0, None);
    assert_eq!(time_major.shape(), [3, 3, 1]);
    assert_eq!(time_major.to_vec::<f32>(), [0.0, 1.0, 2.0, 0.0, 11.0, 12.0, 0.0, 21.0, 0.0]);

    // Sorted lengths with enforce_sorted: the batch's own order, no indices.
    let sorted = pack_padded_sequence(&x, &[3, 3, 1], false, true);
    assert_eq!(sorted.data().to_vec::<f32>(), [0.0, 1.0, 2.0, 10.0, 11.0, 20.0, 21.0]);
    assert_eq!(sorted.batch_sizes(), [3, 2, 2]);
    assert!(sorted.sorted_indices().is_none() && sorted.unsorted_indices().is_none());
    // Ties keep their order when sorting, as PyTorch's sort: lengths [2, 3, 2] pack as [1, 0, 2].
    let ties = pack_padded_sequence(&x, &[2, 3, 2], false, false);
    assert_eq!(ties.sorted_indices(), Some(&[1, 0, 2][..]));
}

#[test]
fn pack_sequence_and_unpacking() {
    // pack_sequence([a, b, c], enforce_sorted=False) of 1-d sequences in PyTorch.
    let (a, b, c) =
        (Tensor::from_slice(&[1.0f32, 2.0]), Tensor::from_slice(&[3.0f32, 4.0, 5.0]), Tensor::from_slice(&[6.0f32]));
    let packed = pack_sequence(&[&a, &b, &c], false);
    assert_eq!(packed.data().to_vec::<f32>(), [3.0, 1.0, 6.0, 4.0, 2.0, 5.0]);
    assert_eq!(packed.batch_sizes(), [3, 2, 1]);
    assert_eq!(packed.sorted_indices(), Some(&[1, 0, 2][..]));
    let unpacked = unpack_sequence(&packed);
    assert_eq!(unpacked.len(), 3);
    for (got, want) in unpacked.iter().zip([&a, &b, &c]) {
        assert_eq!(got.shape(), want.shape());
        assert_eq!(got.to_vec::<f32>(), want.to_vec::<f32>());
    }
    // Sequences of features, integers keep their dtype.
    let (p, q) = (Tensor::new(&[[1i64, 2], [3, 4], [5, 6]]), Tensor::new(&[[7i64, 8]]));
    let packed = pack_sequence(&[&p, &q], true);
    assert_eq!(packed.data().dtype(), DType::I64);
    assert_eq!(packed.data().to_vec::<i64>(), [1, 2, 7, 8, 3, 4, 5, 6]);
    let (padded, lengths) = pad_packed_sequence(&packed, false, 9.0, None);
    assert_eq!(padded.to_vec::<i64>(), [1, 2, 7, 8, 3, 4, 9, 9, 5, 6, 9, 9]);
    // unpad_sequence cuts each padded sequence to its length.
    let back = unpad_sequence(&padded, &lengths, false);
    assert_eq!(back[0].to_vec::<i64>(), p.to_vec::<i64>());
    assert_eq!(back[1].to_vec::<i64>(), q.to_vec::<i64>());
    let padded = pad_sequence(&[&p, &q], true, 0.0, PaddingSide::Right);
    assert_eq!(unpad_sequence(&padded, &[3, 1], true)[1].shape(), [1, 2]);
}

#[test]
fn gradients_flow_through_packing_and_padding() {
    let x = steps().requires_grad_(true);
    let packed = pack_padded_sequence(&x, &[1, 3, 2], false, false);
    let (padded, _) = pad_packed_sequence(&packed, true, 5.0, Some(4));
    let weights = Tensor::arange(12).to_dtype(DType::F32).view([3, 4, 1]) + 1.0;
    (&padded * &weights).sum().backward();
    // Each valid step gets its weight (batch-first position (b, t)), each padded step zero.
    let grad = x.grad().unwrap().to_vec::<f32>();
    let want: Vec<f32> = (0..3)
        .flat_map(|t| (0..3).map(move |b| (t, b)))
        .map(|(t, b)| if t < [1, 3, 2][b] { (b * 4 + t + 1) as f32 } else { 0.0 })
        .collect();
    assert_eq!(grad, want);
    // The packed sequence moves and converts with its bookkeeping.
    let as_f64 = packed.to_dtype(DType::F64);
    assert_eq!(as_f64.data().dtype(), DType::F64);
    assert_eq!(as_f64.batch_sizes(), packed.batch_sizes());
    assert_eq!(as_f64.sorted_indices(), packed.sorted_indices());
    assert!(packed.to(&Device::Cpu).data().shares_storage_with(packed.data()));
}

#[test]
fn packed_sequence_from_parts() {
    let data = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0]);
    let packed = PackedSequence::new(data.clone(), vec![2, 1, 1], Some(vec![1, 0]));
    assert_eq!(packed.unsorted_indices(), Some(&[1, 0][..]));
    assert_eq!(packed.lengths(), [1, 3]);
    assert_eq!(packed.batch_size(), 2);
    let (padded, _) = pad_packed_sequence(&packed, true, 0.0, None);
    assert_eq!(padded.to_vec::<f32>(), [2.0, 0.0, 0.0, 1.0, 3.0, 4.0]);
    assert_error(
        PackedSequence::try_new(data.clone(), vec![2, 1], None).map(drop),
        &["PackedSequence", "add up to 3", "[4]"],
    );
    assert_error(
        PackedSequence::try_new(data.clone(), vec![1, 2, 1], None).map(drop),
        &["non-increasing", "[1, 2, 1]"],
    );
    assert_error(
        PackedSequence::try_new(data.clone(), vec![2, 1, 1], Some(vec![1, 1])).map(drop),
        &["permutation", "[1, 1]"],
    );
    assert_error(
        PackedSequence::try_new(data, vec![2, 1, 1], Some(vec![0])).map(drop),
        &["sorted_indices", "2 sequences"],
    );
}

/// Asserts `e` is an error located in this file whose message contains every one of `parts`.
fn assert_error(e: Result<(), Error>, parts: &[&str]) {
    rnn_fixture::assert_error(e, HERE, parts)
}

#[test]
fn bad_inputs_name_the_op_the_lengths_and_the_callers_line() {
    let x = Tensor::zeros([3, 2, 4]);
    let pack =
        |x: &Tensor, lengths: &[usize], enforce: bool| try_pack_padded_sequence(x, lengths, false, enforce).map(drop);
    assert_error(
        pack(&x, &[2, 3], true),
        &["pack_padded_sequence", "sorted in decreasing order", "[2, 3]", "enforce_sorted"],
    );
    assert!(pack(&x, &[2, 3], false).is_ok());
    assert_error(pack(&x, &[2, 0], false), &["pack_padded_sequence", "greater than 0", "lengths[1]"]);
    assert_error(pack(&x, &[4, 1], false), &["pack_padded_sequence", "lengths[0] = 4", "3 steps", "[3, 2, 4]"]);
    assert_error(pack(&x, &[3, 2, 1], false), &["pack_padded_sequence", "batch_size=2", "got 3"]);
    assert_error(pack(&Tensor::zeros([3]), &[3], false), &["pack_padded_sequence", "at least 2 dims", "[3]"]);
    assert_error(pack(&Tensor::zeros([0, 2]), &[1, 1], false), &["pack_padded_sequence", "empty", "[0, 2]"]);
    // batch_first reads the lengths against dim 1.
    assert_error(
        try_pack_padded_sequence(&x, &[1, 1, 5], true, false).map(drop),
        &["lengths[2] = 5", "2 steps", "(B, L, *)"],
    );
    let packed = pack_padded_sequence(&x, &[3, 1], false, true);
    assert_error(
        try_pad_packed_sequence(&packed, false, 0.0, Some(2)).map(drop),
        &["pad_packed_sequence", "total_length=2", "max sequence length being 3"],
    );
    assert_error(try_pack_sequence(&[&Tensor::zeros([2]), &Tensor::zeros([0])], false).map(drop), &["greater than 0"]);
    assert_error(try_pack_sequence(&[], false).map(drop), &["pad_sequence", "empty list"]);
    assert_error(try_unpad_sequence(&x, &[1, 4], false).map(drop), &["unpad_sequence", "lengths[1] = 4", "[3, 2, 4]"]);
    assert_error(try_unpad_sequence(&x, &[1], false).map(drop), &["unpad_sequence", "1 lengths for 2 sequences"]);
    // The panicking forms report the same at this file's line.
    for text in [
        panic_text(|| drop(pack_padded_sequence(&x, &[2, 3], false, true))),
        panic_text(|| drop(pad_packed_sequence(&packed, true, 0.0, Some(1)))),
        panic_text(|| drop(unpad_sequence(&x, &[9, 9], false))),
        panic_text(|| drop(PackedSequence::new(Tensor::zeros([2]), vec![], None))),
    ] {
        assert!(text.contains(&format!("(at {HERE}:")), "{text}");
    }
}
