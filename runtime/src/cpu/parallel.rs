//! The CPU worker pool and the ways kernels split work across it.
//!
//! kiln runs its kernels on its own rayon pool, sized by [`set_num_threads`], by
//! `KILN_NUM_THREADS`, else `OMP_NUM_THREADS`, else the number of cores. Work below a grain size
//! runs inline on the caller's thread, so small ops pay no scheduling cost. [`join_serial`]
//! runs two jobs at once, each on one thread (every kernel inside them runs unsplit).

use rayon::prelude::*;
use std::cell::Cell;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

/// Elements below which an elementwise op runs on the calling thread alone.
pub const GRAIN: usize = 1 << 15;

static POOL: RwLock<Option<Arc<rayon::ThreadPool>>> = RwLock::new(None);

fn default_threads() -> usize {
    ["KILN_NUM_THREADS", "OMP_NUM_THREADS"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Whether denormal floats are flushed to zero (`set_flush_denormal`), for threads started later.
static FLUSH_DENORMAL: AtomicBool = AtomicBool::new(false);

fn build_pool(n: usize) -> Arc<rayon::ThreadPool> {
    Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(|i| format!("kiln-cpu-{i}"))
            .start_handler(|_| apply_flush_denormal(FLUSH_DENORMAL.load(Ordering::Relaxed)))
            .build()
            .expect("failed to start the kiln CPU thread pool"),
    )
}

/// The pool kernels run on.
pub fn pool() -> Arc<rayon::ThreadPool> {
    if let Some(p) = POOL.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
        return p.clone();
    }
    let mut guard = POOL.write().unwrap_or_else(|e| e.into_inner());
    guard.get_or_insert_with(|| build_pool(default_threads())).clone()
}

/// Whether the calling thread is one of the pool's: work split from there starts at once (the
/// helper is a worker already), while work split from outside waits for a worker to wake and
/// then for the caller to be woken (tens of µs).
pub fn on_pool() -> bool {
    pool().current_thread_index().is_some()
}

/// Sets the number of CPU worker threads (`torch.set_num_threads`).
pub fn set_num_threads(n: usize) {
    let n = n.max(1);
    *POOL.write().unwrap_or_else(|e| e.into_inner()) = Some(build_pool(n));
}

thread_local! {
    /// True while this thread runs one arm of [`join_serial`]: its kernels do not split.
    static SERIAL: Cell<bool> = const { Cell::new(false) };
}

/// The number of CPU worker threads (`torch.get_num_threads`); 1 inside an arm of
/// [`join_serial`], whose kernels run on their own thread.
pub fn num_threads() -> usize {
    if SERIAL.get() {
        1
    } else {
        pool().current_num_threads()
    }
}

/// Runs `a` and `b` at once on two of the pool's threads, every kernel inside each running
/// unsplit on its thread (two independent matrix products of a compiled step: small products
/// scale poorly across threads, so two at once on one thread each beat one after the other on
/// all). With a pool of one thread they run one after the other.
pub fn join_serial<A: Send, B: Send>(a: impl FnOnce() -> A + Send, b: impl FnOnce() -> B + Send) -> (A, B) {
    pool().install(|| rayon::join(|| with_flag(&SERIAL, a), || with_flag(&SERIAL, b)))
}

/// Runs `f` with the thread-local `flag` set, then restores its old value, even when `f`
/// panics (a panic in a join then crosses it with the flag restored).
pub(super) fn with_flag<R>(flag: &'static std::thread::LocalKey<Cell<bool>>, f: impl FnOnce() -> R) -> R {
    struct Restore(&'static std::thread::LocalKey<Cell<bool>>, bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            self.0.set(self.1);
        }
    }
    let _restore = Restore(flag, flag.replace(true));
    f()
}

/// Flushes denormal floats to zero (and reads denormal inputs as zero) on the calling thread and
/// every kiln worker thread, or stops doing so (`torch.set_flush_denormal`). Arithmetic on
/// denormals is many times slower on x86 CPUs; training runs whose small values decay into the
/// denormal range (optimizer accumulators late in training) slow down without it. Returns
/// whether the CPU supports it (x86-64: yes; elsewhere the call does nothing and returns false).
pub fn set_flush_denormal(on: bool) -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    FLUSH_DENORMAL.store(on, Ordering::Relaxed);
    apply_flush_denormal(on);
    pool().broadcast(|_| apply_flush_denormal(on));
    true
}

/// Sets or clears MXCSR's flush-to-zero (bit 15) and denormals-are-zero (bit 6) on this thread.
fn apply_flush_denormal(on: bool) {
    #[cfg(target_arch = "x86_64")]
    {
        const FTZ_DAZ: u32 = 0x8040;
        let mut csr: u32 = 0;
        // SAFETY: stmxcsr/ldmxcsr read and write this thread's SSE control register through a
        // pointer to a live local u32; every x86-64 CPU has SSE, and FTZ/DAZ only change how
        // denormal floats are rounded, never memory or control flow.
        unsafe {
            std::arch::asm!("stmxcsr [{}]", in(reg) &mut csr as *mut u32, options(nostack, preserves_flags));
            let new = if on { csr | FTZ_DAZ } else { csr & !FTZ_DAZ };
            std::arch::asm!("ldmxcsr [{}]", in(reg) &new as *const u32, options(nostack, readonly, preserves_flags));
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = on;
}

fn chunk_count(len: usize, grain: usize) -> usize {
    if len <= grain || SERIAL.get() {
        1
    } else {
        (len / grain).clamp(1, num_threads() * 4)
    }
}

/// Calls `f` on disjoint ranges covering `0..len`, in parallel when `len > grain`.
pub fn for_ranges(len: usize, grain: usize, f: impl Fn(Range<usize>) + Sync + Send) {
    ranges_dyn(len, grain, &f)
}

/// [`for_ranges`] through a trait object: the pool's plumbing (rayon's jobs, splitters and
/// latches) is compiled once here instead of once per kernel closure, which was most of the
/// crates' LLVM IR and build time; one indirect call per range costs nothing beside a range of
/// `grain` elements.
fn ranges_dyn(len: usize, grain: usize, f: &(dyn Fn(Range<usize>) + Sync)) {
    let chunks = chunk_count(len, grain.max(1));
    if chunks == 1 {
        return f(0..len);
    }
    let step = len.div_ceil(chunks);
    pool().install(|| {
        (0..chunks).into_par_iter().for_each(|c| {
            let start = c * step;
            let end = ((c + 1) * step).min(len);
            if start < end {
                f(start..end)
            }
        })
    });
}

/// Calls `f(start, chunk)` on disjoint chunks of `out`, in parallel when it is longer than
/// `grain`; `start` is the chunk's offset in `out`.
pub fn for_chunks_mut<T: Send>(out: &mut [T], grain: usize, f: impl Fn(usize, &mut [T]) + Sync + Send) {
    let chunks = chunk_count(out.len(), grain.max(1));
    let step = out.len().div_ceil(chunks).max(1);
    chunks_dyn(out, step, &f)
}

/// Calls `f(start, chunk)` on the consecutive chunks of `chunk_len` elements of `out` (the last
/// may be shorter), in parallel when there is more than one, each in a task of its own; `start`
/// is the chunk's offset in `out`. Compiled once per element type, not per closure (see
/// [`ranges_dyn`]).
pub fn for_chunks_of<T: Send>(out: &mut [T], chunk_len: usize, f: impl Fn(usize, &mut [T]) + Sync + Send) {
    chunks_dyn(out, chunk_len.max(1), &f)
}

fn chunks_dyn<T: Send>(out: &mut [T], step: usize, f: &(dyn Fn(usize, &mut [T]) + Sync)) {
    if out.len() <= step || SERIAL.get() {
        return f(0, out);
    }
    pool().install(|| out.par_chunks_mut(step).enumerate().for_each(|(c, chunk)| f(c * step, chunk)));
}

/// `f(0), f(1), …, f(tasks - 1)` in order, computed in parallel (one task each) when there is
/// more than one. Compiled once per result type, not per closure (see [`ranges_dyn`]).
pub fn map_tasks<R: Send>(tasks: usize, f: impl Fn(usize) -> R + Sync + Send) -> Vec<R> {
    map_dyn(tasks, &f)
}

fn map_dyn<R: Send>(tasks: usize, f: &(dyn Fn(usize) -> R + Sync)) -> Vec<R> {
    if tasks <= 1 || SERIAL.get() {
        return (0..tasks).map(f).collect();
    }
    pool().install(|| (0..tasks).into_par_iter().map(f).collect())
}

/// Sets every element of `out` to `value`.
pub fn fill<T: Copy + Send + Sync>(out: &mut [T], value: T) {
    for_chunks_mut(out, GRAIN, |_, c| c.fill(value));
}

/// Sets `out[i] = f(i)`.
pub fn fill_with_index<T: Send>(out: &mut [T], f: impl Fn(usize) -> T + Sync + Send) {
    for_chunks_mut(out, GRAIN, |start, c| {
        for (i, o) in c.iter_mut().enumerate() {
            *o = f(start + i);
        }
    });
}

/// Copies `src` into `out` (equal lengths).
pub fn copy<T: Copy + Send + Sync>(out: &mut [T], src: &[T]) {
    assert_eq!(out.len(), src.len(), "copy between buffers of different lengths");
    for_chunks_mut(out, GRAIN * 4, |start, c| c.copy_from_slice(&src[start..start + c.len()]));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn join_serial_runs_both_arms_unsplit_and_restores_splitting() {
        let outside = num_threads();
        let arm = || {
            let threads = num_threads();
            let chunks = chunk_count(1 << 24, GRAIN);
            let sum = AtomicUsize::new(0);
            for_ranges(1 << 20, GRAIN, |r| {
                sum.fetch_add(r.len(), Ordering::Relaxed);
            });
            (threads, chunks, sum.into_inner())
        };
        let (a, b) = join_serial(arm, arm);
        assert_eq!((a.0, a.1, a.2), (1, 1, 1 << 20));
        assert_eq!((b.0, b.1, b.2), (1, 1, 1 << 20));
        assert_eq!(num_threads(), outside);
        if outside > 1 {
            assert!(chunk_count(1 << 24, GRAIN) > 1);
        }
    }

    #[test]
    fn only_the_pools_threads_are_on_it() {
        assert!(!on_pool(), "a test's thread is not a worker");
        assert!(pool().install(on_pool));
        assert_eq!(join_serial(on_pool, on_pool), (true, true));
    }

    #[test]
    fn ranges_cover_everything_once() {
        let len = 1_000_003;
        let seen = AtomicUsize::new(0);
        for_ranges(len, 1000, |r| {
            seen.fetch_add(r.len(), Ordering::Relaxed);
        });
        assert_eq!(seen.load(Ordering::Relaxed), len);
        let mut v = vec![0usize; len];
        fill_with_index(&mut v, |i| i * 2);
        assert!(v.iter().enumerate().all(|(i, &x)| x == 2 * i));
    }
}
