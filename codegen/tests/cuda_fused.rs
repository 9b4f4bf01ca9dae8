//! The CUDA emitter of `kiln::compile`'s fused elementwise groups: its text and the launch
//! decision of the vector variants (always), and NVRTC compiling every kernel it emits, strided
//! and vector, for a set of representative lowered groups (GELU chains, broadcasts and views,
//! casts, `where` and comparisons, random draws, every dtype) to CUBIN for sm_80 and sm_90
//! (skipping with a printed line when NVRTC is absent).

mod common;

use kiln_codegen::cuda::{emit_fused, fused_vector_launch, FusedKernel, FusedOperand};
use kiln_codegen::ir::RandDist;
use kiln_codegen::kernel::{ElementwiseKernel, InnerStride, Inst, InstOp, KernelInput, Val};
use kiln_runtime::cuda::CudaErrorKind;
use kiln_runtime::op_kind::{BinaryOp, CmpOp, LogicalOp, UnaryOp};
use kiln_runtime::DType;

/// A kernel under construction: instructions appended one by one.
struct K(ElementwiseKernel);

impl K {
    fn new(rank: usize, inputs: &[(DType, InnerStride)], scalars: usize) -> K {
        K(ElementwiseKernel {
            rank,
            inputs: inputs.iter().map(|&(dtype, inner)| KernelInput { dtype, inner }).collect(),
            scalars,
            insts: Vec::new(),
            outputs: Vec::new(),
        })
    }
    fn push(&mut self, op: InstOp, dtype: DType) -> Val {
        self.0.insts.push(Inst { op, dtype });
        (self.0.insts.len() - 1) as Val
    }
    fn out(mut self, outs: &[Val]) -> ElementwiseKernel {
        self.0.outputs = outs.to_vec();
        self.0
    }
}

/// GELU (tanh form) written with primitive ops over one input of `d`, as a captured chain of
/// eager ops lowers it: `0.5·x·(1 + tanh(0.79788·(x + 0.044715·x³)))`.
fn gelu_chain(d: DType, inner: InnerStride) -> ElementwiseKernel {
    let mut k = K::new(2, &[(d, inner)], 0);
    let x = k.push(InstOp::Load(0), d);
    let c = |k: &mut K, v: f64| k.push(InstOp::Const(v), d);
    let x2 = k.push(InstOp::Binary(BinaryOp::Mul, x, x), d);
    let x3 = k.push(InstOp::Binary(BinaryOp::Mul, x2, x), d);
    let a = c(&mut k, 0.044715);
    let t = k.push(InstOp::Binary(BinaryOp::Mul, a, x3), d);
    let inner_sum = k.push(InstOp::Binary(BinaryOp::Add, x, t), d);
    let s = c(&mut k, 0.797_884_560_802_865_4);
    let u = k.push(InstOp::Binary(BinaryOp::Mul, s, inner_sum), d);
    let th = k.push(InstOp::Unary(UnaryOp::Tanh, u), d);
    let one = c(&mut k, 1.0);
    let p = k.push(InstOp::Binary(BinaryOp::Add, one, th), d);
    let half = c(&mut k, 0.5);
    let hx = k.push(InstOp::Binary(BinaryOp::Mul, half, x), d);
    let y = k.push(InstOp::Binary(BinaryOp::Mul, hx, p), d);
    k.out(&[y])
}

/// `a·x + y` with `a` a run-time scalar, `x` broadcast along rows (a bias) and `y` strided (a
/// transposed view), rank 3: an optimizer-like update with views.
fn broadcast_axpy(d: DType) -> ElementwiseKernel {
    let mut k = K::new(3, &[(d, InnerStride::Broadcast), (d, InnerStride::Strided)], 1);
    let x = k.push(InstOp::Load(0), d);
    let y = k.push(InstOp::Load(1), d);
    let a = k.push(InstOp::Scalar(0), d);
    let ax = k.push(InstOp::Binary(BinaryOp::Mul, a, x), d);
    let r = k.push(InstOp::Binary(BinaryOp::Add, ax, y), d);
    k.out(&[r])
}

/// ReLU's backward as captured: `where(x > 0, g, 0)` and the mask as a second output.
fn relu_backward(d: DType) -> ElementwiseKernel {
    let mut k = K::new(1, &[(d, InnerStride::Unit), (d, InnerStride::Unit)], 0);
    let x = k.push(InstOp::Load(0), d);
    let g = k.push(InstOp::Load(1), d);
    let z = k.push(InstOp::Const(0.0), d);
    let m = k.push(InstOp::Cmp(CmpOp::Gt, x, z), DType::Bool);
    let r = k.push(InstOp::Where(m, g, z), d);
    k.out(&[r, m])
}

/// Casts between `from` and `to` both ways around a `to` op, with a logical op and a not.
fn casts(from: DType, to: DType) -> ElementwiseKernel {
    let mut k = K::new(2, &[(from, InnerStride::Unit), (DType::Bool, InnerStride::Broadcast)], 1);
    let x = k.push(InstOp::Load(0), from);
    let b = k.push(InstOp::Load(1), DType::Bool);
    let c = k.push(InstOp::Cast(x), to);
    let s = k.push(InstOp::Scalar(0), to);
    let op = if to.is_float() { BinaryOp::Mul } else { BinaryOp::Add };
    let y = k.push(InstOp::Binary(op, c, s), to);
    let nz = k.push(InstOp::Cmp(CmpOp::Ne, y, s), DType::Bool);
    let both = k.push(InstOp::Logical(LogicalOp::Xor, nz, b), DType::Bool);
    let not = k.push(InstOp::Not(both), DType::Bool);
    let back = k.push(InstOp::Cast(y), from);
    k.out(&[back, not])
}

/// Integer arithmetic of `d`: `((x << 2) % 7) ^ pow(x, 3)`, a maximum with a scalar, wrapping.
fn integer_ops(d: DType) -> ElementwiseKernel {
    let mut k = K::new(1, &[(d, InnerStride::Strided)], 1);
    let x = k.push(InstOp::Load(0), d);
    let two = k.push(InstOp::Const(2.0), d);
    let sh = k.push(InstOp::Binary(BinaryOp::BitShl, x, two), d);
    let seven = k.push(InstOp::Const(7.0), d);
    let r = k.push(InstOp::Binary(BinaryOp::Rem, sh, seven), d);
    let three = k.push(InstOp::Const(3.0), d);
    let p = k.push(InstOp::Binary(BinaryOp::Pow, x, three), d);
    let xr = k.push(InstOp::Binary(BinaryOp::BitXor, r, p), d);
    let s = k.push(InstOp::Scalar(0), d);
    let m = k.push(InstOp::Binary(BinaryOp::Maximum, xr, s), d);
    k.out(&[m])
}

/// The representative groups, each with a label.
fn representative() -> Vec<(String, ElementwiseKernel)> {
    let floats = [DType::F32, DType::F64, DType::F16, DType::BF16];
    let mut v = Vec::new();
    for d in floats {
        for inner in [InnerStride::Unit, InnerStride::Strided, InnerStride::Broadcast] {
            v.push((format!("gelu {d} {inner:?}"), gelu_chain(d, inner)));
        }
        v.push((format!("axpy {d}"), broadcast_axpy(d)));
        v.push((format!("relu_backward {d}"), relu_backward(d)));
    }
    for d in [DType::I64, DType::I32, DType::U8] {
        v.push((format!("axpy {d}"), broadcast_axpy(d)));
        v.push((format!("relu_backward {d}"), relu_backward(d)));
        v.push((format!("integer ops {d}"), integer_ops(d)));
    }
    for from in DType::ALL {
        for to in DType::ALL {
            if from != DType::Bool && to != DType::Bool {
                v.push((format!("casts {from}->{to}"), casts(from, to)));
            }
        }
    }
    // Float remainders of two compute types in one kernel (one `kiln_rem` overload each).
    let mut k = K::new(1, &[(DType::F32, InnerStride::Unit), (DType::F64, InnerStride::Unit)], 0);
    let a = k.push(InstOp::Load(0), DType::F32);
    let b = k.push(InstOp::Load(1), DType::F64);
    let ra = k.push(InstOp::Binary(BinaryOp::Rem, a, a), DType::F32);
    let rb = k.push(InstOp::Binary(BinaryOp::Rem, b, b), DType::F64);
    v.push(("rem f32 and f64".into(), k.out(&[ra, rb])));
    for d in [DType::F32, DType::F64] {
        v.push((format!("dropout {d}"), dropout(d)));
    }
    v
}

/// Dropout as captured, with a `randn` draw added: `where(rand < p, 0, x / (1 - p)) + randn`
/// over an f16 input cast to `d` (the draws of `d`, the mask, a mixed-width vector).
fn dropout(d: DType) -> ElementwiseKernel {
    let mut k = K::new(2, &[(DType::F16, InnerStride::Unit)], 9);
    let x = k.push(InstOp::Load(0), DType::F16);
    let xd = k.push(InstOp::Cast(x), d);
    let u = k.push(InstOp::Rand { dist: RandDist::Uniform, params: 0 }, d);
    let p = k.push(InstOp::Scalar(8), d);
    let keep = k.push(InstOp::Cmp(CmpOp::Ge, u, p), DType::Bool);
    let one = k.push(InstOp::Const(1.0), d);
    let q = k.push(InstOp::Binary(BinaryOp::Sub, one, p), d);
    let scaled = k.push(InstOp::Binary(BinaryOp::Div, xd, q), d);
    let zero = k.push(InstOp::Const(0.0), d);
    let y = k.push(InstOp::Where(keep, scaled, zero), d);
    let n = k.push(InstOp::Rand { dist: RandDist::Normal, params: 4 }, d);
    let r = k.push(InstOp::Binary(BinaryOp::Add, y, n), d);
    k.out(&[r, keep])
}

fn emit_all() -> Vec<(String, FusedKernel)> {
    representative()
        .into_iter()
        .map(|(label, k)| (label.clone(), emit_fused(&k).unwrap_or_else(|e| panic!("{label}: {e}"))))
        .collect()
}

#[test]
fn sizes_strides_and_scalars_are_arguments() {
    let k = emit_fused(&broadcast_axpy(DType::F32)).unwrap();
    let s = &k.source;
    assert!(s.contains("const float* __restrict__ in0, const float* __restrict__ in1, float* __restrict__ out0, unsigned long long n, unsigned long long size0, unsigned long long size1, unsigned long long size2, unsigned long long p0_off, unsigned long long p0_st0,"), "{s}");
    assert!(s.contains("unsigned long long p1_st2, unsigned long long s0)"), "{s}");
    assert!(s.contains("const float v2 = (float)(__longlong_as_double((long long)s0));"), "{s}");
    assert!(s.contains("const float v0 = in0[p0];") && s.contains("out0[i] = v4;"), "{s}");
    assert_eq!(
        (k.inputs.clone(), k.outputs.clone(), k.rank, k.scalars, k.words()),
        (vec![DType::F32, DType::F32], vec![DType::F32], 3, 1, 1 + 3 + 2 * 4 + 1)
    );
    // The inner-stride class is a CPU specialization: the CUDA kernel takes strides as
    // arguments, so the three classes are one kernel.
    let names: Vec<String> = [InnerStride::Unit, InnerStride::Strided, InnerStride::Broadcast]
        .iter()
        .map(|&i| emit_fused(&gelu_chain(DType::F32, i)).unwrap().name)
        .collect();
    assert!(names.iter().all(|n| *n == names[0]), "{names:?}");
    assert_ne!(names[0], emit_fused(&gelu_chain(DType::F64, InnerStride::Unit)).unwrap().name);
}

#[test]
fn half_results_round_where_the_eager_ops_round() {
    // Every f16 instruction's value is rounded to f16 (as each eager op's result is), while
    // it computes in float.
    let s = emit_fused(&gelu_chain(DType::F16, InnerStride::Unit)).unwrap().source;
    assert!(s.contains("const float v1 = kiln_f16_to_f32(kiln_f32_to_f16(v0 * v0));"), "{s}");
    assert!(s.contains("const float v8 = kiln_f16_to_f32(kiln_f32_to_f16(tanhf(v7)));"), "{s}");
    assert!(s.contains("out0[i] = kiln_f32_to_f16(v13);"), "{s}");
    let s = emit_fused(&gelu_chain(DType::BF16, InnerStride::Unit)).unwrap().source;
    assert!(
        s.contains("kiln_bf16_to_f32(kiln_f32_to_bf16(v0 * v0))")
            && s.contains("const float v0 = kiln_bf16_to_f32(in0[p0]);"),
        "{s}"
    );
}

#[test]
fn integers_wrap_and_narrow_per_instruction() {
    let s = emit_fused(&integer_ops(DType::U8)).unwrap().source;
    // u8 values compute in long long and wrap to u8 after each op.
    assert!(s.contains("const long long v0 = (long long)(in0[p0]);"), "{s}");
    assert!(s.contains("const long long v2 = (long long)((unsigned char)((v1 >= 0LL && v1 < 64LL) ? (long long)((unsigned long long)v0 << v1) : 0LL));"), "{s}");
    assert!(
        s.contains("kiln_rem_i64(long long a, long long b)") && s.contains("kiln_pow_i64(long long a, long long b)"),
        "{s}"
    );
    assert!(s.contains("out0[i] = (unsigned char)(v9);"), "{s}");
    let s = emit_fused(&relu_backward(DType::F32)).unwrap().source;
    assert!(
        s.contains("const long long v3 = (v0 > v2) ? 1LL : 0LL;")
            && s.contains("const float v4 = (v3 != 0LL) ? v1 : v2;"),
        "{s}"
    );
    assert!(s.contains("out1[i] = (unsigned char)((v3) != 0LL);"), "{s}");
}

#[test]
fn casts_follow_the_cpu_rules() {
    let s = emit_fused(&casts(DType::F32, DType::I32)).unwrap().source;
    // float -> i32 truncates through i64, then wraps; the scalar converts as a tensor would.
    assert!(s.contains("const long long v2 = (long long)((int)(long long)(v0));"), "{s}");
    assert!(
        s.contains("const long long v3 = (long long)((int)(long long)(__longlong_as_double((long long)s0)));"),
        "{s}"
    );
    assert!(
        s.contains("const long long v6 = ((v5 != 0LL) != (v1 != 0LL)) ? 1LL : 0LL;")
            && s.contains("const long long v7 = (v6 == 0LL) ? 1LL : 0LL;"),
        "{s}"
    );
    assert!(s.contains("const float v8 = (float)(v4);"), "{s}");
    let s = emit_fused(&casts(DType::I64, DType::F16)).unwrap().source;
    assert!(s.contains("const float v2 = kiln_f16_to_f32(kiln_f64_to_f16((double)(v0)));"), "{s}");
}

#[test]
fn unsupported_groups_are_errors_not_panics() {
    // Random draws are generated (the CPU generator's numbers: tests/cuda_philox.rs); a draw
    // whose scalars are missing is refused by validation.
    let mut k = K::new(1, &[], 4);
    let r = k.push(InstOp::Rand { dist: RandDist::Uniform, params: 0 }, DType::F32);
    assert!(emit_fused(&k.out(&[r])).unwrap().source.contains("kiln_uniform_at_f32("));
    let mut k = K::new(1, &[], 3);
    let r = k.push(InstOp::Rand { dist: RandDist::Normal, params: 0 }, DType::F32);
    assert_eq!(emit_fused(&k.out(&[r])).unwrap_err().kind, CudaErrorKind::InvalidArgument);
    // An invalid kernel (an input index past the inputs) is refused by validation.
    let mut k = K::new(1, &[], 0);
    let x = k.push(InstOp::Load(3), DType::F32);
    let e = emit_fused(&k.out(&[x])).unwrap_err();
    assert_eq!(e.kind, CudaErrorKind::InvalidArgument);
    // Too many parameters for one launch.
    let inputs: Vec<(DType, InnerStride)> = vec![(DType::F32, InnerStride::Strided); 60];
    let mut k = K::new(8, &inputs, 0);
    let x = k.push(InstOp::Load(59), DType::F32);
    let e = emit_fused(&k.out(&[x])).unwrap_err();
    assert!(e.to_string().contains("bytes of parameters"), "{e}");
}

#[test]
fn nvrtc_compiles_every_representative_group() {
    let kernels: Vec<(String, String)> =
        emit_all().into_iter().flat_map(|(_, k)| [(k.name, k.source), (k.vector.name, k.vector.source)]).collect();
    assert!(kernels.len() > 100, "{} kernels", kernels.len());
    common::compile_each_to_cubin("fused elementwise (strided and vector)", &kernels);
}

#[test]
fn vector_variants_move_16_bytes_and_finish_with_a_tail() {
    let k = emit_fused(&broadcast_axpy(DType::F32)).unwrap();
    let (v, s) = (&k.vector, &k.vector.source);
    assert_eq!(v.width, 4);
    assert!(v.name.starts_with("kiln_fused_vec_") && v.name != k.name);
    assert!(s.contains("struct __align__(16) kiln_v4_f32 { float e[4]; };"), "{s}");
    assert!(s.contains("float* __restrict__ out0, unsigned long long n, unsigned long long p0_off, unsigned long long p0_bc, unsigned long long p1_off, unsigned long long p1_bc, unsigned long long s0)"), "{s}");
    assert!(s.contains("a1 = *reinterpret_cast<const kiln_v4_f32*>(in1 + p1_off + v * 4ULL);"), "{s}");
    assert!(s.contains("for (int k = 0; k < 4; ++k) a0.e[k] = in0[p0_off];"), "{s}");
    assert!(s.contains("const float v0 = a0.e[k];") && s.contains("r0.e[k] = v4;"), "{s}");
    assert!(s.contains("*reinterpret_cast<kiln_v4_f32*>(out0 + v * 4ULL) = r0;"), "{s}");
    // The tail reads through the same instructions, at the element's offset.
    assert!(s.contains("for (unsigned long long i = nv * 4ULL + tid; i < n; i += stride) {"), "{s}");
    assert!(
        s.contains("const unsigned long long p1 = p1_bc ? p1_off : p1_off + i;")
            && s.contains("const float v1 = in1[p1];")
            && s.contains("out0[i] = v4;"),
        "{s}"
    );
    assert!(!s.contains("const unsigned long long i = v * 4ULL + k;"), "no draw, no index: {s}");
    // Half dtypes move 8 elements; the widest operand sets the width (f16 in, f64 and bool out).
    let s = emit_fused(&gelu_chain(DType::BF16, InnerStride::Unit)).unwrap().vector.source;
    assert!(
        s.contains("struct __align__(16) kiln_v8_bf16 { unsigned short e[8]; };")
            && s.contains("const float v0 = kiln_bf16_to_f32(a0.e[k]);"),
        "{s}"
    );
    let k = emit_fused(&dropout(DType::F64)).unwrap();
    let s = &k.vector.source;
    assert_eq!(k.vector.width, 2);
    assert!(s.contains("struct __align__(4) kiln_v2_f16") && s.contains("struct __align__(2) kiln_v2_b8"), "{s}");
    // Draws take the element's row-major index, as in the strided kernel.
    assert!(s.contains("const unsigned long long i = v * 2ULL + k;") && s.contains("kiln_normal_at_f64("), "{s}");
}

/// The vector launch decision over `shape` for inputs `(dtype, address, offset, strides)`
/// and outputs `(dtype, address)`.
fn decide(shape: &[usize], inputs: &[(DType, u64, usize, &[isize])], outputs: &[(DType, u64)]) -> Option<Vec<bool>> {
    let ins: Vec<(DType, u64, FusedOperand<'_>)> =
        inputs.iter().map(|&(d, a, offset, strides)| (d, a, FusedOperand { offset, strides })).collect();
    fused_vector_launch(shape, &ins, outputs)
}

#[test]
fn vector_launch_decision() {
    let (f32_, f16_, bool_) = (DType::F32, DType::F16, DType::Bool);
    let base = 0x7000_0000_0000u64;
    let out = [(f32_, base + 0x1000)];
    // Contiguous operands go vector, at any rank (size-1 dims aside), with scalar broadcasts.
    assert_eq!(decide(&[4, 6], &[(f32_, base, 0, &[6, 1])], &out), Some(vec![false]));
    assert_eq!(
        decide(&[2, 1, 8], &[(f32_, base, 0, &[8, 99, 1]), (f32_, base, 3, &[0, 0, 0])], &out),
        Some(vec![false, true])
    );
    assert_eq!(decide(&[5, 1], &[(f32_, base, 7, &[0, 0]), (f32_, base, 4, &[1, 1])], &out), Some(vec![true, false]));
    // A broadcast row, a transposed view, a reversed view fall back to the strided kernel.
    assert_eq!(decide(&[4, 6], &[(f32_, base, 0, &[0, 1])], &out), None);
    assert_eq!(decide(&[4, 6], &[(f32_, base, 0, &[1, 4])], &out), None);
    assert_eq!(decide(&[8], &[(f32_, base, 7, &[-1])], &out), None);
    // Offsets and addresses off the 16-byte boundary, and runs shorter than one vector, too.
    assert_eq!(decide(&[4, 6], &[(f32_, base, 2, &[6, 1])], &out), None);
    assert_eq!(decide(&[4, 6], &[(f32_, base, 4, &[6, 1])], &out), Some(vec![false]));
    assert_eq!(decide(&[4, 6], &[(f32_, base + 4, 0, &[6, 1])], &out), None);
    assert_eq!(decide(&[4, 6], &[(f32_, base, 0, &[6, 1])], &[(f32_, base + 8)]), None);
    assert_eq!(decide(&[3], &[(f32_, base, 0, &[1])], &out), None);
    assert_eq!(decide(&[], &[(f32_, base, 0, &[])], &out), None);
    // The widest operand sets the width: f16 alone moves 8 (offset 4 is off), with an f32
    // output 4 (offset 4 is on); a second output must be aligned as well.
    assert_eq!(decide(&[64], &[(f16_, base, 4, &[1])], &[(f16_, base)]), None);
    assert_eq!(decide(&[64], &[(f16_, base, 4, &[1])], &[(f32_, base)]), Some(vec![false]));
    assert_eq!(decide(&[64], &[(f32_, base, 0, &[1])], &[(f32_, base), (bool_, base + 0x100)]), Some(vec![false]));
    assert_eq!(decide(&[64], &[(f32_, base, 0, &[1])], &[(f32_, base), (bool_, base + 0x101)]), None);
}
