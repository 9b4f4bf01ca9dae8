//! `sort`, `argsort`, `topk`, `nonzero`, `masked_select` and advanced indexing (`index`,
//! `index_put_`) on CUDA tensors. Each `test_device!` body runs on the CPU and, when a GPU is
//! present, on cuda:0, and the two result lists are compared (exact for integers and bool):
//! ties (stable order, in both directions), NaN and -0.0, every dtype, non-last dims, views,
//! rows longer than a shared-memory tile, empty and 0-dim tensors, gradients, and errors
//! (the same message on both devices, nothing written). Without a GPU, the CPU runs still
//! check the bodies' assertions and the CUDA ops fail naming the op.

#[path = "common/device.rs"]
#[macro_use]
mod device;

use kiln::{DType, Device, Tensor};
use std::sync::Mutex;

/// Held by the tests whose CUDA runs scatter (sort/topk/index gradients, `index_put_`), so that
/// the one test switching `use_deterministic_algorithms` (process-wide) cannot change which
/// kernels they run.
static DETERMINISM: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    DETERMINISM.lock().unwrap_or_else(|e| e.into_inner())
}

/// A [3, 7] f32 tensor with ties, NaN, -0.0/0.0 and infinities on `d`.
fn ragged(d: Device) -> Tensor {
    let nan = f32::NAN;
    #[rustfmt::skip]
    let v = vec![
        2.0f32, 1.0, 2.0, nan, -0.0, 0.0, 1.0,
        f32::INFINITY, -1.5, nan, -1.5, 3.0, f32::NEG_INFINITY, 3.0,
        0.0, 0.0, -0.0, 5.0, 5.0, nan, -2.0,
    ];
    Tensor::from_vec(v, [3, 7]).to(&d)
}

/// `n` values with many ties (`(j · 7919 + salt) mod m`), as f32 on `d`.
fn tied(n: usize, m: usize, salt: usize, d: Device) -> Tensor {
    Tensor::from_vec((0..n).map(|j| ((j * 7919 + salt) % m) as f32 - (m / 2) as f32).collect(), [n]).to(&d)
}

/// Both results of a sort-like op.
fn both((v, i): (Tensor, Tensor)) -> [Tensor; 2] {
    [v, i]
}

test_device!(sort_is_stable_with_nan_and_signed_zeros, |d| {
    let x = ragged(d);
    let mut out = Vec::new();
    for descending in [false, true] {
        out.extend(both(x.sort(-1, descending)));
        out.extend(both(x.sort(0, descending)));
        out.push(x.argsort(1, descending));
        out.push(x.argsort(-2, descending));
    }
    // Equal values keep their order: the first 2.0 (position 0) before the second (2).
    let (v, i) = Tensor::new(&[[2.0f32, 1.0, 2.0, 1.0]]).to(&d).sort(1, false);
    assert_eq!((v.to_vec::<f32>(), i.to_vec::<i64>()), (vec![1.0, 1.0, 2.0, 2.0], vec![1, 3, 0, 2]));
    out.extend([v, i]);
    out
});

test_device!(sort_every_dtype, |d| {
    let x = ragged(d);
    let mut out = Vec::new();
    for dtype in [DType::F64, DType::F16, DType::BF16] {
        out.extend(both(x.to_dtype(dtype).sort(-1, false)));
        out.extend(both(x.to_dtype(dtype).sort(0, true)));
    }
    let ints = Tensor::new(&[[3i64, -1, i64::MIN, 7, 3, i64::MAX], [0, 0, -5, 2, -5, 1]]).to(&d);
    for dtype in [DType::I64, DType::I32, DType::U8, DType::Bool] {
        out.extend(both(ints.to_dtype(dtype).sort(1, false)));
        out.extend(both(ints.to_dtype(dtype).sort(1, true)));
        out.extend(both(ints.to_dtype(dtype).sort(0, false)));
    }
    out
});

test_device!(sort_views_and_middle_dims, |d| {
    let x = Tensor::arange(60).to(&d).to_dtype(DType::F32).reshape([3, 4, 5]).remainder(7.0);
    let t = x.transpose(0, 2); // [5, 4, 3], strided
    let n = x.narrow(2, 1, 3); // offset, non-contiguous
    let e = Tensor::new(&[1.0f32, 3.0, 2.0]).to(&d).expand([4, 3]);
    let mut out = Vec::new();
    for dim in [0, 1, 2, -1] {
        out.extend(both(x.sort(dim, false)));
        out.extend(both(t.sort(dim, true)));
        out.extend(both(n.sort(dim, false)));
    }
    out.extend(both(e.sort(1, true)));
    out.extend(both(e.sort(0, false)));
    out
});

test_device!(sort_rows_longer_than_a_tile, |d| {
    // 2048 is one tile; 5000 pads to 8192: global steps, then tile merges.
    let mut out = Vec::new();
    for n in [2047, 2048, 2049, 5000] {
        let x = Tensor::stack(&[tied(n, 10, 1, d), tied(n, 1000, 2, d), tied(n, 3, 3, d)], 0);
        out.extend(both(x.sort(1, false)));
        out.extend(both(x.sort(1, true)));
        out.extend(both(x.t().sort(0, false))); // the long dim first, strided
        out.extend(both(x.topk(17, 1, true, true)));
    }
    out
});

test_device!(topk_ties_nan_and_orders, |d| {
    let x = ragged(d);
    let mut out = Vec::new();
    for k in [0, 1, 3, 7] {
        out.extend(both(x.topk(k, 1, true, true)));
        out.extend(both(x.topk(k, -1, false, true)));
    }
    out.extend(both(x.topk(2, 0, true, true)));
    out.extend(both(x.t().topk(2, 1, false, true)));
    // Unsorted: the same set (the order is the device's); compare it sorted.
    let (v, i) = x.topk(4, 1, true, false);
    out.push(v.sort(1, false).0);
    out.push(i.sort(1, false).0);
    // Among equal values the earlier position is picked.
    let (_, i) = Tensor::new(&[5i32, 9, 5, 9, 5]).to(&d).topk(3, 0, true, true);
    assert_eq!(i.to_vec::<i64>(), vec![1, 3, 0]);
    out.push(i);
    out
});

test_device!(sort_empty_and_zero_dim, |d| {
    let s = Tensor::scalar(4.5f32).to(&d);
    let e = Tensor::zeros_opts([3, 0], DType::F32, d);
    let mut out = Vec::new();
    out.extend(both(s.sort(0, true)));
    out.extend(both(s.topk(1, 0, true, true)));
    out.extend(both(e.sort(1, false)));
    out.extend(both(e.sort(0, false)));
    out.extend(both(e.topk(0, 1, true, true)));
    out.extend(both(Tensor::new(&[7i64]).to(&d).sort(0, false)));
    out
});

test_device!(sort_and_topk_gradients, |d| {
    let _g = lock();
    let x = Tensor::new(&[
        [2.0f32, 1.0, 2.0, 0.5, -0.0, 0.0, 1.0],
        [4.0, -1.5, 9.0, -1.5, 3.0, -8.0, 3.0],
        [0.0, 0.0, -0.0, 5.0, 5.0, 6.0, -2.0],
    ])
    .to(&d)
    .requires_grad_(true);
    let w = Tensor::arange(21).to(&d).to_dtype(DType::F32).reshape([3, 7]);
    let (v, _) = x.sort(1, true);
    let (t, _) = x.topk(2, 0, true, true);
    ((&v * &w).sum() + t.sum()).backward();
    vec![x.grad().unwrap()]
});

test_device!(nonzero_every_dtype_and_view, |d| {
    let x = ragged(d);
    let big = tied(3001, 3, 5, d).reshape([3001, 1]); // three chunks, a third of them zero
    vec![
        x.nonzero(),
        x.t().nonzero(),
        x.ne(0.0).nonzero(),
        x.to_dtype(DType::F16).nonzero(),
        x.to_dtype(DType::I64).nonzero(),
        Tensor::new(&[[0u8, 3], [255, 0]]).to(&d).nonzero(),
        x.reshape([3, 1, 7]).narrow(2, 2, 4).nonzero(),
        big.nonzero(),
        big.expand([3001, 2]).nonzero(),
        Tensor::scalar(2.0f32).to(&d).nonzero(),
        Tensor::scalar(0i64).to(&d).nonzero(),
        Tensor::zeros_opts([2, 0, 3], DType::F32, d).nonzero(),
        Tensor::zeros_opts([4, 5], DType::Bool, d).nonzero(),
    ]
});

test_device!(masked_select_broadcasts_and_differentiates, |d| {
    let _g = lock();
    let x = ragged(d);
    let row = Tensor::new(&[true, false, true, true, false, false, true]).to(&d);
    let col = Tensor::new(&[[false], [true], [true]]).to(&d);
    let big = tied(4099, 4, 1, d);
    let w = Tensor::arange(12).to(&d).to_dtype(DType::F32).reshape([3, 4]).requires_grad_(true);
    let m = Tensor::new(&[[true, false, true, true], [false, false, false, true], [true, true, false, false]]).to(&d);
    let picked = w.masked_select(&m);
    (&picked * &picked).sum().backward();
    vec![
        x.masked_select(&x.gt(0.0)),
        x.masked_select(&row),
        x.masked_select(&col),
        x.narrow(1, 0, 1).masked_select(&row), // x broadcast too
        x.t().masked_select(&x.t().le(1.0)),
        x.to_dtype(DType::I32).masked_select(&row),
        big.masked_select(&big.ge(0.0)),
        Tensor::scalar(3i64).to(&d).masked_select(&Tensor::scalar(true).to(&d)),
        x.masked_select(&Tensor::zeros_opts([3, 7], DType::Bool, d)),
        picked,
        w.grad().unwrap(),
    ]
});

test_device!(index_with_tensors_masks_and_views, |d| {
    let _g = lock();
    let x = Tensor::arange(60).to(&d).reshape([3, 4, 5]);
    let i = Tensor::new(&[2i64, 0, -1, 1]).to(&d);
    let j = Tensor::new(&[[0i64], [-4], [3]]).to(&d); // broadcasts with i to [3, 4]
    let i32s = Tensor::new(&[1i32, 1, 0]).to(&d);
    let mask =
        Tensor::new(&[[true, false, true, false], [false, true, true, false], [false, false, false, true]]).to(&d);
    let f = x.to_dtype(DType::F32).requires_grad_(true);
    let picked = f.index(&[Some(&i), None, Some(&Tensor::new(&[4i64, 0, 4, 2]).to(&d))]);
    (&picked * &picked).sum().backward(); // an accumulating index_put: repeated rows add up
    vec![
        x.index(&i.narrow(0, 0, 3)),
        x.index(&[None, Some(&i)]), // dim 1, adjacent: in place
        x.index(&[Some(&i.narrow(0, 0, 3)), None, Some(&j.narrow(0, 0, 1))]), // split: in front
        x.index(&[&Tensor::new(&[0i64, -3, 2]).to(&d), &i.narrow(0, 1, 3)]),
        x.index(&[None, Some(&j.remainder(4)), Some(&i)]),
        x.index(&i32s),
        x.index(&mask),
        x.index(&[None, None, Some(&Tensor::new(&[4i64, 0, 4]).to(&d))]),
        x.transpose(0, 2).index(&[&i, &i.remainder(3)]), // a strided source
        x.narrow(1, 1, 3).index(&[None, Some(&Tensor::new(&[2i64, 0]).to(&d))]), // an offset source
        x.to_dtype(DType::F16).index(&mask),
        x.ne(0).index(&i),
        x.index(&Tensor::zeros_opts([0], DType::I64, d)),
        picked,
        f.grad().unwrap(),
    ]
});

test_device!(index_put_plain_and_accumulating, |d| {
    let _g = lock();
    let base = || Tensor::zeros_opts([3, 4], DType::F32, d);
    let rows = Tensor::new(&[2i64, 0, -3]).to(&d);
    let cols = Tensor::new(&[1i64, 3, 3]).to(&d);
    let vals = Tensor::new(&[1.5f32, -2.0, 4.0]).to(&d);
    let plain = base();
    plain.index_put_(&[&rows, &Tensor::new(&[1i64, 3, 0]).to(&d)], &vals, false);
    let added = base();
    added.index_put_(&[&rows, &cols], &vals, true); // (0, 3) twice: adds
    let scalar = base();
    scalar.index_put_(&[None, Some(&Tensor::new(&[3i64, -4]).to(&d))], &Tensor::scalar(7.0f32).to(&d), false);
    let masked = base();
    masked.index_put_(
        &masked.eq(0.0).logical_and(Tensor::new(&[true, false, false, true]).to(&d)),
        &Tensor::scalar(-1.0f32).to(&d),
        false,
    );
    let ints = Tensor::zeros_opts([5], DType::I64, d);
    ints.index_put_(&Tensor::new(&[1i64, 1, 4, 1]).to(&d), &Tensor::new(&[1i64, 10, 100, 1000]).to(&d), true);
    // Through a transposed view: writes land in the base tensor.
    let t = base();
    t.t().index_put_(&[&Tensor::new(&[0i64, 3]).to(&d)], &Tensor::new(&[[1.0f32, 2.0, 3.0]]).to(&d), false);
    let out_of_place = base().index_put(&[&rows.narrow(0, 0, 2)], &Tensor::new(&[5.0f32]).to(&d), true);
    vec![plain, added, scalar, masked, ints, t, out_of_place]
});

test_device!(bad_indices_fail_alike_and_write_nothing, |d| {
    let x = Tensor::zeros_opts([3, 4], DType::F32, d);
    let e = x.try_index(&Tensor::new(&[0i64, 3]).to(&d)).unwrap_err().to_string();
    assert!(e.starts_with("index: index 3 is out of bounds for dimension 0 with size 3"), "{e}");
    let e = x.try_index(&[None, Some(&Tensor::new(&[-5i64]).to(&d))]).unwrap_err().to_string();
    assert!(e.starts_with("index: index -5 is out of bounds for dimension 1 with size 4"), "{e}");
    let e = x
        .try_index_put_(
            &[&Tensor::new(&[1i64]).to(&d), &Tensor::new(&[9i64]).to(&d)],
            &Tensor::scalar(1.0f32).to(&d),
            false,
        )
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("index_put_: index 9 is out of bounds for dimension 1 with size 4"), "{e}");
    let e = x.try_masked_select(&Tensor::new(&[true, false]).to(&d)).unwrap_err().to_string();
    assert!(e.starts_with("masked_select:"), "{e}");
    let e = x.try_topk(5, 0, true, true).unwrap_err().to_string();
    assert!(e.starts_with("topk: selected index k out of range (k = 5, dim 0 of shape [3, 4] has size 3)"), "{e}");
    vec![x]
});

#[test]
fn mixed_devices_are_refused_naming_the_op() {
    if !Device::cuda_is_available() {
        // Without a GPU the CUDA tensor itself cannot be made: the error names the op.
        let e = Tensor::new(&[3.0f32, 1.0]).try_to(&Device::Cuda(0)).unwrap_err().to_string();
        return assert!(e.starts_with("to: no CUDA device available"), "{e}");
    }
    let g = ragged(Device::Cuda(0));
    let m = Tensor::new(&[true, false, true, false, true, false, true]);
    let e = g.try_masked_select(&m).unwrap_err().to_string();
    assert!(
        e.starts_with("masked_select: expected all tensors to be on the same device, but found cuda:0 and cpu"),
        "{e}"
    );
    let e = g.try_index(&Tensor::new(&[0i64])).unwrap_err().to_string();
    assert!(e.starts_with("index: expected all tensors to be on the same device"), "{e}");
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn deterministic_mode_runs_every_put_in_the_cpus_order() {
    let _g = lock();
    let x = Tensor::zeros_opts([4], DType::F32, Device::Cuda(0));
    let i = Tensor::new(&[1i64, 1, 2]).to(&Device::Cuda(0));
    let values = Tensor::new(&[1.0f32, 2.0, 4.0]).to(&Device::Cuda(0));
    kiln::use_deterministic_algorithms(true);
    let added = x.try_index_put(&i, &values, true).map(|t| t.to_vec::<f32>());
    // A plain put keeps the last value written at a repeated position, as the CPU.
    let plain = x.try_index_put(&i, &values, false).map(|t| t.to_vec::<f32>());
    // One value everywhere, and sorting (deterministic): they run too.
    let one = x.try_index_put_(&i, &Tensor::scalar(3.0f32).to(&Device::Cuda(0)), false).map(drop);
    let sorted = x.try_sort(0, false).map(drop);
    kiln::use_deterministic_algorithms(false);
    assert_eq!(added.unwrap(), vec![0.0, 3.0, 4.0, 0.0]);
    assert_eq!(plain.unwrap(), vec![0.0, 2.0, 4.0, 0.0]);
    one.unwrap();
    sorted.unwrap();
    assert_eq!(x.to_vec::<f32>(), vec![0.0, 3.0, 3.0, 0.0]);
}
