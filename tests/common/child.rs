//! Checks of what a test prints under an environment read once per process (`KILN_DEBUG`):
//! the test re-runs itself in a child process with that environment and reads its stderr.

/// Set in the child, so that the test knows to do the work instead of spawning.
const CHILD: &str = "KILN_TEST_CHILD";

/// Whether this process is the child [`stderr_of_child`] started.
pub fn is_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// Runs test `name` of this binary alone in a child process with `KILN_DEBUG=debug` and
/// returns its stderr; panics with that stderr when the child fails.
pub fn stderr_of_child(name: &str, debug: &str) -> String {
    stderr_of_child_with(name, &[("KILN_DEBUG", debug)])
}

/// [`stderr_of_child`] with the environment `vars` (`KILN_DUMP_DIR`, …).
pub fn stderr_of_child_with(name: &str, vars: &[(&str, &str)]) -> String {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .envs(vars.iter().copied())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "the child failed: {err}");
    err
}
