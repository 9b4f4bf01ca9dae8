//! Code the examples share (`mod common;` in an example): not an example itself.

// Each example compiles this module on its own and uses part of it.
#![allow(dead_code)]

pub mod lm;
pub mod mnist;

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

/// A progress bar of `len` steps labelled `prefix`, and whether to also print plain log lines
/// (stderr is not a terminal, so the bar's redraws would not show, e.g. in CI logs).
pub fn progress(len: usize, prefix: &str) -> (ProgressBar, bool) {
    let bar = ProgressBar::new(len as u64);
    bar.set_style(ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed})").expect("template"));
    bar.set_prefix(prefix.to_string());
    (bar, !std::io::stderr().is_terminal())
}
