//! f16 and bf16 elementwise kernels of the CPU JIT against the eager rule, bit for bit: every
//! op widens its operands to f32, computes as `UnaryOp::eval`/`BinaryOp::eval` do and rounds
//! back to the half type (ties to even); casts take `x as f64` through f32 (`Element::from_f64`,
//! PyTorch's rule).
//! Unary ops run over every one of the 65,536 bit patterns (NaNs, infinities, subnormals and
//! both zeros included), binary ops over all pairs of 700 patterns spread over the range.
//!
//! Each case runs in four layouts ([`Layout`]): one contiguous row, rows of 35 elements (a
//! scalar tail after the vectors of each row), input 0 broadcast along rows of 7, and every
//! input strided. bf16 (and f32) kernels at unit or broadcast strides must take the F32X4
//! plan (`CpuKernel::is_vectorized`), f16 and strided ones the scalar plan, and no half
//! kernel is tiled; the results are the eager rule's in every layout.

mod common;
use common::kernel_args;
use half::{bf16, f16};
use kiln_codegen::cpu::CpuKernel;
use kiln_codegen::kernel::{ElementwiseKernel, InnerStride, Inst, InstOp, KernelInput};
use kiln_runtime::op_kind::{BinaryOp, CmpOp, LogicalOp, UnaryOp};
use kiln_runtime::DType;

/// A half type as the tests see it: its dtype, bits and the eager rounding.
trait Half: Copy {
    const DTYPE: DType;
    fn from_bits(b: u16) -> Self;
    fn bits(self) -> u16;
    fn to_f32(self) -> f32;
    fn from_f32(x: f32) -> Self;
    /// Eager's rounding of an f64 (`Element::from_f64`): through f32, as PyTorch.
    fn from_f64(x: f64) -> Self {
        Self::from_f32(x as f32)
    }
}

macro_rules! half_type {
    ($t:ty, $d:ident) => {
        impl Half for $t {
            const DTYPE: DType = DType::$d;
            fn from_bits(b: u16) -> Self {
                <$t>::from_bits(b)
            }
            fn bits(self) -> u16 {
                self.to_bits()
            }
            fn to_f32(self) -> f32 {
                <$t>::to_f32(self)
            }
            fn from_f32(x: f32) -> Self {
                <$t>::from_f32(x)
            }
        }
    };
}
half_type!(f16, F16);
half_type!(bf16, BF16);

/// How a test lays its inputs over the iteration space. Every layout computes the same elements
/// (each output element is the op of input elements `src(pos)`), so the results of all of them
/// are checked against the same eager rule.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Layout {
    /// One contiguous row of the `n` elements (unit inner stride).
    Row,
    /// Rows of [`ROW`] elements (4·8 + 3: each row ends in a scalar tail), the inputs cycled to
    /// fill the last row.
    Rows,
    /// Input 0 broadcast along rows of [`BCAST`] elements (inner stride 0: element `i` is
    /// row `i`), the other inputs unit-stride, each element repeated along its row.
    Broadcast,
    /// Every input read with inner stride 3 (the scalar plan).
    Strided,
}

/// Elements per row of [`Layout::Rows`].
const ROW: usize = 35;
/// Elements per row of [`Layout::Broadcast`] (4 + 3: one vector and a tail).
const BCAST: usize = 7;

const LAYOUTS: [Layout; 4] = [Layout::Row, Layout::Rows, Layout::Broadcast, Layout::Strided];

impl Layout {
    /// The shape of the iteration space for `n` elements.
    fn shape(self, n: usize) -> Vec<usize> {
        match self {
            Layout::Row | Layout::Strided => vec![n],
            Layout::Rows => vec![n.div_ceil(ROW), ROW],
            Layout::Broadcast => vec![n, BCAST],
        }
    }

    /// The inner stride input `i` declares.
    fn inner(self, i: usize) -> InnerStride {
        match self {
            Layout::Strided => InnerStride::Strided,
            Layout::Broadcast if i == 0 => InnerStride::Broadcast,
            _ => InnerStride::Unit,
        }
    }

    /// Which of the `n` elements output element `pos` is computed from.
    fn src(self, pos: usize, n: usize) -> usize {
        match self {
            Layout::Row | Layout::Strided => pos,
            Layout::Rows => pos % n,
            Layout::Broadcast => pos / BCAST,
        }
    }

    /// Input `i`'s buffer (from its `n` elements of `size` bytes, `bytes`) and its strides.
    fn input(self, i: usize, bytes: &[u8], size: usize, n: usize) -> (Vec<u8>, Vec<isize>) {
        let elem = |k: usize| &bytes[k * size..(k + 1) * size];
        match self {
            Layout::Row => (bytes.to_vec(), vec![1]),
            Layout::Rows => {
                let total = n.div_ceil(ROW) * ROW;
                ((0..total).flat_map(|p| elem(p % n).to_vec()).collect(), vec![ROW as isize, 1])
            }
            Layout::Broadcast if i == 0 => (bytes.to_vec(), vec![1, 0]),
            Layout::Broadcast => {
                ((0..n * BCAST).flat_map(|p| elem(p / BCAST).to_vec()).collect(), vec![BCAST as isize, 1])
            }
            Layout::Strided => {
                // The elements with two elements of 0xFF bytes (NaNs) between them.
                let mut buf = vec![0xFFu8; 3 * n * size];
                for k in 0..n {
                    buf[3 * k * size..(3 * k + 1) * size].copy_from_slice(elem(k));
                }
                (buf, vec![3])
            }
        }
    }
}

/// Runs `k` (declared with unit inner strides) laid out as `lay` over `n` elements of each
/// input (raw bytes), and returns the output's bytes (one element per position of the
/// iteration space: `lay.src(pos, n)` says which element it is computed from) and whether the
/// kernel is vectorized. Checks that no half kernel is tiled.
fn run(k: &ElementwiseKernel, lay: Layout, inputs: &[&[u8]], n: usize, out_size: usize) -> (Vec<u8>, bool) {
    let shape = lay.shape(n);
    let mut k = k.clone();
    k.rank = shape.len();
    for (i, input) in k.inputs.iter_mut().enumerate() {
        input.inner = lay.inner(i);
    }
    let kern = CpuKernel::compile(&k, "half").unwrap_or_else(|e| panic!("{k:?}: {e}"));
    assert!(!kern.is_tiled(), "a kernel of half values is never tiled: {k:?}");
    let total: usize = shape.iter().product();
    let mut out = vec![0u8; total * out_size];
    let mut bufs = Vec::new();
    let mut strides = Vec::new();
    for (i, (b, input)) in inputs.iter().zip(&k.inputs).enumerate() {
        let (buf, st) = lay.input(i, b, input.dtype.size_in_bytes(), n);
        bufs.push(buf);
        strides.extend(st);
    }
    let ip: Vec<*const u8> = bufs.iter().map(|b| b.as_ptr()).collect();
    let op = [out.as_mut_ptr()];
    let rows = shape[..shape.len() - 1].iter().product::<usize>();
    let args = kernel_args(&ip, &op, &[], &shape, &strides, 0..rows);
    // SAFETY: each buffer holds every element its strides reach over `shape` (`Layout::input`),
    // of its input's dtype; `out` holds the `total` elements of the output's dtype.
    unsafe { kern.call(&args) };
    (out, kern.is_vectorized())
}

/// Whether a kernel of these dtypes laid out as `lay` must take the vector plan: bf16 (with f32)
/// at unit or broadcast strides does, f16 and strided inputs never do.
fn vector_expected(dtypes: &[DType], lay: Layout) -> bool {
    lay != Layout::Strided && dtypes.iter().all(|d| matches!(d, DType::BF16 | DType::F32))
}

fn kernel(inputs: &[DType], insts: Vec<(InstOp, DType)>) -> ElementwiseKernel {
    let out = insts.len() as u32 - 1;
    ElementwiseKernel {
        rank: 1,
        inputs: inputs.iter().map(|&dtype| KernelInput { dtype, inner: InnerStride::Unit }).collect(),
        scalars: 0,
        insts: insts.into_iter().map(|(op, dtype)| Inst { op, dtype }).collect(),
        outputs: vec![out],
    }
}

fn to_bytes<H: Half>(xs: &[H]) -> Vec<u8> {
    xs.iter().flat_map(|x| x.bits().to_le_bytes()).collect()
}

fn from_bytes<H: Half>(b: &[u8]) -> Vec<H> {
    b.chunks_exact(2).map(|c| H::from_bits(u16::from_le_bytes([c[0], c[1]]))).collect()
}

/// Equal bits, or both NaN (a NaN's payload is not specified).
fn same<H: Half>(a: H, b: H) -> bool {
    a.bits() == b.bits() || (a.to_f32().is_nan() && b.to_f32().is_nan())
}

/// Checks output element `pos` (computed from element `src(pos)` of each input) against
/// `want(src(pos))`, for every `pos`.
fn check_all<H: Half>(
    what: &str,
    inputs: &[Vec<H>],
    got: &[H],
    src: impl Fn(usize) -> usize,
    want: impl Fn(usize) -> H,
) {
    for (pos, &g) in got.iter().enumerate() {
        let i = src(pos);
        let w = want(i);
        if !same(g, w) {
            let ins: Vec<String> = inputs.iter().map(|v| format!("{:#06x}", v[i].bits())).collect();
            panic!("{what} {:?} of {ins:?}: kernel {:#06x}, eager {:#06x}", H::DTYPE, g.bits(), w.bits());
        }
    }
}

fn every_pattern<H: Half>() -> Vec<H> {
    (0..=u16::MAX).map(H::from_bits).collect()
}

/// 700 patterns: every 100th one, plus the zeros, infinities, a NaN and the subnormal edge.
fn spread<H: Half>() -> Vec<H> {
    let mut v: Vec<H> = (0..=u16::MAX).step_by(100).map(H::from_bits).collect();
    v.extend(
        [0x0000, 0x8000, 0x0001, 0x8001, H::from_f32(f32::INFINITY).bits(), H::from_f32(f32::NAN).bits()]
            .map(H::from_bits),
    );
    v.extend((0..50).map(|k| H::from_f32(1.0 + k as f32 / 64.0)));
    v.truncate(700);
    v
}

fn unary_ops_match_eager<H: Half>() {
    let xs = every_pattern::<H>();
    let bytes = to_bytes(&xs);
    let n = xs.len();
    for &op in UnaryOp::ALL.iter().filter(|op| !op.is_int_only()) {
        let k = kernel(&[H::DTYPE], vec![(InstOp::Load(0), H::DTYPE), (InstOp::Unary(op, 0), H::DTYPE)]);
        for lay in LAYOUTS {
            let (out, vectorized) = run(&k, lay, &[&bytes], n, 2);
            assert_eq!(vectorized, vector_expected(&[H::DTYPE], lay), "{} {lay:?}", op.name());
            let got: Vec<H> = from_bytes(&out);
            let what = format!("{} {lay:?}", op.name());
            check_all(&what, &[xs.clone()], &got, |p| lay.src(p, n), |i| H::from_f32(op.eval(xs[i].to_f32())));
        }
    }
}

fn binary_ops_match_eager<H: Half>() {
    let s = spread::<H>();
    let (a, b): (Vec<H>, Vec<H>) = s.iter().flat_map(|&x| s.iter().map(move |&y| (x, y))).unzip();
    let (ab, bb) = (to_bytes(&a), to_bytes(&b));
    let n = a.len();
    for &op in BinaryOp::ALL.iter().filter(|op| !op.is_bitwise()) {
        let k = kernel(
            &[H::DTYPE, H::DTYPE],
            vec![(InstOp::Load(0), H::DTYPE), (InstOp::Load(1), H::DTYPE), (InstOp::Binary(op, 0, 1), H::DTYPE)],
        );
        for lay in LAYOUTS {
            let (out, vectorized) = run(&k, lay, &[&ab, &bb], n, 2);
            assert_eq!(vectorized, vector_expected(&[H::DTYPE], lay), "{} {lay:?}", op.name());
            let got: Vec<H> = from_bytes(&out);
            let what = format!("{} {lay:?}", op.name());
            check_all(
                &what,
                &[a.clone(), b.clone()],
                &got,
                |p| lay.src(p, n),
                |i| H::from_f32(op.eval(a[i].to_f32(), b[i].to_f32())),
            );
        }
    }
}

/// Casts into the half type from f32 (every 997th pattern and the halfway points between
/// neighbouring half values), f64 and i64, and out of it to f32, f64, i64 and Bool.
fn casts_match_eager<H: Half>() {
    let xs = every_pattern::<H>();
    let mut f32s: Vec<f32> = (0..=u32::MAX).step_by(997).map(f32::from_bits).collect();
    f32s.extend(xs.windows(2).map(|w| (w[0].to_f32() + w[1].to_f32()) / 2.0));
    let f64s: Vec<f64> = f32s.iter().map(|&x| x as f64 * (1.0 + 1e-12)).collect();
    let i64s: Vec<i64> = (0..5000i64).map(|k| (k - 2500) * 1_000_003 + k * k * 91).collect();
    let into = |from: DType, bytes: &[u8], n: usize, want: &dyn Fn(usize) -> H| {
        let k = kernel(&[from], vec![(InstOp::Load(0), from), (InstOp::Cast(0), H::DTYPE)]);
        for lay in LAYOUTS {
            let (out, vectorized) = run(&k, lay, &[bytes], n, 2);
            assert_eq!(vectorized, vector_expected(&[from, H::DTYPE], lay), "cast from {from} {lay:?}");
            let got: Vec<H> = from_bytes(&out);
            check_all(&format!("cast from {from} {lay:?}"), &[], &got, |p| lay.src(p, n), want);
        }
    };
    let bytes: Vec<u8> = f32s.iter().flat_map(|x| x.to_le_bytes()).collect();
    into(DType::F32, &bytes, f32s.len(), &|i| H::from_f64(f32s[i] as f64));
    let bytes: Vec<u8> = f64s.iter().flat_map(|x| x.to_le_bytes()).collect();
    into(DType::F64, &bytes, f64s.len(), &|i| H::from_f64(f64s[i]));
    let bytes: Vec<u8> = i64s.iter().flat_map(|x| x.to_le_bytes()).collect();
    into(DType::I64, &bytes, i64s.len(), &|i| H::from_f64(i64s[i] as f64));

    let bytes = to_bytes(&xs);
    let n = xs.len();
    for lay in LAYOUTS {
        let out = |to: DType| {
            let k = kernel(&[H::DTYPE], vec![(InstOp::Load(0), H::DTYPE), (InstOp::Cast(0), to)]);
            let (out, vectorized) = run(&k, lay, &[&bytes], n, to.size_in_bytes());
            assert_eq!(vectorized, vector_expected(&[H::DTYPE, to], lay), "cast to {to} {lay:?}");
            out
        };
        let f = out(DType::F32);
        for (p, c) in f.chunks_exact(4).enumerate() {
            let x = xs[lay.src(p, n)];
            let (got, want) = (f32::from_le_bytes(c.try_into().unwrap()), x.to_f32());
            // Widening is exact: the bits are equal, NaNs included (both quieted alike).
            assert_eq!(got.to_bits(), want.to_bits(), "{:?} {:#06x} to f32 {lay:?}", H::DTYPE, x.bits());
        }
        let d = out(DType::F64);
        for (p, c) in d.chunks_exact(8).enumerate() {
            let x = xs[lay.src(p, n)];
            let (got, want) = (f64::from_le_bytes(c.try_into().unwrap()), x.to_f32() as f64);
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "{:?} {:#06x} to f64 {lay:?}",
                H::DTYPE,
                x.bits()
            );
        }
        let i = out(DType::I64);
        for (p, c) in i.chunks_exact(8).enumerate() {
            let x = xs[lay.src(p, n)];
            let want = x.to_f32() as f64 as i64;
            assert_eq!(
                i64::from_le_bytes(c.try_into().unwrap()),
                want,
                "{:?} {:#06x} to i64 {lay:?}",
                H::DTYPE,
                x.bits()
            );
        }
        let t = out(DType::Bool);
        for (p, &b) in t.iter().enumerate() {
            let x = xs[lay.src(p, n)];
            assert_eq!(b != 0, x.to_f32() != 0.0, "{:?} {:#06x} to Bool {lay:?}", H::DTYPE, x.bits());
        }
    }
}

#[test]
fn bf16_unary_ops_match_eager() {
    unary_ops_match_eager::<bf16>();
}

#[test]
fn f16_unary_ops_match_eager() {
    unary_ops_match_eager::<f16>();
}

#[test]
fn bf16_binary_ops_match_eager() {
    binary_ops_match_eager::<bf16>();
}

#[test]
fn f16_binary_ops_match_eager() {
    binary_ops_match_eager::<f16>();
}

#[test]
fn bf16_casts_match_eager() {
    casts_match_eager::<bf16>();
}

#[test]
fn f16_casts_match_eager() {
    casts_match_eager::<f16>();
}

/// bf16 kernels take the F32X4 plan and are never tiled (an exp, which tiled f32 rows would
/// hand to a slice routine, included); f16 kernels run the scalar plan (reductions of half
/// values are refused: `cpu_reduce.rs`).
#[test]
fn bf16_kernels_are_vectorized_and_untiled_f16_scalar() {
    for op in [UnaryOp::Exp, UnaryOp::Tanh, UnaryOp::Sigmoid, UnaryOp::Neg] {
        let bf = kernel(&[DType::BF16], vec![(InstOp::Load(0), DType::BF16), (InstOp::Unary(op, 0), DType::BF16)]);
        let kern = CpuKernel::compile(&bf, "h").unwrap();
        assert!(kern.is_vectorized() && !kern.is_tiled(), "bf16 {}", op.name());
        let f = kernel(&[DType::F16], vec![(InstOp::Load(0), DType::F16), (InstOp::Unary(op, 0), DType::F16)]);
        let kern = CpuKernel::compile(&f, "h").unwrap();
        assert!(!kern.is_vectorized() && !kern.is_tiled(), "f16 {}", op.name());
    }
    // An f32 exp inside a kernel holding bf16 values is not tiled either.
    let mixed = kernel(
        &[DType::BF16],
        vec![
            (InstOp::Load(0), DType::BF16),
            (InstOp::Cast(0), DType::F32),
            (InstOp::Unary(UnaryOp::Exp, 1), DType::F32),
            (InstOp::Cast(2), DType::BF16),
        ],
    );
    let kern = CpuKernel::compile(&mixed, "h").unwrap();
    assert!(kern.is_vectorized() && !kern.is_tiled());
}

/// A kernel mixing bf16, f32 and Bool values (casts both ways, a transcendental, a constant, a
/// run-time scalar, a comparison, a logical op, a select, a Bool cast, a broadcast input) with
/// a bf16 and an f32 output, over rows of 35 elements (a scalar tail each): vectorized, and
/// equal to the eager rule bit for bit (bf16 ops computed in f32 and rounded; f32 ops as f32).
#[test]
fn mixed_bf16_f32_bool_kernel_matches_eager() {
    use DType::{Bool, BF16, F32};
    let insts = vec![
        (InstOp::Load(0), BF16),                           // 0 x
        (InstOp::Load(1), F32),                            // 1 y
        (InstOp::Load(2), Bool),                           // 2 m
        (InstOp::Load(3), BF16),                           // 3 z (broadcast along the row)
        (InstOp::Cast(0), F32),                            // 4 x as f32
        (InstOp::Binary(BinaryOp::Mul, 4, 1), F32),        // 5 p = x·y
        (InstOp::Cast(5), BF16),                           // 6 p as bf16
        (InstOp::Unary(UnaryOp::Tanh, 6), BF16),           // 7 t
        (InstOp::Const(0.1), BF16),                        // 8
        (InstOp::Binary(BinaryOp::Add, 7, 8), BF16),       // 9 u = t + 0.1
        (InstOp::Cmp(CmpOp::Gt, 0, 3), Bool),              // 10 x > z
        (InstOp::Logical(LogicalOp::And, 10, 2), Bool),    // 11 (x > z) && m
        (InstOp::Where(11, 9, 3), BF16),                   // 12 w
        (InstOp::Cast(2), BF16),                           // 13 m as bf16
        (InstOp::Binary(BinaryOp::Maximum, 12, 13), BF16), // 14
        (InstOp::Scalar(0), BF16),                         // 15 s
        (InstOp::Binary(BinaryOp::Mul, 14, 15), BF16),     // 16 output 0
        (InstOp::Binary(BinaryOp::Sub, 5, 1), F32),        // 17 output 1: p - y
    ];
    let k = ElementwiseKernel {
        rank: 2,
        inputs: [
            (BF16, InnerStride::Unit),
            (F32, InnerStride::Unit),
            (Bool, InnerStride::Unit),
            (BF16, InnerStride::Broadcast),
        ]
        .map(|(dtype, inner)| KernelInput { dtype, inner })
        .to_vec(),
        scalars: 1,
        insts: insts.into_iter().map(|(op, dtype)| Inst { op, dtype }).collect(),
        outputs: vec![16, 17],
    };
    let kern = CpuKernel::compile(&k, "mixed").unwrap();
    assert!(kern.is_vectorized() && !kern.is_tiled());

    let rows = 65536usize.div_ceil(ROW);
    let n = rows * ROW;
    let mut seed = 7u64;
    let mut next = move || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 32) as u32
    };
    let x: Vec<bf16> = (0..n).map(|i| bf16::from_bits(i as u16)).collect();
    // y near 1 (so x·y stays near x) with some specials.
    let y: Vec<f32> = (0..n)
        .map(|i| match i % 97 {
            0 => f32::NAN,
            1 => f32::INFINITY,
            2 => -0.0,
            _ => 0.5 + (next() >> 8) as f32 / (1u32 << 24) as f32,
        })
        .collect();
    let m: Vec<u8> = (0..n).map(|_| (next() & 1) as u8).collect();
    let z: Vec<bf16> = (0..rows).map(|r| bf16::from_f32(r as f32 / 64.0 - 10.0)).collect();
    let s = 1.7f64;
    let (xb, zb) = (to_bytes(&x), to_bytes(&z));
    let yb: Vec<u8> = y.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut out0 = vec![0u8; 2 * n];
    let mut out1 = vec![0u8; 4 * n];
    let ip = [xb.as_ptr(), yb.as_ptr(), m.as_ptr(), zb.as_ptr()];
    let op = [out0.as_mut_ptr(), out1.as_mut_ptr()];
    let shape = [rows, ROW];
    let strides = [ROW as isize, 1, ROW as isize, 1, ROW as isize, 1, 1, 0];
    let scalars = [s];
    let args = kernel_args(&ip, &op, &scalars, &shape, &strides, 0..rows);
    // SAFETY: x, y and m hold rows × ROW elements, z one per row (inner stride 0); the outputs
    // hold rows × ROW elements of bf16 and f32; m's bytes are 0 or 1.
    unsafe { kern.call(&args) };

    let b = |v: f32| bf16::from_f32(v);
    let (c, sv) = (b(0.1f64 as f32), b(s as f32));
    for p in 0..n {
        let (xi, yi, mi, zi) = (x[p], y[p], m[p] != 0, z[p / ROW]);
        let pf = xi.to_f32() * yi;
        let t = b(UnaryOp::Tanh.eval(b(pf).to_f32()));
        let u = b(t.to_f32() + c.to_f32());
        let w = if xi.to_f32() > zi.to_f32() && mi { u } else { zi };
        let mb = b(if mi { 1.0 } else { 0.0 });
        let mx = b(BinaryOp::Maximum.eval(w.to_f32(), mb.to_f32()));
        let want0 = b(mx.to_f32() * sv.to_f32());
        let want1 = pf - yi;
        let got0 = bf16::from_bits(u16::from_le_bytes([out0[2 * p], out0[2 * p + 1]]));
        let got1 = f32::from_le_bytes(out1[4 * p..4 * p + 4].try_into().unwrap());
        assert!(
            same(got0, want0),
            "output 0 at {p} (x {:#06x}): kernel {:#06x}, eager {:#06x}",
            xi.bits(),
            got0.bits(),
            want0.bits()
        );
        assert!(
            got1.to_bits() == want1.to_bits() || (got1.is_nan() && want1.is_nan()),
            "output 1 at {p}: kernel {got1}, eager {want1}"
        );
    }
}
