//! `F::pad` and the padding modules (`src/nn/functional/pad.rs`, `src/nn/padding.rs`): values
//! and gradients against PyTorch's (every mode, negative amounts, 2-D to 5-D inputs), f64
//! finite-difference gradients of first and second order, `kiln::compile` equal to eager with
//! no graph break, PyTorch's module reprs, and errors that name the op, the shapes and the
//! caller's line.

#[path = "common/pad_fixture.rs"]
mod pad_fixture;

use kiln::autograd::{gradcheck, gradgradcheck, GradcheckOpts};
use kiln::nn::functional::PadMode;
use kiln::nn::{self, Module};
use kiln::prelude::*;
use kiln::{DType, ErrorKind};

const HERE: &str = "tests/nn_pad.rs";

fn mode_of(case: &pad_fixture::Case) -> PadMode {
    match case.arg("mode") {
        "constant" => PadMode::Constant(case.args.get("value").map_or(0.0, |v| v.parse().unwrap())),
        "reflect" => PadMode::Reflect,
        "replicate" => PadMode::Replicate,
        "circular" => PadMode::Circular,
        m => panic!("{}: unknown mode {m}", case.name),
    }
}

#[test]
fn values_and_gradients_match_pytorch() {
    let cases = pad_fixture::cases(&["pad"]);
    assert!(cases.len() >= 25, "only {} pad cases", cases.len());
    let mut bad = Vec::new();
    let mut modes = std::collections::BTreeSet::new();
    for case in &cases {
        let pad: Vec<i64> = case.list("pad");
        let mode = mode_of(case);
        modes.insert(mode.name());
        bad.extend(case.check(|x| F::pad(x, &pad, mode)));
    }
    assert_eq!(modes.len(), 4, "every mode has cases: {modes:?}");
    assert!(bad.is_empty(), "{} disagreements with PyTorch:\n{}", bad.len(), bad.join("\n"));
}

#[test]
fn small_cases_by_hand() {
    // torch.arange(5.).view(1, 1, 5) padded (-1, 2) reflect: [1, 2, 3, 4, 3, 2]; (-2, 3)
    // circular: [2, 3, 4, 2, 3, 4]; (-2, -1) replicate: [2, 3].
    let x = Tensor::arange(5).to_dtype(DType::F32).view([1, 1, 5]);
    assert_eq!(F::pad(&x, &[-1, 2], PadMode::Reflect).to_vec::<f32>(), [1.0, 2.0, 3.0, 4.0, 3.0, 2.0]);
    assert_eq!(F::pad(&x, &[-2, 3], PadMode::Circular).to_vec::<f32>(), [2.0, 3.0, 4.0, 2.0, 3.0, 4.0]);
    assert_eq!(F::pad(&x, &[-2, -1], PadMode::Replicate).to_vec::<f32>(), [2.0, 3.0]);
    assert_eq!(
        F::pad_value(&x, &[1, 0, 0, 1], 9.0).to_vec::<f32>(),
        [9.0, 0.0, 1.0, 2.0, 3.0, 4.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0]
    );
    assert_eq!(F::pad(&x, &[-5, 0], PadMode::default()).shape(), &[1, 1, 0]);
    // Integer and bool tensors pad with the value converted; the dtype is kept.
    let i = Tensor::from_slice(&[1i64, 2, 3]);
    let p = F::pad_value(&i, &[1, 2], 7.0);
    assert_eq!((p.dtype(), p.to_vec::<i64>()), (DType::I64, vec![7, 1, 2, 3, 7, 7]));
    let r = F::pad(&i.view([1, 3]), &[2, 2], PadMode::Reflect);
    assert_eq!(r.to_vec::<i64>(), [3, 2, 1, 2, 3, 2, 1]);
}

#[test]
fn gradients_match_finite_differences() {
    kiln::manual_seed(3);
    let leaf = |shape: &[usize]| Tensor::randn(shape).to_dtype(DType::F64).requires_grad_(true);
    let opts = GradcheckOpts::default();
    let cases: [(&str, Vec<i64>, PadMode, Vec<usize>); 8] = [
        ("constant", vec![1, -1, 2, 0], PadMode::Constant(0.5), vec![2, 3, 3]),
        ("constant 5-D", vec![1, 0, 0, 1, 1, 1], PadMode::Constant(0.0), vec![1, 1, 2, 2, 2]),
        ("reflect 1-D", vec![2, 1], PadMode::Reflect, vec![2, 4]),
        ("reflect 2-D", vec![1, 2, -1, 2], PadMode::Reflect, vec![1, 2, 3, 3]),
        ("replicate 2-D", vec![2, 1, 1, 0], PadMode::Replicate, vec![1, 2, 3]),
        ("replicate 3-D", vec![1, 1, 0, 1, 1, 0], PadMode::Replicate, vec![1, 1, 2, 2, 2]),
        ("circular 1-D", vec![-1, 2], PadMode::Circular, vec![1, 2, 4]),
        ("circular 2-D", vec![2, 1, 1, 2], PadMode::Circular, vec![1, 1, 2, 3]),
    ];
    for (name, pad, mode, shape) in cases {
        let f = |t: &[Tensor]| F::pad(&t[0], &pad, mode);
        let inputs = [leaf(&shape)];
        gradcheck(f, &inputs, opts).unwrap_or_else(|e| panic!("{name}: {e}"));
        gradgradcheck(f, &inputs, opts).unwrap_or_else(|e| panic!("{name} (second order): {e}"));
    }
}

#[test]
fn compiled_equals_eager_with_no_graph_break() {
    kiln::manual_seed(4);
    let x = Tensor::randn([2, 3, 4, 5]).requires_grad_(true);
    let w = Tensor::randn([2, 3, 7, 8]);
    let body = |(x, w): (&Tensor, &Tensor)| {
        x.set_grad(None);
        let a = F::pad(x, &[1, 2, 2, 1], PadMode::Reflect);
        let b = F::pad(x, &[2, 1, 0, 3], PadMode::Replicate);
        let c = F::pad(x, &[3, 0, 1, 2], PadMode::Circular);
        let d = F::pad(x, &[2, 1, -1, 4], PadMode::Constant(0.25));
        let y = &a * 2.0 + &b - &c * &d;
        (&y * w).sum().backward();
        (y, x.grad().expect("grad"))
    };
    let mut step = kiln::compile(body);
    let eager = step.call_eager((&x, &w));
    let compiled = step.call((&x, &w));
    assert_eq!(step.stats().graph_breaks, 0);
    for (what, c, e) in [("output", &compiled.0, &eager.0), ("gradient", &compiled.1, &eager.1)] {
        assert_eq!(c.shape(), e.shape(), "{what}");
        for (c, e) in c.to_vec::<f32>().iter().zip(e.to_vec::<f32>()) {
            assert!((c - e).abs() <= 1e-5 * (1.0 + e.abs()), "{what}: compiled {c}, eager {e}");
        }
    }
}

#[test]
fn modules_print_like_pytorch_and_pad_as_f_pad() {
    // print(nn.ZeroPad2d(2)), … in PyTorch 2.
    assert_eq!(nn::ZeroPad2d::new(2).to_string(), "ZeroPad2d((2, 2, 2, 2))");
    assert_eq!(nn::ZeroPad2d::new([1, 2, 3, 4]).to_string(), "ZeroPad2d((1, 2, 3, 4))");
    assert_eq!(nn::ZeroPad1d::new(2).to_string(), "ZeroPad1d((2, 2))");
    assert_eq!(nn::ConstantPad1d::new(2, 3.5).to_string(), "ConstantPad1d(padding=(2, 2), value=3.5)");
    assert_eq!(
        nn::ConstantPad2d::new([1, 0, 2, 0], -1.0).to_string(),
        "ConstantPad2d(padding=(1, 0, 2, 0), value=-1.0)"
    );
    assert_eq!(nn::ConstantPad3d::new(1, 0.0).to_string(), "ConstantPad3d(padding=(1, 1, 1, 1, 1, 1), value=0.0)");
    assert_eq!(nn::ReflectionPad1d::new(2).to_string(), "ReflectionPad1d((2, 2))");
    assert_eq!(nn::ReflectionPad2d::new([1, 1, 2, 0]).to_string(), "ReflectionPad2d((1, 1, 2, 0))");
    assert_eq!(nn::ReplicationPad1d::new(3).to_string(), "ReplicationPad1d((3, 3))");
    assert_eq!(nn::ReplicationPad2d::new(1).to_string(), "ReplicationPad2d((1, 1, 1, 1))");
    assert_eq!(nn::CircularPad1d::new(1).to_string(), "CircularPad1d((1, 1))");
    assert_eq!(nn::CircularPad2d::new([1, 2, 0, 1]).to_string(), "CircularPad2d((1, 2, 0, 1))");

    kiln::manual_seed(5);
    let x = Tensor::randn([1, 2, 3, 4, 5]);
    let (x3, x4) = (x.view([2, 3, 20]), x.view([2, 3, 4, 5]));
    let same = |m: &dyn Module, x: &Tensor, pad: &[i64], mode: PadMode| {
        let (got, want) = (m.forward(x), F::pad(x, pad, mode));
        assert_eq!(got.shape(), want.shape(), "{pad:?} {mode:?}");
        assert_eq!(got.to_vec::<f32>(), want.to_vec::<f32>(), "{pad:?} {mode:?}");
    };
    same(&nn::ZeroPad3d::new(1), &x, &[1; 6], PadMode::Constant(0.0));
    same(&nn::ConstantPad2d::new([1, 0, 2, 1], 2.5), &x, &[1, 0, 2, 1], PadMode::Constant(2.5));
    same(&nn::ReflectionPad1d::new([3, 1]), &x3, &[3, 1], PadMode::Reflect);
    same(&nn::ReflectionPad2d::new([3, 1, 0, 2]), &x4, &[3, 1, 0, 2], PadMode::Reflect);
    same(&nn::ReflectionPad3d::new([1, 0, 2, 1, 0, 2]), &x, &[1, 0, 2, 1, 0, 2], PadMode::Reflect);
    same(&nn::ReplicationPad1d::new(4), &x3, &[4, 4], PadMode::Replicate);
    same(&nn::ReplicationPad2d::new([0, 2, 1, 1]), &x4, &[0, 2, 1, 1], PadMode::Replicate);
    same(&nn::ReplicationPad3d::new(2), &x, &[2; 6], PadMode::Replicate);
    same(&nn::CircularPad1d::new(4), &x3, &[4, 4], PadMode::Circular);
    same(&nn::CircularPad2d::new([1, 2, 0, 3]), &x4, &[1, 2, 0, 3], PadMode::Circular);
    same(&nn::CircularPad3d::new([1, 2, 0, 3, 2, 1]), &x, &[1, 2, 0, 3, 2, 1], PadMode::Circular);
    // A padding module has no parameters.
    assert_eq!(nn::ReflectionPad2d::new(1).parameters().len(), 0);
}

/// The error of `r`, checked to name `pad`, the caller's line in this file, and each of
/// `words`.
#[track_caller]
fn assert_error(r: kiln::Result<Tensor>, kind: ErrorKind, words: &[&str]) {
    let e = r.expect_err("expected an error");
    let text = e.to_string();
    assert_eq!((e.op, e.kind), ("pad", kind), "{text}");
    assert_eq!(e.location.file(), HERE, "{text}");
    for w in words {
        assert!(text.contains(w), "{text} does not say {w:?}");
    }
}

#[test]
fn bad_paddings_are_errors_naming_the_op_shapes_and_line() {
    let x = Tensor::zeros([1, 1, 5]);
    assert_error(F::try_pad(&x, &[1], PadMode::Reflect), ErrorKind::Value, &["divisible by 2", "[1, 1, 5]"]);
    assert_error(F::try_pad(&x, &[1; 8], PadMode::Constant(0.0)), ErrorKind::Value, &["length 8", "[1, 1, 5]"]);
    assert_error(
        F::try_pad(&x, &[5, 0], PadMode::Reflect),
        ErrorKind::Value,
        &["less than the corresponding input dimension", "(5, 0)", "dimension 2", "[1, 1, 5]"],
    );
    assert_error(F::try_pad(&x, &[1, 1, 1, 1], PadMode::Reflect), ErrorKind::Value, &["(1, 1) at dimension 1"]);
    assert_error(
        F::try_pad(&Tensor::zeros([5]), &[1, 1], PadMode::Reflect),
        ErrorKind::Unsupported,
        &["reflect", "1-D input of shape [5]", "padding length 2"],
    );
    assert_error(
        F::try_pad(&Tensor::zeros([2, 2, 2, 2, 2, 2]), &[1; 6], PadMode::Circular),
        ErrorKind::Unsupported,
        &["circular", "[2, 2, 2, 2, 2, 2]"],
    );
    assert_error(
        F::try_pad(&x, &[6, 0], PadMode::Circular),
        ErrorKind::Value,
        &["wraps around more than once", "[1, 1, 5]"],
    );
    assert_error(F::try_pad(&x, &[-3, -3], PadMode::Circular), ErrorKind::Shape, &["empty dimension"]);
    // PyTorch wraps the cropped input, and reads unwritten memory past it; kiln refuses.
    assert_error(F::try_pad(&x, &[5, -1], PadMode::Circular), ErrorKind::Value, &["wraps around more than once", "4"]);
    assert_error(F::try_pad(&x, &[-3, -3], PadMode::Replicate), ErrorKind::Shape, &["output size -1"]);
    assert_error(
        F::try_pad(&x, &[-3, -3], PadMode::Constant(1.0)),
        ErrorKind::Shape,
        &["negative output size", "dimension 2"],
    );
    assert_error(
        F::try_pad(&Tensor::zeros([1, 0, 3]), &[1, 1], PadMode::Replicate),
        ErrorKind::Shape,
        &["non-zero dimensions", "[1, 0, 3]"],
    );
    // The panicking form reports the caller's line too.
    let text = std::panic::catch_unwind(|| F::pad(&Tensor::zeros([1, 1, 5]), &[5, 0], PadMode::Reflect))
        .expect_err("a panic")
        .downcast::<String>()
        .expect("a message");
    assert!(text.starts_with("pad: ") && text.contains(&format!("(at {HERE}:")), "{text}");
}
