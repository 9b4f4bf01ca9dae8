//! The binary op table: one row per elementwise function of two operands. The enum, `ALL`,
//! names, dtype rules, the `Tensor` methods and the monomorphized CPU dispatch are generated
//! from [`binary_op_table!`](crate::binary_op_table); the formulas, backward rules and CUDA C
//! are exhaustive matches.

use super::IntRule;
use crate::dtype::num_like::Float;

/// The table of binary ops, handed to the macro `$then`, which receives one row per op:
///
/// `Variant "torch_name" IntRule [method try_method method_ try_method_] "doc";`
///
/// - `IntRule`: `Keep` (integer operands give an integer result, wrapping), `Float` (they
///   compute in the default float dtype), `IntOnly` (bitwise: integers and, for `& | ^`, Bool;
///   floats are an error);
/// - the methods: out of place, returning an error, in place, in place returning an error;
/// - `"doc"`: what the op computes.
///
/// `binary_op_table!(then, args…)` hands `(args…)` to `then` ahead of the rows.
#[macro_export]
macro_rules! binary_op_table {
    ($then:ident $(, $($args:tt)*)?) => {
        $then! {
            $(($($args)*))?
            Add     "add"                 Keep    [add try_add add_ try_add_]                                                                   "sum `self + other`";
            Sub     "sub"                 Keep    [sub try_sub sub_ try_sub_]                                                                   "difference `self - other`";
            Mul     "mul"                 Keep    [mul try_mul mul_ try_mul_]                                                                   "product `self * other`";
            Div     "div"                 Float   [div try_div div_ try_div_]                                                                   "true division `self / other` (integers divide as floats)";
            Rem     "remainder"           Keep    [remainder try_remainder remainder_ try_remainder_]                                           "Python-style remainder (the result has the sign of the divisor)";
            Pow     "pow"                 Keep    [pow try_pow pow_ try_pow_]                                                                   "power `self ^ exponent`";
            Maximum "maximum"             Keep    [maximum try_maximum maximum_ try_maximum_]                                                   "maximum (NaN propagates)";
            Minimum "minimum"             Keep    [minimum try_minimum minimum_ try_minimum_]                                                   "minimum (NaN propagates)";
            Atan2   "atan2"               Float   [atan2 try_atan2 atan2_ try_atan2_]                                                           "`atan2(self, other)`";
            BitAnd  "bitwise_and"         IntOnly [bitwise_and try_bitwise_and bitwise_and_ try_bitwise_and_]                                   "bitwise and `self & other` of integer or Bool tensors";
            BitOr   "bitwise_or"          IntOnly [bitwise_or try_bitwise_or bitwise_or_ try_bitwise_or_]                                       "bitwise or `self | other` of integer or Bool tensors";
            BitXor  "bitwise_xor"         IntOnly [bitwise_xor try_bitwise_xor bitwise_xor_ try_bitwise_xor_]                                   "bitwise exclusive or `self ^ other` of integer or Bool tensors";
            BitShl  "bitwise_left_shift"  IntOnly [bitwise_left_shift try_bitwise_left_shift bitwise_left_shift_ try_bitwise_left_shift_]       "left shift `self << other` of integer tensors (0 for a shift below 0 or past the width)";
            BitShr  "bitwise_right_shift" IntOnly [bitwise_right_shift try_bitwise_right_shift bitwise_right_shift_ try_bitwise_right_shift_]   "arithmetic right shift `self >> other` of integer tensors (the sign fill for a shift below 0 or past the width)";
        }
    };
}

macro_rules! define_binary_op {
    ($($op:ident $name:literal $int:ident [$($m:ident)*] $doc:literal;)*) => {
        /// Elementwise functions of two operands (a scalar operand is a broadcast 0-dim tensor;
        /// the rows of [`binary_op_table!`](crate::binary_op_table)).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum BinaryOp {
            $(
                #[doc = $doc]
                $op,
            )*
        }

        impl BinaryOp {
            /// Every binary op, in table order.
            pub const ALL: &'static [BinaryOp] = &[$(BinaryOp::$op),*];

            /// The op's name as PyTorch spells it.
            pub fn name(self) -> &'static str {
                match self {
                    $(BinaryOp::$op => $name,)*
                }
            }

            /// What integer operands do.
            pub fn int_rule(self) -> IntRule {
                match self {
                    $(BinaryOp::$op => IntRule::$int,)*
                }
            }
        }
    };
}

binary_op_table!(define_binary_op);

impl BinaryOp {
    /// True for the bitwise ops and shifts: defined on integers (and, for `&`, `|`, `^`, on
    /// Bool), an error on floats.
    pub fn is_bitwise(self) -> bool {
        self.int_rule() == IntRule::IntOnly
    }

    /// True when integer operands give an integer result; false for true division and atan2,
    /// which compute in the default float dtype.
    pub fn keeps_int_dtype(self) -> bool {
        self.int_rule() != IntRule::Float
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
                -1 => {
                    if b % 2 == 0 {
                        1
                    } else {
                        -1
                    }
                }
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
