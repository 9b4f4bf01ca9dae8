//! `kiln::compile` on CUDA tensors.
//!
//! With a GPU: compiled equals eager on CUDA for an elementwise chain (one fused kernel), for
//! broadcasts and views, for an MLP's training steps (the loss trajectory within 1e-4
//! relative), and after a recompile on a new shape (the kernels come from the cache: sizes
//! are kernel arguments). Without one those print a skip line, and a step that moves a tensor
//! to CUDA fails with "no CUDA device available" naming the op.
//!
//! Always: the compiled MNIST training step is planned for `cuda:0` on the CPU
//! (`CompiledStep::call_planning_for`) and every CUDA kernel of that plan is compiled by
//! NVRTC to CUBIN for sm_80 and sm_90 (skipping with a printed line without NVRTC).

use kiln::nn::{functional as F, Module};
use kiln::optim::{Adadelta, AdadeltaConfig, Optimizer, Sgd, SgdConfig};
use kiln::prelude::*;

#[path = "common/seeded.rs"]
mod seeded;
use seeded::seeded;

#[path = "../examples/common/mnist.rs"]
#[allow(dead_code)]
mod mnist;

/// True when a CUDA device is available; else prints that `test` skips its CUDA run.
fn gpu(test: &str) -> bool {
    let ok = Device::cuda_is_available();
    if !ok {
        println!("no CUDA device, skipping {test}");
    }
    ok
}

/// Panics unless `a` and `b` have one shape and dtype and values within `rtol`·|b| + `atol`.
fn assert_close(what: &str, a: &Tensor, b: &Tensor, rtol: f64, atol: f64) {
    assert_eq!((a.shape(), a.dtype()), (b.shape(), b.dtype()), "{what}: shape or dtype");
    let got = a.to(&Device::Cpu).to_dtype(DType::F64).contiguous().to_vec::<f64>();
    let want = b.to(&Device::Cpu).to_dtype(DType::F64).contiguous().to_vec::<f64>();
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!((g.is_nan() && w.is_nan()) || (g - w).abs() <= atol + rtol * w.abs(), "{what}: element {k}: compiled {g}, eager {w}");
    }
}

/// The tanh GELU written with primitive ops, then a scale: one fused kernel when compiled.
fn gelu_chain(x: &Tensor) -> Tensor {
    let inner = (x + &(x * x * x * 0.044715)) * 0.797_884_560_802_865_4;
    (x * 0.5) * (inner.tanh() + 1.0) * 1.5
}

#[test]
fn elementwise_chain_is_one_cuda_kernel_equal_to_eager() {
    if !gpu("elementwise_chain_is_one_cuda_kernel_equal_to_eager") {
        return;
    }
    let cuda = Device::Cuda(0);
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        let x = Tensor::linspace(-4.0, 4.0, 3000).to_dtype(dtype).view(&[30, 100]).to(&cuda);
        let mut step = kiln::compile(|x: &Tensor| gelu_chain(x));
        let compiled = step.call(&x);
        assert_eq!(compiled.device(), cuda);
        let kernels = step.kernels();
        assert_eq!(kernels.len(), 1, "{dtype}: {kernels:?}");
        assert_eq!(kernels[0].backend, "cuda");
        assert!(kernels[0].source.contains("extern \"C\" __global__"), "{}", kernels[0].source);
        assert_eq!(step.stats().kernels_launched, 1);
        assert_eq!(step.stats().eager_ops, 0);
        let (rtol, atol) = match dtype {
            DType::F64 => (1e-12, 1e-12),
            DType::F32 => (1e-5, 1e-6),
            DType::F16 => (2e-3, 1e-3),
            _ => (1.6e-2, 1e-2),
        };
        assert_close(&format!("gelu chain {dtype}"), &compiled, &gelu_chain(&x), rtol, atol);
    }
}

#[test]
fn broadcasts_views_casts_and_where_equal_eager() {
    if !gpu("broadcasts_views_casts_and_where_equal_eager") {
        return;
    }
    let cuda = Device::Cuda(0);
    let f = |x: &Tensor, b: &Tensor, n: &Tensor| -> Vec<Tensor> {
        // A transposed view, a narrowed one, a broadcast row, a run-time scalar, a comparison
        // and `where`, a cast to int and back, an integer op.
        let t = x.t().narrow(0, 1, 5);
        let y = &t * b + 0.25;
        let pos = y.gt(0.0);
        let r = Tensor::where_(&pos, &y, &(&y * -0.5));
        let i = (&r * 10.0).to_dtype(DType::I32);
        let m = (&i + n) % 7;
        vec![r, m.to_dtype(DType::F32) * 2.0, pos]
    };
    let x = Tensor::linspace(-3.0, 3.0, 48).view(&[8, 6]).to(&cuda);
    let b = Tensor::linspace(-1.0, 2.0, 8).to(&cuda);
    let n = Tensor::arange(8).to_dtype(DType::I32).to(&cuda);
    let mut step = kiln::compile(|(x, b, n): (&Tensor, &Tensor, &Tensor)| f(x, b, n));
    let compiled = step.call((&x, &b, &n));
    let eager = f(&x, &b, &n);
    for (k, (c, e)) in compiled.iter().zip(&eager).enumerate() {
        assert_eq!(c.device(), cuda);
        assert_close(&format!("result {k}"), c, e, 1e-6, 1e-6);
    }
    assert!(step.kernels().iter().all(|k| k.backend == "cuda") && !step.kernels().is_empty());
}

/// A two-layer MLP on `device` (seeded), trained `steps` SGD-with-momentum steps on a fixed
/// batch with cross-entropy, compiled or eager: the losses.
fn mlp_losses(device: Device, compiled: bool, steps: usize) -> Vec<f32> {
    kiln::manual_seed(3);
    let mut l1 = nn::Linear::new(20, 32);
    let mut l2 = nn::Linear::new(32, 5);
    l1.to(&device);
    l2.to(&device);
    let mut params = l1.parameters();
    params.extend(l2.parameters());
    let mut opt = Sgd::new(params, SgdConfig { lr: 0.1, momentum: 0.9, ..Default::default() });
    let x = Tensor::randn(&[16, 20]).to(&device);
    let y = Tensor::randint(0, 5, &[16]).to(&device);
    let mut body = |(x, y): (&Tensor, &Tensor)| {
        opt.zero_grad();
        let h = F::relu(&l1.forward(x));
        let loss = F::cross_entropy(&l2.forward(&h), y);
        loss.backward();
        opt.step();
        loss
    };
    if compiled {
        let mut step = kiln::compile(&mut body);
        (0..steps).map(|_| step.call((&x, &y)).item::<f32>()).collect()
    } else {
        (0..steps).map(|_| body((&x, &y)).item::<f32>()).collect()
    }
}

#[test]
fn mlp_training_steps_equal_eager_on_cuda() {
    if !gpu("mlp_training_steps_equal_eager_on_cuda") {
        return;
    }
    let _g = seeded();
    let cuda = Device::Cuda(0);
    let eager = mlp_losses(cuda, false, 5);
    let compiled = mlp_losses(cuda, true, 5);
    // Stated tolerance: 1e-4 relative per step (fused f32 math vs the eager kernels, over 5
    // steps of momentum).
    for (c, e) in compiled.iter().zip(&eager) {
        assert!((c - e).abs() <= 1e-4 * e.abs(), "losses: compiled {compiled:?}, eager {eager:?}");
    }
    assert!(eager[4] < eager[0], "training lowers the loss: {eager:?}");
}

#[test]
fn a_new_shape_recompiles_from_cached_kernels() {
    if !gpu("a_new_shape_recompiles_from_cached_kernels") {
        return;
    }
    let cuda = Device::Cuda(0);
    let mut step = kiln::compile(|x: &Tensor| gelu_chain(x));
    let a = Tensor::linspace(-2.0, 2.0, 64).view(&[4, 16]).to(&cuda);
    let b = Tensor::linspace(-2.0, 2.0, 160).view(&[10, 16]).to(&cuda);
    assert_close("first shape", &step.call(&a), &gelu_chain(&a), 1e-5, 1e-6);
    assert_eq!(step.stats().plan_cache_hits, 0);
    let compiled = step.call(&b);
    assert_close("second shape", &compiled, &gelu_chain(&b), 1e-5, 1e-6);
    assert_eq!(step.stats().plan_cache_hits, 0, "a new shape is a new plan");
    assert!(step.kernels().iter().all(|k| k.cache_hit), "sizes are kernel arguments: {:?}", step.kernels());
}

#[test]
fn without_a_gpu_a_cuda_step_fails_naming_the_op() {
    if Device::cuda_is_available() {
        return println!("a CUDA device is present, skipping the no-device error test");
    }
    let x = Tensor::ones(&[4, 4]);
    let mut step = kiln::compile(|x: &Tensor| -> kiln::Result<Tensor> { Ok((x * 2.0).try_to(&Device::Cuda(0))?.exp()) });
    let e = step.call(&x).unwrap_err();
    let m = e.to_string();
    assert!(m.starts_with("to: no CUDA device available (cuda:0 requested"), "{m}");
    assert!(m.contains("cuda_compile.rs"), "the error names the caller's line: {m}");
    // The step still works on the CPU afterwards.
    let mut cpu = kiln::compile(|x: &Tensor| gelu_chain(x));
    assert_close("cpu", &cpu.call(&x), &gelu_chain(&x), 1e-5, 1e-6);
}

#[test]
fn planning_for_cuda_fuses_elementwise_work_and_runs_reductions_eagerly() {
    let _g = seeded();
    let x = Tensor::linspace(-2.0, 2.0, 48).view(&[6, 8]);
    let b = Tensor::linspace(0.0, 1.0, 8);
    let f = |(x, b): (&Tensor, &Tensor)| (&(x.t() * 2.0) + &b.view(&[8, 1])).relu().sum_dim(1, false).exp();
    let mut step = kiln::compile(f);
    let (out, planned) = step.call_planning_for((&x, &b), Device::Cuda(0));
    // The CPU run is the ordinary one (its reduction fused with its prologue).
    assert_close("planned run", &out, &f((&x, &b)), 1e-5, 1e-6);
    let cpu = step.kernels();
    assert!(cpu.iter().all(|k| k.backend == "cranelift") && cpu.len() == 2, "{cpu:?}");
    // For CUDA: the transposed read and the broadcast bias feed one fused kernel, the sum is
    // its eager reduction kernel (not fused on CUDA yet), the exp a second fused kernel.
    let ops: Vec<&str> = planned.iter().map(|k| k.ops.as_str()).collect();
    assert_eq!(ops, ["mul add relu", "exp"], "{planned:?}");
    assert!(planned.iter().all(|k| k.backend == "cuda"));
    let s = &planned[0].source;
    assert!(s.contains("unsigned long long size1") && s.contains("p0_st1") && s.contains("unsigned long long s0)"), "{s}");
    compile_each_to_cubin("planned elementwise", &planned);
}

/// Compiles each kernel to CUBIN for sm_80 and sm_90, panicking on any NVRTC error; prints a
/// skip line without NVRTC.
fn compile_each_to_cubin(what: &str, kernels: &[kiln::capture::KernelInfo]) {
    use kiln_runtime::cuda;
    if !cuda::nvrtc_available() {
        return println!("NVRTC not found, skipping ({})", cuda::nvrtc::nvrtc("test").unwrap_err());
    }
    for k in kernels {
        for arch in [80, 90] {
            let c = cuda::compile(&k.source, &k.name, arch).unwrap_or_else(|e| panic!("{} (sm_{arch}): {e}\n{}", k.name, k.source));
            assert_eq!(&c.cubin[..4], b"\x7fELF", "{}: not a CUBIN", k.name);
        }
    }
    println!("{} {what} kernels compiled to CUBIN", kernels.len() * 2);
}

#[test]
fn the_mnist_step_planned_for_cuda_compiles_with_nvrtc() {
    let _g = seeded();
    kiln::manual_seed(11);
    let net = mnist::Net::with_sizes(4, 8, 8 * 4 * 4, 16);
    let mut opt = Adadelta::new(net.parameters(), AdadeltaConfig { lr: 1.0, ..Default::default() });
    let x = Tensor::randn(&[8, 1, 12, 12]);
    let y = Tensor::randint(0, 10, &[8]);
    let mut step = kiln::compile(|(x, y): (&Tensor, &Tensor)| {
        opt.zero_grad();
        let loss = F::nll_loss(&net.forward(x), y);
        loss.backward();
        opt.step();
        loss
    });
    let (loss, kernels) = step.call_planning_for((&x, &y), Device::Cuda(0));
    assert!(loss.item::<f32>().is_finite());
    assert_eq!(step.stats().graph_breaks, 0);
    assert!(kernels.iter().all(|k| k.backend == "cuda"), "{kernels:?}");
    // Forward, backward and the Adadelta update each fuse elementwise work: the update alone
    // is one kernel per parameter shape at least.
    assert!(kernels.len() >= 8, "{} kernels: {:?}", kernels.len(), kernels.iter().map(|k| &k.ops).collect::<Vec<_>>());
    for k in &kernels {
        assert!(k.name.starts_with("kiln_fused_") && k.source.contains(&k.name), "{}", k.name);
    }
    // The CPU run under planning is the ordinary compiled step: a second call takes the plan
    // from the cache and plans the same kernels.
    let (_, again) = step.call_planning_for((&x, &y), Device::Cuda(0));
    assert_eq!(again.iter().map(|k| &k.name).collect::<Vec<_>>(), kernels.iter().map(|k| &k.name).collect::<Vec<_>>());
    assert!(step.kernels().iter().all(|k| k.backend == "cranelift"));
    let mut unique: Vec<kiln::capture::KernelInfo> = Vec::new();
    for k in kernels {
        if !unique.iter().any(|u| u.name == k.name) {
            unique.push(k);
        }
    }
    compile_each_to_cubin("MNIST step (planned for cuda:0)", &unique);
}

/// Dropout, then a normal draw added: two random draws fused with their consumers.
fn noisy_dropout(x: &Tensor) -> Tensor {
    let dropped = F::dropout(x, 0.3, true) * 2.0;
    &dropped + &(Tensor::randn_like(x) * 0.1)
}

#[test]
fn planning_for_cuda_generates_random_draws_inside_fused_kernels() {
    let _g = seeded();
    let x = Tensor::linspace(-2.0, 2.0, 48).view(&[6, 8]);
    let mut step = kiln::compile(|x: &Tensor| noisy_dropout(x));
    kiln::manual_seed(5);
    let (out, planned) = step.call_planning_for(&x, Device::Cuda(0));
    // The CPU run (the ordinary compiled step) draws what eager code draws.
    kiln::manual_seed(5);
    assert_close("planned run", &out, &noisy_dropout(&x), 1e-6, 1e-6);
    // For CUDA: both draws are generated in the one kernel that consumes them, from the
    // draws' seeds and offsets as run-time scalars (no draw is a graph input).
    assert_eq!(planned.len(), 1, "{:?}", planned.iter().map(|k| &k.ops).collect::<Vec<_>>());
    let (ops, s) = (&planned[0].ops, &planned[0].source);
    assert!(ops.contains("rand") && ops.contains("randn"), "{ops}");
    assert!(s.contains("kiln_uniform_at_f32(kiln_draw_word(") && s.contains("kiln_normal_at_f32(kiln_draw_word("), "{s}");
    compile_each_to_cubin("random draws (planned for cuda:0)", &planned);
}

#[test]
fn dropout_compiled_on_cuda_equals_eager() {
    let _g = seeded();
    if !gpu("dropout_compiled_on_cuda_equals_eager") {
        return;
    }
    let cuda = Device::Cuda(0);
    for dtype in [DType::F32, DType::F64] {
        let x = Tensor::linspace(-3.0, 3.0, 4001).to_dtype(dtype).to(&cuda);
        // Dropout alone: the same mask and values, exactly (uniform draws are the CPU's bit
        // for bit on both paths, and the fused kernel rounds each op as the eager kernels do).
        let mut drop = kiln::compile(|x: &Tensor| F::dropout(x, 0.3, true));
        kiln::manual_seed(9);
        let compiled = drop.call(&x);
        assert_eq!(drop.stats().eager_ops, 0, "{dtype}: the draw is fused");
        kiln::manual_seed(9);
        assert_close(&format!("{dtype} dropout"), &compiled, &F::dropout(&x, 0.3, true), 0.0, 0.0);
        // With a normal draw too, on three calls of one plan (fresh numbers each call).
        let mut step = kiln::compile(|x: &Tensor| noisy_dropout(x));
        for call in 0..3 {
            kiln::manual_seed(17 + call);
            let compiled = step.call(&x);
            assert!(step.kernels().iter().any(|k| k.ops.contains("rand")), "{dtype}: {:?}", step.kernels());
            kiln::manual_seed(17 + call);
            let eager = noisy_dropout(&x);
            assert_close(&format!("{dtype} call {call}"), &compiled, &eager, 1e-5, 1e-6);
            // Eager on the device equals eager on the CPU for the same seed.
            kiln::manual_seed(17 + call);
            assert_close(&format!("{dtype} call {call}, CPU"), &eager, &noisy_dropout(&x.to(&Device::Cpu)), 1e-5, 1e-6);
        }
    }
}
