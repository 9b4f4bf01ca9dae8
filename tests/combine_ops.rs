//! `lerp`, `addcmul`, `addcdiv`, `tril` and `triu` (`src/ops/combine.rs`): values
//! against PyTorch's, f64 finite-difference gradients (first and second order), and inside
//! `kiln::compile` the same values as eager.

use kiln::prelude::*;
use kiln::DType;

#[path = "common/op_checks.rs"]
mod op_checks;
use op_checks::{check_gradients, leaf, GradCase};

/// Panics unless `got` holds exactly `want` (the f64 results PyTorch printed).
fn assert_values(what: &str, got: &Tensor, want: &[f64]) {
    assert_eq!(got.to_vec::<f64>(), want, "{what}");
}

fn f64s(v: &[f64]) -> Tensor {
    Tensor::new(&v.to_vec())
}

#[test]
fn values_match_pytorch() {
    // x = torch.arange(12, dtype=torch.float64).view(3, 4) - 5.5
    let x = (Tensor::arange(12).to_dtype(DType::F64) - 5.5).view([3, 4]);
    assert_values("tril(x, 1)", &x.tril(1), &[-5.5, -4.5, 0.0, 0.0, -1.5, -0.5, 0.5, 0.0, 2.5, 3.5, 4.5, 5.5]);
    assert_values("triu(x, -1)", &x.triu(-1), &[-5.5, -4.5, -3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 0.0, 3.5, 4.5, 5.5]);
    let (s, e, w) = (f64s(&[1.0, -2.0, 3.5]), f64s(&[4.0, 0.5, -1.0]), f64s(&[0.25, 0.75, -0.5]));
    assert_values("lerp, tensor weight", &s.lerp(&e, &w), &[1.75, -0.125, 5.75]);
    assert_values("lerp, scalar weight", &s.lerp(&e, 0.75), &[3.25, -0.125, 0.125]);
    let (t1, t2) = (f64s(&[2.0, -1.5, 0.5]), f64s(&[0.5, 4.0, -3.0]));
    assert_values("addcmul", &s.addcmul(&t1, &t2, 0.5), &[1.5, -5.0, 2.75]);
    assert_values("addcdiv", &s.addcdiv(&t1, &t2, -2.0), &[-7.0, -1.25, 3.833_333_333_333_333_5]);
    // torch.lerp(torch.tensor([1e8, 1.]), torch.tensor([1., 3.]), 0.9): PyTorch's f32 rounding.
    let lerp32 = Tensor::new(&[1e8f32, 1.0]).lerp(&Tensor::new(&[1.0f32, 3.0]), 0.9);
    assert_eq!(lerp32.to_vec::<f32>(), [10_000_003.0, 2.8]);
    // tril keeps the dtype, Bool included.
    let t = Tensor::ones([2, 2]).to_dtype(DType::Bool).tril(0);
    assert_eq!((t.dtype(), t.to_vec::<bool>()), (DType::Bool, vec![true, false, true, true]));
}

#[test]
fn bad_shapes_are_errors_naming_the_op() {
    let v = Tensor::ones([3]);
    let e = v.try_tril(0).unwrap_err();
    assert_eq!(e.op, "tril");
    assert!(e.to_string().contains("at least 2 dimensions"), "{e}");
}

#[test]
fn gradients_match_finite_differences() {
    kiln::manual_seed(7);
    let cases: [GradCase; 6] = [
        ("tril", |t| t[0].tril(-1), vec![leaf(&[2, 3, 4])]),
        ("triu", |t| t[0].triu(1), vec![leaf(&[3, 3])]),
        ("lerp, tensor weight", |t| t[0].lerp(&t[1], &t[2]), vec![leaf(&[2, 3]), leaf(&[3]), leaf(&[2, 3])]),
        ("lerp, scalar weight", |t| t[0].lerp(&t[1], 0.7), vec![leaf(&[4]), leaf(&[4])]),
        ("addcmul", |t| t[0].addcmul(&t[1], &t[2], 0.5), vec![leaf(&[2, 3]), leaf(&[3]), leaf(&[2, 1])]),
        ("addcdiv", |t| t[0].addcdiv(&t[1], &(&t[2] * 0.5 + 2.0), -1.5), vec![leaf(&[3]), leaf(&[3]), leaf(&[3])]),
    ];
    check_gradients(cases);
}

#[test]
fn compiled_equals_eager() {
    kiln::manual_seed(8);
    let (x, y, w) = (Tensor::randn([5, 6]), Tensor::randn([6]), Tensor::rand([5, 6]));
    let f = |(x, y, w): (&Tensor, &Tensor, &Tensor)| {
        let m = x.tril(0) + x.triu(2) * 0.5;
        let l = x.lerp(&y.unsqueeze(0).expand([5, 6]), w).addcmul(&m, y, 0.25).addcdiv(x, &(w + 1.0), 2.0);
        l + y.outer(y).narrow(0, 0, 5)
    };
    let mut step = kiln::compile(f);
    let (compiled, eager) = (step.call((&x, &y, &w)), f((&x, &y, &w)));
    for (c, e) in compiled.to_vec::<f32>().iter().zip(eager.to_vec::<f32>()) {
        assert!((c - e).abs() <= 1e-5 * (1.0 + e.abs()), "compiled {c}, eager {e}");
    }
    assert_eq!(step.stats().graph_breaks, 0);
}
