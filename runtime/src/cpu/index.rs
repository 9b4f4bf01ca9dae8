//! Indexing kernels: gathers and scatters through index tensors, compaction (`nonzero`,
//! `masked_select`) and `one_hot`.
//!
//! An indexing op visits the positions of an *iteration shape* (the result of a gather; the index
//! or value shape of a scatter) and maps each to one element of a *target* layout. Some iteration
//! dims *walk* a target dim (coordinate `i` is coordinate `i` of that dim); the remaining target
//! dims get their coordinate from index tensors. [`IndexMap::new`] validates every index value
//! once, before anything is written, and keeps the storage offset the indices contribute;
//! [`scatter`] then only adds offsets and cannot reach outside the target. One index tensor
//! may instead be read where it lies ([`IndexMap::direct`]): a gather into a new buffer checks
//! each value as it reads it, and `scatter`/`scatter_add` check them all in one read-only pass
//! first ([`IndexMap::validated`]), with no offsets buffer to fill.

use super::buffer::CpuBuf;
use super::elementwise::SendPtr;
use super::parallel::{for_chunks_mut, for_ranges, map_tasks, num_threads, pool, GRAIN};
use super::strided::collapse;
use crate::dtype::{DType, Element};
use crate::layout::{contiguous_strides, numel, Layout, Shape};
use rayon::prelude::*;
use smallvec::SmallVec;
use std::ops::Range;
use std::sync::Mutex;

/// One index tensor of an indexing op.
#[derive(Clone, Debug)]
pub struct IndexArg<'a> {
    /// The storage holding the index values.
    pub data: &'a [i64],
    /// Their layout, broadcast to the iteration shape.
    pub layout: Layout,
    /// The target dim whose coordinate the values give.
    pub dim: usize,
}

/// An index value outside its dim, found before anything was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadIndex {
    /// Which of the index arguments held it.
    pub arg: usize,
    /// The value.
    pub value: i64,
    /// The target dim it indexes.
    pub dim: usize,
    /// The size of that dim.
    pub size: usize,
}

/// The offsets the index values contribute: borrowed index values times a stride, or an owned
/// buffer of precomputed offsets.
enum Offsets<'a> {
    Borrowed(&'a [i64]),
    Owned(CpuBuf<i64>),
}

/// Index tensors mapped onto a target layout: iteration position `p` is the target element at
/// storage offset `base(p) + offsets(p) * mult`. Maps from [`IndexMap::new`] hold validated
/// offsets; a map from [`IndexMap::direct`] reads raw index values, which [`gather`] checks as it
/// goes and [`IndexMap::validated`] checks before a [`scatter`].
pub struct IndexMap<'a> {
    target: Layout,
    /// Iteration-shaped: the target's strides on walking dims, 0 elsewhere.
    base: Layout,
    /// Which iteration dims walk a target dim.
    walks: SmallVec<[bool; 6]>,
    offsets: Offsets<'a>,
    /// Iteration-shaped layout of `offsets`.
    offsets_layout: Layout,
    mult: usize,
    /// For a direct map: the target dim its raw values index, and that dim's size.
    unchecked: Option<(usize, usize)>,
}

/// The first (in row-major order) finding of chunks that run in parallel.
struct First(Mutex<Option<(usize, i64)>>);

impl First {
    fn new() -> First {
        First(Mutex::new(None))
    }

    fn report(&self, pos: usize, value: i64) {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_none_or(|(p, _)| pos < p) {
            *g = Some((pos, value));
        }
    }

    fn value(self) -> Option<i64> {
        self.0.into_inner().unwrap_or_else(|e| e.into_inner()).map(|(_, v)| v)
    }
}

/// `v` as a coordinate of a dim of `size`, or `None` when out of range; negative values count
/// from the end when `allow_negative`.
#[inline(always)]
fn coordinate(v: i64, size: usize, allow_negative: bool) -> Option<usize> {
    let n = size as i64;
    if (0..n).contains(&v) {
        Some(v as usize)
    } else if allow_negative && v < 0 && v >= -n {
        Some((v + n) as usize)
    } else {
        None
    }
}

/// `layout` with its stride-0 dims shrunk to size 1 (size 0 stays 0): each distinct element once.
fn distinct(layout: &Layout) -> Layout {
    let shape = layout.shape().iter().zip(layout.strides()).map(|(&n, &s)| if s == 0 { n.min(1) } else { n }).collect();
    Layout::new(shape, layout.strides().into(), layout.offset())
}

/// The iteration-shaped base layout of a map, after checking that the walking dims and the index
/// dims cover every target dim exactly once and that walking dims stay inside their target dim.
fn base_layout(target: &Layout, shape: &[usize], walk: &[Option<usize>], index_dims: &[usize]) -> Layout {
    assert_eq!(walk.len(), shape.len(), "one walk entry per iteration dim");
    let mut covered: SmallVec<[bool; 6]> = SmallVec::from_elem(false, target.ndim());
    let mut strides: SmallVec<[usize; 6]> = SmallVec::from_elem(0, shape.len());
    let mut cover = |t: usize| {
        assert!(!covered[t], "target dim {t} covered twice");
        covered[t] = true;
    };
    for (d, w) in walk.iter().enumerate() {
        if let Some(t) = *w {
            cover(t);
            assert!(shape[d] <= target.shape()[t], "walking dim {d} is longer than target dim {t}");
            strides[d] = target.strides()[t];
        }
    }
    index_dims.iter().for_each(|&t| cover(t));
    assert!(covered.iter().all(|&c| c), "every target dim needs a walking dim or an index");
    Layout::new(SmallVec::from_slice(shape), strides, target.offset())
}

/// Checks an iteration-shaped index layout against its storage.
fn check_arg(arg: &IndexArg<'_>, shape: &[usize]) {
    assert_eq!(arg.layout.shape(), shape, "index layouts are broadcast to the iteration shape");
    assert!(numel(shape) == 0 || arg.layout.storage_end() <= arg.data.len(), "index layout outside its storage");
}

impl IndexMap<'static> {
    /// Validates the index tensors (negative values count from the end when `allow_negative`)
    /// and precomputes the offsets they contribute. `walk[d]` names the target dim iteration
    /// dim `d` walks, if any; the walking dims and the indices' dims must cover every target dim
    /// once.
    pub fn new(
        target: &Layout,
        shape: &[usize],
        walk: &[Option<usize>],
        indices: &[IndexArg<'_>],
        allow_negative: bool,
    ) -> Result<IndexMap<'static>, BadIndex> {
        let dims: SmallVec<[usize; 6]> = indices.iter().map(|a| a.dim).collect();
        let base = base_layout(target, shape, walk, &dims);
        // Offsets vary only along dims where some index does.
        let varying: SmallVec<[bool; 6]> =
            (0..shape.len()).map(|d| indices.iter().any(|a| a.layout.strides()[d] != 0 && shape[d] > 1)).collect();
        let reduced: Shape = shape.iter().zip(&varying).map(|(&n, &v)| if v { n } else { n.min(1) }).collect();
        // The first index writes every offset, the others add to it.
        let mut offsets =
            if indices.is_empty() { CpuBuf::<i64>::zeros(1) } else { CpuBuf::<i64>::uninit(numel(&reduced)) };
        for (k, arg) in indices.iter().enumerate() {
            check_arg(arg, shape);
            let (size, stride) = (target.shape()[arg.dim], target.strides()[arg.dim] as i64);
            let l = Layout::new(reduced.clone(), arg.layout.strides().into(), arg.layout.offset());
            let c = collapse(l.shape(), [l.strides()]);
            let first = First::new();
            for_chunks_mut(&mut offsets, GRAIN, |start, o| {
                let mut w = 0;
                c.walk([l.offset()], start..start + o.len(), |[oi], run, [si]| {
                    for (i, o) in o[w..w + run].iter_mut().enumerate() {
                        let v = arg.data[oi + i * si];
                        match coordinate(v, size, allow_negative) {
                            Some(c) if k == 0 => *o = c as i64 * stride,
                            Some(c) => *o += c as i64 * stride,
                            None => first.report(start + w + i, v),
                        }
                    }
                    w += run;
                });
            });
            if let Some(value) = first.value() {
                return Err(BadIndex { arg: k, value, dim: arg.dim, size });
            }
        }
        let mut ostrides = contiguous_strides(&reduced);
        ostrides.iter_mut().zip(&varying).for_each(|(s, &v)| *s *= v as usize);
        Ok(IndexMap {
            target: target.clone(),
            walks: walk.iter().map(Option::is_some).collect(),
            offsets_layout: Layout::new(SmallVec::from_slice(shape), ostrides, 0),
            base,
            offsets: Offsets::Owned(offsets),
            mult: 1,
            unchecked: None,
        })
    }
}

impl<'a> IndexMap<'a> {
    /// A map that reads one index tensor where it lies (no copy, no validation pass): for
    /// [`gather`] only, which rejects values outside `0..size` as it reads them.
    pub fn direct(target: &Layout, shape: &[usize], walk: &[Option<usize>], index: IndexArg<'a>) -> IndexMap<'a> {
        let base = base_layout(target, shape, walk, &[index.dim]);
        check_arg(&index, shape);
        IndexMap {
            target: target.clone(),
            walks: walk.iter().map(Option::is_some).collect(),
            base,
            offsets: Offsets::Borrowed(index.data),
            offsets_layout: index.layout,
            mult: target.strides()[index.dim],
            unchecked: Some((index.dim, target.shape()[index.dim])),
        }
    }

    /// This map once every raw value of a [`IndexMap::direct`] map is known to lie in
    /// `0..size` (one read-only pass over the index, in parallel), so that [`scatter`] may
    /// walk the index itself; else the first value outside, in row-major order. A map from
    /// [`IndexMap::new`] is returned as it is.
    pub fn validated(mut self) -> Result<IndexMap<'a>, BadIndex> {
        let Some((dim, size)) = self.unchecked else {
            return Ok(self);
        };
        let (offs, l) = (self.offsets(), &self.offsets_layout);
        let c = collapse(l.shape(), [l.strides()]);
        let first = First::new();
        for_ranges(l.numel(), GRAIN, |range| {
            let mut w = range.start;
            c.walk([l.offset()], range, |[o], run, [s]| {
                if let Some(i) = (0..run).find(|&i| offs[o + i * s] as u64 >= size as u64) {
                    first.report(w + i, offs[o + i * s]);
                }
                w += run;
            });
        });
        if let Some(value) = first.value() {
            return Err(BadIndex { arg: 0, value, dim, size });
        }
        self.unchecked = None;
        Ok(self)
    }

    /// The iteration shape.
    pub fn shape(&self) -> &[usize] {
        self.base.shape()
    }

    fn offsets(&self) -> &[i64] {
        match &self.offsets {
            Offsets::Borrowed(d) => d,
            Offsets::Owned(b) => b,
        }
    }
}

/// `out[p] = src[target element of p]` over the map's iteration shape, into a new contiguous
/// buffer. `src` is the target's storage. The raw values of a direct map are checked here: the
/// first one outside its dim (in row-major order) is the error.
pub fn gather<T: Element>(src: &[T], map: &IndexMap<'_>) -> Result<CpuBuf<T>, BadIndex> {
    let n = map.base.numel();
    assert!(n == 0 || map.target.storage_end() <= src.len(), "gather: target layout outside its storage");
    let mut out = CpuBuf::<T>::uninit(n);
    let (offs, mult) = (map.offsets(), map.mult);
    // Validated offsets pass any limit; raw values must be in 0..size (negatives wrap to huge).
    let limit = map.unchecked.map_or(u64::MAX, |(_, size)| size as u64);
    let first = First::new();
    let c = collapse(map.base.shape(), [map.base.strides(), map.offsets_layout.strides()]);
    for_chunks_mut(&mut out, GRAIN, |start, o| {
        let mut w = 0;
        c.walk([map.base.offset(), map.offsets_layout.offset()], start..start + o.len(), |[ob, oo], run, [sb, so]| {
            let o = &mut o[w..w + run];
            if so == 0 && sb == 1 {
                // One index value for a contiguous run (index_select of rows): a plain copy.
                let v = offs[oo];
                if (v as u64) < limit {
                    let s = ob + v as usize * mult;
                    o.copy_from_slice(&src[s..s + run]);
                } else {
                    first.report(start + w, v);
                }
            } else {
                for (i, o) in o.iter_mut().enumerate() {
                    let v = offs[oo + i * so];
                    if (v as u64) >= limit {
                        first.report(start + w + i, v);
                        break;
                    }
                    *o = src[ob + i * sb + v as usize * mult];
                }
            }
            w += run;
        });
    });
    match (first.value(), map.unchecked) {
        (Some(value), Some((dim, size))) => Err(BadIndex { arg: 0, value, dim, size }),
        _ => Ok(out),
    }
}

/// Iteration positions handled together in [`scatter`]'s inner loops (bounds the memory one
/// pass over the serial dims touches).
const SCATTER_BLOCK: usize = 256;

/// `dst[target element of p] = f(dst[..], src[p])` for every iteration position `p`, where `ls`
/// (iteration-shaped) lays out `src` and `dst` is the target's storage, whose layout must not
/// overlap itself. Positions that share a target element are applied in row-major order, so
/// with an assigning `f` the last one wins: deterministic, whatever the thread count.
pub fn scatter<T: Element>(
    dst: &mut [T],
    map: &IndexMap<'_>,
    src: &[T],
    ls: &Layout,
    f: impl Fn(T, T) -> T + Sync + Send,
) {
    let shape = map.base.shape();
    assert_eq!(ls.shape(), shape, "scatter: the source layout has the iteration shape");
    if numel(shape) == 0 {
        return;
    }
    assert!(
        map.unchecked.is_none(),
        "scatter: index values must be validated first (IndexMap::new or IndexMap::validated)"
    );
    assert!(map.target.is_non_overlapping(), "scatter: the target's elements overlap");
    assert!(map.target.storage_end() <= dst.len(), "scatter: target layout outside its storage");
    assert!(ls.storage_end() <= src.len(), "scatter: source layout outside its storage");
    // Walking dims run in parallel (distinct walking coordinates are distinct target elements);
    // the others, along which indices may collide, run in order on one thread.
    let split = |l: &Layout, walking: bool| -> (SmallVec<[usize; 6]>, SmallVec<[usize; 6]>) {
        let dims = (0..shape.len()).filter(|&d| map.walks[d] == walking);
        dims.map(|d| (shape[d], l.strides()[d])).unzip()
    };
    let (outer_shape, outer_base) = split(&map.base, true);
    let (_, outer_offs) = split(&map.offsets_layout, true);
    let (_, outer_src) = split(ls, true);
    let (inner_shape, inner_offs) = split(&map.offsets_layout, false);
    let (_, inner_src) = split(ls, false);
    let outer = collapse(&outer_shape, [&outer_base[..], &outer_offs[..], &outer_src[..]]);
    let inner = collapse(&inner_shape, [&inner_offs[..], &inner_src[..]]);
    let (n_outer, n_inner) = (numel(&outer_shape), numel(&inner_shape));
    let (offs, mult) = (map.offsets(), map.mult);
    let base_ptr = SendPtr(dst.as_mut_ptr());
    let starts = [map.base.offset(), map.offsets_layout.offset(), ls.offset()];
    // The larger innermost stride of the serial dims (0 when there are none).
    let inner_step = inner.strides.iter().map(|s| s.last().copied().unwrap_or(0)).max().unwrap_or(0);
    for_ranges(n_outer, (GRAIN / n_inner).max(1), |range| {
        let p = base_ptr;
        // dst[base + index value * mult] = f(dst[..], src[at_src])
        let put = |base: usize, at_offs: usize, at_src: usize| {
            let at = base + offs[at_offs] as usize * mult;
            let v = src[at_src];
            // SAFETY: `at` is the storage offset of a target element: the map validated every
            // index value against its dim, walking coordinates are below their dim's size, and
            // the target lies inside `dst` (asserted above). The target does not overlap
            // itself, so distinct walking coordinates are distinct elements; threads get
            // disjoint ranges of walking coordinates, so no element is touched by two threads,
            // and `dst` is exclusively borrowed for the whole call.
            unsafe {
                let q = p.0.add(at);
                *q = f(*q, v);
            }
        };
        outer.walk(starts, range, |[ob, oo, os], run, [sb, so, ss]| {
            if so.max(ss) > inner_step {
                // The serial dims are the contiguous ones (scatter along the last dim): one
                // walking position at a time, its serial positions in memory order.
                for i in 0..run {
                    inner.walk([oo + i * so, os + i * ss], 0..n_inner, |[io, is], irun, [iso, iss]| {
                        (0..irun).for_each(|k| put(ob + i * sb, io + k * iso, is + k * iss));
                    });
                }
                return;
            }
            // The walking run is the contiguous one: blocks of it, each swept once per serial
            // position (positions sharing a target element stay in row-major order).
            for blk in (0..run).step_by(SCATTER_BLOCK) {
                let blk = blk..(blk + SCATTER_BLOCK).min(run);
                inner.walk([oo, os], 0..n_inner, |[io, is], irun, [iso, iss]| {
                    for k in 0..irun {
                        blk.clone().for_each(|i| put(ob + i * sb, io + k * iso + i * so, is + k * iss + i * ss));
                    }
                });
            }
        });
    });
}

/// PyTorch's `+` within one element type (bool: or; integers wrap; floats round once), the
/// accumulation of `scatter_add` and `index_put_(accumulate=True)`.
#[inline(always)]
pub fn add<T: Element>(a: T, b: T) -> T {
    match T::DTYPE {
        DType::Bool => T::from_i64(a.to_i64() | b.to_i64()),
        DType::I64 | DType::I32 | DType::U8 => T::from_i64(a.to_i64().wrapping_add(b.to_i64())),
        // The exact sum of two f32/f16/bf16 values rounds correctly through f64.
        _ => T::from_f64(a.to_f64() + b.to_f64()),
    }
}

/// Splits `0..n` into chunks, counts what each keeps (in parallel), then lets each write its
/// `width` values per kept element at its place in the output: a parallel, order-preserving
/// compaction.
fn compact<O: Element>(
    n: usize,
    width: usize,
    count: impl Fn(Range<usize>) -> usize + Sync + Send,
    write: impl Fn(Range<usize>, &mut [O]) + Sync + Send,
) -> (CpuBuf<O>, usize) {
    let chunks = if n <= GRAIN { 1 } else { (n / GRAIN).clamp(1, num_threads() * 4) };
    let step = n.div_ceil(chunks).max(1);
    let range = |c: usize| (c * step).min(n)..((c + 1) * step).min(n);
    let counts: Vec<usize> = map_tasks(chunks, |c| count(range(c)));
    let kept: usize = counts.iter().sum();
    let mut out = CpuBuf::<O>::uninit(kept * width);
    let mut parts: Vec<(usize, &mut [O])> = Vec::with_capacity(chunks);
    let mut rest: &mut [O] = &mut out;
    for (c, &k) in counts.iter().enumerate() {
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(k * width);
        parts.push((c, head));
        rest = tail;
    }
    pool().install(|| parts.into_par_iter().for_each(|(c, part)| write(range(c), part)));
    (out, kept)
}

/// The row-major coordinates of every nonzero element (NaN counts as nonzero), as
/// `(buffer of count × ndim, count)`.
pub fn nonzero<T: Element>(src: &[T], layout: &Layout) -> (CpuBuf<i64>, usize) {
    let shape = layout.shape();
    let nd = shape.len();
    let c = collapse(shape, [layout.strides()]);
    let zero = T::zero();
    compact(
        layout.numel(),
        nd,
        |range| {
            let mut k = 0;
            c.walk([layout.offset()], range, |[o], run, [s]| k += (0..run).filter(|&i| src[o + i * s] != zero).count());
            k
        },
        |range, out| {
            if range.is_empty() {
                return;
            }
            // Coordinates of the range's first element, then counted up as the walk advances.
            let mut idx: SmallVec<[usize; 6]> = SmallVec::from_elem(0, nd);
            let mut rest = range.start;
            for d in (0..nd).rev() {
                idx[d] = rest % shape[d];
                rest /= shape[d];
            }
            let mut w = 0;
            c.walk([layout.offset()], range, |[o], run, [s]| {
                for i in 0..run {
                    if src[o + i * s] != zero {
                        for (o, &x) in out[w..w + nd].iter_mut().zip(&idx) {
                            *o = x as i64;
                        }
                        w += nd;
                    }
                    for d in (0..nd).rev() {
                        idx[d] += 1;
                        if idx[d] < shape[d] {
                            break;
                        }
                        idx[d] = 0;
                    }
                }
            });
        },
    )
}

/// The elements of `src` where `mask` is true, in row-major order; both layouts have the same
/// (broadcast) shape.
pub fn masked_select<T: Element>(src: &[T], ls: &Layout, mask: &[bool], lm: &Layout) -> CpuBuf<T> {
    assert_eq!(ls.shape(), lm.shape(), "masked_select: layouts are broadcast to one shape");
    let c = collapse(ls.shape(), [ls.strides(), lm.strides()]);
    let starts = [ls.offset(), lm.offset()];
    compact(
        ls.numel(),
        1,
        |range| {
            let mut k = 0;
            c.walk(starts, range, |[_, om], run, [_, sm]| k += (0..run).filter(|&i| mask[om + i * sm]).count());
            k
        },
        |range, out| {
            let mut w = 0;
            c.walk(starts, range, |[os, om], run, [ss, sm]| {
                for i in (0..run).filter(|&i| mask[om + i * sm]) {
                    out[w] = src[os + i * ss];
                    w += 1;
                }
            });
        },
    )
    .0
}

/// The smallest and largest value of an int64 layout, `None` when it is empty.
pub fn min_max(src: &[i64], layout: &Layout) -> Option<(i64, i64)> {
    let l = distinct(layout);
    let c = collapse(l.shape(), [l.strides()]);
    let found = Mutex::new(None::<(i64, i64)>);
    for_ranges(l.numel(), GRAIN, |range| {
        let mut local = None::<(i64, i64)>;
        c.walk([l.offset()], range, |[o], run, [s]| {
            for i in 0..run {
                let v = src[o + i * s];
                local = Some(local.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))));
            }
        });
        if let Some((lo, hi)) = local {
            let mut g = found.lock().unwrap_or_else(|e| e.into_inner());
            *g = Some(g.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
        }
    });
    found.into_inner().unwrap_or_else(|e| e.into_inner())
}

/// `out[p, c] = (src[p] == c)` for `c` in `0..classes`, as int64, row-major with the class last.
/// Values outside `0..classes` give all-zero rows (the caller rejects them first).
pub fn one_hot(src: &[i64], layout: &Layout, classes: usize) -> CpuBuf<i64> {
    let n = layout.numel();
    if n * classes == 0 {
        return CpuBuf::uninit(0);
    }
    let copy;
    let idx: &[i64] = if layout.is_contiguous() {
        &src[layout.offset()..layout.offset() + n]
    } else {
        copy = super::elementwise::map1(src, layout, |v| v);
        &copy
    };
    let mut out = CpuBuf::<i64>::uninit(n * classes);
    for_chunks_mut(&mut out, GRAIN, |start, o| {
        o.fill(0);
        let end = start + o.len();
        for (r, &v) in idx.iter().enumerate().take(end.div_ceil(classes)).skip(start / classes) {
            if (0..classes as i64).contains(&v) && (start..end).contains(&(r * classes + v as usize)) {
                o[r * classes + v as usize - start] = 1;
            }
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arg(data: &[i64], layout: Layout, dim: usize) -> IndexArg<'_> {
        IndexArg { data, layout, dim }
    }

    #[test]
    fn gather_along_dim1() {
        // x = [[1, 2, 3], [4, 5, 6]], idx = [[2, 0], [1, 1]] -> [[3, 1], [5, 5]]
        let x = [1i32, 2, 3, 4, 5, 6];
        let lx = Layout::contiguous(&[2, 3]);
        let idx = [2i64, 0, 1, 1];
        let li = Layout::contiguous(&[2, 2]);
        let walk = [Some(0), None];
        let m = IndexMap::direct(&lx, &[2, 2], &walk, arg(&idx, li.clone(), 1));
        assert_eq!(&gather(&x, &m).unwrap()[..], &[3, 1, 5, 5]);
        let m = IndexMap::new(&lx, &[2, 2], &walk, &[arg(&idx, li, 1)], false).unwrap();
        assert_eq!(&gather(&x, &m).unwrap()[..], &[3, 1, 5, 5]);
    }

    #[test]
    fn bad_index_is_reported_first_in_row_major_order() {
        let lx = Layout::contiguous(&[3]);
        let idx = [0i64, 7, -4, 9];
        let li = Layout::contiguous(&[4]);
        let e = gather(&[1u8, 2, 3], &IndexMap::direct(&lx, &[4], &[None], arg(&idx, li.clone(), 0))).err().unwrap();
        assert_eq!(e, BadIndex { arg: 0, value: 7, dim: 0, size: 3 });
        let ok = [0i64, -1, -3];
        let m = IndexMap::new(&lx, &[3], &[None], &[arg(&ok, Layout::contiguous(&[3]), 0)], true).unwrap();
        assert_eq!(&gather(&[10u8, 20, 30], &m).unwrap()[..], &[10, 30, 10]);
        let direct = IndexMap::direct(&lx, &[3], &[None], arg(&ok, Layout::contiguous(&[3]), 0));
        assert_eq!(gather(&[10u8, 20, 30], &direct).err().unwrap().value, -1);
        let big: Vec<i64> = (0..200_000).map(|i| if i == 150_001 || i == 199_999 { -9 } else { i % 3 }).collect();
        let e = IndexMap::new(&lx, &[200_000], &[None], &[arg(&big, Layout::contiguous(&[200_000]), 0)], true)
            .err()
            .unwrap();
        assert_eq!(e.value, -9);
        // A direct map validated for a scatter: negatives are out of range too, and the first
        // bad value in row-major order is reported whichever chunk finds it first.
        let e = IndexMap::direct(&lx, &[200_000], &[None], arg(&big, Layout::contiguous(&[200_000]), 0))
            .validated()
            .err()
            .unwrap();
        assert_eq!(e, BadIndex { arg: 0, value: -9, dim: 0, size: 3 });
        let e = IndexMap::direct(&lx, &[4], &[None], arg(&idx, li, 0)).validated().err().unwrap();
        assert_eq!(e.value, 7);
        assert!(IndexMap::direct(&lx, &[3], &[None], arg(&[2, 0, 1], Layout::contiguous(&[3]), 0)).validated().is_ok());
    }

    #[test]
    fn scatter_last_write_wins_and_add_accumulates() {
        let mut d = [0i64; 3];
        let ld = Layout::contiguous(&[3]);
        let idx = [1i64, 1, 0, 1];
        let src = [5i64, 6, 7, 8];
        let ls = Layout::contiguous(&[4]);
        let m = IndexMap::new(&ld, &[4], &[None], &[arg(&idx, ls.clone(), 0)], false).unwrap();
        scatter(&mut d, &m, &src, &ls, |_, v| v);
        assert_eq!(d, [7, 8, 0]);
        scatter(&mut d, &m, &src, &ls, add);
        assert_eq!(d, [14, 27, 0]);
    }

    #[test]
    fn scatter_through_transposed_target() {
        // target: the transpose of a [3, 2] buffer, seen as [2, 3]; scatter along dim 1.
        let mut d = [0.0f32; 6];
        let ld = Layout::contiguous(&[3, 2]).transpose(0, 1);
        let idx = [2i64, 0, 1, 2];
        let li = Layout::contiguous(&[2, 2]);
        let src = [1.0f32, 2.0, 3.0, 4.0];
        let m = IndexMap::new(&ld, &[2, 2], &[Some(0), None], &[arg(&idx, li.clone(), 1)], false).unwrap();
        scatter(&mut d, &m, &src, &li, |_, v| v);
        // view[0] = [2, 0, 1], view[1] = [0, 3, 4]; buffer[j*2 + i] = view[i][j]
        assert_eq!(d, [2.0, 0.0, 0.0, 3.0, 1.0, 4.0]);
        // The index read where it lies (a transposed index, a strided target): the same writes.
        let mut e = [0.0f32; 6];
        let it = [2i64, 1, 0, 2];
        let m =
            IndexMap::direct(&ld, &[2, 2], &[Some(0), None], arg(&it, Layout::contiguous(&[2, 2]).transpose(0, 1), 1))
                .validated()
                .unwrap();
        scatter(&mut e, &m, &src, &li, |_, v| v);
        assert_eq!(e, d);
    }

    #[test]
    fn add_per_dtype() {
        assert!(add(true, false));
        assert_eq!(add(250u8, 10), 4);
        assert_eq!(add(half::f16::from_f32(1.5), half::f16::from_f32(2.0)).to_f32(), 3.5);
        assert_eq!(add(0.1f32, 0.2), 0.1f32 + 0.2f32);
    }

    #[test]
    fn compaction() {
        let x = [0.0f32, 1.0, 0.0, f32::NAN, -0.0, 2.0];
        let l = Layout::contiguous(&[2, 3]);
        let (c, n) = nonzero(&x, &l);
        assert_eq!((n, &c[..]), (3, &[0, 1, 1, 0, 1, 2][..]));
        let (c, n) = nonzero(&x, &l.transpose(0, 1));
        assert_eq!((n, &c[..]), (3, &[0, 1, 1, 0, 2, 1][..]));
        let mask = [true, false, true];
        let lm = Layout::contiguous(&[3]).broadcast_to(&[2, 3]).unwrap();
        assert_eq!(&masked_select(&[1u8, 2, 3, 4, 5, 6], &l, &mask, &lm)[..], &[1, 3, 4, 6]);
        let n = 300_001;
        let big: Vec<i64> = (0..n as i64).map(|i| i % 7).collect();
        let (c, k) = nonzero(&big, &Layout::contiguous(&[n]));
        assert_eq!(k, n - n.div_ceil(7));
        assert!(c.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn one_hot_rows_and_min_max() {
        let idx = [2i64, 0, 1];
        let l = Layout::contiguous(&[3]);
        assert_eq!(&one_hot(&idx, &l, 3)[..], &[0, 0, 1, 1, 0, 0, 0, 1, 0]);
        assert_eq!(&one_hot(&idx, &l.narrow(0, 1, 2), 2)[..], &[1, 0, 0, 1]);
        assert_eq!(min_max(&idx, &l), Some((0, 2)));
        assert_eq!(min_max(&idx, &l.narrow(0, 0, 0)), None);
    }
}
