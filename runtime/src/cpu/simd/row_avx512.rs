//! The AVX-512F forms of [`crate::cpu::row_reduce`]'s row routines: 16 lanes, full vectors
//! unmasked, the row's last partial vector masked. Sums
//! add groups of four vectors in f32 ([`add4`]), then promote each half of that vector to
//! eight f64 lanes and add there.

use super::slice_avx512::exp16;
use crate::cpu::row_reduce::RowFns;
use std::arch::x86_64::*;

/// The mask of the first `k < 16` lanes.
#[inline(always)]
fn first(k: usize) -> __mmask16 {
    ((1u32 << k) - 1) as __mmask16
}

/// Asks for the cache line at `p` (any address: a prefetch is a hint and never faults) to be
/// brought into L2 (`_MM_HINT_T1`), for a row a later sweep reads. Into L1 (`_MM_HINT_T0`),
/// each pending line holds one of the core's few L1 fill buffers until it arrives; on layer norm
/// [8192, 1024] with a 2-core AVX-512 Xeon (2026-12-04, a copy of the kernel's loop in a
/// scratch bench, same run) a whole row's worth ran 8-13% slower that way.
#[inline]
#[target_feature(enable = "avx512f")]
fn prefetch_line(p: *const f32) {
    _mm_prefetch::<_MM_HINT_T1>(p.cast());
}

/// The 16 f32 lanes of `v` promoted to two 8-lane f64 vectors, added to `acc`.
#[inline]
#[target_feature(enable = "avx512f")]
fn add_wide(acc: &mut [__m512d; 2], v: __m512) {
    let lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    let hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v))));
    acc[0] = _mm512_add_pd(acc[0], lo);
    acc[1] = _mm512_add_pd(acc[1], hi);
}

/// Four vectors added pairwise in f32, `(a + b) + (c + d)` (two roundings of four terms per
/// lane), as the JIT's own sum loops add their unrolled vectors (`kiln-codegen`'s
/// `cpu/reduce.rs`) before promoting them: the promotion (two conversions and an extract per
/// vector) bounded these loops. Per 16 elements in cache on a 2-core AVX-512 Xeon
/// (2026-12-04): sum 1.01 → 0.59–0.70 ns, squared deviations 1.37 → 0.81–0.92 ns, exp-sum
/// 4.46 → 3.42–3.45 ns (that one also with its full vectors unmasked).
#[inline]
#[target_feature(enable = "avx512f")]
fn add4(v: [__m512; 4]) -> __m512 {
    _mm512_add_ps(_mm512_add_ps(v[0], v[1]), _mm512_add_ps(v[2], v[3]))
}

/// `Σ f(x)` over the row, where `f` maps a vector of 16 elements and lanes past the row's end
/// must count 0: `f(x, mask)` gets the lanes that are in the row. Groups of four vectors are
/// added by [`add4`] before their promotion to f64. With `next`, the same lines of that row are
/// prefetched meanwhile (any address: a hint).
///
/// # Safety
/// `src` valid to read `n` f32; the CPU has AVX-512F.
#[inline(always)]
unsafe fn sum_with(
    src: *const f32,
    n: usize,
    next: Option<*const f32>,
    f: impl Fn(__m512, __mmask16) -> __m512,
) -> f64 {
    // SAFETY: the CPU has AVX-512F (this function's contract).
    let zero = unsafe { _mm512_setzero_pd() };
    let mut acc = [[zero; 2]; 2];
    let prefetch = |i: usize| {
        if let Some(next) = next {
            // SAFETY: the CPU has AVX-512F (this function's contract).
            unsafe { prefetch_line(next.wrapping_add(i)) };
        }
    };
    let mut i = 0;
    while i + 64 <= n {
        // SAFETY: i + 64 <= n: the four vectors lie inside the row.
        let v = [0, 16, 32, 48].map(|o| f(unsafe { _mm512_loadu_ps(src.add(i + o)) }, 0xffff));
        for o in [0, 16, 32, 48] {
            prefetch(i + o);
        }
        // SAFETY: the CPU has AVX-512F (this function's contract).
        unsafe { add_wide(&mut acc[0], add4(v)) };
        i += 64;
    }
    while i < n {
        let m = if n - i >= 16 { 0xffff } else { first(n - i) };
        // SAFETY: the masked load reads lanes i..min(i + 16, n) only; masked-off lanes do not fault.
        let a = unsafe { _mm512_maskz_loadu_ps(m, src.add(i)) };
        prefetch(i);
        // SAFETY: the CPU has AVX-512F (this function's contract).
        unsafe { add_wide(&mut acc[1], f(a, m)) };
        i += 16;
    }
    // SAFETY: the CPU has AVX-512F (this function's contract).
    unsafe {
        let s = _mm512_add_pd(_mm512_add_pd(acc[0][0], acc[0][1]), _mm512_add_pd(acc[1][0], acc[1][1]));
        _mm512_reduce_add_pd(s)
    }
}

/// The sum routine.
///
/// # Safety
/// As [`crate::cpu::row_reduce::RowSumFn`], on a CPU with AVX-512F.
#[target_feature(enable = "avx512f")]
unsafe extern "C" fn sum(src: *const f32, n: usize) -> f64 {
    // SAFETY: the caller upholds the contract; masked-off lanes load as 0.
    unsafe { sum_with(src, n, None, |x, _| x) }
}

/// The squared-deviation sum routine: the second sweep of a row (its first is the mean, which
/// found it in memory), so it prefetches the `next` row for the next output's first sweep.
/// Measured on layer norm [8192, 1024] (2026-12-04, 2-core AVX-512 Xeon): the mean's sweep had
/// 21% of the kernel's samples waiting on memory; with the prefetch the bench's kernel ran
/// 3.47-3.53 ms against 3.61-4.00 before.
///
/// # Safety
/// As [`crate::cpu::row_reduce::RowSqDevSumFn`], on a CPU with AVX-512F.
#[target_feature(enable = "avx512f")]
unsafe extern "C" fn sq_dev_sum(src: *const f32, c: f32, n: usize, next: *const f32) -> f64 {
    let c = _mm512_set1_ps(c);
    // SAFETY: the caller upholds the contract; masked-off lanes' deviation is zeroed.
    unsafe {
        sum_with(src, n, Some(next), |x, m| {
            let d = _mm512_maskz_sub_ps(m, x, c);
            _mm512_mul_ps(d, d)
        })
    }
}

/// The max routine: `maxps` keeps the accumulator when a lane is NaN, so NaN lanes are
/// flagged in a mask and give the NaN result at the end.
///
/// # Safety
/// As [`crate::cpu::row_reduce::RowMaxFn`], on a CPU with AVX-512F.
#[target_feature(enable = "avx512f")]
unsafe extern "C" fn max(src: *const f32, n: usize) -> f32 {
    let ninf = _mm512_set1_ps(f32::NEG_INFINITY);
    let (mut a0, mut a1) = (ninf, ninf);
    let mut nan: __mmask16 = 0;
    let mut i = 0;
    while i + 32 <= n {
        // SAFETY: i + 32 <= n: both vectors lie inside the row.
        let (a, b) = unsafe { (_mm512_loadu_ps(src.add(i)), _mm512_loadu_ps(src.add(i + 16))) };
        a0 = _mm512_max_ps(a, a0);
        a1 = _mm512_max_ps(b, a1);
        nan |= _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(a, b);
        i += 32;
    }
    while i < n {
        let m = if n - i >= 16 { 0xffff } else { first(n - i) };
        // SAFETY: the masked load reads lanes i..min(i + 16, n) only; the others are -inf.
        let a = unsafe { _mm512_mask_loadu_ps(ninf, m, src.add(i)) };
        a0 = _mm512_max_ps(a, a0);
        nan |= _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(a, a);
        i += 16;
    }
    if nan != 0 {
        return f32::NAN;
    }
    _mm512_reduce_max_ps(_mm512_max_ps(a0, a1))
}

/// [`exp16`] of lanes `m` of the vector at `src + i` less `c` (the others 0), stored at
/// `dst + i` unless `dst` is null; the same line of the `next` row is prefetched. Called with
/// the constant full mask, the masked operations compile to plain ones.
///
/// # Safety
/// Lanes `m` from `i` lie inside the row that `src` (and `dst`, unless null) holds; in place is
/// fine; AVX-512F.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn exp_kept(src: *const f32, c: __m512, dst: *mut f32, next: *const f32, i: usize, m: __mmask16) -> __m512 {
    // SAFETY: the caller vouches for lanes m from i of both rows; each is loaded before it is
    // stored, and masked-off lanes are neither read nor written.
    let y = _mm512_maskz_mov_ps(m, exp16(_mm512_sub_ps(unsafe { _mm512_maskz_loadu_ps(m, src.add(i)) }, c)));
    prefetch_line(next.wrapping_add(i));
    if !dst.is_null() {
        // SAFETY: as above.
        unsafe { _mm512_mask_storeu_ps(dst.add(i), m, y) };
    }
    y
}

/// The exp-sum routine: [`exp_kept`] over the row's full vectors (unmasked; groups of four
/// summed by [`add4`]), the last partial vector masked. The loop is bound by its vector
/// instructions (about 17 per 16 elements for the exp). A helper function, not a closure:
/// four exps through a closure ran 5.9 ns per 16 elements in cache, against 3.4.
///
/// # Safety
/// As [`crate::cpu::row_reduce::RowExpSumFn`], on a CPU with AVX-512F.
#[target_feature(enable = "avx512f")]
unsafe extern "C" fn exp_sum(src: *const f32, c: f32, dst: *mut f32, n: usize, next: *const f32) -> f64 {
    let c = _mm512_set1_ps(c);
    let zero = _mm512_setzero_pd();
    let mut acc = [[zero; 2]; 2];
    let full = n - n % 16;
    let mut i = 0;
    // SAFETY (each exp_kept): full vectors end at or before full <= n, the last one's lanes
    // at n; the caller's contract covers the rows.
    let all = 0xffff;
    while i + 64 <= full {
        // Four calls written out: through `map`'s closure the loop ran 6.1 ns per 16.
        // SAFETY: see "each exp_kept" above.
        let v = unsafe {
            [
                exp_kept(src, c, dst, next, i, all),
                exp_kept(src, c, dst, next, i + 16, all),
                exp_kept(src, c, dst, next, i + 32, all),
                exp_kept(src, c, dst, next, i + 48, all),
            ]
        };
        add_wide(&mut acc[0], add4(v));
        i += 64;
    }
    while i < full {
        // SAFETY: see "each exp_kept" above.
        add_wide(&mut acc[1], unsafe { exp_kept(src, c, dst, next, i, all) });
        i += 16;
    }
    if full < n {
        // SAFETY: see "each exp_kept" above.
        add_wide(&mut acc[1], unsafe { exp_kept(src, c, dst, next, full, first(n - full)) });
    }
    let s = _mm512_add_pd(_mm512_add_pd(acc[0][0], acc[0][1]), _mm512_add_pd(acc[1][0], acc[1][1]));
    _mm512_reduce_add_pd(s)
}

/// The equal-count routine: per 16 elements, one compare into a mask that adds 1 to the
/// matching lanes of a vector of counts (no scalar popcount chain); the row's last partial
/// vector is counted from its masked compare.
///
/// # Safety
/// As [`crate::cpu::row_reduce::RowCountEqFn`], on a CPU with AVX-512F.
#[target_feature(enable = "avx512f")]
unsafe extern "C" fn count_eq(src: *const f32, t: f32, n: usize) -> usize {
    let t = _mm512_set1_ps(t);
    let ones = _mm512_set1_epi32(1);
    let full = n - n % 16;
    let mut count = 0;
    let mut i = 0;
    while i < full {
        // A lane gains at most 1 per vector: blocks of at most 2^26 vectors keep the 32-bit
        // lane counts, and their 16-lane sum (at most 2^30), exact.
        let block_end = full.min(i.saturating_add(16 << 26));
        let mut lanes = _mm512_setzero_si512();
        while i < block_end {
            // SAFETY: i + 16 <= full <= n: the vector lies inside the row.
            let x = unsafe { _mm512_loadu_ps(src.add(i)) };
            lanes = _mm512_mask_add_epi32(lanes, _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(x, t), lanes, ones);
            i += 16;
        }
        count += _mm512_reduce_add_epi32(lanes) as u32 as usize;
    }
    if full < n {
        let m = first(n - full);
        // SAFETY: the masked load reads lanes full..n only; the compare is masked to them too.
        let x = unsafe { _mm512_maskz_loadu_ps(m, src.add(full)) };
        count += _mm512_mask_cmp_ps_mask::<_CMP_EQ_OQ>(m, x, t).count_ones() as usize;
    }
    count
}

/// The lanes of row `p` at `i` under mask `m`, or `none` when `p` is null.
///
/// # Safety
/// `p` null, or valid to read the lanes of `m` at `i`.
#[inline(always)]
unsafe fn lanes_or(p: *const f32, i: usize, m: __mmask16, none: __m512) -> Option<__m512> {
    // SAFETY: the masked load reads only the lanes of `m`, inside the row by the caller's word.
    (!p.is_null()).then(|| unsafe { _mm512_mask_loadu_ps(none, m, p.add(i)) })
}

/// Writes `f(i, k)`, the vector of the row's lanes `k` from `i`, over the `n` lanes of `dst`
/// (each vector's lanes are computed before they are stored: in place is fine): full vectors
/// in a loop of their own, which calls `f` with the constant full mask (unmasked loads once
/// inlined; on rows of 1000 in cache this made the layer-norm and cross-entropy routines
/// 1.4x faster than one loop that masked each vector: 2.04 → 1.43 and 1.70 → 1.18 ns per 16). Streamed (`stream` nonzero), a first vector takes the
/// lanes up to dst's first 64-byte boundary, so that every later full vector is one aligned
/// cache line, written with `_mm512_stream_ps` (no line is read in before it is overwritten);
/// then a fence orders those stores before whatever the caller writes or publishes next.
///
/// # Safety
/// `dst` valid to write `n` f32; `f` reads only what its lanes may; AVX-512F.
#[inline(always)]
unsafe fn write_row(dst: *mut f32, n: usize, stream: usize, f: impl Fn(usize, __mmask16) -> __m512) {
    let head = if stream != 0 { ((64 - dst as usize % 64) % 64 / 4).min(n) } else { 0 };
    // SAFETY (every store): lanes i..i + 16, or the masked ones, lie inside dst's n f32. A
    // streamed vector starts past the head, so dst + i is 64-byte aligned (dst, an f32
    // pointer, is 4).
    if head > 0 {
        // SAFETY: see "every store" above.
        unsafe { _mm512_mask_storeu_ps(dst, first(head), f(0, first(head))) };
    }
    let mut i = head;
    if stream != 0 {
        while i + 16 <= n {
            // SAFETY: see "every store" above.
            unsafe { _mm512_stream_ps(dst.add(i), f(i, 0xffff)) };
            i += 16;
        }
    } else {
        while i + 16 <= n {
            // SAFETY: see "every store" above.
            unsafe { _mm512_storeu_ps(dst.add(i), f(i, 0xffff)) };
            i += 16;
        }
    }
    if i < n {
        let k = first(n - i);
        // SAFETY: see "every store" above.
        unsafe { _mm512_mask_storeu_ps(dst.add(i), k, f(i, k)) };
    }
    if stream != 0 {
        // SAFETY: SSE is part of x86_64's baseline; the fence orders the streamed stores.
        unsafe { _mm_sfence() };
    }
}

/// The layer-norm epilogue routine. Streamed, the output's lines are written without first
/// being read into the cache: on layer norm [8192, 1024] (32 MB out, 2-core AVX-512 Xeon,
/// 2026-12-04) the bench's kernel ran 2.88-2.98 ms against 3.47-3.53 ms with cached stores.
///
/// # Safety
/// As [`crate::cpu::row_reduce::RowNormAffineFn`], on a CPU with AVX-512F.
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn norm_affine(
    src: *const f32,
    m: f32,
    r: f32,
    w: *const f32,
    b: *const f32,
    dst: *mut f32,
    n: usize,
    stream: usize,
) {
    let (mv, rv) = (_mm512_set1_ps(m), _mm512_set1_ps(r));
    let zero = _mm512_setzero_ps();
    // SAFETY: the masked loads read the lanes `k` at i, inside rows the caller made valid for
    // n f32 (w and b only when not null).
    unsafe {
        write_row(dst, n, stream, |i, k| {
            let mut y = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, src.add(i)), mv), rv);
            if let Some(wv) = lanes_or(w, i, k, zero) {
                y = _mm512_mul_ps(y, wv);
            }
            if let Some(bv) = lanes_or(b, i, k, zero) {
                y = _mm512_add_ps(y, bv);
            }
            y
        })
    }
}

/// The cross-entropy gradient's epilogue routine: the compare of each 16 lanes is a mask that
/// picks `a` or `z`. Streamed as [`norm_affine`].
///
/// # Safety
/// As [`crate::cpu::row_reduce::RowOneHotSubFn`], on a CPU with AVX-512F.
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn onehot_sub(
    iota: *const f32,
    t: f32,
    a: f32,
    z: f32,
    k: *const f32,
    e: f32,
    s: f32,
    dst: *mut f32,
    n: usize,
    stream: usize,
) {
    let (tv, av, zv, ev, sv) =
        (_mm512_set1_ps(t), _mm512_set1_ps(a), _mm512_set1_ps(z), _mm512_set1_ps(e), _mm512_set1_ps(s));
    // SAFETY: the masked loads read the lanes `m` at i, inside rows valid for n f32.
    unsafe {
        write_row(dst, n, stream, |i, m| {
            let hot = _mm512_mask_blend_ps(
                _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(_mm512_maskz_loadu_ps(m, iota.add(i)), tv),
                zv,
                av,
            );
            _mm512_sub_ps(hot, _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, k.add(i)), ev), sv))
        })
    }
}

/// The routines.
pub(crate) const FNS: RowFns = RowFns { sum, max, sq_dev_sum, exp_sum, count_eq, norm_affine, onehot_sub };
