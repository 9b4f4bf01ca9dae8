//! `conv2d`/`conv1d` and `adaptive_avg_pool2d` on CUDA tensors against the CPU
//! (`test_device!`): the forward and the gradients of the input, the weight and the bias over
//! strides, padding (explicit, "same", "valid"), dilation, groups (depthwise too), 1x1
//! kernels, unbatched and 1-d input, f64/f16/bf16, views, second-order gradients; adaptive
//! pooling shrinking and growing, with its first and second gradients; and the device errors.
//!
//! Values are multiples of 0.25 and small, so every product and sum of the f32 convolutions is
//! exact on both devices whatever the summation order.

#[path = "common/device.rs"]
#[macro_use]
mod device;

use kiln::autograd::GradOpts;
use kiln::nn::functional::{self as F, Conv1dOpts, Conv2dOpts, Padding};
use kiln::{DType, Device, Tensor};

/// A `shape` tensor on `d` of quarter steps in `-2..3.5`.
fn values(shape: &[usize], seed: usize, d: Device) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|i| ((i * 29 + seed * 7 + 3) % 23) as f32 * 0.25 - 2.0).collect();
    Tensor::from_vec(v, shape).to(&d)
}

/// Conv2d options: stride `s`, explicit padding `p`, dilation `dil`, `groups`.
fn opts(s: [usize; 2], p: [usize; 2], dil: [usize; 2], groups: usize) -> Conv2dOpts {
    Conv2dOpts { stride: s, padding: Padding::Explicit(p), dilation: dil, groups }
}

/// The convolution of fresh leaves on `d` (input `x_shape`, weight `w_shape`, a bias when
/// `bias`) and the gradients of `sum(y * gy)` for each: `[y, gx, gw, gb?]`.
fn conv_and_grads(d: Device, x_shape: &[usize], w_shape: &[usize], bias: bool, o: &Conv2dOpts) -> Vec<Tensor> {
    let x = values(x_shape, 1, d).requires_grad_(true);
    let w = values(w_shape, 2, d).requires_grad_(true);
    let b = bias.then(|| values(&[w_shape[0]], 3, d).requires_grad_(true));
    let y = F::conv2d(&x, &w, b.as_ref(), o);
    (&y * &values(y.shape(), 4, d)).sum().backward();
    let mut out = vec![y.detach(), x.grad().expect("x's gradient"), w.grad().expect("w's gradient")];
    out.extend(b.map(|b| b.grad().expect("the bias gradient")));
    out
}

test_device!(conv2d_forward_and_gradients, |d| {
    let mut out = Vec::new();
    for (x, w, bias, o) in [
        (vec![2, 3, 8, 7], vec![4, 3, 3, 3], true, opts([1, 1], [0, 0], [1, 1], 1)),
        (vec![2, 3, 8, 7], vec![4, 3, 3, 3], false, opts([1, 1], [1, 1], [1, 1], 1)),
        (vec![3, 4, 9, 11], vec![6, 2, 3, 2], true, opts([2, 1], [1, 2], [1, 2], 2)),
        (vec![1, 6, 10, 9], vec![6, 1, 3, 3], false, opts([2, 2], [1, 1], [2, 1], 6)),
        (vec![2, 6, 10, 9], vec![3, 2, 2, 2], true, opts([3, 3], [1, 0], [2, 1], 3)),
        (vec![2, 5, 4, 4], vec![7, 5, 1, 1], true, opts([1, 1], [0, 0], [1, 1], 1)),
        (vec![2, 4, 5, 5], vec![4, 2, 1, 1], false, opts([1, 1], [0, 0], [1, 1], 2)),
        (vec![2, 2, 7, 7], vec![3, 2, 1, 1], true, opts([2, 2], [1, 1], [1, 1], 1)),
        (vec![3, 5, 5], vec![2, 3, 2, 3], true, opts([1, 2], [1, 0], [1, 1], 1)),
    ] {
        out.extend(conv_and_grads(d, &x, &w, bias, &o));
    }
    // "same" padding with an even kernel (the odd zero after the input) and "valid".
    for padding in [Padding::Same, Padding::Valid] {
        out.extend(conv_and_grads(
            d,
            &[2, 2, 5, 6],
            &[3, 2, 2, 4],
            true,
            &Conv2dOpts { padding, ..Default::default() },
        ));
    }
    out
});

test_device!(conv1d_views_and_dtypes, |d| {
    let x = values(&[2, 3, 12], 1, d);
    let w = values(&[4, 3, 3], 2, d);
    let b = values(&[4], 3, d);
    let o = Conv1dOpts { stride: [2], padding: Padding::Explicit([1]), dilation: [2], groups: 1 };
    let mut out = vec![F::conv1d(&x, &w, Some(&b), &o)];
    // Views: a transposed input (copied) and a narrowed batch (contiguous, at an offset).
    let x4 = values(&[3, 3, 7, 8], 5, d);
    let w4 = values(&[4, 3, 3, 3], 6, d);
    out.push(F::conv2d(&x4.transpose(2, 3), &w4, None, &opts([1, 1], [1, 1], [1, 1], 1)));
    out.push(F::conv2d(&x4.narrow(0, 1, 2), &w4, None, &opts([2, 1], [0, 1], [1, 1], 1)));
    out.push(F::conv2d(&x4, &w4.transpose(2, 3), None, &opts([1, 1], [1, 1], [1, 1], 1)));
    // f64, and the half dtypes computed in f32 and rounded once.
    for dtype in [DType::F64, DType::F16, DType::BF16] {
        out.push(F::conv2d(
            &x4.to_dtype(dtype),
            &w4.to_dtype(dtype),
            Some(&b.to_dtype(dtype)),
            &opts([1, 2], [1, 1], [1, 1], 1),
        ));
    }
    // Gradients in f64.
    let x = x4.to_dtype(DType::F64).requires_grad_(true);
    let w = values(&[6, 1, 2, 3], 7, d).to_dtype(DType::F64).requires_grad_(true);
    let y = F::conv2d(&x, &w, None, &opts([1, 2], [1, 1], [1, 1], 3));
    (&y * &y).sum().backward();
    out.extend([y.detach(), x.grad().expect("x's gradient"), w.grad().expect("w's gradient")]);
    out
});

test_device!(conv2d_second_order_gradients, |d| {
    let x = values(&[2, 4, 6, 5], 1, d).requires_grad_(true);
    let w = values(&[4, 2, 3, 2], 2, d).requires_grad_(true);
    let y = F::conv2d(&x, &w, None, &opts([2, 1], [1, 1], [1, 2], 2));
    let loss = (&y * &y).sum();
    let opts = GradOpts { retain_graph: true, create_graph: true, allow_unused: false };
    let g = kiln::autograd::grad(&[&loss], &[&x, &w], None, opts).expect("gradients");
    let (gx, gw) = (g[0].clone().expect("x's gradient"), g[1].clone().expect("w's gradient"));
    // Both gradients depend on x and w again: every product's backward runs.
    ((&gx * &gx).sum() + (&gw * &gw).sum()).backward();
    vec![gx.detach(), gw.detach(), x.grad().expect("x's second gradient"), w.grad().expect("w's second gradient")]
});

test_device!(adaptive_avg_pool_forward_and_gradients, |d| {
    let mut out = Vec::new();
    // Shrinking (overlapping windows), growing (repeated inputs), mixed, identity, global.
    for (shape, size) in [
        (vec![2, 3, 10, 7], [4, 3]),
        (vec![2, 3, 3, 5], [7, 8]),
        (vec![4, 9, 2], [4, 5]),
        (vec![1, 2, 6, 6], [6, 6]),
        (vec![2, 3, 7, 5], [1, 1]),
    ] {
        let x = values(&shape, 1, d).requires_grad_(true);
        let y = F::adaptive_avg_pool2d(&x, size);
        let loss = (&y * &y * values(y.shape(), 2, d)).sum();
        let opts = GradOpts { retain_graph: true, create_graph: true, allow_unused: false };
        let g =
            kiln::autograd::grad(&[&loss], &[&x], None, opts).expect("x's gradient").remove(0).expect("x's gradient");
        (&g * &g).sum().backward();
        out.extend([y.detach(), g.detach(), x.grad().expect("the second-order gradient")]);
    }
    // A narrowed batch (contiguous at an offset), a transposed view, f64 and the half dtypes.
    let x = values(&[3, 2, 9, 8], 3, d);
    out.push(F::adaptive_avg_pool2d(&x.narrow(0, 1, 2), [4, 3]));
    out.push(F::adaptive_avg_pool2d(&x.transpose(2, 3), [3, 5]));
    for dtype in [DType::F64, DType::F16, DType::BF16] {
        out.push(F::adaptive_avg_pool2d(&x.to_dtype(dtype), [5, 3]));
    }
    out
});

test_device!(mixed_devices_are_errors, |d| {
    if d.is_cuda() {
        let x = values(&[1, 2, 5, 5], 1, d);
        let w = values(&[3, 2, 3, 3], 2, Device::Cpu);
        let e = F::try_conv2d(&x, &w, None, &Conv2dOpts::default()).unwrap_err().to_string();
        assert!(
            e.starts_with("conv2d: expected all tensors to be on the same device, but found cuda:0 and cpu"),
            "{e}"
        );
        assert!(e.contains("tests/cuda_conv.rs:"), "the caller's line: {e}");
        let b = values(&[3], 3, Device::Cpu);
        let e = F::try_conv2d(&x, &w.to(&d), Some(&b), &Conv2dOpts::default()).unwrap_err().to_string();
        assert!(
            e.starts_with("conv2d: expected all tensors to be on the same device, but found cuda:0 and cpu"),
            "{e}"
        );
    }
    // Shape errors are the CPU's on every device.
    let e = F::try_conv2d(&values(&[1, 3, 5, 5], 1, d), &values(&[2, 2, 3, 3], 2, d), None, &Conv2dOpts::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(
            "conv2d: given groups=1, weight of size [2, 2, 3, 3], expected input [1, 3, 5, 5] to have 2 channels"
        ),
        "{e}"
    );
    assert!(e.contains("tests/cuda_conv.rs:"), "the caller's line: {e}");
    let e = F::try_adaptive_avg_pool2d(&values(&[5, 5], 1, d), [2, 2]).unwrap_err().to_string();
    assert!(e.starts_with("adaptive_avg_pool2d: expected 3D (unbatched) or 4D (batched) input"), "{e}");
    vec![]
});
