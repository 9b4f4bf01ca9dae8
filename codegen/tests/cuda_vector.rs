//! The eager kernels' contiguous fast path (`kiln_codegen::cuda::vector`): the launch
//! decision (always: contiguity, broadcast inputs, alignment of every buffer's first element,
//! one collapsed dim, at least one vector), the kernels' text, NVRTC compiling a
//! representative set to CUBIN for sm_80 and sm_90 (skipping without NVRTC), and, on a GPU,
//! vector results equal to the strided kernel's bit for bit, with misaligned launches refused.

mod common;

use kiln_codegen::cuda::{
    eager_kernel, eager_ops, eager_vector_kernel, vector_launch, vector_width, EagerOp, LoadedStrided, LoadedVector,
    StridedOperand, VectorOperand,
};
use kiln_runtime::cuda::{CudaBuffer, CudaErrorKind};
use kiln_runtime::op_kind::{BinaryOp, CmpOp, UnaryOp};
use kiln_runtime::DType;

/// An operand of the decision at `address` + `offset` elements with `strides`.
fn operand(dtype: DType, strides: &[usize], offset: usize, address: u64) -> VectorOperand<'_> {
    VectorOperand { dtype, strides, offset, address }
}

#[test]
fn the_launch_decision_needs_contiguous_aligned_operands() {
    let base = 0x7f00_0000_0000u64; // allocations are 256-byte aligned
    let f32s = |offset, strides| operand(DType::F32, strides, offset, base);
    // Contiguous and aligned: the vector path, no broadcast input.
    assert_eq!(vector_launch(&[1000], &[f32s(0, &[1]), f32s(0, &[1]), f32s(0, &[1])]), Some(vec![false, false]));
    // A broadcast 0-dim value (stride 0) is loaded once per thread, at any offset.
    assert_eq!(vector_launch(&[1000], &[f32s(0, &[1]), f32s(3, &[0]), f32s(4, &[1])]), Some(vec![false, true]));
    // A view starting off a 16-byte boundary (offset 2 f32s), in an input or the output.
    assert_eq!(vector_launch(&[1000], &[f32s(2, &[1]), f32s(0, &[1])]), None);
    assert_eq!(vector_launch(&[1000], &[f32s(0, &[1]), f32s(6, &[1])]), None);
    // A buffer at an address off the boundary.
    assert_eq!(vector_launch(&[1000], &[operand(DType::F32, &[1], 0, base + 8), f32s(0, &[1])]), None);
    // Strided, or more than one collapsed dim, or fewer elements than one vector.
    assert_eq!(vector_launch(&[1000], &[f32s(0, &[2]), f32s(0, &[1])]), None);
    assert_eq!(vector_launch(&[10, 100], &[f32s(0, &[100, 1]), f32s(0, &[100, 1])]), None);
    assert_eq!(vector_launch(&[3], &[f32s(0, &[1]), f32s(0, &[1])]), None);
    assert_eq!(vector_launch(&[], &[f32s(0, &[]), f32s(0, &[])]), None);
    // Mixed dtypes: the widest sets the width (f64: 2 elements), so a u8 input needs only
    // 2-byte alignment and an f32 output 8-byte alignment.
    assert_eq!(vector_width(&[DType::U8, DType::F64]), 2);
    assert_eq!(vector_width(&[DType::F16, DType::Bool]), 8);
    let mixed = |u8_offset, out_offset| {
        vector_launch(
            &[64],
            &[operand(DType::U8, &[1], u8_offset, base), operand(DType::F64, &[1], 0, base), f32s(out_offset, &[1])],
        )
    };
    assert_eq!(mixed(2, 2), Some(vec![false, false]));
    assert_eq!(mixed(1, 0), None);
    assert_eq!(mixed(0, 1), None);
}

#[test]
fn vector_kernels_move_sixteen_bytes_per_access() {
    let k = eager_vector_kernel(EagerOp::Binary(BinaryOp::Add), DType::F32, DType::F32, &[false, true]).unwrap();
    let s = &k.source;
    assert_eq!(k.width, 4);
    assert!(k.name.starts_with("kiln_vew_f32_"), "{}", k.name);
    assert!(s.contains("struct __align__(16) kiln_v4_f32 { float e[4]; };"), "{s}");
    assert!(
        s.contains("const kiln_v4_f32 a0 = *reinterpret_cast<const kiln_v4_f32*>(in0 + p0_off + v * 4ULL);"),
        "{s}"
    );
    // The broadcast input is one value per thread; the tail is a scalar loop.
    assert!(s.contains("const float b1 = in1[p1_off];") && !s.contains("a1 ="), "{s}");
    assert!(s.contains("*reinterpret_cast<kiln_v4_f32*>(out + po_off + v * 4ULL) = r;"), "{s}");
    assert!(
        s.contains("for (unsigned long long i = nv * 4ULL + tid; i < n; i += stride)")
            && s.contains("out[po_off + i] = kiln_body(in0[p0_off + i], b1);"),
        "{s}"
    );
    // A cast f16 -> bool: eight elements per access, 16 bytes in and 8 bytes out.
    let k = eager_vector_kernel(EagerOp::Copy, DType::F16, DType::Bool, &[false]).unwrap();
    assert!(
        k.source.contains("struct __align__(16) kiln_v8_f16 { unsigned short e[8]; };")
            && k.source.contains("struct __align__(8) kiln_v8_b8 { unsigned char e[8]; };"),
        "{}",
        k.source
    );
    assert!(
        k.source.contains("r.e[k] = (unsigned char)((kiln_body(kiln_f16_to_f32(a0.e[k]))) != 0.0f);"),
        "{}",
        k.source
    );
    // The same checks as the strided kernels.
    let e = eager_vector_kernel(EagerOp::Unary(UnaryOp::BitNot), DType::F32, DType::F32, &[false]).unwrap_err();
    assert_eq!(e.kind, CudaErrorKind::InvalidArgument);
}

/// A representative set of eager ops for the vector path: every cast, and a few ops of each
/// family on every dtype they take, each input contiguous, the second broadcast for binary
/// ops and `where`.
fn representative() -> Vec<(EagerOp, DType, DType, Vec<bool>)> {
    let picked = |op: &EagerOp| match op {
        EagerOp::Copy | EagerOp::Where | EagerOp::Not => true,
        EagerOp::Unary(u) => matches!(u, UnaryOp::Exp | UnaryOp::Neg | UnaryOp::Abs),
        EagerOp::Binary(b) => matches!(b, BinaryOp::Add | BinaryOp::Mul | BinaryOp::Rem),
        EagerOp::Cmp(c) => *c == CmpOp::Lt,
        EagerOp::Logical(_) => true,
    };
    let mut v = Vec::new();
    for (op, d, out) in eager_ops().into_iter().filter(|(op, _, _)| picked(op)) {
        let n = op.inputs(d).len();
        v.push((op, d, out, vec![false; n]));
        if n > 1 {
            v.push((op, d, out, (0..n).map(|j| j == 1).collect()));
        }
    }
    v
}

#[test]
fn nvrtc_compiles_representative_vector_kernels() {
    let kernels: Vec<(String, String)> = representative()
        .into_iter()
        .map(|(op, d, out, b)| {
            let k = eager_vector_kernel(op, d, out, &b).unwrap_or_else(|e| panic!("{op:?} {d} -> {out}: {e}"));
            (k.name, k.source)
        })
        .collect();
    assert!(kernels.len() > 100, "{} kernels", kernels.len());
    common::compile_each_to_cubin("vector elementwise", &kernels);
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn vector_results_equal_the_strided_kernels_on_a_gpu() {
    let n = 10_007; // a tail after the vectors
    let x: Vec<f32> = (0..n).map(|i| (i as f32 - 5000.0) * 0.013).collect();
    let y: Vec<f32> = (0..n).map(|i| ((i * 7919) % 101) as f32 * 0.25 - 12.0).collect();
    let (dx, dy) = (CudaBuffer::from_slice(0, &x).unwrap(), CudaBuffer::from_slice(0, &y).unwrap());
    for (op, b) in [
        (EagerOp::Binary(BinaryOp::Mul), vec![false, false]),
        (EagerOp::Binary(BinaryOp::Rem), vec![false, true]),
        (EagerOp::Unary(UnaryOp::Exp), vec![false]),
    ] {
        let k = op.inputs(DType::F32).len();
        let vector = LoadedVector::load(&eager_vector_kernel(op, DType::F32, DType::F32, &b).unwrap(), 0).unwrap();
        let strided = LoadedStrided::load(&eager_kernel(op, DType::F32, DType::F32, 1).unwrap(), 0).unwrap();
        let bufs = [&dx, &dy];
        let ins: Vec<(&CudaBuffer, usize)> = (0..k).map(|j| (bufs[j], if b[j] { 7 } else { 4 })).collect();
        let m = n - 8;
        let (mut a, mut s) = (CudaBuffer::alloc(0, n * 4).unwrap(), CudaBuffer::alloc(0, n * 4).unwrap());
        vector.run(&ins, &mut a, 4, m).unwrap();
        let strides: Vec<[usize; 1]> = (0..k).map(|j| [usize::from(!b[j])]).collect();
        let sops: Vec<(&CudaBuffer, StridedOperand<'_>)> =
            (0..k).map(|j| (bufs[j], StridedOperand { offset: ins[j].1, strides: &strides[j] })).collect();
        strided.run(&sops, &mut s, StridedOperand { offset: 4, strides: &[1] }, &[m]).unwrap();
        let (va, vs) = (a.to_vec::<f32>().unwrap(), s.to_vec::<f32>().unwrap());
        for i in 4..4 + m {
            assert_eq!(va[i].to_bits(), vs[i].to_bits(), "{op:?} element {i}");
        }
        // A misaligned view is refused before the launch.
        let e = vector.run(&ins, &mut a, 1, m - 4).unwrap_err();
        assert_eq!(e.kind, CudaErrorKind::InvalidArgument, "{e}");
    }
}
