//! Unary elementwise ops (`exp`, `relu`, `gelu`, …) and their in-place forms.

use super::{elementwise, Backend};
use crate::autograd::{self, grads, Saved};
use crate::error::{bail, OrPanic, Result};
use crate::tensor::Tensor;
use kiln_codegen::cuda::EagerOp;
use kiln_codegen::ir::NodeKind;
use kiln_runtime::cpu::elementwise::{map1, map1_inplace};
use kiln_runtime::cpu::simd::vecmath;
use kiln_runtime::cpu::CpuBuf;
use kiln_runtime::op_kind::{UnaryOp, UnarySaves};
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
                kiln_runtime::unary_op_table!(dispatch_unary, op, go)
            }
            fn unary_inplace(op: UnaryOp, dst: &mut [Self], ld: &Layout) {
                macro_rules! go {
                    ($o:expr) => {
                        map1_inplace(dst, ld, |x: $t| <$t>::from_compute($o.eval(x.to_compute())))
                    };
                }
                kiln_runtime::unary_op_table!(dispatch_unary, op, go)
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

/// `match op { UnaryOp::X => go!(UnaryOp::X), … }` over every row of the unary op table (each
/// op's kernel monomorphized): `kiln_runtime::unary_op_table!(dispatch_unary, op, go)`.
macro_rules! dispatch_unary {
    (($op:expr, $go:ident) $($v:ident $name:literal $int:ident $saves:ident $grad_fn:literal [$($m:ident)*] $doc:literal;)*) => {
        match $op {
            $(UnaryOp::$v => $go!(UnaryOp::$v),)*
        }
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
    if op.is_int_only() && dtype.is_float() {
        bail!(
            op.name(),
            DType,
            "\"{}_cpu\" not implemented for '{}'",
            op.name(),
            super::reduce::scalar_type_name(dtype)
        );
    }
    if dtype == DType::Bool && op == UnaryOp::Square {
        return Ok(DType::I64); // PyTorch squares bools as int64
    }
    Ok(if dtype.is_float() || op.keeps_int_dtype() { dtype } else { DType::F32 })
}

/// `op(x)` elementwise into a new tensor.
#[track_caller]
pub(crate) fn unary(op: UnaryOp, x: &Tensor) -> Result<Tensor> {
    if let Some(c) = crate::amp::autocast::operands(op.name(), &[Some(x)])? {
        return unary(op, c.arg(0));
    }
    let dt = unary_dtype(op, x.dtype())?;
    let x = x.try_to_dtype(dt)?;
    let out = elementwise(
        op.name(),
        NodeKind::Unary(op),
        EagerOp::Unary(op),
        &[(&x, x.layout().clone())],
        x.shape(),
        (dt, dt),
        || unary_cpu(op, &x),
    )?;
    if autograd::is_recording(&[&x]) {
        return Ok(record_unary(op, &x, out));
    }
    Ok(out)
}

/// The CPU kernel of [`unary`] (`x` already of the result dtype; [`elementwise`] has reserved
/// the output's memory).
fn unary_cpu(op: UnaryOp, x: &Tensor) -> Result<Tensor> {
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

/// Records `out = op(x)` with its backward rule.
#[track_caller]
fn record_unary(op: UnaryOp, x: &Tensor, out: Tensor) -> Tensor {
    let saved = match op.saves() {
        UnarySaves::Input => Some(Saved::of(x)),
        UnarySaves::Output => Some(Saved::Output),
        UnarySaves::Nothing => None,
    };
    autograd::record(out, op.grad_fn_name(), &[x], saved, move |_, g, s| grads![Some(unary_grad(op, g, s.first()))])
}

/// The gradient of `op` at the saved tensor `s` (the input or the output, as
/// [`UnaryOp::saves`] says), written with tensor ops so that it is differentiable again.
fn unary_grad(op: UnaryOp, g: &Tensor, s: Option<&Tensor>) -> Tensor {
    use std::f64::consts::{FRAC_1_SQRT_2, FRAC_2_SQRT_PI, LN_2, PI};
    use UnaryOp::*;
    let Some(s) = s else {
        return match op {
            Neg => -g,
            _ => g.zeros_like(), // floor, ceil, round, trunc, sign: piecewise constant
        };
    };
    match op {
        Abs => g * s.sign(),
        Exp => g * s,
        Exp2 => g * s * LN_2,
        Log => g / s,
        Log2 => g / (s * LN_2),
        Log1p => g / (s + 1.0),
        Expm1 => g * (s + 1.0),
        Sqrt => g / (s * 2.0),
        Rsqrt => g * s.pow(3.0) * -0.5,
        Sin => g * s.cos(),
        Cos => -(g * s.sin()),
        Tan => g * (s.square() + 1.0),
        Tanh => g * (1.0 - s.square()),
        Asin => g / (1.0 - s.square()).sqrt(),
        Acos => -(g / (1.0 - s.square()).sqrt()),
        Atan => g / (s.square() + 1.0),
        Sinh => g * s.cosh(),
        Cosh => g * s.sinh(),
        Asinh => g / (s.square() + 1.0).sqrt(),
        Acosh => g / (s.square() - 1.0).sqrt(),
        Atanh => g / (1.0 - s.square()),
        Sigmoid => g * s * (1.0 - s),
        Relu => Tensor::where_cond(&s.gt(0.0), g, 0.0),
        Gelu => {
            let cdf = (s * FRAC_1_SQRT_2).erf() * 0.5 + 0.5;
            let pdf = (s.square() * -0.5).exp() * (1.0 / (2.0 * PI).sqrt());
            g * (cdf + s * pdf)
        }
        Erf => g * (s.square().neg().exp() * FRAC_2_SQRT_PI),
        Reciprocal => -(g * s.square()),
        Square => g * s * 2.0,
        Neg | Floor | Ceil | Round | Trunc | Sign | BitNot => unreachable!("these rules save nothing"),
    }
}

/// `x = op(x)` in place; an error when the result dtype differs (`exp_` on an integer tensor).
#[track_caller]
pub(crate) fn unary_inplace(op: UnaryOp, x: &Tensor) -> Result<()> {
    let dt = unary_dtype(op, x.dtype())?;
    if dt != x.dtype() {
        bail!(op.name(), DType, "result type {dt} can't be cast to the desired output type {}", x.dtype());
    }
    if autograd::is_recording(&[x]) {
        return autograd::inplace(op.name(), x, |old| unary(op, old));
    }
    super::binary::check_writable(op.name(), x)?;
    match Backend::of(op.name(), &[x])? {
        Backend::Capture => {
            crate::capture::assign(x, &unary(op, x)?);
            Ok(())
        }
        // Out of place, then copied into the view.
        Backend::Cuda => x.try_copy_(&unary(op, &x.detach())?).map(|_| ()),
        Backend::Cpu => x.with_cpu_mut(op.name(), |s, l| match_cpu!(s, |d: T| T::unary_inplace(op, d, l))),
    }
}

macro_rules! unary_methods {
    ($($op:ident $name:literal $int:ident $saves:ident $grad_fn:literal [$($method:ident $inplace:ident)?] $doc:literal;)*) => {
        impl Tensor {$($(
            #[doc = concat!("Elementwise ", $doc, " (`torch.", $name, "`).")]
            #[track_caller]
            pub fn $method(&self) -> Tensor {
                unary(UnaryOp::$op, self).or_panic()
            }

            #[doc = concat!("In-place [`Tensor::", stringify!($method), "`].")]
            #[track_caller]
            pub fn $inplace(&self) -> &Tensor {
                unary_inplace(UnaryOp::$op, self).or_panic();
                self
            }
        )?)*}

        /// Every unary op with generated methods: the op, its method and its in-place method
        /// (for tests that go through each op's public name).
        #[doc(hidden)]
        pub const UNARY_METHODS: &[(UnaryOp, fn(&Tensor) -> Tensor, fn(&Tensor) -> &Tensor)] =
            &[$($((UnaryOp::$op, Tensor::$method, Tensor::$inplace),)?)*];
    };
}

kiln_runtime::unary_op_table!(unary_methods);

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
