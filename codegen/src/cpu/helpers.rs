//! The Rust functions generated code calls for the ops it does not inline (f64
//! transcendentals, f32 ops without an inline polynomial, `pow`, `atan2`, float remainder,
//! integer `pow`, random numbers). Each one is the scalar reference itself (`UnaryOp::eval`,
//! `BinaryOp::eval`, `BinaryOp::eval_int`, the runtime's `philox::uniform_at`/`normal_at`),
//! so those ops equal the eager ones bit for bit.
//!
//! Every helper is known to the JIT by name ([`find`]); a kernel's module declares only the
//! ones its code calls.

use crate::ir::{draw_of_scalars, RandDist};
use cranelift_codegen::ir::{types, AbiParam, Signature, Type};
use cranelift_jit::JITModule;
use cranelift_module::Module;
use kiln_runtime::op_kind::{BinaryOp, UnaryOp};

/// One callable helper: symbol name, address and C signature.
pub(crate) struct Helper {
    /// The symbol name registered with the JIT.
    pub name: &'static str,
    /// The function's address.
    pub ptr: *const u8,
    /// Parameter types.
    pub params: &'static [Type],
    /// Return type.
    pub ret: Type,
}

macro_rules! unary_helpers {
    ($($op:ident),* $(,)?) => {
        /// The helper symbol for unary `op` on f32 (`f64 == false`) or f64.
        pub(crate) fn unary_name(op: UnaryOp, f64: bool) -> &'static str {
            match (op, f64) {
                $(
                    (UnaryOp::$op, false) => concat!("kiln_f32_", stringify!($op)),
                    (UnaryOp::$op, true) => concat!("kiln_f64_", stringify!($op)),
                )*
                (UnaryOp::BitNot, _) => unreachable!("bitwise_not is an integer op: it has no float helper"),
            }
        }

        fn unary_all(v: &mut Vec<Helper>) {
            $(
                {
                    extern "C" fn f32_fn(x: f32) -> f32 {
                        UnaryOp::$op.eval(x)
                    }
                    extern "C" fn f64_fn(x: f64) -> f64 {
                        UnaryOp::$op.eval(x)
                    }
                    v.push(Helper { name: concat!("kiln_f32_", stringify!($op)), ptr: f32_fn as *const u8, params: &[types::F32], ret: types::F32 });
                    v.push(Helper { name: concat!("kiln_f64_", stringify!($op)), ptr: f64_fn as *const u8, params: &[types::F64], ret: types::F64 });
                }
            )*
        }
    };
}

unary_helpers!(
    Neg, Abs, Exp, Exp2, Log, Log2, Log1p, Expm1, Sqrt, Rsqrt, Sin, Cos, Tan, Tanh, Sigmoid, Relu, Gelu, GeluTanh, Silu,
    Softplus, Erf, Floor, Ceil, Round, Trunc, Sign, Reciprocal, Square,
);

macro_rules! binary_helpers {
    ($($op:ident),* $(,)?) => {
        /// The helper symbol for binary `op` on f32 or f64 (only the ops listed here have one).
        pub(crate) fn binary_name(op: BinaryOp, f64: bool) -> Option<&'static str> {
            match (op, f64) {
                $(
                    (BinaryOp::$op, false) => Some(concat!("kiln_f32_", stringify!($op))),
                    (BinaryOp::$op, true) => Some(concat!("kiln_f64_", stringify!($op))),
                )*
                _ => None,
            }
        }

        fn binary_all(v: &mut Vec<Helper>) {
            $(
                {
                    extern "C" fn f32_fn(a: f32, b: f32) -> f32 {
                        BinaryOp::$op.eval(a, b)
                    }
                    extern "C" fn f64_fn(a: f64, b: f64) -> f64 {
                        BinaryOp::$op.eval(a, b)
                    }
                    v.push(Helper { name: concat!("kiln_f32_", stringify!($op)), ptr: f32_fn as *const u8, params: &[types::F32, types::F32], ret: types::F32 });
                    v.push(Helper { name: concat!("kiln_f64_", stringify!($op)), ptr: f64_fn as *const u8, params: &[types::F64, types::F64], ret: types::F64 });
                }
            )*
        }
    };
}

binary_helpers!(Rem, Pow, Atan2);

/// The integer `pow` helper's symbol.
pub(crate) const POW_I64: &str = "kiln_i64_Pow";

extern "C" fn pow_i64(a: i64, b: i64) -> i64 {
    BinaryOp::Pow.eval_int(a, b)
}

macro_rules! rand_helpers {
    ($(($dist:ident, $is_f64:literal, $t:ty, $ty:ident, $name:literal)),* $(,)?) => {
        /// The helper symbol of an `InstOp::Rand` of `dist` on f32 (`f64 == false`) or f64:
        /// `fn(seed_lo, seed_hi, offset_lo, offset_hi: f64, index: i64) -> f32/f64`, element
        /// `index` of the draw whose four run-time scalars are given.
        pub(crate) fn rand_name(dist: RandDist, f64: bool) -> &'static str {
            match (dist, f64) {
                $((RandDist::$dist, $is_f64) => $name,)*
            }
        }

        fn rand_all(v: &mut Vec<Helper>) {
            $(
                {
                    extern "C" fn f(seed_lo: f64, seed_hi: f64, offset_lo: f64, offset_hi: f64, index: i64) -> $t {
                        RandDist::$dist.at(&draw_of_scalars([seed_lo, seed_hi, offset_lo, offset_hi]), index as u64)
                    }
                    v.push(Helper { name: $name, ptr: f as *const u8, params: &[types::F64, types::F64, types::F64, types::F64, types::I64], ret: types::$ty });
                }
            )*
        }
    };
}

rand_helpers!(
    (Uniform, false, f32, F32, "kiln_rand_uniform_f32"),
    (Uniform, true, f64, F64, "kiln_rand_uniform_f64"),
    (Normal, false, f32, F32, "kiln_rand_normal_f32"),
    (Normal, true, f64, F64, "kiln_rand_normal_f64"),
);

/// Every helper.
fn all() -> Vec<Helper> {
    let mut v = Vec::new();
    unary_all(&mut v);
    binary_all(&mut v);
    rand_all(&mut v);
    v.push(Helper { name: POW_I64, ptr: pow_i64 as *const u8, params: &[types::I64, types::I64], ret: types::I64 });
    v
}

/// The helper named `name`, if there is one.
pub(crate) fn find(name: &str) -> Option<Helper> {
    all().into_iter().find(|h| h.name == name)
}

impl Helper {
    /// The helper's signature in `module`'s calling convention.
    pub(crate) fn signature(&self, module: &JITModule) -> Signature {
        let mut sig = module.make_signature();
        sig.params.extend(self.params.iter().map(|&p| AbiParam::new(p)));
        sig.returns.push(AbiParam::new(self.ret));
        sig
    }
}
