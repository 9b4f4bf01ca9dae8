//! The CUDA C formula of every op kind, for a compute type of `float`, `double` or (for
//! integer and bool tensors) `long long`, with the CPU kernels' integer semantics: computed in
//! i64, wrapping (through unsigned arithmetic, which C++ defines), then narrowed on store.
//!
//! Operands are always names of SSA temporaries (never expressions with side effects or cost),
//! so a formula may mention an operand more than once.

use kiln_runtime::op_kind::{BinaryOp, CmpOp, UnaryOp};

/// The type an elementwise kernel computes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ComputeType {
    /// `float` (for f32, f16, bf16: f16/bf16 compute in f32, as the eager CPU kernels do).
    F32,
    /// `double` (for f64).
    F64,
    /// `long long` (for i64, i32, u8 and bool: the CPU kernels compute integers in i64).
    I64,
}

impl ComputeType {
    /// The C type name.
    pub fn c_type(self) -> &'static str {
        match self {
            ComputeType::F32 => "float",
            ComputeType::F64 => "double",
            ComputeType::I64 => "long long",
        }
    }

    /// The compute type of a dtype: f16 and bf16 compute in `float`, integers and bool in
    /// `long long`.
    pub fn of(dtype: kiln_runtime::DType) -> ComputeType {
        use kiln_runtime::DType::*;
        match dtype {
            F32 | F16 | BF16 => ComputeType::F32,
            F64 => ComputeType::F64,
            I64 | I32 | U8 | Bool => ComputeType::I64,
        }
    }

    /// A CUDA math function's name for this type: `expf` or `exp` (integer kernels call none).
    pub fn func(self, base: &str) -> String {
        match self {
            ComputeType::F32 => format!("{base}f"),
            ComputeType::F64 | ComputeType::I64 => base.to_string(),
        }
    }

    /// A literal of this type for `v` (inf and NaN through bit patterns; negative values
    /// parenthesized; an integer literal is `v` truncated toward zero).
    pub fn lit(self, v: f64) -> String {
        match self {
            ComputeType::I64 => {
                let i = v as i64;
                if i == i64::MIN {
                    "(-9223372036854775807LL - 1LL)".into()
                } else if i < 0 {
                    format!("({i}LL)")
                } else {
                    format!("{i}LL")
                }
            }
            ComputeType::F32 => {
                let f = v as f32;
                if f.is_nan() {
                    "__int_as_float(0x7fc00000)".into()
                } else if f.is_infinite() {
                    if f > 0.0 {
                        "__int_as_float(0x7f800000)".into()
                    } else {
                        "(-__int_as_float(0x7f800000))".into()
                    }
                } else {
                    let s = format!("{f:?}f");
                    if f.is_sign_negative() {
                        format!("({s})")
                    } else {
                        s
                    }
                }
            }
            ComputeType::F64 => {
                if v.is_nan() {
                    "__longlong_as_double(0x7ff8000000000000LL)".into()
                } else if v.is_infinite() {
                    if v > 0.0 {
                        "__longlong_as_double(0x7ff0000000000000LL)".into()
                    } else {
                        "(-__longlong_as_double(0x7ff0000000000000LL))".into()
                    }
                } else {
                    let s = format!("{v:?}");
                    let s = if s.contains(['.', 'e', 'E']) { s } else { format!("{s}.0") };
                    if v.is_sign_negative() {
                        format!("({s})")
                    } else {
                        s
                    }
                }
            }
        }
    }
}

/// Wrapping i64 arithmetic on `long long` operands: `a op b` computed in `unsigned long long`.
fn wrapping(a: &str, op: &str, b: &str) -> String {
    format!("(long long)((unsigned long long){a} {op} (unsigned long long){b})")
}

/// `op(a)` on `long long`, as `UnaryOp::eval_int`; `None` for ops that are not integer ops
/// (their integer inputs compute in a float dtype).
pub fn unary_int(op: UnaryOp, a: &str) -> Option<String> {
    use UnaryOp::*;
    Some(match op {
        Neg => wrapping("0", "-", a),
        Abs => format!("({a} < 0LL) ? {} : {a}", wrapping("0", "-", a)),
        Relu => format!("({a} > 0LL) ? {a} : 0LL"),
        Floor | Ceil | Round | Trunc => a.to_string(),
        Sign => format!("(long long)(({a} > 0LL) - ({a} < 0LL))"),
        Square => wrapping(a, "*", a),
        BitNot => format!("~{a}"),
        _ => return None,
    })
}

/// `op(a, b)` on `long long`, as `BinaryOp::eval_int`; `Rem` and `Pow` call the helpers
/// `kiln_rem_i64` / `kiln_pow_i64`. `None` for `Div` and `Atan2`, which integer operands
/// compute in a float dtype.
pub fn binary_int(op: BinaryOp, a: &str, b: &str) -> Option<String> {
    use BinaryOp::*;
    Some(match op {
        Add => wrapping(a, "+", b),
        Sub => wrapping(a, "-", b),
        Mul => wrapping(a, "*", b),
        Rem => format!("kiln_rem_i64({a}, {b})"),
        Pow => format!("kiln_pow_i64({a}, {b})"),
        Maximum => format!("({a} > {b}) ? {a} : {b}"),
        Minimum => format!("({a} < {b}) ? {a} : {b}"),
        BitAnd => format!("{a} & {b}"),
        BitOr => format!("{a} | {b}"),
        BitXor => format!("{a} ^ {b}"),
        // A shift < 0 or >= 64 gives 0 (left) or the sign fill (right), as the CPU kernels.
        BitShl => format!("({b} >= 0LL && {b} < 64LL) ? (long long)((unsigned long long){a} << {b}) : 0LL"),
        BitShr => format!("{a} >> (({b} >= 0LL && {b} < 64LL) ? {b} : 63LL)"),
        Div | Atan2 => return None,
    })
}

/// `op(a)` in the compute type `ct`: [`unary_int`] for `long long`, else [`unary`]; `None`
/// when `ct` cannot compute it (a float op on integers, `bitwise_not` on floats).
pub fn unary_in(op: UnaryOp, a: &str, ct: ComputeType) -> Option<String> {
    match ct {
        ComputeType::I64 => unary_int(op, a),
        _ if op.is_int_only() => None,
        _ => Some(unary(op, a, ct)),
    }
}

/// `op(a, b)` in the compute type `ct` ([`binary_int`] for `long long`, else [`binary`]) and
/// the [`helper`] the formula calls, if any; `None` when `ct` cannot compute it (true division
/// on integers, bitwise ops on floats).
pub fn binary_in(op: BinaryOp, a: &str, b: &str, ct: ComputeType) -> Option<(String, Option<&'static str>)> {
    let helper = match (op, ct) {
        (BinaryOp::Rem, ComputeType::I64) => Some("kiln_rem_i64"),
        (BinaryOp::Pow, ComputeType::I64) => Some("kiln_pow_i64"),
        (BinaryOp::Rem, _) => Some("kiln_rem"),
        _ => None,
    };
    let formula = match ct {
        ComputeType::I64 => binary_int(op, a, b)?,
        _ if op.is_bitwise() => return None,
        _ => binary(op, a, b, ct),
    };
    Some((formula, helper))
}

/// `op(a)` in CUDA C, with PyTorch's semantics (see `UnaryOp::eval`), for a float compute type.
pub fn unary(op: UnaryOp, a: &str, ct: ComputeType) -> String {
    use UnaryOp::*;
    let l = |v: f64| ct.lit(v);
    let f = |name: &str| ct.func(name);
    let (one, zero) = (l(1.0), l(0.0));
    match op {
        Neg => format!("-{a}"),
        Abs => format!("{}({a})", f("fabs")),
        Exp => format!("{}({a})", f("exp")),
        Exp2 => format!("{}({a})", f("exp2")),
        Log => format!("{}({a})", f("log")),
        Log2 => format!("{}({a})", f("log2")),
        Log1p => format!("{}({a})", f("log1p")),
        Expm1 => format!("{}({a})", f("expm1")),
        Sqrt => format!("{}({a})", f("sqrt")),
        Rsqrt => format!("{one} / {}({a})", f("sqrt")),
        Sin => format!("{}({a})", f("sin")),
        Cos => format!("{}({a})", f("cos")),
        Tan => format!("{}({a})", f("tan")),
        Tanh => format!("{}({a})", f("tanh")),
        Asin => format!("{}({a})", f("asin")),
        Acos => format!("{}({a})", f("acos")),
        Atan => format!("{}({a})", f("atan")),
        Sinh => format!("{}({a})", f("sinh")),
        Cosh => format!("{}({a})", f("cosh")),
        Asinh => format!("{}({a})", f("asinh")),
        Acosh => format!("{}({a})", f("acosh")),
        Atanh => format!("{}({a})", f("atanh")),
        Sigmoid => format!("{one} / ({one} + {}(-{a}))", f("exp")),
        // NaN propagates; -0.0 and negatives give +0.
        Relu => format!("({a} > {zero}) ? {a} : (({a} != {a}) ? {a} : {zero})"),
        Gelu => format!("{a} * {} * ({one} + {}({a} * {}))", l(0.5), f("erf"), l(std::f64::consts::FRAC_1_SQRT_2)),
        Erf => format!("{}({a})", f("erf")),
        Floor => format!("{}({a})", f("floor")),
        Ceil => format!("{}({a})", f("ceil")),
        // rint rounds half to even in the default rounding mode, as torch.round.
        Round => format!("{}({a})", f("rint")),
        Trunc => format!("{}({a})", f("trunc")),
        // 0 for ±0 and NaN.
        Sign => format!("({a} > {zero}) ? {one} : (({a} < {zero}) ? {} : {zero})", l(-1.0)),
        Reciprocal => format!("{one} / {a}"),
        Square => format!("{a} * {a}"),
        // Integer-only: `emit_elementwise` refuses it (kernels compute in float types).
        BitNot => unreachable!("bitwise_not is refused before emission"),
    }
}

/// `op(a, b)` in CUDA C for a float compute type. `Rem` calls the helper `kiln_rem` (see [`helper`]).
pub fn binary(op: BinaryOp, a: &str, b: &str, ct: ComputeType) -> String {
    use BinaryOp::*;
    match op {
        Add => format!("{a} + {b}"),
        Sub => format!("{a} - {b}"),
        Mul => format!("{a} * {b}"),
        Div => format!("{a} / {b}"),
        Rem => format!("kiln_rem({a}, {b})"),
        Pow => format!("{}({a}, {b})", ct.func("pow")),
        // NaN-propagating, unlike fmax/fmin.
        Maximum => format!("({a} != {a}) ? {a} : (({b} != {b}) ? {b} : {}({a}, {b}))", ct.func("fmax")),
        Minimum => format!("({a} != {a}) ? {a} : (({b} != {b}) ? {b} : {}({a}, {b}))", ct.func("fmin")),
        Atan2 => format!("{}({a}, {b})", ct.func("atan2")),
        // Integer-only: `emit_elementwise` refuses them (kernels compute in float types).
        BitAnd | BitOr | BitXor | BitShl | BitShr => unreachable!("bitwise ops are refused before emission"),
    }
}

/// `op(a, b)` as 1 or 0 of the compute type (IEEE: only `ne` is true with a NaN).
pub fn cmp(op: CmpOp, a: &str, b: &str, ct: ComputeType) -> String {
    let sym = match op {
        CmpOp::Eq => "==",
        CmpOp::Ne => "!=",
        CmpOp::Lt => "<",
        CmpOp::Le => "<=",
        CmpOp::Gt => ">",
        CmpOp::Ge => ">=",
    };
    format!("({a} {sym} {b}) ? {} : {}", ct.lit(1.0), ct.lit(0.0))
}

/// Device helper functions, by name: emitted only when a kernel uses them.
pub fn helper(name: &str, ct: ComputeType) -> String {
    let t = ct.c_type();
    match name {
        // As BinaryOp::eval_int: wrapping (MIN % -1 is 0), the divisor's sign; a zero divisor
        // gives 0 instead of a fault (the CPU path refuses it before computing).
        "kiln_rem_i64" => "__device__ __forceinline__ long long kiln_rem_i64(long long a, long long b) {\n    if (b == 0LL || b == -1LL) return 0LL;\n    long long r = a % b;\n    return (r != 0LL && ((r < 0LL) != (b < 0LL))) ? r + b : r;\n}\n".into(),
        // As BinaryOp::eval_int: a negative exponent gives 1/a^|b| truncated, else wrapping
        // square-and-multiply over the exponent's bits (clamped to u32::MAX as `wrapping_pow`).
        "kiln_pow_i64" => "__device__ __forceinline__ long long kiln_pow_i64(long long a, long long b) {\n    if (b < 0LL) return a == 1LL ? 1LL : (a == -1LL ? ((b & 1LL) ? -1LL : 1LL) : 0LL);\n    unsigned long long e = b > 4294967295LL ? 4294967295ULL : (unsigned long long)b;\n    unsigned long long base = (unsigned long long)a, r = 1ULL;\n    while (e) {\n        if (e & 1ULL) r *= base;\n        base *= base;\n        e >>= 1;\n    }\n    return (long long)r;\n}\n".into(),
        // Python's modulo: the result has the sign of the divisor (torch.remainder).
        "kiln_rem" => format!(
            "__device__ __forceinline__ {t} kiln_rem({t} a, {t} b) {{\n    {t} r = {}(a, b);\n    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;\n}}\n",
            ct.func("fmod")
        ),
        "kiln_f16" => "__device__ __forceinline__ float kiln_f16_to_f32(unsigned short h) {\n    float f;\n    asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h));\n    return f;\n}\n\
__device__ __forceinline__ unsigned short kiln_f32_to_f16(float f) {\n    unsigned short h;\n    asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n    return h;\n}\n\
__device__ __forceinline__ unsigned short kiln_f64_to_f16(double d) {\n    unsigned short h;\n    asm(\"cvt.rn.f16.f64 %0, %1;\" : \"=h\"(h) : \"d\"(d));\n    return h;\n}\n"
            .into(),
        // bf16 by bit manipulation (round to nearest even, NaN kept quiet), so no header and any
        // arch. From f64 through f32 rounded to odd, which rounds once (no double-rounding ties).
        "kiln_bf16" => "__device__ __forceinline__ float kiln_bf16_to_f32(unsigned short h) {\n    return __uint_as_float(((unsigned int)h) << 16);\n}\n\
__device__ __forceinline__ unsigned short kiln_f32_to_bf16(float f) {\n    unsigned int u = __float_as_uint(f);\n    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);\n    u += 0x7fffu + ((u >> 16) & 1u);\n    return (unsigned short)(u >> 16);\n}\n\
__device__ __forceinline__ unsigned short kiln_f64_to_bf16(double d) {\n    float f = __double2float_rz(d);\n    if ((double)f != d && f == f) f = __uint_as_float(__float_as_uint(f) | 1u);\n    return kiln_f32_to_bf16(f);\n}\n"
            .into(),
        // Philox draws of fused kernels: the CPU generator's numbers.
        "kiln_philox" => super::philox::fused_draw_functions(),
        _ => unreachable!("unknown helper {name}"),
    }
}
