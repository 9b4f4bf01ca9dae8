//! Matrix products over strided, batch-broadcast operands.
//!
//! [`matmul`] takes `a` viewed as `[batch..., m, k]` and `b` as `[batch..., k, n]` (batch dims
//! already broadcast to one shape: a broadcast batch has stride 0 and is never materialised) and
//! returns the contiguous `[batch..., m, n]` product.
//!
//! - `f32`/`f64` go through the `gemm` crate, which takes row and column strides: a matrix with a
//!   unit stride in either direction (row-major, transposed, sliced) is used in place; only one
//!   with no unit stride is copied first.
//! - `f16`/`bf16` are widened to `f32`, multiplied with `f32` accumulation over the whole `k`, and
//!   rounded once (as PyTorch's CPU kernels do). `gemm`'s native `f16` kernel was not used because
//!   it rounds its running sums to `f16` after every `k` block.
//! - Integers use a blocked loop that accumulates in `i64` with wrapping arithmetic; truncating
//!   that to the element type gives exactly PyTorch's wrapping result in the element type.
//!
//! Threads: a batch of small products, or of large ones that fill the threads evenly, is split
//! over kiln's pool one product per task; any other large product is spread over the pool as
//! [`super::product_split`] decides (by a fixed rule in eager code, by a per-shape measurement
//! inside compiled plans), never over more threads than kiln is set to.

use super::buffer::CpuBuf;
use super::elementwise::map1;
use super::parallel::{for_chunks_of, num_threads, pool};
use super::product_split::{run_product, ProductShape, RawProduct};
use crate::dtype::{Element, FloatElement};
use crate::layout::{numel, Layout, Shape, Strides};
use half::{bf16, f16};
use rayon::prelude::*;
use smallvec::SmallVec;

/// Multiply-adds below which a product (or a batch of products) runs on the calling thread.
const PAR_WORK: usize = 1 << 16;

/// Multiply-adds from which one product is big enough to be split across threads by itself.
const BIG_WORK: usize = 1 << 20;

/// Whether a batch of `nb` products, `work` multiply-adds each, runs one product per task on
/// `threads` threads rather than one product after another, each split across the threads.
/// Small products always spread over the batch (splitting one costs more than it gains); big
/// ones too when the batch fills the threads evenly enough (at least 7/8 of the thread-turns
/// busy), since each product on one thread needs no hand-over between threads: 64 products of
/// 128x64x128 took 1.4 ms split one by one and 0.35 ms one per task on 2 threads.
fn spread_over_batch(nb: usize, work: usize, threads: usize) -> bool {
    if nb <= 1 || threads <= 1 || nb.saturating_mul(work) < PAR_WORK {
        return false;
    }
    let turns = nb.div_ceil(threads) * threads;
    work < BIG_WORK || 8 * nb >= 7 * turns
}

/// Element types with a matrix product: every dtype but `Bool`.
pub trait MatmulElement: Element {
    /// The batched product; see [`matmul`].
    fn batched_matmul(a: &[Self], la: &Layout, b: &[Self], lb: &Layout) -> CpuBuf<Self>;
}

/// `a @ b` for every batch index: `la` has shape `[batch..., m, k]` and `lb` `[batch..., k, n]`
/// with equal batch dims (broadcast already); the result is the contiguous `[batch..., m, n]`.
///
/// # Panics
/// When the shapes do not fit as above or a layout reaches outside its storage (callers check
/// user input first; this is a contract check).
pub fn matmul<T: MatmulElement>(a: &[T], la: &Layout, b: &[T], lb: &Layout) -> CpuBuf<T> {
    T::batched_matmul(a, la, b, lb)
}

macro_rules! matmul_element {
    ($via:ident: $($t:ty),*) => {$(
        impl MatmulElement for $t {
            fn batched_matmul(a: &[Self], la: &Layout, b: &[Self], lb: &Layout) -> CpuBuf<Self> {
                $via(a, la, b, lb)
            }
        }
    )*};
}
matmul_element!(gemm_matmul: f32, f64);
matmul_element!(widened_matmul: f16, bf16);
matmul_element!(int_matmul: i64, i32, u8);

/// One matrix's strides in elements. A dim of size <= 1 gets stride 1 (its stride is never
/// used), so that a row or column vector always counts as having a unit stride.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Mat {
    rs: usize,
    cs: usize,
}

impl Mat {
    fn new(rows: usize, cols: usize, rs: usize, cs: usize) -> Mat {
        Mat { rs: if rows <= 1 { 1 } else { rs }, cs: if cols <= 1 { 1 } else { cs } }
    }

    /// The matrix made of the last two dims of `l`.
    fn of(l: &Layout) -> Mat {
        let nd = l.ndim();
        Mat::new(l.shape()[nd - 2], l.shape()[nd - 1], l.strides()[nd - 2], l.strides()[nd - 1])
    }

    /// Whether `gemm` can read it in place.
    fn has_unit_stride(self) -> bool {
        self.rs == 1 || self.cs == 1
    }
}

/// Where every product of a batch reads and writes.
#[derive(Debug)]
struct Geometry {
    m: usize,
    n: usize,
    k: usize,
    a: Mat,
    b: Mat,
    batch: Shape,
    a_batch: Strides,
    b_batch: Strides,
    a_offset: usize,
    b_offset: usize,
}

impl Geometry {
    fn new<T>(a: &[T], la: &Layout, b: &[T], lb: &Layout) -> Geometry {
        let nd = la.ndim();
        let (sa, sb) = (la.shape(), lb.shape());
        assert!(
            nd >= 2 && lb.ndim() == nd && sa[..nd - 2] == sb[..nd - 2] && sa[nd - 1] == sb[nd - 2],
            "matmul kernel: operand shapes {sa:?} and {sb:?} do not fit [batch..., m, k] @ [batch..., k, n]"
        );
        assert!(
            la.storage_end() <= a.len() && lb.storage_end() <= b.len(),
            "matmul kernel: layout outside its storage"
        );
        let (m, k, n) = (sa[nd - 2], sa[nd - 1], sb[nd - 1]);
        let batch = &sa[..nd - 2];
        let nb = numel(batch);
        // One rhs for the whole batch and lhs rows that merge into one matrix: a single product.
        if nb > 1 && lb.strides()[..nd - 2].iter().all(|&s| s == 0) {
            if let Some(v) = la.view(&[nb * m, k]) {
                return Geometry {
                    m: nb * m,
                    n,
                    k,
                    a: Mat::of(&v),
                    b: Mat::of(lb),
                    batch: SmallVec::new(),
                    a_batch: SmallVec::new(),
                    b_batch: SmallVec::new(),
                    a_offset: v.offset(),
                    b_offset: lb.offset(),
                };
            }
        }
        Geometry {
            m,
            n,
            k,
            a: Mat::of(la),
            b: Mat::of(lb),
            batch: SmallVec::from_slice(batch),
            a_batch: SmallVec::from_slice(&la.strides()[..nd - 2]),
            b_batch: SmallVec::from_slice(&lb.strides()[..nd - 2]),
            a_offset: la.offset(),
            b_offset: lb.offset(),
        }
    }

    /// Multiply-adds of one product (at least 1).
    fn work(&self) -> usize {
        (self.m * self.n).saturating_mul(self.k).max(1)
    }

    /// Storage offsets of the lhs and rhs of product number `idx` (row-major over the batch).
    fn offsets(&self, mut idx: usize) -> (usize, usize) {
        let (mut oa, mut ob) = (self.a_offset, self.b_offset);
        for d in (0..self.batch.len()).rev() {
            let i = idx % self.batch[d];
            idx /= self.batch[d];
            oa += i * self.a_batch[d];
            ob += i * self.b_batch[d];
        }
        (oa, ob)
    }

    /// Runs `kernel(geometry, lhs_offset, rhs_offset, out, split_inside)` for every product,
    /// `out` being that product's `m * n` block of the result; a batch of small products is
    /// spread over the pool, a large product is told it may split itself.
    fn run<T: Element>(&self, kernel: impl Fn(&Geometry, usize, usize, &mut [T], bool) + Sync) -> CpuBuf<T> {
        let nb = numel(&self.batch);
        let mn = self.m * self.n;
        let mut out = CpuBuf::<T>::uninit(nb * mn);
        if out.is_empty() {
            return out;
        }
        let work = self.work();
        let each = |(i, o): (usize, &mut [T]), split: bool| {
            let (oa, ob) = self.offsets(i);
            kernel(self, oa, ob, o, split)
        };
        if spread_over_batch(nb, work, num_threads()) {
            let per_task = PAR_WORK.div_ceil(work);
            pool().install(|| out.par_chunks_mut(mn).with_min_len(per_task).enumerate().for_each(|p| each(p, false)));
        } else {
            out.chunks_mut(mn).enumerate().for_each(|p| each(p, true));
        }
        out
    }
}

/// A contiguous copy of `l`'s elements converted by `f`, in which the broadcast (stride-0) batch
/// dims keep size 1 so that a broadcast batch is not materialised; returns the copy and a layout
/// of `l`'s shape over it (stride 0 again on those dims, unit column stride in each matrix).
fn compact_copy<S: Element, D: Element>(
    src: &[S],
    l: &Layout,
    f: impl Fn(S) -> D + Sync + Send,
) -> (CpuBuf<D>, Layout) {
    let nd = l.ndim();
    let kept: Shape = l
        .shape()
        .iter()
        .zip(l.strides())
        .enumerate()
        .map(|(d, (&n, &s))| if d + 2 < nd && s == 0 { n.min(1) } else { n })
        .collect();
    let buf = map1(src, &Layout::new(kept.clone(), SmallVec::from_slice(l.strides()), l.offset()), f);
    let layout = Layout::contiguous(&kept).broadcast_to(l.shape()).expect("a size-1 dim broadcasts to any size");
    (buf, layout)
}

/// The product for the element types `gemm` multiplies natively (`f32`, `f64`).
fn gemm_matmul<T: Element>(a: &[T], la: &Layout, b: &[T], lb: &Layout) -> CpuBuf<T> {
    let (a_copy, b_copy);
    let (a, la) = if Mat::of(la).has_unit_stride() {
        (a, la)
    } else {
        a_copy = compact_copy(a, la, |x| x);
        (&a_copy.0[..], &a_copy.1)
    };
    let (b, lb) = if Mat::of(lb).has_unit_stride() {
        (b, lb)
    } else {
        b_copy = compact_copy(b, lb, |x| x);
        (&b_copy.0[..], &b_copy.1)
    };
    let g = Geometry::new(a, la, b, lb);
    g.run(|g, oa, ob, out: &mut [T], split| {
        assert_eq!(out.len(), g.m * g.n);
        let p = RawProduct {
            m: g.m,
            n: g.n,
            k: g.k,
            a: a.as_ptr().wrapping_add(oa),
            a_rs: g.a.rs as isize,
            a_cs: g.a.cs as isize,
            b: b.as_ptr().wrapping_add(ob),
            b_rs: g.b.rs as isize,
            b_cs: g.b.cs as isize,
            out: out.as_mut_ptr(),
            out_rs: g.n as isize,
        };
        let shape = ProductShape {
            dtype: T::DTYPE,
            m: g.m,
            n: g.n,
            k: g.k,
            a_transposed: g.a.cs != 1,
            b_transposed: g.b.cs != 1,
            threads: if split { num_threads() } else { 1 },
        };
        // SAFETY: `g` was made by `Geometry::new` from `a`, `b` and their layouts, which checked
        // that every element of every product lies inside `a` and `b`, and `run` passes the
        // offsets `g.offsets` gives for its batch indices, so every lhs element
        // `oa + i*rs + p*cs` (i < m, p < k) and rhs element is readable. `out` is exactly this
        // product's m*n block (asserted), borrowed mutably for the call and written at
        // `i*n + j`. `T` is f32 or f64 (the only `gemm_matmul` instances).
        unsafe { run_product(&p, shape, gemm::get_threading_threshold(), T::zero(), T::one()) }
    })
}

/// The product for `f16`/`bf16`: widened to `f32`, multiplied, rounded once.
fn widened_matmul<T: FloatElement<Compute = f32>>(a: &[T], la: &Layout, b: &[T], lb: &Layout) -> CpuBuf<T> {
    let (a32, la32) = compact_copy(a, la, T::to_compute);
    let (b32, lb32) = compact_copy(b, lb, T::to_compute);
    let out = gemm_matmul(&a32, &la32, &b32, &lb32);
    CpuBuf::from_fn(out.len(), |i| T::from_compute(out[i]))
}

/// Rows of the lhs per task and per pass of the integer kernel.
const INT_ROWS: usize = 32;
/// Depth of one packed rhs panel of the integer kernel.
const INT_DEPTH: usize = 256;
/// Columns of one packed rhs panel of the integer kernel.
const INT_COLS: usize = 128;

/// The product for integer types: wrapping `i64` accumulation, blocked so that a packed
/// `INT_DEPTH x INT_COLS` rhs panel and the accumulators of `INT_ROWS` rows stay in cache.
fn int_matmul<T: Element>(a: &[T], la: &Layout, b: &[T], lb: &Layout) -> CpuBuf<T> {
    let g = Geometry::new(a, la, b, lb);
    g.run(|g, oa, ob, out: &mut [T], split| {
        let rows = |(blk, o): (usize, &mut [T])| int_rows(g, a, oa + blk * INT_ROWS * g.a.rs, b, ob, o);
        if split && g.work() >= PAR_WORK && g.m > INT_ROWS {
            let block = INT_ROWS * g.n;
            for_chunks_of(out, block, |start, o| rows((start / block, o)));
        } else {
            out.chunks_mut(INT_ROWS * g.n).enumerate().for_each(rows);
        }
    })
}

/// `out` (`r x n`, row-major) = the `r` lhs rows starting at storage offset `oa` times the rhs.
fn int_rows<T: Element>(g: &Geometry, a: &[T], oa: usize, b: &[T], ob: usize, out: &mut [T]) {
    let (n, k) = (g.n, g.k);
    let r = out.len() / n;
    let width = n.min(INT_COLS);
    let mut acc = vec![0i64; r * width];
    let mut panel = vec![0i64; k.min(INT_DEPTH) * width];
    for j0 in (0..n).step_by(INT_COLS) {
        let w = width.min(n - j0);
        acc.fill(0);
        for p0 in (0..k).step_by(INT_DEPTH) {
            let depth = INT_DEPTH.min(k - p0);
            for (pp, row) in panel.chunks_mut(w).take(depth).enumerate() {
                let base = ob + (p0 + pp) * g.b.rs + j0 * g.b.cs;
                for (jj, v) in row.iter_mut().enumerate() {
                    *v = b[base + jj * g.b.cs].to_i64();
                }
            }
            for (i, acc_row) in acc.chunks_mut(w).take(r).enumerate() {
                let a_row = oa + i * g.a.rs + p0 * g.a.cs;
                for (pp, b_row) in panel.chunks(w).take(depth).enumerate() {
                    let x = a[a_row + pp * g.a.cs].to_i64();
                    for (c, &y) in acc_row.iter_mut().zip(b_row) {
                        *c = c.wrapping_add(x.wrapping_mul(y));
                    }
                }
            }
        }
        for (o_row, acc_row) in out.chunks_mut(n).zip(acc.chunks(w)) {
            for (o, &v) in o_row[j0..j0 + w].iter_mut().zip(acc_row) {
                *o = T::from_i64(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The naive product in f64, reading any layouts.
    fn reference<T: Element>(a: &[T], la: &Layout, b: &[T], lb: &Layout) -> Vec<f64> {
        let nd = la.ndim();
        let (m, k, n) = (la.shape()[nd - 2], la.shape()[nd - 1], lb.shape()[nd - 1]);
        let batch = &la.shape()[..nd - 2];
        let mut out = vec![];
        let mut idx: Vec<usize> = vec![0; nd];
        for bi in 0..numel(batch) {
            let mut rest = bi;
            for d in (0..nd - 2).rev() {
                idx[d] = rest % batch[d];
                rest /= batch[d];
            }
            for i in 0..m {
                for j in 0..n {
                    let mut s = 0.0;
                    for p in 0..k {
                        idx[nd - 2] = i;
                        idx[nd - 1] = p;
                        let x = a[la.index_of(&idx)].to_f64();
                        idx[nd - 2] = p;
                        idx[nd - 1] = j;
                        s += x * b[lb.index_of(&idx)].to_f64();
                    }
                    out.push(s);
                }
            }
        }
        out
    }

    fn data<T: Element>(len: usize) -> Vec<T> {
        (0..len).map(|i| T::from_f64(((i * 7 + 3) % 11) as f64 - 5.0)).collect()
    }

    fn check<T: MatmulElement>(a: &[T], la: &Layout, b: &[T], lb: &Layout) {
        let got: Vec<f64> = matmul(a, la, b, lb).iter().map(|v| v.to_f64()).collect();
        assert_eq!(got, reference(a, la, b, lb), "{la:?} @ {lb:?}");
    }

    #[test]
    fn unit_stride_operands_are_used_in_place() {
        let l = Layout::contiguous(&[5, 3, 4]);
        for layout in [l.clone(), l.transpose(1, 2), l.narrow(2, 1, 2), l.transpose(0, 1)] {
            assert!(Mat::of(&layout).has_unit_stride(), "{layout:?}");
        }
        // A column vector cut from a row-major matrix: its row stride is 4, but one column.
        assert!(Mat::of(&l.narrow(2, 1, 1)).has_unit_stride());
        // Every other column of a row-major matrix: no unit stride, copied.
        assert!(!Mat::of(&l.slice_step(2, 0, 2, 2)).has_unit_stride());
    }

    #[test]
    fn batches_spread_when_small_or_even() {
        let big = BIG_WORK;
        assert!(spread_over_batch(64, 128 * 128 * 64, 2), "64 attention-sized products, 2 threads");
        assert!(spread_over_batch(4, big, 2) && spread_over_batch(7, big, 2) && spread_over_batch(3, big / 2, 2));
        assert!(!spread_over_batch(3, big, 2), "3 large products on 2 threads leave a quarter idle");
        assert!(!spread_over_batch(5, big, 4) && !spread_over_batch(64, 16, 2) && !spread_over_batch(8, big, 1));
        assert!(!spread_over_batch(1, big, 2));
    }

    #[test]
    fn broadcast_rhs_folds_into_one_product() {
        let a = Layout::contiguous(&[2, 3, 4, 5]);
        let b = Layout::contiguous(&[5, 6]).broadcast_to(&[2, 3, 5, 6]).unwrap();
        let g = Geometry::new(&[0f32; 120], &a, &[0f32; 30], &b);
        assert_eq!((g.m, g.n, g.k, g.batch.len()), (24, 6, 5, 0));
        // A transposed lhs cannot merge its rows: one product per batch index.
        let at = Layout::contiguous(&[2, 5, 4]).transpose(1, 2);
        let b = Layout::contiguous(&[5, 6]).broadcast_to(&[2, 5, 6]).unwrap();
        let g = Geometry::new(&[0f32; 40], &at, &[0f32; 30], &b);
        assert_eq!((g.m, g.batch.as_slice()), (4, &[2][..]));
    }

    #[test]
    fn compact_copy_keeps_broadcast_batch_dims_small() {
        let l = Layout::contiguous(&[3, 2]).transpose(0, 1).slice_step(1, 0, 2, 2).broadcast_to(&[7, 2, 2]).unwrap();
        let src: Vec<f32> = (0..6).map(|v| v as f32).collect();
        let (buf, cl) = compact_copy(&src, &l, |x| x);
        assert_eq!(buf.len(), 4);
        assert_eq!(cl.strides(), &[0, 2, 1]);
        assert_eq!(&buf[..], &[0.0, 4.0, 1.0, 5.0]);
    }

    #[test]
    fn every_type_matches_the_reference() {
        let la = Layout::contiguous(&[2, 3, 4]);
        let lb = Layout::contiguous(&[2, 5, 4]).transpose(1, 2);
        let lb_bcast = Layout::contiguous(&[4, 5]).broadcast_to(&[2, 4, 5]).unwrap();
        let lb_strided = Layout::contiguous(&[2, 5, 8]).transpose(1, 2).slice_step(1, 0, 4, 2);
        macro_rules! all {
            ($($t:ty),*) => {$(
                let a = data::<$t>(24);
                let b = data::<$t>(80);
                for lb in [&lb, &lb_bcast, &lb_strided] {
                    check(&a, &la, &b, lb);
                }
            )*};
        }
        all!(f32, f64, f16, bf16, i64, i32);
    }

    #[test]
    fn integers_wrap_like_the_element_type() {
        let a = [200u8, 100];
        let b = [2u8, 3];
        let out = matmul(&a, &Layout::contiguous(&[1, 2]), &b, &Layout::contiguous(&[2, 1]));
        assert_eq!(out[0], (200u8.wrapping_mul(2)).wrapping_add(100u8.wrapping_mul(3)));
        let big = [i64::MAX, 1];
        let out = matmul(&big, &Layout::contiguous(&[1, 2]), &[2i64, 1], &Layout::contiguous(&[2, 1]));
        assert_eq!(out[0], i64::MAX.wrapping_mul(2).wrapping_add(1));
    }

    #[test]
    fn integer_blocks_cover_large_products() {
        // More rows, depth and columns than one block, on the parallel path.
        let (m, k, n) = (70, 300, 140);
        let a = data::<i32>(m * k);
        let b = data::<i32>(k * n);
        check(&a, &Layout::contiguous(&[m, k]), &b, &Layout::contiguous(&[n, k]).transpose(0, 1));
    }
}
