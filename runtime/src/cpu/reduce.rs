//! Reductions (sum, prod, max/min with or without their index, all/any, squared deviations,
//! sums of exponentials), cumulative sums and softmax over CPU arrays.
//!
//! # How a reduction runs
//! A [`ReducePlan`] splits the input's dims into *kept* dims (one output element per index, in
//! row-major order) and *reduced* dims. The reduced dims are reordered by decreasing stride, so
//! that the innermost run is as contiguous as memory allows (a full reduction of a transposed
//! tensor reads memory in order); each element still carries its *logical* index (row-major over
//! the reduced dims in their original order), which the arg-reductions report. One of three
//! schedules then runs:
//! - **per output**: each output folds its elements one innermost run at a time; a contiguous run
//!   goes through [`Reducer::run`], written with [`LANES`] independent accumulators so that rustc
//!   vectorizes it. Outputs are split across the pool.
//! - **rows**: when the reduced dims are strided but consecutive outputs sit next to each other in
//!   memory (`x.sum(0)` of a row-major matrix), a tile of outputs accumulates whole input rows, so
//!   every read is contiguous. When the outputs are few and the rows many (a bias gradient), the
//!   rows are cut into fixed-size pieces instead, each accumulating every output, combined in
//!   order.
//! - **split**: when there are fewer outputs than threads and each reduces many elements (a full
//!   `sum`), an output's reduction is cut into fixed-size chunks that are reduced in parallel and
//!   combined in order, so that the result does not depend on the number of threads.
//!
//! # Accumulation
//! Sums, means, products and cumulative sums of floating-point inputs (f16, bf16, f32, f64)
//! accumulate in **f64** and round once at the end: a 16M-element f32 sum carries f64 rounding
//! error (about 1e-16 relative per addition, spread over 16 lanes), far below one f32 ulp, and the
//! widening costs nothing measurable since the loop is bound by memory bandwidth. Integer and bool
//! inputs accumulate in i64, wrapping on overflow as PyTorch does. Max/min compare f16/bf16 as f32
//! (exact), and NaN wins, as in PyTorch.

use super::buffer::CpuBuf;
use super::elementwise::SendPtr;
use super::parallel::{for_chunks_mut, for_chunks_of, for_ranges, map_tasks, num_threads, GRAIN};
use super::strided::{collapse, Collapsed};
use crate::dtype::num_like::Float;
use crate::dtype::{Element, FloatElement};
use crate::layout::{contiguous_strides, numel, Layout};
use crate::storage::StorageElement;
use half::{bf16, f16};
use smallvec::SmallVec;
use std::marker::PhantomData;
use std::ops::Range;

/// Independent accumulators in the vectorized loops over contiguous runs.
pub const LANES: usize = 16;
/// Elements per parallel piece of a split reduction (fixed, so results do not depend on the
/// number of threads).
const SPLIT_CHUNK: usize = 1 << 16;
/// Outputs accumulated together by the rows schedule; columns per task when cumsum or softmax
/// runs along a dim that is not innermost.
const TILE: usize = 512;
/// The fewest outputs a task of the rows schedule takes before the rows are split instead
/// ([`ReducePlan::fold_rows_split`]): 64 f32 are four cache lines of each row.
const MIN_ROW_TASK: usize = 64;

type Dims = SmallVec<[usize; 6]>;

// ---------------------------------------------------------------------------------------------
// Element traits
// ---------------------------------------------------------------------------------------------

/// The accumulator of sums and products: `f64` for floating-point inputs, `i64` (wrapping) for
/// integer and bool inputs.
pub trait Accum: Copy + Send + Sync + 'static {
    /// The identity of `add`.
    const ZERO: Self;
    /// The identity of `mul`.
    const ONE: Self;
    /// `self + other`.
    fn add(self, other: Self) -> Self;
    /// `self * other`.
    fn mul(self, other: Self) -> Self;
}

impl Accum for f64 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    #[inline(always)]
    fn add(self, other: Self) -> Self {
        self + other
    }
    #[inline(always)]
    fn mul(self, other: Self) -> Self {
        self * other
    }
}

impl Accum for i64 {
    const ZERO: Self = 0;
    const ONE: Self = 1;
    #[inline(always)]
    fn add(self, other: Self) -> Self {
        self.wrapping_add(other)
    }
    #[inline(always)]
    fn mul(self, other: Self) -> Self {
        self.wrapping_mul(other)
    }
}

/// Element types that can be summed, multiplied and cumulatively summed, with PyTorch's result
/// dtype: floats keep their dtype, integers and bool give i64.
pub trait SumElement: StorageElement {
    /// What the running sum is kept in.
    type Acc: Accum;
    /// The result element type.
    type Out: StorageElement;
    /// Widens an element into the accumulator.
    fn to_acc(self) -> Self::Acc;
    /// Rounds an accumulator into the result type.
    fn from_acc(acc: Self::Acc) -> Self::Out;
}

macro_rules! sum_float {
    ($($t:ty),*) => {$(
        impl SumElement for $t {
            type Acc = f64;
            type Out = $t;
            #[inline(always)]
            fn to_acc(self) -> f64 {
                Element::to_f64(self)
            }
            #[inline(always)]
            fn from_acc(acc: f64) -> $t {
                <$t as Element>::from_f64(acc)
            }
        }
    )*};
}
sum_float!(f32, f64, f16, bf16);

macro_rules! sum_int {
    ($($t:ty),*) => {$(
        impl SumElement for $t {
            type Acc = i64;
            type Out = i64;
            #[inline(always)]
            fn to_acc(self) -> i64 {
                Element::to_i64(self)
            }
            #[inline(always)]
            fn from_acc(acc: i64) -> i64 {
                acc
            }
        }
    )*};
}
sum_int!(i64, i32, u8, bool);

/// A value that max/min compare: f32, f64 (NaN is handled apart), the integers, bool.
pub trait OrdValue: Copy + Send + Sync + PartialOrd + 'static {
    /// The smallest value (-inf for floats).
    const LOWEST: Self;
    /// The largest value (+inf for floats).
    const HIGHEST: Self;
    /// NaN test (always false for non-floats).
    fn is_nan(self) -> bool;
}

macro_rules! ord_value {
    ($($t:ty: $lo:expr, $hi:expr, $nan:expr);* $(;)?) => {$(
        impl OrdValue for $t {
            const LOWEST: Self = $lo;
            const HIGHEST: Self = $hi;
            #[inline(always)]
            #[allow(clippy::eq_op)]
            fn is_nan(self) -> bool {
                let f: fn($t) -> bool = $nan;
                f(self)
            }
        }
    )*};
}
ord_value! {
    f32: f32::NEG_INFINITY, f32::INFINITY, |v| v != v;
    f64: f64::NEG_INFINITY, f64::INFINITY, |v| v != v;
    i64: i64::MIN, i64::MAX, |_| false;
    i32: i32::MIN, i32::MAX, |_| false;
    u8: u8::MIN, u8::MAX, |_| false;
    bool: false, true, |_| false;
}

/// Element types that max/min/argmax compare; f16 and bf16 compare as f32 (exactly).
pub trait OrdElement: StorageElement {
    /// The type comparisons run in.
    type Ord: OrdValue;
    /// Widens for comparison.
    fn to_ord(self) -> Self::Ord;
    /// Narrows back (exact for values that came from `to_ord`).
    fn from_ord(v: Self::Ord) -> Self;
}

macro_rules! ord_self {
    ($($t:ty),*) => {$(
        impl OrdElement for $t {
            type Ord = $t;
            #[inline(always)]
            fn to_ord(self) -> $t {
                self
            }
            #[inline(always)]
            fn from_ord(v: $t) -> $t {
                v
            }
        }
    )*};
}
ord_self!(f32, f64, i64, i32, u8, bool);

macro_rules! ord_half {
    ($($t:ty),*) => {$(
        impl OrdElement for $t {
            type Ord = f32;
            #[inline(always)]
            fn to_ord(self) -> f32 {
                self.to_f32()
            }
            #[inline(always)]
            fn from_ord(v: f32) -> $t {
                <$t>::from_f32(v)
            }
        }
    )*};
}
ord_half!(f16, bf16);

/// The compute types (f32, f64) with `exp` over a slice: f32 through the vectorized
/// [`super::simd::vecmath::exp_f32`] (≤ 2 ulp), f64 through libm. Softmax and logsumexp spend their
/// time here.
pub trait ExpSlice: Float {
    /// `dst[i] = exp(src[i])` (equal lengths).
    fn exp_slice(src: &[Self], dst: &mut [Self]);
}

impl ExpSlice for f32 {
    fn exp_slice(src: &[f32], dst: &mut [f32]) {
        super::simd::vecmath::map_f32(src, dst, super::simd::vecmath::exp_f32);
    }
}

impl ExpSlice for f64 {
    fn exp_slice(src: &[f64], dst: &mut [f64]) {
        assert_eq!(src.len(), dst.len(), "exp_slice: lengths differ");
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = s.exp();
        }
    }
}

/// `b` if it beats `a` (is larger with `MAX`, smaller without); NaN beats every number, so it
/// propagates as in PyTorch.
#[inline(always)]
fn pick<V: OrdValue, const MAX: bool>(a: V, b: V) -> V {
    let better = if MAX { b > a } else { b < a };
    // `|`, not `||`: no branch, so the lane loops vectorize.
    if better | b.is_nan() {
        b
    } else {
        a
    }
}

/// The winner of two (value, index) pairs for argmax (`MAX`) or argmin: the better value, NaN
/// above all, and the smaller index on ties, whatever order the pairs come in.
#[inline(always)]
fn pick_arg<V: OrdValue, const MAX: bool>(a: (V, usize), b: (V, usize)) -> (V, usize) {
    let (a_nan, b_nan) = (a.0.is_nan(), b.0.is_nan());
    let b_wins = if a_nan || b_nan {
        b_nan && (!a_nan || b.1 < a.1)
    } else if a.0 == b.0 {
        b.1 < a.1
    } else if MAX {
        b.0 > a.0
    } else {
        b.0 < a.0
    };
    if b_wins {
        b
    } else {
        a
    }
}

/// Folds a contiguous slice into `LANES` independent accumulators (so the loop vectorizes), then
/// merges them pairwise.
#[inline(always)]
fn fold_lanes<T: Copy, A: Copy>(xs: &[T], identity: A, f: impl Fn(A, T) -> A, merge: impl Fn(A, A) -> A) -> A {
    let mut lanes = [identity; LANES];
    let mut chunks = xs.chunks_exact(LANES);
    for c in &mut chunks {
        for i in 0..LANES {
            lanes[i] = f(lanes[i], c[i]);
        }
    }
    let mut width = LANES / 2;
    while width > 0 {
        for i in 0..width {
            lanes[i] = merge(lanes[i], lanes[i + width]);
        }
        width /= 2;
    }
    chunks.remainder().iter().fold(lanes[0], |a, &x| f(a, x))
}

// ---------------------------------------------------------------------------------------------
// Reducers
// ---------------------------------------------------------------------------------------------

/// One kind of reduction: how elements fold into an accumulator and how the accumulators of two
/// parts of one output combine. The caller of [`reduce`] turns the final accumulator into the
/// output element.
pub trait Reducer<T>: Sync {
    /// The running state.
    type Acc: Copy + Send + Sync;
    /// The empty state of output `out` (an identity of `combine`).
    fn init(&self, out: usize) -> Self::Acc;
    /// Folds in element `x`, whose logical index in the reduction is `idx`.
    fn step(&self, acc: Self::Acc, x: T, idx: usize) -> Self::Acc;
    /// Folds in a contiguous run whose element `i` has index `idx0 + i * idx_stride`.
    #[inline(always)]
    fn run(&self, acc: Self::Acc, xs: &[T], idx0: usize, idx_stride: usize) -> Self::Acc
    where
        T: Copy,
    {
        xs.iter().enumerate().fold(acc, |a, (i, &x)| self.step(a, x, idx0 + i * idx_stride))
    }
    /// Combines the states of two parts of one output's reduction.
    fn combine(&self, a: Self::Acc, b: Self::Acc) -> Self::Acc;
}

macro_rules! arith_reducer {
    ($(#[$doc:meta])* $name:ident, $identity:ident, $op:ident) => {
        $(#[$doc])*
        pub struct $name;

        impl<T: SumElement> Reducer<T> for $name {
            type Acc = T::Acc;
            #[inline(always)]
            fn init(&self, _out: usize) -> T::Acc {
                T::Acc::$identity
            }
            #[inline(always)]
            fn step(&self, acc: T::Acc, x: T, _idx: usize) -> T::Acc {
                acc.$op(x.to_acc())
            }
            #[inline(always)]
            fn run(&self, acc: T::Acc, xs: &[T], _idx0: usize, _idx_stride: usize) -> T::Acc {
                acc.$op(fold_lanes(xs, T::Acc::$identity, |a, x: T| a.$op(x.to_acc()), Accum::$op))
            }
            #[inline(always)]
            fn combine(&self, a: T::Acc, b: T::Acc) -> T::Acc {
                a.$op(b)
            }
        }
    };
}
arith_reducer!(
    /// Σ, in [`SumElement::Acc`].
    Sum,
    ZERO,
    add
);
arith_reducer!(
    /// Π, in [`SumElement::Acc`].
    Prod,
    ONE,
    mul
);

/// The largest (`MAX = true`) or smallest value; NaN propagates. The accumulator of an empty
/// reduction is -inf/+inf (or the integer bound): callers reject empty max/min first.
pub struct MinMax<const MAX: bool>;

impl<T: OrdElement, const MAX: bool> Reducer<T> for MinMax<MAX> {
    type Acc = T::Ord;
    #[inline(always)]
    fn init(&self, _out: usize) -> T::Ord {
        if MAX {
            T::Ord::LOWEST
        } else {
            T::Ord::HIGHEST
        }
    }
    #[inline(always)]
    fn step(&self, acc: T::Ord, x: T, _idx: usize) -> T::Ord {
        pick::<_, MAX>(acc, x.to_ord())
    }
    #[inline(always)]
    fn run(&self, acc: T::Ord, xs: &[T], _idx0: usize, _idx_stride: usize) -> T::Ord {
        let identity = <Self as Reducer<T>>::init(self, 0);
        pick::<_, MAX>(acc, fold_lanes(xs, identity, |a, x: T| pick::<_, MAX>(a, x.to_ord()), pick::<_, MAX>))
    }
    #[inline(always)]
    fn combine(&self, a: T::Ord, b: T::Ord) -> T::Ord {
        pick::<_, MAX>(a, b)
    }
}

/// The largest (`MAX = true`) or smallest value with its logical index: the first occurrence on
/// ties, the first NaN when there is one (PyTorch's `max(dim)`, `argmax`). An empty reduction
/// leaves index `usize::MAX`: callers reject it first.
pub struct ArgMinMax<const MAX: bool>;

impl<T: OrdElement, const MAX: bool> Reducer<T> for ArgMinMax<MAX> {
    type Acc = (T::Ord, usize);
    #[inline(always)]
    fn init(&self, _out: usize) -> Self::Acc {
        (if MAX { T::Ord::LOWEST } else { T::Ord::HIGHEST }, usize::MAX)
    }
    #[inline(always)]
    fn step(&self, acc: Self::Acc, x: T, idx: usize) -> Self::Acc {
        pick_arg::<_, MAX>(acc, (x.to_ord(), idx))
    }
    /// Two vectorizable passes: the run's best value, then its first position (indices grow
    /// along a run, so the first position has the smallest index).
    #[inline(always)]
    fn run(&self, acc: Self::Acc, xs: &[T], idx0: usize, idx_stride: usize) -> Self::Acc {
        let best = <MinMax<MAX> as Reducer<T>>::run(&MinMax::<MAX>, acc.0, xs, idx0, idx_stride);
        let first = if best.is_nan() {
            xs.iter().position(|x| x.to_ord().is_nan())
        } else {
            xs.iter().position(|x| x.to_ord() == best)
        };
        first.map_or(acc, |i| pick_arg::<_, MAX>(acc, (best, idx0 + i * idx_stride)))
    }
    #[inline(always)]
    fn combine(&self, a: Self::Acc, b: Self::Acc) -> Self::Acc {
        pick_arg::<_, MAX>(a, b)
    }
}

/// Whether every element (`ALL = true`) or any element is non-zero (NaN counts as non-zero).
pub struct AllAny<const ALL: bool>;

impl<T: Element, const ALL: bool> Reducer<T> for AllAny<ALL> {
    type Acc = bool;
    #[inline(always)]
    fn init(&self, _out: usize) -> bool {
        ALL
    }
    #[inline(always)]
    fn step(&self, acc: bool, x: T, _idx: usize) -> bool {
        if ALL {
            acc & (x != T::zero())
        } else {
            acc | (x != T::zero())
        }
    }
    #[inline(always)]
    fn run(&self, acc: bool, xs: &[T], _idx0: usize, _idx_stride: usize) -> bool {
        let merge = |a: bool, b: bool| if ALL { a & b } else { a | b };
        merge(acc, fold_lanes(xs, ALL, |a, x: T| <Self as Reducer<T>>::step(self, a, x, 0), merge))
    }
    #[inline(always)]
    fn combine(&self, a: bool, b: bool) -> bool {
        if ALL {
            a & b
        } else {
            a | b
        }
    }
}

/// Σ (x - mean)² in f64, where output `o`'s mean is `means[o]`: the second pass of a two-pass
/// variance (more accurate than one-pass formulas).
pub struct SqDev<'a>(pub &'a [f64]);

impl<T: Element> Reducer<T> for SqDev<'_> {
    /// (sum of squares, mean)
    type Acc = (f64, f64);
    #[inline(always)]
    fn init(&self, out: usize) -> (f64, f64) {
        (0.0, self.0[out])
    }
    #[inline(always)]
    fn step(&self, (s, m): (f64, f64), x: T, _idx: usize) -> (f64, f64) {
        let d = x.to_f64() - m;
        (s + d * d, m)
    }
    #[inline(always)]
    fn run(&self, (s, m): (f64, f64), xs: &[T], _idx0: usize, _idx_stride: usize) -> (f64, f64) {
        let sq = |a: f64, x: T| {
            let d = x.to_f64() - m;
            a + d * d
        };
        (s + fold_lanes(xs, 0.0, sq, |a, b| a + b), m)
    }
    #[inline(always)]
    fn combine(&self, a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
        (a.0 + b.0, a.1)
    }
}

/// Σ exp(x - shift) accumulated in f64, where output `o`'s shift is `shifts[o]` (in the input's
/// compute type): the second pass of `logsumexp`.
pub struct SumExp<'a, C>(pub &'a [C]);

impl<T: FloatElement> Reducer<T> for SumExp<'_, T::Compute>
where
    T::Compute: ExpSlice,
{
    /// (sum, shift)
    type Acc = (f64, T::Compute);
    #[inline(always)]
    fn init(&self, out: usize) -> Self::Acc {
        (0.0, self.0[out])
    }
    #[inline(always)]
    fn step(&self, (s, shift): Self::Acc, x: T, _idx: usize) -> Self::Acc {
        (s + (x.to_compute() - shift).exp().to_f64(), shift)
    }
    /// Blocks of 256 through [`ExpSlice`].
    #[inline(always)]
    fn run(&self, (mut s, shift): Self::Acc, xs: &[T], _idx0: usize, _idx_stride: usize) -> Self::Acc {
        const BLOCK: usize = 256;
        let (mut z, mut e) = ([T::Compute::zero(); BLOCK], [T::Compute::zero(); BLOCK]);
        for block in xs.chunks(BLOCK) {
            let (z, e) = (&mut z[..block.len()], &mut e[..block.len()]);
            for (z, &x) in z.iter_mut().zip(block) {
                *z = x.to_compute() - shift;
            }
            T::Compute::exp_slice(z, e);
            s += fold_lanes(e, 0.0, |a, v: T::Compute| a + v.to_f64(), |a, b| a + b);
        }
        (s, shift)
    }
    #[inline(always)]
    fn combine(&self, a: Self::Acc, b: Self::Acc) -> Self::Acc {
        (a.0 + b.0, a.1)
    }
}

// ---------------------------------------------------------------------------------------------
// The reduction engine
// ---------------------------------------------------------------------------------------------

/// How to walk one reduction of a strided input: the kept dims (outputs, row-major) and the
/// reduced dims (in memory order, each element tagged with its logical index).
#[derive(Clone, Debug)]
pub struct ReducePlan {
    offset: usize,
    /// Kept dims in logical order, with the input's strides.
    kept: Collapsed<1>,
    /// Reduced dims in memory order: the input's strides and the logical-index strides.
    reduced: Collapsed<2>,
    out_numel: usize,
    red_numel: usize,
}

impl ReducePlan {
    /// A plan reducing the dims of `layout` where `reduced[d]` is true (one flag per dim).
    pub fn new(layout: &Layout, reduced: &[bool]) -> ReducePlan {
        assert_eq!(reduced.len(), layout.ndim(), "one reduce flag per dim");
        let (shape, strides) = (layout.shape(), layout.strides());
        let split = |want: bool| -> (Dims, Dims) {
            (0..shape.len()).filter(|&d| reduced[d] == want).map(|d| (shape[d], strides[d])).unzip()
        };
        let (kept_shape, kept_strides) = split(false);
        let (red_shape, red_strides) = split(true);
        let red_index = contiguous_strides(&red_shape);
        // Memory order: broadcast (stride-0) dims outermost, then decreasing stride; the sort is
        // stable, so equal strides keep their logical order.
        let mut order: Dims = (0..red_shape.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(if red_strides[i] == 0 { usize::MAX } else { red_strides[i] }));
        let permuted = |v: &[usize]| -> Dims { order.iter().map(|&i| v[i]).collect() };
        ReducePlan {
            offset: layout.offset(),
            kept: collapse(&kept_shape, [&kept_strides]),
            reduced: collapse(&permuted(&red_shape), [&permuted(&red_strides), &permuted(&red_index)]),
            out_numel: numel(&kept_shape),
            red_numel: numel(&red_shape),
        }
    }

    /// Number of outputs (the product of the kept sizes).
    pub fn out_numel(&self) -> usize {
        self.out_numel
    }

    /// Number of elements each output reduces (the product of the reduced sizes).
    pub fn red_numel(&self) -> usize {
        self.red_numel
    }

    /// The input offset of the first element of output `out`.
    fn kept_offset(&self, out: usize) -> usize {
        let mut base = self.offset;
        self.kept.walk([self.offset], out..out + 1, |[b], _, _| base = b);
        base
    }

    /// The state of output `out` (whose elements start at `base`) over the logical positions
    /// `range` of the reduced space (in memory order).
    #[inline]
    fn fold<T: Element, R: Reducer<T>>(&self, x: &[T], r: &R, out: usize, base: usize, range: Range<usize>) -> R::Acc {
        let mut acc = r.init(out);
        self.reduced.walk([base, 0], range, |[off, idx], len, [stride, idx_stride]| {
            acc = if stride == 1 {
                r.run(acc, &x[off..off + len], idx, idx_stride)
            } else {
                (0..len).fold(acc, |a, i| r.step(a, x[off + i * stride], idx + i * idx_stride))
            };
        });
        acc
    }

    /// The rows schedule: outputs `out0..out0 + dst.len()`, whose elements start at consecutive
    /// input offsets from `base`, accumulate whole input rows a tile at a time.
    #[allow(clippy::too_many_arguments)]
    fn fold_rows<T: Element, R: Reducer<T>, O>(
        &self,
        x: &[T],
        r: &R,
        finish: &impl Fn(R::Acc, usize) -> O,
        out0: usize,
        base: usize,
        accs: &mut Vec<R::Acc>,
        dst: &mut [O],
    ) {
        let n = self.red_numel;
        for (t, tile) in dst.chunks_mut(TILE).enumerate() {
            let first = t * TILE;
            accs.clear();
            accs.extend((0..tile.len()).map(|j| r.init(out0 + first + j)));
            self.accumulate_rows(x, r, base + first, 0..n, accs);
            for (d, &a) in tile.iter_mut().zip(accs.iter()) {
                *d = finish(a, n);
            }
        }
    }

    /// The rows schedule with the rows split: every output (the plan's kept dims are one
    /// unit-stride run, so output `o` starts at input offset `offset + o`) accumulates pieces of
    /// a fixed number of input rows in parallel, and the pieces combine in order. For few
    /// outputs over many rows (a bias gradient, `g.sum(0)` of [4096, 64]), where splitting the
    /// outputs among tasks would give each task a few columns of every row.
    fn fold_rows_split<T: Element, R: Reducer<T>, O: Send>(
        &self,
        x: &[T],
        r: &R,
        finish: impl Fn(R::Acc, usize) -> O + Sync + Send,
        out: &mut [O],
    ) {
        let (n, w) = (self.red_numel, out.len());
        let per_piece = (SPLIT_CHUNK / w).max(1);
        let piece = |c: usize| -> Vec<R::Acc> {
            let mut accs: Vec<R::Acc> = (0..w).map(|o| r.init(o)).collect();
            let rows = c * per_piece..((c + 1) * per_piece).min(n);
            for (t, tile) in accs.chunks_mut(TILE).enumerate() {
                self.accumulate_rows(x, r, self.offset + t * TILE, rows.clone(), tile);
            }
            accs
        };
        let parts: Vec<Vec<R::Acc>> = map_tasks(n.div_ceil(per_piece), piece);
        let mut accs: Vec<R::Acc> = (0..w).map(|o| r.init(o)).collect();
        for part in parts {
            for (a, b) in accs.iter_mut().zip(part) {
                *a = r.combine(*a, b);
            }
        }
        for_chunks_mut(out, GRAIN, |start, chunk| {
            for (d, &a) in chunk.iter_mut().zip(&accs[start..]) {
                *d = finish(a, n);
            }
        });
    }

    /// Accumulates the input rows at positions `range` of the reduced space (in memory order)
    /// into `accs`, one accumulator per output, the outputs' elements starting at consecutive
    /// input offsets from `base`.
    fn accumulate_rows<T: Element, R: Reducer<T>>(
        &self,
        x: &[T],
        r: &R,
        base: usize,
        range: Range<usize>,
        accs: &mut [R::Acc],
    ) {
        let w = accs.len();
        // Four rows per sweep over the accumulators (a quarter of their loads and stores) while
        // the rows are short; from 256 bytes on, one row per sweep: four interleaved rows of
        // a 4 KiB page defeat the hardware prefetcher (`g.sum(0)` of [65536, 256] f32 ran at
        // 5 GB/s on one thread that way, and at 10 GB/s one row at a time).
        let sweep = if w * std::mem::size_of::<T>() >= 256 { 1 } else { 4 };
        self.reduced.walk([base, 0], range, |[off, idx], len, [stride, idx_stride]| {
            let row = |i: usize| &x[off + i * stride..off + i * stride + w];
            let mut i = 0;
            while sweep == 4 && i + 4 <= len {
                let k = idx + i * idx_stride;
                let (k1, k2, k3) = (k + idx_stride, k + 2 * idx_stride, k + 3 * idx_stride);
                let rows = accs.iter_mut().zip(row(i)).zip(row(i + 1)).zip(row(i + 2)).zip(row(i + 3));
                for ((((a, &v0), &v1), &v2), &v3) in rows {
                    *a = r.step(r.step(r.step(r.step(*a, v0, k), v1, k1), v2, k2), v3, k3);
                }
                i += 4;
            }
            for i in i..len {
                let k = idx + i * idx_stride;
                for (a, &v) in accs.iter_mut().zip(row(i)) {
                    *a = r.step(*a, v, k);
                }
            }
        });
    }
}

/// Reduces `x` (laid out as the plan's layout says) into a new contiguous buffer of
/// `plan.out_numel()` elements, output `o` being `finish(acc_o, plan.red_numel())`.
pub fn reduce<T, R, O>(
    x: &[T],
    plan: &ReducePlan,
    r: &R,
    finish: impl Fn(R::Acc, usize) -> O + Sync + Send,
) -> CpuBuf<O>
where
    T: Element,
    R: Reducer<T>,
    O: Element,
{
    let mut out = CpuBuf::uninit(plan.out_numel);
    reduce_into(x, plan, r, finish, &mut out);
    out
}

/// [`reduce`] into a caller-provided slice of `plan.out_numel()` elements of any type.
pub fn reduce_into<T, R, O>(
    x: &[T],
    plan: &ReducePlan,
    r: &R,
    finish: impl Fn(R::Acc, usize) -> O + Sync + Send,
    out: &mut [O],
) where
    T: Element,
    R: Reducer<T>,
    O: Send,
{
    assert_eq!(out.len(), plan.out_numel, "reduce: output length does not match the plan");
    let n = plan.red_numel;
    if n >= 2 * SPLIT_CHUNK && out.len() < 2 * num_threads() {
        for (o, slot) in out.iter_mut().enumerate() {
            let base = plan.kept_offset(o);
            let pieces = n.div_ceil(SPLIT_CHUNK);
            let parts: Vec<R::Acc> =
                map_tasks(pieces, |c| plan.fold(x, r, o, base, c * SPLIT_CHUNK..((c + 1) * SPLIT_CHUNK).min(n)));
            let acc = parts.into_iter().fold(r.init(o), |a, b| r.combine(a, b));
            *slot = finish(acc, n);
        }
        return;
    }
    let rows = plan.reduced.strides[0].last().is_some_and(|&s| s != 1) && plan.kept.strides[0].last() == Some(&1);
    let grain = (GRAIN / n.max(1)).max(1);
    // Splitting the outputs would leave each task less than a cache line of every row.
    let one_run = plan.kept.shape.len() == 1;
    if rows && one_run && grain < MIN_ROW_TASK && n * out.len() >= 2 * SPLIT_CHUNK && out.len() <= SPLIT_CHUNK / 16 {
        plan.fold_rows_split(x, r, finish, out);
        return;
    }
    for_chunks_mut(out, grain, |start, chunk| {
        let mut accs = Vec::new();
        let mut w = 0;
        plan.kept.walk([plan.offset], start..start + chunk.len(), |[base], len, [stride]| {
            let dst = &mut chunk[w..w + len];
            if rows && stride == 1 {
                plan.fold_rows(x, r, &finish, start + w, base, &mut accs, dst);
            } else {
                for (i, d) in dst.iter_mut().enumerate() {
                    *d = finish(plan.fold(x, r, start + w + i, base + i * stride, 0..n), n);
                }
            }
            w += len;
        });
    });
}

/// The largest (`MAX = true`) or smallest values with their logical indices (PyTorch's
/// `max(dim)`/`min(dim)`); the plan must not reduce zero elements per output.
pub fn min_max_with_indices<T: OrdElement, const MAX: bool>(x: &[T], plan: &ReducePlan) -> (CpuBuf<T>, CpuBuf<i64>) {
    let mut pairs = vec![(T::zero(), 0i64); plan.out_numel];
    reduce_into(x, plan, &ArgMinMax::<MAX>, |(v, i), _| (T::from_ord(v), i as i64), &mut pairs);
    (CpuBuf::from_fn(pairs.len(), |i| pairs[i].0), CpuBuf::from_fn(pairs.len(), |i| pairs[i].1))
}

// ---------------------------------------------------------------------------------------------
// Scans and softmax along one dim of a contiguous [outer, n, inner] array
// ---------------------------------------------------------------------------------------------

/// Calls `f(first_row, block)` on blocks of whole rows of `out` (rows of `row_len` elements),
/// in parallel when there is enough work.
pub(crate) fn for_row_blocks<O: Send>(out: &mut [O], row_len: usize, f: impl Fn(usize, &mut [O]) + Sync + Send) {
    if out.is_empty() {
        return;
    }
    let rows = out.len() / row_len;
    let tasks = (out.len() / GRAIN).clamp(1, num_threads() * 4).min(rows);
    if tasks <= 1 {
        return f(0, out);
    }
    let per_task = rows.div_ceil(tasks);
    for_chunks_of(out, per_task * row_len, |start, c| f(start / row_len, c));
}

/// The columns `cols` of one `[n, inner]` slab of an `[outer, n, inner]` output, owned by one
/// task of [`for_tiles`].
struct Tile<'a, O> {
    ptr: SendPtr<O>,
    base: usize,
    n: usize,
    inner: usize,
    cols: Range<usize>,
    _out: PhantomData<&'a mut [O]>,
}

impl<O> Tile<'_, O> {
    /// Row `r` of the tile.
    fn row(&mut self, r: usize) -> &mut [O] {
        assert!(r < self.n, "tile row out of range");
        // SAFETY: `for_tiles` checked that the output holds outer * n * inner elements and keeps
        // it exclusively borrowed while tiles live; `base = o * n * inner` with o < outer, r < n
        // and `cols` inside 0..inner, so the slice is in bounds. Each tile is handed to exactly
        // one task and distinct tiles cover disjoint (o, cols) pairs, so no element is reachable
        // through two tiles, and `&mut self` lets a tile lend one row at a time.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.ptr.0.add(self.base + r * self.inner + self.cols.start),
                self.cols.len(),
            )
        }
    }
}

/// A copy of a `SendPtr` to any element type (the derived `Copy` needs `O: Copy`); taking it
/// by reference makes closures capture the whole `SendPtr`, which is `Sync`.
fn reborrow<O>(p: &SendPtr<O>) -> SendPtr<O> {
    SendPtr(p.0)
}

/// Calls `f(o, cols, tile)` for every slab `o` of an `[outer, n, inner]` output and every tile of
/// at most [`TILE`] columns, in parallel when there is enough work.
fn for_tiles<O: Send>(
    out: &mut [O],
    outer: usize,
    n: usize,
    inner: usize,
    f: impl Fn(usize, Range<usize>, &mut Tile<'_, O>) + Sync + Send,
) {
    assert_eq!(out.len(), outer * n * inner, "output length does not match [outer, n, inner]");
    if out.is_empty() {
        return;
    }
    let tiles = inner.div_ceil(TILE);
    let ptr = SendPtr(out.as_mut_ptr());
    let grain = (GRAIN / (n * inner.min(TILE))).max(1);
    for_ranges(outer * tiles, grain, |tasks| {
        for t in tasks {
            let (o, c) = (t / tiles, t % tiles);
            let cols = c * TILE..((c + 1) * TILE).min(inner);
            let mut tile =
                Tile { ptr: reborrow(&ptr), base: o * n * inner, n, inner, cols: cols.clone(), _out: PhantomData };
            f(o, cols, &mut tile);
        }
    });
}

/// Cumulative sums along the middle dim of a contiguous `[outer, n, inner]` array, accumulated
/// as sums are (f64 for floats, wrapping i64 for integers and bool).
pub fn cumsum<T: SumElement>(x: &[T], outer: usize, n: usize, inner: usize) -> CpuBuf<T::Out> {
    assert_eq!(x.len(), outer * n * inner, "cumsum: input length does not match [outer, n, inner]");
    let mut out = CpuBuf::<T::Out>::uninit(x.len());
    if inner == 1 {
        for_row_blocks(&mut out, n, |row0, block| {
            for (r, dst) in block.chunks_exact_mut(n).enumerate() {
                let mut acc = T::Acc::ZERO;
                for (d, &v) in dst.iter_mut().zip(&x[(row0 + r) * n..(row0 + r + 1) * n]) {
                    acc = acc.add(v.to_acc());
                    *d = T::from_acc(acc);
                }
            }
        });
    } else {
        for_tiles(&mut out, outer, n, inner, |o, cols, tile| {
            let mut accs = vec![T::Acc::ZERO; cols.len()];
            for r in 0..n {
                let start = (o * n + r) * inner;
                let src = &x[start + cols.start..start + cols.end];
                for ((a, &v), d) in accs.iter_mut().zip(src).zip(tile.row(r)) {
                    *a = a.add(v.to_acc());
                    *d = T::from_acc(*a);
                }
            }
        });
    }
    out
}

/// The larger of two values, ignoring NaN (softmax's shift; a NaN still reaches the sum).
#[inline(always)]
fn shift_max<C: Float>(a: C, b: C) -> C {
    if b > a {
        b
    } else {
        a
    }
}

/// Softmax (or log-softmax when `log`) along the middle dim of a contiguous `[outer, n, inner]`
/// array into `out`, computed in the input's compute type after subtracting each row's max.
/// Along the innermost dim the input is read from memory once per row: the max, `x - max` and its
/// exp (vectorized for f32, see [`ExpSlice`]) go through scratch rows that stay in cache, and the
/// output is written once. Along an outer dim, tiles of columns are processed together so every
/// read is contiguous.
pub fn softmax<T: FloatElement>(x: &[T], out: &mut [T], outer: usize, n: usize, inner: usize, log: bool)
where
    T::Compute: ExpSlice,
{
    assert_eq!(x.len(), outer * n * inner, "softmax: input length does not match [outer, n, inner]");
    assert_eq!(out.len(), x.len(), "softmax: output length does not match the input");
    if log {
        softmax_impl::<T, true>(x, out, outer, n, inner)
    } else {
        softmax_impl::<T, false>(x, out, outer, n, inner)
    }
}

fn softmax_impl<T: FloatElement, const LOG: bool>(x: &[T], out: &mut [T], outer: usize, n: usize, inner: usize)
where
    T::Compute: ExpSlice,
{
    let neg_inf = T::Compute::c(f64::NEG_INFINITY);
    let zero = T::Compute::zero();
    let add = |a: T::Compute, b: T::Compute| a + b;
    if inner == 1 {
        for_row_blocks(out, n, |row0, block| {
            // z = x - max, then e = exp(z), one row at a time.
            let (mut z, mut e) = (Vec::new(), Vec::new());
            for (r, dst) in block.chunks_exact_mut(n).enumerate() {
                let src = &x[(row0 + r) * n..(row0 + r + 1) * n];
                let max = fold_lanes(src, neg_inf, |a, v: T| shift_max(a, v.to_compute()), shift_max);
                z.clear();
                z.extend(src.iter().map(|&v| v.to_compute() - max));
                e.resize(n, zero);
                T::Compute::exp_slice(&z, &mut e);
                let sum = fold_lanes(&e, zero, add, add);
                if LOG {
                    let log_sum = sum.ln();
                    for (d, &z) in dst.iter_mut().zip(&z) {
                        *d = T::from_compute(z - log_sum);
                    }
                } else {
                    let inv = T::Compute::one() / sum;
                    for (d, &e) in dst.iter_mut().zip(&e) {
                        *d = T::from_compute(e * inv);
                    }
                }
            }
        });
        return;
    }
    for_tiles(out, outer, n, inner, |o, cols, tile| {
        let w = cols.len();
        let src = |r: usize| {
            let start = (o * n + r) * inner;
            &x[start + cols.start..start + cols.end]
        };
        let mut max = vec![neg_inf; w];
        for r in 0..n {
            for (m, &v) in max.iter_mut().zip(src(r)) {
                *m = shift_max(*m, v.to_compute());
            }
        }
        // z = x - max and e = exp(z) for one row of the tile.
        let (mut z, mut e) = (vec![zero; w], vec![zero; w]);
        let exp_row = |r: usize, z: &mut [T::Compute], e: &mut [T::Compute]| {
            for ((z, &v), &m) in z.iter_mut().zip(src(r)).zip(&max) {
                *z = v.to_compute() - m;
            }
            T::Compute::exp_slice(z, e);
        };
        // Softmax keeps exp(x - max) in the output when that is exact (f32, f64: the element is
        // its own compute type) and computes it again otherwise (f16, bf16: no double rounding).
        let keep_exp = !LOG && std::mem::size_of::<T>() == std::mem::size_of::<T::Compute>();
        let mut sum = vec![zero; w];
        for r in 0..n {
            exp_row(r, &mut z, &mut e);
            for (s, &e) in sum.iter_mut().zip(&e) {
                *s = *s + e;
            }
            if keep_exp {
                for (d, &e) in tile.row(r).iter_mut().zip(&e) {
                    *d = T::from_compute(e);
                }
            }
        }
        // log-softmax subtracts ln(sum); softmax multiplies by 1/sum.
        let fin: Vec<T::Compute> = sum.iter().map(|&s| if LOG { s.ln() } else { T::Compute::one() / s }).collect();
        for r in 0..n {
            let dst = tile.row(r);
            if keep_exp {
                for (d, &f) in dst.iter_mut().zip(&fin) {
                    *d = T::from_compute(d.to_compute() * f);
                }
                continue;
            }
            exp_row(r, &mut z, &mut e);
            for (((d, &z), &e), &f) in dst.iter_mut().zip(&z).zip(&e).zip(&fin) {
                *d = T::from_compute(if LOG { z - f } else { e * f });
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every multi-index of `shape` in row-major order.
    fn indices(shape: &[usize]) -> Vec<Vec<usize>> {
        let mut out = vec![vec![]];
        for &n in shape {
            out = out.into_iter().flat_map(|p| (0..n).map(move |i| [p.clone(), vec![i]].concat())).collect();
        }
        out
    }

    /// Per output (row-major over kept dims), the storage offsets of its elements in logical
    /// order (row-major over reduced dims).
    fn naive_groups(l: &Layout, mask: &[bool]) -> Vec<Vec<usize>> {
        let kept: Vec<usize> = (0..l.ndim()).filter(|&d| !mask[d]).map(|d| l.shape()[d]).collect();
        let red: Vec<usize> = (0..l.ndim()).filter(|&d| mask[d]).map(|d| l.shape()[d]).collect();
        indices(&kept)
            .into_iter()
            .map(|k| {
                indices(&red)
                    .into_iter()
                    .map(|r| {
                        let (mut ki, mut ri) = (k.iter(), r.iter());
                        let idx: Vec<usize> = (0..l.ndim())
                            .map(|d| if mask[d] { *ri.next().unwrap() } else { *ki.next().unwrap() })
                            .collect();
                        l.index_of(&idx)
                    })
                    .collect()
            })
            .collect()
    }

    fn masks(ndim: usize) -> Vec<Vec<bool>> {
        (0..1usize << ndim).map(|m| (0..ndim).map(|d| m >> d & 1 == 1).collect()).collect()
    }

    fn check_all_reducers(x: &[f64], l: &Layout) {
        for mask in masks(l.ndim()) {
            let plan = ReducePlan::new(l, &mask);
            let groups = naive_groups(l, &mask);
            let sum = reduce(x, &plan, &Sum, |a, _| a);
            let max = reduce(x, &plan, &MinMax::<true>, |a, _| a);
            let argmin = reduce(x, &plan, &ArgMinMax::<false>, |(_, i), _| i as i64);
            assert_eq!(sum.len(), groups.len());
            for (o, g) in groups.iter().enumerate() {
                let vals: Vec<f64> = g.iter().map(|&i| x[i]).collect();
                assert_eq!(sum[o], vals.iter().sum::<f64>(), "sum {mask:?} {l:?}");
                if !vals.is_empty() {
                    assert_eq!(max[o], vals.iter().cloned().fold(f64::NEG_INFINITY, f64::max), "max {mask:?}");
                    let lo = vals.iter().cloned().fold(f64::INFINITY, f64::min);
                    assert_eq!(argmin[o], vals.iter().position(|&v| v == lo).unwrap() as i64, "argmin {mask:?} {l:?}");
                }
            }
        }
    }

    #[test]
    fn every_schedule_matches_the_definition() {
        // Small integers with repeats: sums are exact and argmin must pick the first tie.
        let x: Vec<f64> = (0..400).map(|i| ((i * 37) % 11) as f64).collect();
        let base = Layout::contiguous(&[4, 5, 6]);
        check_all_reducers(&x, &base);
        check_all_reducers(&x, &base.transpose(0, 2));
        check_all_reducers(&x, &base.permute(&[1, 2, 0]));
        check_all_reducers(&x, &base.narrow(1, 1, 3).narrow(2, 2, 3));
        check_all_reducers(&x, &Layout::contiguous(&[5, 1]).broadcast_to(&[3, 5, 4]).unwrap());
        check_all_reducers(&x, &Layout::contiguous(&[20, 3]).slice_step(0, 1, 6, 3));
        check_all_reducers(&x, &Layout::contiguous(&[]));
        check_all_reducers(&x, &Layout::contiguous(&[0, 3]));
        // More outputs than a tile in the rows schedule.
        check_all_reducers(&(0..3000).map(|i| (i % 7) as f64).collect::<Vec<_>>(), &Layout::contiguous(&[3, 1000]));
        // Few outputs over many rows: the rows split into pieces (a bias gradient), from an offset.
        let many: Vec<f64> = (0..5000 * 50).map(|i| ((i * 37) % 11) as f64).collect();
        check_all_reducers(&many, &Layout::contiguous(&[5000, 40]));
        check_all_reducers(&many, &Layout::contiguous(&[5000, 50]).narrow(1, 3, 40));
    }

    #[test]
    fn split_schedule_is_exact_and_keeps_first_index() {
        let n = 300_001;
        let x: Vec<i64> = (0..n as i64).map(|i| i % 1000).collect();
        for l in [Layout::contiguous(&[n]), Layout::contiguous(&[1, n])] {
            let mask = vec![true; l.ndim()];
            let plan = ReducePlan::new(&l, &mask);
            assert_eq!(reduce(&x, &plan, &Sum, |a, _| a)[0], x.iter().sum::<i64>());
            assert_eq!(reduce(&x, &plan, &ArgMinMax::<true>, |(_, i), _| i as i64)[0], 999);
            assert_eq!(reduce(&x, &plan, &ArgMinMax::<false>, |(_, i), _| i as i64)[0], 0);
        }
        // A transposed full reduction reads memory order but reports logical indices.
        let (r, c) = (1000, 301);
        let y: Vec<f32> = (0..r * c).map(|i| if i == 5 * c + 7 || i == 9 * c + 2 { 9.0 } else { 1.0 }).collect();
        let t = Layout::contiguous(&[r, c]).transpose(0, 1);
        let plan = ReducePlan::new(&t, &[true, true]);
        // In [c, r] order, (2, 9) comes before (7, 5).
        assert_eq!(reduce(&y, &plan, &ArgMinMax::<true>, |(_, i), _| i as i64)[0], (2 * r + 9) as i64);
    }

    #[test]
    fn nan_wins_and_ties_pick_the_first() {
        assert_eq!(pick_arg::<f32, true>((1.0, 3), (1.0, 2)), (1.0, 2));
        assert_eq!(pick_arg::<f32, false>((1.0, 0), (0.5, 9)), (0.5, 9));
        let nan = pick_arg::<f32, true>((f32::NAN, 4), (f32::NAN, 1));
        assert!(nan.0.is_nan() && nan.1 == 1);
        assert_eq!(pick_arg::<f32, true>((f32::NAN, 4), (9.0, 1)).1, 4);
        assert!(pick::<f32, false>(f32::NAN, 0.0).is_nan());
        assert!(pick::<f32, true>(0.0, f32::NAN).is_nan());
        let x = [1.0f32, f32::NAN, 3.0, f32::NAN];
        let plan = ReducePlan::new(&Layout::contiguous(&[4]), &[true]);
        assert!(reduce(&x, &plan, &MinMax::<true>, |a, _| a)[0].is_nan());
        assert_eq!(reduce(&x, &plan, &ArgMinMax::<false>, |(_, i), _| i as i64)[0], 1);
    }

    #[test]
    fn sums_of_integers_and_bools_widen_and_wrap() {
        let plan = ReducePlan::new(&Layout::contiguous(&[3]), &[true]);
        assert_eq!(reduce(&[200u8, 100, 50], &plan, &Sum, |a, _| a)[0], 350);
        assert_eq!(reduce(&[true, false, true], &plan, &Sum, |a, _| a)[0], 2);
        assert_eq!(reduce(&[i64::MAX, 1, 0], &plan, &Sum, |a, _| a)[0], i64::MIN);
        assert_eq!(reduce(&[-2i32, 3, 4], &plan, &Prod, |a, _| a)[0], -24);
        assert!(!reduce(&[1.0f32, f32::NAN, 0.0], &plan, &AllAny::<true>, |a, _| a)[0]);
        assert!(reduce(&[0.0f32, f32::NAN, 0.0], &plan, &AllAny::<false>, |a, _| a)[0]);
    }

    #[test]
    fn cumsum_along_inner_and_outer_dims() {
        let x: Vec<i32> = (0..2 * 3 * 700).map(|i| i % 5).collect();
        for (outer, n, inner) in [(2, 3, 700), (6, 700, 1), (1, 4200, 1), (2100, 2, 1)] {
            let out = cumsum(&x, outer, n, inner);
            for o in 0..outer {
                for j in 0..inner {
                    let mut acc = 0i64;
                    for r in 0..n {
                        let i = (o * n + r) * inner + j;
                        acc += x[i] as i64;
                        assert_eq!(out[i], acc);
                    }
                }
            }
        }
        assert!(cumsum::<f32>(&[], 3, 0, 2).is_empty());
    }

    #[test]
    fn softmax_along_inner_and_outer_dims() {
        let x: Vec<f64> = (0..2 * 3 * 600).map(|i| ((i * 13) % 17) as f64 * 0.3 - 2.0).collect();
        for (outer, n, inner) in [(2, 3, 600), (6, 600, 1), (3600, 1, 1)] {
            for log in [false, true] {
                let mut out = vec![0.0; x.len()];
                softmax(&x, &mut out, outer, n, inner, log);
                for o in 0..outer {
                    for j in 0..inner {
                        let at = |r: usize| (o * n + r) * inner + j;
                        let denom: f64 = (0..n).map(|r| x[at(r)].exp()).sum();
                        for r in 0..n {
                            let want = if log { x[at(r)] - denom.ln() } else { x[at(r)].exp() / denom };
                            assert!((out[at(r)] - want).abs() < 1e-12, "{outer} {n} {inner} {log}");
                        }
                    }
                }
            }
        }
        let mut out = [0.0f32; 2];
        softmax(&[f32::NEG_INFINITY, 1.0], &mut out, 1, 2, 1, true);
        assert_eq!(out, [f32::NEG_INFINITY, 0.0]);
    }
}
