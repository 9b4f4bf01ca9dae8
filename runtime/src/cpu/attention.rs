//! Fused scaled dot-product attention on the CPU: `softmax(q·kᵀ·scale [+ causal mask])·v` and
//! its gradient, one block of query rows at a time, so that the `[L, S]` weights exist only as
//! one block's row tile (64 to 512 rows, at most 65536 numbers unless 64 rows take more),
//! never as a whole `[batch, L, S]` tensor.
//!
//! Forward, per block of query rows: the scores tile `Q_r·Kᵀ` (one `gemm` call), scaled,
//! masked, and turned into softmax weights row by row, then `O_r = P·V` (a second call).
//! Backward recomputes the tile (nothing but the inputs is saved) and, per block, computes
//! `dP = dO_r·Vᵀ`, `dS = P ∘ (dP − rowsum(P ∘ dP))`, `dQ_r = scale·dS·K`, and adds
//! `scale·dSᵀ·Q_r` to `dK` and `Pᵀ·dO_r` to `dV`; blocks of one problem run in order (they add
//! into the same `dK`, `dV`), problems in parallel.
//!
//! The causal mask is PyTorch's `is_causal`: query `i` attends keys `0..=i` (top-left aligned),
//! so a block of rows `r` reads only the first `min(r.end, S)` keys. Other masks arrive as an
//! additive, broadcast [`AttentionBias`]. Dropout of the weights
//! ([`AttentionDropout`]) draws the mask `F.dropout` would draw for the whole `[batch, L, S]`
//! weights, a row at a time, and backward draws it again.

use super::buffer::CpuBuf;
use super::parallel::map_tasks;
use super::philox::{uniform_from, Philox};
use super::product_split::RawProduct;
use super::row_reduce::row_fns;
use crate::dtype::num_like::Float;
use crate::dtype::FloatElement;
use std::ops::Range;

/// Scores per block's tile (`rows × S`): query rows per block are this over `S`, between 64
/// and 512 (measured: blocks of 16 rows at S = 1024 made the products thin and the kernel
/// slower than the decomposition).
const TILE: usize = 65536;

/// The sizes of an attention call: `batch` independent problems, each of `l` queries and `s`
/// keys of `e` features, and values of `ev` features; all operands contiguous row-major
/// (`q`: `[batch, l, e]`, `k`: `[batch, s, e]`, `v`: `[batch, s, ev]`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionGeom {
    /// Independent problems (the product of the batch dims).
    pub batch: usize,
    /// Query positions.
    pub l: usize,
    /// Key (and value) positions.
    pub s: usize,
    /// Query and key features.
    pub e: usize,
    /// Value features.
    pub ev: usize,
    /// The factor the scores are multiplied by.
    pub scale: f64,
    /// PyTorch's `is_causal`: query `i` attends keys `0..=i`.
    pub causal: bool,
}

impl AttentionGeom {
    /// The keys query row `i` attends.
    fn keys(&self, i: usize) -> usize {
        if self.causal {
            (i + 1).min(self.s)
        } else {
            self.s
        }
    }

    /// Panics unless the operands have the sizes the geometry names.
    fn check<T>(&self, q: &[T], k: &[T], v: &[T]) {
        assert_eq!(q.len(), self.batch * self.l * self.e, "attention: query size");
        assert_eq!(k.len(), self.batch * self.s * self.e, "attention: key size");
        assert_eq!(v.len(), self.batch * self.s * self.ev, "attention: value size");
    }
}

/// Dropout of the attention weights (`dropout_p` in `(0, 1)`): element `(b, i, j)` of the
/// `[batch, l, s]` weights is kept when element `(b·l + i)·s + j` of `draw`'s uniform numbers
/// on `[0, 1)` is at least `p`, and then scaled by `1/(1 − p)` (rounded to the element type):
/// the mask `F.dropout` draws for those weights from the same draw.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionDropout {
    /// The draw of `batch·l·s` numbers.
    pub draw: Philox,
    /// The probability of dropping a weight.
    pub p: f64,
}

impl AttentionDropout {
    /// The mask of query rows `rows` of problem `b` over the first `nk` keys, into `mask`
    /// (`rows.len() × nk`): each entry 0 or `1/(1 − p)`.
    pub fn mask_into<T: AttentionElement>(
        &self,
        g: &AttentionGeom,
        b: usize,
        rows: Range<usize>,
        nk: usize,
        mask: &mut [T],
    ) {
        let (p, kept) = (T::c(self.p), T::one() / T::c(1.0 - self.p));
        for (r, row) in rows.zip(mask.chunks_exact_mut(nk.max(1))) {
            uniform_from(row, &self.draw, ((b * g.l + r) * g.s) as u64, 0.0, 1.0);
            for x in row.iter_mut() {
                *x = if *x >= p { kept } else { T::zero() };
            }
        }
    }
}

/// An additive mask of the scores (a Bool mask arrives as 0 and −∞), broadcast over what it
/// does not vary along: score `(i, j)` of problem `b` gets
/// `values[offsets[b] + i·row_stride + j·col_stride]` added after scaling. A row whose every
/// score is then −∞ gets zero weights (PyTorch's `_safe_softmax`), so zero output and
/// gradients.
#[derive(Clone, Copy, Debug)]
pub struct AttentionBias<'a, T> {
    /// The mask's values.
    pub values: &'a [T],
    /// Where each problem's `[L, S]` mask starts in `values`.
    pub offsets: &'a [usize],
    /// The step between query rows (0 when the mask is the same for every row).
    pub row_stride: usize,
    /// The step between keys (0 when the mask is the same for every key).
    pub col_stride: usize,
}

impl<T> AttentionBias<'_, T> {
    /// Panics unless every index the geometry reaches lies inside `values`.
    fn check(&self, g: &AttentionGeom) {
        assert_eq!(self.offsets.len(), g.batch, "attention: a mask offset per problem");
        if g.l > 0 && g.s > 0 {
            let last = (g.l - 1) * self.row_stride + (g.s - 1) * self.col_stride;
            assert!(self.offsets.iter().all(|&o| o + last < self.values.len()), "attention: mask size");
        }
    }
}

/// `out[m×n] (+)= alpha · a[m×k] · b[k×n]`, `a` and `b` given by their row and column strides
/// inside the slices; `accumulate` adds to `out` instead of overwriting it. Single-threaded.
#[allow(clippy::too_many_arguments)]
fn product<T: Float>(
    (m, n, k): (usize, usize, usize),
    a: &[T],
    (a_rs, a_cs): (usize, usize),
    b: &[T],
    (b_rs, b_cs): (usize, usize),
    out: &mut [T],
    alpha: T,
    accumulate: bool,
) {
    if m == 0 || n == 0 {
        return;
    }
    let last = |rows: usize, rs: usize, cols: usize, cs: usize| (rows - 1) * rs + (cols - 1) * cs;
    assert!(out.len() >= m * n, "attention: product output");
    if k > 0 {
        assert!(a.len() > last(m, a_rs, k, a_cs) && b.len() > last(k, b_rs, n, b_cs), "attention: product operands");
    } else if !accumulate {
        out[..m * n].fill(T::zero());
        return;
    }
    assert!(T::DTYPE == crate::DType::F32 || T::DTYPE == crate::DType::F64, "attention: f32 or f64");
    let p = RawProduct {
        m,
        n,
        k,
        a: a.as_ptr(),
        a_rs: a_rs as isize,
        a_cs: a_cs as isize,
        b: b.as_ptr(),
        b_rs: b_rs as isize,
        b_cs: b_cs as isize,
        out: out.as_mut_ptr(),
        out_rs: n as isize,
    };
    // SAFETY: the asserts above show every element gemm reads (`a[i*a_rs + p*a_cs]`,
    // `b[p*b_rs + j*b_cs]` for i < m, p < k, j < n) and writes (`out[i*n + j]`) lies inside
    // the slices; `out` is borrowed mutably, so nothing else touches it; `T` is f32 or f64
    // (asserted). With `accumulate` false `out`'s old contents are not read; with it true,
    // `out = 1·out + alpha·a·b`.
    unsafe { p.call_into(gemm::Parallelism::None, accumulate, T::one(), alpha) }
}

/// The softmax weights of query rows `rows` of problem `b` in `tile` (`rows.len() × nk`, row
/// stride `nk`): scores `q_r·kᵀ·scale` (`q`, `k` the problem's), masked, normalized per row.
/// Masked entries are 0.
fn weights<T: AttentionElement>(
    g: &AttentionGeom,
    (b, rows, nk): (usize, Range<usize>, usize),
    (q, k): (&[T], &[T]),
    bias: Option<&AttentionBias<'_, T>>,
    tile: &mut [T],
) {
    if nk == 0 {
        return;
    }
    let e = g.e;
    product((rows.len(), nk, e), &q[rows.start * e..rows.end * e], (e, 1), k, (1, e), tile, T::c(g.scale), false);
    for (r, row) in rows.zip(tile.chunks_exact_mut(nk)) {
        let (live, dead) = row.split_at_mut(g.keys(r).min(nk));
        dead.fill(T::zero());
        if let Some(m) = bias {
            let start = m.offsets[b] + r * m.row_stride;
            if m.col_stride == 1 {
                // One row of the mask: a loop the compiler vectorizes.
                let n = live.len();
                for (x, &add) in live.iter_mut().zip(&m.values[start..start + n]) {
                    *x = *x + add;
                }
            } else {
                for (j, x) in live.iter_mut().enumerate() {
                    *x = *x + m.values[start + j * m.col_stride];
                }
            }
        }
        T::softmax_row(live);
    }
}

/// The element types of the kernels: f32 (whose softmax rows run the vectorized row routines)
/// and f64.
pub trait AttentionElement: Float + FloatElement {
    /// `row` replaced by its softmax (`row` not empty), or by zeros when every element is −∞.
    fn softmax_row(row: &mut [Self]);
}

impl AttentionElement for f64 {
    fn softmax_row(row: &mut [f64]) {
        let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if max == f64::NEG_INFINITY {
            return row.fill(0.0);
        }
        let mut sum = 0.0;
        for x in row.iter_mut() {
            *x = (*x - max).exp();
            sum += *x;
        }
        for x in row.iter_mut() {
            *x /= sum;
        }
    }
}

impl AttentionElement for f32 {
    fn softmax_row(row: &mut [f32]) {
        let f = row_fns();
        let (p, n) = (row.as_mut_ptr(), row.len());
        // SAFETY: `row` holds `n` f32, readable and writable.
        let max = unsafe { (f.max)(p, n) };
        if max == f32::NEG_INFINITY {
            return row.fill(0.0);
        }
        // SAFETY: as above; `exp_sum` may write its exps over its source when `dst` equals
        // `src`; `next` is only prefetched.
        let sum = unsafe { (f.exp_sum)(p, max, p, n, p) };
        let r = (1.0 / sum) as f32;
        for x in row.iter_mut() {
            *x *= r;
        }
    }
}

/// The query rows blocks of one problem: `(rows, keys they read)`.
fn blocks(g: &AttentionGeom) -> impl Iterator<Item = (Range<usize>, usize)> + '_ {
    let step = (TILE / g.s.max(1)).clamp(64, 512);
    (0..g.l).step_by(step).map(move |r0| {
        let rows = r0..(r0 + step).min(g.l);
        let nk = g.keys(rows.end - 1);
        (rows, nk)
    })
}

/// The attention output `[batch, l, ev]`, the scores masked by `bias` and the weights dropped
/// out by `dropout` when given.
pub fn attention_forward<T: AttentionElement>(
    g: &AttentionGeom,
    q: &[T],
    k: &[T],
    v: &[T],
    bias: Option<&AttentionBias<'_, T>>,
    dropout: Option<&AttentionDropout>,
) -> CpuBuf<T> {
    g.check(q, k, v);
    if let Some(m) = bias {
        m.check(g);
    }
    let per_problem: Vec<_> = blocks(g).collect();
    let tasks = g.batch * per_problem.len();
    let parts = map_tasks(tasks, |t| {
        let (b, (rows, nk)) = (t / per_problem.len(), per_problem[t % per_problem.len()].clone());
        let (q, k, v) = (&q[b * g.l * g.e..], &k[b * g.s * g.e..], &v[b * g.s * g.ev..]);
        let m = rows.len();
        // Scratch from kiln's caching allocator: every element is written before it is read.
        let mut tile = CpuBuf::<T>::uninit(m * nk);
        weights(g, (b, rows.clone(), nk), (q, k), bias, &mut tile);
        if let Some(d) = dropout {
            let mut mask = CpuBuf::<T>::uninit(m * nk);
            d.mask_into(g, b, rows, nk, &mut mask);
            multiply_into(&mut tile, &mask);
        }
        let mut out = CpuBuf::<T>::uninit(m * g.ev);
        product((m, g.ev, nk), &tile, (nk, 1), v, (g.ev, 1), &mut out, T::one(), false);
        out
    });
    concat(&parts)
}

/// `a[i] *= b[i]`.
fn multiply_into<T: Float>(a: &mut [T], b: &[T]) {
    for (x, &y) in a.iter_mut().zip(b) {
        *x = *x * y;
    }
}

/// `Σ a[i]·b[i]`, in 16 partial sums (so the loop runs in vector registers instead of one
/// chain of dependent additions).
fn dot<T: Float>(a: &[T], b: &[T]) -> T {
    const LANES: usize = 16;
    let mut partial = [T::zero(); LANES];
    let (a_blocks, b_blocks) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail = a_blocks.remainder().iter().zip(b_blocks.remainder()).fold(T::zero(), |acc, (&x, &y)| acc + x * y);
    for (x, y) in a_blocks.zip(b_blocks) {
        for i in 0..LANES {
            partial[i] = partial[i] + x[i] * y[i];
        }
    }
    partial.iter().fold(tail, |acc, &p| acc + p)
}

/// The parts one after the other in one buffer.
fn concat<T: Float>(parts: &[CpuBuf<T>]) -> CpuBuf<T> {
    let mut out = CpuBuf::uninit(parts.iter().map(|p| p.len()).sum());
    let mut at = 0;
    for part in parts {
        out[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    out
}

/// The gradients `(dq, dk, dv)` of [`attention_forward`]'s output (with the same `bias` and
/// `dropout`)
/// for its gradient `dout` (`[batch, l, ev]`), shaped as `q`, `k` and `v`.
pub fn attention_backward<T: AttentionElement>(
    g: &AttentionGeom,
    (q, k, v): (&[T], &[T], &[T]),
    dout: &[T],
    bias: Option<&AttentionBias<'_, T>>,
    dropout: Option<&AttentionDropout>,
) -> [CpuBuf<T>; 3] {
    g.check(q, k, v);
    if let Some(m) = bias {
        m.check(g);
    }
    assert_eq!(dout.len(), g.batch * g.l * g.ev, "attention: output gradient size");
    let (e, ev) = (g.e, g.ev);
    let scale = T::c(g.scale);
    let largest = blocks(g).map(|(rows, nk)| rows.len() * nk).max().unwrap_or(0);
    let parts = map_tasks(g.batch, |b| {
        let (q, k, v) = (&q[b * g.l * e..(b + 1) * g.l * e], &k[b * g.s * e..], &v[b * g.s * ev..]);
        let dout = &dout[b * g.l * ev..];
        let (mut dq, mut dk, mut dv) = (CpuBuf::zeros(g.l * e), CpuBuf::zeros(g.s * e), CpuBuf::zeros(g.s * ev));
        // Scratch for the largest block, reused by each (every element a block uses is written
        // before it is read).
        let (mut p_buf, mut ds_buf) = (CpuBuf::<T>::uninit(largest), CpuBuf::<T>::uninit(largest));
        let mut mask_buf = CpuBuf::<T>::uninit(if dropout.is_some() { largest } else { 0 });
        // Rows that attend no key (S = 0) keep zero gradients.
        for (rows, nk) in blocks(g).filter(|&(_, nk)| nk > 0) {
            let m = rows.len();
            let (p, ds) = (&mut p_buf[..m * nk], &mut ds_buf[..m * nk]);
            weights(g, (b, rows.clone(), nk), (q, k), bias, p);
            let mask = dropout.map(|d| {
                let mask = &mut mask_buf[..m * nk];
                d.mask_into(g, b, rows.clone(), nk, mask);
                &*mask
            });
            let d_r = &dout[rows.start * ev..rows.end * ev];
            // dP (of the weights before dropout), then dS in place.
            product((m, nk, ev), d_r, (ev, 1), v, (1, ev), ds, T::one(), false);
            if let Some(mask) = mask {
                multiply_into(ds, mask);
            }
            for (p_row, ds_row) in p.chunks_exact(nk).zip(ds.chunks_exact_mut(nk)) {
                let dot = dot(p_row, ds_row);
                for (d, &p) in ds_row.iter_mut().zip(p_row) {
                    *d = p * (*d - dot);
                }
            }
            let q_r = &q[rows.start * e..rows.end * e];
            product((m, e, nk), ds, (nk, 1), k, (e, 1), &mut dq[rows.start * e..rows.end * e], scale, false);
            product((nk, e, m), ds, (1, nk), q_r, (e, 1), &mut dk, scale, true);
            // dV from the weights after dropout.
            if let Some(mask) = mask {
                multiply_into(p, mask);
            }
            product((nk, ev, m), p, (1, nk), d_r, (ev, 1), &mut dv, T::one(), true);
        }
        [dq, dk, dv]
    });
    let mut columns: [Vec<CpuBuf<T>>; 3] = Default::default();
    for part in parts {
        for (column, grad) in columns.iter_mut().zip(part) {
            column.push(grad);
        }
    }
    columns.map(|column| concat(&column))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The attention of one problem written out with loops, in f64.
    fn naive(g: &AttentionGeom, q: &[f64], k: &[f64], v: &[f64]) -> Vec<f64> {
        let mut out = vec![0.0; g.l * g.ev];
        for i in 0..g.l {
            let nk = g.keys(i);
            let s: Vec<f64> =
                (0..nk).map(|j| (0..g.e).map(|c| q[i * g.e + c] * k[j * g.e + c]).sum::<f64>() * g.scale).collect();
            let max = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let w: Vec<f64> = s.iter().map(|x| (x - max).exp()).collect();
            let total: f64 = w.iter().sum();
            for (j, wj) in w.iter().enumerate() {
                for c in 0..g.ev {
                    out[i * g.ev + c] += wj / total * v[j * g.ev + c];
                }
            }
        }
        out
    }

    fn numbers(n: usize, seed: f64) -> Vec<f64> {
        (0..n).map(|i| ((i as f64 + seed) * 0.731).sin()).collect()
    }

    #[test]
    fn forward_equals_the_formula_across_blocks_with_and_without_the_causal_mask() {
        // S = 2048 makes blocks of 64 rows: 70 queries are a whole block and a partial one;
        // L > S, so causal rows past S see every key; no keys at all.
        for (l, s, causal) in [(70, 2048, false), (70, 2048, true), (600, 50, true), (3, 80, true), (5, 0, false)] {
            let g = AttentionGeom { batch: 2, l, s, e: 5, ev: 3, scale: 0.4, causal };
            let (q, k, v) = (numbers(2 * l * 5, 1.0), numbers(2 * s * 5, 2.0), numbers(2 * s * 3, 3.0));
            let out = attention_forward(&g, &q, &k, &v, None, None);
            for b in 0..2 {
                let want = naive(&g, &q[b * l * 5..], &k[b * s * 5..], &v[b * s * 3..]);
                for (i, (x, y)) in out[b * l * 3..(b + 1) * l * 3].iter().zip(&want).enumerate() {
                    assert!((x - y).abs() < 1e-12, "l {l} s {s} causal {causal}: problem {b} element {i}: {x} vs {y}");
                }
            }
        }
    }
}
