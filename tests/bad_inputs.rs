//! A battery of bad inputs (tensor ops, nn, files, datasets, autograd, optimizers and
//! `kiln::compile`), each run in a child process: none may abort, crash, hang, accept the bad
//! input silently, or report it anywhere but at the caller's line.
//!
//! The test binary re-runs itself once per case (`KILN_BAD_INPUT=<case>`, the test
//! `child_runs_one_case`), two children at a time. A case passes when its child exits normally
//! after the bad input was refused with a `kiln::Error` located in `tests/bad_inputs*`, or
//! panicked with a message carrying `(at tests/bad_inputs…)`, or was accepted as a valid input
//! (cases where PyTorch accepts it too). A child killed by a signal (a segfault, an abort),
//! still running after its timeout, or whose refusal names a line inside kiln fails the case.

use std::io::Read;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[path = "bad_inputs/files.rs"]
mod files;
#[path = "bad_inputs/nn.rs"]
mod nn;
#[path = "bad_inputs/tensors.rs"]
mod tensors;
#[path = "bad_inputs/training.rs"]
mod training;

/// A one-layer network for the cases that need a module.
#[derive(kiln::nn::Module)]
pub struct Net {
    fc: kiln::nn::Linear,
}

impl kiln::nn::Module for Net {
    fn forward(&self, x: &kiln::Tensor) -> kiln::Tensor {
        self.fc.forward(x)
    }
}

/// A dataset whose items cannot be stacked (item `i` has `i + 1` elements).
pub struct Ragged;

impl kiln::data::Dataset for Ragged {
    type Item = kiln::Tensor;
    fn len(&self) -> usize {
        4
    }
    fn get(&self, index: usize) -> kiln::Tensor {
        kiln::Tensor::zeros([index + 1])
    }
}

/// How a case ended without a panic: the error that refused the input, or `None` when the input
/// was accepted (for cases where PyTorch accepts it too).
pub type Outcome = Option<kiln::Error>;

/// One bad input.
pub type Case = Box<dyn Fn() -> Outcome + Send + Sync>;

/// The battery, by name.
#[derive(Default)]
pub struct Cases(Vec<(String, Case)>);

impl Cases {
    /// Adds a case.
    pub fn add(&mut self, name: impl Into<String>, case: impl Fn() -> Outcome + Send + Sync + 'static) {
        self.0.push((name.into(), Box::new(case)));
    }
}

/// A refusal is expected: the error, or a panic without a location when the input was accepted.
pub fn refused<T>(result: Result<T, kiln::Error>) -> Outcome {
    match result {
        Err(e) => Some(e),
        Ok(_) => panic!("the bad input was accepted"),
    }
}

/// Either ending is fine: an input PyTorch accepts in some form (an empty tensor, say).
pub fn either<T>(result: Result<T, kiln::Error>) -> Outcome {
    result.err()
}

/// A panicking form that must refuse its input: its panic is re-raised for the harness to
/// judge; returning normally means the bad input was accepted.
pub fn panics(f: impl FnOnce()) -> Outcome {
    match catch_unwind(AssertUnwindSafe(f)) {
        Err(payload) => resume_unwind(payload),
        Ok(()) => panic!("the bad input was accepted"),
    }
}

fn all_cases() -> Cases {
    let mut cases = Cases::default();
    tensors::add(&mut cases);
    nn::add(&mut cases);
    files::add(&mut cases);
    training::add(&mut cases);
    cases
}

/// Cases that end badly on purpose, to check that the harness tells (not in the battery).
fn harness_cases() -> Cases {
    let mut cases = Cases::default();
    cases.add("harness/aborts", || std::process::abort());
    cases.add("harness/panics-without-a-location", || panic!("a message without the caller's line"));
    cases.add("harness/accepts-silently", || refused(Ok::<(), kiln::Error>(())));
    cases
}

/// The environment variable naming the case a child runs.
const CASE: &str = "KILN_BAD_INPUT";

/// The text of a panic payload.
fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic with a non-text payload".into())
}

/// Runs one case in this process and says what was wrong with its ending, if anything.
fn judge(case: &Case) -> Result<String, String> {
    match catch_unwind(AssertUnwindSafe(case)) {
        Ok(None) => Ok("accepted".into()),
        Ok(Some(e)) if e.location.file().starts_with("tests/bad_inputs") => Ok(format!("refused: {e}")),
        Ok(Some(e)) => Err(format!("refused at a line inside kiln: {e}")),
        Err(payload) => {
            let text = payload_text(&*payload);
            if text.contains("(at tests/bad_inputs") {
                Ok(format!("panicked: {text}"))
            } else {
                Err(format!("panicked without the caller's line: {text}"))
            }
        }
    }
}

/// In a child (`KILN_BAD_INPUT` set): runs that case and fails unless it ended well. In an
/// ordinary run: runs the first case of the battery in this process.
#[test]
fn child_runs_one_case() {
    let (cases, harness) = (all_cases(), harness_cases());
    let wanted = std::env::var(CASE).unwrap_or_else(|_| cases.0[0].0.clone());
    let (_, case) = cases
        .0
        .iter()
        .chain(&harness.0)
        .find(|(name, _)| *name == wanted)
        .unwrap_or_else(|| panic!("no case named {wanted}"));
    std::panic::set_hook(Box::new(|_| {}));
    let verdict = judge(case);
    let _ = std::panic::take_hook();
    match verdict {
        Ok(how) => println!("VERDICT ok {how}"),
        Err(why) => panic!("VERDICT bad {why}"),
    }
}

/// How long one child may run.
const TIMEOUT: Duration = Duration::from_secs(60);

/// Runs case `name` in a child process; `Err` says how it ended badly.
fn run_child(name: &str) -> Result<(), String> {
    let mut child = Command::new(std::env::current_exe().expect("this test binary"))
        .args(["--exact", "child_runs_one_case", "--test-threads=1", "--nocapture"])
        .env(CASE, name)
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start a child: {e}"))?;
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if started.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("hung: still running after {TIMEOUT:?}"));
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let mut out = String::new();
    child.stdout.take().map(|mut s| s.read_to_string(&mut out));
    child.stderr.take().map(|mut s| s.read_to_string(&mut out));
    if status.success() {
        return Ok(());
    }
    #[cfg(unix)]
    if let Some(signal) = std::os::unix::process::ExitStatusExt::signal(&status) {
        return Err(format!("killed by signal {signal} (a crash or an abort)\n{}", tail(&out)));
    }
    let verdict = out.lines().find(|l| l.contains("VERDICT bad")).map(str::to_string);
    Err(verdict.unwrap_or_else(|| format!("exited with {status}\n{}", tail(&out))))
}

/// The last lines of a child's output.
fn tail(out: &str) -> String {
    let lines: Vec<&str> = out.lines().collect();
    lines[lines.len().saturating_sub(12)..].join("\n")
}

#[test]
fn no_bad_input_aborts_crashes_hangs_or_is_misreported() {
    let names: Vec<String> = all_cases().0.into_iter().map(|(name, _)| name).collect();
    assert!(names.len() >= 200, "the battery holds {} cases; the issue asks for at least 200", names.len());
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "case names must be unique");
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(name) = names.get(i) else { break };
                if let Err(why) = run_child(name) {
                    failures.lock().unwrap_or_else(|e| e.into_inner()).push(format!("{name}: {why}"));
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap_or_else(|e| e.into_inner());
    println!("{} bad inputs, {} handled badly", names.len(), failures.len());
    assert!(failures.is_empty(), "{} of {} cases ended badly:\n{}", failures.len(), names.len(), failures.join("\n"));
}

#[test]
fn the_harness_tells_crashes_misreports_and_silent_acceptance() {
    let expected = [
        ("harness/aborts", "killed by signal"),
        ("harness/panics-without-a-location", "panicked without the caller's line"),
        ("harness/accepts-silently", "the bad input was accepted"),
    ];
    for (name, says) in expected {
        let why = run_child(name).expect_err(name);
        assert!(why.contains(says), "{name}: {why}");
    }
}
