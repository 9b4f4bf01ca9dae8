//! Whole-row eager kernels over a contiguous f32 matrix `[rows, n]`, built from the row
//! routines of [`super::row_reduce`] (AVX-512F where the CPU has it) and run over blocks of
//! rows in parallel: layer norm's forward, and class-index cross-entropy's row statistics and
//! gradient. kiln's eager `F::layer_norm` and `F::cross_entropy` call them for CPU f32 inputs:
//! one read of each row from memory (the row's later sweeps find it in the cache) and one
//! write, where the op-by-op compositions make several passes over the whole matrix. Compiled
//! plans reach the same routines through their generated kernels.
//!
//! Arithmetic, per row `x` of `n` elements:
//! - layer norm: `mean = Σx / n` and `var = Σ(x - mean)² / n` (the biased variance), each sum in
//!   f64 and each result rounded to f32, `r = 1/√(var + eps)` in f32, then
//!   `((x - mean)·r)·w + b` rounded per operation ([`super::row_reduce::RowNormAffineFn`]);
//! - cross-entropy statistics: `max x` and `Σ e^(x - max)` (f64), from which the caller forms
//!   the row's loss `max + ln Σ - x[target]`;
//! - cross-entropy gradient: `e^(x - max)·(1/Σ)·scale`, less `scale` at the target
//!   ([`super::row_reduce::RowOneHotSubFn`]).
//!
//! Outputs of at least [`STREAM_BYTES`] are written with non-temporal stores.

use super::parallel::{for_chunks_mut, GRAIN};
use super::reduce::for_row_blocks;
use super::row_reduce::{row_fns, STREAM_BYTES};

/// The `stream` flag of the row routines for an f32 output of `len` elements.
fn stream_flag(len: usize) -> usize {
    usize::from(len * 4 >= STREAM_BYTES)
}

/// Rows per parallel task for rows of `n` elements (about [`GRAIN`] elements each).
fn row_grain(n: usize) -> usize {
    (GRAIN / n.max(1)).max(1)
}

/// Layer norm of each row of `x` (`[rows, n]`, row-major) into `out`: `((x - mean)·r)·w + b`
/// with the row's mean and biased variance, `r = 1/√(var + eps)`, and `weight`/`bias` (`n`
/// elements each) left out when `None`.
///
/// # Panics
/// When `n` is 0, `x`'s length is not a multiple of `n`, `out`'s length differs from `x`'s, or
/// `weight`/`bias` do not have `n` elements.
pub fn layer_norm_f32(x: &[f32], n: usize, weight: Option<&[f32]>, bias: Option<&[f32]>, eps: f32, out: &mut [f32]) {
    assert!(n > 0 && x.len().is_multiple_of(n), "layer_norm_f32: {} elements are not rows of {n}", x.len());
    assert_eq!(out.len(), x.len(), "layer_norm_f32: output length differs from the input's");
    for p in [weight, bias].into_iter().flatten() {
        assert_eq!(p.len(), n, "layer_norm_f32: an affine row must have {n} elements");
    }
    let f = row_fns();
    let stream = stream_flag(out.len());
    let ptr = |p: Option<&[f32]>| p.map_or(std::ptr::null(), <[f32]>::as_ptr);
    for_row_blocks(out, n, |row0, block| {
        let (w, b) = (ptr(weight), ptr(bias));
        for (r, dst) in block.chunks_exact_mut(n).enumerate() {
            let src = &x[(row0 + r) * n..(row0 + r + 1) * n];
            let next = src.as_ptr().wrapping_add(n);
            // SAFETY: `src` holds `n` readable f32 and `dst` `n` writable ones (a row of the
            // exclusively borrowed output, so not overlapping `src`); `w` and `b` are null or
            // rows of `n` (checked above). `next` is only prefetched, which never faults.
            unsafe {
                let mean = ((f.sum)(src.as_ptr(), n) / n as f64) as f32;
                let var = ((f.sq_dev_sum)(src.as_ptr(), mean, n, next) / n as f64) as f32;
                let r = 1.0 / (var + eps).sqrt();
                (f.norm_affine)(src.as_ptr(), mean, r, w, b, dst.as_mut_ptr(), n, stream);
            }
        }
    });
}

/// Softmax's statistics of one row: its maximum and `Σ e^(x - max)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RowSoftmaxStats {
    /// `max x` (NaN when the row holds a NaN).
    pub max: f32,
    /// `Σ e^(x - max)`, summed in f64.
    pub sum: f64,
}

/// [`RowSoftmaxStats`] of each row of `x` (`[rows, n]`, row-major), one per element of `stats`.
///
/// # Panics
/// When `n` is 0 or `x` does not hold `stats.len()` rows of `n`.
pub fn softmax_stats_f32(x: &[f32], n: usize, stats: &mut [RowSoftmaxStats]) {
    assert!(
        n > 0 && x.len() == stats.len() * n,
        "softmax_stats_f32: {} elements are not {} rows of {n}",
        x.len(),
        stats.len()
    );
    let f = row_fns();
    for_chunks_mut(stats, row_grain(n), |row0, block| {
        for (r, s) in block.iter_mut().enumerate() {
            let src = &x[(row0 + r) * n..(row0 + r + 1) * n];
            let next = src.as_ptr().wrapping_add(n);
            // SAFETY: `src` holds `n` readable f32; a null `dst` keeps no exps; `next` is only
            // prefetched.
            unsafe {
                let max = (f.max)(src.as_ptr(), n);
                let sum = (f.exp_sum)(src.as_ptr(), max, std::ptr::null_mut(), n, next);
                *s = RowSoftmaxStats { max, sum };
            }
        }
    });
}

/// Cross-entropy's gradient with respect to the logits `x` (`[rows, n]`, row-major), into
/// `out`: row `r` is `softmax(x_r)·scale[r]` less `scale[r]` at column `targets[r]`, with the
/// softmax formed from `stats[r]` (from [`softmax_stats_f32`] of the same `x`) as
/// `(e^(x - max)·(1/Σ))·scale`. A target outside `0..n` (an ignored row) subtracts nothing; its
/// row is `softmax·0` (zeros, or NaN where the logits make the softmax NaN).
///
/// # Panics
/// When the lengths of `x`, `out`, `stats`, `targets` and `scale` do not describe the same
/// rows of `n`, or `n` is 0 or past 2^24 (column indices are compared as f32).
pub fn cross_entropy_grad_f32(
    x: &[f32],
    n: usize,
    stats: &[RowSoftmaxStats],
    targets: &[i64],
    scale: &[f32],
    out: &mut [f32],
) {
    let rows = stats.len();
    assert!(
        n > 0
            && n <= 1 << 24
            && x.len() == rows * n
            && out.len() == x.len()
            && targets.len() == rows
            && scale.len() == rows,
        "cross_entropy_grad_f32: lengths x {}, out {}, stats {rows}, targets {}, scale {} are not rows of {n}",
        x.len(),
        out.len(),
        targets.len(),
        scale.len()
    );
    let f = row_fns();
    let stream = stream_flag(out.len());
    // Column indices as f32 (exact below 2^24), compared with the target.
    let iota: Vec<f32> = (0..n).map(|j| j as f32).collect();
    for_row_blocks(out, n, |row0, block| {
        let mut exps = vec![0f32; n];
        for (r, dst) in block.chunks_exact_mut(n).enumerate() {
            let row = row0 + r;
            let src = &x[row * n..(row + 1) * n];
            let RowSoftmaxStats { max, sum } = stats[row];
            let t = targets[row];
            let t = if (0..n as i64).contains(&t) { t as f32 } else { -1.0 };
            let s = scale[row];
            // SAFETY: `src`, `iota` and `exps` hold `n` f32 each and `dst` is an `n`-element
            // row of the exclusively borrowed output, overlapping none of them; `next` is only
            // prefetched.
            unsafe {
                (f.exp_sum)(src.as_ptr(), max, exps.as_mut_ptr(), n, src.as_ptr().wrapping_add(n));
                // where(j == t, -s, 0) - (e·(1/Σ))·(-s) = softmax·s - [j == t]·s.
                (f.onehot_sub)(
                    iota.as_ptr(),
                    t,
                    -s,
                    0.0,
                    exps.as_ptr(),
                    (1.0 / sum) as f32,
                    -s,
                    dst.as_mut_ptr(),
                    n,
                    stream,
                );
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic `[rows, n]` matrix with values over a few orders of magnitude.
    fn matrix(rows: usize, n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed | 1;
        (0..rows * n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s as f32 / u32::MAX as f32 - 0.5) * 12.0
            })
            .collect()
    }

    #[test]
    fn layer_norm_rows_match_the_f64_formula() {
        for (rows, n) in [(1, 1), (3, 17), (5, 64), (40, 1000)] {
            let x = matrix(rows, n, 7);
            let w: Vec<f32> = (0..n).map(|j| 0.5 + j as f32 / n as f32).collect();
            let b: Vec<f32> = (0..n).map(|j| j as f32 * 0.01 - 0.2).collect();
            for (weight, bias) in
                [(None, None), (Some(&w[..]), Some(&b[..])), (Some(&w[..]), None), (None, Some(&b[..]))]
            {
                let mut out = vec![f32::NAN; x.len()];
                layer_norm_f32(&x, n, weight, bias, 1e-5, &mut out);
                for (r, row) in x.chunks(n).enumerate() {
                    let mean = row.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
                    let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n as f64;
                    for j in 0..n {
                        let norm = (row[j] as f64 - mean) / (var + 1e-5).sqrt();
                        let want = norm * weight.map_or(1.0, |w| w[j] as f64) + bias.map_or(0.0, |b| b[j] as f64);
                        let got = out[r * n + j] as f64;
                        assert!(
                            (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
                            "[{rows}, {n}] ({r}, {j}): {got} vs {want}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn cross_entropy_rows_match_the_f64_formula() {
        let (rows, n) = (37, 300);
        let x = matrix(rows, n, 11);
        let mut stats = vec![RowSoftmaxStats { max: 0.0, sum: 0.0 }; rows];
        softmax_stats_f32(&x, n, &mut stats);
        // Every third row ignored (target -100), the others spread over the classes.
        let targets: Vec<i64> = (0..rows).map(|r| if r % 3 == 0 { -100 } else { (r * 41 % n) as i64 }).collect();
        let scale: Vec<f32> = (0..rows).map(|r| if r % 3 == 0 { 0.0 } else { 0.25 + r as f32 * 0.01 }).collect();
        let mut out = vec![f32::NAN; x.len()];
        cross_entropy_grad_f32(&x, n, &stats, &targets, &scale, &mut out);
        for (r, row) in x.chunks(n).enumerate() {
            let max = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            let sum: f64 = row.iter().map(|&v| (v as f64 - max as f64).exp()).sum();
            assert_eq!(stats[r].max, max);
            assert!((stats[r].sum - sum).abs() <= 1e-6 * sum, "row {r}: {} vs {sum}", stats[r].sum);
            for j in 0..n {
                let p = (row[j] as f64 - max as f64).exp() / sum;
                let want = (p - if targets[r] == j as i64 { 1.0 } else { 0.0 }) * scale[r] as f64;
                let got = out[r * n + j] as f64;
                assert!((got - want).abs() <= 1e-6 * (1.0 + want.abs()), "({r}, {j}): {got} vs {want}");
            }
        }
    }
}
