//! The cumulative scans `cumprod`, `cummax`/`cummin` and `logcumsumexp` on CUDA tensors against
//! the CPU (`test_device!`: each body runs on the CPU and, ignored unless asked for, on cuda:0
//! compared with it): every dtype each takes, along the first, a middle and the last dim, on
//! contiguous, transposed, narrowed (offset) and expanded (stride 0) views, 0-dim and empty
//! inputs, ties, NaN, ±inf, zeros, integer wrapping; and their gradients computed on the
//! device (the backward rules run through ops with CUDA kernels).

#[path = "common/device.rs"]
#[macro_use]
mod device;

use kiln::{DType, Device, Tensor};

/// `shape`'s elements: small values with repeats (ties), signs and a zero, on `d`.
fn data(shape: &[usize], d: Device) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|i| ((i * 7 + 3) % 9) as f64 * 0.25 - 1.0).collect();
    Tensor::from_vec(v, shape).to(&d)
}

/// A [3, 5] f32 tensor with NaN, ±inf, ties and zeros, on `d`.
fn specials(d: Device) -> Tensor {
    let (nan, inf) = (f32::NAN, f32::INFINITY);
    let v = vec![1.0f32, nan, 3.0, nan, 0.5, -inf, 2.0, 2.0, -inf, 5.0, 0.0, inf, 5.0, -inf, inf];
    Tensor::from_vec(v, [3, 5]).to(&d)
}

/// Every scan of `x` along `dim` (logcumsumexp only for floats).
fn scans(x: &Tensor, dim: i64) -> Vec<Tensor> {
    let (max, max_at) = x.cummax(dim);
    let (min, min_at) = x.cummin(dim);
    let mut out = vec![x.cumprod(dim), max, max_at, min, min_at];
    if x.dtype().is_float() {
        out.push(x.logcumsumexp(dim));
    }
    out
}

test_device!(scans_in_every_dtype_along_every_dim, |d| {
    let x = data(&[2, 3, 4], d);
    let mut out = Vec::new();
    for dt in [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::I32, DType::U8, DType::Bool] {
        // Integers -4..=4 with repeats and zeros (u8 wraps the negative ones, bool is x != 0).
        let y = if dt.is_float() { x.to_dtype(dt) } else { (&x * 4.0).to_dtype(DType::I64).to_dtype(dt) };
        for dim in [0, 1, -1] {
            out.extend(scans(&y, dim));
        }
    }
    // cumprod of integers is i64 and wraps; of f32 accumulates in f64 (no overflow midway).
    let big = Tensor::from_vec(vec![1i64 << 40, 1 << 30, 3], [3]).to(&d);
    let wide = Tensor::from_vec(vec![1e30f32, 1e10, 1e-35], [3]).to(&d);
    assert_eq!(big.cumprod(0).dtype(), DType::I64);
    out.extend([big.cumprod(0), wide.cumprod(0), (data(&[4, 5], d) * 4.0).to_dtype(DType::I32).cumprod(1)]);
    out
});

test_device!(scans_of_views_and_edge_shapes, |d| {
    let x = data(&[4, 6], d);
    let mut out = Vec::new();
    // Transposed, narrowed (an offset), expanded (stride 0): made contiguous first.
    for v in [x.t(), x.narrow(1, 1, 4), x.narrow(0, 2, 1).expand([3, 6])] {
        out.extend(scans(&v, 0));
        out.extend(scans(&v, 1));
    }
    // 0-dim, empty, a size-1 dim, and more lines than one block holds.
    out.extend(scans(&Tensor::scalar(2.5f32).to(&d), 0));
    out.extend(scans(&Tensor::zeros([0, 3]).to(&d), 0));
    out.extend(scans(&Tensor::zeros([2, 0]).to(&d), 0));
    out.extend(scans(&data(&[3, 1, 2], d), 1));
    out.extend(scans(&data(&[700, 3], d), 1));
    out
});

test_device!(nan_inf_ties_and_zeros, |d| {
    let x = specials(d);
    let mut out = Vec::new();
    for dim in [0, 1] {
        out.extend(scans(&x, dim));
        out.extend(scans(&x.to_dtype(DType::F64), dim));
        out.extend(scans(&x.to_dtype(DType::F16), dim));
    }
    // Ties take the last index, on the CPU as on the device.
    let (_, at) = Tensor::from_vec(vec![3i64, 1, 3, 0, 3], [5]).to(&d).cummax(0);
    assert_eq!(at.to(&Device::Cpu).to_vec::<i64>(), [0, 0, 2, 2, 4]);
    out.push(at);
    out
});

test_device!(gradients_run_on_the_device, |d| {
    let x = data(&[3, 4], d).to_dtype(DType::F64);
    // Zeros in the input: cumprod's exact rule (gathers, flips and a cummin of positions).
    let zeros = Tensor::from_vec(vec![0.5f64, 0.0, 2.0, -1.5, 0.0, 0.7, 0.0, 0.0, -0.4, 1.2, 3.0, -2.0], [3, 4]).to(&d);
    let w = data(&[3, 4], d).to_dtype(DType::F64) + 0.3;
    let mut out = Vec::new();
    let cases: [(&Tensor, fn(&Tensor) -> Tensor); 5] = [
        (&zeros, |t| t.cumprod(1)),
        (&x, |t| t.cumprod(0)),
        (&x, |t| t.cummax(1).0),
        (&x, |t| t.cummin(0).0),
        (&x, |t| t.logcumsumexp(1)),
    ];
    for (input, f) in cases {
        let leaf = input.detach().requires_grad_(true);
        (f(&leaf) * &w).sum().backward();
        let g = leaf.grad().expect("a gradient");
        assert_eq!(g.device(), d, "the gradient stays on the input's device");
        out.push(g);
    }
    out
});
