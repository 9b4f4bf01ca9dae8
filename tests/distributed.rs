//! `kiln::distributed` and `DistributedDataParallel` across processes: each test runs the
//! `kiln-dist-check` program (tests/programs/dist_check.rs) under `mpirun -np 2` in one mode
//! and checks what both ranks report. Without the `mpi` feature, or without `mpirun`, the
//! tests print that they skip.

use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The program's collective timeout (its `TIMEOUT`).
const TIMEOUT: Duration = Duration::from_secs(3);
/// Launching and tearing down an mpirun job on a loaded two-core machine.
const SLACK: Duration = Duration::from_secs(30);

/// One mpirun job at a time: the timing assertions assume the cores are not shared with another
/// job of this file.
static JOBS: Mutex<()> = Mutex::new(());

/// What a job printed and how it ended.
struct Job {
    ok: bool,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

/// Runs `kiln-dist-check MODE` under `mpirun -np 2`, killed after `limit`; `None` (after
/// printing why) when this build or machine cannot.
fn run(mode: &str, limit: Duration) -> Option<Job> {
    run_with(mode, limit, &[])
}

/// [`run`] with extra environment variables for the ranks.
fn run_with(mode: &str, limit: Duration, vars: &[(&str, &str)]) -> Option<Job> {
    if !cfg!(feature = "mpi") {
        eprintln!("skipping: kiln was built without the `mpi` feature (cargo test --features mpi)");
        return None;
    }
    let version = match Command::new("mpirun").arg("--version").output() {
        Ok(v) if v.status.success() => {
            String::from_utf8_lossy(&v.stdout).into_owned() + &String::from_utf8_lossy(&v.stderr)
        }
        _ => {
            eprintln!("skipping: no mpirun on PATH (apt-get install openmpi-bin libopenmpi-dev)");
            return None;
        }
    };
    let _one = JOBS.lock().unwrap_or_else(|e| e.into_inner());
    let mut cmd = Command::new("mpirun");
    if version.contains("Open MPI") || version.contains("OpenRTE") {
        // More ranks than cores is fine for a test; root (CI containers) must be allowed.
        cmd.arg("--oversubscribe").env("OMPI_ALLOW_RUN_AS_ROOT", "1").env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    }
    cmd.args(["-np", "2", env!("CARGO_BIN_EXE_kiln-dist-check"), mode]).env("KILN_NUM_THREADS", "1");
    cmd.envs(vars.iter().copied());
    let start = Instant::now();
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("mpirun starts");
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait on mpirun") {
            break s;
        }
        if start.elapsed() > limit {
            child.kill().ok();
            let out = child.wait_with_output().expect("mpirun output");
            panic!(
                "mpirun {mode} still running after {limit:?}: a hang\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = start.elapsed();
    let out = child.wait_with_output().expect("mpirun output");
    let job = Job {
        ok: status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed,
    };
    eprintln!(
        "mpirun -np 2 kiln-dist-check {mode}: {status} after {elapsed:.1?}\nstdout:\n{}\nstderr:\n{}",
        job.stdout, job.stderr
    );
    Some(job)
}

#[test]
fn collectives_give_known_results_on_every_dtype() {
    let Some(job) = run("collectives", Duration::from_secs(120)) else { return };
    assert!(job.ok, "the collectives job failed");
    assert!(job.stdout.contains("rank 0: collectives ok") && job.stdout.contains("rank 1: collectives ok"));
}

#[test]
fn collectives_split_into_pieces_give_the_same_results() {
    // Pieces of at most 3 elements stand in for MPI's 2^31 - 1 (too big for a test).
    let Some(job) = run_with("chunks", Duration::from_secs(120), &[("KILN_DIST_MAX_CHUNK", "3")]) else { return };
    assert!(job.ok, "the chunks job failed");
    assert!(job.stdout.contains("rank 0: chunks ok") && job.stdout.contains("rank 1: chunks ok"));
}

/// Runs a training `mode` and checks that each rank finished and reported its 6 steps with
/// bit-identical parameters across ranks (and within tolerance of one process).
fn check_training(mode: &str) {
    let Some(job) = run(mode, Duration::from_secs(120)) else { return };
    assert!(job.ok, "the {mode} job failed:\n{}\n{}", job.stdout, job.stderr);
    for rank in 0..2 {
        assert!(job.stdout.contains(&format!("rank {rank}: {mode} ok")));
        let steps = job
            .stdout
            .lines()
            .filter(|l| l.starts_with(&format!("rank {rank}: step")) && l.contains("bit-identical across ranks"))
            .count();
        assert_eq!(steps, 6, "rank {rank} reported {steps} checked steps");
    }
}

#[test]
fn ddp_ranks_stay_bit_identical_and_match_one_process() {
    check_training("train");
}

#[test]
fn compiled_ddp_steps_match_one_process() {
    check_training("train-compiled");
}

#[test]
fn find_unused_parameters_averages_what_some_rank_used() {
    check_training("unused");
}

#[test]
fn a_parameter_without_gradient_fails_backward_on_every_rank() {
    let Some(job) = run("unused-error", Duration::from_secs(120)) else { return };
    assert!(job.ok, "the unused-error job failed");
    assert!(job.stdout.contains("rank 0: unused-error ok") && job.stdout.contains("rank 1: unused-error ok"));
    assert!(job
        .stderr
        .contains("Parameters which did not receive grad for rank 1: a.weight, a.bias, b.weight, b.bias"));
    assert!(job
        .stderr
        .contains("Enable unused parameter detection with `DdpOptions { find_unused_parameters: true, .. }`"));
    // Raised at the end of backward inside DDP's reducer, located at the program's backward call.
    assert!(
        job.stderr.contains("(at tests/programs/dist_check.rs:") && !job.stderr.contains("reducer.rs"),
        "the error does not name the caller's line"
    );
}

#[test]
fn a_hung_peer_makes_the_collective_time_out() {
    let Some(job) = run("stall", TIMEOUT * 20) else { return };
    // Rank 1 sleeps for 20 timeouts; the job must end long before, with kiln's error.
    assert!(job.elapsed < TIMEOUT + SLACK, "took {:?}", job.elapsed);
    assert!(
        job.stderr
            .contains("all_reduce: all_reduce timed out after 3s on rank 0 of 2: the other ranks did not take part"),
        "no timeout error"
    );
    assert!(job.stdout.contains("rank 0: stall ok"), "rank 0's checks after the timeout failed");
    assert!(job.stderr.contains("kiln::distributed: aborting the job"));
    assert!(!job.ok, "an aborted job must exit non-zero");
}

#[test]
fn a_hung_peer_makes_ddp_backward_time_out() {
    let Some(job) = run("ddp-stall", TIMEOUT * 20) else { return };
    assert!(job.elapsed < TIMEOUT + SLACK, "took {:?}", job.elapsed);
    assert!(
        job.stderr.contains("all_reduce (DistributedDataParallel gradient bucket) timed out after 3s on rank 0 of 2"),
        "no timeout error"
    );
    assert!(job.stdout.contains("rank 0: ddp-stall ok"));
    assert!(!job.ok);
}

#[test]
fn a_killed_peer_ends_the_job_within_the_timeout() {
    let Some(job) = run("die", TIMEOUT * 20) else { return };
    assert!(job.elapsed < TIMEOUT + SLACK, "took {:?}", job.elapsed);
    assert!(!job.ok, "the job must fail");
    assert!(job.stderr.contains("rank 1: killing itself"));
    assert!(!job.stdout.contains("die ok"));
    // kiln's error if MPI reported the broken peer first, else mpirun's notice ("… rank 1 …
    // exited on signal 9 (Killed)" in Open MPI 4).
    let told = job.stderr.contains("collective failed after its peer died") || job.stderr.contains("signal 9");
    assert!(told, "neither kiln nor mpirun said that rank 1 died");
}

// In-process checks that need no launcher (nothing here initializes MPI).

#[test]
fn collectives_without_a_process_group_fail_clearly() {
    use kiln::distributed::{self as dist, ReduceOp};
    assert!(!dist::is_initialized());
    let e = dist::rank().unwrap_err();
    assert!(e.message.contains("Default process group has not been initialized"), "{e}");
    let e = dist::all_reduce(&kiln::Tensor::ones([2]), ReduceOp::Sum).unwrap_err();
    assert_eq!(e.kind, kiln::ErrorKind::Distributed);
    assert!(e.to_string().starts_with("all_reduce: Default process group has not been initialized"), "{e}");
    assert!(dist::barrier().is_err() && dist::destroy_process_group().is_err());
}

#[test]
fn mpi_without_the_feature_says_so() {
    // The NCCL backend's errors without libnccl or a GPU: tests/distributed_nccl.rs.
    use kiln::distributed::{self as dist, Backend, InitOptions};
    if !cfg!(feature = "mpi") {
        let e = dist::init_process_group(Backend::Mpi, InitOptions::default()).unwrap_err();
        assert!(e.message.contains("`mpi` cargo feature"), "{e}");
    }
}
