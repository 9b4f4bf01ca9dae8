//! kiln::compile: compiled results equal eager ones; caches, breaks and kernel counts.

use kiln::prelude::*;

fn close(a: &Tensor, b: &Tensor, tol: f32) {
    let (a, b) = (a.to_vec::<f32>(), b.to_vec::<f32>());
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()), "element {i}: {x} vs {y}");
    }
}

fn gelu_chain(x: &Tensor, a: &Tensor, b: &Tensor) -> Tensor {
    let z = x * a + b;
    let inner = (&z + &z * &z * &z * 0.044715) * 0.7978845608;
    &z * 0.5 * (inner.tanh() + 1.0)
}

#[test]
fn gelu_chain_is_one_kernel_and_matches_eager() {
    kiln::manual_seed(0);
    let (x, a, b) = (Tensor::randn(&[37, 129]), Tensor::randn(&[37, 129]), Tensor::randn(&[129]));
    let mut step = kiln::compile(|(x, a, b): (&Tensor, &Tensor, &Tensor)| gelu_chain(x, a, b));
    let y = step.call((&x, &a, &b));
    close(&y, &gelu_chain(&x, &a, &b), 1e-5);
    assert_eq!(step.stats().kernels_launched, 1, "{:?}", step.kernels());
    assert_eq!(step.stats().plan_cache_hits, 0);
    let y2 = step.call((&x, &a, &b));
    close(&y2, &y, 0.0);
    assert_eq!(step.stats().plan_cache_hits, 1);
}
