//! Random numbers inside `kiln::compile`: `rand`/`randn` (and dropout's mask) are generated in
//! the fused kernels from the draw's seed and offset, so compiled numbers equal the eager ones
//! bit for bit for the same generator state, a cached plan draws fresh numbers on every call,
//! the generator advances exactly as in eager code, and dropout is one kernel.

use kiln::prelude::*;
use kiln::random::{get_rng_state, set_rng_state};

#[path = "common/seeded.rs"]
mod seeded;
use seeded::seeded;

/// The elements' bits (f32 or f64 tensors), so NaN-free exact comparisons read clearly.
fn bits(t: &Tensor) -> Vec<u64> {
    match t.dtype() {
        DType::F32 => t.to_vec::<f32>().iter().map(|x| x.to_bits() as u64).collect(),
        DType::F64 => t.to_vec::<f64>().iter().map(|x| x.to_bits()).collect(),
        d => panic!("bits of {d}"),
    }
}

fn assert_same(compiled: &Tensor, eager: &Tensor, what: &str) {
    assert_eq!(compiled.shape(), eager.shape(), "{what}: shapes");
    assert_eq!(compiled.dtype(), eager.dtype(), "{what}: dtypes");
    let (c, e) = (bits(compiled), bits(eager));
    if let Some(i) = c.iter().zip(&e).position(|(a, b)| a != b) {
        panic!("{what}: element {i} differs ({:#x} compiled, {:#x} eager)", c[i], e[i]);
    }
}

#[test]
fn dropout_equals_eager_bit_for_bit() {
    let _seeded = seeded();
    for dtype in [DType::F32, DType::F64] {
        kiln::manual_seed(1);
        let x = Tensor::randn_opts([64, 33], dtype, Device::Cpu);
        kiln::manual_seed(7);
        let eager = F::dropout(&x, 0.3, true);
        kiln::manual_seed(7);
        let mut step = kiln::compile(|x: &Tensor| F::dropout(x, 0.3, true));
        let compiled = step.call(&x);
        assert_same(&compiled, &eager, &format!("dropout {dtype}"));
        assert_eq!(step.stats().eager_ops, 0, "{dtype}: nothing runs eagerly");
    }
}

#[test]
fn every_call_draws_fresh_numbers_from_a_cached_plan() {
    let _seeded = seeded();
    kiln::manual_seed(2);
    let x = Tensor::randn([50, 21]);
    kiln::manual_seed(11);
    let mut step = kiln::compile(|x: &Tensor| F::dropout(x, 0.5, true));
    let before_first = get_rng_state();
    let first = step.call(&x);
    let before_second = get_rng_state();
    let second = step.call(&x);
    assert_eq!(step.stats().plan_cache_hits, 1, "the second call reuses the plan");
    assert_ne!(bits(&first), bits(&second), "each call draws a new mask");
    set_rng_state(before_first);
    assert_same(&first, &F::dropout(&x, 0.5, true), "first call");
    set_rng_state(before_second);
    assert_same(&second, &F::dropout(&x, 0.5, true), "second call");
}

#[test]
fn the_generator_advances_as_in_eager_code() {
    let _seeded = seeded();
    let x = Tensor::ones([7, 3]);
    let body =
        |x: &Tensor| (F::dropout(x, 0.25, true), Tensor::randn([5]), Tensor::rand_opts([3], DType::F64, Device::Cpu));
    kiln::manual_seed(3);
    let (ey, en, eu) = body(&x);
    let after_eager = get_rng_state();
    let next_eager = Tensor::rand([10]);
    kiln::manual_seed(3);
    let mut step = kiln::compile(body);
    let (cy, cn, cu) = step.call(&x);
    assert_eq!(get_rng_state(), after_eager, "the offset after the compiled call");
    assert_same(&Tensor::rand([10]), &next_eager, "the next eager draw");
    assert_same(&cy, &ey, "dropout");
    assert_same(&cn, &en, "randn");
    assert_same(&cu, &eu, "rand f64");
}

#[test]
fn randn_and_odd_sizes_equal_eager() {
    let _seeded = seeded();
    let shapes: [&[usize]; 4] = [&[1001], &[3, 37], &[300_001], &[2, 1, 5]];
    for shape in shapes {
        for dtype in [DType::F32, DType::F64] {
            let make = |dist: &str| {
                if dist == "rand" {
                    Tensor::rand_opts(shape, dtype, Device::Cpu)
                } else {
                    Tensor::randn_opts(shape, dtype, Device::Cpu)
                }
            };
            for dist in ["rand", "randn"] {
                kiln::manual_seed(5);
                let _skew = Tensor::rand([3]); // a draw that isn't at offset 0
                let eager = make(dist);
                kiln::manual_seed(5);
                let mut step = kiln::compile(|()| {
                    let _skew = Tensor::rand([3]);
                    make(dist)
                });
                let compiled = step.call(());
                assert_same(&compiled, &eager, &format!("{dist} {shape:?} {dtype}"));
                assert_eq!((step.stats().kernels_launched, step.stats().eager_ops), (1, 0), "the draw is a kernel");
            }
        }
    }
}

/// A rank-2 iteration space (a transposed operand keeps the dims apart) split by rows across
/// threads, and `rand_like`/`randn_like`: each element's index is its row-major index.
#[test]
fn draws_fused_into_a_rank_2_kernel_split_by_rows() {
    let _seeded = seeded();
    kiln::manual_seed(8);
    let xt = Tensor::randn([500, 601]).t();
    let body = |xt: &Tensor| &xt.rand_like() + xt + xt.randn_like();
    kiln::manual_seed(9);
    let eager = body(&xt);
    kiln::manual_seed(9);
    let mut step = kiln::compile(body);
    let compiled = step.call(&xt);
    assert_same(&compiled, &eager, "rand_like + x.t() + randn_like");
    let kernels = step.kernels();
    assert_eq!(kernels.len(), 1, "{kernels:?}");
    assert_eq!(kernels[0].ops, "rand add randn add", "both draws are in the kernel");
}

#[test]
fn dropout_is_one_kernel() {
    let _seeded = seeded();
    let x = Tensor::ones([128, 40]);
    let mut step = kiln::compile(|x: &Tensor| F::dropout(x, 0.2, true));
    step.call(&x);
    let kernels = step.kernels();
    assert_eq!(kernels.len(), 1, "{kernels:?}");
    assert_eq!(step.stats().kernels_launched, 1);
    assert_eq!(step.stats().eager_ops, 0);
    let ops = &kernels[0].ops;
    for op in ["rand", "ge", "to", "div", "mul"] {
        assert!(ops.split(' ').any(|o| o == op), "{op} is not in the kernel: {ops}");
    }
}

/// Dropout in a compiled training step: the forward values and the gradient (mask × scale)
/// equal eager ones.
#[test]
fn dropout_gradient_in_a_compiled_step_equals_eager() {
    let _seeded = seeded();
    kiln::manual_seed(4);
    let w = Tensor::randn([16, 9]).requires_grad_(true);
    let run = |w: &Tensor| {
        let y = F::dropout(&(w * 2.0), 0.4, true);
        (&y * &y).sum().backward();
        (y.detach(), w.grad().expect("a gradient"))
    };
    kiln::manual_seed(6);
    let (ey, eg) = run(&w);
    w.set_grad(None);
    kiln::manual_seed(6);
    let mut step = kiln::compile(|w: &Tensor| run(w));
    let (cy, cg) = step.call(&w);
    assert_same(&cy, &ey, "forward");
    let (cg, eg) = (cg.to_vec::<f32>(), eg.to_vec::<f32>());
    for (i, (c, e)) in cg.iter().zip(&eg).enumerate() {
        assert!((c - e).abs() <= 1e-5 * (1.0 + e.abs()), "gradient element {i}: {c} vs {e}");
    }
}

/// f16/bf16 dropout draws its mask in f32 and scales in the half type: one generated kernel,
/// with the eager numbers.
#[test]
fn dropout_of_half_types_equals_eager_in_one_kernel() {
    let _seeded = seeded();
    for dtype in [DType::F16, DType::BF16] {
        let x = Tensor::ones([33, 5]).to_dtype(dtype);
        kiln::manual_seed(12);
        let eager = F::dropout(&x, 0.5, true);
        kiln::manual_seed(12);
        let mut step = kiln::compile(|x: &Tensor| F::dropout(x, 0.5, true));
        let compiled = step.call(&x);
        assert_eq!((step.kernels().len(), step.stats().eager_ops), (1, 0), "{dtype}: {:?}", step.stats());
        assert_same(&compiled.to_dtype(DType::F32), &eager.to_dtype(DType::F32), &format!("dropout {dtype}"));
    }
}

/// `bernoulli` of a tensor of probabilities: inside a compiled step the draw and the comparison
/// are one kernel, equal to eager bit for bit; the probabilities of a step's input are checked,
/// and a cached plan draws fresh numbers.
#[test]
fn bernoulli_of_probabilities_equals_eager_in_one_kernel() {
    let _seeded = seeded();
    for dtype in [DType::F32, DType::F64] {
        kiln::manual_seed(12);
        let p = Tensor::rand_opts([37, 19], dtype, Device::Cpu);
        kiln::manual_seed(13);
        let eager = p.bernoulli();
        kiln::manual_seed(13);
        let mut step = kiln::compile(|p: &Tensor| p.bernoulli());
        let compiled = step.call(&p);
        assert_same(&compiled, &eager, &format!("bernoulli {dtype}"));
        assert_eq!((step.kernels().len(), step.stats().eager_ops), (1, 0), "{dtype}: {:?}", step.kernels());
        assert_ne!(bits(&step.call(&p)), bits(&compiled), "{dtype}: a fresh draw");
    }
    // A p computed inside the step (a sigmoid) is not read; still one kernel, still == eager.
    let x = Tensor::randn([40, 8]);
    kiln::manual_seed(14);
    let eager = x.sigmoid().bernoulli();
    kiln::manual_seed(14);
    let mut step = kiln::compile(|x: &Tensor| x.sigmoid().bernoulli());
    assert_same(&step.call(&x), &eager, "bernoulli of a sigmoid");
    assert_eq!(step.kernels().len(), 1, "{:?}", step.kernels());
    // A step input outside [0, 1] is refused, naming the op.
    let mut step = kiln::compile(|p: &Tensor| p.try_bernoulli());
    let e = step.call(&Tensor::from_slice(&[0.5f32, 2.0])).unwrap_err();
    assert!(e.message.contains("expected every probability to be in [0, 1]"), "{e}");
}
