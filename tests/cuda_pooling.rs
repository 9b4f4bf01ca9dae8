//! `max_pool2d` (values and indices) and `avg_pool2d` on CUDA tensors against the CPU
//! (`test_device!`): padding, stride, dilation, ceil mode, the divisor rules, NaN and ties,
//! transposed and sliced inputs, unbatched input, f64/f16/bf16, first and second gradients.
//! (`adaptive_avg_pool2d` is tested beside the convolutions, in `cuda_conv.rs`.)

#[path = "common/device.rs"]
#[macro_use]
mod device;

use kiln::autograd::GradOpts;
use kiln::nn::functional as F;
use kiln::nn::functional::{AvgPool2dOpts, MaxPool2dOpts};
use kiln::{DType, Device, Tensor};

/// A `shape` tensor on `d` with ties (a short cycle of quarters) and, when `nan`, a NaN every
/// 97 elements.
fn image(shape: &[usize], nan: bool, d: Device) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> =
        (0..n).map(|i| if nan && i % 97 == 13 { f32::NAN } else { ((i * 29 + 7) % 23) as f32 * 0.25 - 2.0 }).collect();
    Tensor::from_vec(v, shape).to(&d)
}

/// Max-pool options: window `k`, stride `s`, padding `p`, dilation `dil`, ceil mode `ceil`.
fn max_opts(k: [usize; 2], s: [usize; 2], p: [usize; 2], dil: [usize; 2], ceil: bool) -> MaxPool2dOpts {
    MaxPool2dOpts { kernel_size: k, stride: Some(s), padding: p, dilation: dil, ceil_mode: ceil }
}

/// Average-pool options: window `k`, stride `s`, padding `p`, ceil mode, whether the padding
/// counts, and a divisor override.
fn avg_opts(
    k: [usize; 2],
    s: [usize; 2],
    p: [usize; 2],
    ceil: bool,
    count_include_pad: bool,
    divisor_override: Option<usize>,
) -> AvgPool2dOpts {
    AvgPool2dOpts { kernel_size: k, stride: Some(s), padding: p, ceil_mode: ceil, count_include_pad, divisor_override }
}

test_device!(max_pool_values_and_indices, |d| {
    let x = image(&[2, 3, 11, 9], true, d);
    let mut out = vec![F::max_pool2d(&x, 2), F::max_pool2d(&image(&[4, 28, 28], true, d), 2)];
    for o in [
        max_opts([3, 3], [2, 2], [1, 1], [1, 1], false),
        max_opts([3, 2], [2, 3], [1, 1], [2, 3], false),
        max_opts([2, 2], [2, 2], [0, 0], [1, 1], true),
        max_opts([3, 3], [2, 1], [1, 0], [1, 2], true),
    ] {
        let (v, i) = F::max_pool2d_with_indices(&x, &o);
        out.extend([v, i]);
    }
    // Views: H and W swapped, a narrowed batch; f64 and the half dtypes (computed in f32).
    let (v, i) =
        F::max_pool2d_with_indices(&x.transpose(2, 3).narrow(0, 1, 1), &max_opts([3, 3], [2, 2], [1, 1], [1, 1], true));
    out.extend([v, i]);
    for dtype in [DType::F64, DType::F16, DType::BF16] {
        out.push(F::max_pool2d_opts(&x.to_dtype(dtype), &max_opts([3, 3], [2, 2], [1, 1], [1, 1], false)));
    }
    out
});

test_device!(avg_pool_divisors_and_views, |d| {
    let x = image(&[2, 3, 11, 9], false, d);
    let mut out = vec![F::avg_pool2d(&x, 2), F::avg_pool2d(&image(&[3, 7, 7], true, d), 3)];
    for o in [
        avg_opts([3, 3], [2, 2], [1, 1], false, true, None),
        avg_opts([3, 3], [2, 2], [1, 1], false, false, None),
        avg_opts([3, 2], [2, 1], [1, 1], true, true, None),
        avg_opts([3, 2], [2, 1], [1, 1], true, false, None),
        avg_opts([2, 2], [1, 2], [1, 0], false, true, Some(3)),
    ] {
        out.push(F::avg_pool2d_opts(&x, &o));
    }
    out.push(F::avg_pool2d_opts(&x.transpose(2, 3), &avg_opts([2, 3], [2, 2], [1, 1], true, false, None)));
    // A narrowed batch: contiguous, but at an offset into its storage.
    out.push(F::avg_pool2d(&x.narrow(0, 1, 1), 2));
    out.push(F::max_pool2d(&x.narrow(0, 1, 1), 2));
    for dtype in [DType::F64, DType::F16, DType::BF16] {
        out.push(F::avg_pool2d_opts(&x.to_dtype(dtype), &avg_opts([3, 3], [2, 2], [1, 1], false, true, None)));
    }
    out
});

test_device!(pooling_gradients_of_first_and_second_order, |d| {
    let x = image(&[2, 2, 9, 8], false, d).requires_grad_(true);
    let gy = |shape: &[usize]| image(shape, false, d);
    // Overlapping max windows: an input element can be the argmax of several windows.
    let m = F::max_pool2d_opts(&x, &max_opts([3, 3], [2, 2], [1, 1], [1, 1], true));
    let a = F::avg_pool2d_opts(&x, &avg_opts([3, 2], [2, 1], [1, 1], true, false, None));
    // Squares, so that the gradient depends on x and has a gradient of its own.
    let loss = (&m * &m * gy(m.shape())).sum() + (&a * &a * gy(a.shape())).sum();
    let opts = GradOpts { retain_graph: true, create_graph: true, allow_unused: false };
    let g = kiln::autograd::grad(&[&loss], &[&x], None, opts).expect("x's gradient").remove(0).expect("x's gradient");
    // The gradient's own gradient: gather at the argmax and the average again.
    (&g * &g).sum().backward();
    vec![m, a, g, x.grad().expect("the second-order gradient")]
});
