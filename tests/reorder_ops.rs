//! `flip`, `roll`, `repeat`, `tile`, `repeat_interleave` (`src/ops/reorder.rs`) and the
//! activations `glu`, `prelu` and `nan_to_num`: values against PyTorch's, f64
//! finite-difference gradients (first and second order), errors naming the op, and inside
//! `kiln::compile` the same values and gradients as eager with no graph break.

use kiln::nn::functional as F;
use kiln::nn::{self, Module};
use kiln::prelude::*;
use kiln::DType;

#[path = "common/op_checks.rs"]
mod op_checks;
use op_checks::{check_gradients, compiled_equals_eager, leaf, GradCase};

/// x = torch.arange(24, dtype=torch.float64).view(2, 3, 4) - 11.5
fn x() -> Tensor {
    (Tensor::arange(24).to_dtype(DType::F64) - 11.5).view([2, 3, 4])
}

/// Panics unless `got` holds `want` (what PyTorch printed) within `tol`, with `want`'s shape.
fn assert_values(what: &str, got: &Tensor, shape: &[usize], want: &[f64], tol: f64) {
    assert_eq!(got.shape(), shape, "{what}");
    for (i, (g, w)) in got.to_vec::<f64>().iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol * (1.0 + w.abs()), "{what}: element {i}: {g} vs {w}");
    }
}

#[test]
fn reorders_match_pytorch() {
    let x = x();
    #[rustfmt::skip]
    let flipped = [3.5, 2.5, 1.5, 0.5, 7.5, 6.5, 5.5, 4.5, 11.5, 10.5, 9.5, 8.5, -8.5, -9.5, -10.5, -11.5, -4.5,
        -5.5, -6.5, -7.5, -0.5, -1.5, -2.5, -3.5];
    assert_values("flip(x, [0, 2])", &x.flip([0, 2]), &[2, 3, 4], &flipped, 0.0);
    #[rustfmt::skip]
    let rolled = [-0.5, -3.5, -2.5, -1.5, -8.5, -11.5, -10.5, -9.5, -4.5, -7.5, -6.5, -5.5, 11.5, 8.5, 9.5, 10.5,
        3.5, 0.5, 1.5, 2.5, 7.5, 4.5, 5.5, 6.5];
    assert_values("roll(x, [1, -5], [2, 1])", &x.roll(&[1, -5], &[2, 1]), &[2, 3, 4], &rolled, 0.0);
    #[rustfmt::skip]
    let flat_rolled = [5.5, 6.5, 7.5, 8.5, 9.5, 10.5, 11.5, -11.5, -10.5, -9.5, -8.5, -7.5, -6.5, -5.5, -4.5, -3.5,
        -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 4.5];
    assert_values("roll(x, 7)", &x.roll(&[7], &[]), &[2, 3, 4], &flat_rolled, 0.0);
    let part = x.view([2, 12]).narrow(1, 0, 3);
    #[rustfmt::skip]
    let repeated = [-11.5, -10.5, -9.5, -11.5, -10.5, -9.5, 0.5, 1.5, 2.5, 0.5, 1.5, 2.5, -11.5, -10.5, -9.5, -11.5,
        -10.5, -9.5, 0.5, 1.5, 2.5, 0.5, 1.5, 2.5];
    assert_values("x[:, :3].repeat(2, 1, 2)", &part.repeat([2, 1, 2]), &[2, 2, 6], &repeated, 0.0);
    let square = x.select(0, 0).narrow(0, 0, 2).narrow(1, 0, 2);
    let tiled = [-11.5, -10.5, -11.5, -10.5, -11.5, -10.5, -7.5, -6.5, -7.5, -6.5, -7.5, -6.5];
    assert_values("tile(x[0, :2, :2], (3,))", &square.tile([3]), &[2, 6], &tiled, 0.0);
    let interleaved = [-11.5, -11.5, -10.5, -10.5, -7.5, -7.5, -6.5, -6.5];
    assert_values("repeat_interleave(2, dim=1)", &square.repeat_interleave(2, Some(1)), &[2, 4], &interleaved, 0.0);
    let flat = [-11.5, -11.5, -11.5, -10.5, -10.5, -10.5, -7.5, -7.5, -7.5, -6.5, -6.5, -6.5];
    assert_values("repeat_interleave(3)", &square.repeat_interleave(3, None), &[12], &flat, 0.0);
    // Results are copies, never views of the input; an empty dim list flips nothing.
    let same = x.flip(Vec::<i64>::new());
    assert!(!same.shares_storage_with(&x));
    assert_values("flip(x, [])", &same, &[2, 3, 4], &x.to_vec::<f64>(), 0.0);
}

#[test]
fn activations_match_pytorch() {
    let x = x();
    let w = Tensor::new(&[0.25f64, -0.5, 2.0]);
    #[rustfmt::skip]
    let prelu = [-2.875, -2.625, -2.375, -2.125, 3.75, 3.25, 2.75, 2.25, -7.0, -5.0, -3.0, -1.0, 0.5, 1.5, 2.5, 3.5,
        4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 10.5, 11.5];
    assert_values("prelu(x, w)", &F::prelu(&x, &w), &[2, 3, 4], &prelu, 0.0);
    #[rustfmt::skip]
    let glu = [-0.0008607316163720292, -0.0021359832695796686, -0.030526032869220957, -0.07141512709885567,
        -0.6384893333222472, -0.9438516719953636, 0.4620709099893783, 1.4560316538729654, 4.4932446798446835,
        5.49695971749692, 8.499765946625525, 9.499903765085682];
    assert_values("glu(x, -1)", &F::glu(&x, -1), &[2, 3, 2], &glu, 1e-15);
    assert_eq!(nn::GLU::default().forward(&x).to_vec::<f64>(), F::glu(&x, -1).to_vec::<f64>());
    assert_eq!(format!("{}", nn::PReLU::new(3, 0.1)), "PReLU(num_parameters=3)");

    let y = Tensor::new(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1.5]);
    assert_eq!(y.nan_to_num(0.0, None, None).to_vec::<f32>(), [0.0, f32::MAX, f32::MIN, 1.5]);
    assert_eq!(y.nan_to_num(2.0, Some(3.0), Some(-4.0)).to_vec::<f32>(), [2.0, 3.0, -4.0, 1.5]);
    let half = y.to_dtype(DType::F16).nan_to_num(0.0, None, None);
    assert_eq!(half.to_vec::<f64>(), [0.0, 65504.0, -65504.0, 1.5]);
    let bf = y.to_dtype(DType::BF16).nan_to_num(0.0, None, None);
    assert_eq!(bf.to_vec::<f64>(), [0.0, 3.3895313892515355e38, -3.3895313892515355e38, 1.5]);
    let wide = y.to_dtype(DType::F64).nan_to_num(0.0, None, None);
    assert_eq!((wide.dtype(), wide.to_vec::<f64>()[1]), (DType::F64, f64::MAX));
    let ints = Tensor::arange(3);
    assert_eq!(ints.nan_to_num(0.0, None, None).to_vec::<i64>(), [0, 1, 2]);
}

#[test]
fn bad_arguments_are_errors_naming_the_op() {
    let x = x();
    let cases: [(&str, kiln::Result<Tensor>, &str); 7] = [
        ("flip", x.try_flip([0, -3]), "appears multiple times"),
        ("flip", x.try_flip(3), "out of range"),
        ("roll", x.try_roll(&[1, 2], &[0]), "shifts and dimensions must align"),
        ("repeat", x.try_repeat([2, 2]), "can not be smaller than number of dimensions"),
        ("repeat_interleave", x.try_repeat_interleave(2, Some(5)), "out of range"),
        ("glu", F::try_glu(&x, 1), "Halving dimension must be even, but dimension 1 is size 3"),
        ("prelu", F::try_prelu(&x, &Tensor::ones([2])), "Found parameter numbers = 2 and channel size = 3"),
    ];
    for (op, r, words) in cases {
        let e = r.unwrap_err();
        assert_eq!(e.op, op, "{e}");
        assert!(e.to_string().contains(words), "{e}");
        assert!(e.to_string().contains("tests/reorder_ops.rs"), "{e}");
    }
}

#[test]
fn gradients_match_finite_differences() {
    kiln::manual_seed(9);
    let cases: [GradCase; 8] = [
        ("flip", |t| t[0].flip([0, 2]), vec![leaf(&[2, 3, 2])]),
        ("roll", |t| t[0].roll(&[1, -2], &[1, 0]), vec![leaf(&[3, 4])]),
        ("repeat", |t| t[0].repeat([2, 1, 3]), vec![leaf(&[2, 2])]),
        ("tile", |t| t[0].tile([2]), vec![leaf(&[2, 3])]),
        ("repeat_interleave", |t| t[0].repeat_interleave(2, Some(0)), vec![leaf(&[3, 2])]),
        ("glu", |t| F::glu(&t[0], 1), vec![leaf(&[2, 4])]),
        // The slopes' and the input's gradients; inputs away from 0, where prelu has a kink.
        ("prelu", |t| F::prelu(&(&t[0] + t[0].sign() * 0.1), &t[1]), vec![leaf(&[2, 3, 2]), leaf(&[3])]),
        ("nan_to_num", |t| (t[0].log() * 1.0).nan_to_num(0.5, Some(2.0), None), vec![leaf(&[5])]),
    ];
    check_gradients(cases);
    // The gradient stops where the input was not finite, as PyTorch's `grad * isfinite(x)`.
    let v = Tensor::new(&[f64::NAN, f64::INFINITY, 3.0]).requires_grad_(true);
    (v.nan_to_num(0.0, None, None) * 2.0).sum().backward();
    assert_eq!(v.grad().unwrap().to_vec::<f64>(), [0.0, 0.0, 2.0]);
}

#[test]
fn compiled_step_equals_eager() {
    kiln::manual_seed(10);
    let inputs = [Tensor::randn([2, 4, 3]), Tensor::rand([4])];
    compiled_equals_eager(&inputs, |t| {
        let (x, w) = (&t[0], &t[1]);
        let y = x.flip([1]).roll(&[2], &[2]) + x.repeat([1, 1, 1]) - x.repeat_interleave(2, Some(2)).narrow(2, 0, 3);
        let z = F::prelu(&y, w).tile([2, 1, 1]) + F::glu(&x.repeat([1, 1, 2]), 2).repeat([2, 1, 1]);
        let loss = z.nan_to_num(0.0, None, None).pow(2.0).sum();
        loss.backward();
        loss
    });
}
