//! CUDA tensors. Without a GPU: creating or moving a tensor to CUDA fails with "no CUDA device
//! available", naming the op and the caller's line. With one (`test_device!`): every eager
//! elementwise op, on contiguous, strided, broadcast and offset views, in every dtype, gives
//! the CPU's results; ops without a CUDA kernel fail with a clear error.

#[path = "common/device.rs"]
#[macro_use]
mod device;

use kiln::{DType, Device, Tensor};

fn no_gpu_or_skip() -> bool {
    if Device::cuda_is_available() {
        println!("a CUDA device is present, skipping the no-device checks");
        return false;
    }
    true
}

fn panic_message(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let e = std::panic::catch_unwind(f).expect_err("expected a panic");
    e.downcast_ref::<String>().cloned().unwrap_or_else(|| e.downcast_ref::<&str>().unwrap_or(&"").to_string())
}

#[test]
fn without_a_gpu_cuda_tensors_fail_naming_the_op_and_line() {
    if !no_gpu_or_skip() {
        return;
    }
    let x = Tensor::ones([2, 3]);
    let line = line!() + 1;
    let e = x.try_to(&Device::Cuda(0)).unwrap_err();
    assert_eq!(e.op, "to");
    let s = e.to_string();
    assert!(s.starts_with("to: no CUDA device available (cuda:0 requested;"), "{s}");
    assert!(s.ends_with(&format!("(at tests/cuda_tensors.rs:{line})")), "{s}");
    let m = panic_message(|| {
        Tensor::zeros_opts([2], DType::F32, Device::Cuda(0));
    });
    assert!(m.starts_with("zeros: no CUDA device available") && m.contains("tests/cuda_tensors.rs:"), "{m}");
    let m = panic_message(|| {
        Tensor::empty_opts([2], DType::I64, Device::Cuda(1));
    });
    assert!(m.starts_with("empty: no CUDA device available (cuda:1 requested;"), "{m}");
    let m = panic_message(|| {
        Tensor::new(&[1.0f32]).to(&Device::Cuda(0));
    });
    assert!(m.starts_with("to: no CUDA device available"), "{m}");
    let m = panic_message(|| {
        Tensor::randn_opts([2], DType::F32, Device::Cuda(0));
    });
    assert!(m.starts_with("randn: no CUDA device available"), "{m}");
    // The CPU is untouched: moving to the CPU is a no-op.
    assert!(x.to(&Device::Cpu).shares_storage_with(&x));
}

/// `kiln::cuda` (PyTorch's `torch.cuda`): the device queries agree with `Device`'s, and without
/// a GPU the per-device calls are errors naming the device, never panics.
#[test]
fn the_torch_cuda_functions_answer_without_a_gpu() {
    assert_eq!(kiln::cuda::is_available(), Device::cuda_is_available());
    assert_eq!(kiln::cuda::device_count(), Device::cuda_device_count());
    if !no_gpu_or_skip() {
        kiln::cuda::synchronize(0).unwrap();
        return assert!(kiln::cuda::max_memory_allocated(0).unwrap() >= kiln::cuda::memory_allocated(0).unwrap());
    }
    for e in [
        kiln::cuda::synchronize(0).unwrap_err(),
        kiln::cuda::memory_allocated(0).unwrap_err(),
        kiln::cuda::empty_cache(0).unwrap_err(),
    ] {
        assert!(e.to_string().contains("no CUDA device available (cuda:0 requested"), "{e}");
    }
}

// ------------------------------------------------------------------ with a GPU (test_device!)

/// A [3, 4] f32 tensor of varied values (negative, zero, fractional, large) on `d`.
fn sample(d: Device) -> Tensor {
    Tensor::from_vec(vec![-2.5f32, -1.0, -0.25, 0.0, 0.5, 1.0, 1.5, 2.0, 3.25, 7.0, -7.5, 10.0], [3, 4]).to(&d)
}

test_device!(moves_and_reads_back, |d| {
    let x = sample(d);
    let i = Tensor::new(&[[1i64, -2, 3], [4, 5, -6]]).to(&d);
    let b = Tensor::new(&[true, false, true]).to(&d);
    assert_eq!(x.device(), d);
    assert_eq!(i.to_vec2::<i64>(), vec![vec![1, -2, 3], vec![4, 5, -6]]);
    assert_eq!(b.to_vec::<bool>(), vec![true, false, true]);
    assert_eq!(x.i((1, 2)).item::<f32>(), 1.5);
    assert!(format!("{x}").contains("3.2500"));
    vec![
        x.clone(),
        i.t().contiguous(),
        b.deep_clone(),
        x.t().deep_clone(),
        Tensor::zeros_opts([2, 2], DType::BF16, d),
        Tensor::full_opts([3], 2.5, DType::F16, d),
    ]
});

test_device!(unary_float_ops_on_views, |d| {
    let x = sample(d);
    let t = x.t(); // strided
    let pos = x.abs() + 0.5;
    vec![
        t.exp(),
        t.neg(),
        x.log(),
        pos.log(),
        pos.log2(),
        pos.sqrt(),
        pos.rsqrt(),
        t.sin(),
        t.cos(),
        x.tanh(),
        x.sigmoid(),
        t.relu(),
        x.gelu(),
        x.gelu_tanh(),
        x.silu(),
        x.softplus(1.0, 20.0),
        x.erf(),
        x.floor(),
        x.ceil(),
        x.round(),
        x.trunc(),
        x.sign(),
        x.reciprocal(),
        x.square(),
        x.exp2(),
        x.log1p(),
        x.expm1(),
        x.narrow(1, 1, 2).tan(),
    ]
});

test_device!(unary_ops_in_every_float_dtype, |d| {
    let x = sample(d);
    [DType::F64, DType::F16, DType::BF16]
        .iter()
        .flat_map(|&dt| {
            let y = x.to_dtype(dt);
            vec![y.exp(), y.relu(), y.gelu(), y.sqrt(), y.round()]
        })
        .collect()
});

test_device!(integer_unary_ops_wrap, |d| {
    let i = Tensor::new(&[i64::MIN, -3, 0, 5, i64::MAX]).to(&d);
    let s = Tensor::new(&[i32::MIN, -3, 0, 5, i32::MAX]).to(&d);
    let u = Tensor::new(&[0u8, 1, 128, 255]).to(&d);
    vec![i.neg(), i.abs(), i.square(), i.sign(), s.neg(), s.square(), u.neg(), u.square(), s.exp(), u.sqrt()]
});

test_device!(binary_ops_broadcast_and_promote, |d| {
    let x = sample(d);
    let row = Tensor::new(&[1.0f32, -2.0, 0.5, 4.0]).to(&d);
    let col = Tensor::new(&[[2.0f64], [3.0], [-1.0]]).to(&d);
    vec![
        &x + &row,
        &x - &col,
        &x * &row,
        &x / &col,
        x.remainder(&row),
        x.abs().pow(&row),
        x.maximum(&row),
        x.minimum(&col),
        x.atan2(&row),
        &x * 2.5,
        &x + 1,
        x.t() * x.t(),
        x.pow(2.0),
        x.pow(0.5),
        x.narrow(0, 1, 2) + x.narrow(0, 0, 2),
        x.expand([2, 3, 4]) + &row,
    ]
});

test_device!(integer_binary_ops_wrap_and_divide_as_floats, |d| {
    let a = Tensor::new(&[i64::MAX, -7, 7, 3, -3, 0]).to(&d);
    let b = Tensor::new(&[2i64, 2, -2, 5, 4, 3]).to(&d);
    let s = Tensor::new(&[i32::MAX, -7, 100, 3]).to(&d);
    let u = Tensor::new(&[250u8, 3, 17, 0]).to(&d);
    vec![
        &a + &b,
        &a * &b,
        &a - &b,
        a.remainder(&b),
        a.pow(&b),
        &a / &b,
        a.maximum(&b),
        &s + 1,
        &s * 3,
        &u + 10,
        &u * 20,
        &u / 4,
        s.pow(2),
    ]
});

test_device!(comparisons_and_where, |d| {
    let x = sample(d);
    let row = Tensor::new(&[0.0f32, 1.0, f32::NAN, 2.0]).to(&d);
    let i = Tensor::new(&[[1i64, 2, 3, 4]]).to(&d);
    let m = x.gt(&row);
    vec![
        m.clone(),
        x.lt(0.5),
        x.le(&row),
        x.ge(1),
        x.eq(&row),
        x.ne(&row),
        i.lt(i.t()),
        Tensor::where_cond(&m, &x, &row),
        Tensor::where_cond(&x.lt(0.0), 0.0, &x),
        Tensor::where_cond(&i.gt(2), &i, -1),
    ]
});

test_device!(casts_between_every_dtype, |d| {
    let x = Tensor::new(&[-300.7f32, -2.5, -0.5, 0.0, 0.5, 1.5, 2.5, 255.9, 70000.0]).to(&d);
    let all = [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::I32, DType::U8, DType::Bool];
    all.iter().flat_map(|&a| all.iter().map(move |&b| (a, b))).map(|(a, b)| x.to_dtype(a).to_dtype(b)).collect()
});

test_device!(in_place_copy_and_fill_through_views, |d| {
    let x = Tensor::zeros_opts([3, 4], DType::F32, d);
    x.t().narrow(0, 1, 2).fill_(7.0);
    let y = Tensor::zeros_opts([4, 3], DType::F64, d);
    y.t().copy_(&sample(d)); // casting, strided destination
    let z = sample(d);
    z.add_(1.0);
    z.narrow(1, 0, 2).mul_(Tensor::new(&[2.0f32, 3.0]).to(&d));
    let h = Tensor::zeros_opts([2, 4], DType::F32, d);
    h.copy_(&Tensor::new(&[1.0f32, 2.0, 3.0, 4.0])); // from the CPU, broadcast
    let e = sample(d);
    e.t().narrow(0, 0, 2).exp_();
    let s = Tensor::zeros_opts([2, 2], DType::I32, d);
    s.copy_(&Tensor::new(&[5.0f64, 6.0, 7.0]).i(2)); // a 0-dim CPU view at offset 2
    let c = Tensor::zeros([3]);
    c.copy_(&sample(d).i((1, 1))); // a 0-dim CUDA tensor into a CPU one
    vec![x, y, z, h, e, s, c]
});

test_device!(random_numbers_are_the_cpus, |d| {
    kiln::manual_seed(7);
    let r = Tensor::rand_opts([5, 7], DType::F32, d);
    let n = Tensor::randn_opts([300], DType::F64, d);
    let i = Tensor::randint_opts(-5, 5, [4, 4], DType::I32, d);
    let v = Tensor::zeros_opts([4, 6], DType::F32, d);
    v.t().narrow(0, 1, 3).uniform_(-1.0, 1.0);
    vec![r, n, i, v]
});

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn mixed_devices_are_clear_errors() {
    let g = Tensor::ones([2, 3]).to(&Device::Cuda(0));
    let c = Tensor::ones([2, 3]);
    let e = g.try_add(&c).unwrap_err().to_string();
    assert!(e.starts_with("add: expected all tensors to be on the same device, but found cuda:0 and cpu"), "{e}");
    let e = c.try_mul(&g).unwrap_err().to_string();
    assert!(e.starts_with("mul: expected all tensors to be on the same device, but found cpu and cuda:0"), "{e}");
    // A 0-dim CPU tensor joins a CUDA op, as in PyTorch.
    assert_eq!((&g + &Tensor::scalar(2.0f32)).to_vec::<f32>(), vec![3.0; 6]);
    // Matrix products run on CUDA (cuBLAS); mixing devices there fails naming both.
    let e = g.try_matmul(&c.t()).unwrap_err().to_string();
    assert!(e.starts_with("matmul:") && e.contains("cuda:0") && e.contains("cpu"), "{e}");
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn device_draws_give_the_cpus_numbers_and_advance_the_generator_alike() {
    let cuda = Device::Cuda(0);
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        let draw = |d: Device| {
            kiln::manual_seed(21);
            let u = Tensor::rand_opts([1001], dtype, d);
            let n = Tensor::randn_opts([3, 333], dtype, d);
            let v = Tensor::zeros_opts([40, 30], dtype, d);
            v.t().narrow(0, 3, 20).uniform_(-2.0, 5.0);
            v.narrow(1, 0, 7).normal_(1.0, 3.0);
            (u, n, v, kiln::random::get_rng_state())
        };
        let (cu, cn, cv, cstate) = draw(Device::Cpu);
        let (gu, gn, gv, gstate) = draw(cuda);
        assert_eq!(gstate, cstate, "{dtype}: the generator advanced differently");
        // Uniform values bit for bit (compared as f64, exact for every dtype).
        assert_eq!(
            gu.to(&Device::Cpu).to_dtype(DType::F64).to_vec::<f64>(),
            cu.to_dtype(DType::F64).to_vec::<f64>(),
            "{dtype}: rand"
        );
        device::assert_same(&format!("device draws {dtype}"), &[cn, cv], &[gn, gv]);
    }
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn device_integer_and_bernoulli_draws_give_the_cpus_numbers_and_advance_the_generator_alike() {
    // Per dtype a range it holds (non-powers of two, the widest i64 range, a whole u8).
    let cases = [
        (DType::I64, i64::MIN, i64::MAX),
        (DType::I32, -7, 1_000_003),
        (DType::U8, 0, 256),
        (DType::Bool, 0, 2),
        (DType::F32, -100, 37),
        (DType::F64, -(1 << 53), 1 << 53),
        (DType::F16, -2048, 2049),
        (DType::BF16, 0, 3),
    ];
    for (dtype, low, high) in cases {
        let draw = |d: Device| {
            kiln::manual_seed(33);
            let mut g = kiln::random::Generator::with_seed(5);
            let r = Tensor::randint_opts(low, high, [1001], dtype, d);
            let v = Tensor::zeros_opts([40, 30], dtype, d);
            v.t().narrow(0, 3, 20).random_(low, high);
            let b = Tensor::zeros_opts([7, 13], dtype, d);
            b.bernoulli_(0.3);
            let never = Tensor::ones_opts([9], dtype, d);
            never.bernoulli_(0.0);
            let always = Tensor::zeros_opts([9], dtype, d);
            always.bernoulli_(1.0);
            let w = Tensor::zeros_opts([3, 5], dtype, d);
            w.t().bernoulli_with_(0.5, &mut g);
            w.narrow(1, 1, 3).random_with_(low, high, &mut g);
            let values: Vec<Vec<i64>> = [r, v, b, never, always, w]
                .iter()
                .map(|t| t.to(&Device::Cpu).to_dtype(DType::I64).to_vec::<i64>())
                .collect();
            (values, kiln::random::get_rng_state(), g.get_state())
        };
        let (cpu, cpu_state, cpu_g) = draw(Device::Cpu);
        let (gpu, gpu_state, gpu_g) = draw(Device::Cuda(0));
        assert_eq!((gpu_state, gpu_g), (cpu_state, cpu_g), "{dtype}: the generators advanced differently");
        assert_eq!(gpu, cpu, "{dtype}: randint, random_, bernoulli_ (p = 0.3, 0, 1), with a generator");
        assert!(cpu[3].iter().all(|&x| x == 0) && cpu[4].iter().all(|&x| x == 1), "{dtype}: p = 0 and p = 1");
        assert!(cpu[0].iter().all(|&x| x >= low && x < high), "{dtype}: randint left [{low}, {high})");
    }
}
