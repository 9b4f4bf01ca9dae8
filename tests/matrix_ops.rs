//! `diagonal`, `diag`, `trace` (`src/ops/diagonal.rs`), `addmm`, `baddbmm`, `tensor_split`,
//! `meshgrid` (`src/ops/split.rs`), `kthvalue` and `median` (`src/ops/order_stats.rs`):
//! values against PyTorch's, f64 finite-difference gradients (first and second order),
//! errors, and compiled equal to eager with no graph break.

use kiln::ops::Indexing;
use kiln::prelude::*;
use kiln::DType;

#[path = "common/op_checks.rs"]
mod op_checks;
use op_checks::{check_gradients, compiled_equals_eager, leaf, GradCase};

/// x = torch.arange(24, dtype=torch.float64).view(2, 3, 4) - 11.5
fn x() -> Tensor {
    (Tensor::arange(24).to_dtype(DType::F64) - 11.5).view([2, 3, 4])
}

/// Panics unless `got` has `shape` and holds `want` (what PyTorch printed), NaN matching NaN.
fn assert_values(what: &str, got: &Tensor, shape: &[usize], want: &[f64]) {
    assert_eq!(got.shape(), shape, "{what}");
    let got = got.to_vec::<f64>();
    let same = |g: f64, w: f64| (g.is_nan() && w.is_nan()) || (g - w).abs() <= 1e-13 * (1.0 + w.abs());
    assert!(got.len() == want.len() && got.iter().zip(want).all(|(&g, &w)| same(g, w)), "{what}: {got:?} vs {want:?}");
}

#[test]
fn values_match_pytorch() {
    let x = x();
    let d = x.diagonal(1, 2, 0);
    assert_values("diagonal(x, 1, 2, 0)", &d, &[3, 1], &[0.5, 4.5, 8.5]);
    assert!(d.shares_storage_with(&x), "diagonal is a view");
    assert_values("diagonal(x, -1, 1, 2)", &x.diagonal(-1, 1, 2), &[2, 2], &[-7.5, -2.5, 4.5, 9.5]);
    let v = Tensor::new(&[1.0f64, 2.0]);
    assert_values("diag(v, 1)", &v.diag(1), &[3, 3], &[0.0, 1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0]);
    let m = x.select(0, 0);
    assert_values("diag(m, -1)", &m.diag(-1), &[2], &[-7.5, -2.5]);
    assert_values("trace(m)", &m.trace(), &[], &[-19.5]);

    let i = Tensor::new(&[[1.0f64, 2.0], [3.0, 4.0]]);
    let (a, b) = (m.narrow(0, 0, 2).narrow(1, 0, 3), m.t().narrow(0, 0, 3).narrow(1, 0, 2));
    assert_values("addmm", &i.addmm(&a, &b, 0.5, 2.0), &[2, 2], &[666.0, 414.5, 415.0, 259.5]);
    let batch = Tensor::arange(12).to_dtype(DType::F64).view([2, 2, 3]);
    let ones = Tensor::ones([1, 2, 2]).to_dtype(DType::F64);
    let want = [-3.0, -12.0, -12.0, -48.0, -147.0, -210.0, -210.0, -300.0];
    assert_values("baddbmm", &ones.baddbmm(&batch, &batch.transpose(1, 2), 2.0, -1.0), &[2, 2, 2], &want);
    let nan_input = Tensor::full([2, 2], f64::NAN).to_dtype(DType::F64);
    assert!(!nan_input.addmm(&a, &b, 0.0, 1.0).to_vec::<f64>()[0].is_nan(), "beta = 0 ignores the input");

    let r = Tensor::arange(7);
    let parts: Vec<Vec<i64>> = r.tensor_split(3, 0).iter().map(|t| t.to_vec::<i64>()).collect();
    assert_eq!(parts, [vec![0, 1, 2], vec![3, 4], vec![5, 6]]);
    let at: Vec<Vec<i64>> = r.tensor_split_at(&[1, 5, 9], 0).iter().map(|t| t.to_vec::<i64>()).collect();
    assert_eq!(at, [vec![0], vec![1, 2, 3, 4], vec![5, 6], vec![]]);
    let (gx, gy) = (Tensor::new(&[1i64, 2]), Tensor::new(&[3i64, 4, 5]));
    let xy = Tensor::meshgrid(&[&gx, &gy], Indexing::Xy);
    assert_eq!((xy[0].shape(), xy[0].to_vec::<i64>()), (&[3, 2][..], vec![1, 2, 1, 2, 1, 2]));
    assert_eq!(xy[1].to_vec::<i64>(), [3, 3, 4, 4, 5, 5]);
    let ij = Tensor::meshgrid(&[&gx, &gy], Indexing::Ij);
    assert_eq!((ij[0].shape(), ij[1].to_vec::<i64>()), (&[2, 3][..], vec![3, 4, 5, 3, 4, 5]));

    let nan = f64::NAN;
    let y = Tensor::new(&[[3.0, nan, 1.0, 2.0], [4.0, 1.0, 1.0, 0.0], [5.0, -1.0, 2.0, 7.0]]);
    assert_values("kthvalue(y, 3, 1, keepdim)", &y.kthvalue_keepdim(3, 1).0, &[3, 1], &[3.0, 1.0, 5.0]);
    let (med, at) = y.median_dim(1);
    assert_values("median(y, 1)", &med, &[3], &[nan, 1.0, 2.0]);
    assert_eq!(at.to_vec::<i64>(), [1, 1, 2], "a NaN row points at its NaN; ties at the first occurrence");
    assert_values("median(y[1:])", &y.narrow(0, 1, 2).median(), &[], &[1.0]);
    assert_values("median(y)", &y.median(), &[], &[nan]);
    assert_values("median(y, 0)", &y.median_dim(0).0, &[4], &[4.0, nan, 1.0, 2.0]);
}

#[test]
fn bad_arguments_are_errors_naming_the_op() {
    let x = x();
    let cases: [(&str, kiln::Result<Tensor>, &str); 7] = [
        ("diagonal", x.try_diagonal(0, 1, -2), "cannot be identical"),
        ("diagonal", Tensor::ones([3]).try_diagonal(0, 0, 1), "at least 2 dimensions"),
        ("diag", x.try_diag(0), "1-D or 2-D"),
        ("trace", x.try_trace(), "expected a matrix"),
        ("kthvalue", x.try_kthvalue(5, 2).map(|r| r.0), "k out of range"),
        ("median", Tensor::zeros([0]).try_median(), "cannot be empty"),
        ("tensor_split", x.try_tensor_split(0, 0).map(|mut v| v.remove(0)), "larger than 0"),
    ];
    for (op, r, words) in cases {
        let e = r.unwrap_err();
        assert_eq!(e.op, op, "{e}");
        assert!(e.to_string().contains(words) && e.to_string().contains("tests/matrix_ops.rs"), "{e}");
    }
    let e = Tensor::try_meshgrid(&[&x], Indexing::Ij).unwrap_err();
    assert!(e.op == "meshgrid" && e.to_string().contains("0D or 1D"), "{e}");
}

#[test]
fn gradients_match_finite_differences() {
    kiln::manual_seed(14);
    let cases: [GradCase; 9] = [
        ("diagonal", |t| t[0].diagonal(1, 2, 0), vec![leaf(&[2, 3, 4])]),
        ("diag of a vector", |t| t[0].diag(-1), vec![leaf(&[3])]),
        ("diag of a matrix", |t| t[0].diag(1), vec![leaf(&[3, 4])]),
        ("trace", |t| t[0].trace(), vec![leaf(&[3, 3])]),
        ("addmm", |t| t[0].addmm(&t[1], &t[2], 0.5, 2.0), vec![leaf(&[2]), leaf(&[2, 3]), leaf(&[3, 2])]),
        ("baddbmm", |t| t[0].baddbmm(&t[1], &t[2], 1.0, 1.0), vec![leaf(&[2, 2]), leaf(&[3, 2, 2]), leaf(&[3, 2, 2])]),
        ("tensor_split", |t| t[0].tensor_split(2, 1)[1].clone(), vec![leaf(&[2, 5])]),
        ("kthvalue", |t| t[0].kthvalue(2, 0).0, vec![leaf(&[3, 4])]),
        ("median", |t| t[0].median_dim_keepdim(-1).0, vec![leaf(&[2, 5])]),
    ];
    check_gradients(cases);
}

#[test]
fn compiled_step_equals_eager() {
    kiln::manual_seed(15);
    let inputs = [Tensor::randn([3, 4, 4]), Tensor::randn([4, 4])];
    compiled_equals_eager(&inputs, |t| {
        let (x, w) = (&t[0], &t[1]);
        let grid = Tensor::meshgrid(&[&w.select(0, 0), &w.select(1, 1)], Indexing::Ij);
        let y = x.baddbmm(x, &x.transpose(1, 2), 0.5, 1.0) + w.addmm(w, w, 1.0, 0.25) + &grid[0] * &grid[1];
        let parts = y.tensor_split(2, 2);
        let loss = y.diagonal(0, 1, 2).sum() + w.trace() + w.diag(0).diag(1).sum() + parts[1].pow(2.0).mean()
            - y.median_dim(2).0.sum()
            + y.kthvalue(3, 1).0.sum();
        loss.backward();
        loss
    });
}
