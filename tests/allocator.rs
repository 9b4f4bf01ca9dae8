//! The caching allocator in a training-like loop: after warm-up, no step asks the system for
//! memory. (Its own test binary, so no other test allocates concurrently.)

use kiln::prelude::*;

fn step(x: &Tensor, w: &Tensor) -> Tensor {
    let y = (x * w + 1.0).relu();
    let z = y.exp().div(&(y.exp() + 1.0));
    z.sub(0.5).mul(2.0)
}

#[test]
fn steady_state_reuses_buffers() {
    let x = Tensor::ones([256, 1024]);
    let w = Tensor::full([1024], 0.5);
    for _ in 0..3 {
        drop(step(&x, &w));
    }
    let before = kiln::memory::memory_stats();
    for _ in 0..20 {
        drop(step(&x, &w));
    }
    let after = kiln::memory::memory_stats();
    assert_eq!(after.system_allocs, before.system_allocs, "steady state must not allocate from the system");
    assert!(after.cache_hits > before.cache_hits + 20 * 5, "buffers are reused: {before:?} -> {after:?}");
    assert_eq!(after.allocated, before.allocated, "no growth of live memory");

    kiln::memory::empty_cache();
    assert_eq!(kiln::memory::memory_stats().cached, 0);
    let peak = kiln::memory::max_memory_allocated();
    assert!(peak >= 256 * 1024 * 4 * 3, "peak {peak} counts the step's temporaries");
}
