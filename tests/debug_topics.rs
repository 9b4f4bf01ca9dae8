//! What kiln tells a user about a compiled step: one warning for `KILN_DEBUG` words that name
//! no topic, the topic list for `help`, the user's line in a recompile report and in a graph
//! break inside kiln's own code (printing a tensor), kernel listings tied to the user's source
//! lines, and the files `KILN_DUMP_DIR` gets (the `.dot`, its `.svg` when Graphviz is on
//! `PATH`, each kernel's listing and code). These are checked in child processes (the
//! environment is read once per process).

use kiln::prelude::*;

#[path = "common/child.rs"]
mod child;

/// A step called on two batch shapes (the second call recompiles), from this file's line
/// that `CALL_LINE` names.
fn run_two_shapes() {
    let mut step = kiln::compile(|x: &Tensor| (x * 2.0).relu().sum());
    for rows in [2, 5] {
        let x = Tensor::randn([rows, 3]);
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
    for topic in [
        "graph",
        "fusion",
        "kernels",
        "clif",
        "cuda",
        "cache",
        "recompiles",
        "breaks",
        "tuning",
        "data",
        "profile",
        "all",
    ] {
        assert!(err.lines().any(|l| l.starts_with(&format!("  {topic} "))), "{topic} missing: {err}");
    }
    assert!(!err.contains("[kiln recompiles]"), "help alone asks for no topic: {err}");
}

/// A step that prints a value it computed (a graph break inside kiln's `Display` code).
fn run_printing_step() {
    let mut step = kiln::compile(|x: &Tensor| {
        let y = (x * 2.0).exp();
        println!("{y}");
        y.sum()
    });
    step.call(&Tensor::ones([2]));
}

#[test]
fn a_break_inside_kilns_display_names_the_users_function() {
    if child::is_child() {
        return run_printing_step();
    }
    let err = child::stderr_of_child("a_break_inside_kilns_display_names_the_users_function", "breaks");
    let line = err.lines().find(|l| l.starts_with("[kiln breaks] graph break at ")).unwrap_or_else(|| panic!("{err}"));
    assert!(line.contains("debug_topics::run_printing_step"), "{line}");
    assert!(line.contains("(through ") && line.contains("display.rs"), "{line}");
}

#[test]
fn a_kernel_listing_ties_each_line_to_its_node_and_source_line() {
    let w = Tensor::randn([3, 4]).requires_grad_(true);
    let x = Tensor::randn([3, 4]);
    let mut step = kiln::compile(|(w, x): (&Tensor, &Tensor)| {
        let loss = (w * x).tanh().sum(); // LISTING_LINE
        loss.backward();
        loss
    });
    step.call((&w, &x));
    let source = include_str!("debug_topics.rs");
    let line = source.lines().position(|l| l.ends_with("// LISTING_LINE")).expect("marked") + 1;
    let kernels = step.kernels();
    let forward = kernels.iter().find(|k| k.listing.contains("tanh(")).unwrap_or_else(|| panic!("{kernels:#?}"));
    let text = &forward.listing;
    assert!(text.starts_with(&format!("kernel {} ({}): ", forward.name, forward.backend)), "{text}");
    let tanh = text.lines().find(|l| l.contains(" = tanh(v")).unwrap_or_else(|| panic!("{text}"));
    assert!(tanh.contains(" f32 ") && tanh.contains(&format!("tests/debug_topics.rs:{line}:")), "{text}");
    assert!(text.lines().any(|l| l.starts_with("    in0: f32 ")), "{text}");
    // The backward of tanh (1 - y²) times the incoming gradient: labelled as tanh's backward,
    // at the forward op's line.
    let backward = kernels.iter().flat_map(|k| k.listing.lines()).find(|l| l.contains("backward of Tanh"));
    let backward = backward.unwrap_or_else(|| panic!("{kernels:#?}"));
    assert!(backward.contains(&format!("tests/debug_topics.rs:{line}:")), "{backward}");
}

#[test]
fn ops_kiln_writes_as_several_ops_list_the_users_line() {
    let x = Tensor::randn([4, 5]);
    let mut step = kiln::compile(|x: &Tensor| {
        F::dropout(&x.log_softmax(1), 0.5, true) // COMPOSITE_LINE
    });
    step.call(&x);
    let source = include_str!("debug_topics.rs");
    let line = source.lines().position(|l| l.ends_with("// COMPOSITE_LINE")).expect("marked") + 1;
    let kernels = step.kernels();
    let ops: Vec<&str> = kernels.iter().flat_map(|k| k.listing.lines()).filter(|l| l.contains(".rs:")).collect();
    let at_user = format!("tests/debug_topics.rs:{line}:");
    assert!(ops.iter().any(|l| l.contains(" exp") || l.contains("exp(")), "{kernels:#?}");
    assert!(ops.iter().any(|l| l.contains(" mul ")), "the dropout mask's product: {kernels:#?}");
    for op in &ops {
        assert!(op.contains(&at_user), "log_softmax's and dropout's ops name the user's line: {op}");
    }
}

/// A compiled step whose kernels' names it prints, one per line, for the dump test.
fn run_and_print_kernel_names() {
    let w = Tensor::randn([3, 4]).requires_grad_(true);
    let mut step = kiln::compile(|w: &Tensor| {
        let loss = (w * 2.0).tanh().sum();
        loss.backward();
        loss
    });
    step.call(&w);
    for k in step.kernels() {
        eprintln!("KERNEL {}", k.name);
    }
}

#[test]
fn the_dump_dir_holds_the_graph_and_each_kernels_listing_and_code() {
    if child::is_child() {
        return run_and_print_kernel_names();
    }
    let dir = std::env::temp_dir().join(format!("kiln-dump-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let err = child::stderr_of_child_with(
        "the_dump_dir_holds_the_graph_and_each_kernels_listing_and_code",
        &[("KILN_DUMP_DIR", dir.to_str().unwrap())],
    );
    let names: Vec<&str> = err.lines().filter_map(|l| l.strip_prefix("KERNEL ")).collect();
    assert!(!names.is_empty(), "{err}");
    for name in &names {
        let listing = std::fs::read_to_string(dir.join(format!("{name}.txt"))).expect("a listing per kernel");
        assert!(listing.starts_with(&format!("kernel {name} (")), "{listing}");
        assert!(dir.join(format!("{name}.clif")).exists(), "the CPU kernel's code beside its listing");
    }
    let dot = std::fs::read_to_string(dir.join("step-0.dot")).expect("the graph");
    assert!(
        dot.starts_with("digraph") && names.iter().all(|n| dot.contains(n)),
        "every kernel named in the graph: {dot}"
    );
    match std::process::Command::new("dot").arg("-V").output() {
        Ok(_) => {
            let svg =
                std::fs::read_to_string(dir.join("step-0.svg")).expect("Graphviz is on PATH: the .svg is written");
            assert!(svg.contains("<svg"), "{svg}");
        }
        Err(_) => eprintln!("skipping the .svg check: Graphviz's `dot` is not on PATH"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_optimizers_update_lists_the_users_step_line() {
    let w = Tensor::randn([8]).requires_grad_(true);
    let mut opt = optim::SGD::new([w.clone()], optim::SGDConfig { lr: 0.1, momentum: 0.9, ..Default::default() });
    let mut step = kiln::compile(|opt: &mut optim::SGD| {
        opt.zero_grad();
        let loss = (&w * &w).sum();
        loss.backward();
        opt.step(); // STEP_LINE
        loss
    });
    step.call(&mut opt);
    let source = include_str!("debug_topics.rs");
    let line = source.lines().position(|l| l.ends_with("// STEP_LINE")).expect("marked") + 1;
    let kernels = step.kernels();
    let updates: Vec<&str> =
        kernels.iter().flat_map(|k| k.listing.lines()).filter(|l| l.contains(" update at ")).collect();
    assert!(!updates.is_empty(), "{kernels:#?}");
    for u in &updates {
        assert!(u.contains(&format!("update at tests/debug_topics.rs:{line}:")), "{u}");
    }
}
