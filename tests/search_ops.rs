//! `searchsorted`, `bucketize` and `unique` (`src/ops/search.rs`): results against PyTorch's
//! (from tests/fixtures/scan.safetensors, written by scripts/fixtures_scan.py) with NaN, ties,
//! mixed dtypes and empty tensors, `searchsorted` captured by `kiln::compile` with no graph
//! break, `unique` read eagerly there (a graph break), and errors naming the op and the
//! caller's line.

use kiln::prelude::*;
use std::path::PathBuf;

fn fixture() -> StateDict {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/scan.safetensors");
    kiln::load(path).expect("tests/fixtures/scan.safetensors (python3 scripts/fixtures_scan.py)")
}

/// The fixture's tensor `key`.
fn get(fx: &StateDict, key: &str) -> Tensor {
    fx.get(key).unwrap_or_else(|| panic!("{key} missing from the fixture")).clone()
}

/// Panics unless `got` has the dtype, shape and values (NaN where NaN) of the fixture's `key`.
fn assert_matches(fx: &StateDict, key: &str, got: &Tensor) {
    let want = get(fx, key);
    assert_eq!((got.dtype(), got.shape()), (want.dtype(), want.shape()), "{key}");
    let (g, w) = (got.to_dtype(DType::F64).to_vec::<f64>(), want.to_dtype(DType::F64).to_vec::<f64>());
    for (i, (g, w)) in g.iter().zip(&w).enumerate() {
        assert!(g == w || (g.is_nan() && w.is_nan()), "{key}: element {i}: {g} vs {w}");
    }
}

#[test]
fn searches_match_pytorch() {
    let fx = fixture();
    let (seq, values) = (get(&fx, "searchsorted/seq"), get(&fx, "searchsorted/values"));
    assert_matches(&fx, "searchsorted/left", &seq.searchsorted(&values, false));
    assert_matches(&fx, "searchsorted/right", &seq.searchsorted(&values, true));
    let (seq, values) = (get(&fx, "searchsorted/seq_nd"), get(&fx, "searchsorted/values_nd"));
    assert_matches(&fx, "searchsorted/left_nd", &seq.searchsorted(&values, false));
    assert_matches(&fx, "searchsorted/right_nd", &seq.searchsorted(&values, true));
    let mixed = Tensor::new(&[1i64, 2, 3]).searchsorted(&Tensor::new(&[1.5f64, 2.0, -1.0]), false);
    assert_matches(&fx, "searchsorted/mixed", &mixed);
    let (b, x) = (get(&fx, "bucketize/boundaries"), get(&fx, "bucketize/x"));
    assert_matches(&fx, "bucketize/left", &x.bucketize(&b, false));
    assert_matches(&fx, "bucketize/right", &x.bucketize(&b, true));
    // A 0-dim value, an empty sequence, no values.
    assert_eq!(Tensor::new(&[1i64, 2]).searchsorted(&Tensor::scalar(2i64), false).item::<i64>(), 1);
    assert_eq!(Tensor::zeros([0]).searchsorted(&Tensor::ones([2]), false).to_vec::<i64>(), [0, 0]);
    assert_eq!(Tensor::ones([3]).searchsorted(&Tensor::zeros([0, 2]), true).shape(), &[0, 2]);
    assert_eq!(Tensor::scalar(2.0f32).bucketize(&Tensor::new(&[1.0f32, 3.0]), false).item::<i64>(), 1);
}

#[test]
fn unique_matches_pytorch() {
    let fx = fixture();
    for prefix in ["unique/", "unique/int_"] {
        let x = get(&fx, &format!("{prefix}x"));
        let u = x.unique(true, true, true);
        assert_matches(&fx, &format!("{prefix}values"), &u.values);
        assert_matches(&fx, &format!("{prefix}inverse"), u.inverse.as_ref().unwrap());
        assert_matches(&fx, &format!("{prefix}counts"), u.counts.as_ref().unwrap());
        let plain = x.unique(false, false, false);
        assert!(plain.inverse.is_none() && plain.counts.is_none());
        assert_matches(&fx, &format!("{prefix}values"), &plain.values);
    }
    let empty = Tensor::zeros([0]).unique(true, true, true);
    assert_eq!(
        (empty.values.shape(), empty.inverse.unwrap().shape(), empty.counts.unwrap().shape()),
        (&[0][..], &[0][..], &[0][..])
    );
    let one = Tensor::scalar(5.0f32).unique(true, true, true);
    assert_eq!(
        (one.values.to_vec::<f32>(), one.inverse.unwrap().shape(), one.counts.unwrap().to_vec::<i64>()),
        (vec![5.0], &[][..], vec![1])
    );
    let b = Tensor::new(&[true, false, true]).unique(true, true, true);
    assert_eq!((b.values.to_vec::<bool>(), b.inverse.unwrap().to_vec::<i64>()), (vec![false, true], vec![1, 0, 1]));
}

#[test]
fn compiled_searches_need_no_graph_break_and_unique_breaks_one() {
    let (seq, values) = (Tensor::new(&[1.0f32, 2.0, 4.0]), Tensor::new(&[[0.5f32, 2.0], [3.0, 9.0]]));
    let mut step = kiln::compile(|(s, v): (&Tensor, &Tensor)| s.searchsorted(&(v * 1.0), true) + v.bucketize(s, false));
    let got = step.call((&seq, &values));
    assert_eq!(got.to_vec::<i64>(), [0, 3, 4, 6]);
    assert_eq!(step.stats().graph_breaks, 0);
    let mut step = kiln::compile(|v: &Tensor| (v * 2.0).unique(true, false, true).counts.unwrap());
    assert_eq!(step.call(&Tensor::new(&[3.0f32, 1.0, 3.0])).to_vec::<i64>(), [1, 2]);
    assert!(step.stats().graph_breaks >= 1);
}

#[test]
fn bad_arguments_are_errors_naming_the_op_and_the_caller() {
    let seq = Tensor::new(&[[1i64, 3, 5], [2, 4, 6]]);
    let cases: [(&str, kiln::Result<Tensor>, &str); 4] = [
        (
            "searchsorted",
            seq.try_searchsorted(&Tensor::new(&[3i64, 4]), false),
            "boundaries tensor [2, 3] and input value tensor [2]",
        ),
        ("searchsorted", seq.try_searchsorted(&Tensor::zeros([3, 1]), false), "first N-1 dimensions"),
        ("searchsorted", Tensor::scalar(1.0f32).try_searchsorted(&Tensor::ones([2]), false), "should be 1 dimension"),
        (
            "bucketize",
            Tensor::ones([2]).try_bucketize(&seq, false),
            "boundaries tensor must be 1 dimension, but got dim(2)",
        ),
    ];
    for (op, r, words) in cases {
        let e = r.unwrap_err();
        assert_eq!(e.op, op, "{e}");
        assert!(e.to_string().contains(words), "{e}");
        assert!(e.to_string().contains("tests/search_ops.rs"), "{e}");
    }
}
