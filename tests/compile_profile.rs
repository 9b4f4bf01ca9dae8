//! `KILN_DEBUG=profile`: a compiled step's plan steps are timed over its calls and printed as one
//! table, slowest first, when the step is dropped. Checked in a child process (the topics are
//! read once per process).

use kiln::prelude::*;

#[path = "common/child.rs"]
mod child;

/// Three calls of a step with a product and a fused elementwise chain.
fn run_step() {
    let (a, b) = (Tensor::randn([4, 8]), Tensor::randn([8, 3]));
    let mut step = kiln::compile(|(a, b): (&Tensor, &Tensor)| (a.matmul(b) * 2.0 + 1.0).relu());
    for _ in 0..3 {
        let out = step.call((&a, &b));
        assert_eq!(out.shape(), &[4, 3]);
    }
}

#[test]
fn dropping_a_profiled_step_prints_its_plan_steps_slowest_first() {
    if child::is_child() {
        return run_step();
    }
    let err = child::stderr_of_child("dropping_a_profiled_step_prints_its_plan_steps_slowest_first", "profile");
    let start = err.find("[kiln profile] compiled plan steps over 3 calls: ").unwrap_or_else(|| panic!("{err}"));
    let table: Vec<&str> = err[start..].lines().take_while(|l| !l.is_empty()).collect();
    assert!(table[1].ends_with("what"), "{err}");
    let rows = &table[2..];
    let product =
        rows.iter().find(|r| r.ends_with("matmul [4, 8], [8, 3] -> [4, 3]")).unwrap_or_else(|| panic!("{err}"));
    assert!(product.contains("GFLOP/s"), "{product}");
    let kernel = rows.iter().find(|r| r.contains("kernel k") && r.contains("(mul add relu) over [12]"));
    assert!(kernel.unwrap_or_else(|| panic!("{err}")).contains("GB/s"), "{err}");
    // Slowest first, and the shares add up to the whole.
    let micros: Vec<f64> = rows.iter().map(|r| r.split_whitespace().next().unwrap().parse().unwrap()).collect();
    assert!(micros.windows(2).all(|w| w[0] >= w[1]), "{err}");
    let shares: f64 =
        rows.iter().map(|r| r.split_whitespace().nth(1).unwrap().trim_end_matches('%').parse::<f64>().unwrap()).sum();
    assert!((shares - 100.0).abs() < 0.2 * rows.len() as f64, "{err}");
}
