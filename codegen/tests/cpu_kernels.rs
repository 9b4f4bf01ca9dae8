//! The Cranelift CPU back end against the scalar reference (`op_kind`'s eval functions on the
//! same dtype, the eager cast rules), over every inner-stride kind, ranks 1–3, odd inner
//! lengths (so the vector loop's scalar tail runs) and row ranges that start mid-space; plus
//! the accuracy of the inline f32 transcendentals over the whole f32 range, a GELU-tanh chain
//! and an Adam-like 3-output kernel.

use kiln_codegen::cpu::CpuKernel;
use kiln_codegen::kernel::{ElementwiseKernel, InnerStride, Inst, InstOp, KernelArgs, KernelInput};
use kiln_runtime::op_kind::{BinaryOp, CmpOp, LogicalOp, UnaryOp};
use kiln_runtime::DType;

mod common;
use common::reference::{eval_ref, truth, ulp_error, whole_f32_range, wrap, Sv};

// ---------------------------------------------------------------- buffers

fn read(buf: &[u8], d: DType, i: usize) -> Sv {
    let s = d.size_in_bytes();
    let b = &buf[i * s..(i + 1) * s];
    match d {
        DType::F32 => Sv::F(f32::from_le_bytes(b.try_into().unwrap()) as f64),
        DType::F64 => Sv::F(f64::from_le_bytes(b.try_into().unwrap())),
        DType::I64 => Sv::I(i64::from_le_bytes(b.try_into().unwrap())),
        DType::I32 => Sv::I(i32::from_le_bytes(b.try_into().unwrap()) as i64),
        DType::U8 | DType::Bool => Sv::I(b[0] as i64),
        _ => unreachable!(),
    }
}

fn write(buf: &mut [u8], d: DType, i: usize, v: Sv) {
    let s = d.size_in_bytes();
    let b = &mut buf[i * s..(i + 1) * s];
    match (d, v) {
        (DType::F32, Sv::F(x)) => b.copy_from_slice(&(x as f32).to_le_bytes()),
        (DType::F64, Sv::F(x)) => b.copy_from_slice(&x.to_le_bytes()),
        (DType::I64, Sv::I(x)) => b.copy_from_slice(&x.to_le_bytes()),
        (DType::I32, Sv::I(x)) => b.copy_from_slice(&(x as i32).to_le_bytes()),
        (DType::U8 | DType::Bool, Sv::I(x)) => b[0] = x as u8,
        _ => unreachable!(),
    }
}

/// Interesting values of a dtype, then pseudo-random ones.
fn value(d: DType, n: usize, nonzero: bool) -> Sv {
    let h = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17) ^ 0x1234_5678;
    let v = match d {
        DType::F32 | DType::F64 => {
            const SPECIAL: [f64; 24] = [
                0.0,
                -0.0,
                1.0,
                -1.0,
                0.5,
                -0.5,
                2.5,
                -2.5,
                3.7,
                -1e-3,
                100.0,
                -100.0,
                1e30,
                -1e30,
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::NAN,
                1e-40,
                88.5,
                -90.0,
                0.3,
                20.5,
                7.25,
                1.5,
            ];
            let x = if n.is_multiple_of(3) {
                SPECIAL[(n / 3) % SPECIAL.len()]
            } else {
                ((h % 20001) as f64 - 10000.0) / 997.0
            };
            Sv::F(if d == DType::F32 { x as f32 as f64 } else { x })
        }
        DType::Bool => Sv::I((h >> 7) as i64 & 1),
        _ => {
            const SPECIAL: [i64; 14] = [0, 1, -1, 2, -7, 3, i64::MAX, i64::MIN, 255, 256, -300, 1 << 40, 5, -2];
            let x = if n.is_multiple_of(3) { SPECIAL[(n / 3) % SPECIAL.len()] } else { (h % 41) as i64 - 20 };
            Sv::I(wrap(x, d))
        }
    };
    if nonzero && !truth(v) {
        return value(d, n + 1, nonzero);
    }
    v
}

/// Element strides of one input: inner as given, outer packed (or broadcast).
struct Input {
    buf: Vec<u8>,
    base: usize,
    strides: Vec<isize>,
}

fn make_input(
    d: DType,
    shape: &[usize],
    inner: InnerStride,
    negative: bool,
    bcast_outer: bool,
    seed: usize,
    nonzero: bool,
) -> Input {
    let rank = shape.len();
    let mut st = vec![0isize; rank];
    st[rank - 1] = match inner {
        InnerStride::Unit => 1,
        InnerStride::Broadcast => 0,
        InnerStride::Strided => {
            if negative {
                -2
            } else {
                3
            }
        }
    };
    let mut extent = st[rank - 1].unsigned_abs() * (shape[rank - 1].max(1) - 1) + 1;
    for dim in (0..rank - 1).rev() {
        st[dim] = if bcast_outer && dim == 0 { 0 } else { extent as isize };
        extent += st[dim].unsigned_abs() * (shape[dim].max(1) - 1);
    }
    let base: usize = (0..rank).filter(|&x| st[x] < 0).map(|x| st[x].unsigned_abs() * (shape[x] - 1)).sum();
    let mut buf = vec![0u8; extent * d.size_in_bytes()];
    for i in 0..extent {
        write(&mut buf, d, i, value(d, i * 7 + seed, nonzero));
    }
    Input { buf, base, strides: st }
}

/// Runs `k` over `shape` for rows `rows`, with the given layouts, and compares every output
/// element with the reference (`tol_ulp` for float outputs, exact otherwise) and checks that
/// rows outside the range were not written.
fn check(
    k: &ElementwiseKernel,
    shape: &[usize],
    rows: std::ops::Range<usize>,
    scalars: &[f64],
    tol_ulp: f64,
    label: &str,
) {
    check_tol(k, shape, rows, scalars, tol_ulp, 0.0, label)
}

/// [`check`] that also accepts f32 results within `tol_abs` of the reference.
///
/// Both compiled paths run: the untiled one against the eager reference, and
/// [`CpuKernel::compile`]'s (tiled where the kernel qualifies) against the reference whose
/// staged ops compute what the native slice routines do (bit for bit the same values where no
/// routine runs).
fn check_tol(
    k: &ElementwiseKernel,
    shape: &[usize],
    rows: std::ops::Range<usize>,
    scalars: &[f64],
    tol_ulp: f64,
    tol_abs: f64,
    label: &str,
) {
    let untiled = CpuKernel::compile_untiled(k, "test").unwrap_or_else(|e| panic!("{label}: {e}"));
    assert!(!untiled.is_tiled());
    check_kernel(&untiled, false, k, shape, rows.clone(), scalars, tol_ulp, tol_abs, label);
    let kern = CpuKernel::compile(k, "test").unwrap_or_else(|e| panic!("{label}: {e}"));
    check_kernel(
        &kern,
        kern.is_tiled(),
        k,
        shape,
        rows,
        scalars,
        tol_ulp,
        tol_abs,
        &format!("{label} (tiled: {})", kern.is_tiled()),
    );
}

/// [`check_tol`] for one compiled kernel `kern` of `k`, against the reference with `native`
/// stages or without.
#[allow(clippy::too_many_arguments)]
fn check_kernel(
    kern: &CpuKernel,
    native: bool,
    k: &ElementwiseKernel,
    shape: &[usize],
    rows: std::ops::Range<usize>,
    scalars: &[f64],
    tol_ulp: f64,
    tol_abs: f64,
    label: &str,
) {
    let rank = shape.len();
    assert_eq!(rank, k.rank, "{label}: the shape must have the kernel's rank");
    let inner = shape[rank - 1];
    let n_rows: usize = shape[..rank - 1].iter().product();
    let inputs: Vec<Input> = k
        .inputs
        .iter()
        .enumerate()
        .map(|(i, inp)| {
            // Rem's divisor (input 1 of an integer Rem) must not be zero, as the eager op rules out.
            let nonzero = i == 1
                && k.insts.iter().any(|x| matches!(x.op, InstOp::Binary(BinaryOp::Rem, _, _)) && !x.dtype.is_float());
            make_input(inp.dtype, shape, inp.inner, i % 2 == 1, i == 1 && rank > 1, i * 101 + 3, nonzero)
        })
        .collect();
    let sentinel = 0xA5u8;
    let mut outs: Vec<Vec<u8>> =
        k.outputs.iter().map(|&o| vec![sentinel; n_rows * inner * k.dtype(o).size_in_bytes()]).collect();
    // SAFETY: `base` elements lie inside the buffer (make_input sized it to cover them).
    let in_ptrs: Vec<*const u8> = inputs
        .iter()
        .zip(&k.inputs)
        .map(|(x, d)| unsafe { x.buf.as_ptr().add(x.base * d.dtype.size_in_bytes()) })
        .collect();
    let out_ptrs: Vec<*mut u8> = outs.iter_mut().map(|o| o.as_mut_ptr()).collect();
    let strides: Vec<isize> = inputs.iter().flat_map(|x| x.strides.iter().copied()).collect();
    let args = common::kernel_args(&in_ptrs, &out_ptrs, scalars, shape, &strides, rows.clone());
    // SAFETY: every buffer covers the element addresses its strides describe for all rows.
    unsafe { kern.call(&args) };
    for row in 0..n_rows {
        let mut idx = vec![0usize; rank];
        let mut r = row;
        for dim in (0..rank - 1).rev() {
            idx[dim] = r % shape[dim];
            r /= shape[dim];
        }
        for j in 0..inner {
            idx[rank - 1] = j;
            let e = row * inner + j;
            if !rows.contains(&row) {
                for (o, &v) in k.outputs.iter().enumerate() {
                    let s = k.dtype(v).size_in_bytes();
                    assert!(
                        outs[o][e * s..(e + 1) * s].iter().all(|&b| b == sentinel),
                        "{label}: row {row} outside the range was written"
                    );
                }
                continue;
            }
            let load = |i: usize| {
                let x = &inputs[i];
                let off: isize = (0..rank).map(|dd| idx[dd] as isize * x.strides[dd]).sum();
                read(&x.buf, k.inputs[i].dtype, (x.base as isize + off) as usize)
            };
            let want = eval_ref(k, &load, scalars, native);
            for (o, &v) in k.outputs.iter().enumerate() {
                let d = k.dtype(v);
                let got = read(&outs[o], d, e);
                let ok = match (got, want[o]) {
                    (Sv::F(g), Sv::F(w)) => {
                        if d == DType::F32 {
                            same_f32(g as f32, w as f32, tol_ulp) || (g - w).abs() <= tol_abs
                        } else {
                            g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan())
                        }
                    }
                    (g, w) => g == w,
                };
                assert!(
                    ok,
                    "{label}: output {o} at {idx:?}: got {got:?}, want {:?} (inputs {:?})",
                    want[o],
                    (0..k.inputs.len()).map(load).collect::<Vec<_>>()
                );
            }
        }
    }
}

/// Equal bits (NaN matches NaN), or within `tol` ulp of `w`.
fn same_f32(g: f32, w: f32, tol: f64) -> bool {
    if g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()) {
        return true;
    }
    if tol == 0.0 || g.is_nan() || w.is_nan() || g.is_infinite() || w.is_infinite() {
        return false;
    }
    ulp_dist(g, w) as f64 <= tol
}

fn ulp_dist(a: f32, b: f32) -> u64 {
    let key = |x: f32| {
        let b = x.to_bits() as i64;
        if b < 0 {
            i32::MIN as i64 - b
        } else {
            b
        }
    };
    (key(a) - key(b)).unsigned_abs()
}

// ---------------------------------------------------------------- kernel builders

fn inst(op: InstOp, dtype: DType) -> Inst {
    Inst { op, dtype }
}

fn inp(dtype: DType, inner: InnerStride) -> KernelInput {
    KernelInput { dtype, inner }
}

/// The layouts each op is run over: (shape, inner strides of the inputs, rows).
fn layouts(n_inputs: usize) -> Vec<(Vec<usize>, Vec<InnerStride>, std::ops::Range<usize>)> {
    use InnerStride::*;
    let pick = |s: [InnerStride; 2]| s[..n_inputs].to_vec();
    vec![
        (vec![23], pick([Unit, Unit]), 0..1),
        (vec![3, 13], pick([Unit, Broadcast]), 1..3),
        (vec![2, 3, 9], pick([Strided, Unit]), 1..5),
        (vec![4, 7], pick([Broadcast, Strided]), 0..4),
        (vec![2, 2, 5], pick([Unit, Unit]), 3..4),
    ]
}

fn unary_kernel(op: UnaryOp, d: DType, inner: InnerStride, rank: usize) -> ElementwiseKernel {
    ElementwiseKernel {
        rank,
        inputs: vec![inp(d, inner)],
        scalars: 0,
        insts: vec![inst(InstOp::Load(0), d), inst(InstOp::Unary(op, 0), d)],
        outputs: vec![1],
    }
}

/// Every unary op with a float form, from the unary op table (a new row is covered here).
fn unary_float_ops() -> impl Iterator<Item = UnaryOp> {
    UnaryOp::ALL.iter().copied().filter(|op| !op.is_int_only())
}
/// Every binary op with a float form, from the binary op table.
fn binary_float_ops() -> impl Iterator<Item = BinaryOp> {
    BinaryOp::ALL.iter().copied().filter(|op| !op.is_bitwise())
}
const ALL: [DType; 6] = [DType::F32, DType::F64, DType::I64, DType::I32, DType::U8, DType::Bool];

/// The bound of each f32 op against `UnaryOp::eval::<f32>`: (ulp, absolute); (0, 0) is bit
/// for bit. The inline log/erf/sin/cos differ from libm's by at most 1 ulp each way; gelu's
/// `1 + erf(x/√2)` cancels for negative x, so there the bound is absolute (3e-7).
fn unary_tol(op: UnaryOp) -> (f64, f64) {
    match op {
        UnaryOp::Log | UnaryOp::Sin | UnaryOp::Cos => (2.0, 0.0),
        UnaryOp::Erf => (3.0, 0.0),
        UnaryOp::Gelu => (4.0, 3e-7),
        _ => (0.0, 0.0),
    }
}

// ---------------------------------------------------------------- (a) ops against the reference

#[test]
fn unary_ops_every_dtype_and_layout() {
    for d in ALL {
        for op in unary_float_ops() {
            // Integer and Bool inputs keep their dtype only for the exact ops (computed in
            // i64, then cast back: `!= 0` for Bool).
            if !d.is_float() && !op.keeps_int_dtype() {
                continue;
            }
            for (shape, inner, rows) in layouts(1) {
                let k = unary_kernel(op, d, inner[0], shape.len());
                let (ulp, abs) = if d == DType::F32 { unary_tol(op) } else { (0.0, 0.0) };
                check_tol(&k, &shape, rows, &[], ulp, abs, &format!("{} {d} {inner:?} {shape:?}", op.name()));
            }
        }
    }
}

#[test]
fn binary_ops_every_dtype_and_layout() {
    for d in ALL {
        for op in binary_float_ops() {
            if !d.is_float() && !op.keeps_int_dtype() {
                continue;
            }
            for (shape, inner, rows) in layouts(2) {
                let k = ElementwiseKernel {
                    rank: shape.len(),
                    inputs: vec![inp(d, inner[0]), inp(d, inner[1])],
                    scalars: 0,
                    insts: vec![inst(InstOp::Load(0), d), inst(InstOp::Load(1), d), inst(InstOp::Binary(op, 0, 1), d)],
                    outputs: vec![2],
                };
                check(&k, &shape, rows, &[], 0.0, &format!("{} {d} {inner:?} {shape:?}", op.name()));
            }
        }
    }
}

/// The bitwise ops and shifts on every integer dtype (and `&`, `|`, `^` on Bool), against
/// `BinaryOp::eval_int`; the shift amounts of input 1 cover negative values and amounts at and
/// past every width (the inputs' values include -300, 255, 256 and 2^40).
#[test]
fn bitwise_ops_every_integer_dtype_and_layout() {
    use BinaryOp::*;
    for d in [DType::I64, DType::I32, DType::U8, DType::Bool] {
        for op in [BitAnd, BitOr, BitXor, BitShl, BitShr] {
            if d == DType::Bool && op.is_shift() {
                continue; // PyTorch (and kiln's ops) refuse shifts of two Bool operands
            }
            for (shape, inner, rows) in layouts(2) {
                let k = ElementwiseKernel {
                    rank: shape.len(),
                    inputs: vec![inp(d, inner[0]), inp(d, inner[1])],
                    scalars: 0,
                    insts: vec![inst(InstOp::Load(0), d), inst(InstOp::Load(1), d), inst(InstOp::Binary(op, 0, 1), d)],
                    outputs: vec![2],
                };
                check(&k, &shape, rows, &[], 0.0, &format!("{} {d} {inner:?} {shape:?}", op.name()));
            }
        }
        // bitwise_not on integers (Bool's `!` is the logical not, emitted as `Not`).
        if d != DType::Bool {
            for (shape, inner, rows) in layouts(1) {
                let k = unary_kernel(UnaryOp::BitNot, d, inner[0], shape.len());
                check(&k, &shape, rows, &[], 0.0, &format!("bitwise_not {d} {inner:?} {shape:?}"));
            }
        }
    }
    // Every shift amount from -70 to 70 against the reference, as a run-time scalar.
    for d in [DType::I64, DType::I32, DType::U8] {
        for op in [BitShl, BitShr] {
            for amount in -70..=70i64 {
                let k = ElementwiseKernel {
                    rank: 1,
                    inputs: vec![inp(d, InnerStride::Unit)],
                    scalars: 1,
                    insts: vec![
                        inst(InstOp::Load(0), d),
                        inst(InstOp::Scalar(0), d),
                        inst(InstOp::Binary(op, 0, 1), d),
                    ],
                    outputs: vec![2],
                };
                check(&k, &[9], 0..1, &[amount as f64], 0.0, &format!("{} {d} by {amount}", op.name()));
            }
        }
    }
    // Float operands are refused when the kernel is compiled, never emitted.
    let k = ElementwiseKernel {
        rank: 1,
        inputs: vec![inp(DType::F32, InnerStride::Unit)],
        scalars: 0,
        insts: vec![inst(InstOp::Load(0), DType::F32), inst(InstOp::Binary(BitAnd, 0, 0), DType::F32)],
        outputs: vec![1],
    };
    assert!(CpuKernel::compile(&k, "test").is_err());
    let k = unary_kernel(UnaryOp::BitNot, DType::F64, InnerStride::Unit, 1);
    assert!(CpuKernel::compile(&k, "test").is_err());
}

#[test]
fn comparisons_logical_not_where_every_dtype() {
    for d in ALL {
        for (shape, inner, rows) in layouts(2) {
            let base = vec![inst(InstOp::Load(0), d), inst(InstOp::Load(1), d)];
            let inputs = vec![inp(d, inner[0]), inp(d, inner[1])];
            for &op in CmpOp::ALL {
                let mut insts = base.clone();
                insts.push(inst(InstOp::Cmp(op, 0, 1), DType::Bool));
                let k = ElementwiseKernel {
                    rank: shape.len(),
                    inputs: inputs.clone(),
                    scalars: 0,
                    insts,
                    outputs: vec![2],
                };
                check(&k, &shape, rows.clone(), &[], 0.0, &format!("{} {d} {inner:?}", op.name()));
            }
            for &op in LogicalOp::ALL {
                // logical op on the raw values, a not, and a where selecting between them.
                let mut insts = base.clone();
                insts.push(inst(InstOp::Logical(op, 0, 1), DType::Bool)); // 2
                insts.push(inst(InstOp::Not(0), DType::Bool)); // 3
                insts.push(inst(InstOp::Where(2, 0, 1), d)); // 4
                let k = ElementwiseKernel {
                    rank: shape.len(),
                    inputs: inputs.clone(),
                    scalars: 0,
                    insts,
                    outputs: vec![2, 3, 4],
                };
                check(&k, &shape, rows.clone(), &[], 0.0, &format!("{} {d} {inner:?}", op.name()));
            }
        }
    }
}

#[test]
fn masks_in_the_vector_path() {
    // Bool values from comparisons that only feed Where/Logical/Not stay lane masks.
    for d in [DType::F32, DType::F64] {
        for (shape, inner, rows) in layouts(2) {
            for &op in LogicalOp::ALL {
                let insts = vec![
                    inst(InstOp::Load(0), d),                                // 0 x
                    inst(InstOp::Load(1), d),                                // 1 y
                    inst(InstOp::Const(0.0), d),                             // 2
                    inst(InstOp::Cmp(CmpOp::Lt, 0, 1), DType::Bool),         // 3
                    inst(InstOp::Cmp(CmpOp::Gt, 0, 2), DType::Bool),         // 4
                    inst(InstOp::Logical(op, 3, 4), DType::Bool),            // 5
                    inst(InstOp::Logical(op, 5, 1), DType::Bool),            // 6 (a float operand's truth)
                    inst(InstOp::Not(6), DType::Bool),                       // 7
                    inst(InstOp::Not(0), DType::Bool),                       // 8
                    inst(InstOp::Logical(LogicalOp::Or, 7, 8), DType::Bool), // 9
                    inst(InstOp::Where(9, 0, 1), d),                         // 10
                    inst(InstOp::Where(5, 1, 2), d),                         // 11
                    inst(InstOp::Binary(BinaryOp::Add, 10, 11), d),          // 12
                ];
                let k = ElementwiseKernel {
                    rank: shape.len(),
                    inputs: vec![inp(d, inner[0]), inp(d, inner[1])],
                    scalars: 0,
                    insts,
                    outputs: vec![12],
                };
                let kern = CpuKernel::compile(&k, "masks").unwrap();
                assert_eq!(kern.is_vectorized(), !inner.contains(&InnerStride::Strided), "{inner:?}");
                check(&k, &shape, rows.clone(), &[], 0.0, &format!("masks {} {d} {inner:?}", op.name()));
            }
        }
    }
}

/// Bool inputs (attention's mask) load as lane masks in the vector path, unit-stride or
/// broadcast, alone or combined with comparisons, and keep the tiled `exp` of a masked softmax;
/// masks cast to the float dtype (dropout's `(rand >= p).to(E)`) stay vectorized too.
#[test]
fn bool_inputs_are_masks_in_the_vector_path() {
    for d in [DType::F32, DType::F64] {
        for (shape, inner, rows) in layouts(2) {
            let insts = vec![
                inst(InstOp::Load(0), d),                                 // 0 x
                inst(InstOp::Load(1), DType::Bool),                       // 1 m
                inst(InstOp::Const(f64::NEG_INFINITY), d),                // 2
                inst(InstOp::Where(1, 2, 0), d),                          // 3 masked_fill
                inst(InstOp::Const(0.5), d),                              // 4
                inst(InstOp::Cmp(CmpOp::Gt, 0, 4), DType::Bool),          // 5
                inst(InstOp::Not(1), DType::Bool),                        // 6
                inst(InstOp::Logical(LogicalOp::And, 5, 6), DType::Bool), // 7
                inst(InstOp::Logical(LogicalOp::Xor, 1, 0), DType::Bool), // 8 (a float's truth)
                inst(InstOp::Where(7, 4, 0), d),                          // 9
                inst(InstOp::Unary(UnaryOp::Exp, 3), d),                  // 10
                inst(InstOp::Where(8, 9, 10), d),                         // 11
                inst(InstOp::Cast(5), d),                                 // 12 (x > 0.5).to(d)
                inst(InstOp::Cast(1), d),                                 // 13 m.to(d)
                inst(InstOp::Binary(BinaryOp::Mul, 12, 0), d),            // 14 dropout-like
            ];
            let k = ElementwiseKernel {
                rank: shape.len(),
                inputs: vec![inp(d, inner[0]), inp(DType::Bool, inner[1])],
                scalars: 0,
                insts,
                outputs: vec![3, 11, 13, 14],
            };
            let kern = CpuKernel::compile(&k, "bool masks").unwrap();
            let vector = !inner.contains(&InnerStride::Strided);
            assert_eq!(kern.is_vectorized(), vector, "{d} {inner:?}");
            assert_eq!(kern.is_tiled(), vector && d == DType::F32, "{d} {inner:?}: exp runs natively");
            check(&k, &shape, rows.clone(), &[], 2.0, &format!("bool masks {d} {inner:?}"));
        }
    }
}

#[test]
fn casts_between_every_pair() {
    for s in ALL {
        for d in ALL {
            for (shape, inner, rows) in layouts(1) {
                let k = ElementwiseKernel {
                    rank: shape.len(),
                    inputs: vec![inp(s, inner[0])],
                    scalars: 0,
                    insts: vec![inst(InstOp::Load(0), s), inst(InstOp::Cast(0), d)],
                    outputs: vec![1],
                };
                check(&k, &shape, rows, &[], 0.0, &format!("cast {s} -> {d} {inner:?}"));
            }
        }
    }
}

#[test]
fn scalars_and_constants_convert_like_eager() {
    for d in ALL {
        for (sv, c) in [(-2.7, 3.9), (300.5, -1.0), (0.0, 0.5), (f64::NAN, 1e20)] {
            let insts = vec![
                inst(InstOp::Load(0), d),
                inst(InstOp::Scalar(0), d),
                inst(InstOp::Const(c), d),
                inst(InstOp::Cast(0), DType::F64),
                inst(InstOp::Cast(1), DType::F64),
                inst(InstOp::Cast(2), DType::F64),
                inst(InstOp::Binary(BinaryOp::Add, 3, 4), DType::F64),
                inst(InstOp::Binary(BinaryOp::Add, 6, 5), DType::F64),
            ];
            let k = ElementwiseKernel {
                rank: 2,
                inputs: vec![inp(d, InnerStride::Unit)],
                scalars: 1,
                insts,
                outputs: vec![7, 1, 2],
            };
            check(&k, &[3, 5], 0..3, &[sv], 0.0, &format!("scalar {d} {sv} {c}"));
        }
    }
}

// ---------------------------------------------------------------- (b) inline math accuracy

fn run_f32(op: UnaryOp, xs: &[f32], inner: InnerStride) -> Vec<f32> {
    let k = unary_kernel(op, DType::F32, inner, 1);
    let kern = CpuKernel::compile_untiled(&k, "acc").unwrap();
    assert_eq!(kern.is_vectorized(), inner == InnerStride::Unit);
    let mut out = vec![0f32; xs.len()];
    let shape = [xs.len()];
    let strides = [1isize];
    let ip = [xs.as_ptr() as *const u8];
    let op_ = [out.as_mut_ptr() as *mut u8];
    let args = KernelArgs {
        inputs: ip.as_ptr(),
        outputs: op_.as_ptr(),
        scalars: std::ptr::null(),
        shape: shape.as_ptr(),
        strides: strides.as_ptr(),
        row_start: 0,
        row_end: 1,
        index_base: 0,
    };
    // SAFETY: one row of xs.len() contiguous f32 in and out.
    unsafe { kern.call(&args) };
    out
}

#[test]
fn inline_math_accuracy() {
    let xs = whole_f32_range();
    let gelu = |x: f64| x * 0.5 * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2));
    type Truth<'a> = &'a dyn Fn(f64) -> f64;
    let cases: [(UnaryOp, Truth, f64); 8] = [
        (UnaryOp::Exp, &f64::exp, 2.0),
        (UnaryOp::Log, &f64::ln, 2.0),
        (UnaryOp::Tanh, &f64::tanh, 3.0),
        (UnaryOp::Sigmoid, &|x: f64| 1.0 / (1.0 + (-x).exp()), 3.0),
        (UnaryOp::Erf, &libm::erf, 3.0),
        (UnaryOp::Sin, &f64::sin, 2.0),
        (UnaryOp::Cos, &f64::cos, 2.0),
        // 1 + erf cancels for negative x: gelu is checked by absolute error.
        (UnaryOp::Gelu, &gelu, f64::INFINITY),
    ];
    for (op, truth, bound) in cases {
        for inner in [InnerStride::Unit, InnerStride::Strided] {
            let got = run_f32(op, &xs, inner);
            let mut worst = (0.0, 0.0f32);
            for (&x, &g) in xs.iter().zip(&got) {
                let mut want = truth(x as f64);
                // The f32 formula overflows e^-x to inf below -88.72: 0, as the eager op gives.
                if matches!(op, UnaryOp::Sigmoid) && x < -88.72 {
                    want = 0.0;
                }
                let e = ulp_error(g, want);
                if e > worst.0 {
                    worst = (e, x);
                }
                if op == UnaryOp::Gelu {
                    assert!(
                        (g as f64 - want).abs() <= 2e-7 * want.abs().max(1.0)
                            || (g.is_nan() && want.is_nan())
                            || g as f64 == want,
                        "{}({x}) = {g}, want {want}",
                        op.name()
                    );
                }
            }
            eprintln!("{:>10} {inner:?}: max {:.2} ulp at {:e}", op.name(), worst.0, worst.1);
            assert!(worst.0 <= bound, "{}: {} ulp at {:e} > {bound}", op.name(), worst.0, worst.1);
        }
    }
}

// ---------------------------------------------------------------- (c) GELU chain, (d) Adam

/// `z = x*a + b; 0.5*z*(1 + tanh(0.7978845608*(z + 0.044715*z*z*z)))` as primitive ops.
pub fn gelu_chain(d: DType, a_inner: InnerStride) -> ElementwiseKernel {
    use BinaryOp::*;
    let b = |op, x, y| inst(InstOp::Binary(op, x, y), d);
    let insts = vec![
        inst(InstOp::Load(0), d),                  // 0 x
        inst(InstOp::Load(1), d),                  // 1 a (a broadcast per row)
        inst(InstOp::Scalar(0), d),                // 2 b
        b(Mul, 0, 1),                              // 3
        b(Add, 3, 2),                              // 4 z
        inst(InstOp::Const(0.044715), d),          // 5
        b(Mul, 5, 4),                              // 6
        b(Mul, 6, 4),                              // 7
        b(Mul, 7, 4),                              // 8
        b(Add, 4, 8),                              // 9
        inst(InstOp::Const(0.797_884_560_8), d),   // 10
        b(Mul, 10, 9),                             // 11
        inst(InstOp::Unary(UnaryOp::Tanh, 11), d), // 12
        inst(InstOp::Const(1.0), d),               // 13
        b(Add, 13, 12),                            // 14
        inst(InstOp::Const(0.5), d),               // 15
        b(Mul, 15, 4),                             // 16
        b(Mul, 16, 14),                            // 17
    ];
    ElementwiseKernel {
        rank: 2,
        inputs: vec![inp(d, InnerStride::Unit), inp(d, a_inner)],
        scalars: 1,
        insts,
        outputs: vec![17],
    }
}

#[test]
fn gelu_tanh_chain_against_f64() {
    for a_inner in [InnerStride::Broadcast, InnerStride::Unit] {
        let k = gelu_chain(DType::F32, a_inner);
        // Bit for bit with the same ops in f32 (the inline tanh equals the eager one) ...
        check(&k, &[3, 37], 0..3, &[0.25], 0.0, "gelu chain f32");
        // ... and close to the f64 truth.
        let kern = CpuKernel::compile(&k, "gelu").unwrap();
        assert!(kern.is_vectorized());
        let (rows, inner) = (4usize, 1001usize);
        let x: Vec<f32> = (0..rows * inner).map(|i| (i as f32 - 2000.0) / 250.0).collect();
        let a: Vec<f32> = (0..rows * inner).map(|i| 0.5 + (i % 7) as f32 * 0.25).collect();
        let mut out = vec![0f32; rows * inner];
        let shape = [rows, inner];
        let a_st = if a_inner == InnerStride::Broadcast { [inner as isize, 0] } else { [inner as isize, 1] };
        let strides = [inner as isize, 1, a_st[0], a_st[1]];
        let ip = [x.as_ptr() as *const u8, a.as_ptr() as *const u8];
        let op = [out.as_mut_ptr() as *mut u8];
        let sc = [0.25f64];
        let args = KernelArgs {
            inputs: ip.as_ptr(),
            outputs: op.as_ptr(),
            scalars: sc.as_ptr(),
            shape: shape.as_ptr(),
            strides: strides.as_ptr(),
            row_start: 0,
            row_end: rows,
            index_base: 0,
        };
        // SAFETY: every address the strides describe lies inside x, a and out.
        unsafe { kern.call(&args) };
        for r in 0..rows {
            for j in 0..inner {
                let ai = if a_inner == InnerStride::Broadcast { r * inner } else { r * inner + j };
                let z = x[r * inner + j] as f64 * a[ai] as f64 + 0.25;
                let want = 0.5 * z * (1.0 + (0.797_884_560_8 * (z + 0.044715 * z * z * z)).tanh());
                let got = out[r * inner + j] as f64;
                assert!((got - want).abs() <= 1e-6 * (1.0 + z.abs()), "z = {z}: got {got}, want {want}");
            }
        }
    }
}

#[test]
fn adam_like_three_outputs() {
    use BinaryOp::*;
    let d = DType::F32;
    let b = |op, x, y| inst(InstOp::Binary(op, x, y), d);
    let insts = vec![
        inst(InstOp::Load(0), d),                  // 0 p
        inst(InstOp::Load(1), d),                  // 1 g
        inst(InstOp::Load(2), d),                  // 2 m
        inst(InstOp::Load(3), d),                  // 3 v
        inst(InstOp::Scalar(0), d),                // 4 lr
        inst(InstOp::Scalar(1), d),                // 5 beta1
        inst(InstOp::Scalar(2), d),                // 6 beta2
        inst(InstOp::Scalar(3), d),                // 7 eps
        inst(InstOp::Const(1.0), d),               // 8
        b(Mul, 5, 2),                              // 9 b1*m
        b(Sub, 8, 5),                              // 10 1-b1
        b(Mul, 10, 1),                             // 11
        b(Add, 9, 11),                             // 12 m'
        b(Mul, 6, 3),                              // 13 b2*v
        b(Sub, 8, 6),                              // 14 1-b2
        b(Mul, 1, 1),                              // 15 g²
        b(Mul, 14, 15),                            // 16
        b(Add, 13, 16),                            // 17 v'
        inst(InstOp::Unary(UnaryOp::Sqrt, 17), d), // 18
        b(Add, 18, 7),                             // 19
        b(Div, 12, 19),                            // 20
        b(Mul, 4, 20),                             // 21
        b(Sub, 0, 21),                             // 22 p'
    ];
    let unit = inp(d, InnerStride::Unit);
    let k = ElementwiseKernel { rank: 2, inputs: vec![unit; 4], scalars: 4, insts, outputs: vec![22, 12, 17] };
    assert!(CpuKernel::compile(&k, "adam").unwrap().is_vectorized());
    check(&k, &[5, 19], 1..5, &[1e-3, 0.9, 0.999, 1e-8], 0.0, "adam");
    let k1 = ElementwiseKernel { rank: 1, ..k.clone() };
    check(&k1, &[77], 0..1, &[1e-3, 0.9, 0.999, 1e-8], 0.0, "adam rank 1");
    let k3 = ElementwiseKernel { rank: 3, ..k };
    check(&k3, &[2, 3, 6], 2..6, &[1e-2, 0.8, 0.99, 1e-6], 0.0, "adam rank 3");
}

#[test]
fn kernel_metadata() {
    let kern = CpuKernel::compile(&gelu_chain(DType::F32, InnerStride::Broadcast), "meta").unwrap();
    assert!(kern.clif().contains("f32x4"), "{}", kern.clif());
    assert!(kern.compile_time() > std::time::Duration::ZERO);
    fn send_sync<T: Send + Sync>(_: &T) {}
    send_sync(&kern);
    let bad = ElementwiseKernel {
        rank: 1,
        inputs: vec![],
        scalars: 0,
        insts: vec![inst(InstOp::Unary(UnaryOp::Neg, 0), DType::F32)],
        outputs: vec![0],
    };
    assert!(CpuKernel::compile(&bad, "bad").is_err());
}

#[test]
fn threads_share_a_kernel_on_disjoint_rows() {
    let k = unary_kernel(UnaryOp::Exp, DType::F32, InnerStride::Unit, 2);
    let kern = CpuKernel::compile(&k, "threads").unwrap();
    let (rows, inner) = (8usize, 33usize);
    let x: Vec<f32> = (0..rows * inner).map(|i| (i as f32 - 100.0) / 17.0).collect();
    let mut out = vec![0f32; rows * inner];
    let (shape, strides) = ([rows, inner], [inner as isize, 1]);
    let out_addr = out.as_mut_ptr() as usize;
    std::thread::scope(|s| {
        for t in 0..4 {
            let (kern, x) = (&kern, &x);
            s.spawn(move || {
                let ip = [x.as_ptr() as *const u8];
                let op = [out_addr as *mut u8];
                let args = KernelArgs {
                    inputs: ip.as_ptr(),
                    outputs: op.as_ptr(),
                    scalars: std::ptr::null(),
                    shape: shape.as_ptr(),
                    strides: strides.as_ptr(),
                    row_start: 2 * t,
                    row_end: 2 * t + 2,
                    index_base: 0,
                };
                // SAFETY: x and out hold rows × inner f32; each thread writes its own two rows.
                unsafe { kern.call(&args) };
            });
        }
    });
    // A tiled kernel's exp is the native routine's.
    let exp: fn(f32) -> f32 = if kern.is_tiled() {
        kiln_runtime::cpu::simd::slice_math::slice_scalar(UnaryOp::Exp).unwrap()
    } else {
        |x| UnaryOp::Exp.eval(x)
    };
    for (i, (&xi, &o)) in x.iter().zip(&out).enumerate() {
        assert_eq!(o.to_bits(), exp(xi).to_bits(), "element {i}");
    }
}
