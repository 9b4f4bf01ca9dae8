//! Backward holds no memory: a training-like loop keeps the live-tensor count and the allocated
//! bytes flat. Alone in its test binary, because both counters are process-wide.

use kiln::Tensor;

#[test]
fn training_loop_holds_no_memory() {
    let w = Tensor::randn([16, 8]).requires_grad_(true);
    let b = Tensor::zeros([8]).requires_grad_(true);
    let x = Tensor::randn([4, 16]);
    let step = || {
        let loss = (x.mm(&w) + &b).relu().square().mean();
        loss.backward();
        let _g = kiln::no_grad_guard();
        w.sub_(&(w.grad().unwrap() * 0.01));
        b.sub_(&(b.grad().unwrap() * 0.01));
        w.zero_grad();
        b.zero_grad();
    };
    for _ in 0..10 {
        step();
    }
    let (tensors, bytes) = (kiln::memory::live_tensors(), kiln::memory::memory_allocated());
    for _ in 0..1000 {
        step();
    }
    assert_eq!(kiln::memory::live_tensors(), tensors);
    assert_eq!(kiln::memory::memory_allocated(), bytes);
}
