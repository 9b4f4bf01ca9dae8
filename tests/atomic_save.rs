//! `kiln::save` replaces its target atomically: a process killed in the middle of a save leaves
//! the previous checkpoint or the new one, whole, never a truncated file.

use kiln::{StateDict, Tensor};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The environment variable that makes this test binary a child that saves in a loop.
const CHILD: &str = "KILN_ATOMIC_SAVE_CHILD";

/// Checkpoint number `k`: every value is `k` (4 MiB, so a save takes a while).
fn checkpoint(k: u64) -> StateDict {
    let mut sd = StateDict::new();
    sd.insert("w", Tensor::full([1 << 20], k as f32));
    sd.insert("b", Tensor::full([1000], k as f32));
    sd.set_metadata("k", k.to_string());
    sd
}

/// Loads the checkpoint at `path` (it must load) and returns its number, after checking that
/// every value is that number.
fn whole_checkpoint(path: &std::path::Path) -> u64 {
    let sd = kiln::load(path).unwrap_or_else(|e| panic!("the checkpoint must load: {e}"));
    let k: u64 = sd.metadata("k").expect("its number").parse().expect("a number");
    for name in ["w", "b"] {
        let values = sd.get(name).expect("saved").to_vec::<f32>();
        assert!(values.iter().all(|&v| v == k as f32), "{name} is not checkpoint {k} throughout");
    }
    k
}

/// As a child (`KILN_ATOMIC_SAVE_CHILD` set to a path): saves checkpoints 1, 2, 3, … to that
/// path until it is killed. In an ordinary run: saves and reloads two checkpoints.
#[test]
fn child_saves_checkpoints_in_a_loop() {
    match std::env::var(CHILD) {
        Ok(path) => {
            for k in 1.. {
                kiln::save(&checkpoint(k), &path).expect("save");
            }
        }
        Err(_) => {
            let path = std::env::temp_dir().join(format!("kiln-atomic-round-trip-{}.safetensors", std::process::id()));
            for k in [3, 4] {
                kiln::save(&checkpoint(k), &path).expect("save");
                assert_eq!(whole_checkpoint(&path), k);
            }
            std::fs::remove_file(&path).expect("the saved file");
        }
    }
}

#[test]
fn a_save_killed_midway_leaves_a_whole_checkpoint() {
    let dir = std::env::temp_dir().join(format!("kiln-atomic-save-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let path = dir.join("ckpt.safetensors");
    kiln::save(&checkpoint(0), &path).expect("the first checkpoint");
    let whole_len = std::fs::metadata(&path).expect("saved").len();
    let mut newest = 0;
    for round in 0..12u64 {
        let mut child = Command::new(std::env::current_exe().expect("this test binary"))
            .args(["--exact", "child_saves_checkpoints_in_a_loop", "--test-threads=1"])
            .env(CHILD, &path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("a child process");
        // Kill at a moment spread over several saves, or at once when the target is seen
        // shorter than a whole checkpoint (a save writing the target in place: the moment it
        // is most exposed).
        let deadline = Instant::now() + Duration::from_millis(40 + round * 23 % 160);
        while Instant::now() < deadline {
            if std::fs::metadata(&path).map_or(true, |m| m.len() < whole_len) {
                break;
            }
        }
        child.kill().expect("kill the child");
        child.wait().expect("reap the child");
        newest = newest.max(whole_checkpoint(&path));
    }
    assert!(newest > 0, "the children never finished a save: the test did not exercise replacing a checkpoint");
    std::fs::remove_dir_all(&dir).expect("clean up");
}
