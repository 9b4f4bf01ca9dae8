//! What `KILN_DEBUG` itself prints: one warning for words that name no topic, the topic list
//! for `help`, and the user's line in a recompile report. Checked in child processes (the
//! topics are read once per process).

use kiln::prelude::*;

#[path = "common/child.rs"]
mod child;

/// A step called on two batch shapes (the second call recompiles), from this file's line
/// that `CALL_LINE` names.
fn run_two_shapes() {
    let mut step = kiln::compile(|x: &Tensor| (x * 2.0).relu().sum());
    for rows in [2, 5] {
        let x = Tensor::randn(&[rows, 3]);
        let out = step.call(&x); // CALL_LINE
        assert_eq!(out.shape(), &[] as &[usize]);
    }
}

/// The line of `step.call` in [`run_two_shapes`].
fn call_line() -> usize {
    let source = include_str!("debug_topics.rs");
    source.lines().position(|l| l.ends_with("// CALL_LINE")).expect("marked") + 1
}

#[test]
fn a_recompile_names_the_callers_line_and_an_unknown_topic_warns_once() {
    if child::is_child() {
        return run_two_shapes();
    }
    let err = child::stderr_of_child(
        "a_recompile_names_the_callers_line_and_an_unknown_topic_warns_once",
        "recompiles,fusions",
    );
    let at = format!("graph 0 of the step called at tests/debug_topics.rs:{}:", call_line());
    let line = err.lines().find(|l| l.starts_with("[kiln recompiles] ")).unwrap_or_else(|| panic!("{err}"));
    assert!(line.contains(&at) && line.contains(" recompiles: "), "{line}");
    assert!(line.contains("[2, 3]") && line.contains("[5, 3]"), "{line}");
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("[kiln] KILN_DEBUG: ignoring `fusions`")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(warnings[0].contains("topics: graph, fusion,"), "{err}");
}

#[test]
fn help_lists_the_topics() {
    if child::is_child() {
        return run_two_shapes();
    }
    let err = child::stderr_of_child("help_lists_the_topics", "help");
    assert!(err.starts_with("[kiln] KILN_DEBUG=topic,topic,… prints to standard error:\n"), "{err}");
    for topic in ["graph", "fusion", "kernels", "cache", "recompiles", "breaks", "tuning", "data", "profile", "all"] {
        assert!(err.lines().any(|l| l.starts_with(&format!("  {topic} "))), "{topic} missing: {err}");
    }
    assert!(!err.contains("[kiln recompiles]"), "help alone asks for no topic: {err}");
}
