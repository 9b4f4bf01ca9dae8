//! The CUDA indexing emitter (gather/index_select, scatter, scatter_add along one dim, atomic
//! and deterministic: the line kernels storing and adding) and the device bounds check of
//! index values: their text and errors (always), and NVRTC compiling
//! every (kind, dtype) kernel for 0, 1 and 3 dims and the bounds check for 0 to 8 dims to
//! CUBIN for sm_80 and sm_90 (skipping with a printed line when NVRTC is absent). With a GPU:
//! the bounds check's flag over contiguous and strided views, at both edges of the range.

use kiln_codegen::cuda::{emit_bounds, emit_index, index_ops, IndexKind, LoadedBounds, StridedOperand, MAX_DIMS};
use kiln_runtime::cuda::{self, CudaBuffer, CudaErrorKind};
use kiln_runtime::DType;

#[test]
fn the_index_adds_its_stride_to_the_target() {
    let k = emit_index(IndexKind::Gather, DType::F32, 2).unwrap();
    let s = &k.source;
    assert!(k.name.starts_with("kiln_idx_gather_f32_"), "{}", k.name);
    assert!(
        s.contains("const float* __restrict__ t, const long long* __restrict__ idx, float* __restrict__ v, unsigned long long n, unsigned long long size0, unsigned long long size1, unsigned long long pt_off, unsigned long long pt_st0, unsigned long long pt_st1, unsigned long long pi_off,"),
        "{s}"
    );
    assert!(
        s.contains("unsigned long long pv_st1, unsigned long long dim_size, unsigned long long dim_stride)"),
        "{s}"
    );
    assert!(
        s.contains("const long long k = idx[pi];")
            && s.contains("const unsigned long long at = pt + (unsigned long long)k * dim_stride;"),
        "{s}"
    );
    // Out-of-range values never reach memory: a gather writes 0 there.
    assert!(s.contains("if (k < 0LL || (unsigned long long)k >= dim_size) { v[pv] = (float)0; continue; }"), "{s}");
    assert!(s.contains("v[pv] = t[at];"), "{s}");
    // Another shape, view or indexed dim is the same kernel.
    assert_eq!(k, emit_index(IndexKind::Gather, DType::F32, 2).unwrap());
    assert_ne!(k.name, emit_index(IndexKind::Gather, DType::F32, 1).unwrap().name);
}

#[test]
fn scatters_write_the_target_and_skip_bad_indices() {
    let k = emit_index(IndexKind::Scatter, DType::I32, 1).unwrap();
    let s = &k.source;
    assert!(s.contains("int* __restrict__ t, const long long* __restrict__ idx, const int* __restrict__ v,"), "{s}");
    assert!(s.contains("(unsigned long long)k >= dim_size) { continue; }") && s.contains("t[at] = v[pv];"), "{s}");
}

#[test]
fn scatter_add_is_atomic_in_every_dtype() {
    let src = |d| emit_index(IndexKind::ScatterAdd, d, 1).unwrap().source;
    assert!(src(DType::F32).contains("atomicAdd(&t[at], v[pv]);"));
    assert!(src(DType::F64).contains("atomicAdd(&t[at], v[pv]);"));
    assert!(src(DType::I32).contains("atomicAdd(&t[at], v[pv]);"));
    assert!(src(DType::I64).contains("atomicAdd((unsigned long long*)&t[at], (unsigned long long)v[pv]);"));
    // No `__restrict__` on a target the word-wide CAS of a neighbour may touch.
    assert!(src(DType::F32).contains("(float* t, const long long* __restrict__ idx"));
    let h = src(DType::F16);
    assert!(
        h.contains("kiln_atomic_add(&t[at], v[pv]);")
            && h.contains("atomicCAS(w, seen, (seen & ~(0xffffu << shift)) | (s << shift))"),
        "{h}"
    );
    assert!(
        h.contains("kiln_f64_to_f16((double)kiln_f16_to_f32(a) + (double)kiln_f16_to_f32(b))"),
        "one rounding, as the CPU: {h}"
    );
    assert!(src(DType::BF16).contains("kiln_f64_to_bf16((double)kiln_bf16_to_f32(a) + (double)kiln_bf16_to_f32(b))"));
    let u = src(DType::U8);
    assert!(u.contains("(unsigned char)(a + b)") && u.contains("0xffu << shift"), "wrapping byte add: {u}");
    assert!(src(DType::Bool).contains("(unsigned char)((a | b) != 0)"), "bool adds as or");
}

#[test]
fn deterministic_scatter_add_walks_each_line_in_order_without_atomics() {
    let src = |d| emit_index(IndexKind::ScatterAddLines, d, 2).unwrap().source;
    let f = src(DType::F32);
    assert!(emit_index(IndexKind::ScatterAddLines, DType::F32, 2)
        .unwrap()
        .name
        .starts_with("kiln_idx_scatter_add_lines_f32_"));
    // The line's three words follow dim_stride; each thread owns its target elements.
    assert!(
        f.contains("float* __restrict__ t, const long long* __restrict__ idx, const float* __restrict__ v,"),
        "{f}"
    );
    assert!(f.contains("unsigned long long dim_stride, unsigned long long line_len, unsigned long long line_pi, unsigned long long line_pv)"), "{f}");
    assert!(f.contains("for (unsigned long long j = 0; j < line_len; ++j) {"), "{f}");
    assert!(f.contains("const long long k = idx[pi + j * line_pi];"), "{f}");
    assert!(f.contains("if (k < 0LL || (unsigned long long)k >= dim_size) { continue; }"), "bad indices skipped: {f}");
    assert!(f.contains("const float a = t[at]; const float b = v[pv + j * line_pv]; t[at] = a + b;"), "{f}");
    // The CPU's sums: f16/bf16 rounded once through double, integers wrapping, bool as or.
    let h = src(DType::F16);
    assert!(h.contains("t[at] = kiln_f64_to_f16((double)kiln_f16_to_f32(a) + (double)kiln_f16_to_f32(b));"), "{h}");
    assert!(src(DType::BF16)
        .contains("t[at] = kiln_f64_to_bf16((double)kiln_bf16_to_f32(a) + (double)kiln_bf16_to_f32(b));"));
    assert!(src(DType::I32).contains("t[at] = (int)((unsigned int)a + (unsigned int)b);"));
    assert!(src(DType::I64).contains("t[at] = (long long)((unsigned long long)a + (unsigned long long)b);"));
    assert!(src(DType::U8).contains("t[at] = (unsigned char)(a + b);"));
    assert!(src(DType::Bool).contains("t[at] = (unsigned char)((a | b) != 0);"));
    for d in DType::ALL {
        let s = src(d);
        assert!(!s.contains("atomic"), "{d:?}: no atomics in the deterministic kernel: {s}");
    }
    assert_ne!(f, emit_index(IndexKind::ScatterAdd, DType::F32, 2).unwrap().source);
}

#[test]
fn deterministic_scatter_stores_along_each_line_in_order_without_atomics() {
    let src = |d, nd| emit_index(IndexKind::ScatterLines, d, nd).unwrap().source;
    let k = emit_index(IndexKind::ScatterLines, DType::F16, 2).unwrap();
    assert!(k.name.starts_with("kiln_idx_scatter_lines_f16_"), "{}", k.name);
    let f = src(DType::F32, 2);
    assert!(
        f.contains("float* __restrict__ t, const long long* __restrict__ idx, const float* __restrict__ v,"),
        "{f}"
    );
    assert!(f.contains("unsigned long long dim_stride, unsigned long long line_len, unsigned long long line_pi, unsigned long long line_pv)"), "{f}");
    // Each thread walks its line in order and stores: the last write of a repeated index wins.
    assert!(f.contains("for (unsigned long long j = 0; j < line_len; ++j) {"), "{f}");
    assert!(f.contains("const long long k = idx[pi + j * line_pi];"), "{f}");
    assert!(f.contains("if (k < 0LL || (unsigned long long)k >= dim_size) { continue; }"), "bad indices skipped: {f}");
    assert!(f.contains("t[at] = v[pv + j * line_pv];"), "{f}");
    for d in DType::ALL {
        for nd in [0, 1, 3] {
            let s = src(d, nd);
            assert!(!s.contains("atomic"), "{d:?}, {nd} dims: no atomics in the deterministic kernel: {s}");
            assert!(s.contains("t[at] = v[pv + j * line_pv];"), "{d:?}: a plain store: {s}");
        }
    }
    // The storing and adding line kernels differ only in their statement.
    let add = emit_index(IndexKind::ScatterAddLines, DType::F32, 2).unwrap().source;
    assert_ne!(f, add);
    assert_eq!(f.lines().count(), add.lines().count());
}

#[test]
fn scatter_kinds_by_accumulation_and_order() {
    assert_eq!(IndexKind::scatter(false, false), IndexKind::Scatter);
    assert_eq!(IndexKind::scatter(true, false), IndexKind::ScatterAdd);
    assert_eq!(IndexKind::scatter(false, true), IndexKind::ScatterLines);
    assert_eq!(IndexKind::scatter(true, true), IndexKind::ScatterAddLines);
    let lines: Vec<IndexKind> = IndexKind::ALL.into_iter().filter(|k| k.walks_lines()).collect();
    assert_eq!(lines, [IndexKind::ScatterLines, IndexKind::ScatterAddLines]);
    assert!(IndexKind::ALL.iter().all(|k| k.line_words() == if k.walks_lines() { 3 } else { 0 }));
    assert!(IndexKind::ALL.iter().all(|&k| k.writes_target() == (k != IndexKind::Gather)));
}

#[test]
fn too_many_dims_is_an_error() {
    let e = emit_index(IndexKind::Gather, DType::F32, MAX_DIMS + 1).unwrap_err();
    assert_eq!(e.kind, CudaErrorKind::InvalidArgument);
    assert!(e.message.contains("indexing kernels index at most 8"), "{e}");
    assert!(emit_index(IndexKind::ScatterAdd, DType::Bool, MAX_DIMS).is_ok());
}

#[test]
fn the_index_op_set_covers_every_kind_and_dtype() {
    let ops = index_ops();
    assert_eq!(ops.len(), 5 * 8);
    assert!(ops.contains(&(IndexKind::ScatterAdd, DType::BF16)) && ops.contains(&(IndexKind::Gather, DType::Bool)));
    assert!(
        ops.contains(&(IndexKind::ScatterAddLines, DType::F16))
            && ops.contains(&(IndexKind::ScatterAddLines, DType::Bool))
    );
    assert!(
        ops.contains(&(IndexKind::ScatterLines, DType::F16)) && ops.contains(&(IndexKind::ScatterLines, DType::BF16))
    );
}

#[test]
fn every_index_kernel_compiles_to_cubin_for_sm80_and_sm90() {
    if !cuda::nvrtc_for_tests("every_index_kernel_compiles_to_cubin_for_sm80_and_sm90") {
        return;
    }
    // Zero dims: one element (every dim collapsed away); one: contiguous; three: strided views.
    let kernels: Vec<_> = [0, 1, 3]
        .into_iter()
        .flat_map(|nd| index_ops().into_iter().map(move |(k, d)| emit_index(k, d, nd).unwrap()))
        .collect();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        for chunk in kernels.chunks(kernels.len().div_ceil(threads)) {
            s.spawn(move || {
                for k in chunk {
                    for arch in [80, 90] {
                        let c = cuda::compile(&k.source, &k.name, arch)
                            .unwrap_or_else(|e| panic!("{} (sm_{arch}): {e}\n{}", k.name, k.source));
                        assert_eq!(&c.cubin[..4], b"\x7fELF", "{}: not a CUBIN", k.name);
                    }
                }
            });
        }
    });
    println!("{} indexing kernels compiled to CUBIN", kernels.len() * 2);
}

#[test]
fn the_bounds_check_raises_one_flag_word() {
    let k = emit_bounds(2).unwrap();
    let s = &k.source;
    assert!(k.name.starts_with("kiln_idx_bounds_2d_"), "{}", k.name);
    assert!(
        s.contains("(const long long* __restrict__ idx, unsigned int* __restrict__ flag, unsigned long long n, unsigned long long size0, unsigned long long size1, unsigned long long pi_off, unsigned long long pi_st0, unsigned long long pi_st1, unsigned long long lo, unsigned long long hi)"),
        "{s}"
    );
    assert!(
        s.contains("const long long k = idx[pi];")
            && s.contains("if (k < (long long)lo || k >= (long long)hi) *flag = 1u;"),
        "{s}"
    );
    assert_ne!(k.name, emit_bounds(1).unwrap().name);
    let e = emit_bounds(MAX_DIMS + 1).unwrap_err();
    assert_eq!(e.kind, CudaErrorKind::InvalidArgument);
    assert!(e.message.contains("the bounds check indexes at most 8"), "{e}");
}

#[test]
fn every_bounds_check_compiles_to_cubin_for_sm80_and_sm90() {
    if !cuda::nvrtc_for_tests("every_bounds_check_compiles_to_cubin_for_sm80_and_sm90") {
        return;
    }
    for nd in 0..=MAX_DIMS {
        let k = emit_bounds(nd).unwrap();
        for arch in [80, 90] {
            let c = cuda::compile(&k.source, &k.name, arch)
                .unwrap_or_else(|e| panic!("{} (sm_{arch}): {e}\n{}", k.name, k.source));
            assert_eq!(&c.cubin[..4], b"\x7fELF", "{}: not a CUBIN", k.name);
        }
    }
    println!("{} bounds-check kernels compiled to CUBIN", 2 * (MAX_DIMS + 1));
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn the_bounds_flag_is_raised_by_any_value_outside_the_range_on_a_gpu() {
    // 3 x 1000 values in -5..5 (the edges included); a bad value placed at one position.
    let mut values: Vec<i64> = (0..3000).map(|i| (i % 10) - 5).collect();
    let one = LoadedBounds::load(&emit_bounds(1).unwrap(), 0).unwrap();
    let two = LoadedBounds::load(&emit_bounds(2).unwrap(), 0).unwrap();
    let check = |values: &[i64], lo: i64, hi: i64| {
        let buf = CudaBuffer::from_slice(0, values).unwrap();
        let flat =
            one.all_within((&buf, StridedOperand { offset: 0, strides: &[1] }), &[values.len()], lo, hi).unwrap();
        // The transposed view [1000, 3] (strides 1, 1000) of the same values.
        let strided =
            two.all_within((&buf, StridedOperand { offset: 0, strides: &[1, 1000] }), &[1000, 3], lo, hi).unwrap();
        assert_eq!(flat, strided, "[{lo}, {hi})");
        flat
    };
    assert!(check(&values, -5, 5));
    assert!(!check(&values, -4, 5), "-5 is below -4");
    assert!(!check(&values, -5, 4), "4 is not below 4");
    assert!(check(&values, i64::MIN, i64::MAX));
    values[2999] = 5;
    assert!(!check(&values, -5, 5), "the last value");
    values[2999] = -5;
    values[1234] = i64::MIN;
    assert!(!check(&values, -5, 5), "i64::MIN");
    // An offset view that skips the bad value, and an empty view.
    let buf = CudaBuffer::from_slice(0, &values).unwrap();
    assert!(one.all_within((&buf, StridedOperand { offset: 1235, strides: &[1] }), &[1765], -5, 5).unwrap());
    assert!(one.all_within((&buf, StridedOperand { offset: 0, strides: &[1] }), &[0], 0, 0).unwrap());
    // A view past the buffer is refused before any launch.
    let e = one.all_within((&buf, StridedOperand { offset: 1, strides: &[1] }), &[3000], -5, 5).unwrap_err();
    assert_eq!(e.kind, CudaErrorKind::InvalidArgument, "{e}");
}
