//! Error measures that the SIMD math tests share: ulp distance against the f64 truth.

/// Distance in ulp of the f32 result between `got` and the f64 truth (the subnormal
/// spacing below the normal range).
pub(super) fn ulp_error(got: f32, want: f64) -> f64 {
    if want.is_nan() {
        return if got.is_nan() { 0.0 } else { f64::INFINITY };
    }
    let w = want as f32;
    if got == w {
        return 0.0;
    }
    if w.is_infinite() || got.is_infinite() || got.is_nan() {
        return f64::INFINITY;
    }
    let spacing = (f32::from_bits(w.abs().to_bits() + 1) - w.abs()).max(f32::from_bits(1)) as f64;
    (got as f64 - want).abs() / spacing
}

/// The worst ulp error of `f` against `truth` on `n` points evenly spread over `lo..hi`.
pub(super) fn max_ulp(f: impl Fn(f32) -> f32, truth: impl Fn(f64) -> f64, lo: f32, hi: f32, n: usize) -> (f64, f32) {
    let mut worst = (0.0, 0.0);
    for i in 0..=n {
        let x = lo + (hi - lo) * (i as f32 / n as f32);
        let e = ulp_error(f(x), truth(x as f64));
        if e > worst.0 {
            worst = (e, x);
        }
    }
    worst
}
