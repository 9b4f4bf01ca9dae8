//! One lock per test binary for the tests that seed and draw from the global generator: tests
//! run in parallel threads, so without it their draws interleave and the numbers differ.

use std::sync::{Mutex, MutexGuard};

/// Holds the generator for the caller until the guard drops.
pub fn seeded() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}
