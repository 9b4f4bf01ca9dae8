//! The unary op table: one row per elementwise function of one operand. Everything that lists
//! unary ops (the enum, `ALL`, names, dtype rules, grad_fn names, the tensor methods, the code
//! generator's helper functions, the test lists) is generated from [`unary_op_table!`](crate::unary_op_table); what
//! differs per op in a way a row cannot say (the formula, the backward rule, the CUDA C
//! expression) is an exhaustive `match`, so a new row does not compile until each is written.

use crate::dtype::num_like::Float;

/// The table of unary ops, handed to the macro `$then`, which receives one row per op:
///
/// `Variant "torch_name" IntRule Saves "GradFnName" [method method_] "doc";`
///
/// - `IntRule`: what an integer or bool input does ([`IntRule`]);
/// - `Saves`: what the backward rule reads ([`UnarySaves`]);
/// - `[method method_]`: the `Tensor` methods generated for the op (out of place, in place);
///   `[]` when the op's methods are written by hand (`bitwise_not`, whose Bool form is logical);
/// - `"doc"`: what the op computes, for the enum variant's and the methods' documentation.
///
/// Composite ops (`mish`, …) are not rows here: they are decompositions into these ops
/// (`kiln`'s `src/ops/composite.rs`), so the code generators never see them.
#[macro_export]
macro_rules! unary_op_table {
    ($then:ident $(, $($args:tt)*)?) => {
        $then! {
            $(($($args)*))?
            Neg        "neg"         Keep    Nothing "NegBackward0"        [neg neg_]               "negation `-x`";
            Abs        "abs"         Keep    Input   "AbsBackward0"        [abs abs_]               "absolute value `|x|`";
            Exp        "exp"         Float   Output  "ExpBackward0"        [exp exp_]               "exponential `e^x`";
            Exp2       "exp2"        Float   Output  "Exp2Backward0"       [exp2 exp2_]             "`2^x`";
            Log        "log"         Float   Input   "LogBackward0"        [log log_]               "natural logarithm `ln x`";
            Log2       "log2"        Float   Input   "Log2Backward0"       [log2 log2_]             "base-2 logarithm";
            Log1p      "log1p"       Float   Input   "Log1PBackward0"      [log1p log1p_]           "`ln(1 + x)`, accurate near 0";
            Expm1      "expm1"       Float   Output  "Expm1Backward0"      [expm1 expm1_]           "`e^x - 1`, accurate near 0";
            Sqrt       "sqrt"        Float   Output  "SqrtBackward0"       [sqrt sqrt_]             "square root `√x`";
            Rsqrt      "rsqrt"       Float   Output  "RsqrtBackward0"      [rsqrt rsqrt_]           "reciprocal square root `1/√x`";
            Sin        "sin"         Float   Input   "SinBackward0"        [sin sin_]               "sine";
            Cos        "cos"         Float   Input   "CosBackward0"        [cos cos_]               "cosine";
            Tan        "tan"         Float   Output  "TanBackward0"        [tan tan_]               "tangent";
            Tanh       "tanh"        Float   Output  "TanhBackward0"       [tanh tanh_]             "hyperbolic tangent";
            Asin       "asin"        Float   Input   "AsinBackward0"       [asin asin_]             "arcsine";
            Acos       "acos"        Float   Input   "AcosBackward0"       [acos acos_]             "arccosine";
            Atan       "atan"        Float   Input   "AtanBackward0"       [atan atan_]             "arctangent";
            Sinh       "sinh"        Float   Input   "SinhBackward0"       [sinh sinh_]             "hyperbolic sine";
            Cosh       "cosh"        Float   Input   "CoshBackward0"       [cosh cosh_]             "hyperbolic cosine";
            Asinh      "asinh"       Float   Input   "AsinhBackward0"      [asinh asinh_]           "inverse hyperbolic sine";
            Acosh      "acosh"       Float   Input   "AcoshBackward0"      [acosh acosh_]           "inverse hyperbolic cosine";
            Atanh      "atanh"       Float   Input   "AtanhBackward0"      [atanh atanh_]           "inverse hyperbolic tangent";
            Sigmoid    "sigmoid"     Float   Output  "SigmoidBackward0"    [sigmoid sigmoid_]       "logistic sigmoid `1/(1+e^-x)`";
            Relu       "relu"        Keep    Output  "ReluBackward0"       [relu relu_]             "rectified linear unit `max(x, 0)` (NaN stays NaN)";
            Gelu       "gelu"        Float   Input   "GeluBackward0"       [gelu gelu_]             "GELU, exact form `x·Φ(x)` (`F.gelu(x)`)";
            Erf        "erf"         Float   Input   "ErfBackward0"        [erf erf_]               "error function";
            Floor      "floor"       Keep    Nothing "FloorBackward0"      [floor floor_]           "rounding toward −∞";
            Ceil       "ceil"        Keep    Nothing "CeilBackward0"       [ceil ceil_]             "rounding toward +∞";
            Round      "round"       Keep    Nothing "RoundBackward0"      [round round_]           "rounding half to even";
            Trunc      "trunc"       Keep    Nothing "TruncBackward0"      [trunc trunc_]           "rounding toward zero";
            Sign       "sign"        Keep    Nothing "SignBackward0"       [sign sign_]             "sign: −1, 0 or 1 (0 for ±0 and NaN, as PyTorch)";
            Reciprocal "reciprocal"  Float   Output  "ReciprocalBackward0" [reciprocal reciprocal_] "reciprocal `1/x`";
            Square     "square"      Keep    Input   "PowBackward0"        [square square_]         "square `x²`";
            BitNot     "bitwise_not" IntOnly Nothing "BitwiseNotBackward0" []                       "`!x`: every bit flipped (integers only; Bool uses logical not)";
        }
    };
}

/// What a unary op does with an integer or bool input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntRule {
    /// Exact on integers: the input's dtype is kept ([`UnaryOp::eval_int`]).
    Keep,
    /// Computed in, and returned as, the default float dtype.
    Float,
    /// Defined on integers only: a float input is an error, as in PyTorch.
    IntOnly,
}

/// What a unary op's backward rule reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnarySaves {
    /// The op's input.
    Input,
    /// The op's output.
    Output,
    /// Nothing (the gradient is `-g` or zero).
    Nothing,
}

macro_rules! define_unary_op {
    ($($op:ident $name:literal $int:ident $saves:ident $grad_fn:literal [$($method:ident)*] $doc:literal;)*) => {
        /// Elementwise functions of one operand (the rows of [`unary_op_table!`](crate::unary_op_table)).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum UnaryOp {
            $(
                #[doc = $doc]
                $op,
            )*
        }

        impl UnaryOp {
            /// Every unary op, in table order.
            pub const ALL: &'static [UnaryOp] = &[$(UnaryOp::$op),*];

            /// The op's name as PyTorch spells it.
            pub fn name(self) -> &'static str {
                match self {
                    $(UnaryOp::$op => $name,)*
                }
            }

            /// The op named `name` (PyTorch's spelling), if there is one.
            pub fn from_name(name: &str) -> Option<UnaryOp> {
                match name {
                    $($name => Some(UnaryOp::$op),)*
                    _ => None,
                }
            }

            /// What an integer or bool input does.
            pub fn int_rule(self) -> IntRule {
                match self {
                    $(UnaryOp::$op => IntRule::$int,)*
                }
            }

            /// PyTorch's grad_fn name for the op's backward node.
            pub fn grad_fn_name(self) -> &'static str {
                match self {
                    $(UnaryOp::$op => $grad_fn,)*
                }
            }

            /// What the op's backward rule reads.
            pub fn saves(self) -> UnarySaves {
                match self {
                    $(UnaryOp::$op => UnarySaves::$saves,)*
                }
            }
        }
    };
}

unary_op_table!(define_unary_op);

impl UnaryOp {
    /// True for the ops defined on integers only (floats are an error, as in PyTorch).
    pub fn is_int_only(self) -> bool {
        self.int_rule() == IntRule::IntOnly
    }

    /// True when an integer or bool input keeps its dtype (the op is exact on integers);
    /// false when it is computed in, and returns, the default float dtype.
    pub fn keeps_int_dtype(self) -> bool {
        self.int_rule() != IntRule::Float
    }

    /// The op on an integer (for ops where [`Self::keeps_int_dtype`]), wrapping on overflow.
    pub fn eval_int(self, x: i64) -> i64 {
        use UnaryOp::*;
        match self {
            Neg => x.wrapping_neg(),
            Abs => x.wrapping_abs(),
            Relu => x.max(0),
            Floor | Ceil | Round | Trunc => x,
            Sign => x.signum(),
            Square => x.wrapping_mul(x),
            BitNot => !x,
            Exp | Exp2 | Log | Log2 | Log1p | Expm1 | Sqrt | Rsqrt | Sin | Cos | Tan | Tanh | Asin | Acos | Atan
            | Sinh | Cosh | Asinh | Acosh | Atanh | Sigmoid | Gelu | Erf | Reciprocal => {
                unreachable!("{} is not an integer op", self.name())
            }
        }
    }

    /// The op on a float: the definition every backend is tested against.
    #[inline(always)]
    pub fn eval<F: Float>(self, x: F) -> F {
        use UnaryOp::*;
        let one = F::one();
        match self {
            Neg => -x,
            Abs => x.abs(),
            Exp => x.exp(),
            Exp2 => x.exp2(),
            Log => x.ln(),
            Log2 => x.log2(),
            Log1p => x.ln_1p(),
            Expm1 => x.exp_m1(),
            Sqrt => x.sqrt(),
            Rsqrt => one / x.sqrt(),
            Sin => x.sin(),
            Cos => x.cos(),
            Tan => x.tan(),
            Tanh => x.tanh(),
            Asin => x.asin(),
            Acos => x.acos(),
            Atan => x.atan(),
            Sinh => x.sinh(),
            Cosh => x.cosh(),
            Asinh => x.asinh(),
            Acosh => x.acosh(),
            Atanh => x.atanh(),
            Sigmoid => one / (one + (-x).exp()),
            Relu => {
                if x > F::zero() || x.is_nan() {
                    x
                } else {
                    F::zero()
                }
            }
            Gelu => x * F::c(0.5) * (one + (x * F::c(std::f64::consts::FRAC_1_SQRT_2)).erf()),
            Erf => x.erf(),
            Floor => x.floor(),
            Ceil => x.ceil(),
            Round => x.round_half_even(),
            Trunc => x.trunc(),
            // (0 < x) - (x < 0), as PyTorch: 0 for ±0 and NaN.
            Sign => {
                if x > F::zero() {
                    one
                } else if x < F::zero() {
                    -one
                } else {
                    F::zero()
                }
            }
            Reciprocal => one / x,
            Square => x * x,
            BitNot => unreachable!("bitwise_not is defined on integers only"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        for &op in UnaryOp::ALL {
            assert_eq!(UnaryOp::from_name(op.name()), Some(op));
        }
        let mut names: Vec<_> = UnaryOp::ALL.iter().map(|op| op.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), UnaryOp::ALL.len());
        assert_eq!(UnaryOp::from_name("mish"), None);
        assert_eq!(UnaryOp::from_name("silu"), None, "silu is a composite op");
    }

    #[test]
    fn integer_rules() {
        for &op in UnaryOp::ALL {
            if op.keeps_int_dtype() {
                // Every op that keeps integer dtypes has an integer form (no panic).
                let _ = op.eval_int(-3);
            }
        }
        assert_eq!(UnaryOp::Square.eval_int(-3), 9);
        assert!(UnaryOp::BitNot.is_int_only() && UnaryOp::BitNot.keeps_int_dtype());
        assert!(!UnaryOp::Exp.keeps_int_dtype());
    }

    #[test]
    fn float_formulas() {
        assert!((UnaryOp::Gelu.eval(1.0f64) - 0.841_344_746_068_542_9).abs() < 1e-15);
        assert_eq!(UnaryOp::Round.eval(2.5f32), 2.0);
        assert_eq!(UnaryOp::Round.eval(-0.5f32), -0.0);
        assert!(UnaryOp::Relu.eval(f32::NAN).is_nan());
    }
}
