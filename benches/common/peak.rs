//! The machine's f32 multiply-add ceiling, measured: every thread runs a loop of independent
//! vector FMAs (rustc's AVX-512 or AVX2 code, whichever the CPU has and runs faster), so a
//! product's GFLOP/s can be stated as a fraction of what the cores can do at all.

use std::time::Instant;

/// Independent accumulators per thread: more than an FMA's latency times the FMA pipes (4 × 2
/// on current x86 cores), so the loop is bound by throughput, not by a dependency chain.
const CHAINS: usize = 16;

/// FMAs per chain in one timed run.
const ITERS: usize = 4_000_000;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::CHAINS;
    use std::arch::x86_64::*;

    /// `iters` rounds of `CHAINS` 16-lane FMAs; returns a value that depends on every one.
    ///
    /// # Safety
    /// The CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn fma512(iters: usize) -> f32 {
        let (a, b) = (_mm512_set1_ps(0.999_999), _mm512_set1_ps(1e-7));
        let mut acc = [_mm512_set1_ps(1.0); CHAINS];
        for _ in 0..iters {
            for r in acc.iter_mut() {
                *r = _mm512_fmadd_ps(*r, a, b);
            }
        }
        acc.iter().map(|&r| _mm512_reduce_add_ps(r)).sum()
    }

    /// `iters` rounds of `CHAINS` 8-lane FMAs; returns a value that depends on every one.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn fma256(iters: usize) -> f32 {
        let (a, b) = (_mm256_set1_ps(0.999_999), _mm256_set1_ps(1e-7));
        let mut acc = [_mm256_set1_ps(1.0); CHAINS];
        for _ in 0..iters {
            for r in acc.iter_mut() {
                *r = _mm256_fmadd_ps(*r, a, b);
            }
        }
        let mut lanes = [0.0f32; 8];
        acc.iter()
            .map(|&r| {
                // SAFETY: `lanes` holds the 8 f32 an __m256 stores.
                unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), r) };
                lanes.iter().sum::<f32>()
            })
            .sum()
    }
}

/// FLOP per second of `threads` threads each running `kernel(ITERS)` (`lanes` f32 lanes per
/// FMA, 2 FLOP each), the best of 5 runs.
fn rate(threads: usize, lanes: usize, kernel: fn(usize) -> f32) -> f64 {
    let flop = (threads * ITERS * CHAINS * lanes * 2) as f64;
    (0..5)
        .map(|_| {
            let start = Instant::now();
            std::thread::scope(|s| {
                for _ in 0..threads {
                    s.spawn(|| std::hint::black_box(kernel(std::hint::black_box(ITERS))));
                }
            });
            flop / start.elapsed().as_secs_f64()
        })
        .fold(0.0, f64::max)
}

/// The measured f32 FMA peak of `threads` threads in FLOP/s and the instructions that reached
/// it, or `None` on a CPU without AVX2+FMA.
pub fn peak_flops(threads: usize) -> Option<(f64, &'static str)> {
    #[cfg(target_arch = "x86_64")]
    {
        let mut best = None;
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            // SAFETY: AVX2 and FMA were detected just above.
            best = Some((rate(threads, 8, |n| unsafe { x86::fma256(n) }), "AVX2 FMA"));
        }
        if is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F was detected just above.
            let r = rate(threads, 16, |n| unsafe { x86::fma512(n) });
            if best.is_none_or(|(b, _)| r > b) {
                best = Some((r, "AVX-512 FMA"));
            }
        }
        best
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = threads;
        None
    }
}
