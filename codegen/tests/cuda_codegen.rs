//! The CUDA C emitter: its text (always), NVRTC compiling every op's kernel to CUBIN for sm_80
//! and sm_90 (when NVRTC loads), and every op's kernel run on a GPU against `Expr::eval_f64`
//! (when a device is present). Missing pieces skip with a printed line.

use kiln_codegen::cuda::{emit_elementwise, run_elementwise, ExprKernel, LoadedElementwise};
use kiln_codegen::Expr;
use kiln_runtime::cuda::{self, CudaBuffer, CudaErrorKind};
use kiln_runtime::op_kind::{BinaryOp, CmpOp, UnaryOp};
use kiln_runtime::DType;
use std::sync::Mutex;

/// Every unary op with a float form, from the unary op table (a new row is covered here).
fn unary_float_ops() -> impl Iterator<Item = UnaryOp> {
    UnaryOp::ALL.iter().copied().filter(|op| !op.is_int_only())
}
/// Every binary op with a float form, from the binary op table.
fn binary_float_ops() -> impl Iterator<Item = BinaryOp> {
    BinaryOp::ALL.iter().copied().filter(|op| !op.is_bitwise())
}

fn x(i: usize) -> Expr {
    Expr::Input(i)
}

fn bin(op: BinaryOp, a: Expr, b: Expr) -> Expr {
    Expr::binary(op, a, b)
}

/// gelu_tanh(x*a + b) spelled with primitive ops, as `kiln::compile` captures it (a deep tree
/// with shared subexpressions): the fused chain the GPU bench measures.
fn gelu_chain() -> Expr {
    let z = || bin(BinaryOp::Add, bin(BinaryOp::Mul, x(0), x(1)), x(2));
    let cube = bin(BinaryOp::Mul, bin(BinaryOp::Mul, z(), z()), z());
    let inner = bin(BinaryOp::Add, z(), bin(BinaryOp::Mul, Expr::Const(0.044715), cube));
    let t = Expr::unary(UnaryOp::Tanh, bin(BinaryOp::Mul, Expr::Const(0.797_884_560_802_865_4), inner));
    bin(BinaryOp::Mul, bin(BinaryOp::Mul, Expr::Const(0.5), z()), bin(BinaryOp::Add, Expr::Const(1.0), t))
}

/// Every expression the NVRTC test compiles: (expression, number of inputs).
fn all_exprs() -> Vec<(Expr, usize)> {
    let mut v: Vec<(Expr, usize)> = unary_float_ops().map(|op| (Expr::unary(op, x(0)), 1)).collect();
    v.extend(binary_float_ops().map(|op| (bin(op, x(0), x(1)), 2)));
    v.extend(CmpOp::ALL.iter().map(|&op| (Expr::Cmp(op, Box::new(x(0)), Box::new(x(1))), 2)));
    v.push((
        Expr::Where(
            Box::new(Expr::Cmp(CmpOp::Gt, Box::new(x(0)), Box::new(Expr::Const(0.0)))),
            Box::new(x(1)),
            Box::new(Expr::Const(f64::NEG_INFINITY)),
        ),
        2,
    ));
    for d in [DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::U8, DType::Bool] {
        // x*4 is exact in every float dtype, so rounding and truncation see the reference's value.
        v.push((Expr::Cast(d, Box::new(bin(BinaryOp::Mul, x(0), Expr::Const(4.0)))), 1));
    }
    v.push((gelu_chain(), 3));
    v.push((bin(BinaryOp::Add, x(0), Expr::Const(f64::NAN)), 1));
    v
}

const DTYPES: [DType; 4] = [DType::F32, DType::F64, DType::F16, DType::BF16];

// ---------------------------------------------------------------- emitter text (always runs)

#[test]
fn emits_a_grid_stride_kernel_with_vector_loads() {
    let k = emit_elementwise(&gelu_chain(), 3, DType::F32).unwrap();
    assert!(k.name.starts_with("kiln_ew_f32_"), "{}", k.name);
    assert_eq!(k.vector_width, 4);
    let s = &k.source;
    assert!(s.starts_with("// kiln-codegen cuda v1"), "{s}");
    assert!(s.contains(&format!("extern \"C\" __global__ void __launch_bounds__(256) {}(const float* in0, const float* in1, const float* in2, float* out, unsigned long long n)", k.name)), "{s}");
    assert!(s.contains("reinterpret_cast<const float4*>(in2)[v]"), "{s}");
    assert!(s.contains("r.w = kiln_body(a0.w, a1.w, a2.w);"), "{s}");
    assert!(s.contains("tanhf("), "{s}");
    assert!(s.contains("0.044715f"), "{s}");
    assert!(s.contains("v += stride") && s.contains("i += stride"), "{s}");
}

#[test]
fn op_formulas_follow_pytorch() {
    let src = |op: UnaryOp| emit_elementwise(&Expr::unary(op, x(0)), 1, DType::F32).unwrap().source;
    assert!(src(UnaryOp::Gelu).contains("erff(t") || src(UnaryOp::Gelu).contains("erff(x0"), "exact gelu uses erff");
    assert!(src(UnaryOp::Round).contains("rintf(x0)"), "round half to even");
    assert!(
        src(UnaryOp::Sign).contains("(x0 > 0.0f) ? 1.0f : ((x0 < 0.0f) ? (-1.0f) : 0.0f)"),
        "{}",
        src(UnaryOp::Sign)
    );
    assert!(src(UnaryOp::Relu).contains("(x0 != x0) ? x0"), "relu keeps NaN");
    let rem = emit_elementwise(&bin(BinaryOp::Rem, x(0), x(1)), 2, DType::F32).unwrap().source;
    assert!(
        rem.contains("float r = fmodf(a, b);") && rem.contains("(r != 0 && ((r < 0) != (b < 0))) ? r + b : r"),
        "{rem}"
    );
    let max = emit_elementwise(&bin(BinaryOp::Maximum, x(0), x(1)), 2, DType::F64).unwrap().source;
    assert!(max.contains("fmax(x0, x1)") && !max.contains("fmaxf"), "{max}");
    let d = emit_elementwise(&Expr::unary(UnaryOp::Exp, x(0)), 1, DType::F64).unwrap();
    assert!(d.source.contains("exp(x0)") && d.source.contains("double2"), "{}", d.source);
    assert_eq!(d.vector_width, 2);
}

#[test]
fn half_kernels_compute_in_f32() {
    let h = emit_elementwise(&Expr::unary(UnaryOp::Exp, x(0)), 1, DType::F16).unwrap();
    assert_eq!(h.vector_width, 1);
    assert!(
        h.source.contains("cvt.rn.f16.f32")
            && h.source.contains("out[i] = kiln_f32_to_f16(kiln_body(kiln_f16_to_f32(in0[i])));"),
        "{}",
        h.source
    );
    let b = emit_elementwise(&Expr::unary(UnaryOp::Exp, x(0)), 1, DType::BF16).unwrap();
    assert!(b.source.contains("kiln_f32_to_bf16") && b.source.contains("const unsigned short* in0"), "{}", b.source);
}

#[test]
fn shared_subexpressions_are_computed_once() {
    let k = emit_elementwise(&gelu_chain(), 3, DType::F32).unwrap();
    // z = x0*x1 + x2 appears five times in the tree but is one temporary.
    assert_eq!(k.source.matches("x0 * x1;").count(), 1, "{}", k.source);
    assert_eq!(k.source.matches(" + x2;").count(), 1, "{}", k.source);
}

#[test]
fn names_follow_the_expression() {
    let a = emit_elementwise(&Expr::unary(UnaryOp::Exp, x(0)), 1, DType::F32).unwrap();
    let b = emit_elementwise(&Expr::unary(UnaryOp::Exp, x(0)), 1, DType::F32).unwrap();
    let c = emit_elementwise(&Expr::unary(UnaryOp::Log, x(0)), 1, DType::F32).unwrap();
    let d = emit_elementwise(&bin(BinaryOp::Add, x(0), Expr::Const(1.0)), 1, DType::F32).unwrap();
    let e = emit_elementwise(&bin(BinaryOp::Add, x(0), Expr::Const(2.0)), 1, DType::F32).unwrap();
    assert_eq!(a, b);
    assert_ne!(a.name, c.name);
    assert_ne!(d.name, e.name);
}

#[test]
fn special_constants_are_spelled_as_bits() {
    let k = emit_elementwise(&bin(BinaryOp::Add, x(0), Expr::Const(f64::NAN)), 1, DType::F32).unwrap();
    assert!(k.source.contains("__int_as_float(0x7fc00000)"), "{}", k.source);
    let k = emit_elementwise(&bin(BinaryOp::Maximum, x(0), Expr::Const(f64::NEG_INFINITY)), 1, DType::F64).unwrap();
    assert!(k.source.contains("(-__longlong_as_double(0x7ff0000000000000LL))"), "{}", k.source);
}

#[test]
fn unsupported_and_invalid_kernels_are_errors() {
    let e = emit_elementwise(&Expr::unary(UnaryOp::Neg, x(0)), 1, DType::I64).unwrap_err();
    assert_eq!(e.kind, CudaErrorKind::Unsupported);
    assert!(e.to_string().starts_with("cuda_codegen: CUDA elementwise kernels for int64 are not supported yet"), "{e}");
    let e = emit_elementwise(&bin(BinaryOp::Add, x(0), x(3)), 2, DType::F32).unwrap_err();
    assert_eq!(e.kind, CudaErrorKind::InvalidArgument);
    assert!(e.message.contains("reads input 3 but the kernel has 2 input(s)"), "{e}");
}

// ---------------------------------------------------------------- NVRTC (runs where NVRTC loads)

fn nvrtc_or_skip() -> bool {
    cuda::nvrtc_for_tests("an NVRTC compile test")
}

#[test]
fn every_op_compiles_to_cubin_for_sm80_and_sm90() {
    if !nvrtc_or_skip() {
        return;
    }
    let mut count = 0;
    for (e, n) in all_exprs() {
        for dtype in DTYPES {
            let k = emit_elementwise(&e, n, dtype).unwrap();
            for arch in [80, 90] {
                let c = cuda::compile(&k.source, &k.name, arch)
                    .unwrap_or_else(|err| panic!("{e} ({dtype}, sm_{arch}): {err}"));
                assert_eq!(&c.cubin[..4], b"\x7fELF", "{e}: not a CUBIN");
                assert_eq!(c.arch, arch);
                count += 1;
            }
        }
    }
    assert_eq!(count, all_exprs().len() * DTYPES.len() * 2);
    println!("{count} kernels compiled to CUBIN");
}

#[test]
fn compile_errors_carry_the_log_and_source() {
    if !nvrtc_or_skip() {
        return;
    }
    let e = cuda::compile("extern \"C\" __global__ void broken(float* p) { p[0] = undefined_name; }", "broken", 80)
        .unwrap_err();
    assert_eq!(e.kind, CudaErrorKind::Compile);
    assert!(e.message.contains("undefined_name") && e.message.contains("--- source ---"), "{e}");
}

/// `KILN_DEBUG=kernels` prints a kernel's source the first time the process compiles it, and
/// only then: checked in a child process (the variable is read once per process).
#[test]
fn kiln_debug_kernels_prints_each_kernel_once() {
    if !nvrtc_or_skip() {
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "debug_child", "--nocapture", "--test-threads=1"])
        .env("KILN_DEBUG", "kernels")
        .env("KILN_TEST_DEBUG_CHILD", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}{}", String::from_utf8_lossy(&out.stdout));
    let k = emit_elementwise(&gelu_chain(), 3, DType::F32).unwrap();
    assert_eq!(stderr.matches(&format!("[kiln] kernel {} (sm_80):", k.name)).count(), 1, "{stderr}");
    assert!(stderr.contains(&k.source), "{stderr}");
}

/// The child half of [`kiln_debug_kernels_prints_each_kernel_once`]; run directly it checks
/// that the switch follows this process's `KILN_DEBUG`.
#[test]
fn debug_child() {
    if std::env::var("KILN_TEST_DEBUG_CHILD").is_err() {
        let want = std::env::var("KILN_DEBUG").map(|v| v.split(',').any(|s| s.trim() == "kernels")).unwrap_or(false);
        assert_eq!(cuda::compile::debug_kernels(), want);
        return;
    }
    assert!(cuda::compile::debug_kernels());
    let k = emit_elementwise(&gelu_chain(), 3, DType::F32).unwrap();
    for _ in 0..3 {
        cuda::compile(&k.source, &k.name, 80).unwrap();
    }
}

// ---------------------------------------------------------------- GPU (runs where a device is)

/// GPU tests share one device and its allocator statistics: one at a time.
static GPU: Mutex<()> = Mutex::new(());

/// The GPU lock, for tests that need a CUDA device (ignored unless asked for; a missing
/// device fails them).
fn gpu() -> std::sync::MutexGuard<'static, ()> {
    if let Err(e) = cuda::device("test", 0) {
        panic!("this test needs a CUDA device: {e}");
    }
    GPU.lock().unwrap_or_else(|e| e.into_inner())
}

/// xorshift64*: reproducible inputs without a dependency.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let u = (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64;
        lo + (hi - lo) * u
    }
}

/// The input range an op is tested on (its domain, away from poles where the answer is
/// ill-conditioned in the input's precision).
fn domain(e: &Expr) -> (f64, f64) {
    match e {
        Expr::Unary(UnaryOp::Log | UnaryOp::Log2 | UnaryOp::Sqrt | UnaryOp::Rsqrt, _) => (0.01, 10.0),
        Expr::Unary(UnaryOp::Log1p, _) => (-0.9, 10.0),
        Expr::Unary(UnaryOp::Tan, _) => (-1.4, 1.4),
        Expr::Binary(BinaryOp::Pow, _, _) => (0.1, 3.0),
        _ => (-6.0, 6.0),
    }
}

/// (relative, absolute) tolerance of an expression's kernel against the f64 reference: f32 math
/// functions are within a few ulp (2^-23 ≈ 1.2e-7); composed formulas round in between.
fn tolerance(e: &Expr, dtype: DType) -> (f64, f64) {
    let exact = matches!(
        e,
        Expr::Unary(
            UnaryOp::Neg
                | UnaryOp::Abs
                | UnaryOp::Relu
                | UnaryOp::Floor
                | UnaryOp::Ceil
                | UnaryOp::Round
                | UnaryOp::Trunc
                | UnaryOp::Sign,
            _
        ) | Expr::Cmp(..)
            | Expr::Where(..)
            | Expr::Binary(BinaryOp::Maximum | BinaryOp::Minimum, _, _)
    );
    match dtype {
        _ if exact => (0.0, 0.0),
        DType::F64 => (1e-12, 1e-13),
        DType::F32 => match e {
            Expr::Binary(BinaryOp::Pow, _, _) | Expr::Unary(UnaryOp::Tan, _) => (1e-5, 1e-6),
            _ => (4e-6, 1e-6),
        },
        DType::F16 => (2e-3, 1e-4),
        _ => (1.6e-2, 1e-3),
    }
}

/// Rounds a reference value to the kernel's storage dtype.
fn round_to(dtype: DType, v: f64) -> f64 {
    match dtype {
        DType::F32 => v as f32 as f64,
        DType::F16 => half::f16::from_f64(v).to_f64(),
        DType::BF16 => half::bf16::from_f64(v).to_f64(),
        _ => v,
    }
}

fn upload(dtype: DType, v: &[f64]) -> CudaBuffer {
    match dtype {
        DType::F32 => CudaBuffer::from_slice(0, &v.iter().map(|&x| x as f32).collect::<Vec<_>>()),
        DType::F64 => CudaBuffer::from_slice(0, v),
        DType::F16 => CudaBuffer::from_slice(0, &v.iter().map(|&x| half::f16::from_f64(x)).collect::<Vec<_>>()),
        _ => CudaBuffer::from_slice(0, &v.iter().map(|&x| half::bf16::from_f64(x)).collect::<Vec<_>>()),
    }
    .unwrap()
}

fn download(dtype: DType, b: &CudaBuffer) -> Vec<f64> {
    match dtype {
        DType::F32 => b.to_vec::<f32>().unwrap().into_iter().map(f64::from).collect(),
        DType::F64 => b.to_vec::<f64>().unwrap(),
        DType::F16 => b.to_vec::<half::f16>().unwrap().into_iter().map(|x| x.to_f64()).collect(),
        _ => b.to_vec::<half::bf16>().unwrap().into_iter().map(|x| x.to_f64()).collect(),
    }
}

/// Runs `e` on `n` random values per input and compares with `eval_f64` on the same (rounded)
/// inputs; returns the largest error relative to the tolerance.
fn check_on_gpu(e: &Expr, ninputs: usize, dtype: DType, n: usize, seed: u64) -> f64 {
    let k: ExprKernel = emit_elementwise(e, ninputs, dtype).unwrap();
    let (lo, hi) = domain(e);
    let mut rng = Rng(seed | 1);
    let inputs: Vec<Vec<f64>> =
        (0..ninputs).map(|_| (0..n).map(|_| round_to(dtype, rng.uniform(lo, hi))).collect()).collect();
    let bufs: Vec<CudaBuffer> = inputs.iter().map(|v| upload(dtype, v)).collect();
    let mut out = CudaBuffer::alloc(0, n * dtype.size_in_bytes()).unwrap();
    let refs: Vec<&CudaBuffer> = bufs.iter().collect();
    run_elementwise(&k, &refs, &mut out, n).unwrap();
    let got = download(dtype, &out);
    let (rtol, atol) = tolerance(e, dtype);
    let mut worst = 0.0f64;
    for i in 0..n {
        let args: Vec<f64> = inputs.iter().map(|v| v[i]).collect();
        let want = round_to(dtype, e.eval_f64(&args));
        let g = got[i];
        if want.is_nan() || g.is_nan() {
            assert!(want.is_nan() && g.is_nan(), "{e} ({dtype}) at {args:?}: got {g}, want {want}");
            continue;
        }
        if want.is_infinite() || g.is_infinite() {
            assert_eq!(g, want, "{e} ({dtype}) at {args:?}");
            continue;
        }
        let err = (g - want).abs();
        let allowed = atol + rtol * want.abs();
        assert!(err <= allowed, "{e} ({dtype}) at {args:?}: got {g}, want {want} (error {err:e} > {allowed:e})");
        if allowed > 0.0 {
            worst = worst.max(err / allowed);
        }
    }
    worst
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn every_op_matches_the_reference_on_gpu() {
    let _g = gpu();
    let n = 10_001; // not a multiple of the vector width: the tail loop runs too
    for (i, (e, ninputs)) in all_exprs().into_iter().enumerate() {
        for dtype in [DType::F32, DType::F64] {
            let worst = check_on_gpu(&e, ninputs, dtype, n, 0x9e37_79b9 + i as u64);
            println!("{dtype:>8} {e:<60} worst error / tolerance = {worst:.3}");
        }
    }
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn half_precision_kernels_match_on_gpu() {
    let _g = gpu();
    let exprs = [
        (Expr::unary(UnaryOp::Relu, x(0)), 1),
        (Expr::unary(UnaryOp::Gelu, x(0)), 1),
        (Expr::unary(UnaryOp::Exp, x(0)), 1),
        (bin(BinaryOp::Add, x(0), x(1)), 2),
        (gelu_chain(), 3),
    ];
    for (e, ninputs) in exprs {
        for dtype in [DType::F16, DType::BF16] {
            check_on_gpu(&e, ninputs, dtype, 4099, 7);
        }
    }
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn mismatched_elementwise_launches_are_errors() {
    let _g = gpu();
    let k = emit_elementwise(&bin(BinaryOp::Add, x(0), x(1)), 2, DType::F32).unwrap();
    let loaded = LoadedElementwise::load(&k, 0).unwrap();
    let a = CudaBuffer::from_slice(0, &[1.0f32; 100]).unwrap();
    let small = CudaBuffer::from_slice(0, &[1.0f32; 10]).unwrap();
    let mut out = CudaBuffer::alloc(0, 400).unwrap();
    let e = loaded.run(&[&a], &mut out, 100).unwrap_err();
    assert!(e.kind == CudaErrorKind::InvalidArgument && e.message.contains("takes 2 input(s), 1 given"), "{e}");
    let e = loaded.run(&[&a, &small], &mut out, 100).unwrap_err();
    assert!(e.message.contains("input 1 holds 40 bytes, 100 elements need 400"), "{e}");
    loaded.run(&[&a, &a], &mut out, 100).unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![2.0f32; 100]);
}

/// The bitwise ops are integer ops: the float-only emitter refuses them instead of emitting a
/// float formula.
#[test]
fn integer_ops_are_refused() {
    for op in [BinaryOp::BitAnd, BinaryOp::BitOr, BinaryOp::BitXor, BinaryOp::BitShl, BinaryOp::BitShr] {
        let e = emit_elementwise(&bin(BinaryOp::Add, bin(op, x(0), x(1)), x(0)), 2, DType::F32).unwrap_err();
        assert!(e.to_string().contains("bitwise ops are integer ops"), "{e}");
    }
    assert!(emit_elementwise(&Expr::unary(UnaryOp::BitNot, x(0)), 1, DType::F64).is_err());
}
