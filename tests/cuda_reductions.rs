//! Reductions and softmax on CUDA tensors against the CPU (`test_device!`: each body runs on the
//! CPU and, with a GPU, on cuda:0; without one the CUDA half skips with a printed line): sum,
//! mean, prod, max/min/amax/amin, argmax/argmin, max_dim/min_dim, all/any, var/std, logsumexp,
//! cumsum, softmax and log_softmax over one, several and all dims, keepdim both ways, in every dtype
//! each takes, on contiguous, transposed, narrowed (offset) and expanded (stride 0) views,
//! with NaN, ±inf, ties, empty dims, short rows (a warp per row), long rows (a block per row)
//! and more rows than the grid holds; and gradients through them, including a broadcasting
//! add whose gradient autograd sums over the broadcast dims.

#[path = "common/device.rs"]
#[macro_use]
mod device;

use kiln::{DType, Device, Tensor};

/// `n` varied f32 values (signs, magnitudes, no two equal by accident) shaped `shape`, on `d`.
fn data(shape: &[usize], d: Device) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|i| ((i as f32 * 0.618).sin() * 3.0 + (i % 7) as f32 * 0.25).round_ties_even() / 4.0 + (i as f32) * 1e-3)
        .collect();
    Tensor::from_vec(v, shape).to(&d)
}

/// Small integers (with repeats) shaped `shape`, as `dtype`, on `d`.
fn ints(shape: &[usize], dtype: DType, d: Device) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<i64> = (0..n as i64).map(|i| (i * 7 + 3) % 11 - 4).collect();
    Tensor::from_vec(v, shape).to_dtype(dtype).to(&d)
}

/// A [3, 4] f32 tensor with a NaN, ±inf and ties, on `d`.
fn specials(d: Device) -> Tensor {
    let (nan, inf) = (f32::NAN, f32::INFINITY);
    Tensor::from_vec(vec![1.0f32, nan, 3.0, nan, -inf, 2.0, 2.0, -1.0, 5.0, inf, 5.0, -inf], [3, 4]).to(&d)
}

test_device!(sums_means_and_products_over_dims, |d| {
    let x = data(&[2, 3, 4], d);
    vec![
        x.sum(),
        x.sum_dim(1),
        x.sum_dim_keepdim(-1),
        x.sum_dim([0, 2]),
        x.sum_dim_keepdim([2, 0]),
        x.sum_dim_keepdim(Vec::<i64>::new()),
        x.mean(),
        x.mean_dim([0, 1]),
        x.mean_dim_keepdim(2),
        (&x * 0.5 + 1.0).prod(),
        (&x * 0.5 + 1.0).prod_dim(1),
        (&x * 0.5 + 1.0).prod_dim_keepdim([0, 2]),
        Tensor::scalar(2.5f32).to(&d).sum_dim_keepdim(0),
    ]
});

test_device!(reductions_in_every_dtype, |d| {
    let x = data(&[3, 5], d);
    let mut out = Vec::new();
    for dt in [DType::F64, DType::F16, DType::BF16] {
        let y = x.to_dtype(dt);
        out.extend([y.sum_dim(1), y.mean_dim_keepdim(0), y.prod_dim(1), y.amax(0), y.amin_keepdim(1)]);
        out.extend([y.var_dim(1), y.std_correction(0, 0, true), y.logsumexp(1), y.argmax_dim(1)]);
    }
    for dt in [DType::I64, DType::I32, DType::U8, DType::Bool] {
        let y = ints(&[3, 5], dt, d);
        // Integer and bool sums and products are i64 (and wrap); extremes keep the dtype.
        out.extend([y.sum(), y.sum_dim(0), y.prod_dim_keepdim(1), y.amax(1), y.amin(0), y.max(), y.min()]);
        out.extend([y.all_dim(1), y.any_dim_keepdim(0), y.logsumexp(1)]);
        if dt != DType::Bool {
            out.extend([y.argmax_dim(1), y.argmin(), y.max_dim_keepdim(0).1]);
        }
    }
    let big = Tensor::from_vec(vec![i64::MAX, 1, i64::MIN, -1], [4]).to(&d);
    out.extend([big.sum(), big.prod(), Tensor::from_vec(vec![200u8, 100, 3], [3]).to(&d).sum()]);
    out
});

test_device!(extremes_propagate_nan_and_pick_the_first_index, |d| {
    let x = specials(d);
    let (v0, i0) = x.max_dim(1);
    let (v1, i1) = x.min_dim_keepdim(0);
    let (v2, i2) = x.t().max_dim(0); // strided
    vec![
        x.max(),
        x.amax(1),
        x.amin_keepdim(0),
        x.argmax_dim(1),
        x.argmin_dim(0),
        x.narrow(0, 1, 2).argmax(),
        x.narrow(0, 1, 2).argmin(),
        v0,
        i0,
        v1,
        i1,
        v2,
        i2,
    ]
});

test_device!(argmax_ties_pick_the_first_index_in_long_rows, |d| {
    // Rows of 3000 (a block per row) with the extreme at two places: 2999 and 17, and NaNs at
    // 2500 and 1200; the group combines lanes in every order, the answer is the first index.
    let mut v = vec![0.0f32; 2 * 3000];
    v[2999] = 9.0;
    v[17] = 9.0;
    v[5] = -9.0;
    v[2000] = -9.0;
    v[3000 + 2500] = f32::NAN;
    v[3000 + 1200] = f32::NAN;
    let x = Tensor::from_vec(v, [2, 3000]).to(&d);
    let (m, i) = x.max_dim(1);
    vec![x.argmax_dim(1), x.argmin_dim_keepdim(1), m, i, x.argmax(), x.amax(1)]
});

test_device!(all_and_any_count_nan_as_true, |d| {
    let x = specials(d);
    let z = Tensor::from_vec(vec![0.0f32, 0.0, 1.0, 0.0, 0.0, 0.0], [2, 3]).to(&d);
    let u = Tensor::from_vec(vec![0u8, 3, 1, 7], [2, 2]).to(&d);
    vec![
        x.all(),
        x.any_dim(1),
        z.all_dim(0),
        z.any_dim_keepdim(1),
        z.any(),
        u.all_dim(1),
        u.any(),
        z.all_dim(Vec::<i64>::new()),
    ]
});

test_device!(variance_and_deviation_with_corrections, |d| {
    let x = data(&[4, 6], d);
    let one = data(&[3, 1], d);
    vec![
        x.var(),
        x.std_correction([], 0, false),
        x.var_dim(1),
        x.var_correction([0, 1], 0, true),
        x.std_correction(0, 2, false),
        x.t().var_dim_keepdim(1),
        one.var_dim(1), // n <= correction: NaN
        one.std_correction(1, 0, false),
        specials(d).var_dim(1),
    ]
});

test_device!(logsumexp_is_stable_with_infinities_and_nan, |d| {
    let x = data(&[3, 7], d) * 50.0;
    let inf = Tensor::from_vec(vec![f32::NEG_INFINITY, f32::NEG_INFINITY, 1.0, f32::INFINITY, 0.0, 2.0], [3, 2]).to(&d);
    vec![x.logsumexp(1), x.logsumexp_keepdim([0, 1]), x.t().logsumexp(0), inf.logsumexp(1), specials(d).logsumexp(0)]
});

test_device!(softmax_along_every_dim_and_view, |d| {
    let x = data(&[3, 4, 5], d) * 4.0;
    let mut out = Vec::new();
    for dim in [0, 1, 2, -1] {
        out.push(x.softmax(dim));
        out.push(x.log_softmax(dim));
    }
    let t = x.transpose(0, 2); // strided
    let n = x.narrow(1, 1, 2); // offset
    let e = data(&[1, 6], d).expand([4, 6]); // stride 0
    out.extend([t.softmax(1), t.log_softmax(0), n.softmax(-1), e.log_softmax(0), e.softmax(1)]);
    // -inf entries, a row of -inf (NaN), a NaN (its row NaN), f16/bf16/f64, a size-1 dim.
    let s = specials(d);
    out.extend([s.softmax(1), s.log_softmax(0)]);
    for dt in [DType::F16, DType::BF16, DType::F64] {
        out.extend([x.to_dtype(dt).softmax(2), x.to_dtype(dt).log_softmax(1)]);
    }
    out.extend([data(&[4, 1], d).softmax(1), Tensor::scalar(3.0f32).to(&d).log_softmax(0)]);
    out
});

test_device!(cumsum_along_every_dim_and_view, |d| {
    let x = data(&[3, 4, 5], d);
    vec![
        x.cumsum(0),
        x.cumsum(2),
        x.transpose(0, 2).cumsum(1),
        x.narrow(1, 1, 2).cumsum(-1),
        ints(&[4, 6], DType::I32, d).cumsum(1), // i64
        ints(&[5], DType::Bool, d).cumsum(0),
        data(&[2, 3000], d).cumsum(1),
        x.to_dtype(DType::F16).cumsum(1),
        Tensor::scalar(2.0f32).to(&d).cumsum(0),
        Tensor::zeros([0, 3]).to(&d).cumsum(0),
    ]
});

test_device!(long_rows_and_many_rows, |d| {
    // Rows longer than a warp takes (a block per row), rows past the grid (groups stride).
    let long = data(&[3, 5000], d);
    let many = data(&[40000, 3], d);
    vec![
        long.sum_dim(1),
        long.mean(),
        long.amax(1),
        long.var_dim(1),
        long.softmax(1),
        long.t().logsumexp(0),
        many.sum_dim(1),
        many.argmax_dim(1),
        many.log_softmax(1),
        many.sum_dim(0),
    ]
});

test_device!(empty_dims_give_the_identities, |d| {
    let e = Tensor::zeros([0, 3]).to(&d);
    let ei = Tensor::zeros([2, 0]).to_dtype(DType::I32).to(&d);
    vec![
        e.sum(),
        e.sum_dim(0),
        e.sum_dim_keepdim(1),
        e.prod_dim(0),
        e.mean_dim(0), // NaN
        e.var_dim(0),
        e.logsumexp(0), // -inf
        e.all_dim(0),
        e.any_dim(0),
        e.amax(1), // no rows: shape [0]
        e.softmax(0),
        ei.sum_dim(1),
        ei.prod_dim(1),
    ]
});

test_device!(views_are_read_where_they_lie, |d| {
    let x = data(&[4, 6, 5], d);
    let p = x.permute(&[2, 0, 1]); // [5, 4, 6], every stride out of order
    let n = x.narrow(2, 1, 3).narrow(0, 2, 2); // an offset and gaps
    let e = data(&[6, 1], d).expand([6, 7]);
    vec![
        p.sum_dim([0, 2]),
        p.amax_keepdim(1),
        p.argmin_dim(2),
        n.sum(),
        n.mean_dim(1),
        n.prod_dim_keepdim(2),
        e.sum_dim(1),
        e.std_dim(0),
        p.max_dim(0).1,
    ]
});

test_device!(backward_through_a_broadcasting_add, |d| {
    let a = data(&[3, 4], d).requires_grad_(true);
    let b = data(&[4], d).requires_grad_(true);
    let c = data(&[3, 1], d).requires_grad_(true);
    ((&a + &b) * &c).sum().backward();
    vec![a.grad().unwrap(), b.grad().unwrap(), c.grad().unwrap()]
});

test_device!(gradients_of_reductions_and_softmax, |d| {
    let x = data(&[3, 5], d).requires_grad_(true);
    let w = data(&[3, 5], d);
    let terms = [
        x.mean_dim_keepdim(1).sum(),
        (x.prod_dim(1) * 0.1).sum(),
        x.amax(1).sum(),
        x.max_dim(0).0.sum(),
        x.var_dim(1).sum(),
        x.std(),
        x.logsumexp(1).sum(),
        (x.softmax(1) * &w).sum(),
        (x.log_softmax(0) * &w).sum(),
        (x.cumsum(1) * &w).sum(),
    ];
    let mut out = Vec::new();
    for t in terms {
        t.backward();
        out.push(x.grad().unwrap().deep_clone());
        x.set_grad(None);
    }
    out
});
