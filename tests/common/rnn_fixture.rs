//! Helpers of the recurrent-layer tests (`tests/nn_rnn.rs`, `tests/nn_rnn_packed.rs`): the
//! PyTorch fixtures written by `scripts/fixtures_rnn*.py`, comparison with them, and error
//! checks located at the test's line.
//!
//! Use it from a test file with `#[path = "common/rnn_fixture.rs"] mod rnn_fixture;`.

#![allow(dead_code)] // each test binary uses its own part of these helpers

use kiln::{Error, StateDict, Tensor};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

/// `tests/fixtures/{name}`, written by the script `script`.
pub fn load(name: &str, script: &str) -> StateDict {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    kiln::load(&path).unwrap_or_else(|e| panic!("tests/fixtures/{name} (python3 scripts/{script}): {e}"))
}

/// The fixture's cases: `(name, configuration)` from the `case:{name}` metadata.
pub fn cases(fx: &StateDict) -> Vec<(String, String)> {
    fx.metadata_entries()
        .iter()
        .filter_map(|(k, v)| k.strip_prefix("case:").map(|name| (name.to_string(), v.clone())))
        .collect()
}

/// The value of `key` in a `k=v;k=v` configuration.
pub fn field<'a>(text: &'a str, key: &str) -> &'a str {
    text.split(';')
        .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .unwrap_or_else(|| panic!("{key} missing from {text}"))
}

/// A numeric field of a configuration.
pub fn number<T: std::str::FromStr>(text: &str, key: &str) -> T
where
    T::Err: std::fmt::Display,
{
    field(text, key).parse().unwrap_or_else(|e| panic!("{key} in {text}: {e}"))
}

/// The case's PyTorch state dict (the entries under `{case}/sd/`).
pub fn case_state_dict(fx: &StateDict, case: &str) -> StateDict {
    let prefix = format!("{case}/sd/");
    let mut sd = StateDict::new();
    for (k, t) in fx.iter() {
        if let Some(key) = k.strip_prefix(&prefix) {
            sd.insert(key, t.clone());
        }
    }
    sd
}

/// Asserts `got` has `want`'s shape and values to f64 rounding (the products sum in another
/// order than PyTorch's, and the biases are folded together).
pub fn assert_close(what: &str, got: &Tensor, want: &Tensor) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let (g, w) = (got.contiguous().to_vec::<f64>(), want.to_vec::<f64>());
    for (k, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!((a - b).abs() <= 1e-12 + 1e-10 * b.abs(), "{what}[{k}]: kiln {a} vs PyTorch {b}");
    }
}

/// The keys and shapes in order, as the fixtures' `keys:` metadata spells them.
pub fn key_list(sd: &StateDict) -> String {
    sd.iter()
        .map(|(k, t)| format!("{k}:{}", t.shape().iter().map(usize::to_string).collect::<Vec<_>>().join("x")))
        .collect::<Vec<_>>()
        .join(",")
}

/// Asserts `e` is an error located in the test file `here` whose message contains every one
/// of `parts`.
pub fn assert_error(e: Result<(), Error>, here: &str, parts: &[&str]) {
    let e = e.expect_err("expected an error");
    let text = e.to_string();
    assert_eq!(e.location.file(), here, "{text}");
    for p in parts {
        assert!(text.contains(p), "{text:?} should contain {p:?}");
    }
}

/// The message of the panic `f` raises.
pub fn panic_text(f: impl FnOnce()) -> String {
    let e = catch_unwind(AssertUnwindSafe(f)).expect_err("expected a panic");
    e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}
