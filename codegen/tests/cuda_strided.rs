//! The strided CUDA emitter behind eager CUDA ops: its text and errors (always), and NVRTC
//! compiling every eager op's kernel (every unary/binary/compare/logical op × dtype, `where`,
//! every cast, contiguous and strided) to CUBIN for sm_80 and sm_90 (skipping with a printed line
//! when NVRTC is absent).

use kiln_codegen::cuda::{eager_kernel, eager_ops, emit_strided, every_eager_kernel, EagerOp, MAX_DIMS};
use kiln_codegen::Expr;
use kiln_runtime::cuda::{self, CudaErrorKind};
use kiln_runtime::op_kind::{BinaryOp, CmpOp, LogicalOp, UnaryOp};
use kiln_runtime::DType;

#[test]
fn shapes_and_strides_are_arguments() {
    let k = eager_kernel(EagerOp::Binary(BinaryOp::Add), DType::F32, DType::F32, 2).unwrap();
    let s = &k.source;
    assert!(s.contains("const float* __restrict__ in0, const float* __restrict__ in1, float* __restrict__ out, unsigned long long n, unsigned long long size0, unsigned long long size1, unsigned long long p0_off, unsigned long long p0_st0, unsigned long long p0_st1,"), "{s}");
    assert!(s.contains("const unsigned long long c = r % size1;") && s.contains("po += c * po_st1;"), "{s}");
    assert!(s.contains("out[po] = kiln_body(in0[p0], in1[p1]);"), "{s}");
    // Another shape, view or offset is the same kernel: nothing of them is in the source.
    assert_eq!(k, eager_kernel(EagerOp::Binary(BinaryOp::Add), DType::F32, DType::F32, 2).unwrap());
    assert_ne!(k.name, eager_kernel(EagerOp::Binary(BinaryOp::Add), DType::F32, DType::F32, 1).unwrap().name);
    let scalar = eager_kernel(EagerOp::Copy, DType::F64, DType::F64, 0).unwrap();
    assert!(
        !scalar.source.contains("size0") && scalar.source.contains("unsigned long long po = po_off;"),
        "{}",
        scalar.source
    );
}

#[test]
fn integer_kernels_compute_in_i64_and_wrap() {
    let k = eager_kernel(EagerOp::Binary(BinaryOp::Mul), DType::I32, DType::I32, 1).unwrap();
    assert!(k.source.contains("(long long)((unsigned long long)x0 * (unsigned long long)x1)"), "{}", k.source);
    assert!(
        k.source.contains("out[po] = (int)(kiln_body((long long)(in0[p0]), (long long)(in1[p1])));"),
        "{}",
        k.source
    );
    let k = eager_kernel(EagerOp::Binary(BinaryOp::Rem), DType::I64, DType::I64, 1).unwrap();
    assert!(k.source.contains("kiln_rem_i64(long long a, long long b)"), "{}", k.source);
    let k = eager_kernel(EagerOp::Binary(BinaryOp::BitShr), DType::U8, DType::U8, 1).unwrap();
    assert!(k.source.contains("x0 >> ((x1 >= 0LL && x1 < 64LL) ? x1 : 63LL)"), "{}", k.source);
    let k = eager_kernel(EagerOp::Unary(UnaryOp::BitNot), DType::Bool, DType::Bool, 1).unwrap();
    assert!(k.source.contains("(unsigned char)((kiln_body((long long)(in0[p0]))) != 0LL)"), "{}", k.source);
}

#[test]
fn logical_ops_test_truth_with_comparisons() {
    // On the truth of each operand (non-zero is true): `where` and `!=`, so any compute type.
    let and = eager_kernel(EagerOp::Logical(LogicalOp::And), DType::Bool, DType::Bool, 1).unwrap().source;
    assert!(
        and.contains("const long long t0 = (x1 != 0LL) ? 1LL : 0LL;")
            && and.contains("const long long t1 = (x0 != 0LL) ? t0 : 0LL;"),
        "{and}"
    );
    assert!(
        and.contains("out[po] = (unsigned char)((kiln_body((long long)(in0[p0]), (long long)(in1[p1]))) != 0LL);"),
        "{and}"
    );
    let or = eager_kernel(EagerOp::Logical(LogicalOp::Or), DType::Bool, DType::Bool, 1).unwrap().source;
    assert!(or.contains("(x0 != 0LL) ? 1LL : t0"), "{or}");
    let xor = eager_kernel(EagerOp::Logical(LogicalOp::Xor), DType::Bool, DType::Bool, 1).unwrap().source;
    assert!(xor.contains("(t0 != t1) ? 1LL : 0LL"), "{xor}");
    // Not reads the input's own dtype: NaN is true (NaN == 0 is false), -0.0 false.
    let not = eager_kernel(EagerOp::Not, DType::F16, DType::Bool, 1).unwrap().source;
    assert!(not.contains("(x0 == 0.0f) ? 1.0f : 0.0f") && not.contains("kiln_f16_to_f32(in0[p0])"), "{not}");
}

#[test]
fn casts_follow_the_cpu_rules() {
    let store = |from, to| {
        let s = eager_kernel(EagerOp::Copy, from, to, 1).unwrap().source;
        s.lines().find(|l| l.contains("out[po] =")).unwrap().trim().to_string()
    };
    assert_eq!(store(DType::F32, DType::I32), "out[po] = (int)(long long)(kiln_body(in0[p0]));");
    assert_eq!(
        store(DType::F16, DType::U8),
        "out[po] = (unsigned char)(long long)(kiln_body(kiln_f16_to_f32(in0[p0])));"
    );
    assert_eq!(store(DType::I64, DType::F32), "out[po] = (float)(kiln_body(in0[p0]));");
    assert_eq!(store(DType::I64, DType::BF16), "out[po] = kiln_f64_to_bf16((double)(kiln_body(in0[p0])));");
    assert_eq!(store(DType::F64, DType::Bool), "out[po] = (unsigned char)((kiln_body(in0[p0])) != 0.0);");
    assert_eq!(store(DType::Bool, DType::F64), "out[po] = (double)(kiln_body((long long)(in0[p0])));");
    let k = eager_kernel(EagerOp::Cmp(CmpOp::Lt), DType::BF16, DType::Bool, 1).unwrap();
    assert!(
        k.source.contains("(x0 < x1) ? 1.0f : 0.0f") && k.source.contains("kiln_bf16_to_f32(in1[p1])"),
        "{}",
        k.source
    );
}

#[test]
fn invalid_kernels_are_errors() {
    let e = eager_kernel(EagerOp::Unary(UnaryOp::Exp), DType::I64, DType::I64, 1).unwrap_err();
    assert_eq!(e.kind, CudaErrorKind::InvalidArgument);
    assert!(e.to_string().starts_with("cuda_codegen: exp cannot be computed in long long"), "{e}");
    let e = eager_kernel(EagerOp::Binary(BinaryOp::BitAnd), DType::F32, DType::F32, 1).unwrap_err();
    assert!(e.message.contains("a bitwise op cannot be computed in float"), "{e}");
    let e = eager_kernel(EagerOp::Binary(BinaryOp::Div), DType::I32, DType::I32, 1).unwrap_err();
    assert!(e.message.contains("div cannot be computed in long long"), "{e}");
    let e = emit_strided(&Expr::Input(2), &[DType::F32], DType::F32, DType::F32, 1).unwrap_err();
    assert!(e.message.contains("reads input 2 but the kernel has 1 input(s)"), "{e}");
    assert!(eager_kernel(EagerOp::Copy, DType::F32, DType::F32, MAX_DIMS + 1).is_err());
}

#[test]
fn the_eager_op_set_covers_every_op_and_dtype() {
    let ops = eager_ops();
    // Float dtypes: the float unary and binary ops of the tables; integer and bool dtypes: the
    // ops that keep integer dtypes; each dtype: 6 comparisons, logical not, where, 8 casts;
    // Bool: 3 logical ops.
    let float_unary = UnaryOp::ALL.iter().filter(|op| !op.is_int_only()).count();
    let int_unary = UnaryOp::ALL.iter().filter(|op| op.keeps_int_dtype()).count();
    let float_binary = BinaryOp::ALL.iter().filter(|op| !op.is_bitwise()).count();
    let int_binary = BinaryOp::ALL.iter().filter(|op| op.keeps_int_dtype()).count();
    assert_eq!(ops.len(), 4 * (float_unary + float_binary) + 4 * (int_unary + int_binary) + 8 * (6 + 1 + 1 + 8) + 3);
    assert!(ops.contains(&(EagerOp::Binary(BinaryOp::BitXor), DType::Bool, DType::Bool)));
    assert!(ops.contains(&(EagerOp::Logical(LogicalOp::Xor), DType::Bool, DType::Bool)));
    assert!(
        ops.contains(&(EagerOp::Not, DType::F16, DType::Bool))
            && ops.contains(&(EagerOp::Not, DType::I32, DType::Bool))
    );
    assert!(ops.contains(&(EagerOp::Copy, DType::BF16, DType::I32)));
    assert!(!ops.contains(&(EagerOp::Unary(UnaryOp::Sqrt), DType::I64, DType::I64)));
}

#[test]
fn every_eager_kernel_compiles_to_cubin_for_sm80_and_sm90() {
    if !cuda::nvrtc_for_tests("every_eager_kernel_compiles_to_cubin_for_sm80_and_sm90") {
        return;
    }
    // One dim: a contiguous (collapsed) operand set; three dims: strided and broadcast views.
    let kernels: Vec<_> = [1, 3].into_iter().flat_map(|ndim| every_eager_kernel(ndim).unwrap()).collect();
    let compiled = std::sync::atomic::AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        for chunk in kernels.chunks(kernels.len().div_ceil(threads)) {
            let compiled = &compiled;
            s.spawn(move || {
                for k in chunk {
                    for arch in [80, 90] {
                        let c = cuda::compile(&k.source, &k.name, arch)
                            .unwrap_or_else(|e| panic!("{} (sm_{arch}): {e}\n{}", k.name, k.source));
                        assert_eq!(&c.cubin[..4], b"\x7fELF", "{}: not a CUBIN", k.name);
                        compiled.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
    });
    assert_eq!(compiled.into_inner(), eager_ops().len() * 2 * 2);
    println!("{} strided kernels compiled to CUBIN", kernels.len() * 2);
}
