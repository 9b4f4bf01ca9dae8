//! The PyTorch cases of `tests/fixtures/pad_interpolate.safetensors` (written by
//! `scripts/make_pad_fixtures.py`): each case's input, output, weights and the input's
//! gradient of `(out * w).sum()`, and its arguments from the file's metadata.

use kiln::{DType, Tensor};
use std::collections::BTreeMap;

/// One recorded case.
pub struct Case {
    /// The case's name.
    pub name: String,
    /// Its arguments (`op`, `mode`, `pad`, `size`, `scale`, …).
    pub args: BTreeMap<String, String>,
    /// The input, PyTorch's output, the weights and the input's gradient.
    pub x: Tensor,
    pub out: Tensor,
    pub w: Tensor,
    pub grad: Tensor,
}

impl Case {
    /// Argument `key`; panics naming the case if it is missing.
    pub fn arg(&self, key: &str) -> &str {
        self.args.get(key).unwrap_or_else(|| panic!("{}: no argument {key}", self.name))
    }

    /// A comma-separated argument as numbers.
    pub fn list<T: std::str::FromStr>(&self, key: &str) -> Vec<T> {
        self.arg(key).split(',').map(|v| v.parse().unwrap_or_else(|_| panic!("{}: bad {key}", self.name))).collect()
    }

    /// Runs `f` on the input, and returns every disagreement with PyTorch's output and
    /// gradient (none: an empty list).
    pub fn check(&self, f: impl Fn(&Tensor) -> Tensor) -> Vec<String> {
        let x = self.x.detach().requires_grad_(true);
        let out = f(&x);
        let mut bad = Vec::new();
        if out.shape() != self.out.shape() {
            bad.push(format!("{}: shape {:?}, PyTorch {:?}", self.name, out.shape(), self.out.shape()));
            return bad;
        }
        if out.dtype() != self.out.dtype() {
            bad.push(format!("{}: dtype {}, PyTorch {}", self.name, out.dtype(), self.out.dtype()));
        }
        let tol = if self.x.dtype() == DType::F64 { 1e-12 } else { 2e-6 };
        compare(&mut bad, &format!("{} output", self.name), &out, &self.out, tol);
        if out.numel() > 0 {
            (&out * &self.w).sum().backward();
            let g = x.grad().expect("the input's gradient");
            compare(&mut bad, &format!("{} gradient", self.name), &g, &self.grad, tol);
        }
        bad
    }
}

/// Appends a line to `bad` for the first element where `got` and `want` differ by more than
/// `tol · (1 + |want|)`.
fn compare(bad: &mut Vec<String>, what: &str, got: &Tensor, want: &Tensor, tol: f64) {
    let (g, w) = (got.to_dtype(DType::F64).to_vec::<f64>(), want.to_dtype(DType::F64).to_vec::<f64>());
    if let Some((i, (a, b))) = g.iter().zip(&w).enumerate().find(|(_, (a, b))| (*a - *b).abs() > tol * (1.0 + b.abs()))
    {
        bad.push(format!("{what}: element {i} is {a}, PyTorch {b}"));
    }
}

/// Every case whose `op` is one of `ops`, in name order.
pub fn cases(ops: &[&str]) -> Vec<Case> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/pad_interpolate.safetensors");
    let sd = kiln::load(path).expect("the fixture file");
    let mut out = Vec::new();
    for (name, spec) in sd.metadata_entries() {
        // Other metadata (none today) has no `op=` word.
        let args: BTreeMap<String, String> = spec
            .split_whitespace()
            .filter_map(|kv| kv.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
            .collect();
        if !args.get("op").is_some_and(|op| ops.contains(&op.as_str())) {
            continue;
        }
        let t = |part: &str| sd.get(&format!("{name}.{part}")).unwrap_or_else(|| panic!("{name}.{part}")).clone();
        out.push(Case { name: name.clone(), x: t("x"), out: t("out"), w: t("w"), grad: t("grad"), args });
    }
    out
}
