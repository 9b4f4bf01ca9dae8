//! Every elementwise op against PyTorch: the cases in `tests/fixtures/{unary,binary}.txt`
//! (made by `scripts/make_fixtures.py`) cover each dtype, type promotion, special values and
//! contiguous, transposed, narrowed, expanded, 0-dim, zero-size and large (parallel) inputs;
//! `unary.txt` also holds each unary op's f64 gradient at its kinks and special points.
//! Each test runs all cases of its file and lists every failure at the end.

mod common;

use common::{
    assert_covers, outcome, parse, read_values, run_fixture, same_values, Arg, Case, Expect, Outcome, Tol, Values,
};
use kiln::ops::{Operand, BINARY_METHODS, COMPARE_METHODS, COMPOSITE_UNARY, LOGICAL_METHODS, UNARY_METHODS};
use kiln::{DType, Scalar, Tensor};

/// A tensor or scalar argument as a binary op's operand.
fn operand(a: &Arg) -> Operand {
    match a {
        Arg::Tensor(t) => Operand::Tensor(t.clone()),
        Arg::Scalar(s) => Operand::Scalar(*s),
    }
}

/// Every unary op's name: the primitive ops of the unary table and the composite ops, both
/// generated from their tables, so a new row is covered here without an edit.
fn unary_names() -> Vec<&'static str> {
    UNARY_METHODS.iter().map(|(op, _, _)| op.name()).chain(COMPOSITE_UNARY.iter().map(|(name, _)| *name)).collect()
}

/// The op named `op` applied through its public method.
fn unary(op: &str, x: &Tensor) -> Option<Tensor> {
    if let Some((_, f, _)) = UNARY_METHODS.iter().find(|(u, _, _)| u.name() == op) {
        return Some(f(x));
    }
    COMPOSITE_UNARY.iter().find(|(name, _)| *name == op).map(|(_, f)| f(x))
}

/// `x.grad` after `op(x).sum().backward()`, for a case named `OP_grad`.
fn unary_grad(op: &str, x: &Tensor) -> Option<Tensor> {
    let x = x.detach().requires_grad_(true);
    unary(op, &x)?.sum().backward();
    Some(x.grad().expect("x requires grad"))
}

/// Values of every unary op, and its gradient at kinks and special points, against PyTorch.
#[test]
fn unary_ops_match_pytorch() {
    let cases = run_fixture("unary.txt", |case, args| {
        let x = args[0].tensor();
        let out = match case.op.strip_suffix("_grad") {
            Some(op) => unary_grad(op, x),
            None => unary(&case.op, x),
        };
        out.map(|t| Ok(vec![t]))
    });
    let names = unary_names();
    assert_covers(&cases, &names);
    // Predicates (isnan, …) return Bool and have no gradient.
    let differentiable = |n: &&&str| unary(n, &Tensor::new(&[0.5f32])).is_some_and(|t| t.dtype() != DType::Bool);
    let grads: Vec<String> = names.iter().filter(differentiable).map(|n| format!("{n}_grad")).collect();
    assert_covers(&cases, &grads.iter().map(String::as_str).collect::<Vec<_>>());
}

/// The in-place form, through the same view, gives the out-of-place result when the dtype is
/// kept; it is an error when the result dtype differs (`exp_` on an integer tensor) and on an
/// expanded view (elements sharing memory).
#[test]
fn unary_inplace_matches_out_of_place() {
    let mut failures = Vec::new();
    let primitive = |op: &str| UNARY_METHODS.iter().any(|(u, _, _)| u.name() == op);
    for case in common::load("unary.txt").iter().filter(|c| matches!(c.expect, Expect::Outputs(_)) && primitive(&c.op))
    {
        let x = case.build_args()[0].tensor().clone();
        let expected = unary(&case.op, &x).expect("mapped");
        let should_work = expected.dtype() == x.dtype() && !case.has_view("expand");
        let got = common::catch_quietly(|| inplace_unary(&case.op, &x));
        match (got, should_work) {
            (Ok(()), true) if same_values(&x, &expected) => {}
            (Err(_), false) => {}
            (r, _) => failures.push(format!(
                "{}: in-place {}, expected {}",
                case.name,
                if r.is_ok() { "gave other values" } else { "failed" },
                if should_work { "success" } else { "an error" }
            )),
        }
    }
    assert!(failures.is_empty(), "{} in-place failures:\n{}", failures.len(), failures.join("\n"));
}

/// The in-place method of primitive unary op `op` (composite ops have none).
fn inplace_unary(op: &str, x: &Tensor) {
    let (_, _, f) =
        UNARY_METHODS.iter().find(|(u, _, _)| u.name() == op).unwrap_or_else(|| panic!("unmapped unary op {op}"));
    f(x);
}

/// The fixture ops of `binary.txt` besides the binary table's float ops (covered from the table).
const BINARY: &[&str] = &[
    "clamp",
    "clamp_min",
    "clamp_max",
    "clamp_",
    "clamp_min_",
    "clamp_max_",
    "fill_",
    "full",
    "clamp_tensor_grad",
    "clamp_tensor_min_grad",
    "clamp_tensor_max_grad",
];

/// `clamp_tensor` with bounds that require grad: the result, then the gradient of every
/// operand for an all-ones output gradient (PyTorch's `y.backward(ones)`).
fn clamp_tensor_grads(op: &str, args: &[Arg]) -> Outcome {
    let ts: Vec<Tensor> = args.iter().map(|a| a.tensor().detach().requires_grad_(true)).collect();
    let y = match op {
        "clamp_tensor_grad" => ts[0].try_clamp_tensor(Some(&ts[1]), Some(&ts[2])),
        "clamp_tensor_min_grad" => ts[0].try_clamp_tensor(Some(&ts[1]), None),
        _ => ts[0].try_clamp_tensor(None, Some(&ts[1])),
    };
    outcome(y.map(|y| {
        y.backward_with(&y.ones_like());
        std::iter::once(y.detach()).chain(ts.iter().map(|t| t.grad().expect("every operand requires grad"))).collect()
    }))
}

/// `s op x` with a Rust number on the left (the operator overloads for `f64` and `i64`).
fn scalar_lhs(op: &str, s: Scalar, x: &Tensor) -> Option<Tensor> {
    macro_rules! ops {
        ($s:expr) => {
            match op {
                "add" => $s + x,
                "sub" => $s - x,
                "mul" => $s * x,
                "div" => $s / x,
                "remainder" => $s % x,
                _ => return None,
            }
        };
    }
    Some(match s {
        Scalar::Int(i) => ops!(i),
        Scalar::Float(f) => ops!(f),
        Scalar::Bool(_) => return None,
    })
}

fn binary(case: &Case, args: &[Arg]) -> Outcome {
    if case.op == "full" {
        let dtype = common::parse_dtype(case.attr("dtype").expect("full has a dtype")).unwrap();
        return outcome(Tensor::try_full_opts([2], args[0].scalar(), dtype, kiln::Device::Cpu).map(|t| vec![t]));
    }
    if let Arg::Scalar(s) = args[0] {
        return scalar_lhs(&case.op, s, args[1].tensor()).map(|t| Ok(vec![t]));
    }
    let x = args[0].tensor();
    let inplace = |r: kiln::Result<&Tensor>| outcome(r.map(|t| vec![t.clone()]));
    match case.op.as_str() {
        "clamp" => return outcome(x.try_clamp(args[1].scalar(), args[2].scalar()).map(|t| vec![t])),
        "clamp_min" => return outcome(x.try_clamp_min(args[1].scalar()).map(|t| vec![t])),
        "clamp_max" => return outcome(x.try_clamp_max(args[1].scalar()).map(|t| vec![t])),
        "clamp_" => return inplace(x.try_clamp_(args[1].scalar(), args[2].scalar())),
        "clamp_min_" => return inplace(x.try_clamp_min_(args[1].scalar())),
        "clamp_max_" => return inplace(x.try_clamp_max_(args[1].scalar())),
        "fill_" => return inplace(x.try_fill_(args[1].scalar())),
        op if op.starts_with("clamp_tensor_") => return clamp_tensor_grads(op, args),
        _ => {}
    }
    let (_, f) = BINARY_METHODS.iter().find(|(op, _)| op.name() == case.op)?;
    Some(f(x, operand(&args[1])).map(|t| vec![t]).map_err(|e| e.to_string()))
}

#[test]
fn binary_ops_match_pytorch() {
    let cases = run_fixture("binary.txt", binary);
    assert_covers(&cases, BINARY);
    let float_ops: Vec<&str> =
        BINARY_METHODS.iter().filter(|(op, _)| !op.is_bitwise()).map(|(op, _)| op.name()).collect();
    assert_covers(&cases, &float_ops);
}

/// The fixture ops of `compare.txt` besides the comparison and logical op tables (covered
/// from the tables).
const COMPARE: &[&str] = &["logical_not", "where", "masked_fill", "masked_fill_", "equal", "allclose"];

fn compare(case: &Case, args: &[Arg]) -> Outcome {
    let r = match case.op.as_str() {
        "where" => Tensor::try_where(args[0].tensor(), operand(&args[1]), operand(&args[2])).map_err(|e| e.to_string()),
        "logical_not" => Ok(args[0].tensor().logical_not()),
        "masked_fill" => Ok(args[0].tensor().masked_fill(args[1].tensor(), args[2].scalar())),
        "masked_fill_" => Ok(args[0].tensor().masked_fill_(args[1].tensor(), args[2].scalar()).clone()),
        "equal" => Ok(Tensor::scalar(args[0].tensor().equal(args[1].tensor()))),
        // The fixtures call torch.allclose(a, b, rtol=1e-3, atol=1e-5).
        "allclose" => Ok(Tensor::scalar(args[0].tensor().allclose(args[1].tensor(), 1e-3, 1e-5))),
        op => {
            let (x, y) = (args[0].tensor(), operand(&args[1]));
            if let Some((_, _, try_cmp)) = COMPARE_METHODS.iter().find(|(c, _, _)| c.name() == op) {
                try_cmp(x, y).map_err(|e| e.to_string())
            } else {
                let (_, logical) = LOGICAL_METHODS.iter().find(|(l, _)| l.name() == op)?;
                Ok(logical(x, y))
            }
        }
    };
    Some(r.map(|t| vec![t]))
}

#[test]
fn compare_ops_match_pytorch() {
    let cases = run_fixture("compare.txt", compare);
    assert_covers(&cases, COMPARE);
    let table_ops: Vec<&str> = COMPARE_METHODS
        .iter()
        .map(|(op, _, _)| op.name())
        .chain(LOGICAL_METHODS.iter().map(|(op, _)| op.name()))
        .collect();
    assert_covers(&cases, &table_ops);
}

const BITWISE: &[&str] = &[
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_left_shift",
    "bitwise_right_shift",
    "bitwise_not",
    "bitwise_and_",
    "bitwise_or_",
    "bitwise_xor_",
    "bitwise_left_shift_",
    "bitwise_right_shift_",
    "bitwise_not_",
];

/// `s op x` with a Rust number on the left (the operator overloads for `i64` and `bool`).
fn bitwise_scalar_lhs(op: &str, s: Scalar, x: &Tensor) -> Option<Tensor> {
    macro_rules! ops {
        ($s:expr) => {
            match op {
                "bitwise_and" => $s & x,
                "bitwise_or" => $s | x,
                "bitwise_xor" => $s ^ x,
                "bitwise_left_shift" => $s << x,
                "bitwise_right_shift" => $s >> x,
                _ => return None,
            }
        };
    }
    Some(match s {
        Scalar::Int(i) => ops!(i),
        Scalar::Bool(b) => ops!(b),
        Scalar::Float(_) => return None,
    })
}

/// The bitwise ops: methods for tensor operands, operators (`&`, `<<`, …) for a number on the
/// left (they panic on errors: caught as failures), and the in-place forms.
fn bitwise(case: &Case, args: &[Arg]) -> Outcome {
    if let Arg::Scalar(s) = args[0] {
        return bitwise_scalar_lhs(&case.op, s, args[1].tensor()).map(|t| Ok(vec![t]));
    }
    let x = args[0].tensor();
    let inplace = |r: kiln::Result<&Tensor>| outcome(r.map(|t| vec![t.clone()]));
    if case.op == "bitwise_not" {
        return outcome(x.try_bitwise_not().map(|t| vec![t]));
    }
    if case.op == "bitwise_not_" {
        return inplace(x.try_bitwise_not_());
    }
    let y = operand(&args[1]);
    let r = match case.op.as_str() {
        "bitwise_and" => x.try_bitwise_and(y),
        "bitwise_or" => x.try_bitwise_or(y),
        "bitwise_xor" => x.try_bitwise_xor(y),
        "bitwise_left_shift" => x.try_bitwise_left_shift(y),
        "bitwise_right_shift" => x.try_bitwise_right_shift(y),
        "bitwise_and_" => return inplace(x.try_bitwise_and_(y)),
        "bitwise_or_" => return inplace(x.try_bitwise_or_(y)),
        "bitwise_xor_" => return inplace(x.try_bitwise_xor_(y)),
        "bitwise_left_shift_" => return inplace(x.try_bitwise_left_shift_(y)),
        "bitwise_right_shift_" => return inplace(x.try_bitwise_right_shift_(y)),
        _ => return None,
    };
    outcome(r.map(|t| vec![t]))
}

#[test]
fn bitwise_ops_match_pytorch() {
    let cases = run_fixture("bitwise.txt", bitwise);
    assert_covers(&cases, BITWISE);
}

/// The operators agree with the methods on every tensor-tensor case of the fixture.
#[test]
fn bitwise_operators_match_methods() {
    let mut failures = Vec::new();
    for case in common::load("bitwise.txt").iter().filter(|c| matches!(c.expect, Expect::Outputs(_))) {
        let args = case.build_args();
        let (Arg::Tensor(x), Some(Arg::Tensor(y))) = (&args[0], args.get(1)) else { continue };
        let by_operator = match case.op.as_str() {
            "bitwise_and" => x & y,
            "bitwise_or" => x | y,
            "bitwise_xor" => x ^ y,
            "bitwise_left_shift" => x << y,
            "bitwise_right_shift" => x >> y,
            _ => continue,
        };
        if let Err(e) = case.check(&[by_operator]) {
            failures.push(format!("{}: {e}", case.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn fixture_reader() {
    let text = "# comment\ncase a/b\nop add\nattr dims 0 2\narg x tensor f16 [2] = 0.1 nan\nview x unsqueeze 0\n\
                arg y scalar float 2.5\nout out f16 [1,2] every 1 = -0.0 inf\ntol exact\nend\n\
                case err\nop neg\narg x tensor i64 [4] ramp 3 5 -2 1\nerror boom\nend\n";
    let cases = parse(text, "inline").unwrap();
    assert_eq!(cases.len(), 2);
    let c = &cases[0];
    assert_eq!((c.op.as_str(), c.attr_i64s("dims"), c.tol), ("add", vec![0, 2], Some(Tol::Exact)));
    let args = c.build_args();
    let x = args[0].tensor();
    assert_eq!((x.shape(), x.dtype(), args[1].scalar()), (&[1usize, 2][..], DType::F16, Scalar::Float(2.5)));
    let Values::Float(v) = read_values(x) else { panic!("f16 reads as floats") };
    assert_eq!(v[0], half::f16::from_f64(0.1).to_f64());
    assert!(v[1].is_nan());
    assert!(c.check(&[Tensor::new(&[[0.0f32, f32::INFINITY]]).to_dtype(DType::F16)]).is_ok());
    assert!(c.check(&[Tensor::new(&[[0.0f32, f32::NEG_INFINITY]]).to_dtype(DType::F16)]).is_err());
    assert!(c.check(&[Tensor::new(&[[0.0f32, f32::INFINITY]])]).is_err(), "dtype is checked");
    assert_eq!(read_values(cases[1].build_args()[0].tensor()), Values::Int(vec![-2, 1, -1, 2]));
    assert!(matches!(cases[1].expect, Expect::Error(_)));
    assert!(parse("case x\nop y\n", "inline").is_err(), "missing end");
    assert!(parse("case x\nop y\narg x tensor f32 [3] = 1 2\nend\n", "inline").is_err(), "too few values");
    assert!(parse("case x\nop y\nfrob\nend\n", "inline").is_err(), "unknown keyword");
}
