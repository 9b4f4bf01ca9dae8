//! Values an optimizer's update rule computes with, so that each rule is written once and runs
//! two ways: on whole tensors, op by op (PyTorch's single-tensor formula; inside
//! `kiln::compile` these ops are captured and fused), and on one element at a time of f32 or
//! f64 numbers, inside the one-pass kernel of [`super::fused`]. Every operation on numbers is
//! the eager tensor op's own arithmetic (a Rust number rounded to the element type first, then
//! one IEEE operation), so both ways give the same bits.

use crate::Tensor;

/// What an update rule computes with: tensors or numbers (see the module docs). Methods
/// ending in `_s` take a Rust number, rounded to the element type as a tensor op rounds it.
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
    /// `self + c`.
    fn add_s(&self, c: f64) -> Self;
    /// `self * c`.
    fn mul_s(&self, c: f64) -> Self;
    /// `self / c`.
    fn div_s(&self, c: f64) -> Self;
    /// The square root.
    fn sqrt(&self) -> Self;
    /// `-self`.
    fn neg(&self) -> Self;
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
        Tensor::mul(self, c)
    }
    fn div_s(&self, c: f64) -> Self {
        Tensor::div(self, c)
    }
    fn sqrt(&self) -> Self {
        Tensor::sqrt(self)
    }
    fn neg(&self) -> Self {
        Tensor::neg(self)
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

/// `dst + alpha * src` (PyTorch's `dst.add_(src, alpha=alpha)`).
#[inline(always)]
pub(crate) fn add_scaled<V: Values>(dst: &V, src: &V, alpha: f64) -> V {
    if alpha == 1.0 {
        dst.add(src)
    } else {
        dst.add(&src.mul_s(alpha))
    }
}

/// `dst + value * a * b` (PyTorch's `dst.addcmul_(a, b, value=value)`).
#[inline(always)]
pub(crate) fn addcmul<V: Values>(dst: &V, a: &V, b: &V, value: f64) -> V {
    addc(dst, a, b, value, V::mul)
}

/// `dst + value * a / b` (PyTorch's `dst.addcdiv_(a, b, value=value)`).
#[inline(always)]
pub(crate) fn addcdiv<V: Values>(dst: &V, a: &V, b: &V, value: f64) -> V {
    addc(dst, a, b, value, V::div)
}

/// `dst + op(value * a, b)`, the scaling skipped when `value` is 1 (as PyTorch's CPU kernels
/// skip it).
#[inline(always)]
fn addc<V: Values>(dst: &V, a: &V, b: &V, value: f64, op: impl Fn(&V, &V) -> V) -> V {
    if value == 1.0 {
        dst.add(&op(a, b))
    } else {
        dst.add(&op(&a.mul_s(value), b))
    }
}

/// `dst + w * (end - dst)` the way PyTorch's CPU `lerp_` computes it (from the nearer end).
#[inline(always)]
pub(crate) fn lerp<V: Values>(dst: &V, end: &V, w: f64) -> V {
    let diff = end.sub(dst);
    if w < 0.5 {
        dst.add(&diff.mul_s(w))
    } else {
        diff.mul_s(w - 1.0).add(end)
    }
}

/// `grad`, negated when maximizing, plus `weight_decay * param` when that is not zero.
#[inline(always)]
pub(crate) fn effective_grad<V: Values>(param: &V, grad: &V, maximize: bool, weight_decay: f64) -> V {
    let g = if maximize { grad.neg() } else { grad.clone() };
    if weight_decay != 0.0 {
        g.add(&param.mul_s(weight_decay))
    } else {
        g
    }
}
