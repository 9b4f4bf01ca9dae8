//! matmul, mm, bmm, mv, dot, outer against a naive f64 product computed here, on contiguous,
//! transposed, sliced, expanded, zero-size and batch-broadcast operands of every dtype.

use kiln::{DType, Device, Tensor};

const DTYPES: [DType; 7] = [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::I32, DType::U8];

/// Deterministic small integers in [-11, 11] (in [0, 3] for U8, so sums of short rows stay
/// small), as a contiguous tensor of `dtype`; floats are scaled by 1/8 (exact in every dtype).
fn data(shape: &[usize], dtype: DType, seed: usize) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|i| {
            let x = ((i * 37 + seed * 11 + 5) % 23) as f64 - 11.0;
            match dtype {
                DType::U8 => x.rem_euclid(4.0),
                d if d.is_float() => x / 8.0,
                _ => x,
            }
        })
        .collect();
    Tensor::from_vec(v, shape).to_dtype(dtype)
}

/// `torch.matmul` done naively in f64: the shape and the row-major values.
fn reference(a: &Tensor, b: &Tensor) -> (Vec<usize>, Vec<f64>) {
    let av = a.to_dtype(DType::F64).to_vec::<f64>();
    let bv = b.to_dtype(DType::F64).to_vec::<f64>();
    let mut sa = a.shape().to_vec();
    let mut sb = b.shape().to_vec();
    if sa.len() == 1 {
        sa.insert(0, 1);
    }
    if sb.len() == 1 {
        sb.push(1);
    }
    let (m, k, n) = (sa[sa.len() - 2], sa[sa.len() - 1], sb[sb.len() - 1]);
    assert_eq!(k, sb[sb.len() - 2]);
    let nd = sa.len().max(sb.len());
    let pad = |s: &[usize]| -> Vec<usize> {
        std::iter::repeat_n(1, nd - s.len()).chain(s[..s.len() - 2].iter().copied()).collect()
    };
    let (ba, bb) = (pad(&sa), pad(&sb));
    let batch: Vec<usize> = ba.iter().zip(&bb).map(|(&x, &y)| x.max(y)).collect();
    let mut out = vec![];
    for bi in 0..batch.iter().product::<usize>() {
        // Unravel over the batch and find each operand's (broadcast) matrix number.
        let (mut rest, mut ia, mut ib, mut stride_a, mut stride_b) = (bi, 0, 0, 1, 1);
        for d in (0..batch.len()).rev() {
            let i = rest % batch[d];
            rest /= batch[d];
            ia += if ba[d] == 1 { 0 } else { i * stride_a };
            ib += if bb[d] == 1 { 0 } else { i * stride_b };
            stride_a *= ba[d];
            stride_b *= bb[d];
        }
        for i in 0..m {
            for j in 0..n {
                out.push((0..k).map(|p| av[ia * m * k + i * k + p] * bv[ib * k * n + p * n + j]).sum());
            }
        }
    }
    let mut shape = batch;
    if a.dim() > 1 {
        shape.push(m);
    }
    if b.dim() > 1 {
        shape.push(n);
    }
    (shape, out)
}

/// Checks `got` against the reference: exact for integers (after wrapping to the dtype), within
/// the dtype's rounding for floats.
#[track_caller]
fn check(got: &Tensor, a: &Tensor, b: &Tensor) {
    let (shape, want) = reference(a, b);
    assert_eq!(got.shape(), &shape[..], "shape of {:?} @ {:?}", a.shape(), b.shape());
    assert_eq!(got.dtype(), a.dtype());
    let got = got.to_dtype(DType::F64).to_vec::<f64>();
    let dtype = a.dtype();
    if !dtype.is_float() {
        let wrapped = Tensor::from_vec(want, [got.len()]).to_dtype(dtype).to_dtype(DType::F64).to_vec::<f64>();
        assert_eq!(got, wrapped, "{dtype} {:?} @ {:?}", a.shape(), b.shape());
        return;
    }
    let tol = match dtype {
        DType::F64 => 1e-12,
        DType::F32 => 1e-5,
        DType::F16 => 1e-3,
        _ => 8e-3,
    };
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{dtype} {:?} @ {:?}: element {i} is {g}, expected {w}",
            a.shape(),
            b.shape()
        );
    }
}

#[test]
fn hand_computed_values() {
    // torch.tensor([[1., 2.], [3., 4.]]) @ torch.tensor([[5., 6.], [7., 8.]])
    let a = Tensor::new(&[[1.0f32, 2.0], [3.0, 4.0]]);
    let b = Tensor::new(&[[5.0f32, 6.0], [7.0, 8.0]]);
    assert_eq!(a.matmul(&b).to_vec2::<f32>(), vec![vec![19.0, 22.0], vec![43.0, 50.0]]);
    assert_eq!(a.mm(&b.t()).to_vec2::<f32>(), vec![vec![17.0, 23.0], vec![39.0, 53.0]]);
    let v = Tensor::new(&[1i64, 2, 3]);
    let d = v.dot(&Tensor::new(&[4i64, 5, 6]));
    assert_eq!((d.dim(), d.item::<i64>()), (0, 32));
    assert_eq!(a.mv(&Tensor::new(&[1.0f32, -1.0])).to_vec::<f32>(), vec![-1.0, -1.0]);
}

#[test]
fn every_shape_rule_and_dtype() {
    let cases: &[(&[usize], &[usize])] = &[
        (&[7], &[7]),
        (&[3, 5], &[5]),
        (&[5], &[5, 4]),
        (&[3, 5], &[5, 4]),
        (&[2, 3, 5], &[5]),
        (&[5], &[2, 5, 4]),
        (&[2, 3, 5], &[5, 4]),
        (&[3, 5], &[2, 5, 4]),
        (&[2, 3, 5], &[2, 5, 4]),
        (&[2, 1, 3, 4], &[5, 4, 2]),
        (&[1, 2, 3, 4], &[3, 1, 4, 2]),
    ];
    for dtype in DTYPES {
        for (i, &(sa, sb)) in cases.iter().enumerate() {
            let (a, b) = (data(sa, dtype, i), data(sb, dtype, i + 100));
            check(&a.matmul(&b), &a, &b);
        }
    }
    let (a, b) = (data(&[2, 1, 3, 4], DType::F32, 0), data(&[5, 4, 2], DType::F32, 1));
    assert_eq!(a.matmul(&b).shape(), &[2, 5, 3, 2]);
}

#[test]
fn views_are_read_in_place() {
    for dtype in DTYPES {
        let a = data(&[6, 8], dtype, 1);
        let b = data(&[5, 7], dtype, 2);
        // Transposed operands (column-major matrices).
        let at = data(&[5, 3], dtype, 3).t();
        check(&at.matmul(&b), &at, &b);
        check(&b.t().matmul(&at.t()), &b.t(), &at.t());
        // Sliced: a row stride larger than the row, an offset.
        let s = a.narrow(1, 2, 5).narrow(0, 1, 4);
        check(&s.matmul(&b), &s, &b);
        check(&b.t().matmul(&s.t()), &b.t(), &s.t());
        // No unit stride at all: every 4th element of a [5, 3, 4] block (copied first).
        let x = data(&[5, 3, 4], dtype, 4).select(2, 1);
        check(&b.t().matmul(&x), &b.t(), &x);
        // Expanded operands: a repeated row, a matrix of one repeated value, a broadcast batch.
        let row = data(&[1, 7], dtype, 5).expand([5, 7]);
        check(&a.narrow(1, 0, 5).matmul(&row), &a.narrow(1, 0, 5), &row);
        let same = data(&[1, 1], dtype, 6).expand([3, 5]);
        check(&same.matmul(&b), &same, &b);
        let batch = data(&[5, 7], dtype, 7).expand([4, 5, 7]);
        let lhs = data(&[4, 2, 5], dtype, 8);
        check(&lhs.matmul(&batch), &lhs, &batch);
        // A batch of transposed matrices, and a permuted batch.
        let bt = data(&[3, 7, 5], dtype, 9).transpose(1, 2);
        let lt = data(&[2, 3, 5], dtype, 10).permute(&[1, 0, 2]);
        check(&lt.matmul(&bt), &lt, &bt);
        // A strided vector.
        let v = data(&[5, 2], dtype, 11).select(1, 1);
        check(&b.t().matmul(&v), &b.t(), &v);
        check(&v.matmul(&b), &v, &b);
    }
}

#[test]
fn zero_size_dims() {
    for dtype in DTYPES {
        let z = |shape: &[usize]| data(shape, dtype, 0);
        // k = 0: zeros, not garbage.
        let out = z(&[2, 0]).matmul(&z(&[0, 4]));
        assert_eq!(out.shape(), &[2, 4]);
        assert!(out.to_dtype(DType::F64).to_vec::<f64>().iter().all(|&v| v == 0.0));
        let out = z(&[3, 2, 0]).matmul(&z(&[0, 4]));
        assert_eq!(out.shape(), &[3, 2, 4]);
        assert!(out.to_dtype(DType::F64).to_vec::<f64>().iter().all(|&v| v == 0.0));
        let d = z(&[0]).dot(&z(&[0]));
        assert_eq!((d.dim(), d.item::<f64>()), (0, 0.0));
        assert_eq!(z(&[0, 3]).matmul(&z(&[3, 4])).shape(), &[0, 4]);
        assert_eq!(z(&[3, 4]).matmul(&z(&[4, 0])).shape(), &[3, 0]);
        assert_eq!(z(&[0, 2, 3]).matmul(&z(&[3, 4])).shape(), &[0, 2, 4]);
        assert_eq!(z(&[2, 3]).matmul(&z(&[0, 3, 4])).shape(), &[0, 2, 4]);
    }
}

#[test]
fn large_products_take_the_parallel_paths() {
    for (dtype, n) in [(DType::F32, 300), (DType::F64, 130), (DType::I64, 130), (DType::BF16, 130)] {
        let a = data(&[n, n], dtype, 1);
        let b = data(&[n, n], dtype, 2);
        check(&a.matmul(&b), &a, &b);
        check(&a.t().matmul(&b), &a.t(), &b);
    }
    // Many small products: split over the batch.
    let a = data(&[64, 20, 24], DType::F32, 3);
    let b = data(&[64, 24, 20], DType::F32, 4).transpose(1, 2).contiguous().transpose(1, 2);
    check(&a.bmm(&b), &a, &b);
    let (ai, bi) = (a.to_dtype(DType::I32), b.to_dtype(DType::I32));
    check(&ai.bmm(&bi), &ai, &bi);
}

#[test]
fn integers_wrap() {
    // uint8: 200 * 1 + 200 * 1 = 400 = 144 (mod 256), as torch gives.
    let a = Tensor::from_vec(vec![1u8; 4], [2, 2]);
    let b = Tensor::from_vec(vec![200u8; 4], [2, 2]);
    assert_eq!(a.matmul(&b).to_vec::<u8>(), vec![144; 4]);
    let big = Tensor::new(&[i64::MAX, 1]);
    assert_eq!(big.dot(&Tensor::new(&[2i64, 1])).item::<i64>(), i64::MAX.wrapping_mul(2).wrapping_add(1));
}

#[test]
fn strict_forms() {
    let a = data(&[2, 3, 4], DType::F64, 1);
    let b = data(&[2, 4, 5], DType::F64, 2);
    check(&a.bmm(&b), &a, &b);
    let m = data(&[3, 4], DType::F64, 3);
    check(&m.mm(&b.select(0, 1)), &m, &b.select(0, 1));
    let v = data(&[4], DType::F64, 4);
    check(&m.mv(&v), &m, &v);
    check(&v.dot(&v), &v, &v);
    // outer multiplies with mul's promotion, so bool and mixed dtypes work as in PyTorch.
    let o = Tensor::new(&[1i64, 2]).outer(&Tensor::new(&[1.5f32, 2.0]));
    assert_eq!(o.dtype(), DType::F32);
    assert_eq!(o.to_vec2::<f32>(), vec![vec![1.5, 2.0], vec![3.0, 4.0]]);
    let o = Tensor::new(&[true, false]).ger(&Tensor::new(&[true, true]));
    assert_eq!(o.to_vec2::<bool>(), vec![vec![true, true], vec![false, false]]);
    let x = data(&[3], DType::F32, 5).outer(&data(&[4], DType::F32, 6).narrow(0, 1, 2));
    assert_eq!(x.shape(), &[3, 2]);
}

#[test]
fn errors_name_the_op_shapes_and_caller() {
    let e = |r: kiln::Result<Tensor>| r.unwrap_err().to_string();
    let a = Tensor::zeros([2, 3]);
    let msg = e(a.try_matmul(&Tensor::zeros([4, 5])));
    assert!(
        msg.starts_with("matmul: shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4) (at tests/matmul.rs:"),
        "{msg}"
    );
    let msg = e(Tensor::scalar(1.0f32).try_matmul(&Tensor::zeros([2])));
    assert!(msg.starts_with("matmul: both arguments need to be at least 1-D, but got shapes [] and [2]"), "{msg}");
    let msg = e(Tensor::zeros([2, 3, 4]).try_matmul(&Tensor::zeros([3, 4, 2])));
    assert!(msg.contains("batch dimensions [2] and [3] cannot broadcast"), "{msg}");
    let msg = e(a.try_matmul(&Tensor::zeros_opts([3, 2], DType::F64, Device::Cpu)));
    assert!(
        msg.starts_with("matmul: expected both operands to have the same dtype, but got float32 and float64"),
        "{msg}"
    );
    let bools = Tensor::zeros_opts([2, 2], DType::Bool, Device::Cpu);
    assert!(e(bools.try_matmul(&bools)).starts_with("matmul: not implemented for dtype bool"));
    assert!(
        e(a.try_mm(&Tensor::zeros([3]))).starts_with("mm: expected 2-D and 2-D tensors, but got shapes [2, 3] and [3]")
    );
    assert!(
        e(Tensor::zeros([2, 3, 4]).try_bmm(&Tensor::zeros([3, 4, 2]))).starts_with("bmm: expected the same batch size")
    );
    assert!(e(Tensor::zeros([3]).try_dot(&Tensor::zeros([4])))
        .starts_with("dot: shapes [3] and [4] cannot be multiplied (3 != 4)"));
    assert!(e(a.try_mv(&Tensor::zeros([2]))).starts_with("mv: shapes [2, 3] and [2] cannot be multiplied (3 != 2)"));
    assert!(e(a.try_outer(&Tensor::zeros([2]))).starts_with("outer: expected 1-D and 1-D tensors"));
    let r = std::panic::catch_unwind(|| a.matmul(&Tensor::zeros([4, 5])));
    let p = r.unwrap_err();
    let text = p.downcast_ref::<String>().unwrap();
    assert!(
        text.starts_with("matmul: shapes [2, 3] and [4, 5] cannot be multiplied") && text.contains("tests/matmul.rs:"),
        "{text}"
    );
}
