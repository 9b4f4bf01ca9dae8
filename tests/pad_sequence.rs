//! `nn::utils::rnn::pad_sequence`: values against PyTorch's (time-major, batch-first, left
//! padding, an empty sequence), errors, and the gradient reaching each sequence.

use kiln::nn::utils::rnn::{pad_sequence, try_pad_sequence, PaddingSide};
use kiln::prelude::*;

#[test]
fn values_match_pytorch() {
    let a = Tensor::new(&[[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0]]);
    let b = Tensor::new(&[[7.0f32, 8.0]]);
    let c = Tensor::zeros([0, 2]);
    let time_major = pad_sequence(&[&a, &b, &c], false, 0.0, PaddingSide::Right);
    assert_eq!(time_major.shape(), [3, 3, 2]);
    let want = [1.0, 2.0, 7.0, 8.0, 0.0, 0.0, 3.0, 4.0, 0.0, 0.0, 0.0, 0.0, 5.0, 6.0, 0.0, 0.0, 0.0, 0.0];
    assert_eq!(time_major.to_vec::<f32>(), want);
    let batch_first = pad_sequence(&[&a, &b, &c], true, -1.0, PaddingSide::Right);
    let want = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0];
    assert_eq!(batch_first.to_vec::<f32>(), want);
    let left = pad_sequence(&[&a, &b], true, 0.0, PaddingSide::Left);
    assert_eq!(left.to_vec::<f32>(), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 0.0, 0.0, 0.0, 0.0, 7.0, 8.0]);
    // Integer sequences keep their dtype.
    let ints = pad_sequence(&[&Tensor::new(&[1i64, 2]), &Tensor::new(&[3i64])], true, 9.0, PaddingSide::Right);
    assert_eq!(ints.to_vec::<i64>(), [1, 2, 3, 9]);
}

#[test]
fn errors_and_gradients() {
    let e = try_pad_sequence(&[], false, 0.0, PaddingSide::Right).unwrap_err();
    assert!(e.op == "pad_sequence" && e.to_string().contains("empty list"), "{e}");
    let (a, b) = (Tensor::zeros([3, 2]), Tensor::zeros([2, 3]));
    let e = try_pad_sequence(&[&a, &b], false, 0.0, PaddingSide::Right).unwrap_err();
    assert!(e.to_string().contains("trailing dims differ") && e.to_string().contains("tests/pad_sequence.rs"), "{e}");
    let (a, b) = (Tensor::ones([3]).requires_grad_(true), Tensor::ones([1]).requires_grad_(true));
    let padded = pad_sequence(&[&a, &b], true, 0.0, PaddingSide::Left);
    (padded * Tensor::new(&[[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]])).sum().backward();
    assert_eq!(a.grad().unwrap().to_vec::<f32>(), [1.0, 2.0, 3.0]);
    assert_eq!(b.grad().unwrap().to_vec::<f32>(), [6.0]);
}
