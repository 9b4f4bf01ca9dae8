//! Finite-difference gradient checks (f64) for every differentiable elementwise op and every
//! view, first and second order, plus grad_fn names.

use kiln::autograd::{gradcheck, gradgradcheck, GradcheckOpts};
use kiln::ops::{COMPOSITE_UNARY, UNARY_METHODS};
use kiln::{DType, Tensor};
use kiln_runtime::op_kind::UnarySaves;

/// A random f64 leaf of `shape` with values in `lo..hi`.
fn leaf(shape: &[usize], lo: f64, hi: f64) -> Tensor {
    (Tensor::rand(shape).to_dtype(DType::F64) * (hi - lo) + lo).requires_grad_(true)
}

fn check(name: &str, f: impl Fn(&[Tensor]) -> Tensor + Copy, inputs: &[Tensor], second_order: bool) {
    let opts = GradcheckOpts::default();
    gradcheck(f, inputs, opts).unwrap_or_else(|e| panic!("{name}: {e}"));
    if second_order {
        gradgradcheck(f, inputs, opts).unwrap_or_else(|e| panic!("{name} (second order): {e}"));
    }
}

/// Where an op's gradient is checked: inside its domain and away from its kinks.
fn domain(op: &str) -> (f64, f64) {
    match op {
        "log" | "log2" | "sqrt" | "rsqrt" => (0.2, 3.0),
        "log1p" => (-0.5, 3.0),
        "tan" => (-1.0, 1.0),
        "asin" | "acos" | "atanh" => (-0.9, 0.9),
        "acosh" => (1.2, 3.0),
        "reciprocal" => (0.3, 2.0),
        "abs" => (0.1, 2.0),
        _ => (-3.0, 3.0),
    }
}

/// Every unary op of the unary table (first and second order, except for the piecewise
/// constant ones) and every composite op, both iterated from their tables.
#[test]
fn unary_ops() {
    kiln::manual_seed(1);
    for &(op, f, _) in UNARY_METHODS {
        let piecewise_constant = op.saves() == UnarySaves::Nothing && op.name() != "neg";
        let (lo, hi) = domain(op.name());
        check(op.name(), move |xs: &[Tensor]| f(&xs[0]), &[leaf(&[2, 3], lo, hi)], !piecewise_constant);
    }
    for &(name, f) in COMPOSITE_UNARY.iter().filter(|(_, f)| f(&Tensor::new(&[0.5f64])).dtype() != DType::Bool) {
        let (lo, hi) = domain(name);
        check(name, move |xs: &[Tensor]| f(&xs[0]), &[leaf(&[2, 3], lo, hi)], true);
    }
}

#[test]
fn unary_special_regions_and_scalar_forms() {
    kiln::manual_seed(3);
    type Op = fn(&Tensor) -> Tensor;
    // (name, op, domain, second order checked)
    let cases: &[(&str, Op, (f64, f64), bool)] = &[
        ("abs-negative", |x| x.abs(), (-2.0, -0.1), true),
        ("softplus-linear-region", |x| x.softplus(1.0, 20.0), (21.0, 25.0), false),
        ("pow 2.5", |x| x.pow(2.5), (0.2, 2.0), true),
        ("pow 3", |x| x.pow(3.0), (-2.0, 2.0), true),
        ("pow -1", |x| x.pow(-1.0), (0.3, 2.0), true),
        ("pow 0.5", |x| x.pow(0.5), (0.3, 2.0), true),
        ("clamp", |x| x.clamp(-0.5, 0.5), (-1.0, 1.0), true),
        ("clamp_min", |x| x.clamp_min(-0.2), (-1.0, 1.0), true),
        ("clamp_max", |x| x.clamp_max(0.3), (-1.0, 1.0), true),
        ("clamp in place", |x| (x * 1.0).clamp_(-0.5, 0.5).clone(), (-1.0, 1.0), true),
        ("clamp_min in place", |x| (x * 1.0).clamp_min_(0.1).clone(), (-1.0, 1.0), true),
        ("scalar-lhs div", |x| 2.0 / x, (0.3, 2.0), true),
        ("scalar-lhs sub", |x| 1.0 - x, (-1.0, 1.0), true),
    ];
    for &(name, op, (lo, hi), second) in cases {
        let x = leaf(&[2, 3], lo, hi);
        check(name, move |xs: &[Tensor]| op(&xs[0]), &[x], second);
    }
}

#[test]
fn binary_ops_with_broadcasting() {
    kiln::manual_seed(2);
    type Op = fn(&Tensor, &Tensor) -> Tensor;
    let cases: &[(&str, Op, (f64, f64), (f64, f64))] = &[
        ("add", |a, b| a + b, (-2.0, 2.0), (-2.0, 2.0)),
        ("sub", |a, b| a - b, (-2.0, 2.0), (-2.0, 2.0)),
        ("mul", |a, b| a * b, (-2.0, 2.0), (-2.0, 2.0)),
        ("div", |a, b| a / b, (-2.0, 2.0), (0.5, 2.0)),
        ("remainder", |a, b| a.remainder(b), (0.1, 0.9), (1.3, 1.9)),
        ("pow", |a, b| a.pow(b), (0.3, 2.0), (-1.5, 1.5)),
        ("maximum", |a, b| a.maximum(b), (-2.0, 2.0), (-2.0, 2.0)),
        ("minimum", |a, b| a.minimum(b), (-2.0, 2.0), (-2.0, 2.0)),
        ("atan2", |a, b| a.atan2(b), (-2.0, 2.0), (0.3, 2.0)),
    ];
    for &(name, op, da, db) in cases {
        for (sa, sb) in [(&[2usize, 3][..], &[2usize, 3][..]), (&[2, 1], &[3]), (&[3], &[2, 3]), (&[], &[2, 2])] {
            let a = leaf(sa, da.0, da.1);
            let b = leaf(sb, db.0, db.1);
            let second = !matches!(name, "remainder" | "maximum" | "minimum");
            check(&format!("{name} {sa:?} {sb:?}"), move |xs: &[Tensor]| op(&xs[0], &xs[1]), &[a, b], second);
        }
    }
}

#[test]
fn ties_split_the_gradient_like_pytorch() {
    // torch.maximum(a, b).sum().backward() with a == b gives 0.5 to each
    let a = Tensor::new(&[1.0f64, 2.0, 3.0]).requires_grad_(true);
    let b = Tensor::new(&[1.0f64, 1.0, 4.0]).requires_grad_(true);
    a.maximum(&b).sum().backward();
    assert_eq!(a.grad().unwrap().to_vec::<f64>(), vec![0.5, 1.0, 0.0]);
    assert_eq!(b.grad().unwrap().to_vec::<f64>(), vec![0.5, 0.0, 1.0]);
    // x.pow(0) has zero gradient, and 0^e's gradient wrt e is 0 for e >= 0 (PyTorch's convention)
    let x = Tensor::new(&[0.0f64, 2.0]).requires_grad_(true);
    let e = Tensor::new(&[2.0f64, 0.0]).requires_grad_(true);
    x.pow(&e).sum().backward();
    assert_eq!(x.grad().unwrap().to_vec::<f64>(), vec![0.0, 0.0]);
    assert_eq!(e.grad().unwrap().to_vec::<f64>(), vec![0.0, 2f64.ln()]);
}

/// PyTorch 2.15's clamp gradient (checked against a torch run): 1 strictly inside the bounds,
/// 0 at a bound, outside, at NaN, and everywhere when `min > max` or `min == max`.
#[test]
fn clamp_gradient_at_the_bounds_like_pytorch() {
    let grad = |f: &dyn Fn(&Tensor) -> Tensor, values: &[f64]| {
        let x = Tensor::from_slice(values).requires_grad_(true);
        f(&x).sum().backward();
        x.grad().unwrap().to_vec::<f64>()
    };
    let xs = [-1.0, 0.0, 0.5, 1.0, 2.0, f64::NAN];
    assert_eq!(grad(&|x| x.clamp(0, 1), &xs), vec![0.0, 0.0, 1.0, 0.0, 0.0, 0.0]);
    assert_eq!(grad(&|x| x.clamp_min(0), &xs), vec![0.0, 0.0, 1.0, 1.0, 1.0, 0.0]);
    assert_eq!(grad(&|x| x.clamp_max(1), &xs), vec![1.0, 1.0, 1.0, 0.0, 0.0, 0.0]);
    assert_eq!(grad(&|x| x.clamp(1, 0), &xs), vec![0.0; 6]);
    assert_eq!(grad(&|x| x.clamp(0.5, 0.5), &xs), vec![0.0; 6]);
    assert_eq!(grad(&|x| x.clamp(0.25, 0.75), &[0.25, 0.5, 0.75, 0.2499, 0.7501]), vec![0.0, 1.0, 0.0, 0.0, 0.0]);
    assert_eq!(grad(&|x| (x * 1.0).clamp_(0, 1).clone(), &xs), vec![0.0, 0.0, 1.0, 0.0, 0.0, 0.0]);
    // f32 input, f16 input: the bound compares in the input's dtype.
    let h = Tensor::new(&[0.0999f32, 0.1, 0.5]).to_dtype(DType::F16).requires_grad_(true);
    h.clamp(0.1, 1.0).sum().backward();
    assert_eq!(h.grad().unwrap().to_dtype(DType::F32).to_vec::<f32>(), vec![0.0, 0.0, 1.0]);
}

#[test]
fn views() {
    kiln::manual_seed(3);
    type Op = fn(&Tensor) -> Tensor;
    let cases: &[(&str, Op)] = &[
        ("view", |x| x.view([4, 6]).exp()),
        ("reshape-copy", |x| x.transpose(0, 2).reshape([-1]).exp()),
        ("reshape-view", |x| x.reshape([2, 12])),
        ("transpose", |x| x.transpose(0, 2).exp()),
        ("t", |x| x.select(0, 1).t().square()),
        ("permute", |x| x.permute(&[2, 0, 1]).square()),
        ("narrow", |x| x.narrow(1, 1, 2).square()),
        ("narrow-negative", |x| x.narrow(-1, -3, 2).square()),
        ("select", |x| x.select(2, -1).square()),
        ("i", |x| x.i((1, 1..3, ..)).square()),
        ("i-newaxis", |x| x.i((.., kiln::tensor::TensorIndexer::NewAxis, 0)).square()),
        ("squeeze", |x| x.narrow(1, 0, 1).squeeze().square()),
        ("squeeze_dim", |x| x.narrow(1, 0, 1).squeeze_dim(1).square()),
        ("unsqueeze", |x| x.unsqueeze(1).square()),
        ("expand", |x| x.narrow(1, 0, 1).expand([2, 3, 4]).square()),
        ("broadcast_to", |x| x.select(0, 0).broadcast_to([5, 3, 4]).square()),
        ("flatten", |x| x.flatten(1, 2).square()),
        ("unflatten", |x| x.unflatten(2, [2, 2]).square()),
        ("split", |x| &x.split(2, 2)[1] * 3.0),
        ("chunk", |x| &x.chunk(3, 1)[2] * 3.0),
        ("split_with_sizes", |x| x.split_with_sizes(&[1, 3], 2)[1].square()),
        ("contiguous", |x| x.transpose(0, 1).contiguous().square()),
        ("deep_clone", |x| x.deep_clone().square()),
        ("sum_to_size", |x| x.sum_to_size([1, 3, 1]).square()),
        ("to_dtype", |x| x.to_dtype(DType::F32).to_dtype(DType::F64).square()),
        ("views-chain", |x| x.permute(&[1, 0, 2]).narrow(2, 1, 3).reshape([3, 6]).t().square()),
    ];
    for &(name, op) in cases {
        let x = leaf(&[2, 3, 4], -1.0, 1.0);
        let f = move |xs: &[Tensor]| op(&xs[0]);
        let opts = if name == "to_dtype" {
            GradcheckOpts { eps: 1e-3, atol: 1e-4, rtol: 1e-3 }
        } else {
            GradcheckOpts::default()
        };
        gradcheck(f, &[x.clone()], opts).unwrap_or_else(|e| panic!("{name}: {e}"));
        if name != "to_dtype" {
            gradgradcheck(f, &[x], opts).unwrap_or_else(|e| panic!("{name} (second order): {e}"));
        }
    }
}

#[test]
fn in_place_ops_match_out_of_place_gradients() {
    kiln::manual_seed(4);
    let x = leaf(&[3], -1.0, 1.0);
    let b = leaf(&[3], 0.5, 1.5);
    let f_inplace = |xs: &[Tensor]| {
        let y = &xs[0] * 1.0;
        y.mul_(&xs[1]).exp_().add_(&xs[1]).div_(2.0);
        y
    };
    gradcheck(f_inplace, &[x.clone(), b.clone()], GradcheckOpts::default()).unwrap();
    gradgradcheck(f_inplace, &[x, b], GradcheckOpts::default()).unwrap();
}

#[test]
fn grad_fn_names() {
    let x = Tensor::randn([2, 3]).requires_grad_(true);
    let y = Tensor::randn([2, 3]).requires_grad_(true);
    let name = |t: Tensor| t.grad_fn().unwrap().name().to_string();
    assert_eq!(name(&x + &y), "AddBackward0");
    assert_eq!(name(&x - 1.0), "SubBackward0");
    assert_eq!(name(&x * &y), "MulBackward0");
    assert_eq!(name(&x / 2.0), "DivBackward0");
    assert_eq!(name(x.pow(2.0)), "PowBackward0");
    assert_eq!(name(x.pow(&y)), "PowBackward1");
    assert_eq!(name(x.exp()), "ExpBackward0");
    assert_eq!(name(x.relu()), "ReluBackward0");
    assert_eq!(name(x.sigmoid()), "SigmoidBackward0");
    assert_eq!(name(x.view([6])), "ViewBackward0");
    assert_eq!(name(x.t()), "TransposeBackward0");
    assert_eq!(name(x.permute(&[1, 0])), "PermuteBackward0");
    assert_eq!(name(x.narrow(1, 0, 2)), "SliceBackward0");
    assert_eq!(name(x.select(0, 1)), "SelectBackward0");
    assert_eq!(name(x.unsqueeze(0)), "UnsqueezeBackward0");
    assert_eq!(name(x.expand([4, 2, 3])), "ExpandBackward0");
    assert_eq!(name(x.deep_clone()), "CloneBackward0");
    assert_eq!(name(x.to_dtype(DType::F64)), "ToCopyBackward0");
    assert_eq!(name(x.neg()), "NegBackward0");
    assert_eq!(name(x.clamp(-1.0, 1.0)), "ClampBackward1");
    assert_eq!(name(x.clamp_min(0.0)), "ClampMinBackward0");
    assert_eq!(name(x.clamp_max(0.0)), "ClampMaxBackward0");
    assert_eq!(name((&x * 1.0).clamp_(-1.0, 1.0).clone()), "ClampBackward1");
    assert_eq!(name((&x * 1.0).clamp_min_(0.0).clone()), "ClampMinBackward0");
    assert_eq!(name((&x * 1.0).clamp_max_(0.0).clone()), "ClampMaxBackward0");
    assert_eq!(name(x.softmax_dtype(1, DType::F64)), "SoftmaxBackward0");
    let s = x.log_softmax_dtype(1, DType::F64);
    let next: Vec<String> =
        s.grad_fn().unwrap().next_functions().into_iter().flatten().map(|f| f.name().to_string()).collect();
    assert_eq!((s.grad_fn().unwrap().name(), next), ("LogSoftmaxBackward0", vec!["ToCopyBackward0".to_string()]));
}

/// softmax with a dtype: the gradient comes back in the input's dtype, and matches the f64
/// softmax of the f64 input.
#[test]
fn softmax_dtype_gradients() {
    kiln::manual_seed(5);
    let x = Tensor::randn([3, 4]).requires_grad_(true);
    let w = Tensor::randn([3, 4]).to_dtype(DType::F64);
    (x.softmax_dtype(1, DType::F64) * &w).sum().backward();
    let g = x.grad().unwrap();
    assert_eq!(g.dtype(), DType::F32);
    let x64 = x.detach().to_dtype(DType::F64).requires_grad_(true);
    (x64.softmax(1) * &w).sum().backward();
    assert!(g.to_dtype(DType::F64).allclose(&x64.grad().unwrap(), 1e-5, 1e-7));
    let f = |xs: &[Tensor]| xs[0].to_dtype(DType::F32).log_softmax_dtype(0, DType::F64);
    gradcheck(f, &[leaf(&[3, 2], -1.0, 1.0)], GradcheckOpts { eps: 1e-3, atol: 1e-4, rtol: 1e-3 }).unwrap();
}

/// `clamp_tensor` (PyTorch's `torch.clamp` with tensor bounds): gradients to the input and to
/// each bound, broadcasting, one bound or two, and bounds that cross (`min > max`: the result is
/// `max`), first and second order.
#[test]
fn clamp_with_tensor_bounds() {
    kiln::manual_seed(4);
    type Op = fn(&[Tensor]) -> Tensor;
    // (name, op, shapes and value ranges of x, min, max)
    let both: Op = |t| t[0].clamp_tensor(Some(&t[1]), Some(&t[2]));
    let cases: &[(&str, Op, &[(&[usize], (f64, f64))])] = &[
        ("both", both, &[(&[2, 3], (-2.0, 2.0)), (&[2, 3], (-1.0, 0.0)), (&[2, 3], (0.0, 1.0))]),
        ("both broadcast", both, &[(&[2, 3], (-2.0, 2.0)), (&[3], (-1.0, 0.0)), (&[2, 1], (0.0, 1.0))]),
        ("bounds broadcast x", both, &[(&[3], (-2.0, 2.0)), (&[2, 3], (-1.0, 0.0)), (&[], (0.0, 1.0))]),
        ("min above max", both, &[(&[2, 3], (-2.0, 2.0)), (&[2, 3], (0.5, 1.0)), (&[3], (-1.0, -0.5))]),
        ("min only", |t| t[0].clamp_tensor(Some(&t[1]), None), &[(&[2, 3], (-2.0, 2.0)), (&[3], (-1.0, 1.0))]),
        ("max only", |t| t[0].clamp_tensor(None, Some(&t[1])), &[(&[2, 3], (-2.0, 2.0)), (&[2, 1], (-1.0, 1.0))]),
        (
            "in place",
            |t| (&t[0] * 1.0).clamp_tensor_(Some(&t[1]), Some(&t[2])).clone(),
            &[(&[2, 3], (-2.0, 2.0)), (&[3], (-1.0, 0.0)), (&[2, 3], (0.0, 1.0))],
        ),
    ];
    for &(name, op, specs) in cases {
        let inputs: Vec<Tensor> = specs.iter().map(|&(shape, (lo, hi))| leaf(shape, lo, hi)).collect();
        check(&format!("clamp_tensor {name}"), op, &inputs, true);
    }
}

/// The tie rules of PyTorch 2.15's `ClampBackward0` (every order of the three operands, with
/// infinities and NaN, is checked against torch in `tests/elementwise_torch.rs`): a tie of `x`
/// with one bound of an ordered pair splits the gradient; `x == min == max` gives it all to `x`;
/// with one bound, a tie splits it as `maximum`/`minimum` do.
#[test]
fn clamp_tensor_gradient_at_the_bounds_like_pytorch() {
    let grads = |xs: &[f64], lo: f64, hi: f64| {
        let x = Tensor::from_slice(xs).requires_grad_(true);
        let (l, h) = (x.full_like(lo).detach().requires_grad_(true), x.full_like(hi).detach().requires_grad_(true));
        x.clamp_tensor(Some(&l), Some(&h)).sum().backward();
        [&x, &l, &h].map(|t| t.grad().unwrap().to_vec::<f64>())
    };
    let xs = [-1.0, 0.0, 0.5, 1.0, 2.0, f64::NAN];
    let [gx, gl, gh] = grads(&xs, 0.0, 1.0);
    assert_eq!(gx, vec![0.0, 0.5, 1.0, 0.5, 0.0, 1.0]);
    assert_eq!(gl, vec![1.0, 0.5, 0.0, 0.0, 0.0, 0.0]);
    assert_eq!(gh, vec![0.0, 0.0, 0.0, 0.5, 1.0, 0.0]);
    assert_eq!(grads(&xs, 1.0, 0.0), [vec![0.0, 0.0, 0.0, 0.0, 0.0, 1.0], vec![0.0; 6], vec![1.0; 6]]);
    assert_eq!(grads(&[-1.0, 0.5, 2.0], 0.5, 0.5), [vec![0.0, 1.0, 0.0], vec![1.0, 0.0, 0.0], vec![0.0, 0.0, 1.0]]);
    // One bound: the larger (smaller) operand, a tie splits, NaN gives it to both.
    let x = Tensor::from_slice(&xs).requires_grad_(true);
    let b = Tensor::from_slice(&[0.0]).requires_grad_(true);
    (x.clamp_tensor(Some(&b), None).sum() + x.clamp_tensor(None, Some(&b)).sum() * 10.0).backward();
    assert_eq!(x.grad().unwrap().to_vec::<f64>(), vec![10.0, 5.5, 1.0, 1.0, 1.0, 11.0]);
    assert_eq!(b.grad().unwrap().to_vec::<f64>(), vec![2.5 + 10.0 * 4.5]);
    let name = |t: Tensor| t.grad_fn().unwrap().name().to_string();
    assert_eq!(name(x.clamp_tensor(Some(&b), None)), "ClampBackward0");
}
