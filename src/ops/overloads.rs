//! The operator overloads (`+ - * / %` here, `& | ^ << >>` in `bitwise.rs`): a tensor on the
//! left of anything that is an [`Operand`], a Rust number on the left of a tensor, and the
//! augmented assignments in place.

use super::binary::{binary, binary_inplace, Operand};
use crate::error::OrPanic;
use crate::Tensor;
use kiln_runtime::op_kind::BinaryOp;

/// The operator overloads of binary op `$op` (`BinaryOp::$op`): `&a op b` and `a op b` for a
/// tensor on the left and anything that is an [`Operand`] on the right, `a op= b` in place,
/// and a Rust number of each type in `[$lhs]` on the left; `$doc` documents the two
/// value-returning impls. Used here for arithmetic and in `bitwise.rs` for `& | ^ << >>`.
macro_rules! operator_overloads {
    ($doc:literal; $lhs:tt; $($Trait:ident, $method:ident, $Assign:ident, $assign:ident, $op:ident;)*) => {$(
        #[doc = $doc]
        impl<R: Into<Operand>> std::ops::$Trait<R> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: R) -> Tensor {
                binary(BinaryOp::$op, &Operand::Tensor(self.clone()), &rhs.into()).or_panic()
            }
        }

        #[doc = $doc]
        impl<R: Into<Operand>> std::ops::$Trait<R> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: R) -> Tensor {
                binary(BinaryOp::$op, &Operand::Tensor(self), &rhs.into()).or_panic()
            }
        }

        /// In place, as Python's augmented assignment on a tensor.
        impl<R: Into<Operand>> std::ops::$Assign<R> for Tensor {
            #[track_caller]
            fn $assign(&mut self, rhs: R) {
                binary_inplace(BinaryOp::$op, self, &rhs.into()).or_panic();
            }
        }

        $crate::ops::overloads::scalar_lhs_overloads!($Trait, $method, $op; $lhs);
    )*};
}
pub(crate) use operator_overloads;

/// `2.0 - &x`, `1 << &x`, `true ^ &mask`: a Rust number of each listed type on the left of
/// operator `$Trait` (Python's `__rsub__`, `__rlshift__`, …).
macro_rules! scalar_lhs_overloads {
    ($Trait:ident, $method:ident, $op:ident; [$($t:ty),*]) => {$(
        impl std::ops::$Trait<&Tensor> for $t {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                binary(BinaryOp::$op, &Operand::Scalar(self.into()), &Operand::Tensor(rhs.clone())).or_panic()
            }
        }

        impl std::ops::$Trait<Tensor> for $t {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                binary(BinaryOp::$op, &Operand::Scalar(self.into()), &Operand::Tensor(rhs)).or_panic()
            }
        }
    )*};
}
pub(crate) use scalar_lhs_overloads;

operator_overloads! {
    "PyTorch's arithmetic operator: broadcasting, with PyTorch's type promotion."; [f64, i64];
    Add, add, AddAssign, add_assign, Add;
    Sub, sub, SubAssign, sub_assign, Sub;
    Mul, mul, MulAssign, mul_assign, Mul;
    Div, div, DivAssign, div_assign, Div;
    Rem, rem, RemAssign, rem_assign, Rem;
}
