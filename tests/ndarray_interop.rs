//! ndarray interop: copies in both directions keep shape and logical order for every layout;
//! `as_ndarray_view` borrows without copying. Run with `--features ndarray`.
#![cfg(feature = "ndarray")]

use half::{bf16, f16};
use kiln::{DType, ErrorKind, Tensor};
use ndarray::{arr0, arr2, s, Array, ArrayD, IxDyn};

#[test]
fn from_ndarray_copies_any_layout() {
    let a = arr2(&[[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]]);
    let t = Tensor::from_ndarray(&a);
    assert_eq!((t.shape(), t.dtype()), (&[2usize, 3][..], DType::F32));
    assert_eq!(t.to_vec::<f32>(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    // Transposed view (Fortran order in memory).
    let tt = Tensor::from_ndarray(&a.t());
    assert_eq!(tt.to_vec2::<f32>(), vec![vec![1.0, 4.0], vec![2.0, 5.0], vec![3.0, 6.0]]);
    // Sliced with a negative step.
    let r = Tensor::from_ndarray(&a.slice(s![.., ..;-2]));
    assert_eq!(r.to_vec2::<f32>(), vec![vec![3.0, 1.0], vec![6.0, 4.0]]);
    // Broadcast (stride-0) view.
    let b = Tensor::from_ndarray(&ndarray::arr1(&[7i64, 8]).broadcast((3, 2)).unwrap());
    assert_eq!(b.to_vec::<i64>(), vec![7, 8, 7, 8, 7, 8]);
    // 0-dim and zero-size arrays.
    let z = Tensor::from_ndarray(&arr0(2.5f64));
    assert_eq!((z.dim(), z.item::<f64>()), (0, 2.5));
    let e = Tensor::from_ndarray(&Array::<i32, _>::zeros((0, 4)));
    assert_eq!((e.shape(), e.dtype()), (&[0usize, 4][..], DType::I32));
}

#[test]
fn every_dtype_round_trips() {
    fn round_trip<T: kiln_runtime::storage::StorageElement + std::fmt::Debug>(vals: [T; 4], dtype: DType) {
        let a = ArrayD::from_shape_vec(IxDyn(&[2, 2]), vals.to_vec()).unwrap();
        let t = Tensor::from_ndarray(&a);
        assert_eq!(t.dtype(), dtype);
        assert_eq!(t.to_ndarray::<T>(), a);
        assert_eq!(t.t().to_ndarray::<T>(), a.t());
    }
    round_trip([1.5f32, -2.0, 0.0, 4.25], DType::F32);
    round_trip([1.5f64, -2.0, 0.0, 1e300], DType::F64);
    round_trip([1.5, -2.0, 0.0, 4.25].map(f16::from_f32), DType::F16);
    round_trip([1.5, -2.0, 0.0, 4.25].map(bf16::from_f32), DType::BF16);
    round_trip([i64::MIN, -1, 0, i64::MAX], DType::I64);
    round_trip([i32::MIN, -1, 0, i32::MAX], DType::I32);
    round_trip([0u8, 1, 128, 255], DType::U8);
    round_trip([true, false, false, true], DType::Bool);
}

#[test]
fn to_ndarray_copies_views_in_logical_order() {
    let t = Tensor::arange(12).reshape([3, 4]);
    let n = t.narrow(1, 1, 2).to_ndarray::<i64>();
    assert_eq!(n, arr2(&[[1i64, 2], [5, 6], [9, 10]]).into_dyn());
    assert!(n.is_standard_layout());
    let x = Tensor::new(&[1.0f32, 2.0]).expand([2, 2]).to_ndarray::<f32>();
    assert_eq!(x, arr2(&[[1.0f32, 2.0], [1.0, 2.0]]).into_dyn());
    assert_eq!(Tensor::new(&4i32).to_ndarray::<i32>(), arr0(4).into_dyn());
    assert_eq!(Tensor::zeros([2, 0]).to_ndarray::<f32>().shape(), &[2, 0]);
    // Another element type casts the values, as `to_vec` and `item` do.
    assert_eq!(t.narrow(0, 0, 1).to_ndarray::<f32>(), arr2(&[[0.0f32, 1.0, 2.0, 3.0]]).into_dyn());
}

#[test]
fn ndarray_view_borrows_without_copying() {
    let t = Tensor::from_vec((0..6).map(|i| i as f32).collect(), [2, 3]);
    {
        let guard = t.as_ndarray_view::<f32>();
        let v = guard.view();
        assert_eq!(v, arr2(&[[0.0f32, 1.0, 2.0], [3.0, 4.0, 5.0]]).into_dyn());
        assert_eq!(v.as_ptr(), t.as_slice::<f32>().as_ptr(), "the view must alias the storage");
    }
    // Transposed, narrowed and expanded views keep their strides.
    let tt = t.t();
    let g = tt.as_ndarray_view::<f32>();
    assert_eq!(g.view(), arr2(&[[0.0f32, 3.0], [1.0, 4.0], [2.0, 5.0]]).into_dyn());
    assert_eq!(g.view().strides(), &[1, 3]);
    let n = t.narrow(1, 1, 2);
    assert_eq!(n.as_ndarray_view::<f32>().view(), arr2(&[[1.0f32, 2.0], [4.0, 5.0]]).into_dyn());
    let e = Tensor::new(&[1i64, 2]).expand([3, 2]);
    let ev = e.as_ndarray_view::<i64>();
    assert_eq!(ev.view().strides(), &[0, 1]);
    assert_eq!(ev.view().sum(), 9);
    let z = Tensor::zeros([0, 3]);
    assert_eq!(z.as_ndarray_view::<f32>().view().shape(), &[0, 3]);
    assert_eq!(t.try_as_ndarray_view::<i64>().unwrap_err().kind, ErrorKind::DType);
}

#[test]
fn large_arrays_round_trip() {
    let a = Array::from_shape_fn((500, 300), |(i, j)| (i * 300 + j) as f32);
    let t = Tensor::from_ndarray(&a);
    assert_eq!(t.numel(), 150_000);
    assert_eq!(t.to_ndarray::<f32>(), a.clone().into_dyn());
    let back = Tensor::from_ndarray(&a.t()).to_ndarray::<f32>();
    assert_eq!(back, a.t().into_dyn());
}
