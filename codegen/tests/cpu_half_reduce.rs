//! f16 and bf16 reduction kernels of the CPU JIT against the eager rule, bit for bit: values
//! held as their f32, every prologue op rounded back to the half type, sums and products
//! accumulated in f64 (as `kiln_runtime::cpu::reduce` does), the result rounded once through
//! f32 (`Element::from_f64`), max/min exact with NaN winning. The values are chosen so that
//! the f64 accumulation is exact in any order (multiples of 1/64 below 32 for sums, powers of
//! two for products), so one expected bit pattern holds whatever order the kernel adds in.
//!
//! Each case runs with the reduced row contiguous, broadcast (stride 0) and strided, over rows
//! of 37 (vectors and a scalar tail), 4 and 1 elements and two reduced dims; bf16 stages at
//! unit or broadcast strides must take the F32X4 plan, f16 and strided ones the scalar plan,
//! and no half kernel is tiled. An epilogue over half values (`x / Σx`) and a mixed stage
//! (bf16 loads cast to f32, summed into f32) are checked the same way.

mod common;
use common::kernel_args;
use common::reduce_run::index;
use half::{bf16, f16};
use kiln_codegen::cpu::CpuKernel;
use kiln_codegen::kernel::{Epilogue, InnerStride, Inst, InstOp, KernelInput, ReduceKernel, ReduceStage};
use kiln_runtime::op_kind::{BinaryOp, ReduceOp, UnaryOp};
use kiln_runtime::DType;

/// The half types as the tests see them.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Half {
    F16,
    BF16,
}

impl Half {
    fn dtype(self) -> DType {
        match self {
            Half::F16 => DType::F16,
            Half::BF16 => DType::BF16,
        }
    }

    /// Eager's rounding of an f32 to this type (ties to even).
    fn round(self, x: f32) -> u16 {
        match self {
            Half::F16 => f16::from_f32(x).to_bits(),
            Half::BF16 => bf16::from_f32(x).to_bits(),
        }
    }

    /// The f32 of bits `b`.
    fn value(self, b: u16) -> f32 {
        match self {
            Half::F16 => f16::from_bits(b).to_f32(),
            Half::BF16 => bf16::from_bits(b).to_f32(),
        }
    }

    /// Equal bits, or both NaN.
    fn same(self, a: u16, b: u16) -> bool {
        a == b || (self.value(a).is_nan() && self.value(b).is_nan())
    }
}

/// How the reduced row is laid out in memory.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Row {
    Unit,
    Broadcast,
    Strided,
}

const ROWS: [Row; 3] = [Row::Unit, Row::Broadcast, Row::Strided];

/// Shapes (outputs first) and how many trailing dims are reduced.
const SHAPES: [(&[usize], usize); 4] = [(&[3, 37], 1), (&[5, 4], 1), (&[4, 1], 1), (&[2, 3, 9], 2)];

/// A kernel of one stage over one input of `dtype`: `prologue` (after `Load(0)`, value 0) ends
/// in the reduced value.
fn kernel(
    dtype: DType,
    rank: usize,
    rr: usize,
    inner: InnerStride,
    prologue: &[(InstOp, DType)],
    op: ReduceOp,
) -> ReduceKernel {
    let mut insts = vec![Inst { op: InstOp::Load(0), dtype }];
    insts.extend(prologue.iter().map(|&(op, dtype)| Inst { op, dtype }));
    let reduced = insts.len() as u32 - 1;
    let output = insts[reduced as usize].dtype;
    ReduceKernel {
        rank,
        reduce_rank: rr,
        inputs: vec![KernelInput { dtype, inner }],
        scalars: 1,
        stages: vec![ReduceStage { insts, reduced, op, output, scale: None }],
        epilogue: None,
    }
}

/// The input's elements (bits of `h`) for `shape` laid out as `row`, and its strides: element
/// `(o, r)` of output `o`'s reduced index `r` is `at(o, r)`.
fn layout(shape: &[usize], rr: usize, row: Row, at: &dyn Fn(usize, usize) -> u16) -> (Vec<u8>, Vec<isize>) {
    let kept = shape.len() - rr;
    let (n_out, n_red): (usize, usize) = (shape[..kept].iter().product(), shape[kept..].iter().product());
    let inner = shape[shape.len() - 1];
    // Unit: row-major. Broadcast: the last dim has stride 0 (one value per run of it).
    // Strided: row-major with the last dim's stride 3.
    let (step, run_len) = match row {
        Row::Unit => (1, inner),
        Row::Broadcast => (0, 1),
        Row::Strided => (3, 3 * inner),
    };
    let mut strides = vec![0isize; shape.len()];
    strides[shape.len() - 1] = step;
    let mut n = run_len;
    for d in (0..shape.len() - 1).rev() {
        strides[d] = n as isize;
        n *= shape[d];
    }
    let mut buf = vec![0xFFu8; 2 * n]; // NaN between strided elements
    for o in 0..n_out {
        for r in 0..n_red {
            let idx = index(shape, rr, o, r);
            if row == Row::Broadcast && idx[shape.len() - 1] != 0 {
                continue; // a run's one value is its first element's
            }
            let off: isize = idx.iter().zip(&strides).map(|(&i, &s)| i as isize * s).sum();
            let off = off as usize;
            buf[2 * off..2 * off + 2].copy_from_slice(&at(o, r).to_le_bytes());
        }
    }
    (buf, strides)
}

/// The values output `o` reduces (as f64) when element `(o, r)` has bits `at(o, r)` laid out
/// as `row`: a broadcast row repeats its run's first value.
fn row_values(h: Half, shape: &[usize], rr: usize, row: Row, o: usize, at: &dyn Fn(usize, usize) -> u16) -> Vec<f64> {
    let n_red: usize = shape[shape.len() - rr..].iter().product();
    let inner = shape[shape.len() - 1];
    let first = |r: usize| if row == Row::Broadcast { r - r % inner } else { r };
    (0..n_red).map(|r| h.value(at(o, first(r))) as f64).collect()
}

/// Compiles and runs `k` over `shape` (input bits from `at`, scalar 0 = `scale`), checking its
/// plan; returns the stage outputs' bits and the epilogue's (empty without one).
fn run(
    k: &ReduceKernel,
    shape: &[usize],
    row: Row,
    at: &dyn Fn(usize, usize) -> u16,
    scale: f64,
) -> (Vec<u8>, Vec<u8>) {
    let kern = CpuKernel::compile_reduce(k, "half_reduce").unwrap_or_else(|e| panic!("{k:?}: {e}"));
    assert!(!kern.is_tiled(), "a kernel of half values is never tiled: {k:?}");
    let vector = row != Row::Strided && k.inputs.iter().all(|i| i.dtype != DType::F16);
    assert_eq!(kern.is_vectorized(), vector, "{row:?}: {k:?}");
    let rr = k.reduce_rank;
    let (buf, strides) = layout(shape, rr, row, at);
    let kept = shape.len() - rr;
    let (n_out, n_red): (usize, usize) = (shape[..kept].iter().product(), shape[kept..].iter().product());
    let mut out = vec![0xA5u8; n_out * k.stages[0].output.size_in_bytes()];
    let ep_size = k.epilogue.as_ref().map_or(0, |ep| ep.dtype(ep.outputs[0]).size_in_bytes());
    let mut epi = vec![0xA5u8; n_out * n_red * ep_size];
    let ip = [buf.as_ptr()];
    let op = [out.as_mut_ptr(), epi.as_mut_ptr()];
    let scalars = [scale];
    let args = kernel_args(&ip, &op[..1 + usize::from(ep_size > 0)], &scalars, shape, &strides, 0..n_out);
    // SAFETY: `buf` holds every element the strides reach over `shape` (`layout`), `out` one
    // element of the stage's output dtype per output, `epi` (with an epilogue) one of its
    // dtype per element of the iteration space; the one scalar is given.
    unsafe { kern.call(&args) };
    (out, epi)
}

/// The f64 accumulation of `op` over `xs` in order, rounded once to `h` through f32.
fn eager(h: Half, op: ReduceOp, xs: impl Iterator<Item = f64>, scale: Option<f64>) -> u16 {
    let acc = xs.fold(op.identity(), |a, x| op.step(a, x));
    h.round((acc * scale.unwrap_or(1.0)) as f32)
}

/// Bits `k` of a sum case: multiples of 1/64 below 32 in magnitude (exact in any f64 order),
/// rounded to `h`.
fn sum_value(h: Half, o: usize, r: usize) -> u16 {
    let k = ((o * 131 + r * 71 + 17) % 4001) as f32 - 2000.0;
    h.round(k / 64.0)
}

/// Bits of a product case: ±2^e, e in -1..=1 (exact products).
fn prod_value(h: Half, o: usize, r: usize) -> u16 {
    let v = [0.5f32, 1.0, 2.0, -1.0, 2.0, 0.5, -2.0][(o * 5 + r * 3) % 7];
    h.round(v)
}

/// Bits of a max/min case: any pattern but NaN (a NaN row is checked separately).
fn any_value(h: Half, o: usize, r: usize) -> u16 {
    let b = ((o * 7919 + r * 104_729 + 11) % 65_536) as u16;
    if h.value(b).is_nan() {
        h.round(-1.5)
    } else {
        b
    }
}

/// Checks stage 0's outputs of `k` against `want(o)` for every output.
fn check_stage(
    h: Half,
    k: &ReduceKernel,
    shape: &[usize],
    row: Row,
    at: &dyn Fn(usize, usize) -> u16,
    scale: f64,
    want: &dyn Fn(usize) -> u16,
    what: &str,
) {
    let (out, _) = run(k, shape, row, at, scale);
    for (o, b) in out.chunks_exact(2).enumerate() {
        let got = u16::from_le_bytes([b[0], b[1]]);
        let w = want(o);
        assert!(
            h.same(got, w),
            "{what} {h:?} {shape:?} {row:?} output {o}: kernel {got:#06x} ({}), eager {w:#06x} ({})",
            h.value(got),
            h.value(w)
        );
    }
}

#[test]
fn half_sums_products_max_min_and_means_match_eager() {
    for h in [Half::BF16, Half::F16] {
        let d = h.dtype();
        for (shape, rr) in SHAPES {
            let n_red: usize = shape[shape.len() - rr..].iter().product();
            for row in ROWS {
                let inner = match row {
                    Row::Unit => InnerStride::Unit,
                    Row::Broadcast => InnerStride::Broadcast,
                    Row::Strided => InnerStride::Strided,
                };
                let vals = |o: usize, at: &dyn Fn(usize, usize) -> u16| row_values(h, shape, rr, row, o, at);
                let cases: [(ReduceOp, &dyn Fn(usize, usize) -> u16); 4] = [
                    (ReduceOp::Sum, &|o, r| sum_value(h, o, r)),
                    (ReduceOp::Prod, &|o, r| prod_value(h, o, r)),
                    (ReduceOp::Max, &|o, r| any_value(h, o, r)),
                    (ReduceOp::Min, &|o, r| any_value(h, o, r)),
                ];
                for (op, at) in cases {
                    let k = kernel(d, shape.len(), rr, inner, &[], op);
                    let want = |o: usize| eager(h, op, vals(o, at).into_iter(), None);
                    check_stage(h, &k, shape, row, at, 0.0, &want, &format!("{op:?}"));
                }
                // A mean: the sum times scalar 0 (1/n), as `mean` lowers.
                let mut k = kernel(d, shape.len(), rr, inner, &[], ReduceOp::Sum);
                k.stages[0].scale = Some(0);
                let at = |o: usize, r: usize| sum_value(h, o, r);
                let s = 1.0 / n_red as f64;
                let want = |o: usize| eager(h, ReduceOp::Sum, vals(o, &at).into_iter(), Some(s));
                check_stage(h, &k, shape, row, &at, s, &want, "mean");
                // A prologue in the half type: Σ x², each square rounded to `h` first.
                let k = kernel(d, shape.len(), rr, inner, &[(InstOp::Unary(UnaryOp::Square, 0), d)], ReduceOp::Sum);
                let small = |o: usize, r: usize| h.round(((o * 3 + r * 5) % 23) as f32 / 8.0 - 1.25);
                let want = |o: usize| {
                    let sq = vals(o, &small).into_iter().map(|x| h.value(h.round((x * x) as f32)) as f64);
                    eager(h, ReduceOp::Sum, sq, None)
                };
                check_stage(h, &k, shape, row, &small, 0.0, &want, "sum of squares");
            }
        }
    }
}

#[test]
fn half_max_min_and_sums_propagate_nan_and_infinity() {
    for h in [Half::BF16, Half::F16] {
        let d = h.dtype();
        let shape: &[usize] = &[4, 37];
        let (nan, inf) = (h.round(f32::NAN), h.round(f32::INFINITY));
        // Output 0 holds a NaN at its 30th element (in the vector part), output 1 at its last
        // (the tail), output 2 an infinity, output 3 neither.
        let at = |o: usize, r: usize| match (o, r) {
            (0, 30) | (1, 36) => nan,
            (2, 5) => inf,
            _ => sum_value(h, o, r),
        };
        for row in [Row::Unit, Row::Strided] {
            let inner = if row == Row::Unit { InnerStride::Unit } else { InnerStride::Strided };
            for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min] {
                let k = kernel(d, 2, 1, inner, &[], op);
                let want = |o: usize| eager(h, op, (0..37).map(|r| h.value(at(o, r)) as f64), None);
                check_stage(h, &k, shape, row, &at, 0.0, &want, &format!("{op:?} with NaN/inf"));
            }
        }
    }
}

#[test]
fn bf16_loads_summed_into_f32_and_a_half_epilogue_match_eager() {
    let h = Half::BF16;
    let (bf, f) = (DType::BF16, DType::F32);
    let shape: &[usize] = &[3, 37];
    let at = |o: usize, r: usize| sum_value(h, o, r);
    // Σ x.to(f32): an f32 stage over bf16 loads, on the F32X4 plan.
    let k = kernel(bf, 2, 1, InnerStride::Unit, &[(InstOp::Cast(0), f)], ReduceOp::Sum);
    let (out, _) = run(&k, shape, Row::Unit, &at, 0.0);
    for (o, b) in out.chunks_exact(4).enumerate() {
        let want = (0..37).map(|r| h.value(at(o, r)) as f64).sum::<f64>() as f32;
        assert_eq!(f32::from_le_bytes(b.try_into().unwrap()), want, "output {o}");
    }
    // x / Σx in bf16 and f16: the epilogue reads the stage's rounded value.
    for h in [Half::BF16, Half::F16] {
        let d = h.dtype();
        let mut k = kernel(d, 2, 1, InnerStride::Unit, &[], ReduceOp::Sum);
        let insts = [(InstOp::Load(0), d), (InstOp::Reduced(0), d), (InstOp::Binary(BinaryOp::Div, 0, 1), d)];
        k.epilogue =
            Some(Epilogue { insts: insts.iter().map(|&(op, dtype)| Inst { op, dtype }).collect(), outputs: vec![2] });
        let at = |o: usize, r: usize| sum_value(h, o, r + 1);
        let (out, epi) = run(&k, shape, Row::Unit, &at, 0.0);
        for o in 0..3 {
            let s = u16::from_le_bytes([out[2 * o], out[2 * o + 1]]);
            let want_s = eager(h, ReduceOp::Sum, (0..37).map(|r| h.value(at(o, r)) as f64), None);
            assert!(h.same(s, want_s), "{h:?} Σ of output {o}");
            for r in 0..37 {
                let e = 2 * (o * 37 + r);
                let got = u16::from_le_bytes([epi[e], epi[e + 1]]);
                let want = h.round(h.value(at(o, r)) / h.value(s));
                assert!(h.same(got, want), "{h:?} x / Σx at ({o}, {r}): kernel {got:#06x}, eager {want:#06x}");
            }
        }
    }
}
