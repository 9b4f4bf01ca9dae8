//! How one matrix product through `gemm` is spread over kiln's threads, and, inside compiled
//! plans, a per-shape choice of that spread measured in the plan's runs (as `torch.compile`'s
//! max-autotune times its candidate kernels).
//!
//! The `gemm` crate splits a product across threads itself, but on the small products of a
//! training step that split scales poorly and unevenly (measured 2026-12-03 on 2 threads:
//! 128x784x512 ran at 65-130 GFLOP/s split by `gemm`, at 98-139 as two column blocks of one
//! thread each; 512x128x784 with a transposed lhs at 84-137 by `gemm`, 103-149 as row blocks).
//! Which spread wins depends on the shape and the layouts, so a compiled plan measures it:
//!
//! - **Eager** ([`with_tuned_products`] not active): the fixed rule, `gemm`'s own split for a
//!   product with enough work and no side below [`MIN_SPLIT_SIDE`], one thread otherwise.
//! - **Compiled**: a product of at least [`TUNE_WORK`] multiply-adds looks its shape up in a
//!   process-wide table. While the shape is new, its runs take the candidate spreads in turn
//!   and are timed where they run (inside the step, with its caches and its neighbours); once
//!   every candidate has [`ROUNDS`] times, the one with the smallest median is chosen for the
//!   runs that follow. Measuring this way costs no extra runs (a first version timed every
//!   candidate on the first call, and a noisy moment there fixed a spread twice as slow as
//!   `gemm`'s). The choice is measured again after [`REMEASURE_FIRST`] runs, then after four
//!   times as many each time (up to [`REMEASURE_MAX`]): a choice made while the machine was
//!   disturbed (a VM's other core taken away for the first runs, say) does not stay for the
//!   plan's life. A measurement takes at most 30 runs (6 candidates × 5), some of them with
//!   slower spreads: 30 against 256 kept runs the first time, then ever fewer, under 1% once a
//!   choice is kept for 4,096 runs.
//!
//! Every spread computes each output element with the same `gemm` micro-kernel over the same
//! `k` order, so all of them give bit-identical results (tested): the choice changes speed
//! only, never values.

use super::parallel::{num_threads, pool, with_flag};
use crate::dtype::DType;
use rayon::prelude::*;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The smallest `m`, `n` and `k` of a product that the fixed rule lets `gemm` split across
/// threads. Measured on the MLP step's products through `gemm` on 2 threads (2026-12-03): split,
/// a product with one side of 10 ran 1.5-3.8x slower than on one thread (128x512x10: 71 vs
/// 24 us, 128x10x512: 104 vs 27 us), while 1024x16x1024 still gained 1.9x.
pub const MIN_SPLIT_SIDE: usize = 16;

/// Multiply-adds from which a compiled plan measures a product's spread (below, the fixed rule:
/// measuring costs several runs of the product, worth it only where a run is long).
pub const TUNE_WORK: usize = 1 << 20;

/// Timed runs of each candidate before a shape's spread is chosen.
pub const ROUNDS: usize = 5;

/// Runs of a newly chosen spread before its shape is measured again.
pub const REMEASURE_FIRST: u64 = 256;

/// How much longer each later choice of a shape is kept than the one before.
const REMEASURE_GROWTH: u64 = 4;

/// The most runs a choice is kept before its shape is measured again.
pub const REMEASURE_MAX: u64 = 1 << 16;

/// Rows or columns of one block: a multiple of the widest `gemm` micro-kernel tile (16 `f32`
/// rows of an AVX-512 register), so that no block ends in a partial tile it did not need.
const BLOCK_ALIGN: usize = 16;

/// Measured shapes kept before the table starts over (a bound on its memory).
const TABLE_CAP: usize = 1024;

/// A way to run one product on kiln's pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProductSplit {
    /// One `gemm` call on the calling thread.
    Single,
    /// One `gemm` call that splits itself over the pool's threads.
    Gemm,
    /// The output's rows in this many blocks, one single-threaded call per block, spread over
    /// the pool (a thread slowed by the machine takes fewer blocks).
    Rows(usize),
    /// The output's columns in this many blocks, likewise.
    Cols(usize),
}

impl fmt::Display for ProductSplit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProductSplit::Single => write!(f, "one thread"),
            ProductSplit::Gemm => write!(f, "gemm's split"),
            ProductSplit::Rows(p) => write!(f, "{p} row blocks"),
            ProductSplit::Cols(p) => write!(f, "{p} column blocks"),
        }
    }
}

/// One product's operands and output as raw matrices (strides in elements):
/// `out[i*out_rs + j] = Σ_p a[i*a_rs + p*a_cs] · b[p*b_rs + j*b_cs]` for `i < m`, `j < n`.
#[derive(Clone, Copy, Debug)]
pub(super) struct RawProduct<T> {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a: *const T,
    pub a_rs: isize,
    pub a_cs: isize,
    pub b: *const T,
    pub b_rs: isize,
    pub b_cs: isize,
    pub out: *mut T,
    pub out_rs: isize,
}

// SAFETY: a `RawProduct` only reads `a` and `b` and writes `out`. The only way it crosses threads
// is `run`'s blocks, which write disjoint row or column blocks of `out` and read shared inputs;
// the caller of `run` guarantees the pointers stay valid and unaliased for the call.
unsafe impl<T> Send for RawProduct<T> {}
// SAFETY: as above: shared references only lead to `run`, whose blocks write disjoint parts.
unsafe impl<T> Sync for RawProduct<T> {}

impl<T: 'static + Copy + Send + Sync> RawProduct<T> {
    /// Multiply-adds (at least 1).
    pub fn work(&self) -> usize {
        (self.m * self.n).saturating_mul(self.k).max(1)
    }

    /// The product restricted to output rows `r`.
    fn rows(&self, r: Range<usize>) -> Self {
        RawProduct {
            m: r.len(),
            a: self.a.wrapping_offset(r.start as isize * self.a_rs),
            out: self.out.wrapping_offset(r.start as isize * self.out_rs),
            ..*self
        }
    }

    /// The product restricted to output columns `c`.
    fn cols(&self, c: Range<usize>) -> Self {
        RawProduct {
            n: c.len(),
            b: self.b.wrapping_offset(c.start as isize * self.b_cs),
            out: self.out.wrapping_add(c.start),
            ..*self
        }
    }

    /// One `gemm` call: `out = a·b`.
    ///
    /// # Safety
    /// As [`RawProduct::call_into`].
    unsafe fn call(&self, parallelism: gemm::Parallelism, zero: T, one: T) {
        // SAFETY: the caller's contract; `read_dst` false means `out`'s old contents are not
        // read.
        unsafe { self.call_into(parallelism, false, zero, one) }
    }

    /// One `gemm` call: `out = dst_scale·out + product_scale·a·b` when `read_dst`, else
    /// `out = product_scale·a·b` (`out`'s old contents not read).
    ///
    /// # Safety
    /// Every `a[i*a_rs + p*a_cs]` and `b[p*b_rs + j*b_cs]` (`i < m`, `p < k`, `j < n`) must be
    /// readable, every `out[i*out_rs + j]` writable and touched by no one else during the call;
    /// `T` must be `f32` or `f64`.
    pub(super) unsafe fn call_into(
        &self,
        parallelism: gemm::Parallelism,
        read_dst: bool,
        dst_scale: T,
        product_scale: T,
    ) {
        // SAFETY: the caller's contract is exactly what `gemm` reads and writes.
        unsafe {
            gemm::gemm(
                self.m,
                self.n,
                self.k,
                self.out,
                1,
                self.out_rs,
                read_dst,
                self.a,
                self.a_cs,
                self.a_rs,
                self.b,
                self.b_cs,
                self.b_rs,
                dst_scale,
                product_scale,
                false,
                false,
                false,
                parallelism,
            )
        }
    }

    /// Runs the product with `split` (blocks on kiln's pool).
    ///
    /// # Safety
    /// As [`RawProduct::call`].
    pub unsafe fn run(&self, split: ProductSplit, zero: T, one: T) {
        // Every call below is sound: each block is a sub-product of `self` over a sub-range of
        // its rows or columns, so it reads a subset of what `self` reads and writes a block of
        // `self`'s output that no other block writes (`blocks` gives disjoint ranges).
        match split {
            // SAFETY: the whole product, as the caller guarantees (see above).
            ProductSplit::Single => unsafe { self.call(gemm::Parallelism::None, zero, one) },
            ProductSplit::Gemm => {
                // SAFETY: the whole product, as the caller guarantees (see above).
                pool().install(|| unsafe { self.call(gemm::Parallelism::Rayon(num_threads()), zero, one) })
            }
            ProductSplit::Rows(parts) => {
                let blocks = blocks(self.m, parts);
                pool().install(|| {
                    blocks
                        .into_par_iter()
                        // SAFETY: disjoint row blocks of the product (see above).
                        .for_each(|r| unsafe { self.rows(r).call(gemm::Parallelism::None, zero, one) })
                })
            }
            ProductSplit::Cols(parts) => {
                let blocks = blocks(self.n, parts);
                pool().install(|| {
                    blocks
                        .into_par_iter()
                        // SAFETY: disjoint column blocks of the product (see above).
                        .for_each(|c| unsafe { self.cols(c).call(gemm::Parallelism::None, zero, one) })
                })
            }
        }
    }
}

/// `len` cut into about `parts` disjoint ranges covering `0..len`, each a multiple of
/// [`BLOCK_ALIGN`] long but the last.
fn blocks(len: usize, parts: usize) -> Vec<Range<usize>> {
    let step = len.div_ceil(parts.max(1)).next_multiple_of(BLOCK_ALIGN).max(BLOCK_ALIGN);
    (0..len).step_by(step).map(|s| s..(s + step).min(len)).collect()
}

/// The spread of a product of shape `m x k @ k x n` without measuring: `gemm`'s own split when
/// `threads > 1`, the work is at least `threshold` and no side is below [`MIN_SPLIT_SIDE`];
/// else one thread.
pub fn fixed_split(m: usize, n: usize, k: usize, threads: usize, threshold: usize) -> ProductSplit {
    let work = (m * n).saturating_mul(k);
    if threads > 1 && work >= threshold && m.min(n).min(k) >= MIN_SPLIT_SIDE {
        ProductSplit::Gemm
    } else {
        ProductSplit::Single
    }
}

/// The spreads a measurement compares for an `m x n` output on `threads` threads: one thread,
/// `gemm`'s split, and row and column blocks (one and two per thread) wherever they make at
/// least two blocks that no earlier candidate makes.
pub fn candidates(m: usize, n: usize, threads: usize) -> Vec<ProductSplit> {
    let mut c = vec![ProductSplit::Single, ProductSplit::Gemm];
    let mut seen: Vec<(bool, Vec<Range<usize>>)> = Vec::new();
    for parts in [threads, 2 * threads] {
        for (rows, len) in [(true, m), (false, n)] {
            let b = blocks(len, parts);
            if b.len() >= 2 && !seen.iter().any(|(r, s)| *r == rows && *s == b) {
                c.push(if rows { ProductSplit::Rows(parts) } else { ProductSplit::Cols(parts) });
                seen.push((rows, b));
            }
        }
    }
    c
}

/// What identifies a product for the table: element type, sizes, which stride of each operand
/// is the unit one (row-major or column-major), and the thread count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProductShape {
    /// The element type.
    pub dtype: DType,
    /// Output rows.
    pub m: usize,
    /// Output columns.
    pub n: usize,
    /// The shared dimension.
    pub k: usize,
    /// Whether the lhs is stored column-major (a transposed matrix).
    pub a_transposed: bool,
    /// Whether the rhs is stored column-major.
    pub b_transposed: bool,
    /// Threads of kiln's pool when it was measured.
    pub threads: usize,
}

impl fmt::Display for ProductShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = |b: bool| if b { "ᵀ" } else { "" };
        write!(
            f,
            "{}x{}{} @ {}x{}{} {} on {} threads",
            self.m,
            self.k,
            t(self.a_transposed),
            self.k,
            self.n,
            t(self.b_transposed),
            self.dtype,
            self.threads
        )
    }
}

/// One measured shape: the spread chosen and every candidate's median time.
#[derive(Clone, Debug, PartialEq)]
pub struct TunedProduct {
    /// The product measured.
    pub shape: ProductShape,
    /// The fastest candidate, which every later product of this shape runs with.
    pub chosen: ProductSplit,
    /// Each candidate with the median of its [`ROUNDS`] times.
    pub times: Vec<(ProductSplit, Duration)>,
}

impl fmt::Display for TunedProduct {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "product {}: {} (median of {ROUNDS} runs: ", self.shape, self.chosen)?;
        for (i, (s, t)) in self.times.iter().enumerate() {
            write!(f, "{}{s} {:.0} µs", if i > 0 { ", " } else { "" }, t.as_secs_f64() * 1e6)?;
        }
        write!(f, ")")
    }
}

/// What the table knows of one shape.
enum Entry {
    /// Still measuring: each candidate's times so far, the candidate the next run takes, and
    /// how many runs the choice will be kept.
    Measuring { candidates: Vec<ProductSplit>, times: Vec<Vec<Duration>>, next: usize, keep: u64 },
    /// Measured: the fastest candidate, the runs left before the shape is measured again, and
    /// how many runs it was kept for.
    Chosen { split: ProductSplit, runs_left: u64, kept: u64 },
}

impl Entry {
    /// A measurement of the spreads of an `m x n` product over `threads`, whose choice is kept
    /// for `keep` runs.
    fn measuring(m: usize, n: usize, threads: usize, keep: u64) -> Entry {
        let candidates = candidates(m, n, threads);
        Entry::Measuring { times: vec![Vec::with_capacity(ROUNDS); candidates.len()], candidates, next: 0, keep }
    }
}

/// The shapes of this process, measured or being measured.
static TABLE: Mutex<Option<HashMap<ProductShape, Entry>>> = Mutex::new(None);

thread_local! {
    /// Whether products on this thread are measured (inside a compiled plan's run).
    static TUNING: Cell<bool> = const { Cell::new(false) };
    /// Shapes whose spread was chosen on this thread since [`take_new_tunings`] last ran.
    static NEW: RefCell<Vec<TunedProduct>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with per-shape measured spreads for the large products it runs on this thread
/// (compiled plans run their steps inside this; eager code uses the fixed rule).
pub fn with_tuned_products<R>(f: impl FnOnce() -> R) -> R {
    with_flag(&TUNING, f)
}

/// The shapes whose spread this thread chose since the last call, in order (a compiled step
/// reports them under `KILN_DEBUG=tuning` and counts them in its stats).
pub fn take_new_tunings() -> Vec<TunedProduct> {
    NEW.with(|n| std::mem::take(&mut *n.borrow_mut()))
}

/// The spread chosen for `shape`, once its measurement is complete.
pub fn tuned_split(shape: &ProductShape) -> Option<ProductSplit> {
    match table().as_ref()?.get(shape)? {
        Entry::Chosen { split, .. } => Some(*split),
        Entry::Measuring { .. } => None,
    }
}

/// The table, locked (a panic while it was held leaves it usable: every update is one step).
fn table() -> std::sync::MutexGuard<'static, Option<HashMap<ProductShape, Entry>>> {
    TABLE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `p` (whose identity is `shape`) with the spread this thread's mode gives: the fixed
/// rule for eager code or small products; else the chosen spread of its shape, or, while the
/// shape is being measured, the next candidate in turn, timed. The candidates take turns run
/// by run, so that machine noise at any one moment spreads over all of them, and each is
/// judged by its median once all have [`ROUNDS`] times; until then every run is a real
/// product of the plan (measuring costs no extra runs, only some runs with slower spreads).
///
/// # Safety
/// As [`RawProduct::call`].
pub(super) unsafe fn run_product<T: 'static + Copy + Send + Sync>(
    p: &RawProduct<T>,
    shape: ProductShape,
    threshold: usize,
    zero: T,
    one: T,
) {
    if shape.threads <= 1 || p.work() < TUNE_WORK || !TUNING.with(Cell::get) {
        // SAFETY: the caller's contract.
        return unsafe { p.run(fixed_split(p.m, p.n, p.k, shape.threads, threshold), zero, one) };
    }
    let (turn, split) = {
        let mut table = table();
        let table = table.get_or_insert_with(HashMap::new);
        if table.len() >= TABLE_CAP && !table.contains_key(&shape) {
            table.clear();
        }
        let entry = table.entry(shape).or_insert_with(|| Entry::measuring(p.m, p.n, shape.threads, REMEASURE_FIRST));
        if let Entry::Chosen { runs_left: 0, kept, .. } = *entry {
            *entry =
                Entry::measuring(p.m, p.n, shape.threads, kept.saturating_mul(REMEASURE_GROWTH).min(REMEASURE_MAX));
        }
        match entry {
            Entry::Chosen { split, runs_left, .. } => {
                *runs_left -= 1;
                (None, *split)
            }
            Entry::Measuring { candidates, next, .. } => {
                let turn = *next;
                *next = (turn + 1) % candidates.len();
                (Some(turn), candidates[turn])
            }
        }
    };
    let started = Instant::now();
    // SAFETY: the caller's contract; every candidate computes the whole product.
    unsafe { p.run(split, zero, one) };
    if let Some(turn) = turn {
        record(shape, turn, started.elapsed());
    }
}

/// Adds a measuring run's time to its candidate; chooses the shape's spread once every
/// candidate has [`ROUNDS`] times.
fn record(shape: ProductShape, turn: usize, time: Duration) {
    let mut table = table();
    let Some(entry) = table.as_mut().and_then(|t| t.get_mut(&shape)) else { return };
    let Entry::Measuring { candidates, times, keep, .. } = entry else { return };
    times[turn].push(time);
    if times.iter().any(|t| t.len() < ROUNDS) {
        return;
    }
    let medians: Vec<(ProductSplit, Duration)> = candidates
        .iter()
        .zip(times.iter_mut())
        .map(|(c, t)| {
            t.sort_unstable();
            (*c, t[t.len() / 2])
        })
        .collect();
    let chosen = medians.iter().min_by_key(|(_, t)| *t).expect("there are always candidates").0;
    *entry = Entry::Chosen { split: chosen, runs_left: *keep, kept: *keep };
    NEW.with(|n| n.borrow_mut().push(TunedProduct { shape, chosen, times: medians }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_aligned_disjoint_and_cover_the_range() {
        assert_eq!(blocks(128, 2), vec![0..64, 64..128]);
        assert_eq!(blocks(100, 2), vec![0..64, 64..100]);
        assert_eq!(blocks(10, 4), vec![0..10]);
        assert_eq!(blocks(784, 4), vec![0..208, 208..416, 416..624, 624..784]);
        for (len, parts) in [(1, 1), (17, 3), (1000, 7), (33, 2)] {
            let b = blocks(len, parts);
            assert_eq!(b.first().unwrap().start, 0);
            assert_eq!(b.last().unwrap().end, len);
            assert!(b.windows(2).all(|w| w[0].end == w[1].start && w[0].len() % BLOCK_ALIGN == 0));
        }
    }

    #[test]
    fn candidates_skip_splits_that_make_one_block_or_repeat_one() {
        use ProductSplit::*;
        assert_eq!(candidates(128, 512, 2), vec![Single, Gemm, Rows(2), Cols(2), Rows(4), Cols(4)]);
        // 10 rows make one block; 24 rows make the same two blocks in 2 or 4 parts.
        assert_eq!(candidates(10, 24, 2), vec![Single, Gemm, Cols(2)]);
        assert_eq!(candidates(512, 10, 2), vec![Single, Gemm, Rows(2), Rows(4)]);
    }

    #[test]
    fn the_fixed_rule_splits_only_big_products_with_no_thin_side() {
        assert_eq!(fixed_split(128, 512, 784, 2, 1000), ProductSplit::Gemm);
        assert_eq!(fixed_split(128, 10, 512, 2, 1000), ProductSplit::Single);
        assert_eq!(fixed_split(128, 512, 784, 1, 1000), ProductSplit::Single);
        assert_eq!(fixed_split(16, 16, 16, 2, 1 << 20), ProductSplit::Single);
    }

    /// Operands of an `m x k @ k x n` product, the lhs and rhs stored transposed or not, each
    /// with a leading dimension 3 wider than needed (a slice of a bigger matrix).
    fn operands(
        m: usize,
        n: usize,
        k: usize,
        at: bool,
        bt: bool,
    ) -> (Vec<f32>, Vec<f32>, impl Fn(*const f32, *const f32, *mut f32) -> RawProduct<f32>) {
        let value = |i: usize| ((i * 7919 % 1009) as f32 / 1009.0 - 0.5) * 1.7;
        let (a, b) =
            ((0..(m + 3) * (k + 3)).map(value).collect(), (0..(k + 3) * (n + 3)).map(|i| value(i + 5)).collect());
        let (a_rs, a_cs) = if at { (1, m as isize + 3) } else { (k as isize + 3, 1) };
        let (b_rs, b_cs) = if bt { (1, k as isize + 3) } else { (n as isize + 3, 1) };
        (a, b, move |a, b, out| RawProduct { m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, out, out_rs: n as isize })
    }

    #[test]
    fn every_spread_gives_the_bits_of_one_thread() {
        for (m, n, k, at, bt) in [
            (128, 96, 70, false, true),
            (100, 130, 64, true, false),
            (37, 300, 33, true, true),
            (256, 20, 128, false, false),
        ] {
            let (a, b, product) = operands(m, n, k, at, bt);
            let run = |split: ProductSplit| {
                let mut out = vec![f32::NAN; m * n];
                let p = product(a.as_ptr(), b.as_ptr(), out.as_mut_ptr());
                // SAFETY: `operands` sized a and b for every element the product reads; out is m*n.
                unsafe { p.run(split, 0.0, 1.0) };
                out
            };
            let one = run(ProductSplit::Single);
            let naive = (0..m * n).map(|o| {
                let (i, j) = (o / n, o % n);
                let p = product(a.as_ptr(), b.as_ptr(), std::ptr::null_mut());
                (0..k)
                    .map(|q| {
                        a[(i as isize * p.a_rs + q as isize * p.a_cs) as usize] as f64
                            * b[(q as isize * p.b_rs + j as isize * p.b_cs) as usize] as f64
                    })
                    .sum::<f64>()
            });
            for (got, want) in one.iter().zip(naive) {
                assert!((*got as f64 - want).abs() <= 1e-4 * (k as f64), "{got} vs {want}");
            }
            for split in candidates(m, n, 2).into_iter().chain([ProductSplit::Rows(3), ProductSplit::Cols(5)]) {
                assert!(run(split) == one, "{split} differs from one thread on {m}x{k} @ {k}x{n} (at {at}, bt {bt})");
            }
        }
    }

    #[test]
    fn a_shape_is_chosen_after_every_candidate_ran_its_rounds_and_keeps_the_bits() {
        let (m, n, k) = (96, 144, 80);
        let (a, b, product) = operands(m, n, k, true, false);
        let shape = ProductShape { dtype: DType::F32, m, n, k, a_transposed: true, b_transposed: false, threads: 2 };
        let run = |tuned: bool| {
            let mut out = vec![f32::NAN; m * n];
            let p = product(a.as_ptr(), b.as_ptr(), out.as_mut_ptr());
            // SAFETY: as in `every_spread_gives_the_bits_of_one_thread`; a threshold of 1 makes
            // this small product count as large.
            let go = || unsafe { run_product(&p, shape, 1, 0.0, 1.0) };
            if tuned {
                with_tuned_products(go)
            } else {
                go()
            }
            out
        };
        take_new_tunings();
        let eager = run(false);
        assert!(take_new_tunings().is_empty() && tuned_split(&shape).is_none(), "eager products are not measured");
        assert!(m * n * k >= TUNE_WORK);
        let runs = candidates(m, n, 2).len() * ROUNDS;
        for r in 0..runs {
            assert!(tuned_split(&shape).is_none(), "chosen after {r} of {runs} runs");
            assert!(run(true) == eager, "run {r}");
        }
        let new = take_new_tunings();
        assert_eq!(new.len(), 1);
        assert_eq!(new[0].shape, shape);
        assert_eq!(new[0].times.iter().map(|t| t.0).collect::<Vec<_>>(), candidates(m, n, 2));
        let chosen_time = new[0].times.iter().find(|(c, _)| *c == new[0].chosen).expect("a candidate").1;
        assert!(new[0].times.iter().all(|(_, t)| *t >= chosen_time), "{}", new[0]);
        assert_eq!(tuned_split(&shape), Some(new[0].chosen));
        assert!(new[0].to_string().starts_with("product 96x80ᵀ @ 80x144 float32 on 2 threads: "), "{}", new[0]);
        assert!(run(true) == eager);
        assert!(take_new_tunings().is_empty(), "a chosen shape is looked up, not measured again");
        // Measured again after REMEASURE_FIRST runs of the choice, with the same bits.
        for r in 1..REMEASURE_FIRST {
            assert!(tuned_split(&shape).is_some(), "measuring again after {r} runs");
            assert!(run(true) == eager);
        }
        assert!(tuned_split(&shape).is_some() && take_new_tunings().is_empty());
        for r in 0..runs {
            assert!(run(true) == eager, "run {r} of the second measurement");
            assert_eq!(tuned_split(&shape).is_some(), r + 1 == runs, "run {r} of {runs} of the second measurement");
        }
        let again = take_new_tunings();
        assert_eq!((again.len(), again[0].shape), (1, shape));
        assert!(
            matches!(table().as_ref().and_then(|t| t.get(&shape)), Some(Entry::Chosen { kept, .. }) if *kept == REMEASURE_FIRST * REMEASURE_GROWTH)
        );
    }

    #[test]
    fn tuning_is_scoped_to_the_closure_and_restored_after_a_panic() {
        assert!(!TUNING.with(Cell::get));
        with_tuned_products(|| {
            assert!(TUNING.with(Cell::get));
            with_tuned_products(|| assert!(TUNING.with(Cell::get)));
            assert!(TUNING.with(Cell::get));
        });
        assert!(!TUNING.with(Cell::get));
        assert!(std::panic::catch_unwind(|| with_tuned_products(|| panic!("inside"))).is_err());
        assert!(!TUNING.with(Cell::get));
    }
}
