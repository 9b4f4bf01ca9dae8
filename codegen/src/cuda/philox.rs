//! Philox 4x32-10 on the device: the CPU generator's numbers (`kiln_runtime::cpu::philox`)
//! as CUDA C device functions, and the eager kernels of `rand`/`randn`/`uniform_`/`normal_`,
//! `randint`/`random_` and `bernoulli_`.
//!
//! [`philox_functions`] is the text every random kernel includes. It is written in the subset
//! of C that is also host C: `__device__`/`__forceinline__`, the IEEE intrinsics
//! (`__fmul_rn`, `__fadd_rn`, `__fsub_rn`, `__fdiv_rn`, `__fsqrt_rn` and their `__d` forms)
//! and `__umul64hi` are the only CUDA words, so a test defines them away, compiles the same text with the host's
//! C compiler and compares its numbers with the CPU generator's ([`HOST_PRELUDE`]).
//!
//! **The same numbers.** Element `i` of the draw `(seed, offset)` is lane `i % 4` of group
//! `offset / 4 + i / 4`, the words are the CPU's (plane 0; plane 0 high and plane 1 low for
//! 64-bit words), and the conversions are the CPU's operation by operation: `u = (w >> (32 −
//! bits)) · 2^−bits` (exact), `lo + u·span` rounded once per operation (the intrinsics are
//! never contracted into an FMA, which `--fmad=true` would otherwise do), Box–Muller as
//! `sqrt(−2·ln(1 − u_a))·cos/sin(2π_f·u_b)` with the CPU's f32 constant for 2π. So uniform
//! values are **bit for bit** the CPU's. Normal values use three transcendentals: f32 draws
//! compute `log`, `cos` and `sin` in double and round once (correctly rounded in practice,
//! where the CPU's `logf`/`cosf`/`sinf` from the host libm are within one ulp of it and
//! misround about 1–2% of the grid), so an f32 normal value is within 3 ulp of |z|
//! (relative) of the CPU's and equal to it for ~98% of elements; f64 draws use CUDA's double
//! `log` (1 ulp) and `sin`/`cos` (2 ulp), so they are within 4 ulp of the CPU's (host libm
//! double functions: < 1 ulp). Integers and Bernoulli values are integer arithmetic on the
//! same words, so they are the CPU's exactly: `low + ((w64 · range) >> 64)` (the high word of
//! the 128-bit product, `__umul64hi`, added with wrap-around) and `(double)w32 < p · 2^32`.

use super::emit::{dtype_tag, fnv1a, Body, CUDA_CODEGEN_VERSION, ELEMENTWISE_BLOCK};
use super::ops::ComputeType;
use super::strided::{load, storage_type, store};
use kiln_runtime::cpu::philox::float_digits;
use kiln_runtime::cuda::{CudaError, CudaErrorKind};
use kiln_runtime::DType;
use std::fmt::Write;

/// What an eager random kernel fills its output with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RandKind {
    /// Uniform on `[low, high)`: parameters `lo`, `span` (compute type), `low`, `high` (as the
    /// dtype holds them): `kiln_runtime::cpu::philox::uniform_params`.
    Uniform,
    /// Normal: parameters `mean`, `std` (compute type): `philox::normal_params`.
    Normal,
    /// Integers in `[low, low + range)` (`randint`, `random_`), in any dtype that holds them:
    /// words `low` (an `i64`'s bits) and `range` (`philox::integer_range`).
    Integers,
    /// Ones with probability `p`, zeros otherwise (`bernoulli_`), in any dtype: word 0 the
    /// bits of the f64 `philox::bernoulli_threshold(p)`.
    Bernoulli,
}

impl RandKind {
    /// The op's name in kernel names and messages.
    pub fn name(self) -> &'static str {
        match self {
            RandKind::Uniform => "uniform",
            RandKind::Normal => "normal",
            RandKind::Integers => "integers",
            RandKind::Bernoulli => "bernoulli",
        }
    }

    /// True for the kinds whose values need a floating-point dtype (uniform, normal).
    pub fn needs_float(self) -> bool {
        matches!(self, RandKind::Uniform | RandKind::Normal)
    }
}

/// A generated eager random kernel. Signature: `out, n, seed, offset, p0, p1, p2, p3`, all
/// but `out` `unsigned long long`, the parameters as [`RandKind`] says (float parameters as
/// the bits of an f64). One thread per group of four elements (grid-stride), each writing the
/// group's elements below `n`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RandKernel {
    /// The `extern "C"` kernel's name (`kiln_rand_<kind>_<dtype>_<hash>`).
    pub name: String,
    /// The CUDA C source.
    pub source: String,
    /// The distribution.
    pub kind: RandKind,
    /// The output's dtype (a float dtype for uniform and normal values).
    pub dtype: DType,
}

/// The 64-bit words a random kernel takes after its output buffer: `n`, seed, offset and the
/// four parameters.
pub const RAND_WORDS: usize = 7;

/// What makes [`philox_functions`] host C: the CUDA words it uses, defined for a C compiler
/// (compile with `-ffp-contract=off` so that no product and sum fuse, as on the device).
pub const HOST_PRELUDE: &str = "#include <math.h>\n\
#define __device__ static\n\
#define __forceinline__ inline\n\
#define __fmul_rn(a, b) ((float)(a) * (float)(b))\n\
#define __fadd_rn(a, b) ((float)(a) + (float)(b))\n\
#define __fsub_rn(a, b) ((float)(a) - (float)(b))\n\
#define __fdiv_rn(a, b) ((float)(a) / (float)(b))\n\
#define __fsqrt_rn(a) sqrtf(a)\n\
#define __dmul_rn(a, b) ((double)(a) * (double)(b))\n\
#define __dadd_rn(a, b) ((double)(a) + (double)(b))\n\
#define __dsub_rn(a, b) ((double)(a) - (double)(b))\n\
#define __dsqrt_rn(a) sqrt(a)\n\
#define __umul64hi(a, b) ((unsigned long long)(((unsigned __int128)(a) * (unsigned __int128)(b)) >> 64))\n";

/// The device functions of the CPU generator (C subset; see the module docs), each in an
/// `f32` and an `f64` form (`_x` below):
///
/// - `kiln_philox4x32_10(c, k0, k1)`: the block function, in place on the counter `c[4]`;
/// - `kiln_philox_plane(seed, offset, group, plane, w)`: the four words of a group;
/// - `kiln_philox_words64(seed, offset, group, w)`: its four 64-bit words (plane 0 high,
///   plane 1 low);
/// - `kiln_integer_group(seed, offset, group, low, range, v)`: the four integers
///   `low + ((w64 · range) >> 64)` of a group (wrapping, as `long long`);
/// - `kiln_bernoulli_group(seed, offset, group, threshold, v)`: the four values
///   `w32 < threshold` (0 or 1, as `long long`) of a group;
/// - `kiln_philox_units_f32(seed, offset, group, bits, u)`: four uniforms of `bits` (≤ 24)
///   random bits; `kiln_philox_units_f64(seed, offset, group, bits, u)`: of 53 bits (`bits`
///   is ignored);
/// - `kiln_affine_x(lo, u, span)`: `lo + u·span`; `kiln_below_x(v, lo, hi)`: `lo` when `v`
///   reached `hi` (a nonempty range), else `v`;
/// - `kiln_normal_pair_x(ua, ub, z)`: Box–Muller of two uniforms into `z[0..2]`;
/// - `kiln_uniform_group_x(seed, offset, group, bits, lo, span, v)` and
///   `kiln_normal_group_x(seed, offset, group, mean, std, v)`: the four values of a group (what
///   an eager kernel's thread computes), in the compute type before rounding to the dtype;
/// - `kiln_uniform_at_x(seed, offset, i, bits, lo, span)` and `kiln_normal_at_x(seed, offset,
///   i, mean, std)`: element `i` of a draw alone (what a fused kernel calls).
pub fn philox_functions() -> String {
    let mut s = String::from(
        "// Philox 4x32-10 (Random123), as kiln_runtime::cpu::philox: the block function on counter c.
__device__ __forceinline__ void kiln_philox4x32_10(unsigned int c[4], unsigned int k0, unsigned int k1) {
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        const unsigned long long p0 = (unsigned long long)0xD2511F53u * c[0];
        const unsigned long long p1 = (unsigned long long)0xCD9E8D57u * c[2];
        const unsigned int n0 = (unsigned int)(p1 >> 32) ^ c[1] ^ k0;
        const unsigned int n2 = (unsigned int)(p0 >> 32) ^ c[3] ^ k1;
        c[0] = n0;
        c[1] = (unsigned int)p1;
        c[2] = n2;
        c[3] = (unsigned int)p0;
    }
}
// The words of plane `plane` of group `group` of the draw (seed, offset): counter [g lo, g hi, plane, 0].
__device__ __forceinline__ void kiln_philox_plane(unsigned long long seed, unsigned long long offset, unsigned long long group, unsigned int plane, unsigned int w[4]) {
    const unsigned long long g = offset / 4ULL + group;
    w[0] = (unsigned int)g;
    w[1] = (unsigned int)(g >> 32);
    w[2] = plane;
    w[3] = 0u;
    kiln_philox4x32_10(w, (unsigned int)seed, (unsigned int)(seed >> 32));
}
// Four uniforms in [0, 1) with `bits` (at most 24) random bits: (w >> (32 - bits)) * 2^-bits, exact.
__device__ __forceinline__ void kiln_philox_units_f32(unsigned long long seed, unsigned long long offset, unsigned long long group, unsigned int bits, float u[4]) {
    unsigned int w[4];
    kiln_philox_plane(seed, offset, group, 0u, w);
    const float scale = __fdiv_rn(1.0f, (float)(1u << bits));
    for (int l = 0; l < 4; ++l) u[l] = __fmul_rn((float)(w[l] >> (32u - bits)), scale);
}
// The four 64-bit words of a group: plane 0 high, plane 1 low.
__device__ __forceinline__ void kiln_philox_words64(unsigned long long seed, unsigned long long offset, unsigned long long group, unsigned long long w[4]) {
    unsigned int a[4], b[4];
    kiln_philox_plane(seed, offset, group, 0u, a);
    kiln_philox_plane(seed, offset, group, 1u, b);
    for (int l = 0; l < 4; ++l) w[l] = ((unsigned long long)a[l] << 32) | (unsigned long long)b[l];
}
// Four uniforms in [0, 1) with 53 random bits from 64-bit words.
__device__ __forceinline__ void kiln_philox_units_f64(unsigned long long seed, unsigned long long offset, unsigned long long group, unsigned int bits, double u[4]) {
    unsigned long long w[4];
    (void)bits;
    kiln_philox_words64(seed, offset, group, w);
    for (int l = 0; l < 4; ++l) u[l] = __dmul_rn((double)(w[l] >> 11), 1.1102230246251565e-16);
}
// Four integers in [low, low + range) by multiply-shift: low + high word of w64 * range, wrapping.
__device__ __forceinline__ void kiln_integer_group(unsigned long long seed, unsigned long long offset, unsigned long long group, long long low, unsigned long long range, long long v[4]) {
    unsigned long long w[4];
    kiln_philox_words64(seed, offset, group, w);
    for (int l = 0; l < 4; ++l) v[l] = (long long)((unsigned long long)low + __umul64hi(w[l], range));
}
// Four Bernoulli values: 1 where the 32-bit word is below threshold = p * 2^32 (exact in double).
__device__ __forceinline__ void kiln_bernoulli_group(unsigned long long seed, unsigned long long offset, unsigned long long group, double threshold, long long v[4]) {
    unsigned int w[4];
    kiln_philox_plane(seed, offset, group, 0u, w);
    for (int l = 0; l < 4; ++l) v[l] = ((double)w[l] < threshold) ? 1LL : 0LL;
}
",
    );
    for ct in [ComputeType::F32, ComputeType::F64] {
        s.push_str(&typed_functions(ct));
    }
    s
}

/// The functions of [`philox_functions`] written once for both compute types.
fn typed_functions(ct: ComputeType) -> String {
    let (t, x) = (ct.c_type(), ct_suffix(ct));
    let (mul, add, sub, sqrt) = if ct == ComputeType::F64 {
        ("__dmul_rn", "__dadd_rn", "__dsub_rn", "__dsqrt_rn")
    } else {
        ("__fmul_rn", "__fadd_rn", "__fsub_rn", "__fsqrt_rn")
    };
    // f32 transcendentals in double, rounded once (see the module docs).
    let f = |name: &str, arg: &str| {
        if ct == ComputeType::F64 {
            format!("{name}({arg})")
        } else {
            format!("(float){name}((double){arg})")
        }
    };
    let tau = if ct == ComputeType::F64 {
        format!("{:?}", std::f64::consts::TAU)
    } else {
        format!("{:?}f", std::f64::consts::TAU as f32)
    };
    let normal_bits = if ct == ComputeType::F64 { 53 } else { 24 };
    let (one, minus_two) = (ct.lit(1.0), ct.lit(-2.0));
    let (log, cos, sin) = (f("log", &format!("{sub}({one}, ua)")), f("cos", "t"), f("sin", "t"));
    format!(
        "__device__ __forceinline__ {t} kiln_affine_{x}({t} lo, {t} u, {t} span) {{ return {add}(lo, {mul}(u, span)); }}
// A value rounded onto `hi` becomes `lo`, so uniform values stay in [lo, hi) (PyTorch's CUDA rule).
__device__ __forceinline__ {t} kiln_below_{x}({t} v, {t} lo, {t} hi) {{ return (v >= hi && hi > lo) ? lo : v; }}
// Box-Muller: r = sqrt(-2 ln(1 - ua)), t = 2pi ub, z = (r cos t, r sin t).
__device__ __forceinline__ void kiln_normal_pair_{x}({t} ua, {t} ub, {t} z[2]) {{
    const {t} r = {sqrt}({mul}({minus_two}, {log}));
    const {t} t = {mul}({tau}, ub);
    z[0] = {mul}(r, {cos});
    z[1] = {mul}(r, {sin});
}}
// The four uniform values lo + u span of a group.
__device__ __forceinline__ void kiln_uniform_group_{x}(unsigned long long seed, unsigned long long offset, unsigned long long group, unsigned int bits, {t} lo, {t} span, {t} v[4]) {{
    {t} u[4];
    kiln_philox_units_{x}(seed, offset, group, bits, u);
    for (int l = 0; l < 4; ++l) v[l] = kiln_affine_{x}(lo, u[l], span);
}}
// The four normal values mean + std z of a group: Box-Muller on lanes (0, 1) and (2, 3).
__device__ __forceinline__ void kiln_normal_group_{x}(unsigned long long seed, unsigned long long offset, unsigned long long group, {t} mean, {t} std, {t} v[4]) {{
    {t} u[4], z[4];
    kiln_philox_units_{x}(seed, offset, group, {normal_bits}u, u);
    kiln_normal_pair_{x}(u[0], u[1], z);
    kiln_normal_pair_{x}(u[2], u[3], z + 2);
    for (int l = 0; l < 4; ++l) v[l] = kiln_affine_{x}(mean, z[l], std);
}}
// Element i of a uniform draw: lo + u span (the caller rounds to the dtype, then applies kiln_below).
__device__ __forceinline__ {t} kiln_uniform_at_{x}(unsigned long long seed, unsigned long long offset, unsigned long long i, unsigned int bits, {t} lo, {t} span) {{
    {t} u[4];
    kiln_philox_units_{x}(seed, offset, i / 4ULL, bits, u);
    return kiln_affine_{x}(lo, u[i % 4ULL], span);
}}
// Element i of a normal draw: only the Box-Muller pair of i (lanes 0, 1 or 2, 3), then mean + std z.
__device__ __forceinline__ {t} kiln_normal_at_{x}(unsigned long long seed, unsigned long long offset, unsigned long long i, {t} mean, {t} std) {{
    {t} u[4], z[2];
    const unsigned int lane = (unsigned int)(i % 4ULL);
    kiln_philox_units_{x}(seed, offset, i / 4ULL, {normal_bits}u, u);
    kiln_normal_pair_{x}(u[lane & 2u], u[(lane & 2u) + 1u], z);
    return kiln_affine_{x}(mean, z[lane & 1u], std);
}}
"
    )
}

/// The suffix of a compute type's device functions (`f32` or `f64`).
pub(super) fn ct_suffix(ct: ComputeType) -> &'static str {
    if ct == ComputeType::F64 {
        "f64"
    } else {
        "f32"
    }
}

/// Emits the eager kernel filling a contiguous buffer of `dtype` with `kind` values of the
/// draw `(seed, offset)`. Errors (op `cuda_codegen`, `InvalidArgument`): uniform or normal
/// values of a dtype that is not floating point.
pub fn emit_rand(kind: RandKind, dtype: DType) -> Result<RandKernel, CudaError> {
    if kind.needs_float() && !dtype.is_float() {
        return Err(CudaError::new(
            "cuda_codegen",
            CudaErrorKind::InvalidArgument,
            format!("random {} values need a floating-point dtype, not {dtype}", kind.name()),
        ));
    }
    // Integers and Bernoulli values are computed as `long long` and stored as the CPU's
    // `T::from_i64` converts them (exact: the op layer checked that the dtype holds the range).
    let ct = if kind.needs_float() { ComputeType::of(dtype) } else { ComputeType::I64 };
    let (t, x) = (ct.c_type(), ct_suffix(ct));
    let mut body = Body::new(ct);
    let out = store(dtype, "v", ct, &mut body);
    let float_param = |k: usize, name: &str| format!("const {t} {name} = ({t})__longlong_as_double((long long)p{k});");
    let (params, group, value): (Vec<String>, String, String) = match kind {
        RandKind::Uniform => {
            // The value as the dtype holds it, in the compute type (rounded for f16/bf16).
            let rounded = load(dtype, &store(dtype, "c[l]", ct, &mut body), ct, &mut body);
            (
                ["lo", "span", "low", "high"].iter().enumerate().map(|(k, n)| float_param(k, n)).collect(),
                format!("kiln_uniform_group_{x}(seed, offset, g, {}u, lo, span, c)", float_digits(dtype)),
                format!("const {t} v = kiln_below_{x}({rounded}, low, high);"),
            )
        }
        RandKind::Normal => (
            ["mean", "std"].iter().enumerate().map(|(k, n)| float_param(k, n)).collect(),
            format!("kiln_normal_group_{x}(seed, offset, g, mean, std, c)"),
            format!("const {t} v = c[l];"),
        ),
        RandKind::Integers => (
            vec!["const long long low = (long long)p0;".into(), "const unsigned long long range = p1;".into()],
            "kiln_integer_group(seed, offset, g, low, range, c)".into(),
            "const long long v = c[l];".into(),
        ),
        RandKind::Bernoulli => (
            vec!["const double threshold = __longlong_as_double((long long)p0);".into()],
            "kiln_bernoulli_group(seed, offset, g, threshold, c)".into(),
            "const long long v = c[l];".into(),
        ),
    };
    let mut src = String::new();
    let _ = writeln!(src, "// kiln-codegen cuda v{CUDA_CODEGEN_VERSION}: random {} {}", kind.name(), dtype_tag(dtype));
    src.extend(body.helpers.iter().map(|h| super::ops::helper(h, ComputeType::F32)));
    src.push_str(&philox_functions());
    let _ = writeln!(
        src,
        "extern \"C\" __global__ void __launch_bounds__({ELEMENTWISE_BLOCK}) KILN_NAME({}* __restrict__ out, unsigned long long n, unsigned long long seed, unsigned long long offset, unsigned long long p0, unsigned long long p1, unsigned long long p2, unsigned long long p3) {{",
        storage_type(dtype)
    );
    for p in &params {
        let _ = writeln!(src, "    {p}");
    }
    src.push_str("    const unsigned long long groups = (n + 3ULL) / 4ULL;\n");
    src.push_str("    const unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;\n");
    src.push_str("    for (unsigned long long g = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += stride) {\n");
    let _ = writeln!(src, "        {t} c[4];\n        {group};");
    let _ = writeln!(src, "        for (unsigned int l = 0; l < 4u && g * 4ULL + l < n; ++l) {{\n            {value}\n            out[g * 4ULL + l] = {out};\n        }}\n    }}\n}}");
    let name = format!("kiln_rand_{}_{}_{:016x}", kind.name(), dtype_tag(dtype), fnv1a(src.as_bytes()));
    let source = src.replace("KILN_NAME", &name);
    Ok(RandKernel { name, source, kind, dtype })
}

/// Every eager random kernel: uniform and normal values on f32, f64, f16 and bf16; integers
/// and Bernoulli values on every dtype.
pub fn rand_kernels() -> Vec<RandKernel> {
    let mut all = Vec::new();
    for kind in [RandKind::Uniform, RandKind::Normal, RandKind::Integers, RandKind::Bernoulli] {
        for &dtype in DType::ALL.iter().filter(|d| d.is_float() || !kind.needs_float()) {
            all.push(emit_rand(kind, dtype).expect("every listed dtype has this kind's kernel"));
        }
    }
    all
}

/// The device functions a fused kernel's draws need: [`philox_functions`] and
/// `kiln_draw_word(lo, hi)`, a 64-bit word from two run-time scalars holding its 32-bit
/// halves (each as the bits of an f64, as every fused scalar is passed).
pub(super) fn fused_draw_functions() -> String {
    let mut s = philox_functions();
    s.push_str("__device__ __forceinline__ unsigned long long kiln_draw_word(unsigned long long lo, unsigned long long hi) {\n    return ((unsigned long long)__longlong_as_double((long long)hi) << 32) | (unsigned long long)__longlong_as_double((long long)lo);\n}\n");
    s
}

/// The expression of a fused kernel's `InstOp::Rand`: element `i` (the kernel's row-major
/// index) of the draw whose seed and offset words are the scalars `s{params}..s{params + 3}`,
/// as eager `rand`/`randn` of `dtype` (F32 or F64) make it; `None` for another dtype. Needs
/// [`fused_draw_functions`].
pub(super) fn fused_draw(dist: crate::ir::RandDist, dtype: DType, params: u32) -> Option<String> {
    let ct = match dtype {
        DType::F32 => ComputeType::F32,
        DType::F64 => ComputeType::F64,
        _ => return None,
    };
    let x = ct_suffix(ct);
    let (zero, one) = (ct.lit(0.0), ct.lit(1.0));
    let seed = format!("kiln_draw_word(s{}, s{})", params, params + 1);
    let offset = format!("kiln_draw_word(s{}, s{})", params + 2, params + 3);
    let bits = if ct == ComputeType::F32 { 24 } else { 53 };
    Some(match dist {
        crate::ir::RandDist::Uniform => {
            format!("kiln_below_{x}(kiln_uniform_at_{x}({seed}, {offset}, i, {bits}u, {zero}, {one}), {zero}, {one})")
        }
        crate::ir::RandDist::Normal => format!("kiln_normal_at_{x}({seed}, {offset}, i, {zero}, {one})"),
    })
}
