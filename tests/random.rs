//! Random numbers: reproducibility under `manual_seed`, the Philox contract (values are a pure
//! function of seed, offset and index), distribution moments and ranges, every dtype, views,
//! and errors.

use kiln::random::{self, Generator, GeneratorState};
use kiln::{manual_seed, DType, Device, ErrorKind, Tensor};
use kiln_runtime::cpu::parallel::set_num_threads;
use kiln_runtime::cpu::philox::philox4x32_10;
use std::sync::{Mutex, MutexGuard};

/// Tests that seed or draw from the global generator hold this, so that a test running on
/// another thread cannot draw between a test's `manual_seed` and its draws.
fn global() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn mean_std(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

fn as_f64(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).to_vec::<f64>()
}

#[test]
fn same_seed_same_numbers() {
    let _g = global();
    manual_seed(0);
    let a = Tensor::rand([3, 5]);
    let b = Tensor::randn([7]);
    let c = Tensor::randint(-5, 5, [9]);
    manual_seed(0);
    assert_eq!(Tensor::rand([3, 5]).to_vec::<f32>(), a.to_vec::<f32>());
    assert_eq!(Tensor::randn([7]).to_vec::<f32>(), b.to_vec::<f32>());
    assert_eq!(Tensor::randint(-5, 5, [9]).to_vec::<i64>(), c.to_vec::<i64>());
    // The next draw continues the stream rather than repeating it.
    assert_ne!(Tensor::rand([3, 5]).to_vec::<f32>(), a.to_vec::<f32>());
    manual_seed(1);
    assert_ne!(Tensor::rand([3, 5]).to_vec::<f32>(), a.to_vec::<f32>());
    assert_eq!(random::initial_seed(), 1);
}

#[test]
fn offsets_follow_the_contract() {
    let _g = global();
    manual_seed(7);
    let s0 = random::get_rng_state();
    assert_eq!(s0, GeneratorState { seed: 7, offset: 0 });
    let _ = Tensor::rand([5]); // 5 elements: the offset moves to the next multiple of 4
    assert_eq!(random::get_rng_state().offset, 8);
    let _ = Tensor::randn([2, 2]);
    assert_eq!(random::get_rng_state().offset, 12);
    let _ = Tensor::rand([0, 3]);
    assert_eq!(random::get_rng_state().offset, 12);
    // Restoring a state replays the draw that followed it.
    let state = random::get_rng_state();
    let a = Tensor::rand([6]).to_vec::<f32>();
    random::set_rng_state(state);
    assert_eq!(Tensor::rand([6]).to_vec::<f32>(), a);
    // An explicit generator at the same (seed, offset) gives the same numbers.
    let mut g = Generator::with_seed(7);
    g.set_state(state);
    assert_eq!(Tensor::zeros([6]).uniform_with_(0.0, 1.0, &mut g).to_vec::<f32>(), a);
    assert_eq!(g.offset(), state.offset + 8);
}

#[test]
fn values_come_from_the_philox_block_function() {
    // Seed 0 at offset 0 is Philox(counter = 0, key = 0): Random123's first known answer,
    // 6627e8d5 e169c58d bc57ac4c 9b00dbd8. rand takes the top 24 bits of each word.
    let words = philox4x32_10([0; 4], [0; 2]);
    assert_eq!(words, [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]);
    let mut g = Generator::with_seed(0);
    let got = Tensor::zeros([4]).uniform_with_(0.0, 1.0, &mut g).to_vec::<f32>();
    let want: Vec<f32> = words.iter().map(|w| (w >> 8) as f32 / 16_777_216.0).collect();
    assert_eq!(got, want);

    // Element 5 of a draw at offset 8 with seed 2^32 + 3: group 8/4 + 5/4 = 3, lane 1, key (3, 1).
    let mut g = Generator::with_seed((1 << 32) + 3);
    g.draw(8);
    let got = Tensor::zeros([6]).uniform_with_(0.0, 1.0, &mut g).to_vec::<f32>();
    let w = philox4x32_10([3, 0, 0, 0], [3, 1])[1];
    assert_eq!(got[5], (w >> 8) as f32 / 16_777_216.0);

    // f64 and integers use 64 bits per element: plane 0 (high word) and plane 1 (counter word
    // 2 = 1, low word).
    let (p0, p1) = (philox4x32_10([0, 0, 0, 0], [9, 0]), philox4x32_10([0, 0, 1, 0], [9, 0]));
    let w64: Vec<u64> = (0..4).map(|l| ((p0[l] as u64) << 32) | p1[l] as u64).collect();
    let got = Tensor::zeros_opts([4], DType::F64, Device::Cpu)
        .uniform_with_(0.0, 1.0, &mut Generator::with_seed(9))
        .to_vec::<f64>();
    let want: Vec<f64> = w64.iter().map(|w| (w >> 11) as f64 / 9_007_199_254_740_992.0).collect();
    assert_eq!(got, want);
    let got = Tensor::zeros_opts([4], DType::I64, Device::Cpu)
        .random_with_(-10, 90, &mut Generator::with_seed(9))
        .to_vec::<i64>();
    let want: Vec<i64> = w64.iter().map(|&w| -10 + ((w as u128 * 100) >> 64) as i64).collect();
    assert_eq!(got, want);

    // Normals: Box-Muller on lanes (0, 1) and (2, 3), computed in f32.
    let got = Tensor::zeros([4]).normal_with_(0.0, 1.0, &mut Generator::with_seed(0)).to_vec::<f32>();
    let u: Vec<f32> = words.iter().map(|w| (w >> 8) as f32 / 16_777_216.0).collect();
    let mut want = Vec::new();
    for p in [0, 2] {
        let r = (-2.0f32 * (1.0 - u[p]).ln()).sqrt();
        let theta = std::f64::consts::TAU as f32 * u[p + 1];
        want.extend([r * theta.cos(), r * theta.sin()]);
    }
    assert_eq!(got, want);
}

#[test]
fn numbers_do_not_depend_on_the_thread_count() {
    let _g = global();
    let n = 300_001;
    let draw = |threads: usize| {
        set_num_threads(threads);
        let mut g = Generator::with_seed(11);
        let u = Tensor::zeros([n]).uniform_with_(-1.0, 1.0, &mut g).to_vec::<f32>();
        let z = Tensor::zeros_opts([n], DType::F64, Device::Cpu).normal_with_(0.0, 1.0, &mut g).to_vec::<f64>();
        let k = Tensor::zeros_opts([n], DType::I32, Device::Cpu).random_with_(0, 1000, &mut g).to_vec::<i32>();
        (u, z, k)
    };
    let one = draw(1);
    let three = draw(3);
    set_num_threads(std::thread::available_parallelism().map_or(1, |n| n.get()));
    assert!(one == three, "results differ between 1 and 3 threads");
}

#[test]
fn randn_moments_over_a_million_samples() {
    let _g = global();
    manual_seed(123);
    let z = as_f64(&Tensor::randn([1000, 1000]));
    let (mean, std) = mean_std(&z);
    // Standard errors: 0.001 for the mean, 0.0007 for the std.
    assert!(mean.abs() < 0.005, "mean {mean}");
    assert!((std - 1.0).abs() < 0.005, "std {std}");
    let tail = z.iter().filter(|x| x.abs() > 3.0).count() as f64 / z.len() as f64;
    assert!((tail - 0.0027).abs() < 0.0005, "P(|z| > 3) = {tail}");
    let z = as_f64(Tensor::zeros_opts([200_000], DType::F64, Device::Cpu).normal_(3.0, 0.5));
    let (mean, std) = mean_std(&z);
    assert!((mean - 3.0).abs() < 0.005 && (std - 0.5).abs() < 0.005, "mean {mean} std {std}");
}

#[test]
fn rand_is_uniform_on_the_unit_interval() {
    let _g = global();
    manual_seed(5);
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        let t = Tensor::rand_opts([200_000], dtype, Device::Cpu);
        assert_eq!(t.dtype(), dtype);
        let v = as_f64(&t);
        assert!(v.iter().all(|&x| (0.0..1.0).contains(&x)), "{dtype}: value outside [0, 1)");
        let (mean, std) = mean_std(&v);
        assert!((mean - 0.5).abs() < 0.01, "{dtype}: mean {mean}");
        assert!((std - (1.0f64 / 12.0).sqrt()).abs() < 0.01, "{dtype}: std {std}");
    }
    let v = as_f64(Tensor::zeros([100_000]).uniform_(-3.0, 5.0));
    assert!(v.iter().all(|&x| (-3.0..5.0).contains(&x)));
    assert!(v.iter().any(|&x| x < -2.99) && v.iter().any(|&x| x > 4.99));
}

#[test]
fn randint_covers_its_range_in_every_dtype() {
    let _g = global();
    manual_seed(9);
    let t = Tensor::randint(3, 10, [10_000]);
    assert_eq!(t.dtype(), DType::I64);
    let v = t.to_vec::<i64>();
    for k in 3..10 {
        let count = v.iter().filter(|&&x| x == k).count();
        assert!((1250..1610).contains(&count), "{k} drawn {count} times of 10000");
    }
    assert!(v.iter().all(|x| (3..10).contains(x)));
    for dtype in DType::ALL {
        let (low, high) = if dtype == DType::Bool { (0, 2) } else { (0, 5) };
        let t = Tensor::randint_opts(low, high, [1000], dtype, Device::Cpu);
        assert_eq!(t.dtype(), dtype);
        let v = as_f64(&t);
        for k in low..high {
            assert!(v.contains(&(k as f64)), "{dtype}: {k} never drawn");
        }
        assert!(v.iter().all(|&x| x == x.trunc() && (low as f64..high as f64).contains(&x)), "{dtype}");
    }
    // The full int64 range works (64-bit multiply-shift, no overflow).
    let v = Tensor::randint(i64::MIN, i64::MAX, [64]).to_vec::<i64>();
    assert!(v.iter().any(|&x| x < 0) && v.iter().any(|&x| x > 0));
}

#[test]
fn bernoulli_in_every_dtype() {
    let _g = global();
    manual_seed(2);
    for dtype in DType::ALL {
        let t = Tensor::zeros_opts([100_000], dtype, Device::Cpu);
        t.bernoulli_(0.3);
        let v = as_f64(&t);
        assert!(v.iter().all(|&x| x == 0.0 || x == 1.0));
        let p = v.iter().sum::<f64>() / v.len() as f64;
        assert!((p - 0.3).abs() < 0.01, "{dtype}: p {p}");
    }
    assert!(Tensor::ones([10]).bernoulli_(0.0).to_vec::<f32>().iter().all(|&x| x == 0.0));
}

#[test]
fn like_forms_keep_shape_dtype_and_device() {
    let _g = global();
    let x = Tensor::zeros_opts([2, 3], DType::F64, Device::Cpu);
    for t in [x.rand_like(), x.randn_like(), x.randint_like(0, 4), Tensor::randn_like(&x)] {
        assert_eq!((t.shape(), t.dtype(), t.device()), (&[2usize, 3][..], DType::F64, Device::Cpu));
    }
    let s = Tensor::rand(());
    assert_eq!(s.shape(), &[] as &[usize]);
    assert!((0.0..1.0).contains(&s.item::<f32>()));
    assert_eq!(Tensor::randn([0, 4]).shape(), &[0, 4]);
    assert_eq!(Tensor::rand([2, 0]).numel(), 0);
}

#[test]
fn in_place_draws_fill_views_in_logical_order() {
    // A transposed view gets the numbers a contiguous tensor of its shape would get, in
    // row-major order of the view.
    let t = Tensor::zeros([4, 6]).t();
    assert!(!t.is_contiguous());
    t.uniform_with_(0.0, 1.0, &mut Generator::with_seed(4));
    let c = Tensor::zeros([6, 4]);
    c.uniform_with_(0.0, 1.0, &mut Generator::with_seed(4));
    assert_eq!(t.contiguous().to_vec::<f32>(), c.to_vec::<f32>());

    // A narrowed view writes only its own elements.
    let base = Tensor::zeros_opts([3, 5], DType::I64, Device::Cpu);
    base.narrow(1, 1, 3).random_with_(1, 10, &mut Generator::with_seed(4));
    let rows = base.to_vec2::<i64>();
    for r in &rows {
        assert_eq!((r[0], r[4]), (0, 0));
        assert!(r[1..4].iter().all(|x| (1..10).contains(x)));
    }
    let v0 = base.version();
    base.bernoulli_with_(0.5, &mut Generator::new());
    assert!(base.version() > v0);

    // An expanded view cannot be written element by element.
    let e = Tensor::zeros([1, 3]).expand([4, 3]);
    let err = e.try_uniform_(0.0, 1.0).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Value);
    assert!(err.message.contains("more than one element of the written-to tensor"), "{err}");
}

#[test]
fn bad_arguments_are_errors() {
    let _g = global();
    let before = random::get_rng_state();
    let e = Tensor::try_rand_opts([2], DType::I64, Device::Cpu).unwrap_err();
    assert_eq!(e.kind, ErrorKind::DType);
    assert!(
        e.to_string().starts_with("rand: expected a floating-point dtype, but got int64 (at tests/random.rs:"),
        "{e}"
    );
    assert_eq!(Tensor::try_randn_opts([2], DType::Bool, Device::Cpu).unwrap_err().kind, ErrorKind::DType);
    if !Device::cuda_is_available() {
        // "rand: no CUDA device available (…)"; with a GPU the numbers are drawn on the host
        // and copied over (tests/cuda_tensors.rs).
        assert_eq!(Tensor::try_rand_opts([2], DType::F32, Device::Cuda(0)).unwrap_err().kind, ErrorKind::Device);
    }
    let e = Tensor::try_randint_opts(5, 5, [2], DType::I64, Device::Cpu).unwrap_err();
    assert_eq!(e.message, "expects 'from' to be less than 'to', but got from=5 >= to=5");
    let e = Tensor::try_randint_opts(0, 300, [2], DType::U8, Device::Cpu).unwrap_err();
    assert_eq!(e.message, "[from, to) = [0, 300) is out of bounds for uint8 (values must lie in [0, 255])");
    let x = Tensor::zeros([3]);
    assert_eq!(
        x.try_uniform_(2.0, 1.0).unwrap_err().message,
        "expects to return a [from, to) range, but found from=2 > to=1"
    );
    assert_eq!(x.try_normal_(0.0, -1.0).unwrap_err().message, "expects std >= 0.0, but found std=-1");
    assert_eq!(x.try_bernoulli_(1.5).unwrap_err().message, "expects p to be in [0, 1], but got p=1.5");
    let ints = Tensor::zeros_opts([3], DType::I32, Device::Cpu);
    assert_eq!(ints.try_normal_(0.0, 1.0).unwrap_err().kind, ErrorKind::DType);
    // Failed calls reserve nothing and leave the tensor untouched.
    assert_eq!(random::get_rng_state(), before);
    assert_eq!(x.version(), 0);
}

#[test]
#[should_panic(expected = "randint: expects 'from' to be less than 'to'")]
fn panicking_form_names_the_op() {
    Tensor::randint(3, 1, [2]);
}
