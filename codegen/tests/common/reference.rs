//! The scalar reference of elementwise kernels: each instruction evaluated with the eager
//! op's scalar function on the instruction's dtype (`op_kind`'s eval functions, the eager cast
//! rules), element by element.

use kiln_codegen::kernel::{ElementwiseKernel, InstOp, Val};
use kiln_runtime::cpu::simd::slice_math;
use kiln_runtime::DType;

/// A value of the reference: floats (f32 held exactly in an f64) or integers/Bool in an i64.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sv {
    /// A float (f32 values held exactly).
    F(f64),
    /// An integer or Bool.
    I(i64),
}

/// An i64 wrapped to integer or Bool dtype `d`.
pub fn wrap(v: i64, d: DType) -> i64 {
    match d {
        DType::I64 => v,
        DType::I32 => v as i32 as i64,
        DType::U8 => v as u8 as i64,
        DType::Bool => (v != 0) as i64,
        _ => unreachable!(),
    }
}

/// A constant or run-time scalar converted to `d` as the eager scalar conversion does.
pub fn from_f64(c: f64, d: DType) -> Sv {
    match d {
        DType::F32 => Sv::F(c as f32 as f64),
        DType::F64 => Sv::F(c),
        DType::Bool => Sv::I((c != 0.0) as i64),
        _ => Sv::I(wrap(c as i64, d)),
    }
}

/// `v != 0`.
pub fn truth(v: Sv) -> bool {
    match v {
        Sv::F(x) => x != 0.0,
        Sv::I(x) => x != 0,
    }
}

/// `v` as an f64.
pub fn to_f64(v: Sv) -> f64 {
    match v {
        Sv::F(x) => x,
        Sv::I(x) => x as f64,
    }
}

/// `cast()` of src/tensor/convert.rs.
pub fn cast(v: Sv, s: DType, d: DType) -> Sv {
    if d == DType::Bool {
        Sv::I(truth(v) as i64)
    } else if d == DType::F32 && s == DType::I64 {
        let Sv::I(x) = v else { unreachable!() };
        Sv::F(x as f32 as f64)
    } else if d.is_float() || s.is_float() {
        from_f64(to_f64(v), d)
    } else {
        let Sv::I(x) = v else { unreachable!() };
        Sv::I(wrap(x, d))
    }
}

/// The outputs of `k` at one element, input `i`'s element being `load(i)`. With `native`, the
/// f32 unary ops that have a native slice routine compute what that routine computes on this
/// CPU (`slice_math::slice_scalar`: what a tiled kernel's stages give), the others the eager
/// scalar op.
pub fn eval_ref(k: &ElementwiseKernel, load: &dyn Fn(usize) -> Sv, scalars: &[f64], native: bool) -> Vec<Sv> {
    let mut vals: Vec<Sv> = Vec::with_capacity(k.insts.len());
    for inst in &k.insts {
        let d = inst.dtype;
        let v = |x: Val| vals[x as usize];
        let r = match inst.op {
            InstOp::Load(i) => load(i as usize),
            InstOp::Scalar(j) => from_f64(scalars[j as usize], d),
            InstOp::Const(c) => from_f64(c, d),
            InstOp::Unary(op, a) => match (v(a), d) {
                (Sv::F(x), DType::F32) => match slice_math::slice_scalar(op).filter(|_| native) {
                    Some(f) => Sv::F(f(x as f32) as f64),
                    None => Sv::F(op.eval(x as f32) as f64),
                },
                (Sv::F(x), _) => Sv::F(op.eval(x)),
                (Sv::I(x), _) => Sv::I(wrap(op.eval_int(x), d)),
            },
            InstOp::Binary(op, a, b) => match (v(a), v(b), d) {
                (Sv::F(x), Sv::F(y), DType::F32) => Sv::F(op.eval(x as f32, y as f32) as f64),
                (Sv::F(x), Sv::F(y), _) => Sv::F(op.eval(x, y)),
                (Sv::I(x), Sv::I(y), _) => Sv::I(wrap(op.eval_int(x, y), d)),
                _ => unreachable!(),
            },
            InstOp::Cmp(op, a, b) => Sv::I(match (v(a), v(b)) {
                (Sv::F(x), Sv::F(y)) => op.eval(x, y),
                (Sv::I(x), Sv::I(y)) => op.eval(x, y),
                _ => unreachable!(),
            } as i64),
            InstOp::Logical(op, a, b) => Sv::I(op.eval(truth(v(a)), truth(v(b))) as i64),
            InstOp::Not(a) => Sv::I(!truth(v(a)) as i64),
            InstOp::Where(c, a, b) => {
                if truth(v(c)) {
                    v(a)
                } else {
                    v(b)
                }
            }
            InstOp::Cast(a) => cast(v(a), k.dtype(a), d),
            InstOp::Reduced(_) => unreachable!("validation refuses Reduced in elementwise kernels"),
            InstOp::Rand { .. } => unreachable!("draws are tested in cpu_rand.rs"),
        };
        vals.push(r);
    }
    k.outputs.iter().map(|&o| vals[o as usize]).collect()
}

/// ulp error of an f32 result against the f64 truth (subnormal spacing below the normal range).
pub fn ulp_error(got: f32, want: f64) -> f64 {
    if want.is_nan() {
        return if got.is_nan() { 0.0 } else { f64::INFINITY };
    }
    let w = want as f32;
    if got == w {
        return 0.0;
    }
    if w.is_infinite() || got.is_infinite() || got.is_nan() {
        return f64::INFINITY;
    }
    let spacing = (f32::from_bits(w.abs().to_bits() + 1) - w.abs()).max(f32::from_bits(1)) as f64;
    (got as f64 - want).abs() / spacing
}

/// 1M points log-spaced over ±[1e-45, 3.4e38], plus ±0, ±inf, NaN, subnormals and a few
/// boundaries: the whole f32 range for accuracy tests.
pub fn whole_f32_range() -> Vec<f32> {
    let n = 500_000;
    let (lo, hi) = (1e-45f64.ln(), 3.4e38f64.ln());
    let mut xs: Vec<f32> = Vec::with_capacity(2 * n + 16);
    for i in 0..n {
        let x = (lo + (hi - lo) * i as f64 / (n - 1) as f64).exp() as f32;
        xs.push(x);
        xs.push(-x);
    }
    xs.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
        1e-40,
        -1e-40,
        f32::from_bits(1),
        f32::MAX,
        -f32::MAX,
        1.0,
        -1.0,
        8192.0,
        8193.0,
        0.625,
    ]);
    xs
}
