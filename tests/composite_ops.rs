//! Composite elementwise ops (`src/ops/composite.rs`) inside `kiln::compile`: each one, iterated
//! from its table, is captured as its decomposition into primitive ops, fused into one
//! generated CPU kernel whose result equals eager's, differentiated in the same graph, and
//! planned for `cuda:0` as CUDA C that NVRTC compiles (skipping with a printed line without
//! NVRTC). Their values and gradients against PyTorch are in `elementwise_torch.rs` (the
//! `unary.txt` fixture), their finite-difference checks in `grad_elementwise.rs`.

use kiln::nn::{functional as F, Module};
use kiln::ops::COMPOSITE_UNARY;
use kiln::prelude::*;
use kiln::DType;

#[path = "common/cubin.rs"]
mod cubin;

/// Inputs that cross every kink of the composite ops (0, ±1, ±3, 6) and their flat regions.
fn input() -> Tensor {
    Tensor::linspace(-7.0, 7.0, 57).view(&[3, 19])
}

/// The composite ops with a float result (the predicates, `isnan`, …, return Bool).
fn differentiable() -> impl Iterator<Item = &'static (&'static str, fn(&Tensor) -> Tensor)> {
    COMPOSITE_UNARY.iter().filter(|(_, f)| f(&Tensor::new(&[0.5f32])).dtype() != DType::Bool)
}

/// Panics unless `a` and `b` are within `1e-6 + 1e-6·|b|` elementwise.
fn assert_close(what: &str, a: &Tensor, b: &Tensor) {
    assert_eq!(a.shape(), b.shape(), "{what}");
    for (i, (x, y)) in a.to_vec::<f64>().iter().zip(b.to_vec::<f64>()).enumerate() {
        assert!((x - y).abs() <= 1e-6 + 1e-6 * y.abs(), "{what}: element {i}: compiled {x}, eager {y}");
    }
}

#[test]
fn every_composite_compiles_to_one_kernel_equal_to_eager() {
    let x = input();
    for &(name, f) in COMPOSITE_UNARY {
        let mut step = kiln::compile(|x: &Tensor| f(x));
        let got = step.call(&x);
        assert_close(name, &got, &f(&x));
        let kernels = step.kernels();
        assert_eq!(
            kernels.len(),
            1,
            "{name}: one fused kernel, got {:?}",
            kernels.iter().map(|k| &k.ops).collect::<Vec<_>>()
        );
        assert_eq!((step.stats().graph_breaks, step.stats().eager_ops), (0, 0), "{name}: every primitive is generated");
    }
}

#[test]
fn every_composite_gradient_compiled_equals_eager() {
    let x = input();
    let grad_of = |f: fn(&Tensor) -> Tensor, x: &Tensor| {
        let x = x.detach().requires_grad_(true);
        f(&x).square().sum().backward();
        x.grad().expect("x requires grad")
    };
    for &(name, f) in differentiable() {
        let mut step = kiln::compile(|x: &Tensor| grad_of(f, x));
        assert_close(&format!("{name} backward"), &step.call(&x), &grad_of(f, &x));
        assert_eq!(step.stats().graph_breaks, 0, "{name}");
    }
}

#[test]
fn every_composite_plans_for_cuda_as_generated_kernels_nvrtc_compiles() {
    let x = input();
    for &(name, f) in differentiable() {
        let mut step = kiln::compile(|x: &Tensor| {
            let x = x.detach().requires_grad_(true);
            let y = f(&x);
            y.sum().backward();
            (y, x.grad().expect("x requires grad"))
        });
        let (_, planned) = step.call_planning_for(&x, Device::Cuda(0));
        assert!(!planned.is_empty() && planned.iter().all(|k| k.backend == "cuda"), "{name}: {planned:?}");
        assert_eq!(step.stats().planned_eager_ops, 0, "{name}: every node is a generated CUDA kernel");
        cubin::compile_each_to_cubin(name, &planned);
    }
}

#[test]
fn modules_print_and_apply_like_pytorch() {
    // print(nn.Hardtanh(), nn.ELU(alpha=0.5), nn.SELU()) in PyTorch.
    assert_eq!(format!("{}", nn::Hardtanh::default()), "Hardtanh(min_val=-1.0, max_val=1.0)");
    assert_eq!(format!("{}", nn::ELU::new(0.5)), "ELU(alpha=0.5)");
    assert_eq!(format!("{}", nn::SELU::default()), "SELU()");
    let x = input();
    assert_close("nn::CELU", &nn::CELU::new(2.0).forward(&x), &F::celu(&x, 2.0));
    assert_close("F::relu6", &F::relu6(&x), &x.clamp(0.0, 6.0));
}
