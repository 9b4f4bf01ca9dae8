//! `KILN_DEBUG=profile`: the time each step of a compiled plan takes, summed over calls.
//!
//! While the topic is on, `exec::run_steps` times every step of a CPU plan (a generated kernel,
//! an op run by its eager implementation, a pair of products run side by side) and adds it to
//! that plan's row here. When a `CompiledStep` is dropped, the rows gathered so far are printed
//! as one table, slowest first — time per call, share of the plans' time, what ran, and its
//! speed (GB/s moved by a kernel, GFLOP/s of a matrix product) — and cleared. A CUDA kernel
//! launches asynchronously, so CUDA plans are not timed.

use crate::debug::{self, Topic};
use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

/// One step of one plan: what it is and what its runs added up to.
struct Row {
    /// What ran, in words.
    label: String,
    /// Bytes a kernel reads and writes per run (0 for other steps).
    bytes: usize,
    /// Floating-point operations per run of the matrix products in the step (0 if none).
    flop: f64,
    /// Runs timed.
    runs: u64,
    /// Their total time.
    time: Duration,
}

/// What a step is, for its row: made only the first time the step is timed.
pub(crate) struct StepInfo {
    /// What ran, in words.
    pub(crate) label: String,
    /// Bytes a kernel reads and writes per run (0 for other steps).
    pub(crate) bytes: usize,
    /// Floating-point operations of the matrix products in the step (0 if none).
    pub(crate) flop: f64,
}

/// The rows, by plan hash and step index.
static ROWS: Mutex<Option<HashMap<(u64, usize), Row>>> = Mutex::new(None);

/// Whether steps are timed (`KILN_DEBUG=profile`).
pub(crate) fn enabled() -> bool {
    debug::enabled(Topic::Profile)
}

/// Adds `time` to step `step` of the plan hashed `plan`, describing it with `info` if it is new.
pub(crate) fn record(plan: u64, step: usize, time: Duration, info: impl FnOnce() -> StepInfo) {
    let mut rows = ROWS.lock().unwrap_or_else(|e| e.into_inner());
    let row = rows.get_or_insert_with(HashMap::new).entry((plan, step)).or_insert_with(|| {
        let StepInfo { label, bytes, flop } = info();
        Row { label, bytes, flop, runs: 0, time: Duration::ZERO }
    });
    row.runs += 1;
    row.time += time;
}

/// Prints the rows gathered since the last print as one table (under `KILN_DEBUG=profile`)
/// and clears them.
pub(crate) fn print_and_clear() {
    let rows = ROWS.lock().unwrap_or_else(|e| e.into_inner()).take();
    let Some(rows) = rows.filter(|r| !r.is_empty()) else { return };
    debug::log(Topic::Profile, table(rows.into_values().collect()));
}

/// The rows as a table, slowest first, with each step's mean time per run.
fn table(mut rows: Vec<Row>) -> String {
    rows.sort_by_key(|r| std::cmp::Reverse(r.time));
    let total: f64 = rows.iter().map(|r| r.time.as_secs_f64()).sum();
    let calls = rows.iter().map(|r| r.runs).max().unwrap_or(0);
    let mut out = format!(
        "compiled plan steps over {calls} calls: {:.3} ms per call in all\n{:>10}  {:>6}  {:>14}  what",
        total * 1e3 / calls.max(1) as f64,
        "µs/run",
        "share",
        "speed"
    );
    for r in &rows {
        let each = r.time.as_secs_f64() / r.runs.max(1) as f64;
        let speed = if r.flop > 0.0 {
            format!("{:.0} GFLOP/s", r.flop / each / 1e9)
        } else if r.bytes > 0 {
            format!("{:.1} GB/s", r.bytes as f64 / each / 1e9)
        } else {
            String::new()
        };
        let share = 100.0 * r.time.as_secs_f64() / total.max(f64::MIN_POSITIVE);
        write!(out, "\n{:>10.1}  {:>5.1}%  {:>14}  {}", each * 1e6, share, speed, r.label).expect("a String");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(label: &str, bytes: usize, flop: f64, runs: u64, micros: u64) -> Row {
        Row { label: label.into(), bytes, flop, runs, time: Duration::from_micros(micros * runs) }
    }

    #[test]
    fn the_table_lists_the_slowest_step_first_with_its_speed() {
        let t = table(vec![
            row("kernel kab (add relu)", 8_000_000, 0.0, 4, 1000),
            row("matmul [128, 64]", 0, 2e9, 4, 2000),
            row("cat [16, 768]", 0, 0.0, 2, 500),
        ]);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("compiled plan steps over 4 calls: 3.250 ms per call"), "{t}");
        assert!(
            lines[2].contains("2000.0") && lines[2].contains("1000 GFLOP/s") && lines[2].ends_with("matmul [128, 64]")
        );
        assert!(lines[3].contains("8.0 GB/s") && lines[3].contains("30.8%"), "{t}");
        assert!(lines[4].ends_with("cat [16, 768]") && lines[4].contains("500.0"), "{t}");
    }
}
