//! Composite elementwise ops (`src/ops/composite.rs`) inside `kiln::compile`: each one, iterated
//! from its table, is captured as its decomposition into primitive ops, fused into one
//! generated CPU kernel whose result equals eager's, differentiated in the same graph, and
//! planned for `cuda:0` as CUDA C that NVRTC compiles (skipping with a printed line without
//! NVRTC). Their values and gradients against PyTorch are in `elementwise_torch.rs` (the
//! `unary.txt` fixture), their finite-difference checks in `grad_elementwise.rs`. The ops with
//! a one-pass eager kernel (silu, gelu_tanh) are checked here against their
//! decompositions.

use kiln::nn::{functional as F, Module};
use kiln::ops::{composite_fast, COMPOSITE_UNARY};
use kiln::prelude::*;
use kiln::DType;

#[path = "common/cubin.rs"]
mod cubin;

/// Inputs that cross every kink of the composite ops (0, ±1, ±3, 6) and their flat regions.
fn input() -> Tensor {
    Tensor::linspace(-7.0, 7.0, 57).view([3, 19])
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

/// `a` and `b` agree elementwise within `abs + rel·|b|`, NaN with NaN and infinities exactly.
fn assert_agree(what: &str, a: &Tensor, b: &Tensor, abs: f64, rel: f64) {
    assert_eq!((a.shape(), a.dtype()), (b.shape(), b.dtype()), "{what}");
    for (i, (x, y)) in a.to_vec::<f64>().iter().zip(b.to_vec::<f64>()).enumerate() {
        let same = x == &y || (x.is_nan() && y.is_nan()) || (x - y).abs() <= abs + rel * y.abs();
        assert!(same, "{what}: element {i}: one-pass kernel {x}, decomposition {y}");
    }
}

/// Each one-pass eager kernel equals its op's decomposition, in f64 and f32 over the kinks,
/// far tails and special values; its backward rule equals autograd through the
/// decomposition in f64; and eager mode does run the kernel (the result's grad_fn is the
/// op's, not the decomposition's last primitive's).
#[test]
fn fast_kernels_equal_their_decompositions() {
    let finite: Vec<f64> = (0..=241).map(|i| -30.0 + i as f64 * 0.25).chain([-100.0, 100.0, 1e-8, -1e-8]).collect();
    let special = [f64::INFINITY, f64::NEG_INFINITY, f64::NAN, -0.0];
    let all: Vec<f64> = finite.iter().copied().chain(special).collect();
    assert_eq!(composite_fast().len(), 2, "silu, gelu_tanh");
    for (name, fast, decomposed) in composite_fast() {
        let x = Tensor::new(&all);
        assert_agree(&format!("{name} f64"), &fast(&x), &decomposed(&x), 1e-15, 1e-14);
        let x = x.to_dtype(DType::F32);
        assert_agree(&format!("{name} f32"), &fast(&x), &decomposed(&x), 1e-7, 1e-6);
        let strided = Tensor::new(&all).to_dtype(DType::F32).view([2, all.len() as i64 / 2]).t();
        assert_agree(&format!("{name} f32 strided"), &fast(&strided), &decomposed(&strided), 1e-7, 1e-6);

        let grad = |f: fn(&Tensor) -> Tensor| {
            let x = Tensor::new(&finite).requires_grad_(true);
            let y = f(&x);
            let name = y.grad_fn().expect("y requires grad").name().to_string();
            y.backward_with(&Tensor::linspace(-2.0, 3.0, finite.len()).to_dtype(DType::F64));
            (name, x.grad().expect("x requires grad"))
        };
        let (fast_fn, fast_grad) = grad(fast);
        let (decomposed_fn, decomposed_grad) = grad(decomposed);
        assert_agree(&format!("{name} gradient"), &fast_grad, &decomposed_grad, 1e-14, 1e-12);
        assert!(fast_fn.ends_with("Backward0") && fast_fn != decomposed_fn, "{name}: {fast_fn} vs {decomposed_fn}");
    }
}

/// Every decomposition's gradient (autograd through its primitives, as inside `kiln::compile`)
/// is finite far out in both tails, where PyTorch's is: no `0 · ∞` from an overflowing
/// intermediate (silu's `x / (e^-x + 1)` gave NaN below x = -88 in f32).
#[test]
fn decompositions_have_finite_gradients_in_the_tails() {
    for (dtype, tails) in [(DType::F32, [89.0, 100.0, 1e3, 1e4]), (DType::F64, [710.0, 800.0, 1e3, 1e4])] {
        let values: Vec<f64> = tails.iter().flat_map(|&t| [-t, t]).collect();
        for (name, f) in differentiable() {
            let x = Tensor::new(&values).to_dtype(dtype).requires_grad_(true);
            // Through the decomposition even where eager has a one-pass kernel.
            kiln::compile(|x: &Tensor| f(x).sum().backward()).call(&x);
            let grad = x.grad().expect("x requires grad").to_dtype(DType::F64).to_vec::<f64>();
            for (v, g) in values.iter().zip(&grad) {
                assert!(g.is_finite(), "{name} {dtype:?}: gradient at {v} is {g}");
            }
        }
    }
}

#[test]
fn modules_print_and_apply_like_pytorch() {
    // print(nn.Hardtanh(), nn.ELU(alpha=0.5), nn.SELU()) in PyTorch.
    assert_eq!(format!("{}", nn::Hardtanh::default()), "Hardtanh(min_val=-1.0, max_val=1.0)");
    assert_eq!(format!("{}", nn::ELU::new(0.5)), "ELU(alpha=0.5)");
    assert_eq!(format!("{}", nn::SELU::default()), "SELU()");
    assert_eq!(format!("{}", nn::Softplus::new(2.0, 10.0)), "Softplus(beta=2.0, threshold=10.0)");
    assert_eq!(format!("{}", nn::SiLU::default()), "SiLU()");
    let x = input();
    assert_close("nn::CELU", &nn::CELU::new(2.0).forward(&x), &F::celu(&x, 2.0));
    assert_close("F::relu6", &F::relu6(&x), &x.clamp(0.0, 6.0));
}
