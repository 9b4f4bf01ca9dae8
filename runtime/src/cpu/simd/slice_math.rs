//! The native f32 slice routines of the JIT's tiled kernels (`kiln-codegen`'s `cpu/tiled_rows.rs`):
//! per op, a C-ABI function `dst[i] = f(src[i])` over raw pointers, already specialized for
//! this CPU ([`slice_fn`] picks AVX-512F, AVX2+FMA or the baseline once, and the JIT keeps the
//! pointer).
//!
//! With AVX2+FMA or AVX-512F the routines compute the FMA forms here ([`exp_fma`],
//! [`tanh_fma`], …): the Cephes algorithms of [`super::vecmath`] with fused multiply-adds, a
//! round-to-nearest by the 1.5·2^23 shift, and a single 2^n factor where the range allows:
//! half the instructions of the unfused forms (tanh: about 6 per element with AVX2). They are
//! not bit-identical to the eager ops (which must run without FMA); on the baseline the
//! routines are the eager [`super::vecmath`] forms, bit for bit. With AVX-512F, exp and
//! sigmoid run explicit 16-lane loops (`slice_avx512.rs`, twice the speed of the
//! autovectorized exp), bit-identical to the FMA forms.
//!
//! Maximum error of the FMA forms against the f64 std result over the whole f32 range (1M
//! points log-spaced over ±[1e-45, 3.4e38] plus ±0, ±inf, NaN, subnormals), asserted by this
//! file's tests and by `codegen/tests/cpu_tiles.rs` on the dispatched routines (measured
//! maximum in parentheses):
//!
//! | fn | bound | measured |
//! |---|---|---|
//! | exp | 2 ulp | 0.93 (subnormal results within the subnormal spacing) |
//! | tanh | 3 ulp | 1.12 |
//! | sigmoid | 3 ulp | 2.10 (0 below -88.72, as the f32 formula `1/(1+e^-x)`) |
//! //!
//! The special values are the eager ones: NaN gives NaN; exp(+inf) = +inf, exp(-inf) = 0;
//! tanh(±inf) = ±1, tanh(±0) = +0 (as the eager `tanh_f32`'s odd polynomial gives);
//! sigmoid(+inf) = 1, sigmoid(-inf) = 0.

// The polynomial coefficients are written as published (Cephes).
#![allow(clippy::excessive_precision)]

use super::vecmath;
use crate::op_kind::UnaryOp;

const LOG2E: f32 = std::f32::consts::LOG2_E;
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// 1.5·2^23: adding it rounds an |x| < 2^22 to the nearest integer, held in the low mantissa bits.
const SHIFT: f32 = 12_582_912.0;
/// The bits of [`SHIFT`].
const SHIFT_BITS: i32 = 0x4b40_0000;

/// `x·log2(e)` rounded to the nearest integer `n` (ties to even), as a float and as an i32,
/// for |x·log2(e)| < 2^22 (a NaN `x` gives a NaN float and an arbitrary integer).
#[inline(always)]
fn split_log2e(x: f32) -> (f32, i32) {
    let t = x.mul_add(LOG2E, SHIFT);
    (t - SHIFT, (t.to_bits() as i32).wrapping_sub(SHIFT_BITS))
}

/// e^(x − n·ln 2) for the reduced argument: Cephes' expf polynomial, `1 + r + r²·P(r)`.
#[inline(always)]
fn exp_reduced(x: f32, n: f32) -> f32 {
    let r = n.mul_add(-LN2_HI, x);
    let r = n.mul_add(-LN2_LO, r);
    let p = 1.987_569_1e-4f32
        .mul_add(r, 1.398_199_9e-3)
        .mul_add(r, 8.333_452e-3)
        .mul_add(r, 4.166_579_6e-2)
        .mul_add(r, 1.666_666_5e-1)
        .mul_add(r, 5.000_000_1e-1);
    p.mul_add(r * r, r) + 1.0
}

/// 2^n for an i32 `n`, its biased exponent clamped into `[0, 255]` (0 and inf at the ends).
#[inline(always)]
fn pow2i(n: i32) -> f32 {
    f32::from_bits((n.wrapping_add(127).clamp(0, 255) as u32) << 23)
}

/// e^x with fused multiply-adds: ≤ 2 ulp, overflow to +inf above 88.72, subnormal results
/// (2^n in two factors), 0 below -103.97, NaN propagated.
#[inline(always)]
pub fn exp_fma(x: f32) -> f32 {
    let xc = x.clamp(-104.0, 89.0);
    let (n, ni) = split_log2e(xc);
    let e = exp_reduced(xc, n);
    let n1 = ni >> 1;
    let y = e * pow2i(n1) * pow2i(ni.wrapping_sub(n1));
    let y = if x > 88.722_84 { f32::INFINITY } else { y };
    let y = if x < -103.972_08 { 0.0 } else { y };
    if x.is_nan() {
        x
    } else {
        y
    }
}

/// tanh x with fused multiply-adds: ≤ 3 ulp; Cephes' odd polynomial below |x| = 0.625,
/// `±(1 − 2/(e^{2|x|} + 1))` above (|x| clamped to 10, where the f32 result is ±1).
#[inline(always)]
// `!(a >= 0.625)` is one unordered comparison where `a < 0.625 || x.is_nan()` is two.
#[allow(clippy::neg_cmp_op_on_partial_ord)]
pub fn tanh_fma(x: f32) -> f32 {
    let s = x * x;
    let p = (-5.704_988_7e-3f32)
        .mul_add(s, 2.063_908_9e-2)
        .mul_add(s, -5.373_971_6e-2)
        .mul_add(s, 1.333_144_2e-1)
        .mul_add(s, -3.333_328_2e-1);
    let small = (p * s).mul_add(x, x);
    let a = x.abs();
    // 2|x| ≤ 20: n ≤ 29, one exponent factor.
    let y = 2.0 * a.min(10.0);
    let (n, ni) = split_log2e(y);
    let e = exp_reduced(y, n) * f32::from_bits((ni.wrapping_add(127) as u32) << 23);
    let large = (1.0 - 2.0 / (e + 1.0)).copysign(x);
    // `!(a >= 0.625)`: the small form for NaN too.
    if !(a >= 0.625) {
        small
    } else {
        large
    }
}

/// 1/(1 + e^-x) with [`exp_fma`]: ≤ 3 ulp (0 below -88.72).
#[inline(always)]
pub fn sigmoid_fma(x: f32) -> f32 {
    1.0 / (1.0 + exp_fma(-x))
}

/// A slice routine: `dst[i] = f(src[i])` for `i < n`, single-threaded.
///
/// # Safety
/// `src` must be valid to read and `dst` valid to write `n` f32 each (both aligned to 4
/// bytes), and either `src == dst` (in place) or the two ranges disjoint.
pub type SliceFn = unsafe extern "C" fn(src: *const f32, dst: *mut f32, n: usize);

macro_rules! slice_fns {
    // The AVX-512F body: an explicit 16-lane routine where the op has one, else the FMA form
    // autovectorized.
    (@avx512 $src:ident, $dst:ident, $n:ident, $fma:path) => {
        // SAFETY: the caller upholds `SliceFn`'s contract.
        unsafe { map_raw($src, $dst, $n, $fma) }
    };
    (@avx512 $src:ident, $dst:ident, $n:ident, $fma:path, $wide:path) => {
        // SAFETY: the caller upholds `SliceFn`'s contract, which is the routine's.
        unsafe { $wide($src, $dst, $n) }
    };
    ($($op:ident => $plain:path, $fma:path $(, $wide:path)?);* $(;)?) => {
        /// The [`SliceFn`] of `op` for this CPU: the FMA form with AVX-512F or AVX2+FMA, the
        /// eager [`vecmath`] form otherwise (the choice is made here, once, so callers keep
        /// the pointer), for exp, tanh and sigmoid; `None` for any other op.
        pub fn slice_fn(op: UnaryOp) -> Option<SliceFn> {
            match op {
                $(UnaryOp::$op => Some({
                    unsafe extern "C" fn plain(src: *const f32, dst: *mut f32, n: usize) {
                        // SAFETY: the caller upholds `SliceFn`'s contract.
                        unsafe { map_raw(src, dst, n, $plain) }
                    }
                    #[cfg(target_arch = "x86_64")]
                    #[target_feature(enable = "avx2,fma")]
                    unsafe extern "C" fn avx2(src: *const f32, dst: *mut f32, n: usize) {
                        // SAFETY: the caller upholds `SliceFn`'s contract; `pick` hands this
                        // out only on a CPU with AVX2 and FMA.
                        unsafe { map_raw(src, dst, n, $fma) }
                    }
                    #[cfg(target_arch = "x86_64")]
                    #[target_feature(enable = "avx512f,avx2,fma")]
                    unsafe extern "C" fn avx512(src: *const f32, dst: *mut f32, n: usize) {
                        // `pick` hands this out only on a CPU with AVX-512F (which has FMA).
                        slice_fns!(@avx512 src, dst, n, $fma $(, $wide)?)
                    }
                    #[cfg(target_arch = "x86_64")]
                    {
                        pick(plain, avx2, avx512)
                    }
                    #[cfg(not(target_arch = "x86_64"))]
                    {
                        plain as SliceFn
                    }
                }),)*
                _ => None,
            }
        }

        /// The scalar function a [`slice_fn`] routine of `op` computes on this CPU (its FMA
        /// or its eager form, as [`slice_fn`] picks), for tests.
        pub fn slice_scalar(op: UnaryOp) -> Option<fn(f32) -> f32> {
            match op {
                $(UnaryOp::$op => Some(if has_fma_variant() { $fma } else { $plain }),)*
                _ => None,
            }
        }
    };
}

slice_fns!(
    Exp => vecmath::exp_f32, exp_fma, super::slice_avx512::exp;
    Tanh => vecmath::tanh_f32, tanh_fma;
    Sigmoid => vecmath::sigmoid_f32, sigmoid_fma, super::slice_avx512::sigmoid;
);

/// True when [`slice_fn`] hands out the FMA forms (AVX-512F, or AVX2 and FMA).
pub fn has_fma_variant() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            || (std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The variant of a slice routine this CPU runs best.
#[cfg(target_arch = "x86_64")]
fn pick(plain: SliceFn, avx2: SliceFn, avx512: SliceFn) -> SliceFn {
    if std::arch::is_x86_feature_detected!("avx512f") {
        avx512
    } else if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        avx2
    } else {
        plain
    }
}

/// `dst[i] = f(src[i])` for `i < n` over raw pointers, in place when `src == dst` (see
/// [`SliceFn`] for the contract).
#[inline(always)]
unsafe fn map_raw(src: *const f32, dst: *mut f32, n: usize, f: impl Fn(f32) -> f32) {
    if n == 0 {
        return;
    }
    if std::ptr::eq(src, dst) {
        // SAFETY: the caller guarantees `dst` is valid to read and write `n` f32 (it equals
        // `src`, valid to read), and nothing else accesses it during the call.
        let buf = unsafe { std::slice::from_raw_parts_mut(dst, n) };
        for x in buf {
            *x = f(*x);
        }
    } else {
        // SAFETY: the caller guarantees both ranges are valid and, as `src != dst`, disjoint,
        // so the shared and the mutable slice do not alias.
        let (s, d) = unsafe { (std::slice::from_raw_parts(src, n), std::slice::from_raw_parts_mut(dst, n)) };
        for (d, &s) in d.iter_mut().zip(s) {
            *d = f(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::ulp::max_ulp;
    use super::*;

    #[test]
    fn fma_forms_accuracy() {
        let n = 400_000;
        let (e, at) = max_ulp(exp_fma, f64::exp, -104.5, 89.5, n);
        assert!(e <= 2.0, "exp: {e} ulp at {at}");
        let (e, at) = max_ulp(exp_fma, f64::exp, -1.0, 1.0, n);
        assert!(e <= 2.0, "exp near 0: {e} ulp at {at}");
        let (e, at) = max_ulp(tanh_fma, f64::tanh, -12.0, 12.0, n);
        assert!(e <= 3.0, "tanh: {e} ulp at {at}");
        let (e, at) = max_ulp(tanh_fma, f64::tanh, -1e-3, 1e-3, n);
        assert!(e <= 3.0, "tanh near 0: {e} ulp at {at}");
        let (e, at) = max_ulp(sigmoid_fma, |x| 1.0 / (1.0 + (-x).exp()), -88.7, 90.0, n);
        assert!(e <= 3.0, "sigmoid: {e} ulp at {at}");
    }

    #[test]
    fn fma_forms_special_values_are_the_eager_ones() {
        let specials = [
            0.0f32,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            1e-40,
            -1e-40,
            f32::MAX,
            -f32::MAX,
            89.0,
            -89.0,
            -110.0,
            0.625,
            -0.625,
        ];
        for (op, f) in
            [(UnaryOp::Exp, exp_fma as fn(f32) -> f32), (UnaryOp::Tanh, tanh_fma), (UnaryOp::Sigmoid, sigmoid_fma)]
        {
            for x in specials {
                let (g, w) = (f(x), op.eval(x));
                let same = g.to_bits() == w.to_bits()
                    || (g.is_nan() && w.is_nan())
                    || (x.is_finite() && x.abs() > 1e-30 && (g - w).abs() <= 4.0 * f32::EPSILON * w.abs());
                assert!(same, "{op:?}({x:e}) = {g:e}, eager {w:e}");
            }
        }
    }

    #[test]
    fn slice_fns_match_their_scalar_form_in_place_and_out_of_place() {
        // A wide sweep, dense sweeps across both ends of exp's range (where the result
        // overflows, turns subnormal and rounds to 0), and special values.
        let src: Vec<f32> = (0..1037)
            .map(|i| (i as f32 - 500.0) / 37.0)
            .chain((0..20_000).map(|i| -105.0 + i as f32 * 1e-4))
            .chain((0..20_000).map(|i| 87.5 + i as f32 * 1e-4))
            .chain((0..20_000).map(|i| -89.5 + i as f32 * 1e-4))
            .chain([
                f32::NAN,
                -f32::NAN,
                f32::INFINITY,
                f32::NEG_INFINITY,
                -0.0,
                0.0,
                1e-40,
                -1e-40,
                f32::MAX,
                -f32::MAX,
            ])
            .collect();
        for op in [UnaryOp::Exp, UnaryOp::Tanh, UnaryOp::Sigmoid] {
            let g = slice_fn(op).expect("has a slice routine");
            let f = slice_scalar(op).expect("has a scalar form");
            let mut out = vec![0.0; src.len()];
            let mut inplace = src.clone();
            // SAFETY: both calls pass buffers of src.len() f32, disjoint or identical.
            unsafe {
                g(src.as_ptr(), out.as_mut_ptr(), src.len());
                g(inplace.as_ptr(), inplace.as_mut_ptr(), inplace.len());
            }
            let same = |d: f32, s: f32| d.to_bits() == f(s).to_bits() || (d.is_nan() && f(s).is_nan());
            assert!(src.iter().zip(&out).all(|(&s, &d)| same(d, s)), "{op:?}");
            assert!(src.iter().zip(&inplace).all(|(&s, &d)| same(d, s)), "{op:?} in place");
            // Every length of a partial last group, at an odd offset; the element past the end stays.
            for len in 0..40 {
                let mut out = vec![-7.0f32; len + 1];
                // SAFETY: reads len f32 of src from offset 3, writes len of out (len + 1 long).
                unsafe { g(src.as_ptr().add(3), out.as_mut_ptr(), len) };
                assert!(src[3..3 + len].iter().zip(&out).all(|(&s, &d)| same(d, s)), "{op:?} over {len}");
                assert_eq!(out[len], -7.0, "{op:?} over {len} wrote past the end");
            }
        }
        assert!(slice_fn(UnaryOp::Log).is_none());
    }
}
