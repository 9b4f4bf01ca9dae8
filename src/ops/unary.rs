//! Unary elementwise ops (`exp`, `relu`, `gelu`, …) and their in-place forms.

use crate::error::{bail, OrPanic, Result};
use crate::tensor::Tensor;
use kiln_runtime::cpu::elementwise::{map1, map1_inplace};
use kiln_runtime::cpu::{vecmath, CpuBuf};
use kiln_runtime::op_kind::UnaryOp;
use kiln_runtime::storage::StorageElement;
use kiln_runtime::{match_cpu, DType, Element, FloatElement, Layout};

/// Element types with a unary kernel: floats compute in their compute type, integers and bools
/// in i64 (only for the ops that keep integer dtypes).
pub(crate) trait UnaryElement: StorageElement {
    /// `op` over `a`'s layout into a new contiguous buffer.
    fn unary(op: UnaryOp, a: &[Self], la: &Layout) -> CpuBuf<Self>;
    /// `dst = op(dst)` through `ld`.
    fn unary_inplace(op: UnaryOp, dst: &mut [Self], ld: &Layout);
}

macro_rules! float_unary_element {
    ($($t:ty),*) => {$(
        impl UnaryElement for $t {
            fn unary(op: UnaryOp, a: &[Self], la: &Layout) -> CpuBuf<Self> {
                macro_rules! go {
                    ($o:expr) => {
                        map1(a, la, |x: $t| <$t>::from_compute($o.eval(x.to_compute())))
                    };
                }
                all_unary_ops!(op, go)
            }
            fn unary_inplace(op: UnaryOp, dst: &mut [Self], ld: &Layout) {
                macro_rules! go {
                    ($o:expr) => {
                        map1_inplace(dst, ld, |x: $t| <$t>::from_compute($o.eval(x.to_compute())))
                    };
                }
                all_unary_ops!(op, go)
            }
        }
    )*};
}

macro_rules! int_unary_element {
    ($($t:ty),*) => {$(
        impl UnaryElement for $t {
            fn unary(op: UnaryOp, a: &[Self], la: &Layout) -> CpuBuf<Self> {
                map1(a, la, |x: $t| <$t>::from_i64(op.eval_int(x.to_i64())))
            }
            fn unary_inplace(op: UnaryOp, dst: &mut [Self], ld: &Layout) {
                map1_inplace(dst, ld, |x: $t| <$t>::from_i64(op.eval_int(x.to_i64())))
            }
        }
    )*};
}

macro_rules! all_unary_ops {
    ($op:expr, $go:ident) => {
        const_dispatch!($op, UnaryOp {
            Neg, Abs, Exp, Exp2, Log, Log2, Log1p, Expm1, Sqrt, Rsqrt, Sin, Cos, Tan, Tanh, Sigmoid,
            Relu, Gelu, GeluTanh, Silu, Softplus, Erf, Floor, Ceil, Round, Trunc, Sign, Reciprocal,
            Square
        }, $go)
    };
}

float_unary_element!(f32, f64, half::f16, half::bf16);
int_unary_element!(i64, i32, u8, bool);

/// The dtype `op` returns for an input of `dtype`.
#[track_caller]
fn unary_dtype(op: UnaryOp, dtype: DType) -> Result<DType> {
    if dtype == DType::Bool && op == UnaryOp::Neg {
        bail!("neg", DType, "negation, the `-` operator, on a bool tensor is not supported; use the `!` operator or logical_not() instead");
    }
    if dtype == DType::Bool && op == UnaryOp::Square {
        return Ok(DType::I64); // PyTorch squares bools as int64
    }
    Ok(if dtype.is_float() || op.keeps_int_dtype() { dtype } else { DType::F32 })
}

/// `op(x)` elementwise into a new tensor.
#[track_caller]
pub(crate) fn unary(op: UnaryOp, x: &Tensor) -> Result<Tensor> {
    let dt = unary_dtype(op, x.dtype())?;
    let x = x.try_to_dtype(dt)?;
    let out = x.with_cpu(op.name(), |s, l| {
        if let (Some(a), true) = (s.as_buf::<f32>(), l.is_contiguous() && l.numel() > 0) {
            let mut o = CpuBuf::<f32>::uninit(l.numel());
            if vecmath::unary_f32(op, &a[l.offset()..l.offset() + l.numel()], &mut o) {
                return f32::wrap(o);
            }
        }
        match_cpu!(s, |a: T| T::wrap(T::unary(op, a, l)))
    })?;
    Ok(Tensor::from_cpu_storage(out, x.shape()))
}

/// `x = op(x)` in place; an error when the result dtype differs (`exp_` on an integer tensor).
#[track_caller]
pub(crate) fn unary_inplace(op: UnaryOp, x: &Tensor) -> Result<()> {
    let dt = unary_dtype(op, x.dtype())?;
    if dt != x.dtype() {
        bail!(op.name(), DType, "result type {dt} can't be cast to the desired output type {}", x.dtype());
    }
    super::binary::check_writable(op.name(), x)?;
    x.with_cpu_mut(op.name(), |s, l| match_cpu!(s, |d: T| T::unary_inplace(op, d, l)))
}

macro_rules! unary_methods {
    ($($name:ident, $inplace:ident, $op:ident, $what:literal;)*) => {
        impl Tensor {$(
            #[doc = concat!("Elementwise ", $what, ".")]
            #[track_caller]
            pub fn $name(&self) -> Tensor {
                unary(UnaryOp::$op, self).or_panic()
            }

            #[doc = concat!("In-place [`Tensor::", stringify!($name), "`].")]
            #[track_caller]
            pub fn $inplace(&self) -> &Tensor {
                unary_inplace(UnaryOp::$op, self).or_panic();
                self
            }
        )*}
    };
}

unary_methods! {
    neg, neg_, Neg, "negation `-x`";
    abs, abs_, Abs, "absolute value";
    exp, exp_, Exp, "exponential `e^x`";
    exp2, exp2_, Exp2, "`2^x`";
    log, log_, Log, "natural logarithm";
    log2, log2_, Log2, "base-2 logarithm";
    log1p, log1p_, Log1p, "`ln(1 + x)`, accurate near 0";
    expm1, expm1_, Expm1, "`e^x - 1`, accurate near 0";
    sqrt, sqrt_, Sqrt, "square root";
    rsqrt, rsqrt_, Rsqrt, "reciprocal square root `1/√x`";
    sin, sin_, Sin, "sine";
    cos, cos_, Cos, "cosine";
    tan, tan_, Tan, "tangent";
    tanh, tanh_, Tanh, "hyperbolic tangent";
    sigmoid, sigmoid_, Sigmoid, "logistic sigmoid `1/(1+e^-x)`";
    relu, relu_, Relu, "rectified linear unit `max(x, 0)`";
    gelu, gelu_, Gelu, "GELU, exact form `x·Φ(x)` (`F.gelu(x)`)";
    gelu_tanh, gelu_tanh_, GeluTanh, "GELU, tanh approximation (`F.gelu(x, approximate='tanh')`)";
    silu, silu_, Silu, "SiLU (swish) `x·sigmoid(x)`";
    softplus, softplus_, Softplus, "softplus `ln(1+e^x)` with PyTorch's defaults (β=1, threshold 20)";
    erf, erf_, Erf, "error function";
    floor, floor_, Floor, "round toward −∞";
    ceil, ceil_, Ceil, "round toward +∞";
    round, round_, Round, "round half to even";
    trunc, trunc_, Trunc, "round toward zero";
    sign, sign_, Sign, "sign (−1, 0 or 1)";
    reciprocal, reciprocal_, Reciprocal, "reciprocal `1/x`";
    square, square_, Square, "square `x²`";
}

impl std::ops::Neg for &Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        unary(UnaryOp::Neg, self).or_panic()
    }
}

impl std::ops::Neg for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        unary(UnaryOp::Neg, &self).or_panic()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtype_rules() {
        let i = Tensor::new(&[-2i64, 3]);
        assert_eq!(i.abs().to_vec::<i64>(), vec![2, 3]);
        assert_eq!(i.exp().dtype(), DType::F32);
        assert_eq!(i.sqrt().dtype(), DType::F32);
        assert!(std::panic::catch_unwind(|| {
            i.exp_();
        })
        .is_err());
        assert!(std::panic::catch_unwind(|| -Tensor::new(&[true])).is_err());
        let h = Tensor::new(&[1.0f32, 4.0]).to_dtype(DType::BF16).sqrt();
        assert_eq!(h.dtype(), DType::BF16);
        assert_eq!(h.to_dtype(DType::F32).to_vec::<f32>(), vec![1.0, 2.0]);
    }

    #[test]
    fn values_on_views() {
        let x = Tensor::new(&[[0.0f64, 1.0], [-1.0, 2.0]]).t();
        assert_eq!(x.relu().to_vec::<f64>(), vec![0.0, 0.0, 1.0, 2.0]);
        assert_eq!((-&x).to_vec::<f64>(), vec![-0.0, 1.0, -1.0, -2.0]);
        x.exp_();
        assert!((x.to_vec::<f64>()[1] - (-1.0f64).exp()).abs() < 1e-15);
    }
}
