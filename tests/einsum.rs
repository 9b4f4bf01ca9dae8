//! `Tensor::einsum` (`src/ops/einsum.rs`): values against PyTorch's for contractions, batch
//! products, outer products, traces and diagonals, sums, transposes, three operands, implicit
//! outputs and size-1 broadcasting, and with an ellipsis (broadcast batch dims, trailing and
//! middle ellipses, implicit outputs, ellipsis dims summed, an ellipsis covering no dim; from
//! tests/fixtures/scan.safetensors, written by scripts/fixtures_scan.py); f64 finite-difference
//! gradients; errors; and compiled equal to eager with no graph break.

use kiln::prelude::*;
use std::path::PathBuf;

#[path = "common/op_checks.rs"]
mod op_checks;
use op_checks::{check_gradients, compiled_equals_eager, leaf, GradCase};

#[path = "common/seeded.rs"]
mod seeded;
use seeded::seeded;

/// ((arange(n) * 7 % 11) - 5) / 4 shaped `shape`: the operands the PyTorch values were made with.
fn r(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|i| ((i * 7 % 11) as f64 - 5.0) / 4.0).collect();
    Tensor::from_vec(v, shape)
}

#[test]
fn values_match_pytorch() {
    let _seeded = seeded();
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

/// The equations of the fixture's `einsum/{name}` cases, as scripts/fixtures_scan.py lists them.
const ELLIPSIS_CASES: [(&str, &str); 9] = [
    ("batch_matmul", "...ij,...jk->...ik"),
    ("trailing", "bi...,bi...->b..."),
    ("implicit", "...ji"),
    ("implicit_broadcast", "...i,...i"),
    ("summed", "...ij->ij"),
    ("diagonal", "i...i"),
    ("middle", "a...b,b...c->...ac"),
    ("three", "...i,...ij,...j->..."),
    ("empty_ellipsis", "ij->...ji"),
];

#[test]
fn ellipsis_values_match_pytorch() {
    let _seeded = seeded();
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/scan.safetensors");
    let fx = kiln::load(path).expect("tests/fixtures/scan.safetensors (python3 scripts/fixtures_scan.py)");
    for (name, eq) in ELLIPSIS_CASES {
        let ops: Vec<Tensor> = (0..).map_while(|k| fx.get(&format!("einsum/{name}/x{k}")).cloned()).collect();
        let refs: Vec<&Tensor> = ops.iter().collect();
        let want = fx.get(&format!("einsum/{name}/out")).unwrap_or_else(|| panic!("einsum/{name}/out"));
        let got = Tensor::einsum(eq, &refs);
        assert_eq!(got.shape(), want.shape(), "{eq}");
        for (g, w) in got.to_vec::<f64>().iter().zip(want.to_vec::<f64>()) {
            assert!((g - w).abs() <= 1e-13 * (1.0 + w.abs()), "{eq}: {g} vs {w}");
        }
    }
}

#[test]
fn bad_equations_are_errors() {
    let _seeded = seeded();
    let (a, b) = (r(&[2, 3]), r(&[4, 4]));
    let cases: [(kiln::Result<Tensor>, &str); 11] = [
        (Tensor::try_einsum("ij,jk->ik", &[&a]), "has 2 operands but 1 tensors"),
        (Tensor::try_einsum("ijk->i", &[&a]), "has shape [2, 3] but subscripts \"ijk\""),
        (Tensor::try_einsum("ij,jk->ik", &[&a, &b]), "subscript j has size 4"),
        (Tensor::try_einsum("ij->ii", &[&a]), "appears more than once"),
        (Tensor::try_einsum("ij->k", &[&a]), "does not appear in any operand"),
        (Tensor::try_einsum("i1->i", &[&a]), "invalid subscript '1'"),
        (Tensor::try_einsum("i.j", &[&a]), "found '.' for operand 0 that is not part of any ellipsis"),
        (Tensor::try_einsum("...i...", &[&a]), "for which an ellipsis was already found"),
        (Tensor::try_einsum("ij->..", &[&a]), "found '.' for output that is not part of any ellipsis"),
        (Tensor::try_einsum("...ijk", &[&a]), "subscripts \"...ijk\" need at least 3 dims"),
        (
            Tensor::try_einsum("...ij,...ij->...", &[&r(&[2, 3, 4]), &r(&[3, 3, 4])]),
            "dim 0 covered by the ellipsis has size 3 for operand 1",
        ),
    ];
    for (r, words) in cases {
        let e = r.unwrap_err();
        assert!(e.op == "einsum" && e.to_string().contains(words), "{e}");
        assert!(e.to_string().contains("tests/einsum.rs"), "{e}");
    }
}

#[test]
fn gradients_match_finite_differences() {
    let _seeded = seeded();
    kiln::manual_seed(16);
    let cases: [GradCase; 7] = [
        (
            "ellipsis batch product",
            |t| Tensor::einsum("...ij,...jk->...ik", &[&t[0], &t[1]]),
            vec![leaf(&[2, 1, 2, 3]), leaf(&[3, 3, 2])],
        ),
        (
            "trailing ellipsis, summed",
            |t| Tensor::einsum("bi...,bi...->b", &[&t[0], &t[1]]),
            vec![leaf(&[2, 3, 2]), leaf(&[2, 3, 1])],
        ),
        ("ellipsis diagonal", |t| Tensor::einsum("i...i", &[&t[0]]), vec![leaf(&[3, 2, 3])]),
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
    let _seeded = seeded();
    kiln::manual_seed(17);
    let inputs = [Tensor::randn([2, 3, 5, 4]), Tensor::randn([2, 3, 6, 4])];
    // Attention, then the same written with ellipses over the batch and head dims.
    let equations = [
        ["bhqd,bhkd->bhqk", "bhqk,bhkd->bhqd", "bhqd,bhqd->"],
        ["...qd,...kd->...qk", "...qk,...kd->...qd", "b...,b...->"],
    ];
    for [scores, mixed, loss] in equations {
        compiled_equals_eager(&inputs, |t| {
            let (q, k) = (&t[0], &t[1]);
            let p = Tensor::einsum(scores, &[q, k]).softmax(-1);
            let m = Tensor::einsum(mixed, &[&p, k]);
            let loss = Tensor::einsum(loss, &[&m, q]);
            loss.backward();
            loss
        });
    }
}
