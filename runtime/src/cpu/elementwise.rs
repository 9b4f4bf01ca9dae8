//! Elementwise kernels over strided operands: `map1`, `map2`, `map3` into a new contiguous
//! buffer, and in-place forms that write through a (possibly strided) destination view.
//!
//! Operands arrive already broadcast to the output shape (stride 0 on broadcast dims). When every
//! operand is contiguous the kernel is a plain zip over slices, which rustc vectorizes; otherwise
//! each innermost run is walked with its strides ([`super::strided`]).

use super::buffer::CpuBuf;
use super::parallel::{for_chunks_mut, for_ranges, GRAIN};
use super::strided::{collapse, Collapsed};
use crate::dtype::Element;
use crate::layout::Layout;

/// A raw pointer that may cross threads; each user states why its accesses are disjoint.
pub struct SendPtr<T>(pub *mut T);
impl<T> Clone for SendPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SendPtr<T> {}
// SAFETY: SendPtr is only a carrier; every dereference site documents that threads touch
// disjoint elements.
unsafe impl<T> Send for SendPtr<T> {}
// SAFETY: as for `Send` above.
unsafe impl<T> Sync for SendPtr<T> {}

/// Side of the square tiles used when an operand is transposed: a 64×64 tile of f32 (16 KiB)
/// stays in L1 while its rows are written.
const TILE: usize = 64;

/// True when operand `k` walks the innermost dim with a large stride but the next-outer dim
/// densely (a transpose): reading row by row would then touch a new cache line per element,
/// and with a power-of-two stride every one of them in the same cache set.
fn is_transposed<const N: usize>(c: &Collapsed<N>, k: usize) -> bool {
    let nd = c.shape.len();
    nd >= 2 && c.shape[nd - 1] > 1 && {
        let (sr, sc) = (c.strides[k][nd - 2], c.strides[k][nd - 1]);
        sc > 1 && sr > 0 && sr < sc
    }
}

/// True when some operand is transposed ([`is_transposed`]).
fn wants_tiles<const N: usize>(c: &Collapsed<N>) -> bool {
    (0..N).any(|k| is_transposed(c, k))
}

/// One operand over an innermost run of `n` elements: `n` values at stride 1, one value repeated
/// (stride 0), or any other stride.
#[derive(Clone, Copy)]
enum Run<'a, T> {
    Dense(&'a [T]),
    Repeat(Repeat<T>),
    Strided(&'a [T], usize),
}

impl<'a, T: Copy> Run<'a, T> {
    /// The run of `n` elements of `data` from `offset` with `stride`.
    #[inline(always)]
    fn new(data: &'a [T], offset: usize, stride: usize, n: usize) -> Self {
        match stride {
            1 => Run::Dense(&data[offset..offset + n]),
            0 => Run::Repeat(Repeat(data[offset])),
            s => Run::Strided(&data[offset..], s),
        }
    }
}

/// One value standing for every element of a run.
#[derive(Clone, Copy)]
struct Repeat<T>(T);

/// Element `i` of a run; each source type gets its own loop in [`fill2`] and [`fill3`].
trait RunSource<T>: Copy {
    fn at(self, i: usize) -> T;
}

impl<T: Copy> RunSource<T> for &[T] {
    #[inline(always)]
    fn at(self, i: usize) -> T {
        self[i]
    }
}

impl<T: Copy> RunSource<T> for Repeat<T> {
    #[inline(always)]
    fn at(self, _: usize) -> T {
        self.0
    }
}

impl<T: Copy> RunSource<T> for Run<'_, T> {
    #[inline(always)]
    fn at(self, i: usize) -> T {
        match self {
            Run::Dense(d) => d[i],
            Run::Repeat(r) => r.0,
            Run::Strided(d, s) => d[i * s],
        }
    }
}

/// `o[i] = f(a[i], b[i])` over one run.
#[inline(always)]
fn fill2<A, B, O>(o: &mut [O], a: impl RunSource<A>, b: impl RunSource<B>, f: &impl Fn(A, B) -> O) {
    for (i, o) in o.iter_mut().enumerate() {
        *o = f(a.at(i), b.at(i));
    }
}

/// `o[i] = f(a[i], b[i], c[i])` over one run.
#[inline(always)]
fn fill3<A, B, C, O>(
    o: &mut [O],
    a: impl RunSource<A>,
    b: impl RunSource<B>,
    c: impl RunSource<C>,
    f: &impl Fn(A, B, C) -> O,
) {
    for (i, o) in o.iter_mut().enumerate() {
        *o = f(a.at(i), b.at(i), c.at(i));
    }
}

/// `out = f(a)` for a contiguous `out` of `c`'s shape, where `a` (at `base`) is transposed in
/// the last two dims: each TILE×TILE tile is first read column by column — along `a`'s dense
/// direction, whole cache lines at a time — into a buffer that stays in L1, then written out
/// row by row. In parallel over row blocks.
fn map1_tiled<A: Element, O: Element>(
    a: &[A],
    c: &Collapsed<1>,
    base: usize,
    out: &mut [O],
    f: impl Fn(A) -> O + Sync + Send,
) {
    let nd = c.shape.len();
    let (rows, cols) = (c.shape[nd - 2], c.shape[nd - 1]);
    let (sr, sc) = (c.strides[0][nd - 2], c.strides[0][nd - 1]);
    let plane = rows * cols;
    let row_blocks = rows.div_ceil(TILE);
    let blocks = (out.len() / plane) * row_blocks;
    let grain = (GRAIN / (TILE * cols)).max(1);
    let ptr = SendPtr(out.as_mut_ptr());
    for_ranges(blocks, grain, |range| {
        #[allow(clippy::redundant_locals)] // captures the whole Send wrapper, not its pointer field
        let ptr = ptr;
        let mut tile = [A::default(); TILE * TILE];
        for blk in range {
            let (p, rb) = (blk / row_blocks, blk % row_blocks);
            let mut off = base;
            let mut rest = p;
            for d in (0..nd - 2).rev() {
                off += (rest % c.shape[d]) * c.strides[0][d];
                rest /= c.shape[d];
            }
            let (r0, r1) = (rb * TILE, ((rb + 1) * TILE).min(rows));
            for c0 in (0..cols).step_by(TILE) {
                let c1 = (c0 + TILE).min(cols);
                for col in c0..c1 {
                    let src = off + col * sc;
                    let t = &mut tile[(col - c0) * TILE..][..r1 - r0];
                    for (i, v) in t.iter_mut().enumerate() {
                        *v = a[src + (r0 + i) * sr];
                    }
                }
                for r in r0..r1 {
                    let row_out = p * plane + r * cols;
                    for col in c0..c1 {
                        let v = f(tile[(col - c0) * TILE + (r - r0)]);
                        // SAFETY: (p, r, col) is a distinct index below out.len() for every
                        // visit; threads get disjoint block ranges; `out` is exclusively
                        // borrowed for the whole call.
                        unsafe { ptr.0.add(row_out + col).write(v) };
                    }
                }
            }
        }
    });
}

/// Operand `k` of `c` as it will be read: when it is transposed, a contiguous copy made
/// through the tiles of [`map1_tiled`] (so the elementwise pass then reads it in order, at
/// the price of one more pass over it) with its new layout; otherwise itself.
fn untransposed<'a, const N: usize, T: Element>(
    c: &Collapsed<N>,
    k: usize,
    data: &'a [T],
    l: &Layout,
    copy: &'a mut Option<CpuBuf<T>>,
) -> (&'a [T], Layout) {
    if !is_transposed(c, k) {
        return (data, l.clone());
    }
    let buf = copy.insert(map1(data, l, |x| x));
    (&buf[..], Layout::contiguous(l.shape()))
}

/// `out[i] = f(a[i])` over `a`'s layout, into a new contiguous buffer.
pub fn map1<A: Element, O: Element>(a: &[A], la: &Layout, f: impl Fn(A) -> O + Sync + Send) -> CpuBuf<O> {
    let n = la.numel();
    let mut out = CpuBuf::<O>::uninit(n);
    if n == 0 {
        return out; // an empty view may sit past the end of its storage
    }
    if la.is_contiguous() {
        let a = &a[la.offset()..la.offset() + n];
        for_chunks_mut(&mut out, GRAIN, |start, o| {
            let e = start + o.len();
            for (o, &x) in o.iter_mut().zip(&a[start..e]) {
                *o = f(x);
            }
        });
        return out;
    }
    let c = collapse(la.shape(), [la.strides()]);
    if wants_tiles(&c) {
        map1_tiled(a, &c, la.offset(), &mut out, f);
        return out;
    }
    for_chunks_mut(&mut out, GRAIN, |start, o| {
        let mut w = 0;
        c.walk([la.offset()], start..start + o.len(), |[oa], run, [sa]| {
            for i in 0..run {
                o[w + i] = f(a[oa + i * sa]);
            }
            w += run;
        });
    });
    out
}

/// A new contiguous buffer of `n` elements, filled in parallel chunks by `body(start, chunk)`.
/// `map2` and `map3` allocate through it once their path is known: a transposed operand makes
/// them recurse on an untransposed copy, and the recursive call allocates the output.
fn filled<O: Element>(n: usize, body: impl Fn(usize, &mut [O]) + Sync + Send) -> CpuBuf<O> {
    let mut out = CpuBuf::<O>::uninit(n);
    for_chunks_mut(&mut out, GRAIN, body);
    out
}

/// `out[i] = f(a[i], b[i])`; `la` and `lb` have the output's shape (broadcast already).
pub fn map2<A: Element, B: Element, O: Element>(
    a: &[A],
    la: &Layout,
    b: &[B],
    lb: &Layout,
    f: impl Fn(A, B) -> O + Sync + Send,
) -> CpuBuf<O> {
    debug_assert_eq!(la.shape(), lb.shape());
    let n = la.numel();
    if n == 0 {
        return CpuBuf::uninit(0);
    }
    if la.is_contiguous() && lb.is_contiguous() {
        let a = &a[la.offset()..la.offset() + n];
        let b = &b[lb.offset()..lb.offset() + n];
        return filled(n, |s, o| {
            let e = s + o.len();
            for ((o, &x), &y) in o.iter_mut().zip(&a[s..e]).zip(&b[s..e]) {
                *o = f(x, y);
            }
        });
    }
    if la.is_contiguous() && lb.strides().iter().all(|&s| s == 0) {
        let a = &a[la.offset()..la.offset() + n];
        let y = b[lb.offset()];
        return filled(n, |s, o| {
            let e = s + o.len();
            for (o, &x) in o.iter_mut().zip(&a[s..e]) {
                *o = f(x, y);
            }
        });
    }
    if lb.is_contiguous() && la.strides().iter().all(|&s| s == 0) {
        let b = &b[lb.offset()..lb.offset() + n];
        let x = a[la.offset()];
        return filled(n, |s, o| {
            let e = s + o.len();
            for (o, &y) in o.iter_mut().zip(&b[s..e]) {
                *o = f(x, y);
            }
        });
    }
    let c = collapse(la.shape(), [la.strides(), lb.strides()]);
    if wants_tiles(&c) {
        let (mut ca, mut cb) = (None, None);
        let (a, la) = untransposed(&c, 0, a, la, &mut ca);
        let (b, lb) = untransposed(&c, 1, b, lb, &mut cb);
        return map2(a, &la, b, &lb, f);
    }
    filled(n, |start, o| {
        let mut w = 0;
        c.walk([la.offset(), lb.offset()], start..start + o.len(), |[oa, ob], run, [sa, sb]| {
            let o = &mut o[w..w + run];
            let (a, b) = (Run::new(a, oa, sa, run), Run::new(b, ob, sb, run));
            match (a, b) {
                (Run::Dense(a), Run::Dense(b)) => fill2(o, a, b, &f),
                (Run::Dense(a), Run::Repeat(b)) => fill2(o, a, b, &f),
                (Run::Repeat(a), Run::Dense(b)) => fill2(o, a, b, &f),
                (a, b) => fill2(o, a, b, &f),
            }
            w += run;
        });
    })
}

/// `out[i] = f(a[i], b[i], c[i])`; all layouts have the output's shape.
pub fn map3<A: Element, B: Element, C: Element, O: Element>(
    a: &[A],
    la: &Layout,
    b: &[B],
    lb: &Layout,
    c: &[C],
    lc: &Layout,
    f: impl Fn(A, B, C) -> O + Sync + Send,
) -> CpuBuf<O> {
    let n = la.numel();
    let col = collapse(la.shape(), [la.strides(), lb.strides(), lc.strides()]);
    if wants_tiles(&col) {
        let (mut ca, mut cb, mut cc) = (None, None, None);
        let (a, la) = untransposed(&col, 0, a, la, &mut ca);
        let (b, lb) = untransposed(&col, 1, b, lb, &mut cb);
        let (c, lc) = untransposed(&col, 2, c, lc, &mut cc);
        return map3(a, &la, b, &lb, c, &lc, f);
    }
    filled(n, |start, o| {
        let mut w = 0;
        col.walk([la.offset(), lb.offset(), lc.offset()], start..start + o.len(), |[oa, ob, oc], run, [sa, sb, sc]| {
            let o = &mut o[w..w + run];
            let (a, b, c) = (Run::new(a, oa, sa, run), Run::new(b, ob, sb, run), Run::new(c, oc, sc, run));
            // The dense and repeated combinations get loops of their own, which rustc vectorizes
            // (`where(mask, g, 0)`, ReLU's gradient, is dense, dense, repeated).
            match (a, b, c) {
                (Run::Dense(a), Run::Dense(b), Run::Dense(c)) => fill3(o, a, b, c, &f),
                (Run::Dense(a), Run::Dense(b), Run::Repeat(c)) => fill3(o, a, b, c, &f),
                (Run::Dense(a), Run::Repeat(b), Run::Dense(c)) => fill3(o, a, b, c, &f),
                (Run::Dense(a), Run::Repeat(b), Run::Repeat(c)) => fill3(o, a, b, c, &f),
                (a, b, c) => fill3(o, a, b, c, &f),
            }
            w += run;
        });
    })
}

/// `dst[i] = f(dst[i], src[i])` through `ld`, which must not overlap itself; `ls` has `ld`'s
/// shape. Pass a `src` with the same layout as `dst` and ignore it for a unary in-place op.
pub fn map2_inplace<D: Element, S: Element>(
    dst: &mut [D],
    ld: &Layout,
    src: &[S],
    ls: &Layout,
    f: impl Fn(D, S) -> D + Sync + Send,
) {
    if ld.numel() == 0 {
        return;
    }
    assert!(ld.is_non_overlapping(), "in-place write to a layout whose elements overlap");
    assert!(ld.storage_end() <= dst.len() && ls.storage_end() <= src.len(), "layout outside its storage");
    let n = ld.numel();
    if ld.is_contiguous() && ls.is_contiguous() {
        let s = &src[ls.offset()..ls.offset() + n];
        let d = &mut dst[ld.offset()..ld.offset() + n];
        for_chunks_mut(d, GRAIN, |start, o| {
            let e = start + o.len();
            for (o, &y) in o.iter_mut().zip(&s[start..e]) {
                *o = f(*o, y);
            }
        });
        return;
    }
    let c = collapse(ld.shape(), [ld.strides(), ls.strides()]);
    let base = SendPtr(dst.as_mut_ptr());
    for_ranges(n, GRAIN, |range| {
        #[allow(clippy::redundant_locals)] // captures the whole Send wrapper, not its pointer field
        let base = base;
        c.walk([ld.offset(), ls.offset()], range, |[od, os], run, [sd, ss]| {
            if sd == 1 && ss == 0 {
                // A repeated source (a scalar operand such as `buf.mul_(momentum)`): a plain
                // loop over the destination run, which rustc vectorizes.
                let y = src[os];
                // SAFETY: as below; the run `od..od + run` lies in `dst` and belongs to this
                // thread's range alone.
                let d = unsafe { std::slice::from_raw_parts_mut(base.0.add(od), run) };
                for o in d {
                    *o = f(*o, y);
                }
                return;
            }
            for i in 0..run {
                // SAFETY: `ld` is non-overlapping (checked above) and its extent lies inside
                // `dst`, so each linear index maps to a distinct in-bounds element; the ranges
                // given to threads are disjoint, so no element is touched by two threads, and
                // `dst` is exclusively borrowed for the whole call.
                unsafe {
                    let p = base.0.add(od + i * sd);
                    *p = f(*p, src[os + i * ss]);
                }
            }
        });
    });
}

/// `dst[i] = f(dst[i])` through `ld`, which must not overlap itself.
pub fn map1_inplace<D: Element>(dst: &mut [D], ld: &Layout, f: impl Fn(D) -> D + Sync + Send) {
    if ld.numel() == 0 {
        return;
    }
    assert!(ld.is_non_overlapping(), "in-place write to a layout whose elements overlap");
    assert!(ld.storage_end() <= dst.len(), "layout outside its storage");
    let n = ld.numel();
    if ld.is_contiguous() {
        for_chunks_mut(&mut dst[ld.offset()..ld.offset() + n], GRAIN, |_, o| {
            for o in o.iter_mut() {
                *o = f(*o);
            }
        });
        return;
    }
    let c = collapse(ld.shape(), [ld.strides()]);
    let base = SendPtr(dst.as_mut_ptr());
    for_ranges(n, GRAIN, |range| {
        #[allow(clippy::redundant_locals)] // captures the whole Send wrapper, not its pointer field
        let base = base;
        c.walk([ld.offset()], range, |[od], run, [sd]| {
            for i in 0..run {
                // SAFETY: as in `map2_inplace`: `ld` is non-overlapping and inside `dst`, threads
                // get disjoint index ranges, and `dst` is exclusively borrowed.
                unsafe {
                    let p = base.0.add(od + i * sd);
                    *p = f(*p);
                }
            }
        });
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map2_broadcast_and_transpose() {
        let a: Vec<f32> = (0..6).map(|v| v as f32).collect(); // [2,3]
        let la = Layout::contiguous(&[2, 3]).transpose(0, 1); // [3,2]
        let b = [10.0f32, 20.0];
        let lb = Layout::contiguous(&[2]).broadcast_to(&[3, 2]).unwrap();
        let out = map2(&a, &la, &b, &lb, |x, y| x + y);
        assert_eq!(&out[..], &[10.0, 23.0, 11.0, 24.0, 12.0, 25.0]);
    }

    #[test]
    fn tiled_transpose_matches_walk() {
        // [3, 70, 130] transposed in its last two dims, plus a broadcast row: exercises tiles
        // with ragged edges and the outer plane index.
        let shape = [3usize, 70, 130];
        let a: Vec<i64> = (0..(3 * 70 * 130) as i64).collect();
        let la = Layout::contiguous(&[3, 130, 70]).transpose(1, 2);
        assert!(wants_tiles(&collapse(la.shape(), [la.strides()])));
        let b = [1000i64, 2000, 3000];
        let lb = Layout::contiguous(&[3, 1, 1]).broadcast_to(&shape).unwrap();
        let out = map2(&a, &la, &b, &lb, |x, y| x + y);
        let copy = map1(&a, &la, |x| x);
        // Three operands, two of them transposed: both are copied through the tiles first.
        let three = map3(&a, &la, &b, &lb, &a, &la, |x, y, z| 2 * x + y - z);
        for p in 0..3 {
            for r in 0..70 {
                for c in 0..130 {
                    let i = (p * 70 + r) * 130 + c;
                    let want = a[la.index_of(&[p, r, c])];
                    assert_eq!(copy[i], want);
                    assert_eq!(out[i], want + b[p]);
                    assert_eq!(three[i], want + b[p]);
                }
            }
        }
    }

    #[test]
    fn inplace_through_transposed_view() {
        let mut d: Vec<i64> = (0..6).collect();
        let ld = Layout::contiguous(&[2, 3]).transpose(0, 1);
        let s = [1i64, 2, 3, 4, 5, 6];
        let ls = Layout::contiguous(&[3, 2]);
        map2_inplace(&mut d, &ld, &s, &ls, |x, y| x * 100 + y);
        // d viewed as [3,2]: (i,j) -> d[j*3+i]
        assert_eq!(d, vec![1, 103, 205, 302, 404, 506]);
    }

    /// Every element of `out` (contiguous, `shape`) against `f` applied through `index_of`.
    fn check3(shape: &[usize], ops: [(&[i64], &Layout); 3], out: &[i64]) {
        let [(a, la), (b, lb), (c, lc)] = ops;
        let n: usize = shape.iter().product();
        for (i, &got) in out.iter().enumerate().take(n) {
            let mut rest = i;
            let mut idx = vec![0; shape.len()];
            for d in (0..shape.len()).rev() {
                idx[d] = rest % shape[d];
                rest /= shape[d];
            }
            assert_eq!(
                got,
                a[la.index_of(&idx)] * 100 + b[lb.index_of(&idx)] * 10 + c[lc.index_of(&idx)],
                "element {i}"
            );
        }
    }

    #[test]
    fn map3_runs_dense_repeated_and_strided_operands() {
        let shape = [3usize, 5];
        let dense = Layout::contiguous(&shape);
        let scalar = Layout::contiguous(&[]).broadcast_to(&shape).unwrap();
        let row = Layout::contiguous(&[5]).broadcast_to(&shape).unwrap();
        let column = Layout::contiguous(&[3, 1]).broadcast_to(&shape).unwrap();
        let every_other = Layout::contiguous(&[3, 10]).slice_step(1, 0, 5, 2);
        let layouts = [&dense, &scalar, &row, &column, &every_other];
        let (ra, rb, rc): (Vec<i64>, Vec<i64>, Vec<i64>) =
            ((0..30).collect(), (0..30).map(|v| v % 7).collect(), (0..30).rev().collect());
        for la in layouts {
            for lb in layouts {
                for lc in layouts {
                    let out = map3(&ra, la, &rb, lb, &rc, lc, |x, y, z| x * 100 + y * 10 + z);
                    check3(&shape, [(&ra, la), (&rb, lb), (&rc, lc)], &out);
                }
            }
        }
    }

    #[test]
    fn inplace_with_a_repeated_source() {
        let mut d: Vec<f32> = (0..40).map(|v| v as f32).collect();
        let ld = Layout::contiguous(&[4, 10]).narrow(1, 2, 6); // rows of 6, stride 10
        let ls = Layout::contiguous(&[]).broadcast_to(&[4, 6]).unwrap();
        map2_inplace(&mut d, &ld, &[0.5f32], &ls, |x, y| x * y);
        for (i, &v) in d.iter().enumerate() {
            let want = if (2..8).contains(&(i % 10)) { i as f32 * 0.5 } else { i as f32 };
            assert_eq!(v, want, "element {i}");
        }
    }

    #[test]
    fn large_parallel_map_matches_serial() {
        let n = 300_001;
        let a: Vec<f64> = (0..n).map(|v| v as f64).collect();
        let la = Layout::contiguous(&[n]).narrow(0, 1, n - 1);
        let out = map1(&a, &la, |x| x * 2.0);
        assert!(out.iter().enumerate().all(|(i, &v)| v == 2.0 * (i + 1) as f64));
    }
}
