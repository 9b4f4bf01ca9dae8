//! The kinds of elementwise and reduction operations, with their scalar meaning.
//!
//! One enum per family, shared by the eager CPU kernels (which call `eval_*` per element) and
//! by the code generator (which emits the same formula as IR or CUDA C). The scalar functions
//! here are the definition every backend is tested against. Each family is a table: unary,
//! binary, comparison and logical (`unary.rs`, `binary.rs`, `compare.rs`) and reduction
//! (`reduce.rs`).

mod binary;
mod compare;
mod reduce;
mod unary;

pub use binary::BinaryOp;
pub use compare::{CmpOp, LogicalOp};
pub use reduce::ReduceOp;
pub use unary::{IntRule, UnaryOp, UnarySaves};

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
