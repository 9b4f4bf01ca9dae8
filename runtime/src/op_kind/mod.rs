//! The kinds of elementwise and reduction operations, with their scalar meaning.
//!
//! One enum per family, shared by the eager CPU kernels (which call `eval_*` per element) and
//! by the code generator (which emits the same formula as IR or CUDA C). The scalar functions
//! here are the definition every backend is tested against.

use crate::dtype::num_like::Float;

mod unary;

pub use unary::{IntRule, UnaryOp, UnarySaves};

/// Elementwise functions of two operands (a scalar operand is a broadcast 0-dim tensor).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// a + b
    Add,
    /// a - b
    Sub,
    /// a * b
    Mul,
    /// a / b (true division: integers divide as floats)
    Div,
    /// Python's modulo: the result has the sign of b (`torch.remainder`)
    Rem,
    /// a^b
    Pow,
    /// the larger, NaN-propagating
    Maximum,
    /// the smaller, NaN-propagating
    Minimum,
    /// atan2(a, b)
    Atan2,
    /// `a & b` (integers and Bool only)
    BitAnd,
    /// `a | b` (integers and Bool only)
    BitOr,
    /// `a ^ b` (integers and Bool only)
    BitXor,
    /// `a << b` (integers only): 0 for a shift below 0 or past the type's width, as PyTorch
    BitShl,
    /// `a >> b`, arithmetic (integers only): a shift below 0 or past the width fills with the
    /// sign bit, as PyTorch
    BitShr,
}

impl BinaryOp {
    /// Every binary op.
    pub const ALL: [BinaryOp; 14] = {
        use BinaryOp::*;
        [Add, Sub, Mul, Div, Rem, Pow, Maximum, Minimum, Atan2, BitAnd, BitOr, BitXor, BitShl, BitShr]
    };

    /// The op's name as PyTorch spells it.
    pub fn name(self) -> &'static str {
        use BinaryOp::*;
        match self {
            Add => "add",
            Sub => "sub",
            Mul => "mul",
            Div => "div",
            Rem => "remainder",
            Pow => "pow",
            Maximum => "maximum",
            Minimum => "minimum",
            Atan2 => "atan2",
            BitAnd => "bitwise_and",
            BitOr => "bitwise_or",
            BitXor => "bitwise_xor",
            BitShl => "bitwise_left_shift",
            BitShr => "bitwise_right_shift",
        }
    }

    /// True for the bitwise ops and shifts: defined on integers (and, for `&`, `|`, `^`, on
    /// Bool), an error on floats.
    pub fn is_bitwise(self) -> bool {
        use BinaryOp::*;
        matches!(self, BitAnd | BitOr | BitXor | BitShl | BitShr)
    }

    /// True for the shifts, which PyTorch does not define on Bool.
    pub fn is_shift(self) -> bool {
        matches!(self, BinaryOp::BitShl | BinaryOp::BitShr)
    }

    /// PyTorch's CPU kernel name for the bitwise ops (its "not implemented for 'Float'" errors
    /// name the kernel, not the op).
    pub fn kernel_name(self) -> &'static str {
        use BinaryOp::*;
        match self {
            BitAnd => "bitwise_and_cpu",
            BitOr => "bitwise_or_cpu",
            BitXor => "bitwise_xor_cpu",
            BitShl => "lshift_cpu",
            BitShr => "rshift_cpu",
            _ => self.name(),
        }
    }

    /// True when integer operands give an integer result; false for true division and atan2,
    /// which compute in the default float dtype.
    pub fn keeps_int_dtype(self) -> bool {
        !matches!(self, BinaryOp::Div | BinaryOp::Atan2)
    }

    /// The op on integers, wrapping on overflow. The caller has ruled out a zero divisor for
    /// `Rem`.
    #[inline(always)]
    pub fn eval_int(self, a: i64, b: i64) -> i64 {
        use BinaryOp::*;
        match self {
            Add => a.wrapping_add(b),
            Sub => a.wrapping_sub(b),
            Mul => a.wrapping_mul(b),
            Rem => {
                let r = a.wrapping_rem(b);
                if r != 0 && ((r < 0) != (b < 0)) {
                    r + b
                } else {
                    r
                }
            }
            // A negative integer exponent gives 1/a^|b| truncated: ±1 for a = ±1, else 0.
            Pow if b < 0 => match a {
                1 => 1,
                -1 => if b % 2 == 0 { 1 } else { -1 },
                _ => 0,
            },
            Pow => a.wrapping_pow(b.min(u32::MAX as i64) as u32),
            Maximum => a.max(b),
            Minimum => a.min(b),
            BitAnd => a & b,
            BitOr => a | b,
            BitXor => a ^ b,
            // Computed on the operands widened to i64 (sign-extended, u8 zero-extended): the
            // low bits of the result are those of the narrow type's shift for every shift
            // amount, so one formula serves i64, i32 and u8 (PyTorch's rule: a shift < 0 or
            // >= the width gives 0).
            BitShl => {
                if (0..64).contains(&b) {
                    a.wrapping_shl(b as u32)
                } else {
                    0
                }
            }
            // A shift < 0 or past the width fills with the sign (0 for u8, which is zero-
            // extended), as PyTorch's `a >> (width - 1)`; in i64, `a >> 63` is that fill for
            // every narrower type too.
            BitShr => a >> if (0..64).contains(&b) { b as u32 } else { 63 },
            Div | Atan2 => unreachable!("{} is not an integer op", self.name()),
        }
    }

    /// The op on floats.
    #[inline(always)]
    pub fn eval<F: Float>(self, a: F, b: F) -> F {
        use BinaryOp::*;
        match self {
            Add => a + b,
            Sub => a - b,
            Mul => a * b,
            Div => a / b,
            Rem => {
                let r = a % b;
                if r != F::zero() && ((r < F::zero()) != (b < F::zero())) {
                    r + b
                } else {
                    r
                }
            }
            Pow => a.powf(b),
            Maximum => a.max_nan(b),
            Minimum => a.min_nan(b),
            Atan2 => a.atan2(b),
            BitAnd | BitOr | BitXor | BitShl | BitShr => unreachable!("{} is defined on integers only", self.name()),
        }
    }
}

/// Comparisons; each returns a Bool tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// a == b
    Eq,
    /// a != b
    Ne,
    /// a < b
    Lt,
    /// a <= b
    Le,
    /// a > b
    Gt,
    /// a >= b
    Ge,
}

impl CmpOp {
    /// Every comparison.
    pub const ALL: [CmpOp; 6] = [CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge];

    /// The op's name as PyTorch spells it.
    pub fn name(self) -> &'static str {
        match self {
            CmpOp::Eq => "eq",
            CmpOp::Ne => "ne",
            CmpOp::Lt => "lt",
            CmpOp::Le => "le",
            CmpOp::Gt => "gt",
            CmpOp::Ge => "ge",
        }
    }

    /// The comparison on any ordered values (IEEE semantics for NaN: only `Ne` is true).
    #[inline(always)]
    pub fn eval<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            CmpOp::Eq => a == b,
            CmpOp::Ne => a != b,
            CmpOp::Lt => a < b,
            CmpOp::Le => a <= b,
            CmpOp::Gt => a > b,
            CmpOp::Ge => a >= b,
        }
    }
}

/// Logical ops on the truth of their operands (non-zero is true); each returns Bool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LogicalOp {
    /// a && b
    And,
    /// a || b
    Or,
    /// a != b
    Xor,
}

impl LogicalOp {
    /// Every logical op of two operands.
    pub const ALL: [LogicalOp; 3] = [LogicalOp::And, LogicalOp::Or, LogicalOp::Xor];

    /// The op's name as PyTorch spells it.
    pub fn name(self) -> &'static str {
        match self {
            LogicalOp::And => "logical_and",
            LogicalOp::Or => "logical_or",
            LogicalOp::Xor => "logical_xor",
        }
    }

    /// The op on truth values.
    #[inline(always)]
    pub fn eval(self, a: bool, b: bool) -> bool {
        match self {
            LogicalOp::And => a && b,
            LogicalOp::Or => a || b,
            LogicalOp::Xor => a != b,
        }
    }
}

/// Reductions over one or more dims.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Σ
    Sum,
    /// Π
    Prod,
    /// largest (NaN wins)
    Max,
    /// smallest (NaN wins)
    Min,
}

impl ReduceOp {
    /// The op's name as PyTorch spells it.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remainder_has_sign_of_divisor() {
        assert_eq!(BinaryOp::Rem.eval_int(-7, 3), 2);
        assert_eq!(BinaryOp::Rem.eval_int(7, -3), -2);
        assert_eq!(BinaryOp::Rem.eval(-7.5f64, 2.0), 0.5);
    }

    #[test]
    fn float_formulas() {
        assert!(BinaryOp::Maximum.eval(1.0f32, f32::NAN).is_nan());
        assert!(!CmpOp::Eq.eval(f32::NAN, f32::NAN));
    }

    #[test]
    fn shifts_follow_pytorch_at_every_width() {
        use BinaryOp::{BitShl, BitShr};
        // i32 values, widened; results narrowed back as the kernels do.
        let i32_of = |v: i64| v as i32 as i64;
        assert_eq!(i32_of(BitShl.eval_int(1, 31)), i32::MIN as i64);
        assert_eq!(i32_of(BitShl.eval_int(1, 32)), 0);
        assert_eq!(i32_of(BitShl.eval_int(1, 40)), 0);
        assert_eq!(BitShl.eval_int(1, -1), 0);
        assert_eq!(BitShl.eval_int(1, 63), i64::MIN);
        assert_eq!(BitShl.eval_int(1, 64), 0);
        assert_eq!(BitShr.eval_int(-100, 40), -1);
        assert_eq!(BitShr.eval_int(100, 31), 0);
        assert_eq!(BitShr.eval_int(-100, -1), -1);
        assert_eq!(BitShr.eval_int(200, 255), 0); // u8: zero-extended
        assert_eq!(BitShl.eval_int(3, 7) as u8, 128);
        assert_eq!(UnaryOp::BitNot.eval_int(0) as u8, 255);
        assert_eq!(BinaryOp::BitXor.eval_int(-8, 3), -5);
    }
}
