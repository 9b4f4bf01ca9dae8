//! `Tensor::einsum` (`src/ops/einsum.rs`): values against PyTorch's for contractions, batch
//! products, outer products, traces and diagonals, sums, transposes, three operands, implicit
//! outputs and size-1 broadcasting; f64 finite-difference gradients; errors; and compiled
//! equal to eager with no graph break.

use kiln::prelude::*;

#[path = "common/op_checks.rs"]
mod op_checks;
use op_checks::{check_gradients, compiled_equals_eager, leaf, GradCase};

/// ((arange(n) * 7 % 11) - 5) / 4 shaped `shape`: the operands the PyTorch values were made with.
fn r(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|i| ((i * 7 % 11) as f64 - 5.0) / 4.0).collect();
    Tensor::from_vec(v, shape)
}

#[test]
fn values_match_pytorch() {
    #[rustfmt::skip]
    let cases: &[(&str, &[&[usize]], &[usize], &[f64])] = &[
        ("ij,jk->ik", &[&[2, 3], &[3, 4]], &[2, 4], &[2.1875, -1.375, 1.25, -0.9375, -0.75, -0.125, -0.1875, 2.5]),
        ("bij,bjk->bik", &[&[2, 2, 3], &[2, 3, 2]], &[2, 2, 2], &[1.1875, 0.375, -1.875, 1.5, 1.25, 1.25, 1.3125, 1.375]),
        ("bhqd,bhkd->bhqk", &[&[1, 2, 3, 2], &[1, 2, 4, 2]], &[1, 2, 3, 4], &[1.8125, 1.25, -0.6875, -1.25, 1.25,
            1.8125, -1.0625, -0.5, -0.6875, -1.0625, 0.625, 0.25, -1.0, -0.25, 0.5, 1.25, 1.5625, -0.6875, -0.875,
            -1.0625, -0.6875, 1.625, 0.5, -0.625]),
        ("i,j->ij", &[&[3], &[2]], &[3, 2], &[1.5625, -0.625, -0.625, 0.25, 0.625, -0.25]),
        ("ii->", &[&[3, 3]], &[], &[-2.0]),
        ("ii->i", &[&[3, 3]], &[3], &[-1.25, 0.25, -1.0]),
        ("ij->", &[&[2, 3]], &[], &[-0.5]),
        ("ij->ji", &[&[2, 3]], &[3, 2], &[-1.25, 1.25, 0.5, 0.25, -0.5, -0.75]),
        ("ij,jk,kl->il", &[&[2, 3], &[3, 4], &[4, 2]], &[2, 2], &[-2.671875, -1.5625, 3.453125, -0.390625]),
        ("ij,jk", &[&[2, 3], &[3, 4]], &[2, 4], &[2.1875, -1.375, 1.25, -0.9375, -0.75, -0.125, -0.1875, 2.5]),
        ("bn,anm,bm->ba", &[&[2, 3], &[4, 3, 2], &[2, 2]], &[2, 4], &[-1.296875, 2.53125, -0.34375, -0.8125, 2.8125,
            0.8125, -2.390625, -2.671875]),
        ("ij,kj->ik", &[&[2, 3], &[1, 3]], &[2, 1], &[2.0625, -1.0625]),
        ("iij,j->ij", &[&[2, 2, 3], &[1]], &[2, 3], &[1.5625, -0.625, 0.625, -0.9375, 0.3125, 1.5625]),
        ("ij,ij->i", &[&[2, 3], &[2, 3]], &[2], &[2.0625, 2.1875]),
        (" i , i -> ", &[&[4], &[4]], &[], &[3.625]),
    ];
    for &(eq, shapes, shape, want) in cases {
        let ops: Vec<Tensor> = shapes.iter().map(|s| r(s)).collect();
        let refs: Vec<&Tensor> = ops.iter().collect();
        let got = Tensor::einsum(eq, &refs);
        assert_eq!(got.shape(), shape, "{eq}");
        for (g, w) in got.to_vec::<f64>().iter().zip(want) {
            assert!((g - w).abs() <= 1e-14 * (1.0 + w.abs()), "{eq}: {:?} vs {want:?}", got.to_vec::<f64>());
        }
    }
}

#[test]
fn bad_equations_are_errors() {
    let (a, b) = (r(&[2, 3]), r(&[4, 4]));
    let cases: [(kiln::Result<Tensor>, &str); 7] = [
        (Tensor::try_einsum("ij,jk->ik", &[&a]), "has 2 operands but 1 tensors"),
        (Tensor::try_einsum("ijk->i", &[&a]), "has shape [2, 3] but subscripts \"ijk\""),
        (Tensor::try_einsum("ij,jk->ik", &[&a, &b]), "subscript j has size 4"),
        (Tensor::try_einsum("ij->ii", &[&a]), "appears more than once"),
        (Tensor::try_einsum("ij->k", &[&a]), "does not appear in any operand"),
        (Tensor::try_einsum("...j->j", &[&a]), "ellipsis"),
        (Tensor::try_einsum("i1->i", &[&a]), "invalid subscript '1'"),
    ];
    for (r, words) in cases {
        let e = r.unwrap_err();
        assert!(e.op == "einsum" && e.to_string().contains(words), "{e}");
        assert!(e.to_string().contains("tests/einsum.rs"), "{e}");
    }
}

#[test]
fn gradients_match_finite_differences() {
    kiln::manual_seed(16);
    let cases: [GradCase; 4] = [
        (
            "batch product",
            |t| Tensor::einsum("bij,bjk->bik", &[&t[0], &t[1]]),
            vec![leaf(&[2, 2, 3]), leaf(&[2, 3, 2])],
        ),
        (
            "bilinear",
            |t| Tensor::einsum("bn,anm,bm->ba", &[&t[0], &t[1], &t[2]]),
            vec![leaf(&[2, 3]), leaf(&[2, 3, 2]), leaf(&[2, 2])],
        ),
        ("diagonal", |t| Tensor::einsum("iij,j->ij", &[&t[0], &t[1]]), vec![leaf(&[2, 2, 3]), leaf(&[1])]),
        ("sum and transpose", |t| Tensor::einsum("ijk->kj", &[&t[0]]), vec![leaf(&[2, 3, 2])]),
    ];
    check_gradients(cases);
}

#[test]
fn compiled_step_equals_eager() {
    kiln::manual_seed(17);
    let inputs = [Tensor::randn(&[2, 3, 5, 4]), Tensor::randn(&[2, 3, 6, 4])];
    compiled_equals_eager(&inputs, |t| {
        let (q, k) = (&t[0], &t[1]);
        let scores = Tensor::einsum("bhqd,bhkd->bhqk", &[q, k]).softmax(-1);
        let mixed = Tensor::einsum("bhqk,bhkd->bhqd", &[&scores, k]);
        let loss = Tensor::einsum("bhqd,bhqd->", &[&mixed, q]);
        loss.backward();
        loss
    });
}
