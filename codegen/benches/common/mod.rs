//! Timing shared by the codegen CPU benches.

use std::time::Instant;

/// Seconds per call of `f`, best of `reps` after a warm-up.
pub fn best_of(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}
