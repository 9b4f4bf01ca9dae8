//! Logical and bitwise ops, `masked_fill`, and indexing along a dim (`gather`, `index_select`,
//! `scatter`, `scatter_add`, `index_fill`, `one_hot`) on CUDA tensors, and the class-index losses built on them
//! (`cross_entropy`, `nll_loss`). Each `test_device!` body runs on the CPU and, when a GPU is
//! present, on cuda:0, and the two result lists are compared (exact for integers and bool);
//! out-of-range indices must give the same error on both devices and write nothing.

#[path = "common/device.rs"]
#[macro_use]
mod device;

use kiln::nn::functional as F;
use kiln::nn::functional::{CrossEntropyOpts, NllLossOpts, Reduction};
use kiln::{DType, Device, Tensor};
use std::sync::Mutex;

/// Held by the tests that run `scatter_add` (directly or in a gradient), so that the tests
/// switching `use_deterministic_algorithms` (process-wide) cannot change which kernel their
/// CUDA runs take, or refuse them.
static DETERMINISM: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    DETERMINISM.lock().unwrap_or_else(|e| e.into_inner())
}

/// A [3, 4] f32 tensor with zeros, -0.0, NaN and infinities on `d`.
fn truthy(d: Device) -> Tensor {
    Tensor::from_vec(
        vec![0.0f32, -0.0, 1.5, f32::NAN, -2.0, 0.0, f32::INFINITY, 0.25, 0.0, -f32::INFINITY, 3.0, 0.0],
        [3, 4],
    )
    .to(&d)
}

test_device!(logical_ops_on_every_dtype_and_view, |d| {
    let x = truthy(d);
    let b = x.ne(0.0);
    let i = Tensor::new(&[[0i64, 5, 0, -1], [2, 0, 0, 7], [0, 0, 1, 0]]).to(&d);
    let u = Tensor::new(&[0u8, 1, 255, 0]).to(&d);
    let h = x.to_dtype(DType::F16);
    vec![
        x.logical_not(),
        x.t().logical_not(),
        i.logical_not(),
        h.logical_not(),
        b.logical_not(),
        x.logical_and(&i),
        x.logical_or(&u),
        i.logical_xor(b.t().t()),
        b.logical_and(true),
        x.logical_or(0.0),
        x.t().narrow(0, 1, 2).logical_xor(i.t().narrow(0, 0, 2)),
        // Bool operators are the logical ops.
        !&b,
        &b & &i.ne(0),
        &b | &u.ne(0),
        &b ^ &x.ne(&x),
    ]
});

test_device!(bitwise_ops_on_integers, |d| {
    let a = Tensor::new(&[[-8i32, -1, 0, 1, 5], [7, 100, -100, 3, 2]]).to(&d);
    let s = Tensor::new(&[0i32, 31, 32, 40, -1]).to(&d);
    let w = Tensor::new(&[5u8, 200, 3, 0, 255]).to(&d);
    let l = Tensor::new(&[1i64 << 40, -3, 7, 0, 9]).to(&d);
    let m = a.deep_clone();
    m.bitwise_not_();
    let n = w.deep_clone();
    n.bitwise_xor_(3);
    vec![&a & 3, &a | &s, &a ^ -1, !&a, !&a.t(), &a << &s, &a >> &s, &w << 1, &w >> 2, a.bitwise_and(&l), &l >> 3, m, n]
});

test_device!(masked_fill_scalar_tensor_and_in_place, |d| {
    let x = Tensor::arange_step(0.0, 12.0, 1.0).reshape([3, 4]).to(&d);
    let mask = x.gt(5.5);
    let row = Tensor::new(&[true, false, false, true]).to(&d);
    let i = Tensor::new(&[[1i64, 2], [3, 4]]).to(&d);
    let v = Tensor::scalar(-7.5f64).to(&d);
    let y = x.deep_clone();
    y.t().masked_fill_(&row.unsqueeze(1), 9.0);
    let z = i.deep_clone();
    z.masked_fill_(&z.ge(3), -1);
    let u = Tensor::new(&[1u8, 2, 3]).to(&d);
    vec![
        x.masked_fill(&mask, -1.0),
        x.masked_fill(&row, f64::NEG_INFINITY),
        x.t().masked_fill(&mask.t(), 0.5),
        x.masked_fill_tensor(&mask, &v),
        // A 0-dim CPU value joins a CUDA op (copied over); the value takes x's dtype.
        i.masked_fill_tensor(&i.eq(2), &Tensor::scalar(9.9f32)),
        y,
        z,
        u.masked_fill(&u.eq(2), -1),
    ]
});

test_device!(masked_fill_gradients, |d| {
    let x = Tensor::arange_step(0.0, 6.0, 1.0).reshape([2, 3]).to(&d).requires_grad_(true);
    let v = Tensor::scalar(2.0f32).to(&d).requires_grad_(true);
    let mask = Tensor::new(&[[true, false, true], [false, false, true]]).to(&d);
    let out = (x.masked_fill(&mask, 0.0) * 3.0).sum() + (x.masked_fill_tensor(&mask, &v) * &x).sum();
    out.backward();
    vec![out.detach(), x.grad().unwrap(), v.grad().unwrap()]
});

test_device!(gather_and_index_select_on_views, |d| {
    let x = Tensor::arange_step(0.0, 24.0, 1.0).reshape([2, 3, 4]).to(&d);
    let i1 = Tensor::new(&[[[0i64, 2, 1, 0]], [[2, 2, 0, 1]]]).to(&d); // [2, 1, 4] along dim 1
    let i2 = Tensor::new(&[[[3i64], [0], [1]], [[2], [2], [0]]]).to(&d); // [2, 3, 1] along dim 2
    let v = Tensor::new(&[2i64, 0, 2, 1]).to(&d);
    let h = x.to_dtype(DType::BF16);
    let b = x.gt(10.0);
    let i32s = Tensor::new(&[1i32, 0]).to(&d);
    vec![
        x.gather(1, &i1),
        x.gather(2, &i2),
        x.gather(-1, &i2.expand([2, 3, 2])),
        x.transpose(0, 2).gather(0, &Tensor::new(&[[[3i64, 1]]]).to(&d)),
        h.gather(1, &i1),
        b.gather(2, &i2),
        x.index_select(1, &v),
        x.index_select(2, &v.narrow(0, 1, 3)),
        x.transpose(0, 2).index_select(0, &i32s),
        x.i((.., 1, ..)).index_select(1, &v),
        Tensor::scalar(4.5f64).to(&d).gather(0, &Tensor::scalar(0i64).to(&d)),
        Tensor::scalar(4i64).to(&d).index_select(0, &Tensor::new(&[0i64]).to(&d)),
        x.index_select(0, &Tensor::zeros_opts([0], DType::I64, d)),
    ]
});

test_device!(scatter_and_scatter_add, |d| {
    let _g = lock();
    let base = Tensor::zeros_opts([3, 5], DType::F32, d);
    let src = Tensor::arange_step(1.0, 16.0, 1.0).reshape([3, 5]).to(&d);
    // Distinct positions per column: a plain scatter is the same on every device.
    let idx = Tensor::new(&[[0i64, 1, 2, 0, 1], [2, 0, 1, 1, 2]]).to(&d);
    // Repeated positions: scatter_add sums them (exactly, for these small integers).
    let rep = Tensor::new(&[[0i64, 0, 4, 4], [1, 1, 1, 0], [2, 3, 2, 3]]).to(&d);
    let ints = Tensor::zeros_opts([3, 5], DType::I64, d);
    let bytes = Tensor::zeros_opts([3, 5], DType::U8, d);
    let halves = Tensor::zeros_opts([3, 5], DType::F16, d);
    let in_place = base.deep_clone();
    in_place.t().scatter_(1, &idx.t().narrow(1, 0, 1).contiguous(), &src.t());
    let value = base.deep_clone();
    value.scatter_value_(0, &idx, 2.5);
    let added = base.deep_clone();
    added.scatter_add_(1, &rep, &src);
    let bools = Tensor::zeros_opts([3, 5], DType::Bool, d);
    vec![
        base.scatter(0, &idx, &src),
        in_place,
        value,
        added,
        ints.scatter_add(1, &rep, &src.to_dtype(DType::I64)),
        bytes.scatter_add(1, &rep, &Tensor::full_opts([3, 5], 200.0, DType::U8, d)),
        halves.scatter_add(1, &rep, &src.to_dtype(DType::F16)),
        bools.scatter_add(1, &rep, &src.gt(6.0)),
        base.scatter_add(0, &idx.narrow(1, 1, 3), &src.t().contiguous().narrow(0, 0, 2)),
    ]
});

test_device!(gather_and_scatter_gradients, |d| {
    let _g = lock();
    let x = Tensor::arange_step(0.0, 12.0, 1.0).reshape([3, 4]).to(&d).requires_grad_(true);
    let src = Tensor::arange_step(1.0, 7.0, 1.0).reshape([2, 3]).to(&d).requires_grad_(true);
    let idx = Tensor::new(&[[3i64, 0, 3], [1, 1, 2]]).to(&d);
    let w = Tensor::arange_step(1.0, 7.0, 1.0).reshape([2, 3]).to(&d);
    // Distinct positions per row: the scatter's result does not depend on the device.
    let distinct = Tensor::new(&[[0i64, 1, 2], [3, 2, 1]]).to(&d);
    let picked = x.index_select(0, &Tensor::new(&[2i64, 0, 2]).to(&d));
    let out = (x.gather(1, &idx) * &w).sum() + (x.scatter(1, &distinct, &src) * 2.0).sum() + picked.square().sum();
    out.backward();
    vec![out.detach(), x.grad().unwrap(), src.grad().unwrap()]
});

test_device!(index_fill_and_one_hot, |d| {
    let x = Tensor::arange_step(0.0, 12.0, 1.0).reshape([3, 4]).to(&d);
    let cols = Tensor::new(&[-1i64, 1, -4]).to(&d);
    let a = x.index_fill(1, &cols, -2.5);
    let b = x.deep_clone();
    b.t().index_fill_(1, &Tensor::new(&[2i64, 0]).to(&d).narrow(0, 1, 1), 7.0);
    let i = Tensor::new(&[[3i64, -1], [0, 2]]).to(&d).index_fill(0, &Tensor::scalar(-2i64).to(&d), 9);
    let e = x.try_index_fill(1, &Tensor::new(&[0i64, -5]).to(&d), 1.0).unwrap_err().to_string();
    assert!(e.starts_with("index_fill: index -5 is out of bounds for dimension 1 with size 4"), "{e}");
    let labels = Tensor::new(&[[2i64, 0], [1, 3]]).to(&d);
    let e = Tensor::new(&[1i64, 4]).to(&d).try_one_hot(3).unwrap_err().to_string();
    assert!(e.starts_with("one_hot: class values must be smaller than num_classes, got 4 (num_classes = 3)"), "{e}");
    let e = Tensor::new(&[1i64, -1]).to(&d).try_one_hot(-1).unwrap_err().to_string();
    assert!(e.starts_with("one_hot: class values must be non-negative, got -1"), "{e}");
    vec![
        a,
        b,
        i,
        labels.one_hot(-1),
        labels.t().one_hot(5),
        Tensor::scalar(1i64).to(&d).one_hot(2),
        Tensor::zeros_opts([0], DType::I64, d).one_hot(3),
    ]
});

test_device!(bad_indices_are_the_cpus_errors_and_write_nothing, |d| {
    let x = Tensor::arange_step(0.0, 6.0, 1.0).reshape([2, 3]).to(&d);
    let bad = Tensor::new(&[[0i64, 3, 1], [5, 0, -1]]).to(&d);
    let msg = |e: kiln::Error| e.to_string();
    let line = line!() + 1;
    let e = msg(x.try_gather(1, &bad).unwrap_err());
    assert!(e.starts_with("gather: index 3 is out of bounds for dimension 1 with size 3"), "{e}");
    assert!(e.ends_with(&format!("(at tests/cuda_indexing.rs:{line})")), "the caller's line: {e}");
    let e = msg(x.try_index_select(0, &Tensor::new(&[1i64, -2, 7]).to(&d)).unwrap_err());
    assert!(e.starts_with("index_select: index -2 is out of bounds for dimension 0 with size 2"), "{e}");
    let e = msg(x.try_scatter(0, &bad, &x).unwrap_err());
    assert!(e.starts_with("scatter: index 3 is out of bounds for dimension 0 with size 2"), "{e}");
    let y = x.deep_clone();
    let line = line!() + 1;
    let e = msg(y.try_scatter_add_(1, &bad, &x).unwrap_err());
    assert!(e.starts_with("scatter_add_: index 3 is out of bounds for dimension 1 with size 3"), "{e}");
    assert!(e.ends_with(&format!("(at tests/cuda_indexing.rs:{line})")), "the caller's line: {e}");
    assert!(y.equal(&x), "a failed scatter_add_ wrote {y}");
    // A CPU index for a CUDA tensor (or the reverse) names both devices.
    if d.is_cuda() {
        let e = msg(x.try_gather(1, &Tensor::new(&[[0i64]])).unwrap_err());
        assert!(e.contains("expected all tensors to be on the same device, but found"), "{e}");
    }
    vec![y]
});

test_device!(class_index_losses, |d| {
    let _g = lock();
    let logits = Tensor::from_vec((0..20).map(|i| ((i * 7 % 11) as f32 - 5.0) / 3.0).collect(), [4, 5])
        .to(&d)
        .requires_grad_(true);
    let target = Tensor::new(&[1i64, 4, -100, 0]).to(&d);
    let weight = Tensor::new(&[1.0f32, 0.5, 2.0, 1.0, 0.25]).to(&d);
    let ce = F::cross_entropy_opts(
        &logits,
        &target,
        &CrossEntropyOpts { weight: Some(weight.clone()), ..Default::default() },
    );
    let smooth = F::cross_entropy_opts(
        &logits,
        &target,
        &CrossEntropyOpts { label_smoothing: 0.1, reduction: Reduction::Sum, ..Default::default() },
    );
    let logp = logits.log_softmax(1);
    let nll = F::nll_loss_opts(&logp, &target, &NllLossOpts { reduction: Reduction::None, ..Default::default() });
    (&ce + &smooth + nll.sum()).backward();
    let plain = F::cross_entropy(&logits.detach(), &Tensor::new(&[2i64, 2, 3, 0]).to(&d));
    // A 3-D input: classes along dim 1.
    let img = logits.detach().reshape([2, 5, 2]);
    let pix = F::cross_entropy(&img, &Tensor::new(&[[0i64, 4], [3, 3]]).to(&d));
    let e = F::try_cross_entropy(&logits, &Tensor::new(&[1i64, 5, 0, 0]).to(&d)).unwrap_err().to_string();
    assert!(e.contains("target 5 is out of bounds"), "{e}");
    vec![ce.detach(), smooth.detach(), nll.detach(), logits.grad().unwrap(), plain, pix]
});

test_device!(embedding_lookup_and_gradient, |d| {
    let _g = lock();
    let weight = Tensor::arange_step(0.0, 15.0, 1.0).reshape([5, 3]).to(&d).requires_grad_(true);
    let ids = Tensor::new(&[[4i64, 0, 4], [2, 2, 1]]).to(&d);
    let rows = F::embedding(&ids, &weight, None);
    let padded = F::embedding(&ids.to_dtype(DType::I32), &weight, Some(2));
    ((&rows * 1.5).sum() + padded.square().sum()).backward();
    let e = F::try_embedding(&Tensor::new(&[5i64]).to(&d), &weight, None).unwrap_err().to_string();
    assert!(e.contains("index 5 is out of range for 5 embeddings"), "{e}");
    vec![rows.detach(), padded.detach(), weight.grad().unwrap()]
});

test_device!(max_min_gradients_share_ties, |d| {
    let x = Tensor::new(&[[1.0f32, 3.0, 3.0, f32::NAN], [2.0, 2.0, -1.0, 2.0]]).to(&d).requires_grad_(true);
    let y = Tensor::new(&[[4.0f64, 4.0], [0.5, 4.0]]).to(&d).requires_grad_(true);
    (x.amax(1).sum() + x.narrow(1, 0, 3).amin_keepdim(1).sum()).backward();
    y.max().backward();
    vec![x.grad().unwrap(), y.grad().unwrap()]
});

/// `n` values of mixed signs and magnitudes (1e-2 to 1e2), so that the order of float additions
/// shows in the last bits of a sum.
fn mixed(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| {
            (if i % 3 == 0 { -1.0 } else { 1.0 }) * ((i * 7919) % 1000) as f32 / 7.0 * 10f32.powi((i % 5) as i32 - 2)
        })
        .collect()
}

/// `n` int64 indices in `0..k` repeating in an irregular order, as a tensor of `shape` on `d`.
fn repeated(shape: &[usize], k: usize, d: Device) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec((0..n).map(|i| ((i * 5 + i / 7) % k) as i64).collect(), shape).to(&d)
}

/// The values of the f32 or f16 tensor `t` as f32 bits, read on the host.
fn bits(t: &Tensor) -> Vec<u32> {
    t.to(&Device::Cpu).to_dtype(DType::F32).contiguous().to_vec::<f32>().into_iter().map(f32::to_bits).collect()
}

/// Runs `f` on cuda:0 under `use_deterministic_algorithms(true)`, restoring the mode (off)
/// before a panic in `f` goes on.
fn deterministic<T>(f: impl FnOnce() -> T) -> T {
    kiln::use_deterministic_algorithms(true);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    kiln::use_deterministic_algorithms(false);
    r.unwrap_or_else(|e| std::panic::resume_unwind(e))
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn deterministic_scatter_add_equals_the_cpu_bit_for_bit() {
    let _g = lock();
    // Along dim 0 and the last dim, through transposed and narrowed views of the target, the
    // index and the source; 48 or 64 additions into each of 3 or 4 positions per line.
    let run = |d: Device, dtype: DType| -> Vec<Tensor> {
        let src = Tensor::from_vec(mixed(64 * 50), [64, 50]).to_dtype(dtype).to(&d);
        let src = src.narrow(1, 1, 48).t(); // [48, 64], strides [1, 50]
        let idx0 = repeated(&[64, 48], 4, d).t(); // [48, 64] in 0..4
        let idx1 = repeated(&[48, 70], 3, d).narrow(1, 2, 64); // [48, 64] in 0..3
        let base = Tensor::from_vec(mixed(64 * 4), [64, 4]).to_dtype(dtype).to(&d);
        let along0 = base.t().scatter_add(0, &idx0, &src);
        let in_place = base.deep_clone();
        in_place.t().scatter_add_(0, &idx0, &src);
        let along1 = Tensor::zeros_opts([48, 3], dtype, d).scatter_add(1, &idx1, &src);
        let last_t = Tensor::zeros_opts([3, 48], dtype, d);
        last_t.t().scatter_add_(1, &idx1, &src);
        vec![along0, in_place, along1, last_t]
    };
    same_bits_as_cpu("scatter_add", run);
}

/// Compares `run`'s results on the CPU and (under the deterministic mode) on cuda:0 bit for
/// bit, for f32 and f16; `what` names the op in failures.
fn same_bits_as_cpu(what: &str, run: impl Fn(Device, DType) -> Vec<Tensor>) {
    let cpu = [DType::F32, DType::F16].map(|dtype| run(Device::Cpu, dtype));
    for (dtype, cpu) in [DType::F32, DType::F16].into_iter().zip(cpu) {
        let cuda = deterministic(|| run(Device::Cuda(0), dtype));
        for (k, (c, g)) in cpu.iter().zip(&cuda).enumerate() {
            assert_eq!(g.device(), Device::Cuda(0));
            assert_eq!((g.shape(), g.dtype()), (c.shape(), dtype));
            assert_eq!(bits(g), bits(c), "{what}, {dtype:?} result {k}: the CPU's bits");
        }
    }
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn deterministic_scatter_keeps_the_cpus_last_write() {
    let _g = lock();
    // Along dim 0 and the last dim, through transposed and narrowed views of the target, the
    // index and the source; each line writes 48 or 64 different values into 3 or 4 positions.
    same_bits_as_cpu("scatter", |d, dtype| {
        let src = Tensor::from_vec(mixed(64 * 50), [64, 50]).to_dtype(dtype).to(&d);
        let src = src.narrow(1, 1, 48).t(); // [48, 64], strides [1, 50]
        let idx0 = repeated(&[64, 48], 4, d).t(); // [48, 64] in 0..4
        let idx1 = repeated(&[48, 70], 3, d).narrow(1, 2, 64); // [48, 64] in 0..3
        let base = Tensor::from_vec(mixed(64 * 4), [64, 4]).to_dtype(dtype).to(&d);
        let along0 = base.t().scatter(0, &idx0, &src);
        let in_place = base.deep_clone();
        in_place.t().scatter_(0, &idx0, &src);
        let along1 = Tensor::zeros_opts([48, 3], dtype, d).scatter(1, &idx1, &src);
        let last_t = Tensor::zeros_opts([3, 48], dtype, d);
        last_t.t().scatter_(1, &idx1, &src);
        // A 1-D scatter: one line of 1000 writes into 7 positions.
        let flat = Tensor::zeros_opts([7], dtype, d).scatter(
            0,
            &repeated(&[1000], 7, d),
            &Tensor::from_vec(mixed(1000), [1000]).to_dtype(dtype).to(&d),
        );
        vec![along0, in_place, along1, last_t, flat]
    });
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn deterministic_index_put_equals_the_cpu_bit_for_bit() {
    let _g = lock();
    // x[rows] (+)= v on [M, D] (one line per column), x[:, cols] (+)= v on the last dim, both
    // through a transposed target; two index tensors apart (x3[i, :, j]); a bool mask; one
    // value broadcast; an index of every element (a single line).
    same_bits_as_cpu("index_put_", |d, dtype| {
        let f = |n: usize, shape: &[usize]| Tensor::from_vec(mixed(n), shape).to_dtype(dtype).to(&d);
        let rows = repeated(&[300], 10, d); // 300 rows of 10, 30 times each
        let cols = repeated(&[40], 6, d).narrow(0, 1, 36);
        let (i, j) = (repeated(&[4, 30], 3, d), repeated(&[30, 4], 5, d).t());
        let mut out = Vec::new();
        for acc in [false, true] {
            let x = f(16 * 10, &[16, 10]).t(); // [10, 16], strides [1, 10]
            x.index_put_(&[&rows], &f(300 * 16, &[300, 16]), acc);
            let y = f(10 * 6, &[10, 6]).t(); // [6, 10], strides [1, 6]
            y.index_put_(&[None, Some(&cols)], &f(6 * 36 * 2, &[6, 72]).narrow(1, 0, 36), acc);
            let z = f(3 * 7 * 5, &[3, 7, 5]);
            z.index_put_(&[Some(&i), None, Some(&j)], &f(120 * 7, &[4, 30, 7]), acc);
            let m = f(6 * 8, &[6, 8]);
            m.index_put_(&m.gt(0.0), &f(1, &[1]), acc);
            let one = f(10 * 16, &[10, 16]);
            one.index_put_(&[&rows], &Tensor::scalar(0.375f32).to_dtype(dtype).to(&d), acc);
            let all = f(5, &[5]);
            all.index_put_(&[&repeated(&[2000], 5, d)], &f(2000, &[2000]), acc);
            let t = f(10 * 16, &[10, 16]).index_put(&[&rows], &f(16, &[16]), acc);
            out.extend([x, y, z, m, one, all, t]);
        }
        out
    });
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn deterministic_mode_runs_every_cuda_scatter() {
    let _g = lock();
    let d = Device::Cuda(0);
    let x = Tensor::zeros_opts([4], DType::F32, d);
    let idx = Tensor::new(&[0i64, 0, 1]).to(&d);
    let src = Tensor::new(&[1.0f32, 2.0, 4.0]).to(&d);
    let (add, put, value, bad) = deterministic(|| {
        let add = x.try_scatter_add(0, &idx, &src).map(|t| t.to_vec::<f32>());
        let put = x.try_scatter(0, &idx, &src).map(|t| t.to_vec::<f32>());
        let value = x.try_scatter_value(0, &idx, 1.0).map(|t| t.to_vec::<f32>());
        let bad = x.try_scatter_add_(0, &Tensor::new(&[0i64, 4]).to(&d), &src).map(drop);
        (add, put, value, bad)
    });
    assert_eq!(add.expect("scatter_add is deterministic on CUDA"), vec![3.0, 4.0, 0.0, 0.0]);
    assert_eq!(
        put.expect("scatter of a tensor is deterministic on CUDA"),
        vec![2.0, 4.0, 0.0, 0.0],
        "the last write wins"
    );
    assert_eq!(value.expect("a scalar scatter writes one value wherever indices repeat"), vec![1.0, 1.0, 0.0, 0.0]);
    // The bounds check still runs first, and nothing is written.
    let e = bad.unwrap_err().to_string();
    assert!(e.contains("index 4 is out of bounds for dimension 0 with size 4"), "{e}");
    assert_eq!(x.to_vec::<f32>(), vec![0.0; 4]);
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn deterministic_mode_runs_embedding_and_cross_entropy_gradients_on_cuda() {
    let _g = lock();
    let run = |d: Device| -> Vec<Tensor> {
        // 200 lookups of 10 rows: each row's gradient sums 20 upstream rows.
        let weight = Tensor::from_vec(mixed(10 * 6), [10, 6]).to(&d).requires_grad_(true);
        let ids = repeated(&[20, 10], 10, d);
        let up = Tensor::from_vec(mixed(200 * 6), [20, 10, 6]).to(&d);
        (&F::embedding(&ids, &weight, None) * &up).sum().backward();
        let logits = Tensor::from_vec(mixed(32 * 5), [32, 5]).to(&d).requires_grad_(true);
        let target = repeated(&[32], 5, d);
        F::cross_entropy(&logits, &target).backward();
        vec![weight.grad().unwrap(), logits.grad().unwrap()]
    };
    let cpu = run(Device::Cpu);
    let cuda = deterministic(|| run(Device::Cuda(0)));
    assert_eq!(bits(&cuda[0]), bits(&cpu[0]), "the embedding gradient adds in the CPU's order");
    // The cross-entropy gradient goes through CUDA's exp: equal up to its rounding.
    device::assert_same("deterministic gradients", &cpu, &cuda);
}
