//! Indexing ops against reference values: `index_select`, `gather`, the `scatter` family,
//! `index_fill`, advanced indexing (`index`, `index_put_`), `masked_select`, `nonzero` and
//! `one_hot`, on contiguous, transposed, narrowed, expanded, 0-dim and zero-size inputs, every
//! dtype, and inputs large enough for the parallel paths.

use kiln::{DType, Device, Tensor};

/// `arange(12)` as a [3, 4] int64 tensor.
fn x2() -> Tensor {
    Tensor::arange(12).view([3, 4])
}

/// `arange(24)` as a [2, 3, 4] int64 tensor.
fn x3() -> Tensor {
    Tensor::arange(24).view([2, 3, 4])
}

fn t1(v: &[i64]) -> Tensor {
    Tensor::from_slice(v)
}

fn t2<const N: usize>(v: &[[i64; N]]) -> Tensor {
    Tensor::new(&v.to_vec())
}

/// Asserts the shape and the values (compared as int64).
#[track_caller]
fn check(t: &Tensor, shape: &[usize], want: &[i64]) {
    assert_eq!(t.shape(), shape);
    assert_eq!(t.to_dtype(DType::I64).to_vec::<i64>(), want);
}

#[track_caller]
fn err<T>(r: kiln::Result<T>) -> String {
    r.err().expect("expected an error").to_string()
}

/// Reference values computed with PyTorch 2.x (`torch.tensor(...).<op>(...)`), flattened.
#[test]
fn matches_pytorch() {
    // index_select dim 0
    check(&x2().index_select(0, &t1(&[2, 0, 2])), &[3, 4], &[8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11]);
    // index_select dim -1
    check(&x2().index_select(-1, &t1(&[3, 0, 1])), &[3, 3], &[3, 0, 1, 7, 4, 5, 11, 8, 9]);
    // index_select 3-D dim 1
    check(
        &x3().index_select(1, &t1(&[2, 2, 0])),
        &[2, 3, 4],
        &[8, 9, 10, 11, 8, 9, 10, 11, 0, 1, 2, 3, 20, 21, 22, 23, 20, 21, 22, 23, 12, 13, 14, 15],
    );
    // index_select 3-D dim 2
    check(&x3().index_select(2, &t1(&[1, 3])), &[2, 3, 2], &[1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23]);
    // index_select transposed
    check(&x2().t().index_select(0, &t1(&[1, 3])), &[2, 3], &[1, 5, 9, 3, 7, 11]);
    // index_select narrowed
    check(&x2().narrow(1, 1, 2).index_select(1, &t1(&[1, 0, 1])), &[3, 3], &[2, 1, 2, 6, 5, 6, 10, 9, 10]);
    // index_select expanded
    check(
        &Tensor::arange(4).view([1, 4]).expand([3, 4]).index_select(0, &t1(&[2, 1])),
        &[2, 4],
        &[0, 1, 2, 3, 0, 1, 2, 3],
    );
    // index_select strided index
    check(&Tensor::arange(8).index_select(0, &Tensor::arange(6).view([3, 2]).t().select(0, 1)), &[3], &[1, 3, 5]);
    // index_select 0-dim index
    check(&x2().index_select(1, &Tensor::scalar(2i64)), &[3, 1], &[2, 6, 10]);
    // gather dim 1
    check(&x2().gather(1, &t2(&[[3, 0], [1, 1], [0, 2]])), &[3, 2], &[3, 0, 5, 5, 8, 10]);
    // gather dim 0
    check(&x2().gather(0, &t2(&[[2, 0, 1, 0], [1, 1, 0, 2]])), &[2, 4], &[8, 1, 6, 3, 4, 5, 2, 11]);
    // gather dim -2
    check(&x2().gather(-2, &t2(&[[2, 0, 1, 0], [1, 1, 0, 2]])), &[2, 4], &[8, 1, 6, 3, 4, 5, 2, 11]);
    // gather 1-D
    check(&Tensor::arange(5).gather(0, &t1(&[4, 4, 0, 2])), &[4], &[4, 4, 0, 2]);
    // gather 3-D dim 0
    check(
        &x3().gather(0, &Tensor::new(&[[[1i64, 0], [0, 1]], [[1, 1], [0, 0]]])),
        &[2, 2, 2],
        &[12, 1, 4, 17, 12, 13, 4, 5],
    );
    // gather 3-D dim 1
    check(
        &x3().gather(1, &Tensor::new(&[[[2i64, 0, 1, 0]], [[1, 1, 0, 2]]])),
        &[2, 1, 4],
        &[8, 1, 6, 3, 16, 17, 14, 23],
    );
    // gather 3-D dim 2
    check(
        &x3().gather(2, &Tensor::new(&[[[3i64, 0], [1, 1], [0, 2]], [[2, 2], [1, 0], [3, 3]]])),
        &[2, 3, 2],
        &[3, 0, 5, 5, 8, 10, 14, 14, 17, 16, 23, 23],
    );
    // gather transposed input
    check(&x2().t().gather(0, &t2(&[[2, 0, 1], [0, 0, 0]])), &[2, 3], &[2, 4, 9, 0, 4, 8]);
    // gather expanded index
    check(&x2().gather(1, &t2(&[[1], [0], [3]]).expand([3, 2])), &[3, 2], &[1, 1, 4, 4, 11, 11]);
    // gather transposed index
    check(&x2().gather(1, &t2(&[[3, 0, 1], [1, 2, 2]]).t()), &[3, 2], &[3, 1, 4, 6, 9, 10]);
    // scatter dim 0
    check(
        &Tensor::zeros_opts([3, 5], DType::I64, Device::Cpu).scatter(
            0,
            &t2(&[[0, 1, 2, 0, 0], [2, 0, 0, 1, 2]]),
            &Tensor::arange_step(1, 11, 1).view([2, 5]),
        ),
        &[3, 5],
        &[1, 7, 8, 4, 5, 0, 2, 0, 9, 0, 6, 0, 3, 0, 10],
    );
    // scatter duplicates
    check(
        &Tensor::zeros_opts([2, 4], DType::I64, Device::Cpu).scatter(
            1,
            &t2(&[[1, 1, 3], [0, 0, 0]]),
            &t2(&[[1, 2, 3], [4, 5, 6]]),
        ),
        &[2, 4],
        &[0, 2, 0, 3, 6, 0, 0, 0],
    );
    // scatter src larger than index
    check(
        &Tensor::zeros_opts([2, 4], DType::I64, Device::Cpu).scatter(1, &t2(&[[3], [2]]), &x2()),
        &[2, 4],
        &[0, 0, 0, 0, 0, 0, 4, 0],
    );
    // scatter_add 2-D dim 0
    check(
        &Tensor::zeros_opts([3, 3], DType::I64, Device::Cpu).scatter_add(
            0,
            &t2(&[[0, 1, 2], [0, 0, 0]]),
            &t2(&[[1, 2, 3], [4, 5, 6]]),
        ),
        &[3, 3],
        &[5, 5, 6, 0, 2, 0, 0, 0, 3],
    );
    // scatter_add 3-D dim 1
    check(
        &Tensor::zeros_opts([2, 2, 3], DType::I64, Device::Cpu).scatter_add(
            1,
            &Tensor::new(&[[[0i64, 1, 1], [1, 1, 0]], [[0, 0, 0], [1, 0, 1]]]),
            &Tensor::arange(12).view([2, 2, 3]),
        ),
        &[2, 2, 3],
        &[0, 0, 5, 3, 5, 2, 6, 17, 8, 9, 0, 11],
    );
    // scatter_add 3-D dim -1
    check(
        &Tensor::ones_opts([2, 2, 3], DType::I64, Device::Cpu).scatter_add(
            -1,
            &Tensor::new(&[[[2i64, 2], [0, 1]], [[1, 1], [2, 0]]]),
            &Tensor::arange(12).view([2, 2, 3]),
        ),
        &[2, 2, 3],
        &[1, 1, 2, 4, 5, 1, 1, 14, 1, 11, 1, 10],
    );
    // index 1 tensor
    check(
        &x3().index(&t1(&[1, 0])),
        &[2, 3, 4],
        &[12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
    );
    // index dim 1
    check(
        &x3().index(&[None, Some(&t1(&[2, 0]))]),
        &[2, 2, 4],
        &[8, 9, 10, 11, 0, 1, 2, 3, 20, 21, 22, 23, 12, 13, 14, 15],
    );
    // index two adjacent, negative
    check(&x3().index(&[&t1(&[0, 1]), &t1(&[2, -1])]), &[2, 4], &[8, 9, 10, 11, 20, 21, 22, 23]);
    // index separated, broadcast
    check(
        &x3().index(&[Some(&t2(&[[0], [1]])), None, Some(&t1(&[3, -4]))]),
        &[2, 2, 3],
        &[3, 7, 11, 0, 4, 8, 15, 19, 23, 12, 16, 20],
    );
    // index adjacent, broadcast
    check(
        &x3().index(&[None, Some(&t2(&[[0, 2], [1, 1]])), Some(&t1(&[1]))]),
        &[2, 2, 2],
        &[1, 9, 5, 5, 13, 21, 17, 17],
    );
    // index bool mask
    check(
        &x3().index(&Tensor::new(&[[true, false, true], [false, false, true]])),
        &[3, 4],
        &[0, 1, 2, 3, 8, 9, 10, 11, 20, 21, 22, 23],
    );
    // index bool mask dim 1
    check(&x2().index(&[None, Some(&Tensor::new(&[true, false, false, true]))]), &[3, 2], &[0, 3, 4, 7, 8, 11]);
    // index transposed
    check(&x2().t().index(&[&t1(&[3, 1]), &t1(&[0, 2])]), &[2], &[3, 9]);
    // index int32
    check(&x2().index(&Tensor::new(&[2i32, -3])), &[2, 4], &[8, 9, 10, 11, 0, 1, 2, 3]);
    // index_put
    check(
        &Tensor::zeros_opts([3, 4], DType::I64, Device::Cpu).index_put(
            &[&t1(&[0, 2]), &t1(&[1, 3])],
            &t1(&[5, 6]),
            false,
        ),
        &[3, 4],
        &[0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 6],
    );
    // index_put accumulate duplicates
    check(
        &Tensor::zeros_opts([3, 4], DType::I64, Device::Cpu).index_put(
            &[&t1(&[0, 0, 2, 0]), &t1(&[1, 1, -1, 1])],
            &t1(&[1, 2, 3, 4]),
            true,
        ),
        &[3, 4],
        &[0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3],
    );
    // index_put scalar value
    check(
        &Tensor::zeros_opts([3, 4], DType::I64, Device::Cpu).index_put(&[&t1(&[2, 0])], &Tensor::scalar(9i64), false),
        &[3, 4],
        &[9, 9, 9, 9, 0, 0, 0, 0, 9, 9, 9, 9],
    );
    // index_put separated
    check(
        &Tensor::zeros_opts([2, 3, 4], DType::I64, Device::Cpu).index_put(
            &[Some(&t1(&[1, 0])), None, Some(&t1(&[3, 1]))],
            &t2(&[[1, 2, 3], [4, 5, 6]]),
            false,
        ),
        &[2, 3, 4],
        &[0, 4, 0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3],
    );
    // index_put mask
    check(
        &Tensor::zeros_opts([2, 3], DType::I64, Device::Cpu).index_put(
            &Tensor::new(&[[true, false, true], [false, false, true]]),
            &t1(&[7, 8, 9]),
            false,
        ),
        &[2, 3],
        &[7, 0, 8, 0, 0, 9],
    );
    // masked_select row mask
    check(&x2().masked_select(&Tensor::new(&[true, false, false, true])), &[6], &[0, 3, 4, 7, 8, 11]);
    // masked_select transposed
    check(&x2().t().masked_select(&Tensor::new(&[[true], [false], [true], [false]])), &[6], &[0, 4, 8, 2, 6, 10]);
    // masked_select mask broadcast up
    check(
        &Tensor::arange(3).masked_select(&Tensor::new(&[[true, false, true], [false, true, false]])),
        &[3],
        &[0, 2, 1],
    );
    // nonzero 2-D
    check(&t2(&[[0, 1, 0, 2], [3, 0, 0, 0], [0, 0, 4, 5]]).nonzero(), &[5, 2], &[0, 1, 0, 3, 1, 0, 2, 2, 2, 3]);
    // nonzero transposed
    check(&t2(&[[0, 1, 0, 2], [3, 0, 0, 0], [0, 0, 4, 5]]).t().nonzero(), &[5, 2], &[0, 1, 1, 0, 2, 2, 3, 0, 3, 2]);
    // nonzero 3-D float, NaN and -0
    check(
        &Tensor::new(&[[[0.0f32, f32::NAN], [-0.0, 1.0]], [[2.0, 0.0], [0.0, 0.0]]]).nonzero(),
        &[3, 3],
        &[0, 0, 1, 0, 1, 1, 1, 0, 0],
    );
    // nonzero bool
    check(&Tensor::new(&[false, true, true]).nonzero(), &[2, 1], &[1, 2]);
    // one_hot
    check(&t1(&[2, 0, 1]).one_hot(3), &[3, 3], &[0, 0, 1, 1, 0, 0, 0, 1, 0]);
    // one_hot inferred, 2-D
    check(&t2(&[[2, 0], [1, 3]]).one_hot(-1), &[2, 2, 4], &[0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1]);
    // one_hot transposed, wider
    check(
        &t2(&[[2, 0], [1, 3]]).t().one_hot(5),
        &[2, 2, 5],
        &[0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0],
    );
    // index_fill dim 1 negative
    check(&x2().index_fill(1, &t1(&[0, -1]), -1), &[3, 4], &[-1, 1, 2, -1, -1, 5, 6, -1, -1, 9, 10, -1]);
    // index_fill dim 0
    check(&x2().index_fill(0, &t1(&[1]), 7), &[3, 4], &[0, 1, 2, 3, 7, 7, 7, 7, 8, 9, 10, 11]);
    // index_fill 3-D dim 2, repeated
    check(
        &x3().index_fill(2, &t1(&[1, 1, -4]), 0),
        &[2, 3, 4],
        &[0, 0, 2, 3, 0, 0, 6, 7, 0, 0, 10, 11, 0, 0, 14, 15, 0, 0, 18, 19, 0, 0, 22, 23],
    );
}

#[test]
fn every_dtype_moves_values_unchanged() {
    // Data movement commutes with casts: op(x as dt) == op(x) as dt, for every dtype.
    let x = Tensor::new(&[[0i64, 3, 1], [2, 0, 5]]);
    let idx = t2(&[[2, 0], [1, 1]]);
    for dt in DType::ALL {
        let xd = x.to_dtype(dt);
        let same = |a: &Tensor, b: &Tensor| {
            assert_eq!(a.dtype(), dt);
            assert_eq!(a.shape(), b.shape());
            assert_eq!(
                a.to_dtype(DType::F64).to_vec::<f64>(),
                b.to_dtype(dt).to_dtype(DType::F64).to_vec::<f64>(),
                "{dt}"
            );
        };
        same(&xd.index_select(1, &t1(&[2, 0])), &x.index_select(1, &t1(&[2, 0])));
        same(&xd.gather(1, &idx), &x.gather(1, &idx));
        same(&xd.t().gather(0, &idx), &x.t().gather(0, &idx));
        same(&xd.scatter(1, &idx, &xd), &x.scatter(1, &idx, &x));
        same(&xd.scatter_value(1, &idx, 1), &x.scatter_value(1, &idx, 1));
        same(&xd.index(&[&t1(&[1, 0]), &t1(&[-1, 0])]), &x.index(&[&t1(&[1, 0]), &t1(&[-1, 0])]));
        same(
            &xd.index_put(&[&t1(&[1])], &xd.narrow(0, 0, 1), false),
            &x.index_put(&[&t1(&[1])], &x.narrow(0, 0, 1), false),
        );
        same(&xd.index_fill(0, &t1(&[-1]), 1), &x.index_fill(0, &t1(&[-1]), 1));
        same(&xd.masked_select(&x.gt(1)), &x.masked_select(&x.gt(1)));
        check(&xd.nonzero(), &[4, 2], &[0, 1, 0, 2, 1, 0, 1, 2]);
    }
}

#[test]
fn scatter_add_in_every_dtype() {
    let idx = t1(&[0, 1, 0, 0, 2]);
    let want = [
        ("F32", DType::F32),
        ("F64", DType::F64),
        ("F16", DType::F16),
        ("BF16", DType::BF16),
        ("I64", DType::I64),
        ("I32", DType::I32),
        ("U8", DType::U8),
    ];
    for (_, dt) in want {
        let r = Tensor::ones_opts([3], dt, Device::Cpu).scatter_add(0, &idx, &t1(&[1, 2, 3, 4, 5]).to_dtype(dt));
        // from PyTorch: torch.ones(3).scatter_add(0, [0,1,0,0,2], [1,2,3,4,5]) == [9, 3, 6]
        check(&r, &[3], &[9, 3, 6]);
    }
    let b = Tensor::zeros_opts([3], DType::Bool, Device::Cpu).scatter_add(
        0,
        &idx,
        &Tensor::new(&[false, true, false, false, true]),
    );
    assert_eq!(b.to_vec::<bool>(), vec![false, true, true]);
    let u = Tensor::full_opts([1], 250, DType::U8, Device::Cpu).scatter_add(0, &t1(&[0, 0]), &Tensor::new(&[5u8, 6]));
    assert_eq!(u.to_vec::<u8>(), vec![5]); // wraps, as uint8 arithmetic does
    let h = Tensor::zeros_opts([1], DType::F16, Device::Cpu).scatter_add(
        0,
        &t1(&[0, 0, 0]),
        &Tensor::new(&[0.1f32, 0.2, 0.3]).to_dtype(DType::F16),
    );
    // each addition rounds to f16, in row-major order: ((0.1 + 0.2) + 0.3), two ties to even
    // (PyTorch's CPU kernel happens to add these in another order and gets 0.60009766)
    assert_eq!(h.to_dtype(DType::F32).to_vec::<f32>(), vec![0.5996094]);
}

#[test]
fn zero_dim_and_zero_size() {
    let s = Tensor::scalar(7.5f32);
    let r = s.index_select(0, &t1(&[0]));
    assert_eq!((r.shape(), r.item::<f32>()), (&[] as &[usize], 7.5));
    check(&Tensor::scalar(5i64).gather(0, &Tensor::scalar(0i64)), &[], &[5]);
    check(&Tensor::scalar(5i64).gather(0, &t1(&[0, 0])), &[2], &[5, 5]);
    check(&Tensor::scalar(5i64).scatter_value(0, &Tensor::scalar(0i64), 3), &[], &[3]);
    check(&Tensor::scalar(5i64).index_fill(0, &t1(&[-1]), 2), &[], &[2]);
    check(&Tensor::scalar(3i64).nonzero(), &[1, 0], &[]);
    check(&Tensor::scalar(0i64).nonzero(), &[0, 0], &[]);
    check(&Tensor::scalar(2i64).masked_select(&Tensor::scalar(true)), &[1], &[2]);
    check(&Tensor::scalar(2i64).one_hot(3), &[3], &[0, 0, 1]);
    assert!(Tensor::scalar(5i64).try_gather(0, &t1(&[1])).is_err());

    let empty_idx = t1(&[]);
    check(&x2().index_select(1, &empty_idx), &[3, 0], &[]);
    let z = Tensor::zeros_opts([0, 4], DType::F32, Device::Cpu);
    check(&z.index_select(1, &t1(&[1, 3])), &[0, 2], &[]);
    check(&x2().gather(1, &Tensor::zeros_opts([3, 0], DType::I64, Device::Cpu)), &[3, 0], &[]);
    check(
        &x2().scatter(1, &Tensor::zeros_opts([3, 0], DType::I64, Device::Cpu), &x2()),
        &[3, 4],
        &x2().to_vec::<i64>(),
    );
    check(&x2().index(&[&empty_idx]), &[0, 4], &[]);
    check(&x2().index_put(&[&empty_idx], &Tensor::scalar(1i64), true), &[3, 4], &x2().to_vec::<i64>());
    check(&z.masked_select(&Tensor::scalar(true)), &[0], &[]);
    check(&z.nonzero(), &[0, 2], &[]);
    check(&t1(&[]).one_hot(4), &[0, 4], &[]);
    // a zero-size dim cannot be indexed at all
    assert!(err(z.try_index_select(0, &t1(&[0])))
        .starts_with("index_select: index 0 is out of bounds for dimension 0 with size 0"));
}

#[test]
fn in_place_writes_go_through_views() {
    // scatter_ into a transposed view writes the base tensor (reference from PyTorch)
    let base = Tensor::zeros_opts([4, 3], DType::I64, Device::Cpu);
    let v0 = base.version();
    base.t().scatter_(1, &t2(&[[3, 0], [1, 2], [0, 0]]), &t2(&[[1, 2], [3, 4], [5, 6]]));
    check(&base, &[4, 3], &[2, 0, 6, 0, 3, 0, 0, 4, 0, 1, 0, 0]);
    assert!(base.version() > v0);
    // into a narrowed view
    let base = Tensor::zeros_opts([3, 6], DType::I64, Device::Cpu);
    base.narrow(1, 1, 4).scatter_(1, &t2(&[[3], [0], [2]]), &t2(&[[7], [8], [9]]));
    check(&base, &[3, 6], &[0, 0, 0, 0, 7, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0]);
    // scatter_add_ and scatter_value_ through a transposed view
    let base = Tensor::zeros_opts([3, 2], DType::F32, Device::Cpu);
    base.t().scatter_add_(1, &t2(&[[2, 2], [0, 1]]), &Tensor::new(&[[1.5f32, 2.0], [1.0, 4.0]]));
    base.t().scatter_value_(0, &t2(&[[1, 0, 1]]), -1.0);
    // base.t() = [[0, -1, 3.5], [-1, 4, -1]]
    assert_eq!(base.to_vec::<f32>(), vec![0.0, -1.0, -1.0, 4.0, 3.5, -1.0]);
    // index_fill_ through a transposed view (PyTorch: b.t().index_fill_(1, [2], 1))
    let b = Tensor::zeros([4, 3]);
    b.t().index_fill_(1, &t1(&[2]), 1);
    assert_eq!(b.to_vec::<f32>(), vec![0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]);
    // index_put_ through a transposed view (PyTorch: z.t()[[1], [0, 2]] = [4, 5])
    let z = Tensor::zeros_opts([3, 2], DType::I64, Device::Cpu);
    z.t().index_put_(&[&t1(&[1]), &t1(&[0, 2])], &t1(&[4, 5]), false);
    check(&z, &[3, 2], &[0, 4, 0, 0, 0, 5]);
    // index_put_ into a column (a strided view)
    let m = Tensor::zeros_opts([3, 3], DType::I64, Device::Cpu);
    m.select(1, 1).index_put_(&t1(&[2, 0]), &t1(&[8, 9]), false);
    check(&m, &[3, 3], &[0, 9, 0, 0, 0, 0, 0, 8, 0]);
    // expanded destinations are refused
    let e = err(Tensor::zeros([3]).expand([2, 3]).try_index_put_(&[&t1(&[0])], &Tensor::scalar(1.0f32), false));
    assert!(e.contains("more than one element of the written-to tensor"), "{e}");
}

#[test]
fn sources_and_indices_may_alias_the_destination() {
    // src is the destination itself: read before anything is written
    let x = Tensor::arange(6).view([2, 3]);
    x.narrow(0, 0, 1).scatter_(1, &t2(&[[2, 1, 0]]), &x.narrow(0, 0, 1));
    check(&x, &[2, 3], &[2, 1, 0, 3, 4, 5]);
    // the index is a view of the destination
    let y = t2(&[[0, 1, 2]]);
    y.scatter_(1, &y, &t2(&[[7, 8, 9]]));
    check(&y, &[1, 3], &[7, 8, 9]);
    let y = t1(&[2, 0, 1]);
    y.index_put_(&y.clone(), &t1(&[5, 6, 7]), false);
    check(&y, &[3], &[6, 7, 5]);
    let v = t1(&[1, 2, 3]);
    v.index_put_(&t1(&[2, 1, 0]), &v, false);
    check(&v, &[3], &[3, 2, 1]);
}

#[test]
fn duplicates_are_deterministic() {
    // plain writes: the last position in row-major order wins
    let r = Tensor::zeros_opts([2, 4], DType::I64, Device::Cpu).scatter(
        1,
        &t2(&[[1, 1, 3], [0, 0, 0]]),
        &t2(&[[1, 2, 3], [4, 5, 6]]),
    );
    check(&r, &[2, 4], &[0, 2, 0, 3, 6, 0, 0, 0]);
    let r = t1(&[0, 0, 0]).index_put(&t1(&[1, 1, -2, 0]), &t1(&[1, 2, 3, 4]), false);
    check(&r, &[3], &[4, 3, 0]);
    // float accumulation adds in row-major order: bit-identical to a serial sum, every run
    let n = 120_000;
    let idx = Tensor::from_vec((0..n as i64).map(|i| (i * 7) % 3).collect(), [n]);
    let src = Tensor::from_vec((0..n).map(|i| 0.1f32 + (i % 13) as f32 * 0.37).collect(), [n]);
    let mut serial = [0.0f32; 3];
    for (i, v) in src.to_vec::<f32>().into_iter().enumerate() {
        serial[(i * 7) % 3] += v;
    }
    for _ in 0..3 {
        assert_eq!(Tensor::zeros([3]).scatter_add(0, &idx, &src).to_vec::<f32>(), serial.to_vec());
        assert_eq!(Tensor::zeros([3]).index_put(&idx, &src, true).to_vec::<f32>(), serial.to_vec());
    }
}

#[test]
fn large_inputs_take_the_parallel_paths() {
    let (r, c) = (1000usize, 300usize);
    let x = Tensor::arange((r * c) as i64).view([r as i64, c as i64]).to_dtype(DType::F32);
    let at = |i: usize, j: usize| (i * c + j) as f32;
    // index_select of rows (the copy path) and of columns (the gather path)
    let rows = x.index_select(0, &t1(&[999, 0, 500]));
    assert!(
        rows.to_vec::<f32>() == [999, 0, 500].iter().flat_map(|&i| (0..c).map(move |j| at(i, j))).collect::<Vec<_>>(),
        "index_select of rows"
    );
    let cols_idx: Vec<i64> = (0..200).map(|k| (k * 37 % c) as i64).collect();
    let cols = x.index_select(1, &t1(&cols_idx));
    let want: Vec<f32> = (0..r).flat_map(|i| cols_idx.iter().map(move |&j| at(i, j as usize))).collect();
    assert!(cols.to_vec::<f32>() == want, "index_select of columns");
    assert!(x.t().index_select(0, &t1(&cols_idx)).t().to_vec::<f32>() == want, "index_select of a transposed input");
    // gather with a full-size index, on a transposed input
    let g_idx = Tensor::from_vec((0..r * c).map(|p| ((p / c) * 7 + (p % c) * 3) as i64 % r as i64).collect(), [c, r]);
    let g = x.t().gather(1, &g_idx);
    let gi = g_idx.to_vec::<i64>();
    let want: Vec<f32> = (0..c * r).map(|p| at(gi[p] as usize, p / r)).collect();
    assert!(g.to_vec::<f32>() == want, "gather on a transposed input");
    // scatter_add into many rows in parallel
    let s_idx = Tensor::from_vec((0..400 * 500).map(|p| ((p / 500) * (p % 500) % 10) as i64).collect(), [400, 500]);
    let acc = Tensor::zeros_opts([400, 10], DType::I64, Device::Cpu).scatter_add(
        1,
        &s_idx,
        &Tensor::ones_opts([400, 500], DType::I64, Device::Cpu),
    );
    let mut want = vec![0i64; 4000];
    for i in 0..400 {
        for j in 0..500 {
            want[i * 10 + (i * j) % 10] += 1;
        }
    }
    assert!(acc.to_vec::<i64>() == want, "scatter_add over rows");
    // advanced indexing and index_put_ over a large broadcast result
    let ii = Tensor::from_vec((0..1000).map(|k| (999 - k) as i64).collect(), [1000, 1]);
    let jj = t1(&[0, 299, -1, 5]);
    let sel = x.index(&[&ii, &jj]);
    assert_eq!(sel.shape(), &[1000, 4]);
    assert_eq!(
        sel.to_vec::<f32>()[..8],
        [at(999, 0), at(999, 299), at(999, 299), at(999, 5), at(998, 0), at(998, 299), at(998, 299), at(998, 5)]
    );
    let y = x.deep_clone();
    y.index_put_(&[None, Some(&t1(&[1]))], &Tensor::scalar(-1.0f32), false);
    assert!(y.i((.., 1)).to_vec::<f32>().iter().all(|&v| v == -1.0));
    assert_eq!(y.i((.., 2)).to_vec::<f32>(), x.i((.., 2)).to_vec::<f32>());
    // masked_select and nonzero over 300k elements, through a transposed view
    let mask = x.t().lt(1000.0);
    let picked = x.t().masked_select(&mask).to_vec::<f32>();
    let want: Vec<f32> = (0..c).flat_map(|j| (0..r).map(move |i| at(i, j))).filter(|&v| v < 1000.0).collect();
    assert!(picked == want, "masked_select of a large transposed input");
    let nz = mask.nonzero();
    assert_eq!(nz.shape(), &[1000, 2]);
    assert_eq!(nz.to_vec2::<i64>()[..3], [vec![0, 0], vec![0, 1], vec![0, 2]]);
    // one_hot of 120k labels
    let labels = Tensor::from_vec((0..120_000).map(|k| (k % 10) as i64).collect(), [120_000]);
    let oh = labels.one_hot(10);
    assert_eq!(oh.shape(), &[120_000, 10]);
    let flat = oh.to_vec::<i64>();
    assert!((0..120_000).all(|k| (0..10).all(|c| flat[k * 10 + c] == (c == k % 10) as i64)));
}

#[test]
fn failed_writes_leave_the_destination_untouched() {
    let x = Tensor::arange(6).view([2, 3]);
    let v0 = x.version();
    // the bad value comes last: nothing before it may have been written
    assert!(x.try_scatter_(1, &t2(&[[0, 1, 2], [0, 1, 3]]), &t2(&[[9, 9, 9], [9, 9, 9]])).is_err());
    assert!(x.try_scatter_add_(0, &t2(&[[0, 1, 2]]), &t2(&[[9, 9, 9]])).is_err());
    assert!(x.try_index_put_(&[&t1(&[0, 1]), &t1(&[0, 5])], &Tensor::scalar(9i64), true).is_err());
    assert!(x.try_index_fill_(1, &t1(&[0, -4]), 9).is_err());
    check(&x, &[2, 3], &[0, 1, 2, 3, 4, 5]);
    assert_eq!(x.version(), v0);
}

#[test]
fn error_messages_name_op_value_dim_and_size() {
    let x = x2();
    let cases = [
        (err(x.try_index_select(0, &t1(&[0, 3]))), "index_select: index 3 is out of bounds for dimension 0 with size 3"),
        (err(x.try_index_select(0, &Tensor::new(&[0.0f32]))), "index_select: expected dtype int64 or int32 for index, got float32"),
        (err(x.try_index_select(2, &t1(&[0]))), "index_select: dimension out of range (expected to be in range of [-2, 1], but got 2)"),
        (err(x.try_gather(1, &t2(&[[4]]))), "gather: index 4 is out of bounds for dimension 1 with size 4"),
        (err(x.try_gather(1, &t2(&[[-1]]))), "gather: index -1 is out of bounds for dimension 1 with size 4"),
        (err(x.try_gather(1, &t1(&[0]))), "gather: index tensor must have the same number of dimensions as input tensor (index shape [1], input shape [3, 4])"),
        (err(x.try_scatter(0, &t2(&[[3]]), &x)), "scatter: index 3 is out of bounds for dimension 0 with size 3"),
        (err(x.try_scatter_add(-1, &t2(&[[9]]), &x)), "scatter_add: index 9 is out of bounds for dimension 1 with size 4"),
        (err(x.try_scatter_value(1, &t2(&[[0]]).to_dtype(DType::U8), 1)), "scatter: expected dtype int64 or int32 for index, got uint8"),
        (err(x.try_index(&[None, Some(&t1(&[-5]))])), "index: index -5 is out of bounds for dimension 1 with size 4"),
        (err(x.try_index_put(&[&t1(&[3])], &Tensor::scalar(0i64), false)), "index_put: index 3 is out of bounds for dimension 0 with size 3"),
        (err(x.try_index_fill(1, &t1(&[4]), 0)), "index_fill: index 4 is out of bounds for dimension 1 with size 4"),
        (err(x.try_one_hot(5)), "one_hot: class values must be smaller than num_classes, got 11 (num_classes = 5)"),
    ];
    for (got, want) in cases {
        assert!(got.starts_with(want), "{got}\n  expected to start with: {want}");
        assert!(got.contains("tests/indexing.rs:"), "the caller's line is named: {got}");
    }
    let r = std::panic::catch_unwind(|| x2().gather(0, &t2(&[[7]])));
    assert!(r.is_err());
}

#[test]
fn int32_indices_are_accepted_where_pytorch_accepts_them() {
    // x = torch.arange(6.).reshape(2, 3); i = torch.tensor([[0, 1]], dtype=torch.int32)
    let x = Tensor::arange_step(0.0, 6.0, 1.0).reshape([2, 3]);
    let i = Tensor::new(&[[0i32, 1]]);
    // x.gather(1, i) == [[0., 1.]]
    assert_eq!(x.gather(1, &i).to_vec::<f32>(), vec![0.0, 1.0]);
    // x.index_select(1, torch.tensor([0, 2], dtype=torch.int32)) == [[0., 2.], [3., 5.]]
    assert_eq!(x.index_select(1, &Tensor::new(&[0i32, 2])).to_vec::<f32>(), vec![0.0, 2.0, 3.0, 5.0]);
    // torch.zeros(2, 3).scatter(1, i, 1.0) == [[1., 1., 0.], [0., 0., 0.]]
    assert_eq!(Tensor::zeros([2, 3]).scatter_value(1, &i, 1.0).to_vec::<f32>(), vec![1.0, 1.0, 0.0, 0.0, 0.0, 0.0]);
    let z = Tensor::zeros([2, 3]);
    z.scatter_add_(1, &i, &Tensor::ones([1, 2]));
    assert_eq!(z.to_vec::<f32>(), vec![1.0, 1.0, 0.0, 0.0, 0.0, 0.0]);
    // index_fill_ refuses int32 in PyTorch ("Expected dtype int64 for index"), and so does kiln.
    assert!(x.try_index_fill(1, &Tensor::new(&[0i32]), 1.0).is_err());
    let err = x.try_gather(1, &Tensor::new(&[[0u8]])).unwrap_err().to_string();
    assert!(err.contains("int64 or int32") && err.contains("uint8"), "{err}");
}
