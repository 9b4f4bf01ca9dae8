//! Inline f32 transcendentals, for a scalar `f32` or an `f32x4` vector (the same code with
//! splatted constants and lane masks), branch-free with selects.
//!
//! `exp`, `tanh` and `sigmoid` follow
//! `kiln_runtime::cpu::simd::vecmath` operation for operation (Cephes range reduction + minimax
//! polynomial), so they equal the eager f32 ops bit for bit. `log` is Cephes' `logf`; `sin`
//! and `cos` are Cephes' `sinf`/`cosf` (3-part π/4 reduction, valid to |x| ≤ 8192; larger,
//! infinite or NaN inputs take a branch to the Rust `f32::sin`/`cos`, lane by lane); `erf` is
//! an odd Taylor polynomial below |x| = 0.84 and `1 - erfc` above, with the Numerical Recipes
//! Chebyshev fit of `erfc` (fractional error < 1.2e-7); `gelu` is `x/2·(1 + erf(x/√2))`.
//!
//! Maximum error against the f64 std result (libm's `erf` for erf), measured over the whole
//! f32 range (1M points log-spaced over ±[1e-45, 3.4e38] plus ±0, ±inf, NaN, subnormals) by
//! `codegen/tests/cpu_kernels.rs::inline_math_accuracy`, which asserts these bounds (in ulp of
//! the f32 result; measured maximum in parentheses):
//!
//! | fn | bound | measured |
//! |---|---|---|
//! | exp | 2 | 0.92 (bit-exact with the eager op) |
//! | log | 2 | 0.74 |
//! | tanh | 3 | 1.12 (bit-exact with the eager op) |
//! | sigmoid | 3 | 2.10 (bit-exact with the eager op; 0 below -88.72, as the f32 formula) |
//! | erf | 3 | 2.26 |
//! | sin, cos | 2 | 1.42, 1.39 (|x| ≤ 8192 inline; above, the std function) |
//! | gelu | absolute 2e-7·max(1, |f(x)|) | (`1 + erf` cancels for x < 0) |
//!
//! Results that are subnormal are compared with the subnormal spacing as the ulp.
//!
//! Kernels that qualify for tiles (`cpu/tiled_rows.rs`) compute exp, tanh and sigmoid with
//! native slice routines instead (same bounds; see
//! `kiln_runtime::cpu::simd::slice_math`); [`super::CpuKernel::compile_untiled`] keeps these inline.

// The polynomial coefficients are written as published (Cephes, Numerical Recipes).
#![allow(clippy::excessive_precision)]

use super::ops::FnEmitter;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::BlockArg;
use cranelift_codegen::ir::{types, InstBuilder, Type, Value};

const LOG2E: f32 = std::f32::consts::LOG2_E;
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;

impl FnEmitter<'_, '_> {
    fn c(&mut self, ty: Type, v: f32) -> Value {
        self.fconst(ty, v as f64)
    }

    fn ity(ty: Type) -> Type {
        if ty.is_vector() {
            types::I32X4
        } else {
            types::I32
        }
    }

    fn addi(&mut self, x: Value, c: i64) -> Value {
        let ty = self.ty(x);
        let k = self.iconst(ty, c);
        self.b.ins().iadd(x, k)
    }

    fn andi(&mut self, x: Value, c: i64) -> Value {
        let ty = self.ty(x);
        let k = self.iconst(ty, c);
        self.b.ins().band(x, k)
    }

    fn shl(&mut self, x: Value, k: i64) -> Value {
        let k = self.b.ins().iconst(types::I32, k);
        self.b.ins().ishl(x, k)
    }

    fn ushr(&mut self, x: Value, k: i64) -> Value {
        let k = self.b.ins().iconst(types::I32, k);
        self.b.ins().ushr(x, k)
    }

    fn sshr(&mut self, x: Value, k: i64) -> Value {
        let k = self.b.ins().iconst(types::I32, k);
        self.b.ins().sshr(x, k)
    }

    /// `a < b ? a : b`: a compare and a blend (the NaN-exact `fmin` costs ~7 vector
    /// instructions); a NaN operand gives `b`, callers restore NaN at the end.
    fn min_fast(&mut self, a: Value, b: Value) -> Value {
        let m = self.fcmp(FloatCC::LessThan, a, b);
        self.sel(m, a, b)
    }

    /// `a > b ? a : b` (see [`Self::min_fast`]).
    fn max_fast(&mut self, a: Value, b: Value) -> Value {
        let m = self.fcmp(FloatCC::GreaterThan, a, b);
        self.sel(m, a, b)
    }

    /// An integer-valued float with |n| < 2^22 to i32, exactly: the bits of `n + 1.5·2^23`
    /// minus those of `1.5·2^23` (two instructions instead of the saturating conversion).
    fn small_f2i(&mut self, n: Value) -> Value {
        let ty = self.ty(n);
        let magic = self.c(ty, 12_582_912.0);
        let t = self.b.ins().fadd(n, magic);
        let bits = self.bitcast(Self::ity(ty), t);
        self.addi(bits, -0x4b40_0000)
    }

    /// Horner: `((c0·x + c1)·x + c2)…`.
    fn horner(&mut self, x: Value, cs: &[f32]) -> Value {
        let ty = self.ty(x);
        let mut p = self.c(ty, cs[0]);
        for &c in &cs[1..] {
            let m = self.b.ins().fmul(p, x);
            let k = self.c(ty, c);
            p = self.b.ins().fadd(m, k);
        }
        p
    }

    fn fcmp_c(&mut self, cc: FloatCC, x: Value, c: f32) -> Value {
        let ty = self.ty(x);
        let k = self.c(ty, c);
        self.fcmp(cc, x, k)
    }

    fn sel_c(&mut self, m: Value, c: f32, y: Value) -> Value {
        let ty = self.ty(y);
        let k = self.c(ty, c);
        self.sel(m, k, y)
    }

    /// NaN inputs give themselves.
    fn keep_nan(&mut self, x: Value, y: Value) -> Value {
        let nan = self.fcmp(FloatCC::Unordered, x, x);
        self.sel(nan, x, y)
    }

    /// `t.round()` (half away from zero), as Rust's `f32::round` in vecmath.
    fn round_away(&mut self, t: Value) -> Value {
        let ty = self.ty(t);
        let tr = self.b.ins().trunc(t);
        let d = self.b.ins().fsub(t, tr);
        let ad = self.b.ins().fabs(d);
        let half = self.fcmp_c(FloatCC::GreaterThanOrEqual, ad, 0.5);
        let neg = self.fcmp_c(FloatCC::LessThan, t, 0.0);
        let one = self.c(ty, 1.0);
        let m1 = self.c(ty, -1.0);
        let sone = self.sel(neg, m1, one);
        let z = self.c(ty, 0.0);
        let adj = self.sel(half, sone, z);
        self.b.ins().fadd(tr, adj)
    }

    /// 2^n for an i32 (vector) n in [-127, 128] clamped into the exponent field.
    fn pow2i(&mut self, n: Value, ty: Type) -> Value {
        let ity = Self::ity(ty);
        let b = self.addi(n, 127);
        let lo = self.iconst(ity, 0);
        let hi = self.iconst(ity, 255);
        let b = self.b.ins().smax(b, lo);
        let b = self.b.ins().smin(b, hi);
        let b = self.shl(b, 23);
        self.bitcast(ty, b)
    }

    /// e^x (vecmath's `exp_f32`).
    pub fn exp_f32(&mut self, x: Value) -> Value {
        let ty = self.ty(x);
        let lo = self.c(ty, -104.0);
        let hi = self.c(ty, 89.0);
        let xc = self.max_fast(x, lo);
        let xc = self.min_fast(xc, hi);
        let l2e = self.c(ty, LOG2E);
        let t = self.b.ins().fmul(xc, l2e);
        let n = self.round_away(t);
        let h = self.c(ty, LN2_HI);
        let l = self.c(ty, LN2_LO);
        let nh = self.b.ins().fmul(n, h);
        let r = self.b.ins().fsub(xc, nh);
        let nl = self.b.ins().fmul(n, l);
        let r = self.b.ins().fsub(r, nl);
        let r2 = self.b.ins().fmul(r, r);
        let p = self
            .horner(r, &[1.987_569_1e-4, 1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 5.000_000_1e-1]);
        let e = self.b.ins().fmul(p, r2);
        let e = self.b.ins().fadd(e, r);
        let one = self.c(ty, 1.0);
        let e = self.b.ins().fadd(e, one);
        let ni = self.small_f2i(n);
        let n1 = self.sshr(ni, 1);
        let n2 = self.b.ins().isub(ni, n1);
        let s1 = self.pow2i(n1, ty);
        let s2 = self.pow2i(n2, ty);
        let y = self.b.ins().fmul(e, s1);
        let y = self.b.ins().fmul(y, s2);
        let over = self.fcmp_c(FloatCC::GreaterThan, x, 88.722_84);
        let y = self.sel_c(over, f32::INFINITY, y);
        let under = self.fcmp_c(FloatCC::LessThan, x, -103.972_08);
        let y = self.sel_c(under, 0.0, y);
        self.keep_nan(x, y)
    }

    /// tanh x (vecmath's `tanh_f32`).
    pub fn tanh_f32(&mut self, x: Value) -> Value {
        let ty = self.ty(x);
        let a = self.b.ins().fabs(x);
        let s = self.b.ins().fmul(x, x);
        let p = self.horner(s, &[-5.704_988_7e-3, 2.063_908_9e-2, -5.373_971_6e-2, 1.333_144_2e-1, -3.333_328_2e-1]);
        let p = self.b.ins().fmul(p, s);
        let p = self.b.ins().fmul(p, x);
        let small = self.b.ins().fadd(p, x);
        let ten = self.c(ty, 10.0);
        let am = self.min_fast(a, ten);
        let two = self.c(ty, 2.0);
        let a2 = self.b.ins().fmul(two, am);
        let e = self.exp_f32(a2);
        let one = self.c(ty, 1.0);
        let d = self.b.ins().fadd(e, one);
        let q = self.b.ins().fdiv(two, d);
        let large = self.b.ins().fsub(one, q);
        let neg = self.fcmp_c(FloatCC::LessThan, x, 0.0);
        let nl = self.b.ins().fneg(large);
        let large = self.sel(neg, nl, large);
        // a < 0.625 or NaN (unordered) takes the small form.
        let use_small = self.fcmp_c(FloatCC::UnorderedOrLessThan, a, 0.625);
        self.sel(use_small, small, large)
    }

    /// 1/(1+e^-x).
    pub fn sigmoid_f32(&mut self, x: Value) -> Value {
        let ty = self.ty(x);
        let nx = self.b.ins().fneg(x);
        let e = self.exp_f32(nx);
        let one = self.c(ty, 1.0);
        let d = self.b.ins().fadd(one, e);
        self.b.ins().fdiv(one, d)
    }

    /// `x·0.5·(1 + erf(x/√2))`, as `UnaryOp::Gelu::eval` (with the inline erf).
    pub fn gelu_f32(&mut self, x: Value) -> Value {
        let ty = self.ty(x);
        let k = self.c(ty, std::f32::consts::FRAC_1_SQRT_2);
        let xs = self.b.ins().fmul(x, k);
        let e = self.erf_f32(xs);
        let half = self.c(ty, 0.5);
        let hx = self.b.ins().fmul(x, half);
        let one = self.c(ty, 1.0);
        let e1 = self.b.ins().fadd(one, e);
        self.b.ins().fmul(hx, e1)
    }

    /// erf x: Taylor series below |x| = 0.84, `1 - erfc(|x|)` (Numerical Recipes' erfcc) above.
    pub fn erf_f32(&mut self, x: Value) -> Value {
        let ty = self.ty(x);
        // 2/√π · (-1)^n / (n!·(2n+1)), n = 9 down to 0.
        let mut cs = [0f32; 10];
        let mut fact = 1f64;
        for n in 0..10 {
            if n > 0 {
                fact *= n as f64;
            }
            let sign = if n % 2 == 0 { 1.0 } else { -1.0 };
            cs[9 - n] = (std::f64::consts::FRAC_2_SQRT_PI * sign / (fact * (2 * n + 1) as f64)) as f32;
        }
        let z = self.b.ins().fmul(x, x);
        let p = self.horner(z, &cs);
        let small = self.b.ins().fmul(x, p);
        let a = self.b.ins().fabs(x);
        let ten = self.c(ty, 10.0);
        let a = self.min_fast(a, ten);
        let half = self.c(ty, 0.5);
        let one = self.c(ty, 1.0);
        let ha = self.b.ins().fmul(half, a);
        let d = self.b.ins().fadd(one, ha);
        let t = self.b.ins().fdiv(one, d);
        let q = self.horner(
            t,
            &[
                0.170_872_77,
                -0.822_152_23,
                1.488_515_87,
                -1.135_203_98,
                0.278_868_07,
                -0.186_288_06,
                0.096_784_18,
                0.374_091_96,
                1.000_023_68,
                -1.265_512_23,
            ],
        );
        let aa = self.b.ins().fmul(a, a);
        let arg = self.b.ins().fsub(q, aa);
        let e = self.exp_f32(arg);
        let erfc = self.b.ins().fmul(t, e);
        let large = self.b.ins().fsub(one, erfc);
        let neg = self.fcmp_c(FloatCC::LessThan, x, 0.0);
        let nl = self.b.ins().fneg(large);
        let large = self.sel(neg, nl, large);
        let ax = self.b.ins().fabs(x);
        let use_small = self.fcmp_c(FloatCC::LessThan, ax, 0.84);
        let r = self.sel(use_small, small, large);
        self.keep_nan(x, r)
    }

    /// ln x (Cephes `logf`): frexp by bits (subnormals scaled by 2^23 first), a degree-9
    /// polynomial on [√½ - 1, √2 - 1], then -inf for 0, NaN below 0, inf for inf.
    pub fn log_f32(&mut self, x: Value) -> Value {
        let ty = self.ty(x);
        let ity = Self::ity(ty);
        let sub = self.fcmp_c(FloatCC::LessThan, x, f32::MIN_POSITIVE);
        let big = self.c(ty, 8_388_608.0);
        let xb = self.b.ins().fmul(x, big);
        let xs = self.sel(sub, xb, x);
        let z23 = self.c(ty, 23.0);
        let z0 = self.c(ty, 0.0);
        let ebias = self.sel(sub, z23, z0);
        let bits = self.bitcast(ity, xs);
        let eb = self.ushr(bits, 23);
        let eb = self.addi(eb, -126);
        let mant_mask = self.iconst(ity, 0x007f_ffff);
        let half_bits = self.iconst(ity, 0x3f00_0000);
        let mb = self.b.ins().band(bits, mant_mask);
        let mb = self.b.ins().bor(mb, half_bits);
        let m = self.bitcast(ty, mb);
        let e = self.b.ins().fcvt_from_sint(ty, eb);
        let e = self.b.ins().fsub(e, ebias);
        let lt = self.fcmp_c(FloatCC::LessThan, m, std::f32::consts::FRAC_1_SQRT_2);
        let one = self.c(ty, 1.0);
        let e1 = self.b.ins().fsub(e, one);
        let e = self.sel(lt, e1, e);
        let m2 = self.b.ins().fadd(m, m);
        let m = self.sel(lt, m2, m);
        let m = self.b.ins().fsub(m, one);
        let z = self.b.ins().fmul(m, m);
        let p = self.horner(
            m,
            &[
                7.037_683_6e-2,
                -1.151_461_0e-1,
                1.167_699_9e-1,
                -1.242_014_1e-1,
                1.424_932_3e-1,
                -1.666_805_8e-1,
                2.000_071_5e-1,
                -2.499_999_4e-1,
                3.333_333_1e-1,
            ],
        );
        let y = self.b.ins().fmul(p, m);
        let y = self.b.ins().fmul(y, z);
        let c1 = self.c(ty, -2.121_944_4e-4);
        let t = self.b.ins().fmul(c1, e);
        let y = self.b.ins().fadd(y, t);
        let h = self.c(ty, -0.5);
        let t = self.b.ins().fmul(h, z);
        let y = self.b.ins().fadd(y, t);
        let r = self.b.ins().fadd(m, y);
        let c2 = self.c(ty, 0.693_359_375);
        let t = self.b.ins().fmul(c2, e);
        let r = self.b.ins().fadd(r, t);
        let inf = self.fcmp_c(FloatCC::Equal, x, f32::INFINITY);
        let r = self.sel_c(inf, f32::INFINITY, r);
        let zero = self.fcmp_c(FloatCC::Equal, x, 0.0);
        let r = self.sel_c(zero, f32::NEG_INFINITY, r);
        let neg = self.fcmp_c(FloatCC::LessThan, x, 0.0);
        let r = self.sel_c(neg, f32::NAN, r);
        self.keep_nan(x, r)
    }

    /// sin x or cos x (Cephes `sinf`/`cosf`); |x| > 8192, inf and NaN call the Rust function.
    pub fn sin_cos_f32(&mut self, x: Value, cos: bool) -> Value {
        let ty = self.ty(x);
        let ity = Self::ity(ty);
        let a = self.b.ins().fabs(x);
        let fopi = self.c(ty, 1.273_239_5);
        let ja = self.b.ins().fmul(a, fopi);
        let lim = self.c(ty, 8192.0 * 1.3);
        let ja = self.min_fast(ja, lim); // keeps the conversion in range for slow lanes
        let ja = self.b.ins().trunc(ja);
        let j = self.small_f2i(ja);
        let j = self.addi(j, 1);
        let m2 = self.iconst(ity, -2);
        let j = self.b.ins().band(j, m2);
        let y = self.b.ins().fcvt_from_sint(ty, j);
        let dp1 = self.c(ty, 0.785_156_25);
        let dp2 = self.c(ty, 2.418_756_5e-4);
        let dp3 = self.c(ty, 3.774_895e-8);
        let t = self.b.ins().fmul(y, dp1);
        let r = self.b.ins().fsub(a, t);
        let t = self.b.ins().fmul(y, dp2);
        let r = self.b.ins().fsub(r, t);
        let t = self.b.ins().fmul(y, dp3);
        let r = self.b.ins().fsub(r, t);
        let z = self.b.ins().fmul(r, r);
        // sin polynomial
        let ps = self.horner(z, &[-1.951_529_6e-4, 8.332_161e-3, -1.666_665_5e-1]);
        let ps = self.b.ins().fmul(ps, z);
        let ps = self.b.ins().fmul(ps, r);
        let ps = self.b.ins().fadd(ps, r);
        // cos polynomial
        let pc = self.horner(z, &[2.443_315_7e-5, -1.388_731_6e-3, 4.166_664_6e-2]);
        let pc = self.b.ins().fmul(pc, z);
        let pc = self.b.ins().fmul(pc, z);
        let hz = self.c(ty, 0.5);
        let hz = self.b.ins().fmul(hz, z);
        let pc = self.b.ins().fsub(pc, hz);
        let one = self.c(ty, 1.0);
        let pc = self.b.ins().fadd(pc, one);
        // j is even: j & 2 picks the other polynomial, j & 4 flips the sign.
        let j2 = self.andi(j, 2);
        let zero_i = self.iconst(ity, 0);
        let odd = self.b.ins().icmp(IntCC::NotEqual, j2, zero_i);
        let poly = if cos { self.sel(odd, ps, pc) } else { self.sel(odd, pc, ps) };
        let j4 = self.andi(j, 4);
        let mut sign = self.shl(j4, 29);
        if cos {
            let s2 = self.shl(j2, 30);
            sign = self.b.ins().bxor(sign, s2);
        } else {
            let xb = self.bitcast(ity, x);
            let sb = self.andi(xb, i32::MIN as i64);
            sign = self.b.ins().bxor(sign, sb);
        }
        let pb = self.bitcast(ity, poly);
        let rb = self.b.ins().bxor(pb, sign);
        let fast = self.bitcast(ty, rb);
        // Slow path: |x| > 8192, inf or NaN.
        let slow = self.fcmp_c(FloatCC::UnorderedOrGreaterThan, a, 8192.0);
        let any = if ty.is_vector() { self.b.ins().vany_true(slow) } else { slow };
        let slow_block = self.b.create_block();
        let merge = self.b.create_block();
        let out = self.b.append_block_param(merge, ty);
        self.b.ins().brif(any, slow_block, &[], merge, &[BlockArg::Value(fast)]);
        self.b.switch_to_block(slow_block);
        let name = super::jit_symbols::unary_name(
            if cos { kiln_runtime::op_kind::UnaryOp::Cos } else { kiln_runtime::op_kind::UnaryOp::Sin },
            false,
        );
        let exact = self.call_any(name, &[x]);
        let sl = self.sel(slow, exact, fast);
        self.b.ins().jump(merge, &[BlockArg::Value(sl)]);
        self.b.switch_to_block(merge);
        out
    }
}
