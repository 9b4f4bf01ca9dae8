//! The CUDA reduction and softmax emitter: its text and errors (always), and NVRTC compiling
//! its kernels to CUBIN for sm_80 and sm_90 (skipping with a printed line when NVRTC is absent).
//!
//! What the compile test covers: every (reduction, input dtype) the tensor layer can ask for
//! (`reduce_ops()`: 17 kinds; float-only kinds on 4 dtypes, the others on all 8) with one kept
//! and one reduced dim (the collapsed contiguous case), and every kind on f32, f16 and i32 (the
//! float kinds on f64 for i32) with the other dim counts the index code distinguishes: 0 kept
//! and 0 reduced (a 0-dim input), 0 and 3 (a full reduction of a strided view), 3 and 2 (both
//! decompositions), softmax and cumsum with 0 and 2 kept dims and 0/1 reduced. They go into one NVRTC program
//! per arch (one translation unit holding every `extern "C"` kernel), so the test costs two
//! compiles, not hundreds.

use kiln_codegen::cuda::{emit_reduce, reduce_ops, reduce_program, CudaReduce, CudaReduceKernel, MAX_DIMS};
use kiln_runtime::cuda::{self, CudaErrorKind};
use kiln_runtime::DType;

#[test]
fn shapes_strides_and_group_are_arguments() {
    let k = emit_reduce(CudaReduce::Sum, DType::F32, 2, 1).unwrap();
    let s = &k.source;
    assert_eq!(k.name, "kiln_red_sum_f32_k2_r1");
    assert!(
        s.contains("const float* __restrict__ x, float* __restrict__ out, unsigned long long n_out, unsigned long long n_red, unsigned long long group, unsigned long long param, unsigned long long ks0, unsigned long long ks1, unsigned long long rs0, unsigned long long x_off, unsigned long long xk0, unsigned long long xk1, unsigned long long xr0)"),
        "{s}"
    );
    // f32 sums accumulate in double; the row is strided by the group; the group combines.
    assert!(
        s.contains("a = a + (double)(v);") && s.contains("j += group") && s.contains("kiln_group_reduce(a,"),
        "{s}"
    );
    assert!(s.contains("p += j * xr0;") && s.contains("const unsigned long long c1 = r % ks1;"), "{s}");
    assert!(s.contains("if (lane == 0) out[o] = (float)(r0);"), "{s}");
    // Another shape is the same kernel; another number of dims another one.
    assert_eq!(k, emit_reduce(CudaReduce::Sum, DType::F32, 2, 1).unwrap());
    assert_ne!(k.source, emit_reduce(CudaReduce::Sum, DType::F32, 1, 1).unwrap().source);
}

#[test]
fn accumulators_and_result_dtypes_follow_the_cpu() {
    let i = emit_reduce(CudaReduce::Prod, DType::I32, 1, 1).unwrap();
    assert_eq!(i.out, DType::I64);
    assert!(
        i.source.contains("(long long)((unsigned long long)(a) * (unsigned long long)(v))"),
        "wrapping i64: {}",
        i.source
    );
    let h = emit_reduce(CudaReduce::Mean, DType::BF16, 1, 1).unwrap();
    assert!(
        h.source.contains("float r0;") && h.source.contains("kiln_f32_to_bf16(r0 / (float)n)"),
        "bf16 in f32: {}",
        h.source
    );
    let m = emit_reduce(CudaReduce::Max, DType::F16, 1, 1).unwrap();
    assert!(
        m.source.contains("kiln_pick<true>(a, v)") && m.source.contains("(-__int_as_float(0x7f800000))"),
        "{}",
        m.source
    );
    let a = emit_reduce(CudaReduce::Arg { max: false, values: true }, DType::F64, 1, 1).unwrap();
    assert!(
        a.source.contains("long long* __restrict__ idx")
            && a.source.contains("kiln_pick_arg<false>(a, KilnArg<double>{v, (long long)j})"),
        "{}",
        a.source
    );
    assert_eq!(a.out, DType::F64);
    assert_eq!(emit_reduce(CudaReduce::Arg { max: true, values: false }, DType::U8, 1, 1).unwrap().out, DType::I64);
    assert_eq!(emit_reduce(CudaReduce::Any, DType::U8, 1, 1).unwrap().out, DType::U8);
    assert_eq!(emit_reduce(CudaReduce::All, DType::F32, 1, 1).unwrap().out, DType::Bool);
    let v = emit_reduce(CudaReduce::Var { sqrt: true }, DType::F32, 1, 1).unwrap();
    assert!(
        v.source.contains("const double mean = r0 / (double)n;") && v.source.contains("sqrt(r1 / "),
        "{}",
        v.source
    );
    let l = emit_reduce(CudaReduce::LogSumExp, DType::F32, 1, 1).unwrap();
    assert!(
        l.source.contains("const float shift = (fabsf(r0) == __int_as_float(0x7f800000)) ? 0.0f : r0;"),
        "{}",
        l.source
    );
    let c = emit_reduce(CudaReduce::CumSum, DType::U8, 1, 1).unwrap();
    assert!(
        c.out == DType::I64
            && c.source.contains("acc = (long long)((unsigned long long)(acc) + (unsigned long long)(v));")
            && c.source.contains("out[q] = acc;"),
        "{}",
        c.source
    );
    let sm = emit_reduce(CudaReduce::Softmax { log: true }, DType::F32, 1, 1).unwrap();
    assert!(
        sm.source.contains("unsigned long long o_off, unsigned long long ok0, unsigned long long or0)")
            && sm.source.contains("out[q] = (v - r0) - s;"),
        "{}",
        sm.source
    );
}

#[test]
fn invalid_kernels_are_errors() {
    let e = emit_reduce(CudaReduce::Mean, DType::I64, 1, 1).unwrap_err();
    assert!(e.kind == CudaErrorKind::InvalidArgument && e.message.contains("mean does not take int64 input"), "{e}");
    let e = emit_reduce(CudaReduce::Sum, DType::F32, MAX_DIMS + 1, 1).unwrap_err();
    assert!(e.message.contains("reductions index at most 8"), "{e}");
    let e = emit_reduce(CudaReduce::Softmax { log: false }, DType::F32, 1, 2).unwrap_err();
    assert!(e.message.contains("softmax runs along one dim, not 2"), "{e}");
}

#[test]
fn the_reduction_set_covers_every_kind_and_dtype() {
    let ops = reduce_ops();
    // 4 float-only kinds x 4 float dtypes + 13 other kinds x 8 dtypes (var/std and softmax/
    // log_softmax count twice).
    assert_eq!(ops.len(), 6 * 4 + 11 * 8);
    for k in CudaReduce::ALL {
        assert!(ops.iter().any(|&(o, _)| o == k), "{k:?} is missing");
    }
}

/// The kernels the compile test covers (see the file's comment).
fn covered() -> Vec<CudaReduceKernel> {
    let mut v: Vec<CudaReduceKernel> =
        reduce_ops().into_iter().map(|(k, d)| emit_reduce(k, d, 1, 1).unwrap()).collect();
    for k in CudaReduce::ALL {
        let dims: &[(usize, usize)] =
            if k.keeps_shape() { &[(0, 0), (2, 0), (2, 1)] } else { &[(0, 0), (0, 3), (3, 2)] };
        for d in [DType::F32, DType::F16, DType::I32] {
            let d = if k.accepts(d) { d } else { DType::F64 };
            for &(kept, red) in dims {
                if !v.iter().any(|x| (x.kind, x.dtype, x.kept, x.red) == (k, d, kept, red)) {
                    v.push(emit_reduce(k, d, kept, red).unwrap());
                }
            }
        }
    }
    v
}

#[test]
fn reduction_kernels_compile_to_cubin_for_sm80_and_sm90() {
    if !cuda::nvrtc_for_tests("reduction_kernels_compile_to_cubin_for_sm80_and_sm90") {
        return;
    }
    let kernels = covered();
    let program = reduce_program(&kernels);
    std::thread::scope(|s| {
        for arch in [80, 90] {
            let program = &program;
            s.spawn(move || {
                let c = cuda::compile(program, "kiln_reduce_all", arch).unwrap_or_else(|e| panic!("sm_{arch}: {e}"));
                assert_eq!(&c.cubin[..4], b"\x7fELF", "sm_{arch}: not a CUBIN");
            });
        }
    });
    // Each kernel alone is a complete program too (what the tensor layer compiles).
    let one = &kernels[0];
    cuda::compile(&one.source, &one.name, 90).unwrap_or_else(|e| panic!("{}: {e}", one.name));
    println!("{} reduction kernels compiled to CUBIN in one program per arch", kernels.len());
}
