//! Backward rules of the matrix products: `matmul` in every case (1-D·1-D, 2-D·1-D, 1-D·2-D,
//! 2-D·2-D, batched with broadcast batch dims, 1-D against batched), `mm`, `bmm`, `mv`, `dot`,
//! `outer` and `ger`: first and second derivatives against finite differences, node names,
//! saved-tensor version checks, dtypes of gradients, and one case against PyTorch.

use kiln::autograd::{gradcheck, gradgradcheck, GradcheckOpts};
use kiln::{DType, Device, Tensor};

/// An f64 leaf of `shape` with random values that requires grad.
fn leaf(shape: &[usize]) -> Tensor {
    Tensor::randn_opts(shape, DType::F64, Device::Cpu).requires_grad_(true)
}

/// An f64 tensor of `shape` with random values that does not require grad.
fn constant(shape: &[usize]) -> Tensor {
    Tensor::randn_opts(shape, DType::F64, Device::Cpu)
}

/// Every `matmul` case: (lhs shape, rhs shape).
const MATMUL_CASES: &[(&[usize], &[usize])] = &[
    (&[3], &[3]),
    (&[2, 3], &[3]),
    (&[3], &[3, 4]),
    (&[2, 3], &[3, 4]),
    (&[2, 2, 3], &[3]),
    (&[3], &[2, 3, 4]),
    (&[2, 2, 3], &[2, 3, 4]),
    (&[2, 2, 3], &[3, 4]),
    (&[2, 3], &[2, 3, 4]),
    (&[2, 1, 2, 3], &[3, 3, 2]),
    (&[1, 2, 3], &[2, 3, 2]),
    (&[2, 3, 2, 3], &[3, 4]),
];

#[test]
fn matmul_gradcheck_every_case() {
    for &(sa, sb) in MATMUL_CASES {
        let (a, b) = (leaf(sa), leaf(sb));
        gradcheck(|xs| xs[0].matmul(&xs[1]), &[a, b], GradcheckOpts::default())
            .unwrap_or_else(|e| panic!("{sa:?} @ {sb:?}: {e}"));
    }
}

#[test]
fn matmul_gradcheck_with_one_operand_requiring_grad() {
    for &(sa, sb) in MATMUL_CASES {
        gradcheck(|xs| xs[0].matmul(&xs[1]), &[leaf(sa), constant(sb)], GradcheckOpts::default())
            .unwrap_or_else(|e| panic!("{sa:?} @ const {sb:?}: {e}"));
        gradcheck(|xs| xs[0].matmul(&xs[1]), &[constant(sa), leaf(sb)], GradcheckOpts::default())
            .unwrap_or_else(|e| panic!("const {sa:?} @ {sb:?}: {e}"));
    }
}

#[test]
fn matmul_gradgradcheck_every_case() {
    for &(sa, sb) in MATMUL_CASES {
        let (a, b) = (leaf(sa), leaf(sb));
        gradgradcheck(|xs| xs[0].matmul(&xs[1]), &[a, b], GradcheckOpts::default())
            .unwrap_or_else(|e| panic!("{sa:?} @ {sb:?}: {e}"));
    }
}

#[test]
fn non_contiguous_operands() {
    // A transposed leaf (its rule sees strided saved tensors) and a transposed constant.
    let a = constant(&[3, 2]).t().requires_grad_(true);
    assert!(!a.is_contiguous());
    let bt = constant(&[4, 3]).t();
    gradcheck(|xs| xs[0].matmul(&xs[1]), &[a.clone(), bt.clone()], GradcheckOpts::default()).unwrap();
    gradcheck(|xs| xs[0].mm(&xs[1]), &[leaf(&[2, 3]), bt.clone()], GradcheckOpts::default()).unwrap();
    // An expanded (stride-0) batch on the constant side.
    let e = constant(&[3, 4]).unsqueeze(0).expand([2, 3, 4]);
    gradcheck(|xs| xs[0].matmul(&xs[1]), &[leaf(&[2, 2, 3]), e], GradcheckOpts::default()).unwrap();
    gradgradcheck(|xs| xs[0].matmul(&xs[1]), &[a, leaf(&[3, 4])], GradcheckOpts::default()).unwrap();
}

/// An operand stored transposed (`linear`'s `x · wᵀ`, or `wᵀ · y`) gets its gradient in its own
/// layout, as PyTorch's mm backward: `w.grad` comes out contiguous, so accumulating it copies
/// nothing; the values still pass gradcheck, batched and with broadcast batch dims.
#[test]
fn transposed_operands_get_gradients_in_their_layout() {
    let (x, w, g) = (leaf(&[4, 3]), leaf(&[5, 3]), constant(&[4, 5]));
    x.matmul(&w.t()).backward_with(&g);
    let gw = w.grad().unwrap();
    assert!(gw.is_contiguous(), "w.grad strides {:?}", gw.stride());
    assert!(gw.allclose(&g.t().matmul(&x.detach()), 1e-12, 1e-12));
    // `linear` on a batch of sequences: one folded product, still in `w`'s layout.
    let (x3, w3, g3) = (leaf(&[2, 4, 3]), leaf(&[5, 3]), constant(&[2, 4, 5]));
    x3.matmul(&w3.t()).backward_with(&g3);
    let gw3 = w3.grad().unwrap();
    assert!(gw3.is_contiguous(), "w.grad strides {:?}", gw3.stride());
    let per_entry = g3.transpose(-1, -2).matmul(&x3.detach()).sum_dim(0);
    assert!(gw3.allclose(&per_entry, 1e-12, 1e-12));
    let (w2, y) = (leaf(&[5, 3]), constant(&[5, 2]));
    w2.t().matmul(&y).sum().backward();
    assert!(w2.grad().unwrap().is_contiguous());
    type Op = fn(&[Tensor]) -> Tensor;
    let cases: &[(Op, &[usize], &[usize])] = &[
        (|xs| xs[0].matmul(&xs[1].t()), &[4, 3], &[5, 3]),
        (|xs| xs[1].t().matmul(&xs[0]), &[5, 2], &[5, 3]),
        (|xs| xs[0].matmul(&xs[1].transpose(-1, -2)), &[2, 4, 3], &[2, 5, 3]),
        (|xs| xs[1].transpose(-1, -2).matmul(&xs[0]), &[2, 4, 2], &[2, 4, 3]),
        (|xs| xs[0].matmul(&xs[1].t()), &[2, 4, 3], &[5, 3]),
        // A batch whose rows are not one run (the product folds them through a copy).
        (|xs| xs[0].transpose(0, 1).matmul(&xs[1].t()), &[4, 2, 3], &[5, 3]),
    ];
    for &(f, sa, sb) in cases {
        gradcheck(f, &[leaf(sa), leaf(sb)], GradcheckOpts::default()).unwrap_or_else(|e| panic!("{sa:?}, {sb:?}: {e}"));
        gradgradcheck(f, &[leaf(sa), leaf(sb)], GradcheckOpts::default())
            .unwrap_or_else(|e| panic!("{sa:?}, {sb:?}: {e}"));
    }
}

#[test]
fn strict_products_gradcheck_and_gradgradcheck() {
    type Op = fn(&Tensor, &Tensor) -> Tensor;
    let cases: &[(&str, Op, &[usize], &[usize])] = &[
        ("mm", |a, b| a.mm(b), &[2, 3], &[3, 4]),
        ("bmm", |a, b| a.bmm(b), &[2, 2, 3], &[2, 3, 4]),
        ("mv", |a, b| a.mv(b), &[2, 3], &[3]),
        ("dot", |a, b| a.dot(b), &[3], &[3]),
        ("outer", |a, b| a.outer(b), &[3], &[4]),
        ("ger", |a, b| a.ger(b), &[2], &[3]),
    ];
    for &(name, op, sa, sb) in cases {
        let f = |xs: &[Tensor]| op(&xs[0], &xs[1]);
        gradcheck(f, &[leaf(sa), leaf(sb)], GradcheckOpts::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        gradcheck(f, &[constant(sa), leaf(sb)], GradcheckOpts::default())
            .unwrap_or_else(|e| panic!("{name} (rhs only): {e}"));
        gradcheck(f, &[leaf(sa), constant(sb)], GradcheckOpts::default())
            .unwrap_or_else(|e| panic!("{name} (lhs only): {e}"));
        gradgradcheck(f, &[leaf(sa), leaf(sb)], GradcheckOpts::default())
            .unwrap_or_else(|e| panic!("{name} second order: {e}"));
    }
}

#[test]
fn outer_with_promoted_operands() {
    // An integer lhs (no grad) with an f64 rhs: the rule casts the saved lhs to f64.
    let ints = Tensor::from_vec(vec![1i64, -2, 3], [3]);
    gradcheck(|xs| xs[0].outer(&xs[1]), &[ints, leaf(&[2])], GradcheckOpts::default()).unwrap();
    // f32 ⊗ f64 is f64; each gradient comes back in its input's dtype.
    let a = Tensor::new(&[1.0f32, 2.0]).requires_grad_(true);
    let b = Tensor::new(&[3.0f64, 4.0, 5.0]).requires_grad_(true);
    let y = a.outer(&b);
    assert_eq!(y.dtype(), DType::F64);
    y.backward_with(&Tensor::ones_opts([2, 3], DType::F64, Device::Cpu));
    let (ga, gb) = (a.grad().unwrap(), b.grad().unwrap());
    assert_eq!(ga.dtype(), DType::F32);
    assert_eq!(ga.to_vec::<f32>(), vec![12.0, 12.0]); // Σ_j b[j]
    assert_eq!(gb.dtype(), DType::F64);
    assert_eq!(gb.to_vec::<f64>(), vec![3.0, 3.0, 3.0]); // Σ_i a[i]
}

#[test]
fn node_names_follow_pytorch() {
    let name = |t: Tensor| t.grad_fn().expect("records a node").name().to_string();
    let (v, w) = (leaf(&[3]), leaf(&[3]));
    let (m, n) = (leaf(&[2, 3]), leaf(&[3, 4]));
    let (p, q) = (leaf(&[2, 2, 3]), leaf(&[2, 3, 4]));
    assert_eq!(name(v.matmul(&w)), "DotBackward0");
    assert_eq!(name(m.matmul(&v)), "MvBackward0");
    assert_eq!(name(m.matmul(&n)), "MmBackward0");
    assert_eq!(name(v.matmul(&n)), "MatmulBackward0");
    assert_eq!(name(p.matmul(&q)), "MatmulBackward0");
    assert_eq!(name(p.matmul(&n)), "MatmulBackward0");
    assert_eq!(name(m.mm(&n)), "MmBackward0");
    assert_eq!(name(p.bmm(&q)), "BmmBackward0");
    assert_eq!(name(m.mv(&v)), "MvBackward0");
    assert_eq!(name(v.dot(&w)), "DotBackward0");
    assert_eq!(name(v.outer(&w)), "MulBackward0");
    assert_eq!(name(v.ger(&w)), "MulBackward0");
    // The edges point at the leaves' accumulators, one per operand, in call order.
    let node = m.mm(&n).grad_fn().unwrap();
    let next: Vec<_> = node.next_functions().into_iter().map(|f| f.unwrap().variable().unwrap()).collect();
    assert!(next[0].shape() == [2, 3] && next[1].shape() == [3, 4]);
    let c = constant(&[3, 4]);
    let only_lhs = m.mm(&c).grad_fn().unwrap().next_functions();
    assert!(only_lhs[0].is_some() && only_lhs[1].is_none());
}

#[test]
fn nothing_records_without_grad() {
    let (a, b) = (leaf(&[2, 3]), leaf(&[3, 4]));
    {
        let _off = kiln::no_grad_guard();
        for y in [
            a.matmul(&b),
            a.mm(&b),
            a.mv(&b.select(1, 0)),
            b.select(1, 0).dot(&b.select(1, 1)),
            b.select(1, 0).outer(&b.select(0, 0)),
        ] {
            assert!(!y.requires_grad() && y.grad_fn().is_none());
        }
    }
    // Integer products never record (integer tensors cannot require grad), and products of
    // tensors that don't require grad don't either.
    let i = Tensor::from_vec(vec![1i64, 2, 3, 4], [2, 2]);
    assert!(!i.matmul(&i).requires_grad());
    assert!(Tensor::from_vec(vec![1u8, 0], [2]).outer(&Tensor::from_vec(vec![true, false], [2])).grad_fn().is_none());
    assert!(!constant(&[2, 3]).matmul(&constant(&[3])).requires_grad());
}

#[test]
fn in_place_write_to_a_saved_operand_fails_backward() {
    // x @ w with only w requiring grad saves x: writing into x breaks the backward.
    let x = constant(&[2, 3]);
    let w = leaf(&[3, 4]);
    let y = x.mm(&w);
    x.fill_(1.0);
    let err = y
        .try_backward_with_opts(Some(&Tensor::ones_opts([2, 4], DType::F64, Device::Cpu)), Default::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("modified by an inplace operation") && err.contains("MmBackward0"), "{err}");
    // With only x requiring grad, the backward reads w alone, so writing into x (under no_grad)
    // is allowed, as in PyTorch.
    let x = leaf(&[2, 3]);
    let w = constant(&[3, 4]);
    let y = x.mm(&w);
    {
        let _off = kiln::no_grad_guard();
        x.fill_(1.0);
    }
    y.backward_with(&Tensor::ones_opts([2, 4], DType::F64, Device::Cpu));
    let want: Vec<f64> = (0..3).map(|k| (0..4).map(|j| w.to_vec2::<f64>()[k][j]).sum()).collect();
    for row in x.grad().unwrap().to_vec2::<f64>() {
        for (g, e) in row.iter().zip(&want) {
            assert!((g - e).abs() < 1e-12);
        }
    }
}

#[test]
fn batched_broadcast_f32_grads_match_pytorch() {
    // a = (torch.arange(12.) / 4 - 1).reshape(2, 1, 2, 3).requires_grad_()
    // b = (torch.arange(18.) / 8 - 1).reshape(3, 3, 2).requires_grad_()
    // y = a.matmul(b)                                   # [2, 3, 2, 2]
    // y.backward((torch.arange(24.) / 10 - 1).reshape(y.shape))
    // print(a.grad.flatten().tolist(), b.grad.flatten().tolist())
    let a_grad = [
        1.837_499_9_f32,
        1.012_5,
        0.187_499_97,
        1.612_5,
        1.087_5,
        0.562_500_06,
        0.487_499_95,
        1.462_499_9,
        2.4375,
        0.262_500_05,
        1.537_499_9,
        2.8125,
    ];
    let b_grad = [
        1.800_000_1_f32,
        1.849_999_9,
        1.5,
        1.649_999_9,
        1.2,
        1.449_999_9,
        2.0,
        2.05,
        2.1,
        2.25,
        2.199_999_8,
        2.45,
        2.2,
        2.25,
        2.700_000_3,
        2.85,
        3.2,
        3.449_999_8,
    ];
    let seq = |n: usize, scale: f32, shape: &[usize]| {
        Tensor::from_vec((0..n).map(|i| i as f32 / scale - 1.0).collect(), shape)
    };
    let a = seq(12, 4.0, &[2, 1, 2, 3]).requires_grad_(true);
    let b = seq(18, 8.0, &[3, 3, 2]).requires_grad_(true);
    let y = a.matmul(&b);
    assert_eq!(y.shape(), &[2, 3, 2, 2]);
    y.backward_with(&seq(24, 10.0, &[2, 3, 2, 2]));
    let close = |got: Vec<f32>, want: &[f32]| {
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "{got:?} vs {want:?}");
        }
    };
    let (ga, gb) = (a.grad().unwrap(), b.grad().unwrap());
    assert_eq!((ga.shape(), gb.shape()), (&[2usize, 1, 2, 3][..], &[3usize, 3, 2][..]));
    assert_eq!(ga.dtype(), DType::F32);
    close(ga.to_vec::<f32>(), &a_grad);
    close(gb.to_vec::<f32>(), &b_grad);
}
