//! Activations and `linear` as free functions (`F.relu(x)`, `F.linear(x, w, b)`).

use crate::error::{bail, OrPanic, Result};
use crate::Tensor;

/// `max(x, 0)`.
#[track_caller]
pub fn relu(input: &Tensor) -> Tensor {
    input.relu()
}

macro_rules! composite_functions {
    ($($name:ident ($($p:ident = $default:literal),*) [$($module:ident)?] $compute:ident $doc:literal |$x:ident| $body:expr $(, fast $fast:tt)?;)*) => {$(
        composite_function!([$($module)?] $name ($($p),*) $doc);
    )*};
}

/// The `F::` function of one composite row; none for an op without a module (`isnan`).
macro_rules! composite_function {
    ([] $($rest:tt)*) => {};
    ([$module:ident] $name:ident ($($p:ident),*) $doc:literal) => {
        #[doc = concat!($doc, " (`F.", stringify!($name), "`; [`Tensor::", stringify!($name), "`]).")]
        #[track_caller]
        pub fn $name(input: &Tensor, $($p: f64),*) -> Tensor {
            input.$name($($p),*)
        }
    };
}

crate::ops::composite_unary_table!(composite_functions);

/// GELU, exact form `x·Φ(x)`.
#[track_caller]
pub fn gelu(input: &Tensor) -> Tensor {
    input.gelu()
}

/// GELU, tanh approximation (`F.gelu(x, approximate='tanh')`).
#[track_caller]
pub fn gelu_tanh(input: &Tensor) -> Tensor {
    input.gelu_tanh()
}

/// Logistic sigmoid.
#[track_caller]
pub fn sigmoid(input: &Tensor) -> Tensor {
    input.sigmoid()
}

/// Hyperbolic tangent.
#[track_caller]
pub fn tanh(input: &Tensor) -> Tensor {
    input.tanh()
}

/// The gated linear unit along `dim`: the first half times the sigmoid of the second
/// (`F.glu(x, dim)`; PyTorch's default dim is -1).
#[track_caller]
pub fn glu(input: &Tensor, dim: i64) -> Tensor {
    try_glu(input, dim).or_panic()
}

/// [`glu`] returning an error for a bad dim or an odd size along it.
#[track_caller]
pub fn try_glu(input: &Tensor, dim: i64) -> Result<Tensor> {
    let d = input.normalize_dim("glu", dim)?;
    let n = input.shape().get(d).copied().unwrap_or(1);
    if n % 2 != 0 || input.dim() == 0 {
        bail!(
            "glu",
            Shape,
            "Halving dimension must be even, but dimension {d} is size {n} (input shape {:?})",
            input.shape()
        );
    }
    let (a, b) = (input.narrow(d as i64, 0, n / 2), input.narrow(d as i64, (n / 2) as i64, n / 2));
    a.try_mul(b.sigmoid())
}

/// `x` where `x > 0`, `weight · x` elsewhere, with one weight per channel (dim 1) or one for
/// all (`F.prelu(x, weight)`).
#[track_caller]
pub fn prelu(input: &Tensor, weight: &Tensor) -> Tensor {
    try_prelu(input, weight).or_panic()
}

/// [`prelu`] returning an error when the weight has neither one element nor one per channel.
#[track_caller]
pub fn try_prelu(input: &Tensor, weight: &Tensor) -> Result<Tensor> {
    if let Some(c) = crate::amp::autocast::operands("prelu", &[Some(input), Some(weight)])? {
        return try_prelu(c.arg(0), c.arg(1));
    }
    let channels = if input.dim() >= 2 { input.shape()[1] } else { 1 };
    if weight.dim() > 1 || (weight.numel() != 1 && weight.numel() != channels) {
        bail!(
            "prelu",
            Shape,
            "Mismatch of parameter numbers and input channel size. Found parameter numbers = {} and channel size = {channels} (input shape {:?}, weight shape {:?})",
            weight.numel(),
            input.shape(),
            weight.shape()
        );
    }
    // One weight per channel, broadcast along dim 1 of the input.
    let w = if weight.numel() == 1 || input.dim() < 2 {
        weight.reshape(())
    } else {
        let mut along = vec![1i64; input.dim() - 1];
        along[0] = channels as i64;
        weight.reshape(&along)
    };
    Tensor::try_where(&input.gt(0.0), input, input.try_mul(&w)?)
}

/// `input · weightᵀ + bias` for input `(*, in)`, weight `(out, in)`, bias `(out)`.
#[track_caller]
pub fn linear(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Tensor {
    try_linear(input, weight, bias).or_panic()
}

/// [`linear`] returning an error naming the shapes that do not fit.
#[track_caller]
pub fn try_linear(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    if let Some(c) = crate::amp::autocast::operands("linear", &[Some(input), Some(weight), bias])? {
        return try_linear(c.arg(0), c.arg(1), c.opt(2));
    }
    let (x, w) = (input.shape(), weight.shape());
    if w.len() != 2 || x.is_empty() || x[x.len() - 1] != w[1] {
        bail!(
            "linear",
            Shape,
            "input of shape {x:?} cannot be multiplied by a weight of shape {w:?} (expected input (*, {}))",
            w.get(1).copied().unwrap_or(0)
        );
    }
    if let Some(b) = bias {
        if b.shape() != [w[0]] {
            bail!(
                "linear",
                Shape,
                "bias of shape {:?} does not fit a weight of shape {w:?} (expected [{}])",
                b.shape(),
                w[0]
            );
        }
    }
    let y = input.try_matmul(&weight.t())?;
    match bias {
        Some(b) => y.try_add(b),
        None => Ok(y),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaky_relu_scales_negatives_only() {
        let x = Tensor::from_slice(&[-2.0f32, 0.0, 3.0]);
        assert_eq!(leaky_relu(&x, 0.1).to_vec::<f32>(), vec![-0.2, 0.0, 3.0]);
    }

    #[test]
    fn linear_checks_shapes() {
        let err = try_linear(&Tensor::zeros([2, 3]), &Tensor::zeros([4, 5]), None).unwrap_err();
        assert!(err.to_string().contains("[2, 3]") && err.to_string().contains("[4, 5]"), "{err}");
        let y = linear(&Tensor::ones([2, 3]), &Tensor::ones([4, 3]), Some(&Tensor::ones([4])));
        assert_eq!(y.shape(), &[2, 4]);
        assert_eq!(y.to_vec::<f32>(), vec![4.0; 8]);
    }
}
