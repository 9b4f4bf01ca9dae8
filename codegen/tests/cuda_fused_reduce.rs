//! The CUDA emitter of `kiln::compile`'s fused reduction groups (IR `ReduceKernel`s): its
//! text (always), and NVRTC compiling every kernel it emits for a set of representative
//! groups (plain sum/mean/prod/max/min stages, variance-like two-stage kernels, softmax,
//! log-softmax, layer norm with an affine epilogue, cross-entropy forward + backward, integer
//! sums; f32, f64, f16 and bf16; one to three dims, one or two of them reduced) to CUBIN for
//! sm_80 and sm_90 (skipping with a printed line when NVRTC is absent).

mod common;

use kiln_codegen::cuda::{emit_fused_reduce, FusedReduceKernel};
use kiln_codegen::kernel::{Epilogue, InnerStride, Inst, InstOp, KernelInput, ReduceKernel, ReduceStage, Val};
use kiln_runtime::cuda::CudaErrorKind;
use kiln_runtime::op_kind::{BinaryOp, CmpOp, ReduceOp, UnaryOp};
use kiln_runtime::DType;

/// Instructions under construction, appended one by one.
struct Insts(Vec<Inst>);

impl Insts {
    fn new() -> Insts {
        Insts(Vec::new())
    }
    fn push(&mut self, op: InstOp, dtype: DType) -> Val {
        self.0.push(Inst { op, dtype });
        (self.0.len() - 1) as Val
    }
}

/// A stage reducing value `reduced` of `insts` with `op` into `output`.
fn stage(insts: Insts, reduced: Val, op: ReduceOp, output: DType, scale: Option<u32>) -> ReduceStage {
    ReduceStage { insts: insts.0, reduced, op, output, scale }
}

/// A kernel over `rank` dims, the last `rr` reduced, with inputs `(dtype, inner)`.
fn kernel(
    rank: usize,
    rr: usize,
    inputs: &[(DType, InnerStride)],
    scalars: usize,
    stages: Vec<ReduceStage>,
    epilogue: Option<(Insts, Vec<Val>)>,
) -> ReduceKernel {
    ReduceKernel {
        rank,
        reduce_rank: rr,
        inputs: inputs.iter().map(|&(dtype, inner)| KernelInput { dtype, inner }).collect(),
        scalars,
        stages,
        epilogue: epilogue.map(|(i, outputs)| Epilogue { insts: i.0, outputs }),
    }
}

/// One reduction of `x` (input 0, strided when `strided`) with `op`, mean-like when `scale`
/// (scalar 0), through a prologue `x·x` when `square`.
fn plain(d: DType, rank: usize, rr: usize, op: ReduceOp, scale: bool, square: bool, strided: bool) -> ReduceKernel {
    let mut p = Insts::new();
    let x = p.push(InstOp::Load(0), d);
    let v = if square { p.push(InstOp::Binary(BinaryOp::Mul, x, x), d) } else { x };
    let inner = if strided { InnerStride::Strided } else { InnerStride::Unit };
    kernel(rank, rr, &[(d, inner)], scale as usize, vec![stage(p, v, op, d, scale.then_some(0))], None)
}

/// The variance as captured: the mean (scalar 0 = 1/n), then `Σ (x - mean)²` divided
/// (scalar 1 = 1/(n - correction)), no epilogue.
fn variance(d: DType, rank: usize, rr: usize) -> ReduceKernel {
    let mut p = Insts::new();
    let x = p.push(InstOp::Load(0), d);
    let mean = stage(p, x, ReduceOp::Sum, d, Some(0));
    let mut p = Insts::new();
    let x = p.push(InstOp::Load(0), d);
    let m = p.push(InstOp::Reduced(0), d);
    let dev = p.push(InstOp::Binary(BinaryOp::Sub, x, m), d);
    let sq = p.push(InstOp::Binary(BinaryOp::Mul, dev, dev), d);
    kernel(rank, rr, &[(d, InnerStride::Unit)], 2, vec![mean, stage(p, sq, ReduceOp::Sum, d, Some(1))], None)
}

/// Softmax (or log-softmax) of `x` as captured: the max, `Σ exp(x - max)`, then the epilogue
/// `exp(x - max) / Σ` (or `x - max - log Σ`).
fn softmax(d: DType, rank: usize, rr: usize, log: bool) -> ReduceKernel {
    let max_stage = {
        let mut p = Insts::new();
        let x = p.push(InstOp::Load(0), d);
        stage(p, x, ReduceOp::Max, d, None)
    };
    let mut p = Insts::new();
    let x = p.push(InstOp::Load(0), d);
    let m = p.push(InstOp::Reduced(0), d);
    let z = p.push(InstOp::Binary(BinaryOp::Sub, x, m), d);
    let e = p.push(InstOp::Unary(UnaryOp::Exp, z), d);
    let sum = stage(p, e, ReduceOp::Sum, d, None);
    let mut ep = Insts::new();
    let x = ep.push(InstOp::Load(0), d);
    let m = ep.push(InstOp::Reduced(0), d);
    let z = ep.push(InstOp::Binary(BinaryOp::Sub, x, m), d);
    let s = ep.push(InstOp::Reduced(1), d);
    let y = if log {
        let l = ep.push(InstOp::Unary(UnaryOp::Log, s), d);
        ep.push(InstOp::Binary(BinaryOp::Sub, z, l), d)
    } else {
        let e = ep.push(InstOp::Unary(UnaryOp::Exp, z), d);
        ep.push(InstOp::Binary(BinaryOp::Div, e, s), d)
    };
    kernel(rank, rr, &[(d, InnerStride::Unit)], 0, vec![max_stage, sum], Some((ep, vec![y])))
}

/// Layer norm with an affine epilogue: the mean and the biased variance (scalar 0 = 1/n),
/// then `(x - mean)·rsqrt(var + eps)·w + b` (scalar 1 = eps; `w`, `b` inputs 1 and 2 over the
/// reduced dims only) and the per-element normalized value as a second output.
fn layer_norm(d: DType, rank: usize, rr: usize) -> ReduceKernel {
    let mut k = variance(d, rank, rr);
    k.stages[1].scale = Some(0);
    k.inputs.extend([
        KernelInput { dtype: d, inner: InnerStride::Unit },
        KernelInput { dtype: d, inner: InnerStride::Unit },
    ]);
    let mut ep = Insts::new();
    let x = ep.push(InstOp::Load(0), d);
    let mean = ep.push(InstOp::Reduced(0), d);
    let dev = ep.push(InstOp::Binary(BinaryOp::Sub, x, mean), d);
    let var = ep.push(InstOp::Reduced(1), d);
    let eps = ep.push(InstOp::Scalar(1), d);
    let ve = ep.push(InstOp::Binary(BinaryOp::Add, var, eps), d);
    let rs = ep.push(InstOp::Unary(UnaryOp::Rsqrt, ve), d);
    let xhat = ep.push(InstOp::Binary(BinaryOp::Mul, dev, rs), d);
    let w = ep.push(InstOp::Load(1), d);
    let b = ep.push(InstOp::Load(2), d);
    let wx = ep.push(InstOp::Binary(BinaryOp::Mul, xhat, w), d);
    let y = ep.push(InstOp::Binary(BinaryOp::Add, wx, b), d);
    k.epilogue = Some(Epilogue { insts: ep.0, outputs: vec![y, xhat] });
    k
}

/// Cross-entropy forward and backward over logits `x` (input 0), the target class as a float
/// per row (input 1, broadcast over the classes), the classes' indices (input 2, an iota
/// over the reduced dim) and the loss gradient per row (input 3): the max, `Σ exp(x - max)`,
/// the pick `Σ where(iota == t, x, 0)` as a third stage, then the epilogue
/// `(softmax(x) - onehot)·g` (the logits' gradient).
fn cross_entropy(d: DType) -> ReduceKernel {
    let mut k = softmax(d, 2, 1, false);
    let b = InnerStride::Broadcast;
    k.inputs.extend([
        KernelInput { dtype: d, inner: b },
        KernelInput { dtype: d, inner: InnerStride::Unit },
        KernelInput { dtype: d, inner: b },
    ]);
    let mut p = Insts::new();
    let x = p.push(InstOp::Load(0), d);
    let t = p.push(InstOp::Load(1), d);
    let c = p.push(InstOp::Load(2), d);
    let hit = p.push(InstOp::Cmp(CmpOp::Eq, c, t), DType::Bool);
    let z = p.push(InstOp::Const(0.0), d);
    let picked = p.push(InstOp::Where(hit, x, z), d);
    k.stages.push(stage(p, picked, ReduceOp::Sum, d, None));
    let mut ep = Insts(k.epilogue.take().expect("softmax has an epilogue").insts);
    let sm = (ep.0.len() - 1) as Val;
    let t = ep.push(InstOp::Load(1), d);
    let c = ep.push(InstOp::Load(2), d);
    let hit = ep.push(InstOp::Cmp(CmpOp::Eq, c, t), DType::Bool);
    let one = ep.push(InstOp::Const(1.0), d);
    let zero = ep.push(InstOp::Const(0.0), d);
    let onehot = ep.push(InstOp::Where(hit, one, zero), d);
    let diff = ep.push(InstOp::Binary(BinaryOp::Sub, sm, onehot), d);
    let g = ep.push(InstOp::Load(3), d);
    let grad = ep.push(InstOp::Binary(BinaryOp::Mul, diff, g), d);
    k.epilogue = Some(Epilogue { insts: ep.0, outputs: vec![grad] });
    k
}

/// A Bool count and an integer sum (i64 outputs, wrapping) of integer input `d`.
fn integer_sums(d: DType) -> ReduceKernel {
    let mut p = Insts::new();
    let x = p.push(InstOp::Load(0), d);
    let z = p.push(InstOp::Const(0.0), d);
    let pos = p.push(InstOp::Cmp(CmpOp::Gt, x, z), DType::Bool);
    let count = stage(p, pos, ReduceOp::Sum, DType::I64, None);
    let mut p = Insts::new();
    let x = p.push(InstOp::Load(0), d);
    let wide = p.push(InstOp::Cast(x), DType::I64);
    let sum = stage(p, wide, ReduceOp::Sum, DType::I64, None);
    let mut p = Insts::new();
    let x = p.push(InstOp::Load(0), d);
    let max = stage(p, x, ReduceOp::Max, d, None);
    kernel(2, 1, &[(d, InnerStride::Unit)], 0, vec![count, sum, max], None)
}

const FLOATS: [DType; 4] = [DType::F32, DType::F64, DType::F16, DType::BF16];

/// The representative groups, labelled.
fn representative() -> Vec<(String, ReduceKernel)> {
    let mut v: Vec<(String, ReduceKernel)> = Vec::new();
    for d in FLOATS {
        for (rank, rr) in [(1, 1), (2, 1), (3, 2)] {
            for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min] {
                v.push((format!("{op:?} {d} {rank}/{rr}"), plain(d, rank, rr, op, false, false, rank == 3)));
            }
            v.push((format!("mean {d} {rank}/{rr}"), plain(d, rank, rr, ReduceOp::Sum, true, false, false)));
            v.push((format!("mean of squares {d} {rank}/{rr}"), plain(d, rank, rr, ReduceOp::Sum, true, true, true)));
            v.push((format!("variance {d} {rank}/{rr}"), variance(d, rank, rr)));
            v.push((format!("softmax {d} {rank}/{rr}"), softmax(d, rank, rr, false)));
            v.push((format!("log_softmax {d} {rank}/{rr}"), softmax(d, rank, rr, true)));
            v.push((format!("layer norm {d} {rank}/{rr}"), layer_norm(d, rank, rr)));
        }
        v.push((format!("cross-entropy {d}"), cross_entropy(d)));
    }
    for d in [DType::I64, DType::I32, DType::U8, DType::Bool] {
        v.push((format!("integer sums {d}"), integer_sums(d)));
    }
    v
}

fn emit_all() -> Vec<(String, FusedReduceKernel)> {
    representative()
        .into_iter()
        .map(|(l, k)| (l.clone(), emit_fused_reduce(&k).unwrap_or_else(|e| panic!("{l}: {e}"))))
        .collect()
}

#[test]
fn sizes_strides_and_scalars_are_arguments() {
    let k = emit_fused_reduce(&layer_norm(DType::F32, 3, 2)).unwrap();
    let s = &k.source;
    for p in [
        "unsigned long long n_out",
        "unsigned long long n_red",
        "unsigned long long group",
        "unsigned long long ks0",
        "unsigned long long rs1",
        "unsigned long long p2_off",
        "unsigned long long p0_k0",
        "unsigned long long p2_r1",
        "unsigned long long s1)",
    ] {
        assert!(s.contains(p), "{p} missing:\n{s}");
    }
    assert_eq!((k.inputs.len(), k.outputs.len(), k.stages, k.rank, k.reduce_rank, k.scalars), (3, 4, 2, 3, 2, 2));
    assert_eq!(k.words(), 3 + 3 + 3 * 4 + 2);
    // Same IR, same kernel; the name is the source's hash.
    assert_eq!(emit_fused_reduce(&layer_norm(DType::F32, 3, 2)).unwrap(), k);
    assert!(
        k.name.starts_with("kiln_fused_red_") && s.contains(&format!("void __launch_bounds__(256) {}(", k.name)),
        "{s}"
    );
}

#[test]
fn stages_reduce_in_one_kernel_in_order() {
    let s = emit_fused_reduce(&softmax(DType::F32, 2, 1, false)).unwrap().source;
    // The max compares in f32 with NaN winning; the sum of exponentials accumulates in
    // double; both combine through the group reduction (warp shuffles, then shared memory).
    assert!(s.contains("float acc0 = (-__int_as_float(0x7f800000));"), "{s}");
    assert!(s.contains("acc0 = kiln_pick<true>(acc0, v0);"), "{s}");
    assert!(s.contains("double acc1 = 0.0;") && s.contains("acc1 = acc1 + (double)(v3);"), "{s}");
    assert!(
        s.contains("acc1 = kiln_group_reduce(acc1, [](double a, double b) { return a + b; }, group, scratch1);"),
        "{s}"
    );
    assert!(s.contains("__shfl_xor_sync") && s.contains("__shared__ double scratch1[8];"), "{s}");
    // Stage 1 reads stage 0's rounded value; the epilogue reads both and writes the row.
    let max_at = s.find("const float red0 = ").expect("red0");
    let sum_loop = s.find("const float v1 = red0;").expect("stage 1 reads red0");
    let red1 = s.find("const float red1 = (float)(acc1);").expect("red1");
    assert!(max_at < sum_loop && sum_loop < red1, "{s}");
    assert!(s.contains("if (lane == 0) out0[o] = red0;") && s.contains("if (lane == 0) out1[o] = red1;"), "{s}");
    assert!(s.contains("const float v3 = red1;") && s.contains("out2[o * n_red + j] = v5;"), "{s}");
}

#[test]
fn scales_and_half_roundings_follow_the_ir() {
    let s = emit_fused_reduce(&layer_norm(DType::F16, 2, 1)).unwrap().source;
    // f16 sums accumulate in float (as the eager CUDA reductions); the scale multiplies in
    // double and the stage value rounds once to f16, then is read back as float.
    assert!(s.contains("float acc0 = 0.0f;"), "{s}");
    assert!(s.contains("const float red0 = kiln_f16_to_f32(kiln_f64_to_f16((double)(acc0) * __longlong_as_double((long long)s0)));"), "{s}");
    assert!(s.contains("out0[o] = kiln_f32_to_f16(red0);"), "{s}");
    // Integer sums wrap through unsigned arithmetic in long long; the max keeps the dtype.
    let s = emit_fused_reduce(&integer_sums(DType::I32)).unwrap().source;
    assert!(s.contains("acc1 = (long long)((unsigned long long)(acc1) + (unsigned long long)(v1));"), "{s}");
    assert!(s.contains("out2[o] = (int)(red2);"), "{s}");
}

#[test]
fn unsupported_and_invalid_groups_are_errors_not_panics() {
    // Reading a later stage is invalid.
    let mut k = softmax(DType::F32, 2, 1, false);
    k.stages[0].insts.push(Inst { op: InstOp::Reduced(1), dtype: DType::F32 });
    let e = emit_fused_reduce(&k).unwrap_err();
    assert_eq!(e.kind, CudaErrorKind::InvalidArgument);
    assert!(e.to_string().contains("invalid fused reduction kernel"), "{e}");
    // An op the compute type cannot compute (exp of an integer).
    let mut k = integer_sums(DType::I64);
    let x = k.stages[2].insts.len() as Val;
    k.stages[2].insts.push(Inst { op: InstOp::Unary(UnaryOp::Exp, 0), dtype: DType::I64 });
    k.stages[2].reduced = x;
    let e = emit_fused_reduce(&k).unwrap_err();
    assert_eq!(e.kind, CudaErrorKind::Unsupported);
    assert!(e.to_string().contains("stage 2: instruction 1"), "{e}");
    // Too many parameters for one launch.
    let mut k = plain(DType::F32, 8, 4, ReduceOp::Sum, false, false, false);
    k.inputs = vec![KernelInput { dtype: DType::F32, inner: InnerStride::Strided }; 60];
    assert!(emit_fused_reduce(&k).unwrap_err().to_string().contains("bytes of parameters"));
}

#[test]
fn nvrtc_compiles_every_representative_group() {
    let kernels: Vec<(String, String)> = emit_all().into_iter().map(|(_, k)| (k.name, k.source)).collect();
    assert!(kernels.len() >= 128, "{} kernels", kernels.len());
    common::compile_each_to_cubin("fused reduction", &kernels);
}
