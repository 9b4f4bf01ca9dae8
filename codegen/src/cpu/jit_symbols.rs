//! The Rust functions generated code calls for the ops it does not inline (f64
//! transcendentals, f32 ops without an inline polynomial, `pow`, `atan2`, float remainder,
//! integer `pow`, random numbers), and the native f32 slice routines the tiled kernels call on a
//! tile (`kiln_vm_*_f32`, from `kiln_runtime::cpu::simd::slice_math`, specialized for this CPU when the
//! symbol is resolved; `kiln_rand_*_f32_slice`, the runtime's `philox::uniform_from`/`normal_from`,
//! which fill a tile with its elements of a draw four per Philox block). Each scalar one is the
//! scalar reference itself (`UnaryOp::eval`, `BinaryOp::eval`, `BinaryOp::eval_int`, the
//! runtime's `philox::uniform_at`/`normal_at`), so those ops (and the random tiles) equal the
//! eager ones bit for bit. A unary op's `kiln_f32x4_*` helper applies the same `UnaryOp::eval`
//! to the four f32 lanes of a vector in a stack slot, one call per vector (an F32X4 kernel's
//! f32 ops without an inline form, and its bf16 transcendentals).
//!
//! Every helper is known to the JIT by name ([`find`]); a kernel's module declares only the
//! ones its code calls.

use crate::ir::{draw_of_scalars, RandDist};
use cranelift_codegen::ir::{types, AbiParam, Signature, Type};
use cranelift_jit::JITModule;
use cranelift_module::Module;
use kiln_runtime::cpu::row_reduce;
use kiln_runtime::cpu::simd::slice_math;
use kiln_runtime::op_kind::{BinaryOp, UnaryOp};

/// One callable helper: symbol name, address and C signature.
pub(crate) struct Helper {
    /// The symbol name registered with the JIT.
    pub name: &'static str,
    /// The function's address.
    pub ptr: *const u8,
    /// Parameter types.
    pub params: &'static [Type],
    /// Return type (`None` for a routine that returns nothing).
    pub ret: Option<Type>,
}

macro_rules! unary_helpers {
    ($($op:ident $name:literal $int:ident $saves:ident $grad_fn:literal [$($m:ident)*] $doc:literal;)*) => {
        /// The helper symbol for unary `op` on f32 (`f64 == false`) or f64.
        pub(crate) fn unary_name(op: UnaryOp, f64: bool) -> &'static str {
            assert!(!op.is_int_only(), "{} is an integer op: it has no float helper", op.name());
            match (op, f64) {
                $(
                    (UnaryOp::$op, false) => concat!("kiln_f32_", stringify!($op)),
                    (UnaryOp::$op, true) => concat!("kiln_f64_", stringify!($op)),
                )*
            }
        }

        /// The helper symbol for unary `op` on the four f32 lanes of a vector:
        /// `fn(lanes: *mut f32)`, each of the four f32 at `lanes` replaced by `op` of it (the
        /// eager routine, as [`unary_name`]'s helper; one call per vector instead of per lane).
        pub(crate) fn unary_x4_name(op: UnaryOp) -> &'static str {
            assert!(!op.is_int_only(), "{} is an integer op: it has no float helper", op.name());
            match op {
                $(UnaryOp::$op => concat!("kiln_f32x4_", stringify!($op)),)*
            }
        }

        fn unary_all(v: &mut Vec<Helper>) {
            $(
                if !UnaryOp::$op.is_int_only() {
                    extern "C" fn f32x4_fn(lanes: *mut f32) {
                        // SAFETY: the generated code passes a 16-byte stack slot holding the four
                        // lanes, which nothing else references during the call.
                        let lanes = unsafe { &mut *lanes.cast::<[f32; 4]>() };
                        for x in lanes {
                            *x = UnaryOp::$op.eval(*x);
                        }
                    }
                    v.push(Helper { name: concat!("kiln_f32x4_", stringify!($op)), ptr: f32x4_fn as *const u8, params: &[types::I64], ret: None });
                    extern "C" fn f32_fn(x: f32) -> f32 {
                        UnaryOp::$op.eval(x)
                    }
                    extern "C" fn f64_fn(x: f64) -> f64 {
                        UnaryOp::$op.eval(x)
                    }
                    v.push(Helper { name: concat!("kiln_f32_", stringify!($op)), ptr: f32_fn as *const u8, params: &[types::F32], ret: Some(types::F32) });
                    v.push(Helper { name: concat!("kiln_f64_", stringify!($op)), ptr: f64_fn as *const u8, params: &[types::F64], ret: Some(types::F64) });
                }
            )*
        }
    };
}

kiln_runtime::unary_op_table!(unary_helpers);

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
                    v.push(Helper { name: concat!("kiln_f32_", stringify!($op)), ptr: f32_fn as *const u8, params: &[types::F32, types::F32], ret: Some(types::F32) });
                    v.push(Helper { name: concat!("kiln_f64_", stringify!($op)), ptr: f64_fn as *const u8, params: &[types::F64, types::F64], ret: Some(types::F64) });
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
                    v.push(Helper { name: $name, ptr: f as *const u8, params: &[types::F64, types::F64, types::F64, types::F64, types::I64], ret: Some(types::$ty) });
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

macro_rules! rand_slice_helpers {
    ($(($dist:ident, $name:literal)),* $(,)?) => {
        /// The symbol of the native f32 slice routine of an `InstOp::Rand` of `dist`:
        /// `fn(seed_lo, seed_hi, offset_lo, offset_hi: f64, index: i64, dst: *mut f32, n: usize)`
        /// fills `dst[..n]` with elements `index..index + n` of the draw whose four run-time
        /// scalars are given (each what [`rand_name`]'s helper gives for its index).
        pub(crate) fn rand_slice_name(dist: RandDist) -> &'static str {
            match dist {
                $(RandDist::$dist => $name,)*
            }
        }

        fn rand_slice_all(v: &mut Vec<Helper>) {
            $(
                {
                    extern "C" fn f(seed_lo: f64, seed_hi: f64, offset_lo: f64, offset_hi: f64, index: i64, dst: *mut f32, n: usize) {
                        // SAFETY: the generated code passes a tile buffer (a stack slot of
                        // `TILE` f32, aligned, which nothing else references during the call)
                        // and `n` at most its length, so `dst[..n]` is valid and exclusive.
                        let out = unsafe { std::slice::from_raw_parts_mut(dst, n) };
                        RandDist::$dist.fill_from(out, &draw_of_scalars([seed_lo, seed_hi, offset_lo, offset_hi]), index as u64);
                    }
                    v.push(Helper { name: $name, ptr: f as *const u8, params: &[types::F64, types::F64, types::F64, types::F64, types::I64, types::I64, types::I64], ret: None });
                }
            )*
        }
    };
}

rand_slice_helpers!((Uniform, "kiln_rand_uniform_f32_slice"), (Normal, "kiln_rand_normal_f32_slice"),);

macro_rules! slice_helpers {
    ($(($op:ident, $name:literal)),* $(,)?) => {
        /// The symbol of the native f32 slice routine of unary `op`
        /// (`kiln_runtime::cpu::simd::slice_math::slice_fn`: `fn(src, dst: *f32, n: usize)`, in place
        /// when `src == dst`), for the ops that have one.
        pub(crate) fn slice_name(op: UnaryOp) -> Option<&'static str> {
            match op {
                $(UnaryOp::$op => Some($name),)*
                _ => None,
            }
        }

        fn slice_all(v: &mut Vec<Helper>) {
            $(
                if let Some(f) = slice_math::slice_fn(UnaryOp::$op) {
                    v.push(Helper { name: $name, ptr: f as *const u8, params: &[types::I64, types::I64, types::I64], ret: None });
                }
            )*
        }
    };
}

slice_helpers!((Exp, "kiln_vm_exp_f32"), (Tanh, "kiln_vm_tanh_f32"), (Sigmoid, "kiln_vm_sigmoid_f32"),);

/// The native row routines of [`super::native_rows`] and [`super::native_epilogue`], under the
/// names their `helper` methods give.
fn row_all(v: &mut Vec<Helper>) {
    use types::{F32, F64, I64};
    let f = row_reduce::row_fns();
    v.push(Helper { name: "kiln_row_sum_f32", ptr: f.sum as *const u8, params: &[I64, I64], ret: Some(F64) });
    v.push(Helper { name: "kiln_row_max_f32", ptr: f.max as *const u8, params: &[I64, I64], ret: Some(F32) });
    v.push(Helper {
        name: "kiln_row_sq_dev_sum_f32",
        ptr: f.sq_dev_sum as *const u8,
        params: &[I64, F32, I64, I64],
        ret: Some(F64),
    });
    v.push(Helper {
        name: "kiln_row_exp_sum_f32",
        ptr: f.exp_sum as *const u8,
        params: &[I64, F32, I64, I64, I64],
        ret: Some(F64),
    });
    v.push(Helper {
        name: "kiln_row_count_eq_f32",
        ptr: f.count_eq as *const u8,
        params: &[I64, F32, I64],
        ret: Some(I64),
    });
    v.push(Helper {
        name: "kiln_row_norm_affine_f32",
        ptr: f.norm_affine as *const u8,
        params: &[I64, F32, F32, I64, I64, I64, I64, I64],
        ret: None,
    });
    v.push(Helper {
        name: "kiln_row_onehot_sub_f32",
        ptr: f.onehot_sub as *const u8,
        params: &[I64, F32, F32, F32, I64, F32, F32, I64, I64, I64],
        ret: None,
    });
}

/// The helpers of f16 values, which kernels hold as the f32 of the same number
/// (`FnEmitter::load_value`): f16's conversions, which x86 has no scalar instruction for
/// without F16C, taken from the `half` crate that eager kernels use (bf16's are inline: a few
/// integer instructions).
pub(crate) mod half_names {
    /// `fn(bits: i32) -> f32`: the f16 with these low 16 bits.
    pub const F16_LOAD: &str = "kiln_f16_load";
    /// `fn(f32) -> i32`: the bits of the f16 nearest (ties to even).
    pub const F16_STORE: &str = "kiln_f16_store";
    /// `fn(f32) -> f32`: the f16 nearest, as f32.
    pub const F16_ROUND: &str = "kiln_f16_round";
}

extern "C" fn f16_load(bits: i32) -> f32 {
    half::f16::from_bits(bits as u16).to_f32()
}
extern "C" fn f16_store(x: f32) -> i32 {
    half::f16::from_f32(x).to_bits() as i32
}
extern "C" fn f16_round(x: f32) -> f32 {
    half::f16::from_f32(x).to_f32()
}

/// The helpers of [`half_names`].
fn half_all(v: &mut Vec<Helper>) {
    use half_names::*;
    use types::{F32, I32};
    v.push(Helper { name: F16_LOAD, ptr: f16_load as *const u8, params: &[I32], ret: Some(F32) });
    v.push(Helper { name: F16_STORE, ptr: f16_store as *const u8, params: &[F32], ret: Some(I32) });
    v.push(Helper { name: F16_ROUND, ptr: f16_round as *const u8, params: &[F32], ret: Some(F32) });
}

/// Every helper.
fn all() -> Vec<Helper> {
    let mut v = Vec::new();
    unary_all(&mut v);
    binary_all(&mut v);
    rand_all(&mut v);
    rand_slice_all(&mut v);
    slice_all(&mut v);
    row_all(&mut v);
    half_all(&mut v);
    v.push(Helper {
        name: POW_I64,
        ptr: pow_i64 as *const u8,
        params: &[types::I64, types::I64],
        ret: Some(types::I64),
    });
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
        sig.returns.extend(self.ret.map(AbiParam::new));
        sig
    }
}
