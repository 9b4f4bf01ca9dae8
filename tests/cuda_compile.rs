//! `kiln::compile` on CUDA tensors.
//!
//! With a GPU: compiled equals eager on CUDA for an elementwise chain (one fused kernel), for
//! broadcasts and views, for softmax, log-softmax, layer norm and cross-entropy in f32 and
//! f16 (fused reduction kernels: 1, 1, at most 2 and at most 6 launches), for an MLP's training steps (the
//! loss trajectory within 1e-4 relative), and after a recompile on a new shape (the kernels
//! come from the cache: sizes are kernel arguments), and for a fused chain over contiguous,
//! broadcast, misaligned and odd-length inputs (the vector variant and its fallback). Without
//! one those print a skip line, and a step that moves a tensor
//! to CUDA fails with "no CUDA device available" naming the op.
//!
//! Always: softmax, log-softmax, layer norm, cross-entropy and the compiled MNIST training
//! step are planned for `cuda:0` on the CPU (`CompiledStep::call_planning_for`), their CUDA
//! launches counted, and every CUDA kernel of those plans is compiled by NVRTC to CUBIN for
//! sm_80 and sm_90 (skipping with a printed line without NVRTC).

use kiln::nn::{functional as F, Module};
use kiln::optim::{Adadelta, AdadeltaConfig, Optimizer, SGDConfig, SGD};
use kiln::prelude::*;

#[path = "common/seeded.rs"]
mod seeded;
use seeded::seeded;

#[path = "common/cubin.rs"]
mod cubin;
use cubin::compile_each_to_cubin;

#[path = "../examples/common/mnist.rs"]
#[allow(dead_code)]
mod mnist;

/// Panics unless `a` and `b` have one shape and dtype and values within `rtol`·|b| + `atol`.
fn assert_close(what: &str, a: &Tensor, b: &Tensor, rtol: f64, atol: f64) {
    assert_eq!((a.shape(), a.dtype()), (b.shape(), b.dtype()), "{what}: shape or dtype");
    let got = a.to(&Device::Cpu).to_dtype(DType::F64).contiguous().to_vec::<f64>();
    let want = b.to(&Device::Cpu).to_dtype(DType::F64).contiguous().to_vec::<f64>();
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g.is_nan() && w.is_nan()) || (g - w).abs() <= atol + rtol * w.abs(),
            "{what}: element {k}: compiled {g}, eager {w}"
        );
    }
}

/// The tanh GELU written with primitive ops, then a scale: one fused kernel when compiled.
fn gelu_chain(x: &Tensor) -> Tensor {
    let inner = (x + &(x * x * x * 0.044715)) * 0.797_884_560_802_865_4;
    (x * 0.5) * (inner.tanh() + 1.0) * 1.5
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn elementwise_chain_is_one_cuda_kernel_equal_to_eager() {
    let cuda = Device::Cuda(0);
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        let x = Tensor::linspace(-4.0, 4.0, 3000).to_dtype(dtype).view([30, 100]).to(&cuda);
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
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn fused_chains_on_aligned_misaligned_and_odd_length_inputs_equal_eager() {
    let cuda = Device::Cuda(0);
    let f = |x: &Tensor, y: &Tensor, s: &Tensor| &(&gelu_chain(x) * y) + s;
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let tol = if dtype == DType::F32 { (1e-5, 1e-6) } else { (2e-2, 1e-2) };
        // Whole vectors, a tail, fewer elements than one vector.
        for n in [4096, 4099, 7] {
            let base = Tensor::linspace(-3.0, 3.0, n + 3).to_dtype(dtype).to(&cuda);
            let other = Tensor::linspace(2.0, -1.0, n + 3).to_dtype(dtype).to(&cuda);
            let s = Tensor::full([1], 0.5).to_dtype(dtype).to(&cuda); // broadcast: one value
                                                                      // Views at offset 0 (aligned: the vector variant) and off the 16-byte boundary
                                                                      // (the strided kernel), alone and mixed.
            for (ox, oy) in [(0, 0), (1, 1), (0, 3), (2, 0)] {
                let (x, y) = (base.narrow(0, ox, n), other.narrow(0, oy, n));
                let mut step = kiln::compile(|(x, y, s): (&Tensor, &Tensor, &Tensor)| f(x, y, s));
                let compiled = step.call((&x, &y, &s));
                assert_eq!(step.stats().kernels_launched, 1, "{dtype} n={n} offsets {ox}, {oy}");
                let (rtol, atol) = tol;
                assert_close(&format!("{dtype} n={n} offsets {ox}, {oy}"), &compiled, &f(&x, &y, &s), rtol, atol);
            }
            if n % 64 == 0 {
                // Rank 2, contiguous: still one flat run.
                let (x, y) = (base.narrow(0, 0, n).view([64, -1]), other.narrow(0, 0, n).view([64, -1]));
                let mut step = kiln::compile(|(x, y, s): (&Tensor, &Tensor, &Tensor)| f(x, y, s));
                assert_close(
                    &format!("{dtype} [64, {}]", n / 64),
                    &step.call((&x, &y, &s)),
                    &f(&x, &y, &s),
                    tol.0,
                    tol.1,
                );
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn broadcasts_views_casts_and_where_equal_eager() {
    let cuda = Device::Cuda(0);
    let f = |x: &Tensor, b: &Tensor, n: &Tensor| -> Vec<Tensor> {
        // A transposed view, a narrowed one, a broadcast row, a run-time scalar, a comparison
        // and `where`, a cast to int and back, an integer op.
        let t = x.t().narrow(0, 1, 5);
        let y = &t * b + 0.25;
        let pos = y.gt(0.0);
        let r = Tensor::where_cond(&pos, &y, &(&y * -0.5));
        let i = (&r * 10.0).to_dtype(DType::I32);
        let m = (&i + n) % 7;
        vec![r, m.to_dtype(DType::F32) * 2.0, pos]
    };
    let x = Tensor::linspace(-3.0, 3.0, 48).view([8, 6]).to(&cuda);
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
    let mut opt = SGD::new(params, SGDConfig { lr: 0.1, momentum: 0.9, ..Default::default() });
    let x = Tensor::randn([16, 20]).to(&device);
    let y = Tensor::randint(0, 5, [16]).to(&device);
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
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn mlp_training_steps_equal_eager_on_cuda() {
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

/// Runs `f` on `args` eagerly and compiled (on CUDA tensors): the results agree within
/// `rtol`/`atol` and the compiled call launches at most `max_launches` kernels (generated
/// plus eager).
fn compiled_equals_eager<A: Copy>(
    what: &str,
    f: impl Fn(A) -> Tensor,
    args: A,
    max_launches: usize,
    (rtol, atol): (f64, f64),
) {
    let eager = f(args);
    let mut step = kiln::compile(&f);
    let compiled = step.call(args);
    assert_eq!(compiled.device(), Device::Cuda(0), "{what}");
    assert_close(what, &compiled, &eager, rtol, atol);
    let s = step.stats();
    assert!(
        s.kernels_launched >= 1 && s.kernels_launched + s.eager_ops <= max_launches,
        "{what}: {s:?}, kernels {:?}",
        step.kernels()
    );
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn softmax_layer_norm_and_cross_entropy_equal_eager_on_cuda() {
    let _g = seeded();
    kiln::manual_seed(7);
    let cuda = Device::Cuda(0);
    // Stated tolerance: f32 within 1e-5 relative (the compiled sums accumulate in f64, the
    // eager softmax's in f32); f16 within one f16 ulp or so (both compute in f32 and round
    // once; sums add in another order).
    for dtype in [DType::F32, DType::F16] {
        let tol = if dtype == DType::F32 { (1e-5, 1e-6) } else { (2e-3, 2e-3) };
        // Long rows (a block per row) and short ones (a warp per row, as MNIST's 10 classes).
        for (rows, cols) in [(37usize, 1000usize), (64, 10)] {
            let what = |op: &str| format!("{op} {dtype} [{rows}, {cols}]");
            let x = (Tensor::randn([rows, cols]) * 3.0).to_dtype(dtype).to(&cuda);
            let w = Tensor::randn([cols]).to_dtype(dtype).to(&cuda);
            let b = Tensor::randn([cols]).to_dtype(dtype).to(&cuda);
            let y = Tensor::randint(0, cols as i64, [rows]).to(&cuda);
            compiled_equals_eager(&what("softmax"), |x: &Tensor| x.softmax(1), &x, 1, tol);
            compiled_equals_eager(&what("log_softmax"), |x: &Tensor| x.log_softmax(1), &x, 1, tol);
            let ln = |(x, w, b): (&Tensor, &Tensor, &Tensor)| F::layer_norm(x, &[cols], Some(w), Some(b), 1e-5);
            compiled_equals_eager(&what("layer_norm"), ln, (&x, &w, &b), 2, tol);
            // One kernel over the logits and the mean (2 launches planned for f32; f16 adds
            // casts around the log-softmax).
            compiled_equals_eager(
                &what("cross_entropy"),
                |(x, y): (&Tensor, &Tensor)| F::cross_entropy(x, y),
                (&x, &y),
                6,
                tol,
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn a_new_shape_recompiles_from_cached_kernels() {
    let cuda = Device::Cuda(0);
    let mut step = kiln::compile(|x: &Tensor| gelu_chain(x));
    let a = Tensor::linspace(-2.0, 2.0, 64).view([4, 16]).to(&cuda);
    let b = Tensor::linspace(-2.0, 2.0, 160).view([10, 16]).to(&cuda);
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
    let x = Tensor::ones([4, 4]);
    let mut step =
        kiln::compile(|x: &Tensor| -> kiln::Result<Tensor> { Ok((x * 2.0).try_to(&Device::Cuda(0))?.exp()) });
    let e = step.call(&x).unwrap_err();
    let m = e.to_string();
    assert!(m.starts_with("to: no CUDA device available (cuda:0 requested"), "{m}");
    assert!(m.contains("cuda_compile.rs"), "the error names the caller's line: {m}");
    // The step still works on the CPU afterwards.
    let mut cpu = kiln::compile(|x: &Tensor| gelu_chain(x));
    assert_close("cpu", &cpu.call(&x), &gelu_chain(&x), 1e-5, 1e-6);
}

#[test]
fn planning_for_cuda_fuses_elementwise_work_and_reductions() {
    let _g = seeded();
    let x = Tensor::linspace(-2.0, 2.0, 48).view([6, 8]);
    let b = Tensor::linspace(0.0, 1.0, 8);
    let f = |(x, b): (&Tensor, &Tensor)| (&(x.t() * 2.0) + &b.view([8, 1])).relu().sum_dim(1).exp();
    let mut step = kiln::compile(f);
    let (out, planned) = step.call_planning_for((&x, &b), Device::Cuda(0));
    // The CPU run is the ordinary one (its reduction fused with its prologue).
    assert_close("planned run", &out, &f((&x, &b)), 1e-5, 1e-6);
    let cpu = step.kernels();
    assert!(cpu.iter().all(|k| k.backend == "cranelift") && cpu.len() == 2, "{cpu:?}");
    // For CUDA the same passes make the same groups: the transposed read and the broadcast
    // bias feed the sum's prologue in one reduction kernel, the exp is a second kernel.
    let ops: Vec<&str> = planned.iter().map(|k| k.ops.as_str()).collect();
    assert_eq!(ops, cpu.iter().map(|k| k.ops.as_str()).collect::<Vec<_>>(), "{planned:?}");
    assert!(planned.iter().all(|k| k.backend == "cuda"));
    assert_eq!(step.stats().planned_eager_ops, 0);
    let s = &planned[0].source;
    assert!(planned[0].name.starts_with("kiln_fused_red_"), "{}", planned[0].name);
    assert!(s.contains("unsigned long long ks0") && s.contains("p0_r0") && s.contains("kiln_group_reduce"), "{s}");
    assert!(
        planned[1].name.starts_with("kiln_fused_") && planned[1].source.contains("unsigned long long size0"),
        "{}",
        planned[1].source
    );
    compile_each_to_cubin("planned elementwise and reduction", &planned);
}

/// Plans `f` on `inputs` for `cuda:0`: the planned kernels (every one compiled to CUBIN) and
/// the launches a CUDA call would make (generated kernels plus nodes run eagerly).
fn planned_launches<A: Copy, R>(
    what: &str,
    f: impl FnMut(A) -> R,
    inputs: A,
) -> (Vec<kiln::capture::KernelInfo>, usize) {
    let mut step = kiln::compile(f);
    let (_, planned) = step.call_planning_for(inputs, Device::Cuda(0));
    assert!(planned.iter().all(|k| k.backend == "cuda"), "{what}: {planned:?}");
    compile_each_to_cubin(what, &planned);
    let launches = planned.len() + step.stats().planned_eager_ops;
    (planned, launches)
}

#[test]
fn softmax_layer_norm_and_cross_entropy_plan_as_few_cuda_kernels_as_on_the_cpu() {
    let _g = seeded();
    kiln::manual_seed(5);
    let x = Tensor::randn([6, 40]);
    let w = Tensor::randn([40]);
    let b = Tensor::randn([40]);
    let y = Tensor::randint(0, 40, [6]);
    let names =
        |k: &[kiln::capture::KernelInfo]| k.iter().map(|k| format!("{} ({})", k.name, k.ops)).collect::<Vec<_>>();
    let (k, n) = planned_launches("softmax", |x: &Tensor| x.softmax(1), &x);
    assert_eq!(n, 1, "{:?}", names(&k));
    assert!(k[0].name.starts_with("kiln_fused_red_"), "{:?}", names(&k));
    let (k, n) = planned_launches("log_softmax", |x: &Tensor| x.log_softmax(-1), &x);
    assert_eq!(n, 1, "{:?}", names(&k));
    let (k, n) = planned_launches(
        "layer norm",
        |(x, w, b): (&Tensor, &Tensor, &Tensor)| F::layer_norm(x, &[40], Some(w), Some(b), 1e-5),
        (&x, &w, &b),
    );
    assert_eq!(n, 1, "{:?}", names(&k));
    // Cross-entropy with no target ignored: one kernel over the logits (max, Σ exp, the pick
    // as a third stage) and the mean, as on the CPU.
    let ce = |(x, y): (&Tensor, &Tensor)| F::cross_entropy(x, y);
    let (k, n) = planned_launches("cross-entropy", ce, (&x, &y));
    assert_eq!(k.iter().filter(|k| k.name.starts_with("kiln_fused_red_")).count(), 2, "{:?}", names(&k));
    assert!(k.iter().filter(|k| k.ops.contains("exp")).count() == 1 && n == 2, "{n} launches: {:?}", names(&k));
    let mut cpu = kiln::compile(ce);
    cpu.call((&x, &y));
    assert_eq!(n, cpu.kernels().len() + cpu.stats().eager_ops, "the CUDA plan is the CPU's: {:?}", names(&k));
}

#[test]
fn the_mnist_step_planned_for_cuda_compiles_with_nvrtc() {
    let _g = seeded();
    kiln::manual_seed(11);
    let net = mnist::Net::with_sizes(4, 8, 8 * 4 * 4, 16);
    let mut opt = Adadelta::new(net.parameters(), AdadeltaConfig { lr: 1.0, ..Default::default() });
    let x = Tensor::randn([8, 1, 12, 12]);
    let y = Tensor::randint(0, 10, [8]);
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
    // Reductions fuse on CUDA as on the CPU: the log-softmax, the NLL pick and its mean, the
    // gradient's row sums are generated kernels. What a CUDA call launches: 19 generated
    // kernels (one per parameter's update, the cross-entropy kernel, the loss's mean, the
    // forward and backward elementwise groups) + 18 eager nodes (6 matmuls, 5 conv and 3
    // pooling kernels, 4 bias-gradient sums over the batch) = 37. Before reductions fused on
    // CUDA: 12 generated kernels + 24 eager nodes = 36, but those eager nodes included
    // log_softmax, the gather, the scatter and 7 sums.
    let eager = step.stats().planned_eager_ops;
    println!(
        "MNIST step planned for cuda:0: {} generated kernels + {eager} eager nodes = {} launches",
        kernels.len(),
        kernels.len() + eager
    );
    assert!(
        kernels.iter().filter(|k| k.name.starts_with("kiln_fused_red_")).count() >= 2,
        "{:?}",
        kernels.iter().map(|k| &k.ops).collect::<Vec<_>>()
    );
    assert_eq!((kernels.len(), eager), (19, 18));
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
    let x = Tensor::linspace(-2.0, 2.0, 48).view([6, 8]);
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
    assert!(
        s.contains("kiln_uniform_at_f32(kiln_draw_word(") && s.contains("kiln_normal_at_f32(kiln_draw_word("),
        "{s}"
    );
    compile_each_to_cubin("random draws (planned for cuda:0)", &planned);
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn dropout_compiled_on_cuda_equals_eager() {
    let _g = seeded();
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
