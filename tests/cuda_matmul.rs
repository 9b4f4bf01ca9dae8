//! Matrix products on CUDA tensors (cuBLAS) against the CPU: `mm`, `bmm`, `mv`, `dot`,
//! `matmul` with broadcast batches, `linear`, in f32/f64/f16/bf16, on transposed, sliced,
//! expanded and permuted views, empty products, gradients, and the TF32 switch. Each
//! `test_device!` body runs on the CPU and, when a GPU is present, on cuda:0.
//!
//! Float data are multiples of 0.5 in [-4, 4] wherever the comparison is in f32 or lower, so
//! every product and sum is exact on both devices whatever the summation order (and in TF32):
//! the comparison checks the indexing of every element, not rounding.

#[path = "common/device.rs"]
#[macro_use]
mod device;

use kiln::nn::functional as F;
use kiln::{DType, Device, Tensor};

/// A tensor of `shape` on `d` holding multiples of 0.5 in [-4, 4] in a pattern that does not
/// repeat along any small dim.
fn exact(shape: &[usize], dtype: DType, d: Device) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|i| ((i * 37 + 11) % 17) as f32 * 0.5 - 4.0).collect();
    Tensor::from_vec(v, shape).to_dtype(dtype).to(&d)
}

/// A float64 tensor of `shape` on `d` with irrational-looking values in [-1, 1].
fn wavy(shape: &[usize], d: Device) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|i| (i as f64 * 0.731 + 0.2).sin()).collect();
    Tensor::from_vec(v, shape).to(&d)
}

test_device!(matrix_products_on_views, |d| {
    let f = DType::F32;
    let a = exact(&[7, 13], f, d);
    let b = exact(&[13, 5], f, d);
    let at = exact(&[13, 7], f, d).t(); // stored column by column
    let bt = exact(&[5, 13], f, d).t();
    let wide = exact(&[9, 20], f, d);
    let sliced = wide.narrow(0, 1, 7).narrow(1, 3, 13); // row stride 20
    let row = exact(&[1, 13], f, d).expand([7, 13]); // stride-0 rows: copied first
    let picked = exact(&[13, 5, 2], f, d).select(2, 1); // no unit stride: copied first
    vec![
        a.mm(&b),
        at.mm(&b),
        a.mm(&bt),
        at.mm(&bt),
        sliced.mm(&b),
        row.mm(&picked),
        a.matmul(&picked),
        // Unit dims: a 1 x k row, a k x 1 column, a 1 x 1 result.
        exact(&[1, 13], f, d).mm(&b),
        a.mm(&exact(&[13, 1], f, d)),
        exact(&[1, 13], f, d).mm(&exact(&[13, 1], f, d)),
    ]
});

test_device!(vector_and_batched_cases_of_matmul, |d| {
    let f = DType::F32;
    let v = exact(&[13], f, d);
    let m = exact(&[7, 13], f, d);
    let batch = exact(&[3, 7, 13], f, d);
    vec![
        v.dot(&exact(&[13], f, d)),
        v.matmul(&v),
        m.mv(&v),
        m.matmul(&v),
        v.matmul(&exact(&[13, 4], f, d)),
        batch.matmul(&v),
        v.matmul(&exact(&[3, 13, 4], f, d)),
        batch.bmm(&exact(&[3, 13, 4], f, d)),
        // Batches of transposed matrices, and a transposed batch dim.
        exact(&[3, 13, 7], f, d).transpose(1, 2).bmm(&exact(&[3, 4, 13], f, d).transpose(1, 2)),
        exact(&[7, 3, 13], f, d).transpose(0, 1).bmm(&exact(&[3, 13, 4], f, d)),
        // Broadcast batches: one matrix for every batch entry, and [2, 1] x [5] batches that do
        // not merge into one stride (copied first).
        batch.matmul(&exact(&[13, 4], f, d)),
        exact(&[2, 1, 4, 6], f, d).matmul(&exact(&[5, 6, 3], f, d)),
        exact(&[6, 4], f, d).matmul(&exact(&[2, 3, 4, 5], f, d)),
    ]
});

test_device!(products_in_every_float_dtype, |d| {
    let mut out = vec![
        wavy(&[9, 31], d).matmul(&wavy(&[31, 6], d)),
        wavy(&[4, 9, 31], d).transpose(1, 2).matmul(&wavy(&[9, 3], d)),
    ];
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        // Short sums of halves stay exact in f16 and bf16 too.
        out.push(exact(&[5, 6], dtype, d).matmul(&exact(&[6, 7], dtype, d)));
        out.push(exact(&[2, 6, 5], dtype, d).transpose(1, 2).matmul(&exact(&[6, 3], dtype, d)));
    }
    out
});

test_device!(empty_products, |d| {
    let f = DType::F32;
    vec![
        exact(&[0, 3], f, d).mm(&exact(&[3, 4], f, d)),
        exact(&[3, 4], f, d).mm(&exact(&[4, 0], f, d)),
        // k = 0: sums of nothing are zeros.
        exact(&[2, 0], f, d).mm(&exact(&[0, 4], f, d)),
        exact(&[0], f, d).dot(&exact(&[0], f, d)),
        exact(&[0, 2, 3], f, d).bmm(&exact(&[0, 3, 4], f, d)),
    ]
});

test_device!(gradients_of_products_and_linear, |d| {
    let f = DType::F32;
    let leaf = |t: Tensor| t.requires_grad_(true);
    // mm with a transposed operand (its gradient comes back in its layout), bmm with a
    // broadcast batch, mv, and linear with a bias: the MNIST net's fc layers.
    let a = leaf(exact(&[7, 13], f, d));
    let w = leaf(exact(&[5, 13], f, d));
    let g = exact(&[7, 5], f, d);
    (a.mm(&w.t()) * &g).sum().backward();
    let b = leaf(exact(&[3, 4, 6], f, d));
    let c = leaf(exact(&[6, 2], f, d));
    (b.matmul(&c) * exact(&[3, 4, 2], f, d)).sum().backward();
    let m = leaf(exact(&[4, 6], f, d));
    let v = leaf(exact(&[6], f, d));
    (m.mv(&v) * exact(&[4], f, d)).sum().backward();
    let x = leaf(exact(&[8, 12], f, d));
    let lw = leaf(exact(&[10, 12], f, d));
    let lb = leaf(exact(&[10], f, d));
    let y = F::linear(&x, &lw, Some(&lb));
    (&y * exact(&[8, 10], f, d)).sum().backward();
    let grads = [&a, &w, &b, &c, &m, &v, &x, &lw, &lb].map(|t| t.grad().expect("a gradient"));
    assert!(grads[1].is_contiguous(), "w.t()'s gradient is contiguous");
    let mut out = vec![y];
    out.extend(grads);
    out
});

test_device!(tf32_switch_keeps_exact_products_exact, |d| {
    use kiln::backends::cuda::matmul::{allow_tf32, set_allow_tf32};
    assert!(!allow_tf32(), "TF32 is off by default");
    set_allow_tf32(true);
    let y = exact(&[33, 40], DType::F32, d).matmul(&exact(&[40, 17], DType::F32, d));
    set_allow_tf32(false);
    // Halves need 4 mantissa bits: TF32's 10 hold them, so the CUDA result still equals the CPU's.
    vec![y]
});

test_device!(integer_products_are_refused_on_cuda, |d| {
    let a = Tensor::new(&[[1i64, 2], [3, 4]]).to(&d);
    let r = a.try_matmul(&a);
    if d.is_cuda() {
        let e = r.unwrap_err().to_string();
        assert!(e.starts_with("matmul: not implemented for dtype int64 on CUDA (shapes [2, 2] and [2, 2])"), "{e}");
        assert!(e.contains("tests/cuda_matmul.rs:"), "the caller's line: {e}");
        let h = Tensor::new(&[[1.0f32, 2.0]]).to(&d);
        let e = h.try_matmul(&h.t().to_dtype(DType::F64)).unwrap_err().to_string();
        assert!(
            e.starts_with("matmul: expected both operands to have the same dtype, but got float32 and float64"),
            "{e}"
        );
        let e = h.try_matmul(&Tensor::new(&[[1.0f32], [2.0]])).unwrap_err().to_string();
        assert!(e.contains("expected all tensors to be on the same device, but found cuda:0 and cpu"), "{e}");
        vec![]
    } else {
        vec![]
    }
});
