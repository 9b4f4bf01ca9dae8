//! Bitwise ops on integer and Bool tensors: `bitwise_and bitwise_or bitwise_xor bitwise_not
//! bitwise_left_shift bitwise_right_shift`, their in-place forms, and the operators `& | ^ ! <<
//! >>` (with `&=`, `|=`, `^=`, `<<=`, `>>=`).
//!
//! They are binary elementwise ops like `add` (`BinaryOp::BitAnd`, …, and `UnaryOp::BitNot` in
//! `kiln_runtime::op_kind`): broadcasting and PyTorch's type promotion (an i32 tensor `&` an
//! i64 tensor gives i64, a Bool tensor `&` an integer scalar gives i64, a Rust number wraps into
//! a narrow integer dtype as `u8_tensor & -1` does), and inside `kiln::compile` they are graph
//! nodes the CPU code generator emits as single integer instructions. On Bool tensors `&`, `|`,
//! `^` and `!` are the logical ops. Float operands are an error, worded as PyTorch's
//! (`"bitwise_and_cpu" not implemented for 'Float'`), and so are shifts of two Bool operands.
//!
//! Shifts follow PyTorch's CPU kernels: `a << b` is 0 when `b` is negative or at least the
//! dtype's width; `a >> b` is arithmetic and fills with the sign bit when `b` is out of range.
//! None of these ops record for autograd (their results are integers).

use super::binary::{binary, binary_inplace, Operand};
use crate::error::{bail, OrPanic, Result};
use crate::tensor::Tensor;
use kiln_runtime::op_kind::{BinaryOp, UnaryOp};
use kiln_runtime::DType;

/// An error unless `t` is an integer or Bool tensor (PyTorch's words for `bitwise_not` on floats).
#[track_caller]
fn check_not_dtype(op: &'static str, t: &Tensor) -> Result<()> {
    if t.dtype().is_float() {
        bail!(
            op,
            DType,
            "\"bitwise_not_cpu\" not implemented for '{}' (bitwise ops take integer or bool tensors)",
            super::reduce::scalar_type_name(t.dtype())
        );
    }
    Ok(())
}

impl Tensor {
    /// Every bit flipped (`torch.bitwise_not`, `~x`): `!x` for integers, logical not for Bool.
    #[track_caller]
    pub fn bitwise_not(&self) -> Tensor {
        self.try_bitwise_not().or_panic()
    }

    /// [`Tensor::bitwise_not`] returning an error for a float tensor.
    #[track_caller]
    pub fn try_bitwise_not(&self) -> Result<Tensor> {
        check_not_dtype("bitwise_not", self)?;
        if self.dtype() == DType::Bool {
            return Ok(self.logical_not());
        }
        super::unary(UnaryOp::BitNot, self)
    }

    /// In-place [`Tensor::bitwise_not`].
    #[track_caller]
    pub fn bitwise_not_(&self) -> &Tensor {
        self.try_bitwise_not_().or_panic()
    }

    /// [`Tensor::bitwise_not_`] returning an error for a float tensor.
    #[track_caller]
    pub fn try_bitwise_not_(&self) -> Result<&Tensor> {
        check_not_dtype("bitwise_not_", self)?;
        if self.dtype() == DType::Bool {
            // Written through a copy: `x = !x` reads the old values.
            let flipped = self.logical_not();
            return self.try_copy_(&flipped);
        }
        super::unary::unary_inplace(UnaryOp::BitNot, self)?;
        Ok(self)
    }
}

super::overloads::operator_overloads! {
    "PyTorch's operator on integer and Bool tensors (logical on Bool); a float operand panics."; [i64, bool];
    BitAnd, bitand, BitAndAssign, bitand_assign, BitAnd;
    BitOr, bitor, BitOrAssign, bitor_assign, BitOr;
    BitXor, bitxor, BitXorAssign, bitxor_assign, BitXor;
    Shl, shl, ShlAssign, shl_assign, BitShl;
    Shr, shr, ShrAssign, shr_assign, BitShr;
}

/// `!x`: [`Tensor::bitwise_not`] (logical not on Bool; a float tensor panics).
impl std::ops::Not for &Tensor {
    type Output = Tensor;
    #[track_caller]
    fn not(self) -> Tensor {
        self.bitwise_not()
    }
}

/// `!x`: [`Tensor::bitwise_not`] (logical not on Bool; a float tensor panics).
impl std::ops::Not for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn not(self) -> Tensor {
        self.bitwise_not()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_bools_and_promotion() {
        let a = Tensor::new(&[-8i32, -1, 0, 1, 5]);
        assert_eq!((&a & 3).to_vec::<i32>(), vec![0, 3, 0, 1, 1]);
        assert_eq!((&a | 3).to_vec::<i32>(), vec![-5, -1, 3, 3, 7]);
        assert_eq!((&a ^ -1).to_vec::<i32>(), vec![7, 0, -1, -2, -6]);
        assert_eq!((!&a).to_vec::<i32>(), vec![7, 0, -1, -2, -6]);
        assert_eq!((3 & &a).dtype(), DType::I32);
        let b = Tensor::new(&[true, false, true]);
        assert_eq!((&b & true).to_vec::<bool>(), vec![true, false, true]);
        assert_eq!((&b | 3).dtype(), DType::I64);
        assert_eq!((!&b).to_vec::<bool>(), vec![false, true, false]);
        assert_eq!(a.bitwise_and(Tensor::new(&[1i64])).dtype(), DType::I64);
        let e = Tensor::new(&[1.0f32]).try_bitwise_and(1).unwrap_err().to_string();
        assert!(e.starts_with("bitwise_and: \"bitwise_and_cpu\" not implemented for 'Float'"), "{e}");
        assert!(b.try_bitwise_left_shift(&b).is_err());
        assert!(Tensor::new(&[1.0f64]).try_bitwise_not().is_err());
    }

    #[test]
    fn shifts_and_in_place() {
        let one = Tensor::new(&[1i32; 5]);
        let by = Tensor::new(&[0i32, 31, 32, 40, -1]);
        assert_eq!((&one << &by).to_vec::<i32>(), vec![1, i32::MIN, 0, 0, 0]);
        assert_eq!((Tensor::new(&[-100i32; 5]) >> &by).to_vec::<i32>(), vec![-100, -1, -1, -1, -1]);
        assert_eq!((1i64 << &Tensor::new(&[3i64])).to_vec::<i64>(), vec![8]);
        let mut x = Tensor::new(&[5u8, 200]);
        x <<= 1;
        assert_eq!(x.to_vec::<u8>(), vec![10, 144]);
        x >>= 2;
        assert_eq!(x.to_vec::<u8>(), vec![2, 36]);
        x &= 6;
        x |= 1;
        x ^= 8;
        assert_eq!(x.to_vec::<u8>(), vec![11, 13]);
        let m = Tensor::new(&[true, false]);
        m.bitwise_not_();
        assert_eq!(m.to_vec::<bool>(), vec![false, true]);
        assert!(m.try_bitwise_and_(3).is_err(), "an i64 result cannot be written into Bool");
    }
}
