//! The CUDA scan emitter (`cumprod`, `cummax`/`cummin`, `logcumsumexp` along one dim): its
//! text, result dtypes and errors (always), and NVRTC compiling every (kind, dtype) kernel to
//! CUBIN for sm_80 and sm_90 (skipping with a printed line when NVRTC is absent; a failure
//! under `KILN_REQUIRE_NVRTC=1`). Their results against the CPU run on a GPU in
//! `tests/cuda_scan.rs`.

use kiln_codegen::cuda::{emit_scan, scan_ops, ScanKind, SCAN_WORDS};
use kiln_runtime::cuda::CudaErrorKind;
use kiln_runtime::DType;

mod common;

#[test]
fn kernels_take_buffers_lines_and_the_geometry() {
    let k = emit_scan(ScanKind::CumMax, DType::F32).unwrap();
    let s = &k.source;
    assert!(k.name.starts_with("kiln_scan_cummax_f32_"), "{}", k.name);
    assert!(
        s.contains("(const float* __restrict__ x, float* __restrict__ out, long long* __restrict__ idx, unsigned long long n, unsigned long long len_, unsigned long long inner_)"),
        "{s}"
    );
    assert_eq!(SCAN_WORDS, ["len", "inner"]);
    // Line `i` of `[outer, len, inner]`: its elements `inner` apart, walked in order.
    assert!(s.contains("const unsigned long long base = (i / inner) * len * inner + i % inner;"), "{s}");
    assert!(s.contains("const unsigned long long p = base + (unsigned long long)(j * inner);"), "{s}");
    let p = emit_scan(ScanKind::CumProd, DType::F32).unwrap().source;
    assert!(p.contains("float* __restrict__ out, unsigned long long n,"), "no index buffer: {p}");
    // Another dtype is another kernel; the same one is the same text.
    assert_eq!(k, emit_scan(ScanKind::CumMax, DType::F32).unwrap());
    assert_ne!(k.name, emit_scan(ScanKind::CumMax, DType::F64).unwrap().name);
}

#[test]
fn arithmetic_follows_the_cpu() {
    // Floats multiply in double (f16 too), rounded once per element.
    let f = emit_scan(ScanKind::CumProd, DType::F32).unwrap().source;
    assert!(f.contains("double acc = 1.0;") && f.contains("acc = acc * (double)(x[p]);"), "{f}");
    assert!(f.contains("out[p] = (float)(acc);"), "{f}");
    let h = emit_scan(ScanKind::CumProd, DType::F16).unwrap().source;
    assert!(h.contains("(double)(kiln_f16_to_f32(x[p]))") && h.contains("out[p] = kiln_f64_to_f16(acc);"), "{h}");
    // Integers and bool wrap in i64, and give i64.
    let i = emit_scan(ScanKind::CumProd, DType::I32).unwrap();
    assert_eq!(i.out, DType::I64);
    assert!(
        i.source.contains("acc = (long long)((unsigned long long)(acc) * (unsigned long long)((long long)(x[p])));"),
        "{}",
        i.source
    );
    assert_eq!(emit_scan(ScanKind::CumProd, DType::Bool).unwrap().out, DType::I64);
    // cummax: the last index among ties, NaN from the first NaN on (the latest NaN's index),
    // the element's own bits copied; bf16 compares as float.
    let m = emit_scan(ScanKind::CumMax, DType::BF16).unwrap();
    assert_eq!(m.out, DType::BF16);
    let s = &m.source;
    assert!(s.contains("if (j == 0 || v != v || (best == best && v >= best)) {"), "{s}");
    assert!(s.contains("const float v = kiln_bf16_to_f32(x[p]);") && s.contains("best_bits = x[p];"), "{s}");
    assert!(s.contains("out[p] = best_bits;") && s.contains("idx[p] = index;"), "{s}");
    let n = emit_scan(ScanKind::CumMin, DType::U8).unwrap().source;
    assert!(n.contains("v <= best") && n.contains("const long long v = (long long)(x[p]);"), "{n}");
    // logcumsumexp adds in double through PyTorch's helper.
    let l = emit_scan(ScanKind::LogCumSumExp, DType::F32).unwrap().source;
    assert!(l.contains("__device__ __forceinline__ double kiln_log_add_exp(double a, double b)"), "{l}");
    assert!(l.contains("double acc = (-__longlong_as_double(0x7ff0000000000000LL));"), "{l}");
    assert!(l.contains("acc = kiln_log_add_exp((double)(x[p]), acc);"), "{l}");
    assert!(!f.contains("kiln_log_add_exp"), "only logcumsumexp carries the helper");
}

#[test]
fn integer_logcumsumexp_is_an_error_and_the_set_covers_every_kind() {
    for d in [DType::I64, DType::Bool] {
        let e = emit_scan(ScanKind::LogCumSumExp, d).unwrap_err();
        assert_eq!(e.kind, CudaErrorKind::InvalidArgument);
        assert!(e.message.contains(&format!("logcumsumexp does not take {d} input")), "{e}");
    }
    let ops = scan_ops();
    // cumprod, cummax and cummin on all 8 dtypes; logcumsumexp on the 4 float dtypes.
    assert_eq!(ops.len(), 3 * 8 + 4);
    for k in ScanKind::ALL {
        assert!(ops.iter().any(|&(o, _)| o == k), "{k:?} is missing");
        assert!(ops.iter().all(|&(o, d)| o != k || k.accepts(d)));
    }
}

#[test]
fn every_scan_kernel_compiles_to_cubin_for_sm80_and_sm90() {
    let kernels: Vec<(String, String)> = scan_ops()
        .into_iter()
        .map(|(kind, dtype)| {
            let k = emit_scan(kind, dtype).unwrap();
            (k.name, k.source)
        })
        .collect();
    common::compile_each_to_cubin("scan", &kernels);
}
