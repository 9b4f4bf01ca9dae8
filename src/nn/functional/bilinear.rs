//! The bilinear map `bilinear` (`torch.nn.functional.bilinear`): `y = x1ᵀ·A·x2 + b`, as one
//! matrix product and a weighted sum.

use crate::error::{bail, OrPanic, Result};
use crate::tensor::Tensor;

/// `y[..., o] = Σ_ij input1[..., i] · weight[o, i, j] · input2[..., j] + bias[o]`
/// (`F.bilinear`): `input1` `(*, in1)`, `input2` `(*, in2)` with the same leading dims,
/// `weight` `(out, in1, in2)`, `bias` `(out)`; the output is `(*, out)`. Panics with the op and
/// the shapes on a mismatch.
#[track_caller]
pub fn bilinear(input1: &Tensor, input2: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Tensor {
    try_bilinear(input1, input2, weight, bias).or_panic()
}

/// [`bilinear`] returning an error for mismatched shapes, dtypes or devices.
#[track_caller]
pub fn try_bilinear(input1: &Tensor, input2: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    check("bilinear", input1, input2, weight, bias)?;
    let (out, in1, in2) = (weight.shape()[0] as i64, weight.shape()[1] as i64, weight.shape()[2] as i64);
    let lead = &input1.shape()[..input1.dim() - 1];
    let rows = lead.iter().product::<usize>() as i64;
    // (B, in1) · (in1, out·in2) → (B, out, in2), weighted by x2 and summed over in2.
    let a = weight.permute(&[1, 0, 2]).reshape([in1, out * in2]);
    let t = input1.reshape([rows, in1]).matmul(&a).view([rows, out, in2]);
    let y = (&t * &input2.reshape([rows, 1, in2])).sum_dim(-1);
    let y = match bias {
        Some(b) => &y + b,
        None => y,
    };
    let mut shape: Vec<i64> = lead.iter().map(|&d| d as i64).collect();
    shape.push(out);
    Ok(y.view(&shape))
}

/// PyTorch's checks of `F.bilinear`, with every shape in the message.
#[track_caller]
fn check(op: &'static str, x1: &Tensor, x2: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<()> {
    let shapes = || format!("input1 {:?}, input2 {:?}, weight {:?}", x1.shape(), x2.shape(), w.shape());
    x1.check_same_device(op, x2)?;
    x1.check_same_device(op, w)?;
    if w.dim() != 3 {
        bail!(op, Shape, "expected a 3-D weight (out, in1, in2), but got {}", shapes());
    }
    if x1.dim() == 0 || x1.dim() != x2.dim() || x1.shape()[..x1.dim() - 1] != x2.shape()[..x2.dim() - 1] {
        bail!(
            op,
            Shape,
            "input1 and input2 must have the same size except for the last dimension, but got {}",
            shapes()
        );
    }
    if x1.shape()[x1.dim() - 1] != w.shape()[1] || x2.shape()[x2.dim() - 1] != w.shape()[2] {
        bail!(op, Shape, "the last dims of input1 and input2 must be the weight's dims 1 and 2, but got {}", shapes());
    }
    if x1.dtype() != w.dtype() || x2.dtype() != w.dtype() {
        bail!(
            op,
            DType,
            "expected one dtype, but got {}, {} and weight {} ({})",
            x1.dtype(),
            x2.dtype(),
            w.dtype(),
            shapes()
        );
    }
    if !w.dtype().is_float() {
        bail!(op, DType, "not implemented for dtype {} ({})", w.dtype(), shapes());
    }
    if let Some(b) = bias {
        x1.check_same_device(op, b)?;
        if b.shape() != [w.shape()[0]] || b.dtype() != w.dtype() {
            bail!(
                op,
                Shape,
                "expected a {} bias of shape [{}], but got {} {:?} ({})",
                w.dtype(),
                w.shape()[0],
                b.dtype(),
                b.shape(),
                shapes()
            );
        }
    }
    Ok(())
}
