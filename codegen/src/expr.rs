//! Elementwise expressions: the body of a fused kernel, per output element.

use kiln_runtime::op_kind::{BinaryOp, CmpOp, UnaryOp};
use kiln_runtime::DType;
use std::fmt;

/// One output element of a fused elementwise kernel, as a tree over its inputs.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// The element of kernel input `i` at the current index (after its view's indexing).
    Input(usize),
    /// A constant.
    Const(f64),
    /// A unary op.
    Unary(UnaryOp, Box<Expr>),
    /// A binary op.
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    /// A comparison (1.0 for true, 0.0 for false).
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    /// `cond != 0 ? a : b`.
    Where(Box<Expr>, Box<Expr>, Box<Expr>),
    /// A conversion to a dtype (rounding as the eager cast does).
    Cast(DType, Box<Expr>),
}

impl Expr {
    /// `op(a)`.
    pub fn unary(op: UnaryOp, a: Expr) -> Expr {
        Expr::Unary(op, Box::new(a))
    }

    /// `op(a, b)`.
    pub fn binary(op: BinaryOp, a: Expr, b: Expr) -> Expr {
        Expr::Binary(op, Box::new(a), Box::new(b))
    }

    /// The value for the given input elements, in f64: the reference a generated kernel is
    /// tested against.
    pub fn eval_f64(&self, inputs: &[f64]) -> f64 {
        match self {
            Expr::Input(i) => inputs[*i],
            Expr::Const(c) => *c,
            Expr::Unary(op, a) => op.eval(a.eval_f64(inputs)),
            Expr::Binary(op, a, b) => op.eval(a.eval_f64(inputs), b.eval_f64(inputs)),
            Expr::Cmp(op, a, b) => op.eval(a.eval_f64(inputs), b.eval_f64(inputs)) as u8 as f64,
            Expr::Where(c, a, b) => {
                if c.eval_f64(inputs) != 0.0 {
                    a.eval_f64(inputs)
                } else {
                    b.eval_f64(inputs)
                }
            }
            Expr::Cast(dtype, a) => cast_f64(*dtype, a.eval_f64(inputs)),
        }
    }

    /// Number of op nodes (inputs and constants excluded).
    pub fn op_count(&self) -> usize {
        match self {
            Expr::Input(_) | Expr::Const(_) => 0,
            Expr::Unary(_, a) | Expr::Cast(_, a) => 1 + a.op_count(),
            Expr::Binary(_, a, b) | Expr::Cmp(_, a, b) => 1 + a.op_count() + b.op_count(),
            Expr::Where(c, a, b) => 1 + c.op_count() + a.op_count() + b.op_count(),
        }
    }
}

/// A value rounded to what `dtype` can hold, as the eager cast rounds it.
fn cast_f64(dtype: DType, v: f64) -> f64 {
    match dtype {
        DType::F64 => v,
        DType::F32 => v as f32 as f64,
        DType::F16 => half::f16::from_f64(v).to_f64(),
        DType::BF16 => half::bf16::from_f64(v).to_f64(),
        DType::I64 => v as i64 as f64,
        DType::I32 => v as i64 as i32 as f64,
        DType::U8 => v as i64 as u8 as f64,
        DType::Bool => (v != 0.0) as u8 as f64,
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Input(i) => write!(f, "in{i}"),
            Expr::Const(c) => write!(f, "{c:?}"),
            Expr::Unary(op, a) => write!(f, "{}({a})", op.name()),
            Expr::Binary(op, a, b) => write!(f, "{}({a}, {b})", op.name()),
            Expr::Cmp(op, a, b) => write!(f, "{}({a}, {b})", op.name()),
            Expr::Where(c, a, b) => write!(f, "where({c}, {a}, {b})"),
            Expr::Cast(d, a) => write!(f, "{d}({a})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gelu_chain_evaluates_like_the_op() {
        // 0.5*z*(1+tanh(0.7978845608*(z+0.044715*z^3))) built from primitive ops equals eager's one-pass gelu_tanh.
        let z = || Expr::Input(0);
        let cube = Expr::binary(BinaryOp::Mul, Expr::binary(BinaryOp::Mul, z(), z()), z());
        let inner = Expr::binary(BinaryOp::Add, z(), Expr::binary(BinaryOp::Mul, Expr::Const(0.044715), cube));
        let t = Expr::unary(UnaryOp::Tanh, Expr::binary(BinaryOp::Mul, Expr::Const(0.797_884_560_802_865_4), inner));
        let chain = Expr::binary(
            BinaryOp::Mul,
            Expr::binary(BinaryOp::Mul, Expr::Const(0.5), z()),
            Expr::binary(BinaryOp::Add, Expr::Const(1.0), t),
        );
        for x in [-3.0, -0.5, 0.0, 0.7, 2.5] {
            let want = kiln_runtime::cpu::fast_unary::FastUnary::GeluTanh.eval(x);
            assert!((chain.eval_f64(&[x]) - want).abs() < 1e-14, "{x}");
        }
        assert_eq!(chain.op_count(), 9);
        assert!(chain.to_string().starts_with("mul(mul(0.5, in0), add(1.0, tanh("));
    }

    #[test]
    fn casts_round_like_eager() {
        assert_eq!(Expr::Cast(DType::I32, Box::new(Expr::Const(-2.7))).eval_f64(&[]), -2.0);
        assert_eq!(Expr::Cast(DType::F16, Box::new(Expr::Const(1.0001))).eval_f64(&[]), 1.0);
        let w = Expr::Where(
            Box::new(Expr::Cmp(CmpOp::Gt, Box::new(Expr::Input(0)), Box::new(Expr::Const(0.0)))),
            Box::new(Expr::Input(0)),
            Box::new(Expr::Const(0.0)),
        );
        assert_eq!(w.eval_f64(&[-1.0]), 0.0);
        assert_eq!(w.eval_f64(&[3.0]), 3.0);
    }
}
