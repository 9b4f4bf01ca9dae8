//! Timing shared by the benches.

use std::hint::black_box;
use std::time::Instant;

/// Median seconds of `reps` runs of `f`, after two warm-up runs.
pub fn time(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    f();
    let mut t: Vec<f64> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(|a, b| a.partial_cmp(b).unwrap());
    t[reps / 2]
}

/// One gemm `m x k` by `k x n` (row-major, fresh operands) timed with gemm's threading: seconds.
#[allow(dead_code)]
pub fn gemm_secs(m: usize, k: usize, n: usize) -> f64 {
    let a = vec![0.5f32; m * k];
    let b = vec![0.25f32; k * n];
    let mut c = vec![0.0f32; m * n];
    let threads = kiln::get_num_threads();
    let par = if threads > 1 { gemm::Parallelism::Rayon(threads) } else { gemm::Parallelism::None };
    time(9, || {
        // SAFETY: a is m*k, b is k*n, c is m*n, all row-major and alive for the call; c is
        // not aliased.
        unsafe {
            gemm::gemm(
                m, n, k, c.as_mut_ptr(), 1, n as isize, false, a.as_ptr(), 1, k as isize, b.as_ptr(), 1, n as isize,
                0.0f32, 1.0f32, false, false, false, par,
            );
        }
        black_box(&c);
    })
}

/// The faster of a single-threaded and a pool-parallel copy of `elems` f32 values: the
/// memcpy baseline (seconds).
#[allow(dead_code)]
pub fn memcpy_secs(elems: usize) -> f64 {
    let src = vec![1.0f32; elems];
    let mut dst = vec![0.0f32; elems];
    let single = time(9, || {
        dst.copy_from_slice(black_box(&src));
        black_box(&dst);
    });
    let parallel = time(9, || {
        kiln_runtime::cpu::parallel::copy(&mut dst, black_box(&src));
        black_box(&dst);
    });
    single.min(parallel)
}
