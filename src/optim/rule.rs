//! Values an optimizer's update rule computes with, so that each rule is written once and runs
//! two ways: on whole tensors, op by op (PyTorch's single-tensor formula; inside
//! `kiln::compile` these ops are captured and fused), and on one element at a time of numbers,
//! inside the one-pass kernel of [`super::fused`]. Every operation on numbers is the tensor
//! op's own arithmetic, so both ways give the same bits.
//!
//! Each method is one PyTorch op of the single-tensor formula, with that op's rounding:
//! - f32 and f64: a Rust number is rounded to the element type first, then one IEEE operation
//!   per op; the ops with several operations (`add_scaled`, `addcmul`, `addcdiv`, `lerp`) are
//!   those operations one after another, each rounded.
//! - f16 and bf16 (PyTorch's "opmath"): every op computes in f32 from the half values and rounds
//!   its result to the half type once, as PyTorch's vectorized CPU loops do. A Rust number stays
//!   an f32 in `mul_s` and `div_s` (PyTorch's `mul`/`div` by a Python number keep it in f32), and
//!   is rounded to the half type in `add_s` and as `add_scaled`'s `alpha` (PyTorch's `add` rounds
//!   its scalars to the tensor's dtype). `addcmul` and `lerp` end in an f32 fused multiply-add
//!   (`fma(value * a, b, self)`, `fma(w, end - self, self)`), and `add_scaled` is `self + alpha *
//!   o` rounded once; kiln computes those in f64, where the products are exact and the sums are
//!   unless their terms lie far apart, and rounds to f32, then to the half type (the same bits as
//!   an FMA, except where an inexact f64 sum lands exactly on an f32 tie, which takes a product
//!   with a run of some 28 equal bits). `HalfNumber` is that arithmetic on numbers, `impl
//!   Values for Tensor` on tensors (through f32 and f64 tensors, so `kiln::compile` captures the
//!   same arithmetic).
//!
//! PyTorch's CPU loops round differently in their scalar tails (the last elements of a tensor
//! whose length is not a multiple of the vector width: 32 half numbers with AVX-512): there
//! `add(alpha=)` rounds `alpha * other` to the half type before adding. kiln computes every
//! element as the vectorized body does.

use crate::{DType, Tensor};
use kiln_runtime::{Element, FloatElement};
use std::marker::PhantomData;

/// What an update rule computes with: tensors or numbers (see the module docs for each
/// dtype's rounding). Methods ending in `_s` take a Rust number.
pub trait Values: Clone {
    /// `self + o`.
    fn add(&self, o: &Self) -> Self;
    /// `self - o`.
    fn sub(&self, o: &Self) -> Self;
    /// `self * o`.
    fn mul(&self, o: &Self) -> Self;
    /// `self / o`.
    fn div(&self, o: &Self) -> Self;
    /// The larger of the two, NaN when either is (PyTorch's `maximum`).
    fn maximum(&self, o: &Self) -> Self;
    /// `self + c` (PyTorch's `self.add(c)`).
    fn add_s(&self, c: f64) -> Self;
    /// `self * c` (PyTorch's `self.mul(c)`).
    fn mul_s(&self, c: f64) -> Self;
    /// `self / c` (PyTorch's `self.div(c)`).
    fn div_s(&self, c: f64) -> Self;
    /// The square root.
    fn sqrt(&self) -> Self;
    /// `-self`.
    fn neg(&self) -> Self;

    /// `self + alpha * o` (PyTorch's `self.add(o, alpha=alpha)`); the product is skipped when
    /// `alpha` is 1.
    #[inline(always)]
    fn add_scaled(&self, o: &Self, alpha: f64) -> Self {
        ops::add_scaled(self, o, alpha)
    }

    /// `self + value * a * b` (PyTorch's `self.addcmul(a, b, value=value)`); the scaling is
    /// skipped when `value` is 1 (as PyTorch's CPU kernels skip it).
    #[inline(always)]
    fn addcmul(&self, a: &Self, b: &Self, value: f64) -> Self {
        ops::addcmul(self, a, b, value)
    }

    /// `self + value * a / b` (PyTorch's `self.addcdiv(a, b, value=value)`); the scaling is
    /// skipped when `value` is 1.
    #[inline(always)]
    fn addcdiv(&self, a: &Self, b: &Self, value: f64) -> Self {
        ops::addcdiv(self, a, b, value)
    }

    /// `self + w * (end - self)` the way PyTorch's CPU `lerp` computes it (from the nearer
    /// end: `end + (w - 1) * (end - self)` when `w` is 0.5 or more).
    #[inline(always)]
    fn lerp(&self, end: &Self, w: f64) -> Self {
        ops::lerp(self, end, w)
    }
}

/// The provided methods of [`Values`] for f32 and f64: each op of several operations as those
/// operations, one after another.
pub(crate) mod ops {
    use super::Values;

    /// [`Values::add_scaled`] as `self + (o * alpha)`.
    #[inline(always)]
    pub(crate) fn add_scaled<V: Values>(dst: &V, o: &V, alpha: f64) -> V {
        if alpha == 1.0 {
            dst.add(o)
        } else {
            dst.add(&o.mul_s(alpha))
        }
    }

    /// [`Values::addcmul`] as `self + ((a * value) * b)`.
    #[inline(always)]
    pub(crate) fn addcmul<V: Values>(dst: &V, a: &V, b: &V, value: f64) -> V {
        if value == 1.0 {
            dst.add(&a.mul(b))
        } else {
            dst.add(&a.mul_s(value).mul(b))
        }
    }

    /// [`Values::addcdiv`] as `self + ((a * value) / b)`.
    #[inline(always)]
    pub(crate) fn addcdiv<V: Values>(dst: &V, a: &V, b: &V, value: f64) -> V {
        if value == 1.0 {
            dst.add(&a.div(b))
        } else {
            dst.add(&a.mul_s(value).div(b))
        }
    }

    /// [`Values::lerp`] as `self + (end - self) * w`, or `(end - self) * (w - 1) + end`.
    #[inline(always)]
    pub(crate) fn lerp<V: Values>(dst: &V, end: &V, w: f64) -> V {
        let diff = end.sub(dst);
        if w < 0.5 {
            dst.add(&diff.mul_s(w))
        } else {
            diff.mul_s(w - 1.0).add(end)
        }
    }
}

/// Whether `t` holds f16 or bf16 numbers (which compute in f32, see the module docs).
fn is_half(t: &Tensor) -> bool {
    matches!(t.dtype(), DType::F16 | DType::BF16)
}

/// `alpha` as the half type `dtype` rounds it (`Element::from_f64`: through f32, as PyTorch's
/// scalar conversion; the `half` crate's own `from_f64` rounds some values differently).
fn half_scalar(alpha: f64, dtype: DType) -> f64 {
    match dtype {
        DType::BF16 => Element::to_f64(<half::bf16 as Element>::from_f64(alpha)),
        _ => Element::to_f64(<half::f16 as Element>::from_f64(alpha)),
    }
}

impl Values for Tensor {
    fn add(&self, o: &Self) -> Self {
        Tensor::add(self, o)
    }
    fn sub(&self, o: &Self) -> Self {
        Tensor::sub(self, o)
    }
    fn mul(&self, o: &Self) -> Self {
        Tensor::mul(self, o)
    }
    fn div(&self, o: &Self) -> Self {
        Tensor::div(self, o)
    }
    fn maximum(&self, o: &Self) -> Self {
        Tensor::maximum(self, o)
    }
    fn add_s(&self, c: f64) -> Self {
        Tensor::add(self, c)
    }
    fn mul_s(&self, c: f64) -> Self {
        if is_half(self) {
            Tensor::mul(&self.to_dtype(DType::F32), c).to_dtype(self.dtype())
        } else {
            Tensor::mul(self, c)
        }
    }
    fn div_s(&self, c: f64) -> Self {
        if is_half(self) {
            Tensor::div(&self.to_dtype(DType::F32), c).to_dtype(self.dtype())
        } else {
            Tensor::div(self, c)
        }
    }
    fn sqrt(&self) -> Self {
        Tensor::sqrt(self)
    }
    fn neg(&self) -> Self {
        Tensor::neg(self)
    }

    fn add_scaled(&self, o: &Self, alpha: f64) -> Self {
        if !is_half(self) || alpha == 1.0 {
            return ops::add_scaled(self, o, alpha);
        }
        let product = Tensor::mul(&o.to_dtype(DType::F64), half_scalar(alpha, self.dtype()));
        half_from_f64(&Tensor::add(&self.to_dtype(DType::F64), &product), self.dtype())
    }

    fn addcmul(&self, a: &Self, b: &Self, value: f64) -> Self {
        if !is_half(self) {
            return ops::addcmul(self, a, b, value);
        }
        let a = scaled_f32(a, value).to_dtype(DType::F64);
        let sum = Tensor::add(&Tensor::mul(&a, b.to_dtype(DType::F64)), self.to_dtype(DType::F64));
        half_from_f64(&sum, self.dtype())
    }

    fn addcdiv(&self, a: &Self, b: &Self, value: f64) -> Self {
        if !is_half(self) {
            return ops::addcdiv(self, a, b, value);
        }
        let quotient = Tensor::div(&scaled_f32(a, value), b.to_dtype(DType::F32));
        Tensor::add(&quotient, self.to_dtype(DType::F32)).to_dtype(self.dtype())
    }

    fn lerp(&self, end: &Self, w: f64) -> Self {
        if !is_half(self) {
            return ops::lerp(self, end, w);
        }
        let diff = Tensor::sub(&end.to_dtype(DType::F32), self.to_dtype(DType::F32)).to_dtype(DType::F64);
        let (coeff, base) = lerp_coefficient(w);
        let base = if base == LerpBase::Start { self } else { end };
        let sum = Tensor::add(&Tensor::mul(&diff, coeff as f64), base.to_dtype(DType::F64));
        half_from_f64(&sum, self.dtype())
    }
}

/// `value * a` as an f32 tensor (`a` itself, widened, when `value` is 1).
fn scaled_f32(a: &Tensor, value: f64) -> Tensor {
    let a = a.to_dtype(DType::F32);
    if value == 1.0 {
        a
    } else {
        Tensor::mul(&a, value)
    }
}

/// An f64 result rounded to f32, then to the half type `dtype` (an f32 fused multiply-add's
/// rounding, then the half op's).
fn half_from_f64(t: &Tensor, dtype: DType) -> Tensor {
    t.to_dtype(DType::F32).to_dtype(dtype)
}

/// Which end a half `lerp` starts from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum LerpBase {
    /// `self`: the weight is below 0.5 in magnitude.
    Start,
    /// `end`: the weight is 0.5 or more.
    End,
}

/// The f32 coefficient of `end - self` and the end it is added to, for a half `lerp` with
/// weight `w` (PyTorch's vectorized `lerp`: `w`, or `w - 1` computed in f32).
#[inline(always)]
fn lerp_coefficient(w: f64) -> (f32, LerpBase) {
    let w = w as f32;
    if w.abs() < 0.5 {
        (w, LerpBase::Start)
    } else {
        (w - 1.0, LerpBase::End)
    }
}

macro_rules! number_values {
    ($($t:ty),*) => {$(
        impl Values for $t {
            #[inline(always)]
            fn add(&self, o: &Self) -> Self {
                self + o
            }
            #[inline(always)]
            fn sub(&self, o: &Self) -> Self {
                self - o
            }
            #[inline(always)]
            fn mul(&self, o: &Self) -> Self {
                self * o
            }
            #[inline(always)]
            fn div(&self, o: &Self) -> Self {
                self / o
            }
            #[inline(always)]
            fn maximum(&self, o: &Self) -> Self {
                // kiln_runtime's `max_nan`, the eager kernel's.
                if self.is_nan() || o.is_nan() {
                    <$t>::NAN
                } else if self >= o {
                    *self
                } else {
                    *o
                }
            }
            #[inline(always)]
            fn add_s(&self, c: f64) -> Self {
                self + c as $t
            }
            #[inline(always)]
            fn mul_s(&self, c: f64) -> Self {
                self * c as $t
            }
            #[inline(always)]
            fn div_s(&self, c: f64) -> Self {
                self / c as $t
            }
            #[inline(always)]
            fn sqrt(&self) -> Self {
                <$t>::sqrt(*self)
            }
            #[inline(always)]
            fn neg(&self) -> Self {
                -self
            }
        }
    )*};
}
number_values!(f32, f64);

/// An f16 or bf16 number (`H`) as the one-pass kernel computes with it: the f32 of the half
/// value; each operation computes in f32 (the fused multiply-adds in f64, then f32) and
/// rounds to `H`, the arithmetic `impl Values for Tensor` gives half tensors (module docs).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct HalfNumber<H>(f32, PhantomData<H>);

impl<H: FloatElement<Compute = f32>> HalfNumber<H> {
    /// The number `h`.
    #[inline(always)]
    pub(crate) fn new(h: H) -> Self {
        HalfNumber(h.to_compute(), PhantomData)
    }

    /// The half value.
    #[inline(always)]
    pub(crate) fn get(self) -> H {
        H::from_compute(self.0)
    }

    /// `v` rounded to `H`.
    #[inline(always)]
    fn round(v: f32) -> Self {
        HalfNumber(H::from_compute(v).to_compute(), PhantomData)
    }

    /// `v` rounded to f32, then to `H`.
    #[inline(always)]
    fn round_f64(v: f64) -> Self {
        Self::round(v as f32)
    }

    /// `value * a` in f32 (`a` when `value` is 1).
    #[inline(always)]
    fn scaled(a: &Self, value: f64) -> f32 {
        if value == 1.0 {
            a.0
        } else {
            a.0 * value as f32
        }
    }
}

impl<H: FloatElement<Compute = f32>> Values for HalfNumber<H> {
    #[inline(always)]
    fn add(&self, o: &Self) -> Self {
        Self::round(self.0 + o.0)
    }
    #[inline(always)]
    fn sub(&self, o: &Self) -> Self {
        Self::round(self.0 - o.0)
    }
    #[inline(always)]
    fn mul(&self, o: &Self) -> Self {
        Self::round(self.0 * o.0)
    }
    #[inline(always)]
    fn div(&self, o: &Self) -> Self {
        Self::round(self.0 / o.0)
    }
    #[inline(always)]
    fn maximum(&self, o: &Self) -> Self {
        Self::round(Values::maximum(&self.0, &o.0))
    }
    #[inline(always)]
    fn add_s(&self, c: f64) -> Self {
        Self::round(self.0 + H::from_f64(c).to_compute())
    }
    #[inline(always)]
    fn mul_s(&self, c: f64) -> Self {
        Self::round(self.0 * c as f32)
    }
    #[inline(always)]
    fn div_s(&self, c: f64) -> Self {
        Self::round(self.0 / c as f32)
    }
    #[inline(always)]
    fn sqrt(&self) -> Self {
        Self::round(self.0.sqrt())
    }
    #[inline(always)]
    fn neg(&self) -> Self {
        Self::round(-self.0)
    }
    #[inline(always)]
    fn add_scaled(&self, o: &Self, alpha: f64) -> Self {
        if alpha == 1.0 {
            return self.add(o);
        }
        let alpha = H::from_f64(alpha).to_compute() as f64;
        Self::round_f64(self.0 as f64 + o.0 as f64 * alpha)
    }
    #[inline(always)]
    fn addcmul(&self, a: &Self, b: &Self, value: f64) -> Self {
        Self::round_f64(Self::scaled(a, value) as f64 * b.0 as f64 + self.0 as f64)
    }
    #[inline(always)]
    fn addcdiv(&self, a: &Self, b: &Self, value: f64) -> Self {
        Self::round(Self::scaled(a, value) / b.0 + self.0)
    }
    #[inline(always)]
    fn lerp(&self, end: &Self, w: f64) -> Self {
        let diff = end.0 - self.0;
        let (coeff, base) = lerp_coefficient(w);
        let base = if base == LerpBase::Start { self.0 } else { end.0 };
        Self::round_f64(diff as f64 * coeff as f64 + base as f64)
    }
}

/// `grad`, negated when maximizing, plus `weight_decay * param` when that is not zero.
#[inline(always)]
pub(crate) fn effective_grad<V: Values>(param: &V, grad: &V, maximize: bool, weight_decay: f64) -> V {
    let g = if maximize { grad.neg() } else { grad.clone() };
    if weight_decay != 0.0 {
        g.add_scaled(param, weight_decay)
    } else {
        g
    }
}
