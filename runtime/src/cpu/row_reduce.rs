//! Native reductions of one contiguous f32 row, for the reduction stages of the JIT's kernels
//! (`kiln-codegen`'s `cpu/native_rows.rs`): the sweeps of softmax, log-softmax, cross-entropy
//! and layer norm. Cranelift's x86-64 back end emits 128-bit vectors only; these routines run
//! 16 lanes with AVX-512F (`simd/row_avx512.rs`), rustc's autovectorized loops with AVX2+FMA, and
//! plain loops elsewhere ([`row_fns`] picks once, and the JIT keeps the pointers).
//!
//! What each computes, over `src[0..n]`:
//! - [`RowFns::sum`]: `Σ x`;
//! - [`RowFns::max`]: the maximum, NaN when any element is NaN (as the eager `amax`);
//! - [`RowFns::sq_dev_sum`]: `Σ (x - c)²`, the square taken in f32;
//! - [`RowFns::exp_sum`]: `Σ e^(x - c)`, also writing each `e^(x - c)` to `dst` unless it is
//!   null. The exp is the tiled kernels' `Exp` slice routine ([`super::simd::slice_math::slice_fn`])
//!   bit for bit, so a value kept here equals the one a tile would compute;
//! - [`RowFns::count_eq`]: how many elements equal `t` (the sum of a one-hot mask: the
//!   cross-entropy gradient's `Σ where(eq(iota, target), g, 0)`).
//!
//! And two epilogue sweeps (`kiln-codegen`'s `cpu/native_epilogue.rs`), each writing `dst[0..n]`
//! with the same f32 operations, in the same order, as the JIT's loops (no FMA), so the
//! results are the same bits:
//! - [`RowFns::norm_affine`]: `((x - m)·r)·w + b`, layer norm's normalization (`w`, `b` rows,
//!   either left out);
//! - [`RowFns::onehot_sub`]: `where(iota == t, a, z) - (k·e)·s`, the cross-entropy gradient
//!   (`k` the kept exps of the row, `e` and `s` one value per row).
//!
//! Sums accumulate in f64 lanes. The AVX-512 routines first add groups of four vectors in f32,
//! pairwise (two roundings of four terms per lane), as the JIT's own loops do; the others
//! promote each term. Either way a sum is within `2⁻²³·Σ|term|` of the exact one (plus f64
//! rounding), far below the f32 result's own rounding for sums of like-signed terms.

use super::simd::slice_math::exp_fma;
use super::simd::vecmath;

/// `Σ src[i]` for `i < n`, in f64.
///
/// # Safety
/// `src` must be valid to read `n` f32.
pub type RowSumFn = unsafe extern "C" fn(src: *const f32, n: usize) -> f64;

/// The maximum of `src[..n]` (NaN if any is NaN; -inf when `n` is 0).
///
/// # Safety
/// As [`RowSumFn`].
pub type RowMaxFn = unsafe extern "C" fn(src: *const f32, n: usize) -> f32;

/// `Σ (src[i] - c)²` for `i < n`, each square in f32, summed in f64. `next` is a hint, as for
/// [`RowExpSumFn`]: the row the caller reads next, prefetched meanwhile.
///
/// # Safety
/// As [`RowSumFn`].
pub type RowSqDevSumFn = unsafe extern "C" fn(src: *const f32, c: f32, n: usize, next: *const f32) -> f64;

/// `Σ e^(src[i] - c)` for `i < n`, in f64; also `dst[i] = e^(src[i] - c)` unless `dst` is null.
/// `next` is a hint: the row the caller reads next (`n` f32 there are prefetched into the
/// cache while this row's exps are computed, so the next row's first sweep finds them there
/// instead of waiting on memory; any address is fine, a prefetch never faults).
///
/// # Safety
/// `src` must be valid to read `n` f32; `dst` null or valid to write `n` f32, not overlapping
/// `src` unless equal to it.
pub type RowExpSumFn = unsafe extern "C" fn(src: *const f32, c: f32, dst: *mut f32, n: usize, next: *const f32) -> f64;

/// How many of `src[..n]` equal `t` (IEEE equality: a NaN equals nothing, `-0 == +0`).
///
/// # Safety
/// As [`RowSumFn`].
pub type RowCountEqFn = unsafe extern "C" fn(src: *const f32, t: f32, n: usize) -> usize;

/// `dst[i] = ((src[i] - m)·r)·w[i] + b[i]` for `i < n`, each operation rounded in f32 (no
/// FMA); a null `w` leaves out the product with it, a null `b` the sum. With `stream` nonzero,
/// the routine may write `dst` with non-temporal stores, which bypass the cache (for outputs too
/// big to stay there: no cache line is read before it is overwritten); the values are the same.
///
/// # Safety
/// `src`, and `w`, `b` unless null, valid to read `n` f32; `dst` valid to write `n` f32, not
/// overlapping them unless equal to `src`.
pub type RowNormAffineFn = unsafe extern "C" fn(
    src: *const f32,
    m: f32,
    r: f32,
    w: *const f32,
    b: *const f32,
    dst: *mut f32,
    n: usize,
    stream: usize,
);

/// `dst[i] = (if iota[i] == t { a } else { z }) - (k[i]·e)·s` for `i < n`, each operation
/// rounded in f32; `stream` as [`RowNormAffineFn`]'s.
///
/// # Safety
/// `iota` and `k` valid to read `n` f32; `dst` valid to write `n` f32, not overlapping them
/// unless equal to one of them.
pub type RowOneHotSubFn = unsafe extern "C" fn(
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
);

/// Bytes of an f32 output from which its writers (generated kernels' epilogues,
/// [`super::row_kernels`]) pass a nonzero `stream` to the routines, so they write it with
/// non-temporal stores: an output this big does not stay in a 2-core machine's caches for its
/// consumer, so reading each line in before overwriting it only adds memory traffic. Measured on a
/// 2-core AVX-512 Xeon (2026-12-04): layer norm [8192, 1024] (32 MB out) 2.88-2.98 ms streamed
/// against 3.47-3.53 cached; the cross-entropy gradient [8192, 1000], in a copy of its kernel's
/// loop, 3.16-3.26 against 3.68-3.71 ms. (Session 13 found streaming through a row buffer slower on
/// an AMD EPYC; this streams from the routines' registers.)
pub const STREAM_BYTES: usize = 16 << 20;

/// The row routines for this CPU.
#[derive(Clone, Copy)]
pub struct RowFns {
    /// `Σ x`.
    pub sum: RowSumFn,
    /// `max x`.
    pub max: RowMaxFn,
    /// `Σ (x - c)²`.
    pub sq_dev_sum: RowSqDevSumFn,
    /// `Σ e^(x - c)`, keeping the exps.
    pub exp_sum: RowExpSumFn,
    /// `#{x == t}`.
    pub count_eq: RowCountEqFn,
    /// Layer norm's `((x - m)·r)·w + b`.
    pub norm_affine: RowNormAffineFn,
    /// Cross-entropy's gradient `where(iota == t, a, z) - (k·e)·s`.
    pub onehot_sub: RowOneHotSubFn,
}

/// Lanes of the portable loops' f64 accumulators (rustc vectorizes them).
const LANES: usize = 8;

/// The row `src[..n]` as a slice (an empty one for `n == 0`, whatever `src` is).
///
/// # Safety
/// `src` valid to read `n` f32 when `n > 0`.
#[inline(always)]
unsafe fn row<'a>(src: *const f32, n: usize) -> &'a [f32] {
    if n == 0 {
        &[]
    } else {
        // SAFETY: the caller guarantees `n` readable f32 at `src`.
        unsafe { std::slice::from_raw_parts(src, n) }
    }
}

/// `Σ f(x)` over `xs` in [`LANES`] f64 accumulators (each term promoted exactly).
#[inline(always)]
fn sum_lanes(xs: &[f32], f: impl Fn(f32) -> f32) -> f64 {
    let mut acc = [0f64; LANES];
    let mut chunks = xs.chunks_exact(LANES);
    for c in &mut chunks {
        for (a, &x) in acc.iter_mut().zip(c) {
            *a += f(x) as f64;
        }
    }
    let tail: f64 = chunks.remainder().iter().map(|&x| f(x) as f64).sum();
    acc.iter().sum::<f64>() + tail
}

/// The maximum of `xs` in [`LANES`] accumulators, NaN when any element is.
#[inline(always)]
fn max_lanes(xs: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let mut nan = false;
    let mut chunks = xs.chunks_exact(LANES);
    for c in &mut chunks {
        for (a, &x) in acc.iter_mut().zip(c) {
            *a = if x > *a { x } else { *a };
            nan |= x.is_nan();
        }
    }
    for &x in chunks.remainder() {
        acc[0] = if x > acc[0] { x } else { acc[0] };
        nan |= x.is_nan();
    }
    if nan {
        f32::NAN
    } else {
        acc.iter().fold(f32::NEG_INFINITY, |m, &a| if a > m { a } else { m })
    }
}

/// `Σ e(x - c)`, writing each term to `dst` unless null.
///
/// # Safety
/// As [`RowExpSumFn`].
#[inline(always)]
unsafe fn exp_sum_with(src: *const f32, c: f32, dst: *mut f32, n: usize, e: impl Fn(f32) -> f32) -> f64 {
    if dst.is_null() {
        // SAFETY: the caller upholds the contract.
        return sum_lanes(unsafe { row(src, n) }, |x| e(x - c));
    }
    let mut acc = [0f64; LANES];
    let full = n / LANES * LANES;
    let mut i = 0;
    while i < full {
        // Read a whole group before writing it, so an in-place call is fine and the loop
        // vectorizes without alias checks.
        // SAFETY: i + LANES <= n: the group lies inside both rows.
        let x = unsafe { src.add(i).cast::<[f32; LANES]>().read_unaligned() };
        let y = x.map(|x| e(x - c));
        for (a, &y) in acc.iter_mut().zip(&y) {
            *a += y as f64;
        }
        // SAFETY: as above.
        unsafe { dst.add(i).cast::<[f32; LANES]>().write_unaligned(y) };
        i += LANES;
    }
    let mut tail = 0.0;
    for j in full..n {
        // SAFETY: j < n; each element is read before it is written.
        unsafe {
            let y = e(*src.add(j) - c);
            *dst.add(j) = y;
            tail += y as f64;
        }
    }
    acc.iter().sum::<f64>() + tail
}

/// [`RowNormAffineFn`]'s loop: `w` and `b` as given (null: left out), elementwise.
///
/// # Safety
/// As [`RowNormAffineFn`].
#[inline(always)]
unsafe fn norm_affine_with(src: *const f32, m: f32, r: f32, w: *const f32, b: *const f32, dst: *mut f32, n: usize) {
    for i in 0..n {
        // SAFETY: i < n; each element is read before it is written.
        unsafe {
            let mut y = (*src.add(i) - m) * r;
            if !w.is_null() {
                y *= *w.add(i);
            }
            if !b.is_null() {
                y += *b.add(i);
            }
            *dst.add(i) = y;
        }
    }
}

/// [`RowOneHotSubFn`]'s loop.
///
/// # Safety
/// As [`RowOneHotSubFn`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn onehot_sub_with(
    iota: *const f32,
    t: f32,
    a: f32,
    z: f32,
    k: *const f32,
    e: f32,
    s: f32,
    dst: *mut f32,
    n: usize,
) {
    for i in 0..n {
        // SAFETY: i < n; each element is read before it is written.
        unsafe {
            let hot = if *iota.add(i) == t { a } else { z };
            *dst.add(i) = hot - (*k.add(i) * e) * s;
        }
    }
}

macro_rules! portable_row_fns {
    ($name:ident, $($feature:literal)?, $exp:path) => {
        /// The portable row routines, compiled for the target features named.
        mod $name {
            use super::*;

            $(#[target_feature(enable = $feature)])?
            pub(super) unsafe extern "C" fn sum(src: *const f32, n: usize) -> f64 {
                // SAFETY: the caller upholds RowSumFn's contract.
                sum_lanes(unsafe { row(src, n) }, |x| x)
            }

            $(#[target_feature(enable = $feature)])?
            pub(super) unsafe extern "C" fn max(src: *const f32, n: usize) -> f32 {
                // SAFETY: the caller upholds RowMaxFn's contract.
                max_lanes(unsafe { row(src, n) })
            }

            $(#[target_feature(enable = $feature)])?
            pub(super) unsafe extern "C" fn sq_dev_sum(src: *const f32, c: f32, n: usize, _next: *const f32) -> f64 {
                // SAFETY: the caller upholds RowSqDevSumFn's contract.
                sum_lanes(unsafe { row(src, n) }, |x| (x - c) * (x - c))
            }

            $(#[target_feature(enable = $feature)])?
            pub(super) unsafe extern "C" fn exp_sum(src: *const f32, c: f32, dst: *mut f32, n: usize, _next: *const f32) -> f64 {
                // SAFETY: the caller upholds RowExpSumFn's contract.
                unsafe { exp_sum_with(src, c, dst, n, $exp) }
            }

            $(#[target_feature(enable = $feature)])?
            pub(super) unsafe extern "C" fn count_eq(src: *const f32, t: f32, n: usize) -> usize {
                // SAFETY: the caller upholds RowCountEqFn's contract.
                unsafe { row(src, n) }.iter().filter(|&&x| x == t).count()
            }

            $(#[target_feature(enable = $feature)])?
            #[allow(clippy::too_many_arguments)]
            pub(super) unsafe extern "C" fn norm_affine(src: *const f32, m: f32, r: f32, w: *const f32, b: *const f32, dst: *mut f32, n: usize, _stream: usize) {
                // SAFETY: the caller upholds RowNormAffineFn's contract.
                unsafe { norm_affine_with(src, m, r, w, b, dst, n) }
            }

            $(#[target_feature(enable = $feature)])?
            #[allow(clippy::too_many_arguments)]
            pub(super) unsafe extern "C" fn onehot_sub(iota: *const f32, t: f32, a: f32, z: f32, k: *const f32, e: f32, s: f32, dst: *mut f32, n: usize, _stream: usize) {
                // SAFETY: the caller upholds RowOneHotSubFn's contract.
                unsafe { onehot_sub_with(iota, t, a, z, k, e, s, dst, n) }
            }

            /// The routines.
            pub(super) const FNS: RowFns = RowFns { sum, max, sq_dev_sum, exp_sum, count_eq, norm_affine, onehot_sub };
        }
    };
}

portable_row_fns!(plain, , vecmath::exp_f32);
#[cfg(target_arch = "x86_64")]
portable_row_fns!(avx2, "avx2,fma", exp_fma);

/// The row routines this CPU runs best: AVX-512F, AVX2+FMA, or the portable loops. The exp of
/// [`RowFns::exp_sum`] is the one [`super::simd::slice_math::slice_fn`] picks for the same CPU.
pub fn row_fns() -> RowFns {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return super::simd::row_avx512::FNS;
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            return avx2::FNS;
        }
    }
    plain::FNS
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op_kind::UnaryOp;

    /// Rows of every length up to 70 (each partial group) and a long one, with values over
    /// several orders of magnitude.
    fn rows() -> Vec<Vec<f32>> {
        let mut s = 0x2545_f491_u32;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s as f32 / u32::MAX as f32 - 0.5) * 40.0
        };
        (0..=70).chain([1000, 4500]).map(|n| (0..n).map(|_| next()).collect()).collect()
    }

    /// The (stream flag, offset) pairs a row-writing routine is tried with: not streamed and
    /// streamed, each into `out` at a 64-byte boundary and at two offsets past one.
    fn streamed_offsets(out: &[f32]) -> impl Iterator<Item = (usize, usize)> {
        let aligned = (64 - out.as_ptr() as usize % 64) % 64 / 4;
        [0, 1].into_iter().flat_map(move |s| [(s, aligned), (s, aligned + 1), (s, aligned + 7)])
    }

    fn all_fns() -> Vec<RowFns> {
        let mut v = vec![plain::FNS, row_fns()];
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            v.push(avx2::FNS);
        }
        v
    }

    /// Agreement of a row routine's sum with the f64 sum `want` of terms whose magnitudes add
    /// to `mag`: within the f32 grouping's `2⁻²³·mag` (see the module's docs) and f64 rounding.
    fn close(got: f64, want: f64, mag: f64) -> bool {
        (got - want).abs() <= f32::EPSILON as f64 * mag + 1e-12 * want.abs().max(1.0)
    }

    #[test]
    fn sums_and_squared_deviations_match_an_f64_loop() {
        for f in all_fns() {
            for xs in rows() {
                let want: f64 = xs.iter().map(|&x| x as f64).sum();
                // SAFETY: `xs` holds `xs.len()` f32.
                let got = unsafe { (f.sum)(xs.as_ptr(), xs.len()) };
                let mag: f64 = xs.iter().map(|&x| x.abs() as f64).sum();
                assert!(close(got, want, mag), "sum of {} elements: {got} vs {want}", xs.len());
                let c = 1.25f32;
                let want: f64 = xs.iter().map(|&x| ((x - c) * (x - c)) as f64).sum();
                // SAFETY: as above.
                let got = unsafe { (f.sq_dev_sum)(xs.as_ptr(), c, xs.len(), xs.as_ptr()) };
                assert!(close(got, want, want), "squared deviations of {} elements: {got} vs {want}", xs.len());
            }
        }
    }

    #[test]
    fn count_eq_counts_ieee_equal_elements() {
        for f in all_fns() {
            for xs in rows() {
                let mut xs: Vec<f32> = xs.iter().map(|x| x.round() % 7.0).collect();
                if xs.len() > 3 {
                    xs[1] = -0.0;
                    xs[2] = f32::NAN;
                }
                for t in [0.0, 3.0, -5.0, 9.0, f32::NAN] {
                    let want = xs.iter().filter(|&&x| x == t).count();
                    // SAFETY: `xs` holds `xs.len()` f32.
                    assert_eq!(unsafe { (f.count_eq)(xs.as_ptr(), t, xs.len()) }, want, "{t} in {} elements", xs.len());
                }
            }
        }
    }

    #[test]
    fn max_is_the_eager_maximum_and_propagates_nan() {
        for f in all_fns() {
            for mut xs in rows() {
                let want = xs.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
                // SAFETY: `xs` holds `xs.len()` f32.
                assert_eq!(unsafe { (f.max)(xs.as_ptr(), xs.len()) }, want, "{} elements", xs.len());
                if let Some(last) = xs.last_mut() {
                    *last = f32::NAN;
                    // SAFETY: `xs` holds `xs.len()` f32.
                    let max = unsafe { (f.max)(xs.as_ptr(), xs.len()) };
                    assert!(max.is_nan(), "a NaN in the last of {} elements", xs.len());
                }
            }
        }
    }

    #[test]
    fn exp_sum_keeps_the_slice_routines_exps_in_and_out_of_place() {
        let exp = crate::cpu::simd::slice_math::slice_fn(UnaryOp::Exp).expect("exp has a slice routine");
        let f = row_fns();
        for xs in rows() {
            let c = 3.5f32;
            let shifted: Vec<f32> = xs.iter().map(|&x| x - c).collect();
            let mut want = vec![0f32; xs.len()];
            // SAFETY: both buffers hold `xs.len()` f32 and are disjoint.
            unsafe { exp(shifted.as_ptr(), want.as_mut_ptr(), xs.len()) };
            let want_sum: f64 = want.iter().map(|&y| y as f64).sum();
            let mut got = vec![f32::NAN; xs.len()];
            // SAFETY: as above.
            let sum = unsafe { (f.exp_sum)(xs.as_ptr(), c, got.as_mut_ptr(), xs.len(), xs.as_ptr()) };
            assert_eq!(
                got.iter().map(|y| y.to_bits()).collect::<Vec<_>>(),
                want.iter().map(|y| y.to_bits()).collect::<Vec<_>>(),
                "{} elements",
                xs.len()
            );
            assert!(close(sum, want_sum, want_sum), "{sum} vs {want_sum}");
            // SAFETY: `xs` is readable; a null `dst` is not written.
            let no_keep = unsafe { (f.exp_sum)(xs.as_ptr(), c, std::ptr::null_mut(), xs.len(), std::ptr::null()) };
            assert!(close(no_keep, want_sum, want_sum));
            let mut in_place = xs.clone();
            // SAFETY: in place: src == dst, both `xs.len()` f32.
            let sum =
                unsafe { (f.exp_sum)(in_place.as_ptr(), c, in_place.as_mut_ptr(), xs.len(), usize::MAX as *const f32) };
            assert_eq!(
                in_place.iter().map(|y| y.to_bits()).collect::<Vec<_>>(),
                want.iter().map(|y| y.to_bits()).collect::<Vec<_>>()
            );
            assert!(close(sum, want_sum, want_sum));
        }
        // NaN and the range's ends, as the slice routine gives them.
        let xs = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 200.0, -200.0, 0.0];
        let mut got = [0f32; 6];
        // SAFETY: both hold 6 f32.
        let sum = unsafe { (f.exp_sum)(xs.as_ptr(), 0.0, got.as_mut_ptr(), 6, xs.as_ptr()) };
        assert!(got[0].is_nan() && sum.is_nan());
        assert_eq!(&got[1..], &[f32::INFINITY, 0.0, f32::INFINITY, 0.0, 1.0]);
    }

    /// The epilogue sweeps against their scalar definitions, bit for bit, with and without
    /// `w` and `b`, in place, and with special values in the rows.
    #[test]
    fn epilogue_sweeps_equal_their_scalar_forms_bit_for_bit() {
        let bits = |v: &[f32]| v.iter().map(|y| y.to_bits()).collect::<Vec<_>>();
        for f in all_fns() {
            for mut xs in rows() {
                let n = xs.len();
                if n > 5 {
                    xs[3] = f32::NAN;
                    xs[4] = f32::INFINITY;
                }
                let w: Vec<f32> = xs.iter().rev().map(|x| x * 0.25 + 1.0).collect();
                let b: Vec<f32> = xs.iter().map(|x| x * -0.5).collect();
                let (m, r) = (0.75f32, 1.0f32 / 3.0);
                for (wp, bp) in [(true, true), (true, false), (false, true), (false, false)] {
                    let want: Vec<f32> = (0..n)
                        .map(|i| {
                            let y = (xs[i] - m) * r;
                            let y = if wp { y * w[i] } else { y };
                            if bp {
                                y + b[i]
                            } else {
                                y
                            }
                        })
                        .collect();
                    let (wq, bq) = (
                        if wp { w.as_ptr() } else { std::ptr::null() },
                        if bp { b.as_ptr() } else { std::ptr::null() },
                    );
                    // Streamed or not, into a destination 64-byte aligned and not.
                    let mut out = vec![0f32; n + 32];
                    for (stream, off) in streamed_offsets(&out) {
                        out.fill(0.0);
                        // SAFETY: every row holds n f32; out[off..off + n] is inside out (off < 32)
                        // and disjoint from the sources.
                        unsafe { (f.norm_affine)(xs.as_ptr(), m, r, wq, bq, out.as_mut_ptr().add(off), n, stream) };
                        assert_eq!(
                            bits(&out[off..off + n]),
                            bits(&want),
                            "norm_affine of {n} elements, w {wp}, b {bp}, stream {stream}, offset {off}"
                        );
                        assert!(
                            out[..off].iter().chain(&out[off + n..]).all(|&y| y == 0.0),
                            "norm_affine wrote outside its row"
                        );
                        let mut in_place = xs.clone();
                        // SAFETY: in place: src == dst, n f32.
                        unsafe { (f.norm_affine)(in_place.as_ptr(), m, r, wq, bq, in_place.as_mut_ptr(), n, stream) };
                        assert_eq!(bits(&in_place), bits(&want), "norm_affine in place, {n} elements, stream {stream}");
                    }
                }
                let iota: Vec<f32> = (0..n).map(|i| i as f32).collect();
                for t in [0.0, 2.0, (n as f32 - 1.0).max(0.0), -1.0, f32::NAN] {
                    let (a, z, e, s) = (-0.125f32, 0.0f32, 0.9f32, 1.0f32 / 7.0);
                    let want: Vec<f32> = (0..n).map(|i| (if iota[i] == t { a } else { z }) - (xs[i] * e) * s).collect();
                    let mut out = vec![0f32; n + 32];
                    for (stream, off) in streamed_offsets(&out) {
                        out.fill(0.0);
                        // SAFETY: every row holds n f32; out[off..off + n] is inside out (off < 32)
                        // and disjoint from the sources.
                        unsafe {
                            (f.onehot_sub)(
                                iota.as_ptr(),
                                t,
                                a,
                                z,
                                xs.as_ptr(),
                                e,
                                s,
                                out.as_mut_ptr().add(off),
                                n,
                                stream,
                            )
                        };
                        assert_eq!(
                            bits(&out[off..off + n]),
                            bits(&want),
                            "onehot_sub of {n} elements, target {t}, stream {stream}, offset {off}"
                        );
                        assert!(
                            out[..off].iter().chain(&out[off + n..]).all(|&y| y == 0.0),
                            "onehot_sub wrote outside its row"
                        );
                    }
                }
            }
        }
    }
}
