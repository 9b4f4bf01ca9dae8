//! `sort`, `argsort` and `topk` against reference values: every dim, both directions,
//! contiguous, transposed, narrowed, expanded, 0-dim and zero-size inputs, NaN and signed zeros,
//! every dtype, and inputs large enough for the parallel paths.

use kiln::{DType, Device, Tensor};

fn a2() -> Tensor {
    Tensor::new(&[[3i64, 1, 2, 1], [0, 5, 5, -1], [2, 2, 9, 0]])
}

fn a3() -> Tensor {
    Tensor::new(&[[[4i64, 1, 3], [2, 2, 0]], [[1, 5, 3], [7, 0, 2]]])
}

fn u2() -> Tensor {
    Tensor::new(&[[3.5f32, -1.0, 2.25, 0.5], [0.0, 5.0, -7.5, 8.0], [2.0, 6.5, 9.0, -0.25]])
}

/// `arange(12).view(2, 2, 3) * [1, -1, 0.5]`
fn u3() -> Tensor {
    Tensor::arange(12).view([2, 2, 3]).to_dtype(DType::F32).mul(Tensor::new(&[1.0f32, -1.0, 0.5]))
}

#[track_caller]
fn check_i((v, i): (Tensor, Tensor), shape: &[usize], values: &[i64], indices: &[i64]) {
    assert_eq!((v.shape(), i.shape()), (shape, shape));
    assert_eq!(i.dtype(), DType::I64);
    assert_eq!(v.to_vec::<i64>(), values);
    assert_eq!(i.to_vec::<i64>(), indices);
}

#[track_caller]
fn check_f((v, i): (Tensor, Tensor), shape: &[usize], values: &[f32], indices: &[i64]) {
    assert_eq!((v.shape(), i.shape()), (shape, shape));
    assert_eq!(v.to_vec::<f32>(), values);
    assert_eq!(i.to_vec::<i64>(), indices);
}

/// Reference values computed with PyTorch 2.x (`x.sort(dim, descending, stable=True)`,
/// `x.topk(k, dim, largest)`), flattened.
#[test]
fn matches_pytorch() {
    // sort 2-D dim 1
    check_i(
        a2().sort(1, false),
        &[3, 4],
        &[1, 1, 2, 3, -1, 0, 5, 5, 0, 2, 2, 9],
        &[1, 3, 2, 0, 3, 0, 1, 2, 3, 0, 1, 2],
    );
    // sort 2-D dim 0 descending
    check_i(a2().sort(0, true), &[3, 4], &[3, 5, 9, 1, 2, 2, 5, 0, 0, 1, 2, -1], &[0, 1, 2, 0, 2, 2, 1, 2, 1, 0, 0, 1]);
    // sort 2-D dim -1 descending
    check_i(
        a2().sort(-1, true),
        &[3, 4],
        &[3, 2, 1, 1, 5, 5, 0, -1, 9, 2, 2, 0],
        &[0, 2, 1, 3, 1, 2, 0, 3, 2, 0, 1, 3],
    );
    // sort 3-D dim 0
    check_i(
        a3().sort(0, false),
        &[2, 2, 3],
        &[1, 1, 3, 2, 0, 0, 4, 5, 3, 7, 2, 2],
        &[1, 0, 0, 0, 1, 0, 0, 1, 1, 1, 0, 1],
    );
    // sort 3-D dim 1 descending
    check_i(
        a3().sort(1, true),
        &[2, 2, 3],
        &[4, 2, 3, 2, 1, 0, 7, 5, 3, 1, 0, 2],
        &[0, 1, 0, 1, 0, 1, 1, 0, 0, 0, 1, 1],
    );
    // sort 3-D dim 2
    check_i(
        a3().sort(2, false),
        &[2, 2, 3],
        &[1, 3, 4, 0, 2, 2, 1, 3, 5, 0, 2, 7],
        &[1, 2, 0, 2, 0, 1, 0, 2, 1, 1, 2, 0],
    );
    // sort transposed
    check_i(
        a2().t().sort(1, false),
        &[4, 3],
        &[0, 2, 3, 1, 2, 5, 2, 5, 9, -1, 0, 1],
        &[1, 2, 0, 0, 2, 1, 0, 1, 2, 1, 2, 0],
    );
    // sort narrowed
    check_i(a2().narrow(1, 1, 3).sort(1, true), &[3, 3], &[2, 1, 1, 5, 5, -1, 9, 2, 0], &[1, 0, 2, 0, 1, 2, 1, 0, 2]);
    // sort expanded
    check_i(
        a2().narrow(0, 1, 1).expand([2, 4]).sort(0, false),
        &[2, 4],
        &[0, 5, 5, -1, 0, 5, 5, -1],
        &[0, 0, 0, 0, 1, 1, 1, 1],
    );
    // sort floats
    check_f(
        u2().sort(1, false),
        &[3, 4],
        &[-1.0, 0.5, 2.25, 3.5, -7.5, 0.0, 5.0, 8.0, -0.25, 2.0, 6.5, 9.0],
        &[1, 3, 2, 0, 2, 0, 1, 3, 3, 0, 1, 2],
    );
    // sort floats dim 0 descending
    check_f(
        u2().sort(0, true),
        &[3, 4],
        &[3.5, 6.5, 9.0, 8.0, 2.0, 5.0, 2.25, 0.5, 0.0, -1.0, -7.5, -0.25],
        &[0, 2, 2, 1, 2, 1, 0, 0, 1, 0, 1, 2],
    );
    // topk largest
    check_f(u2().topk(2, 1, true, true), &[3, 2], &[3.5, 2.25, 8.0, 5.0, 9.0, 6.5], &[0, 2, 3, 1, 2, 1]);
    // topk smallest
    check_f(
        u2().topk(3, 1, false, true),
        &[3, 3],
        &[-1.0, 0.5, 2.25, -7.5, 0.0, 5.0, -0.25, 2.0, 6.5],
        &[1, 3, 2, 2, 0, 1, 3, 0, 1],
    );
    // topk dim 0
    check_f(
        u2().topk(2, 0, true, true),
        &[2, 4],
        &[3.5, 6.5, 9.0, 8.0, 2.0, 5.0, 2.25, 0.5],
        &[0, 2, 2, 1, 2, 1, 0, 0],
    );
    // topk transposed
    check_f(u2().t().topk(1, -1, false, true), &[4, 1], &[0.0, -1.0, -7.5, -0.25], &[1, 0, 1, 2]);
    // topk k = size
    check_f(
        u2().topk(4, 1, true, true),
        &[3, 4],
        &[3.5, 2.25, 0.5, -1.0, 8.0, 5.0, 0.0, -7.5, 9.0, 6.5, 2.0, -0.25],
        &[0, 2, 3, 1, 3, 1, 0, 2, 2, 1, 0, 3],
    );
    // topk 3-D dim 2
    check_f(
        u3().topk(2, 2, true, true),
        &[2, 2, 2],
        &[1.0, 0.0, 3.0, 2.5, 6.0, 4.0, 9.0, 5.5],
        &[2, 0, 0, 2, 0, 2, 0, 2],
    );
}

#[test]
fn nan_signed_zero_and_stability() {
    // from PyTorch: torch.tensor([2., 1, nan, 2, 1, -0., 0.]).sort(stable=True), both directions
    let x = Tensor::new(&[2.0f64, 1.0, f64::NAN, 2.0, 1.0, -0.0, 0.0]);
    let (v, i) = x.sort(0, false);
    assert_eq!(i.to_vec::<i64>(), vec![5, 6, 1, 4, 0, 3, 2]);
    let v = v.to_vec::<f64>();
    assert!(v[6].is_nan() && v[0].to_bits() == (-0.0f64).to_bits() && v[1].to_bits() == 0.0f64.to_bits());
    let (v, i) = x.sort(0, true);
    assert_eq!(i.to_vec::<i64>(), vec![2, 0, 3, 1, 4, 5, 6]);
    assert!(v.to_vec::<f64>()[0].is_nan());
    assert_eq!(x.argsort(0, true).to_vec::<i64>(), vec![2, 0, 3, 1, 4, 5, 6]);
    // topk: NaN is the largest; ties go to the earlier position
    let y = Tensor::new(&[1.0f32, f32::NAN, 3.0, 3.0, 0.0, 3.0]);
    let (v, i) = y.topk(3, 0, true, true);
    assert!(v.to_vec::<f32>()[0].is_nan());
    assert_eq!(i.to_vec::<i64>(), vec![1, 2, 3]);
    let (v, i) = y.topk(2, 0, false, true);
    assert_eq!((v.to_vec::<f32>(), i.to_vec::<i64>()), (vec![0.0, 1.0], vec![4, 0]));
    // unsorted topk still returns the right set
    let (v, i) = u2().topk(2, 1, true, false);
    let mut got: Vec<(i64, i64)> =
        i.to_vec::<i64>().chunks(2).enumerate().flat_map(|(r, c)| c.iter().map(move |&c| (r as i64, c))).collect();
    got.sort();
    assert_eq!(got, vec![(0, 0), (0, 2), (1, 1), (1, 3), (2, 1), (2, 2)]);
    let mut vals = v.to_vec::<f32>();
    vals.sort_by(f32::total_cmp);
    assert_eq!(vals, vec![2.25, 3.5, 5.0, 6.5, 8.0, 9.0]);
}

#[test]
fn every_dtype_sorts() {
    let x = Tensor::new(&[[3i64, 0, 2, 7], [1, 1, 0, 5]]);
    for dt in DType::ALL {
        let xd = x.to_dtype(dt);
        // the order of the values as int64 (bool: 0 < 1) is the order in every dtype
        let as_int = xd.to_dtype(DType::I64);
        for (dim, desc) in [(1, false), (1, true), (0, false), (0, true)] {
            let (v, i) = xd.sort(dim, desc);
            let (vi, ii) = as_int.sort(dim, desc);
            assert_eq!(v.dtype(), dt);
            assert_eq!(i.to_vec::<i64>(), ii.to_vec::<i64>(), "{dt} dim {dim} descending {desc}");
            assert_eq!(v.to_dtype(DType::I64).to_vec::<i64>(), vi.to_vec::<i64>(), "{dt}");
            let (tv, ti) = xd.topk(2, dim, !desc, true);
            let (tvi, tii) = as_int.topk(2, dim, !desc, true);
            assert_eq!((tv.dtype(), ti.to_vec::<i64>()), (dt, tii.to_vec::<i64>()), "{dt}");
            assert_eq!(tv.to_dtype(DType::I64).to_vec::<i64>(), tvi.to_vec::<i64>());
        }
    }
    // from PyTorch: torch.tensor([True, False, True]).sort() -> [False, True, True], [1, 0, 2]
    let (v, i) = Tensor::new(&[true, false, true]).sort(0, false);
    assert_eq!((v.to_vec::<bool>(), i.to_vec::<i64>()), (vec![false, true, true], vec![1, 0, 2]));
    // half precision keeps its values exactly
    let h = Tensor::new(&[0.1f32, -2.5, 65504.0]).to_dtype(DType::BF16);
    assert_eq!(h.sort(0, false).0.to_dtype(DType::F32).to_vec::<f32>(), vec![-2.5, 0.100097656, 65536.0]);
}

#[test]
fn zero_dim_and_zero_size() {
    let (v, i) = Tensor::scalar(3i64).sort(0, true);
    assert_eq!((v.shape(), v.item::<i64>(), i.item::<i64>()), (&[] as &[usize], 3, 0));
    assert_eq!(Tensor::scalar(3i64).argsort(-1, false).item::<i64>(), 0);
    // as in PyTorch, k = 0 on a 0-dim tensor still returns its element
    let (v, i) = Tensor::scalar(2.5f32).topk(0, 0, true, true);
    assert_eq!((v.shape(), v.item::<f32>(), i.item::<i64>()), (&[] as &[usize], 2.5, 0));
    let e = Tensor::zeros_opts([0, 3], DType::F32, Device::Cpu);
    let (v, i) = e.sort(1, false);
    assert_eq!((v.shape(), i.shape()), (&[0usize, 3][..], &[0usize, 3][..]));
    let (v, _) = e.t().sort(1, true);
    assert_eq!(v.shape(), &[3, 0]);
    let (v, i) = u2().topk(0, 1, true, true);
    assert_eq!((v.shape(), i.shape()), (&[3usize, 0][..], &[3usize, 0][..]));
    assert_eq!(e.t().topk(0, 1, false, false).0.shape(), &[3, 0]);
}

#[test]
fn large_inputs_sort_in_parallel() {
    // many rows (parallel over rows), along the last dim and along dim 0 of a transposed view
    let (r, c) = (400usize, 300usize);
    let data: Vec<f32> = (0..r * c).map(|p| ((p * 7919) % 1009) as f32 - 500.0).collect();
    let x = Tensor::from_vec(data.clone(), [r, c]);
    let (v, i) = x.sort(1, false);
    let (v, i) = (v.to_vec::<f32>(), i.to_vec::<i64>());
    for row in 0..r {
        let (vs, is) = (&v[row * c..(row + 1) * c], &i[row * c..(row + 1) * c]);
        assert!(
            vs.windows(2).zip(is.windows(2)).all(|(w, j)| w[0] < w[1] || (w[0] == w[1] && j[0] < j[1])),
            "row {row} sorted and stable"
        );
        assert!(
            is.iter().zip(vs).all(|(&j, &val)| data[row * c + j as usize] == val),
            "row {row} indices point at values"
        );
    }
    let (vt, it) = x.t().sort(0, true);
    assert_eq!(vt.shape(), &[c, r]);
    assert!(vt.t().to_vec::<f32>() == x.sort(1, true).0.to_vec::<f32>(), "sorting a transposed view along dim 0");
    assert!(it.t().to_vec::<i64>() == x.argsort(1, true).to_vec::<i64>());
    // one long row (sorted with the whole pool)
    let n = 200_003usize;
    let long = Tensor::from_vec((0..n).map(|p| ((p * 7919) % 1000) as i64).collect(), [n]);
    let (v, i) = long.sort(0, true);
    let (v, i) = (v.to_vec::<i64>(), i.to_vec::<i64>());
    assert!(
        v.windows(2).zip(i.windows(2)).all(|(w, j)| w[0] > w[1] || (w[0] == w[1] && j[0] < j[1])),
        "long row sorted and stable"
    );
    assert!(i.iter().zip(&v).all(|(&j, &val)| (j as usize * 7919) % 1000 == val as usize));
    // topk over many rows
    let (tv, ti) = x.topk(5, 1, true, true);
    let full = x.sort(1, true);
    assert!(tv.to_vec::<f32>() == full.0.narrow(1, 0, 5).to_vec::<f32>());
    assert!(ti.to_vec::<i64>() == full.1.narrow(1, 0, 5).to_vec::<i64>());
}

#[test]
fn errors_name_the_op_and_the_caller() {
    let x = a2();
    let e = x.try_sort(-3, false).unwrap_err().to_string();
    assert!(e.starts_with("sort: dimension out of range (expected to be in range of [-2, 1], but got -3)"), "{e}");
    let e = x.try_argsort(5, false).unwrap_err().to_string();
    assert!(e.starts_with("argsort: dimension out of range"), "{e}");
    let e = x.try_topk(5, 1, true, true).unwrap_err().to_string();
    assert!(e.starts_with("topk: selected index k out of range (k = 5, dim 1 of shape [3, 4] has size 4)"), "{e}");
    assert!(e.contains("tests/sort.rs:"), "{e}");
    assert!(std::panic::catch_unwind(|| a2().topk(9, 0, true, true)).is_err());
}
