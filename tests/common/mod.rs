//! Shared helpers for the integration tests: the reader of the PyTorch reference fixtures in
//! `tests/fixtures/` and the comparison of kiln's results with them.
//!
//! Use it from a test file with `mod common;`, then either
//! `common::run_fixture("unary.txt", |case, args| ...)`, which runs every case through a
//! closure mapping the case's op to kiln and asserts once at the end with every failure listed,
//! or [`load`] and [`Case::check`] for finer control.
//!
//! # Fixture format (version 1)
//!
//! Written by `scripts/make_fixtures.py` (the full description is at the top of that script).
//! A text file of cases; blank lines and lines starting with `#` are ignored:
//!
//! ```text
//! case add/f32+i64/bcast            unique name
//! op add                            PyTorch's op name
//! attr dim 1                        optional attributes, the value is the rest of the line
//! arg x tensor f32 [3,1] = 1 2 nan  a tensor operand: dtype, shape, row-major values
//! arg y tensor i64 [300,401] ramp 7919 251 -125 16
//!                                   or generated: value i = ((i*MUL) % MOD + OFF) / DIV
//! view x expand 3 4                 views applied in order to arg x
//! arg s scalar float 2.5            a Python number (int, float or bool)
//! out out f32 [3,4] = ...           expected output(s), all elements ...
//! out out f32 [300,401] every 997 = ...   ... or those at flat indices 0, K, 2K, ...
//! error <message>                   instead of `out`: PyTorch raised, kiln must fail too
//! tol exact | tol RTOL ATOL         optional: overrides the per-dtype tolerance
//! end
//! ```
//!
//! Dtypes are `f32 f64 f16 bf16 i64 i32 u8 bool`; shapes `[2,3]`, `[]` (0-dim), `[0,3]`. Floats
//! are Python reprs (`nan`, `inf`, `-inf`, `-0.0` spelled out), bools `0`/`1`.
//!
//! # Tolerances
//!
//! Without a `tol` line a float output passes when `|got - expected| <= atol + rtol * |expected|`
//! with, per dtype ([`default_tol`]):
//!
//! | dtype | rtol              | atol   | meaning                                    |
//! |-------|-------------------|--------|--------------------------------------------|
//! | f64   | 1e-12             | 1e-12  | libm and PyTorch's SLEEF differ by an ulp  |
//! | f32   | 1e-6              | 1e-6   | a few ulp (transcendental functions)       |
//! | f16   | 2^-10 ≈ 9.8e-4    | 1e-6   | one ulp of the format                      |
//! | bf16  | 2^-7 ≈ 7.8e-3     | 1e-6   | one ulp of the format                      |
//! | ints, bool | exact        |        |                                            |
//!
//! `tol exact` (the fixtures use it for ops IEEE arithmetic rounds correctly: add, mul, sqrt,
//! floor, comparisons, ...) asks for the same values. In every mode NaN matches NaN only,
//! infinities must match in sign, and `-0.0` equals `0.0`. Dtype and shape must always match.
#![allow(dead_code)] // each test binary uses its own part of these helpers

use kiln::{DType, Scalar, Tensor};
use kiln_runtime::{match_dtype, Element};
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Values of a tensor: floats (exact values of their dtype, as f64) or integers (and bools).
#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    /// Floating-point values.
    Float(Vec<f64>),
    /// Integer or bool (0/1) values.
    Int(Vec<i64>),
}

impl Values {
    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Values::Float(v) => v.len(),
            Values::Int(v) => v.len(),
        }
    }

    /// The value at `i`, formatted for a message.
    fn show(&self, i: usize) -> String {
        match self {
            Values::Float(v) => format!("{:?}", v[i]),
            Values::Int(v) => v[i].to_string(),
        }
    }

    /// Every `every`-th value (all of them for 1).
    fn sampled(self, every: usize) -> Values {
        match self {
            Values::Float(v) => Values::Float(v.into_iter().step_by(every).collect()),
            Values::Int(v) => Values::Int(v.into_iter().step_by(every).collect()),
        }
    }
}

/// Where a tensor argument's base values come from.
#[derive(Clone, Debug)]
pub enum Data {
    /// Row-major values.
    Values(Values),
    /// Value `i` is `((i * mul) % modulo + offset) / div`.
    Ramp { mul: i64, modulo: i64, offset: i64, div: i64 },
}

/// One view applied to a tensor argument: `t`, `transpose`, `permute`, `narrow`, `select`,
/// `expand`, `unsqueeze`, `squeeze`, `view`, with its integer arguments.
#[derive(Clone, Debug)]
pub struct ViewStep {
    /// The view's name.
    pub name: String,
    /// Its arguments.
    pub args: Vec<i64>,
}

/// A tensor argument: a contiguous base of `dtype` and `shape`, then views.
#[derive(Clone, Debug)]
pub struct TensorSpec {
    /// The base tensor's dtype.
    pub dtype: DType,
    /// The base tensor's shape.
    pub shape: Vec<usize>,
    /// The base tensor's values.
    pub data: Data,
    /// The views, in order.
    pub views: Vec<ViewStep>,
}

/// An argument of a case.
#[derive(Clone, Debug)]
pub enum ArgSpec {
    /// A tensor.
    Tensor(TensorSpec),
    /// A Python number.
    Scalar(Scalar),
}

/// An argument built for kiln.
#[derive(Clone, Debug)]
pub enum Arg {
    /// A tensor (already viewed).
    Tensor(Tensor),
    /// A Python number.
    Scalar(Scalar),
}

impl Arg {
    /// The tensor, or a panic for a scalar argument.
    pub fn tensor(&self) -> &Tensor {
        match self {
            Arg::Tensor(t) => t,
            Arg::Scalar(s) => panic!("expected a tensor argument, got the scalar {s:?}"),
        }
    }

    /// The scalar, or a panic for a tensor argument.
    pub fn scalar(&self) -> Scalar {
        match self {
            Arg::Scalar(s) => *s,
            Arg::Tensor(t) => panic!("expected a scalar argument, got a tensor of shape {:?}", t.shape()),
        }
    }
}

/// An expected output.
#[derive(Clone, Debug)]
pub struct Expected {
    /// The output's name (`out`, or `out0`, `out1`, ... for tuples).
    pub name: String,
    /// Its dtype.
    pub dtype: DType,
    /// Its shape.
    pub shape: Vec<usize>,
    /// 1 when `values` holds every element; K when it holds those at 0, K, 2K, ...
    pub every: usize,
    /// The values.
    pub values: Values,
}

/// What a case expects.
#[derive(Clone, Debug)]
pub enum Expect {
    /// These outputs, in order.
    Outputs(Vec<Expected>),
    /// A failure (PyTorch's message, for reference).
    Error(String),
}

/// How float outputs are compared.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tol {
    /// The same values.
    Exact,
    /// `|got - expected| <= atol + rtol * |expected|`.
    Close {
        /// Relative tolerance.
        rtol: f64,
        /// Absolute tolerance.
        atol: f64,
    },
}

/// The default tolerance for outputs of `dtype` (see the module docs).
pub fn default_tol(dtype: DType) -> Tol {
    match dtype {
        DType::F64 => Tol::Close { rtol: 1e-12, atol: 1e-12 },
        DType::F32 => Tol::Close { rtol: 1e-6, atol: 1e-6 },
        DType::F16 => Tol::Close { rtol: 2f64.powi(-10), atol: 1e-6 },
        DType::BF16 => Tol::Close { rtol: 2f64.powi(-7), atol: 1e-6 },
        _ => Tol::Exact,
    }
}

/// One case of a fixture file.
#[derive(Clone, Debug)]
pub struct Case {
    /// Its unique name.
    pub name: String,
    /// The file and line it starts at, for messages.
    pub location: String,
    /// The op to run.
    pub op: String,
    /// Attributes, in file order.
    pub attrs: Vec<(String, String)>,
    /// Arguments, in call order, with their names.
    pub args: Vec<(String, ArgSpec)>,
    /// The expected outputs or failure.
    pub expect: Expect,
    /// A tolerance overriding [`default_tol`].
    pub tol: Option<Tol>,
}

impl Case {
    /// The raw value of attribute `key`.
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Attribute `key` parsed as one value, or a panic naming the case.
    pub fn attr_as<T: std::str::FromStr>(&self, key: &str) -> T {
        let raw = self.attr(key).unwrap_or_else(|| panic!("{}: no attribute {key}", self.name));
        raw.parse().unwrap_or_else(|_| panic!("{}: attribute {key} = {raw:?} does not parse", self.name))
    }

    /// Attribute `key` parsed as a whitespace-separated list of integers.
    pub fn attr_i64s(&self, key: &str) -> Vec<i64> {
        let raw = self.attr(key).unwrap_or_else(|| panic!("{}: no attribute {key}", self.name));
        raw.split_whitespace()
            .map(|t| t.parse().unwrap_or_else(|_| panic!("{}: attribute {key} = {raw:?}", self.name)))
            .collect()
    }

    /// Attribute `key` parsed as one value, `None` when the case has no such attribute.
    pub fn attr_opt<T: std::str::FromStr>(&self, key: &str) -> Option<T> {
        self.attr(key).map(|_| self.attr_as(key))
    }

    /// Attribute `key` as a flag: `1` is true; `0` or no attribute is false.
    pub fn attr_flag(&self, key: &str) -> bool {
        match self.attr(key) {
            None | Some("0") => false,
            Some("1") => true,
            Some(other) => panic!("{}: attribute {key} = {other:?} is not a flag (0 or 1)", self.name),
        }
    }

    /// Attribute `key` as a list of integers (empty for `attr dims` with no value), `None` when
    /// the case has no such attribute.
    pub fn attr_opt_i64s(&self, key: &str) -> Option<Vec<i64>> {
        self.attr(key).map(|_| self.attr_i64s(key))
    }

    /// True when some tensor argument is viewed through `step` (`"expand"`, `"t"`, ...).
    pub fn has_view(&self, step: &str) -> bool {
        self.args.iter().any(|(_, a)| matches!(a, ArgSpec::Tensor(s) if s.views.iter().any(|v| v.name == step)))
    }

    /// The arguments built as kiln tensors (with their views applied) and scalars.
    pub fn build_args(&self) -> Vec<Arg> {
        self.args
            .iter()
            .map(|(_, a)| match a {
                ArgSpec::Tensor(t) => Arg::Tensor(t.build()),
                ArgSpec::Scalar(s) => Arg::Scalar(*s),
            })
            .collect()
    }

    /// Compares kiln's outputs with the expected ones: `Err` lists every mismatch.
    pub fn check(&self, outs: &[Tensor]) -> Result<(), String> {
        let Expect::Outputs(expected) = &self.expect else {
            return Err(format!("PyTorch raised an error here but kiln returned {} output(s)", outs.len()));
        };
        if outs.len() != expected.len() {
            return Err(format!("{} outputs expected, got {}", expected.len(), outs.len()));
        }
        let errs: Vec<String> = outs
            .iter()
            .zip(expected)
            .filter_map(|(got, exp)| {
                compare(got, exp, self.tol.unwrap_or(default_tol(exp.dtype)))
                    .err()
                    .map(|e| format!("{}: {e}", exp.name))
            })
            .collect();
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs.join("; "))
        }
    }
}

impl TensorSpec {
    /// The kiln tensor: the contiguous base, then the views.
    pub fn build(&self) -> Tensor {
        let n: usize = self.shape.iter().product();
        let values = match &self.data {
            Data::Values(v) => v.clone(),
            Data::Ramp { mul, modulo, offset, div } => {
                let k = (0..n as i64).map(|i| (i * mul) % modulo + offset);
                if self.dtype.is_float() {
                    Values::Float(k.map(|k| k as f64 / *div as f64).collect())
                } else {
                    Values::Int(k.map(|k| k / div).collect())
                }
            }
        };
        let base = tensor_from_values(&values, self.dtype, &self.shape);
        self.views.iter().fold(base, |t, v| apply_view(&t, v))
    }
}

/// A contiguous kiln tensor of `dtype` and `shape` holding `values` (exact in `dtype`).
pub fn tensor_from_values(values: &Values, dtype: DType, shape: &[usize]) -> Tensor {
    match values {
        Values::Float(v) => {
            match_dtype!(dtype, |T| Tensor::from_vec(v.iter().map(|&x| T::from_f64(x)).collect::<Vec<T>>(), shape))
        }
        Values::Int(v) => {
            match_dtype!(dtype, |T| Tensor::from_vec(v.iter().map(|&x| T::from_i64(x)).collect::<Vec<T>>(), shape))
        }
    }
}

/// Applies one view step with kiln's view ops.
pub fn apply_view(t: &Tensor, v: &ViewStep) -> Tensor {
    let a = &v.args;
    match v.name.as_str() {
        "t" => t.t(),
        "transpose" => t.transpose(a[0], a[1]),
        "permute" => t.permute(a),
        "narrow" => t.narrow(a[0], a[1], a[2] as usize),
        "select" => t.select(a[0], a[1]),
        "expand" => t.expand(a),
        "unsqueeze" => t.unsqueeze(a[0]),
        "squeeze" => t.squeeze_dim(a[0]),
        "view" => t.view(a),
        other => panic!("unknown view step {other:?}"),
    }
}

/// A tensor's values in row-major order, read in its own dtype (no cast involved).
pub fn read_values(t: &Tensor) -> Values {
    let dtype = t.dtype();
    if dtype.is_float() {
        Values::Float(match_dtype!(dtype, |T| t.to_vec::<T>().into_iter().map(|x| x.to_f64()).collect()))
    } else {
        Values::Int(match_dtype!(dtype, |T| t.to_vec::<T>().into_iter().map(|x| x.to_i64()).collect()))
    }
}

/// True when two tensors have the same dtype, shape and values (NaN equal to NaN).
pub fn same_values(a: &Tensor, b: &Tensor) -> bool {
    a.dtype() == b.dtype()
        && a.shape() == b.shape()
        && match (read_values(a), read_values(b)) {
            (Values::Float(x), Values::Float(y)) => x.iter().zip(&y).all(|(p, q)| float_close(*p, *q, Tol::Exact)),
            (x, y) => x == y,
        }
}

/// True when `got` matches `exp` under `tol` (NaN only matches NaN; infinities by sign).
pub fn float_close(got: f64, exp: f64, tol: Tol) -> bool {
    if exp.is_nan() || got.is_nan() {
        return exp.is_nan() && got.is_nan();
    }
    if exp.is_infinite() || got.is_infinite() {
        return exp == got;
    }
    match tol {
        Tol::Exact => got == exp,
        Tol::Close { rtol, atol } => (got - exp).abs() <= atol + rtol * exp.abs(),
    }
}

/// Compares a kiln output with an expected one: dtype, shape, then values.
pub fn compare(got: &Tensor, exp: &Expected, tol: Tol) -> Result<(), String> {
    if got.dtype() != exp.dtype || got.shape() != exp.shape.as_slice() {
        return Err(format!(
            "expected dtype {} shape {:?}, got dtype {} shape {:?}",
            exp.dtype,
            exp.shape,
            got.dtype(),
            got.shape()
        ));
    }
    let values = read_values(got).sampled(exp.every);
    if values.len() != exp.values.len() {
        return Err(format!("{} values expected, got {}", exp.values.len(), values.len()));
    }
    let bad: Vec<usize> = match (&values, &exp.values) {
        (Values::Float(g), Values::Float(e)) => (0..g.len()).filter(|&i| !float_close(g[i], e[i], tol)).collect(),
        (Values::Int(g), Values::Int(e)) => (0..g.len()).filter(|&i| g[i] != e[i]).collect(),
        _ => unreachable!("same dtype, same kind of values"),
    };
    if bad.is_empty() {
        return Ok(());
    }
    let shown: Vec<String> = bad
        .iter()
        .take(6)
        .map(|&i| format!("[{}] expected {} got {}", i * exp.every, exp.values.show(i), values.show(i)))
        .collect();
    Err(format!(
        "{} of {} values differ ({tol:?}): {}{}",
        bad.len(),
        values.len(),
        shown.join(", "),
        if bad.len() > 6 { ", ..." } else { "" }
    ))
}

/// The message of a caught panic.
pub fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(non-string panic)".into())
}

thread_local!(static QUIET: Cell<bool> = const { Cell::new(false) });

/// `catch_unwind` without the panic message on stderr: for ops expected to fail (kiln's
/// panicking forms). Panics elsewhere are reported as usual.
pub fn catch_quietly<R>(f: impl FnOnce() -> R) -> std::thread::Result<R> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                previous(info)
            }
        }));
    });
    let was = QUIET.with(|q| q.replace(true));
    let r = catch_unwind(AssertUnwindSafe(f));
    QUIET.with(|q| q.set(was));
    r
}

/// What an op dispatcher returns: `None` when it does not know the case's op, else the
/// outputs or kiln's error message (panics are caught too).
pub type Outcome = Option<Result<Vec<Tensor>, String>>;

/// A kiln result as a dispatcher's outcome: the outputs, or the error's message.
pub fn outcome(r: kiln::Result<Vec<Tensor>>) -> Outcome {
    Some(r.map_err(|e| e.to_string()))
}

/// Runs one case: builds its args, calls `run`, compares with the expectation.
pub fn run_case(case: &Case, run: &dyn Fn(&Case, &[Arg]) -> Outcome) -> Result<(), String> {
    let result = catch_quietly(|| run(case, &case.build_args()));
    let outcome = match result {
        Ok(None) => return Err(format!("op {:?} is not mapped to kiln in this test", case.op)),
        Ok(Some(r)) => r,
        Err(p) => Err(panic_message(&*p)),
    };
    match (outcome, &case.expect) {
        (Ok(outs), _) => case.check(&outs),
        (Err(_), Expect::Error(_)) => Ok(()),
        (Err(e), Expect::Outputs(_)) => Err(format!("kiln failed: {e}")),
    }
}

/// Loads `tests/fixtures/<file>`, runs every case through `run`, and panics at the end with
/// every failing case listed (name, location, what differed). Returns the cases, so that the
/// caller can check coverage.
pub fn run_fixture(file: &str, run: impl Fn(&Case, &[Arg]) -> Outcome) -> Vec<Case> {
    let cases = load(file);
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|c| run_case(c, &run).err().map(|e| format!("{} ({}): {e}", c.name, c.location)))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases in {file} failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    cases
}

/// Runs every error case of `tests/fixtures/<file>` through `run` and asserts that kiln's
/// message starts with the op's name (`op_name(case)`, then `:`) and names the caller's line in
/// `caller` (the test file, `file!()`): `#[track_caller]` reaches the user's code. Returns how
/// many error cases were checked.
pub fn assert_errors_named(
    file: &str,
    caller: &str,
    run: impl Fn(&Case, &[Arg]) -> Outcome,
    op_name: impl Fn(&Case) -> String,
) -> usize {
    let cases: Vec<Case> = load(file).into_iter().filter(|c| matches!(c.expect, Expect::Error(_))).collect();
    let at = format!("(at {caller}:");
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|c| {
            let message = match catch_quietly(|| run(c, &c.build_args())) {
                Ok(Some(Err(e))) => e,
                Ok(Some(Ok(_))) => return Some(format!("{}: kiln did not fail", c.name)),
                Ok(None) => return Some(format!("{}: op {:?} is not mapped", c.name, c.op)),
                Err(p) => panic_message(&*p),
            };
            let named = message.starts_with(&format!("{}: ", op_name(c))) && message.contains(&at);
            (!named).then(|| format!("{}: {message:?} does not start with `{}: ` or lacks `{at}`", c.name, op_name(c)))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} error messages in {file}:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    cases.len()
}

/// Asserts that every op in `ops` has at least one case in `cases`.
pub fn assert_covers(cases: &[Case], ops: &[&str]) {
    let missing: Vec<&str> = ops.iter().copied().filter(|op| !cases.iter().any(|c| c.op == *op)).collect();
    assert!(missing.is_empty(), "no fixture cases for {missing:?}");
}

/// Reads and parses `tests/fixtures/<file>`; a malformed file is a panic naming the line.
pub fn load(file: &str) -> Vec<Case> {
    let path = format!("{}/tests/fixtures/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    parse(&text, file).unwrap_or_else(|e| panic!("{e}"))
}

/// Parses a fixture file's text (`file` names it in messages).
pub fn parse(text: &str, file: &str) -> Result<Vec<Case>, String> {
    let mut cases = Vec::new();
    let mut current: Option<Case> = None;
    for (n, line) in text.lines().enumerate() {
        let at = format!("{file}:{}", n + 1);
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, rest) = line.split_once(' ').unwrap_or((line, ""));
        let err = |msg: &str| format!("{at}: {msg}: {line:?}");
        if key == "case" {
            if current.is_some() {
                return Err(err("`case` before the previous case's `end`"));
            }
            current = Some(Case {
                name: rest.to_string(),
                location: at.clone(),
                op: String::new(),
                attrs: Vec::new(),
                args: Vec::new(),
                expect: Expect::Outputs(Vec::new()),
                tol: None,
            });
            continue;
        }
        let case = current.as_mut().ok_or_else(|| err("line outside a case"))?;
        match key {
            "op" => case.op = rest.to_string(),
            "attr" => {
                let (k, v) = rest.split_once(' ').unwrap_or((rest, ""));
                case.attrs.push((k.to_string(), v.to_string()));
            }
            "arg" => case.args.push(parse_arg(rest).map_err(|e| err(&e))?),
            "view" => {
                let mut t = rest.split_whitespace();
                let name = t.next().ok_or_else(|| err("view without an argument name"))?;
                let step = ViewStep {
                    name: t.next().ok_or_else(|| err("view without a step"))?.to_string(),
                    args: t.map(|x| x.parse().map_err(|_| err("bad view argument"))).collect::<Result<_, _>>()?,
                };
                match case.args.iter_mut().find(|(n, _)| n == name) {
                    Some((_, ArgSpec::Tensor(spec))) => spec.views.push(step),
                    _ => return Err(err("view of an unknown or scalar argument")),
                }
            }
            "out" => match &mut case.expect {
                Expect::Outputs(outs) => outs.push(parse_out(rest).map_err(|e| err(&e))?),
                Expect::Error(_) => return Err(err("`out` in a case expecting an error")),
            },
            "error" => case.expect = Expect::Error(rest.to_string()),
            "tol" => {
                let t: Vec<&str> = rest.split_whitespace().collect();
                case.tol = Some(match t.as_slice() {
                    ["exact"] => Tol::Exact,
                    [r, a] => Tol::Close {
                        rtol: r.parse().map_err(|_| err("bad rtol"))?,
                        atol: a.parse().map_err(|_| err("bad atol"))?,
                    },
                    _ => return Err(err("expected `tol exact` or `tol RTOL ATOL`")),
                })
            }
            "end" => {
                let case = current.take().expect("checked above");
                if case.op.is_empty() {
                    return Err(err("case without `op`"));
                }
                if cases.iter().any(|c: &Case| c.name == case.name) {
                    return Err(err("duplicate case name"));
                }
                cases.push(case);
            }
            _ => return Err(err("unknown keyword")),
        }
    }
    match current {
        Some(c) => Err(format!("{file}: case {} has no `end`", c.name)),
        None => Ok(cases),
    }
}

/// `NAME tensor DTYPE SHAPE DATA` or `NAME scalar KIND VALUE`.
fn parse_arg(rest: &str) -> Result<(String, ArgSpec), String> {
    let t: Vec<&str> = rest.split_whitespace().collect();
    match t.as_slice() {
        [name, "scalar", kind, v] => {
            let s = match *kind {
                "int" => Scalar::Int(v.parse().map_err(|_| "bad int scalar")?),
                "float" => Scalar::Float(parse_f64(v)?),
                "bool" => Scalar::Bool(*v == "1"),
                _ => return Err(format!("unknown scalar kind {kind}")),
            };
            Ok((name.to_string(), ArgSpec::Scalar(s)))
        }
        [name, "tensor", dtype, shape, data @ ..] => {
            let (dtype, shape) = (parse_dtype(dtype)?, parse_shape(shape)?);
            let data = match data {
                ["=", vals @ ..] => Data::Values(parse_values(vals, dtype, shape.iter().product())?),
                ["ramp", m, md, o, d] => {
                    let p = |s: &str| s.parse::<i64>().map_err(|_| format!("bad ramp parameter {s}"));
                    Data::Ramp { mul: p(m)?, modulo: p(md)?, offset: p(o)?, div: p(d)? }
                }
                _ => return Err("expected `= values` or `ramp MUL MOD OFF DIV`".into()),
            };
            Ok((name.to_string(), ArgSpec::Tensor(TensorSpec { dtype, shape, data, views: Vec::new() })))
        }
        _ => Err("expected `arg NAME tensor ...` or `arg NAME scalar ...`".into()),
    }
}

/// `NAME DTYPE SHAPE [every K] = values`.
fn parse_out(rest: &str) -> Result<Expected, String> {
    let t: Vec<&str> = rest.split_whitespace().collect();
    let (name, dtype, shape, every, vals) = match t.as_slice() {
        [name, dtype, shape, "every", k, "=", vals @ ..] => {
            (name, dtype, shape, k.parse().map_err(|_| "bad `every`")?, vals)
        }
        [name, dtype, shape, "=", vals @ ..] => (name, dtype, shape, 1usize, vals),
        _ => return Err("expected `out NAME DTYPE SHAPE [every K] = values`".into()),
    };
    let (dtype, shape) = (parse_dtype(dtype)?, parse_shape(shape)?);
    let n: usize = shape.iter().product();
    let values = parse_values(vals, dtype, n.div_ceil(every.max(1)))?;
    Ok(Expected { name: name.to_string(), dtype, shape, every, values })
}

/// A dtype by its fixture name (`f32`, `i64`, `bool`, …).
pub fn parse_dtype(s: &str) -> Result<DType, String> {
    Ok(match s {
        "f32" => DType::F32,
        "f64" => DType::F64,
        "f16" => DType::F16,
        "bf16" => DType::BF16,
        "i64" => DType::I64,
        "i32" => DType::I32,
        "u8" => DType::U8,
        "bool" => DType::Bool,
        _ => return Err(format!("unknown dtype {s}")),
    })
}

fn parse_shape(s: &str) -> Result<Vec<usize>, String> {
    let inner = s.strip_prefix('[').and_then(|s| s.strip_suffix(']')).ok_or_else(|| format!("bad shape {s}"))?;
    if inner.is_empty() {
        return Ok(Vec::new());
    }
    inner.split(',').map(|d| d.parse().map_err(|_| format!("bad shape {s}"))).collect()
}

fn parse_f64(s: &str) -> Result<f64, String> {
    match s {
        "nan" => Ok(f64::NAN),
        "inf" => Ok(f64::INFINITY),
        "-inf" => Ok(f64::NEG_INFINITY),
        _ => s.parse().map_err(|_| format!("bad float {s}")),
    }
}

/// `n` values of `dtype`, floats rounded to the dtype (exactly as the script wrote them).
fn parse_values(tokens: &[&str], dtype: DType, n: usize) -> Result<Values, String> {
    if tokens.len() != n {
        return Err(format!("{n} values expected, found {}", tokens.len()));
    }
    if dtype.is_float() {
        let round = |x: f64| match_dtype!(dtype, |T| T::from_f64(x).to_f64());
        Ok(Values::Float(tokens.iter().map(|t| parse_f64(t).map(round)).collect::<Result<_, _>>()?))
    } else {
        Ok(Values::Int(
            tokens.iter().map(|t| t.parse().map_err(|_| format!("bad integer {t}"))).collect::<Result<_, _>>()?,
        ))
    }
}

/// Runs every case that expects outputs, failing with the list of those that differ, and
/// checks that each name in `coverage` has such a case.
#[allow(dead_code)]
pub fn assert_cases_match(what: &str, cases: &[Case], run: &dyn Fn(&Case, &[Arg]) -> Outcome, coverage: &[&str]) {
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|c| run_case(c, run).err().map(|e| format!("{} ({}): {e}", c.name, c.location)))
        .collect();
    assert!(failures.is_empty(), "{} of {} {what} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
    for name in coverage {
        assert!(
            cases.iter().any(|c| c.name.contains(name) && matches!(c.expect, Expect::Outputs(_))),
            "no {what} case for {name}"
        );
    }
}

/// Runs every case that expects an error (at least `min` of them): each must fail with a message
/// that starts with `op: ` and names the caller's line in `caller_file`.
#[allow(dead_code)]
pub fn assert_error_cases(cases: &[Case], run: &dyn Fn(&Case, &[Arg]) -> Outcome, min: usize, caller_file: &str) {
    let errors: Vec<&Case> = cases.iter().filter(|c| matches!(c.expect, Expect::Error(_))).collect();
    assert!(errors.len() >= min, "{} error cases, expected at least {min}", errors.len());
    for c in errors {
        let m = match catch_quietly(|| run(c, &c.build_args())) {
            Ok(Some(Err(m))) => m,
            Ok(_) => panic!("{}: kiln did not fail", c.name),
            Err(p) => panic_message(&*p),
        };
        assert!(m.starts_with(&format!("{}: ", c.op)) && m.contains(&format!("(at {caller_file}:")), "{}: {m}", c.name);
    }
}
