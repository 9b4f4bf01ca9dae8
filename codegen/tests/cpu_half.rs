//! f16 and bf16 elementwise kernels of the CPU JIT against the eager rule, bit for bit: every
//! op widens its operands to f32, computes as `UnaryOp::eval`/`BinaryOp::eval` do and rounds
//! back to the half type (ties to even); casts take `x as f64` through f32 (`Element::from_f64`,
//! PyTorch's rule).
//! Unary ops run over every one of the 65,536 bit patterns (NaNs, infinities, subnormals and
//! both zeros included), binary ops over all pairs of 700 patterns spread over the range.

mod common;
use common::kernel_args;
use half::{bf16, f16};
use kiln_codegen::cpu::CpuKernel;
use kiln_codegen::kernel::{ElementwiseKernel, InnerStride, Inst, InstOp, KernelInput};
use kiln_runtime::op_kind::{BinaryOp, UnaryOp};
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

/// Runs `k` over one contiguous row of `n` elements (inputs and output as raw bytes) and returns
/// the output's bytes.
fn run(k: &ElementwiseKernel, inputs: &[&[u8]], n: usize, out_size: usize) -> Vec<u8> {
    let kern = CpuKernel::compile(k, "half").unwrap_or_else(|e| panic!("{k:?}: {e}"));
    let mut out = vec![0u8; n * out_size];
    let shape = [n];
    let strides = vec![1isize; inputs.len()];
    let ip: Vec<*const u8> = inputs.iter().map(|b| b.as_ptr()).collect();
    let op = [out.as_mut_ptr()];
    let args = kernel_args(&ip, &op, &[], &shape, &strides, 0..1);
    // SAFETY: one row of n contiguous elements per input, each buffer holding n elements of its
    // input's dtype, and `out` n elements of the output's.
    unsafe { kern.call(&args) };
    out
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

fn check_all<H: Half>(what: &str, inputs: &[Vec<H>], got: &[H], want: impl Fn(usize) -> H) {
    for (i, &g) in got.iter().enumerate() {
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
    for &op in UnaryOp::ALL.iter().filter(|op| !op.is_int_only()) {
        let k = kernel(&[H::DTYPE], vec![(InstOp::Load(0), H::DTYPE), (InstOp::Unary(op, 0), H::DTYPE)]);
        let got: Vec<H> = from_bytes(&run(&k, &[&bytes], xs.len(), 2));
        check_all(op.name(), &[xs.clone()], &got, |i| H::from_f32(op.eval(xs[i].to_f32())));
    }
}

fn binary_ops_match_eager<H: Half>() {
    let s = spread::<H>();
    let (a, b): (Vec<H>, Vec<H>) = s.iter().flat_map(|&x| s.iter().map(move |&y| (x, y))).unzip();
    let (ab, bb) = (to_bytes(&a), to_bytes(&b));
    for &op in BinaryOp::ALL.iter().filter(|op| !op.is_bitwise()) {
        let k = kernel(
            &[H::DTYPE, H::DTYPE],
            vec![(InstOp::Load(0), H::DTYPE), (InstOp::Load(1), H::DTYPE), (InstOp::Binary(op, 0, 1), H::DTYPE)],
        );
        let got: Vec<H> = from_bytes(&run(&k, &[&ab, &bb], a.len(), 2));
        check_all(op.name(), &[a.clone(), b.clone()], &got, |i| H::from_f32(op.eval(a[i].to_f32(), b[i].to_f32())));
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
    let into = |from: DType, bytes: &[u8], n: usize| -> Vec<H> {
        let k = kernel(&[from], vec![(InstOp::Load(0), from), (InstOp::Cast(0), H::DTYPE)]);
        from_bytes(&run(&k, &[bytes], n, 2))
    };
    let got = into(DType::F32, &f32s.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>(), f32s.len());
    check_all("cast from f32", &[], &got, |i| H::from_f64(f32s[i] as f64));
    let got = into(DType::F64, &f64s.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>(), f64s.len());
    check_all("cast from f64", &[], &got, |i| H::from_f64(f64s[i]));
    let got = into(DType::I64, &i64s.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>(), i64s.len());
    check_all("cast from i64", &[], &got, |i| H::from_f64(i64s[i] as f64));

    let bytes = to_bytes(&xs);
    let out = |to: DType| {
        let k = kernel(&[H::DTYPE], vec![(InstOp::Load(0), H::DTYPE), (InstOp::Cast(0), to)]);
        run(&k, &[&bytes], xs.len(), to.size_in_bytes())
    };
    let f = out(DType::F32);
    for (i, c) in f.chunks_exact(4).enumerate() {
        let (got, want) = (f32::from_le_bytes(c.try_into().unwrap()), xs[i].to_f32());
        assert!(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()), "{:?} {i} to f32", H::DTYPE);
    }
    let d = out(DType::F64);
    for (i, c) in d.chunks_exact(8).enumerate() {
        let (got, want) = (f64::from_le_bytes(c.try_into().unwrap()), xs[i].to_f32() as f64);
        assert!(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()), "{:?} {i} to f64", H::DTYPE);
    }
    let n = out(DType::I64);
    for (i, c) in n.chunks_exact(8).enumerate() {
        let want = xs[i].to_f32() as f64 as i64;
        assert_eq!(i64::from_le_bytes(c.try_into().unwrap()), want, "{:?} {:#06x} to i64", H::DTYPE, xs[i].bits());
    }
    let t = out(DType::Bool);
    for (i, &b) in t.iter().enumerate() {
        assert_eq!(b != 0, xs[i].to_f32() != 0.0, "{:?} {:#06x} to Bool", H::DTYPE, xs[i].bits());
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

/// Half kernels run the scalar plan (reductions of half values are refused: `cpu_reduce.rs`).
#[test]
fn half_kernels_are_scalar() {
    let k = kernel(&[DType::BF16], vec![(InstOp::Load(0), DType::BF16), (InstOp::Unary(UnaryOp::Exp, 0), DType::BF16)]);
    assert!(!CpuKernel::compile(&k, "h").unwrap().is_vectorized());
}
