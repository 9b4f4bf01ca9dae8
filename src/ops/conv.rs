//! The three differentiable products of a convolution, each the others' backward:
//!
//! - [`forward`]`(x, w)`: the convolution `y = conv(x, w) (+ b)`;
//! - [`input_grad`]`(gy, w)`: `gx = convᵀ(gy, w)`, the transposed convolution (col2im of `Wᵀ·gy`);
//! - [`weight_grad`]`(x, gy)`: `gw = Σ_n gy·im2col(x)ᵀ`.
//!
//! All three are bilinear, and the adjoint identities `<gy, conv(x, w)> = <convᵀ(gy, w), x> =
//! <gw(x, gy), w>` give every derivative of each as one of the three again: the backward of
//! `forward` is `(input_grad(g, w), weight_grad(x, g), Σ g)`, that of `input_grad` is
//! `(forward(G, w), weight_grad(G, gy))`, and that of `weight_grad` is `(input_grad(gy, H),
//! forward(x, H))`. So gradients of any order work, with groups, stride, padding and dilation.

use super::kernel_op;
use crate::autograd::{self, grads, Saved};
use crate::error::{bail, Result};
use crate::tensor::Tensor;
use kiln_runtime::cpu::conv::{self as kernels, ConvGeom};
use kiln_runtime::dtype::num_like::Float;
use kiln_runtime::storage::StorageElement;
use kiln_runtime::DType;
use std::sync::Arc;

/// One convolution: its kernel geometry and the shapes of its input, weight and output as the
/// caller sees them (unbatched and 1-d shapes included: the kernel reads the same memory as
/// `(N, C, H, W)` with `N = 1` or `H = 1`).
#[derive(Debug)]
pub(crate) struct Conv {
    pub geom: ConvGeom,
    pub x_shape: Vec<usize>,
    pub w_shape: Vec<usize>,
    pub y_shape: Vec<usize>,
    /// The output's channel dim (0 unbatched, else 1): the bias gradient sums every other dim.
    pub channel_dim: usize,
}

/// Which product a kernel call computes.
#[derive(Clone, Copy)]
enum Product {
    Forward,
    InputGrad,
    WeightGrad,
}

/// Node name of the two backward products (PyTorch's `convolution_backward`, differentiated).
const BACKWARD_BACKWARD: &str = "ConvolutionBackwardBackward0";

/// The convolution of `x` by `w` (plus `bias`), recording `ConvolutionBackward0`.
#[track_caller]
pub(crate) fn forward(c: &Arc<Conv>, x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    let out = launch(Product::Forward, c, x, w, bias, &c.y_shape)?;
    let mut inputs = vec![x, w];
    inputs.extend(bias);
    if !autograd::is_recording(&inputs) {
        return Ok(out);
    }
    let (c, has_bias) = (c.clone(), bias.is_some());
    let saved = [Saved::of(x), Saved::of(w)];
    Ok(autograd::record(out, "ConvolutionBackward0", &inputs, saved, move |ctx, g, s| {
        let (x, w) = (&s[0], &s[1]);
        let gx = ctx.needs_input_grad(0).then(|| input_grad(&c, g, w).expect("conv input gradient"));
        let gw = ctx.needs_input_grad(1).then(|| weight_grad(&c, x, g).expect("conv weight gradient"));
        let gb = (has_bias && ctx.needs_input_grad(2)).then(|| {
            let dims: Vec<i64> = (0..g.dim() as i64).filter(|&d| d != c.channel_dim as i64).collect();
            g.sum_dim(dims)
        });
        let mut out = grads![gx, gw];
        if has_bias {
            out.push(gb);
        }
        out
    }))
}

/// The transposed convolution `convᵀ(gy, w)` (the gradient of `forward` with respect to its
/// input), of the input's shape.
#[track_caller]
pub(crate) fn input_grad(c: &Arc<Conv>, gy: &Tensor, w: &Tensor) -> Result<Tensor> {
    let out = launch(Product::InputGrad, c, gy, w, None, &c.x_shape)?;
    if !autograd::is_recording(&[gy, w]) {
        return Ok(out);
    }
    let c = c.clone();
    Ok(autograd::record(out, BACKWARD_BACKWARD, &[gy, w], [Saved::of(gy), Saved::of(w)], move |ctx, g, s| {
        let (gy, w) = (&s[0], &s[1]);
        grads![
            ctx.needs_input_grad(0).then(|| forward(&c, g, w, None).expect("conv forward")),
            ctx.needs_input_grad(1).then(|| weight_grad(&c, g, gy).expect("conv weight gradient")),
        ]
    }))
}

/// `Σ_n gy·im2col(x)ᵀ` (the gradient of `forward` with respect to its weight), of the
/// weight's shape.
#[track_caller]
pub(crate) fn weight_grad(c: &Arc<Conv>, x: &Tensor, gy: &Tensor) -> Result<Tensor> {
    let out = launch(Product::WeightGrad, c, x, gy, None, &c.w_shape)?;
    if !autograd::is_recording(&[x, gy]) {
        return Ok(out);
    }
    let c = c.clone();
    Ok(autograd::record(out, BACKWARD_BACKWARD, &[x, gy], [Saved::of(x), Saved::of(gy)], move |ctx, g, s| {
        let (x, gy) = (&s[0], &s[1]);
        grads![
            ctx.needs_input_grad(0).then(|| input_grad(&c, gy, g).expect("conv input gradient")),
            ctx.needs_input_grad(1).then(|| forward(&c, x, g, None).expect("conv forward")),
        ]
    }))
}

/// Runs one product on contiguous copies of its operands (without recording), as a new
/// tensor of `shape`, on the operands' device. Operands have one float dtype (f32 or f64), checked by the caller.
/// Inside a compiled step the kernel call is an opaque node, run on the realized operands.
#[track_caller]
fn launch(p: Product, c: &Conv, a: &Tensor, b: &Tensor, bias: Option<&Tensor>, shape: &[usize]) -> Result<Tensor> {
    let dtype = a.dtype();
    if !matches!(dtype, DType::F32 | DType::F64) {
        bail!("convolution", DType, "not implemented for dtype {dtype}");
    }
    let name = match p {
        Product::Forward => "conv2d_forward",
        Product::InputGrad => "conv2d_backward_input",
        Product::WeightGrad => "conv2d_backward_weight",
    };
    let mut inputs = vec![a, b];
    inputs.extend(bias);
    let (geom, out_shape) = (c.geom, shape.to_vec());
    let cpu = move |ins: &[Tensor]| launch_cpu(p, &geom, &ins[0], &ins[1], ins.get(2), &out_shape);
    let (geom, out_shape) = (c.geom, shape.to_vec());
    let cuda = move |ins: &[Tensor]| launch_cuda(p, &geom, &ins[0], &ins[1], ins.get(2), &out_shape);
    kernel_op(name, &inputs, (shape, dtype), cpu, cuda)
}

/// [`launch`]'s CUDA kernels on realized operands (`crate::cuda::conv`'s columns and cuBLAS
/// products), the result shaped `shape`.
fn launch_cuda(
    p: Product,
    g: &ConvGeom,
    a: &Tensor,
    b: &Tensor,
    bias: Option<&Tensor>,
    shape: &[usize],
) -> Result<Tensor> {
    let _off = autograd::no_grad_guard();
    let out = match p {
        Product::Forward => crate::cuda::conv::forward(g, a, b, bias)?,
        Product::InputGrad => crate::cuda::conv::input_grad(g, a, b)?,
        Product::WeightGrad => crate::cuda::conv::weight_grad(g, a, b)?,
    };
    out.try_reshape(shape.iter().map(|&d| d as i64).collect::<Vec<_>>())
}

/// [`launch`]'s CPU kernels on realized operands, the result shaped `shape`.
fn launch_cpu(
    p: Product,
    g: &ConvGeom,
    a: &Tensor,
    b: &Tensor,
    bias: Option<&Tensor>,
    shape: &[usize],
) -> Result<Tensor> {
    let _off = autograd::no_grad_guard();
    let a = a.contiguous();
    // Each operand is read under its own storage lock: one sharing storage with an earlier one
    // (`conv2d(&x, &x, ..)`) is copied, so that no lock is taken twice by this thread.
    let own = |t: &Tensor, others: &[&Tensor]| {
        if others.iter().any(|o| o.shares_storage_with(t)) {
            t.deep_clone()
        } else {
            t.contiguous()
        }
    };
    let b = own(b, &[&a]);
    let bias = bias.map(|t| own(t, &[&a, &b]));
    match a.dtype() {
        DType::F32 => Ok(run::<f32>(p, g, &a, &b, bias.as_ref(), shape)),
        DType::F64 => Ok(run::<f64>(p, g, &a, &b, bias.as_ref(), shape)),
        d => bail!("convolution", DType, "not implemented for dtype {d}"),
    }
}

fn run<T: Float + StorageElement>(
    p: Product,
    g: &ConvGeom,
    a: &Tensor,
    b: &Tensor,
    bias: Option<&Tensor>,
    shape: &[usize],
) -> Tensor {
    let (sa, sb) = (a.as_slice::<T>(), b.as_slice::<T>());
    let sbias = bias.map(|t| t.as_slice::<T>());
    let buf = match p {
        Product::Forward => kernels::conv2d_forward(g, &sa, &sb, sbias.as_deref()),
        Product::InputGrad => kernels::conv2d_backward_input(g, &sa, &sb),
        Product::WeightGrad => kernels::conv2d_backward_weight(g, &sa, &sb),
    };
    Tensor::from_buf(buf, shape)
}
