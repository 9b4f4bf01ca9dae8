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

/// `input · weightᵀ + bias` for input `(*, in)`, weight `(out, in)`, bias `(out)`.
#[track_caller]
pub fn linear(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Tensor {
    try_linear(input, weight, bias).or_panic()
}

/// [`linear`] returning an error naming the shapes that do not fit.
#[track_caller]
pub fn try_linear(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
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
        let err = try_linear(&Tensor::zeros(&[2, 3]), &Tensor::zeros(&[4, 5]), None).unwrap_err();
        assert!(err.to_string().contains("[2, 3]") && err.to_string().contains("[4, 5]"), "{err}");
        let y = linear(&Tensor::ones(&[2, 3]), &Tensor::ones(&[4, 3]), Some(&Tensor::ones(&[4])));
        assert_eq!(y.shape(), &[2, 4]);
        assert_eq!(y.to_vec::<f32>(), vec![4.0; 8]);
    }
}
