//! `kiln::set_flush_denormal` (its own test binary: it changes process-wide float behaviour).

use kiln::Tensor;

#[test]
fn flush_denormal_zeroes_denormal_results_on_every_thread() {
    // 2^17 elements take the parallel path, so worker threads compute most of them.
    let x = Tensor::full([1 << 17], 1e-20f32);
    let tiny = |t: &Tensor| t.to_vec::<f32>().iter().filter(|v| **v != 0.0).count();
    assert_eq!(tiny(&(&x * 1e-20)), 1 << 17, "1e-40 is a denormal f32, kept by default");
    assert!(kiln::set_flush_denormal(true));
    assert_eq!(tiny(&(&x * 1e-20)), 0, "flushed to zero on the caller and on every worker");
    assert_eq!((&x * 1e-10).to_vec::<f32>()[0], 1e-30, "normal results are untouched");
    kiln::set_flush_denormal(false);
    assert_eq!(tiny(&(&x * 1e-20)), 1 << 17);
}
