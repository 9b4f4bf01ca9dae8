//! A fused reduction group of `kiln::compile` (an IR [`kernel::ReduceKernel`]: elementwise
//! prologues feeding one or more reductions over the trailing dims, then an optional
//! reduce→broadcast [`kernel::Epilogue`]) as one CUDA C kernel: softmax, log-softmax, layer
//! norm and cross-entropy's forward and backward over the logits are one launch each.
//!
//! # Schedule
//! As the eager reduction kernels ([`super::reduce`]): each output (a *row*: the reduced
//! sub-space of one index of the kept dims) belongs to a group of threads, a warp for short
//! rows or the whole block of [`REDUCE_BLOCK`] threads for long ones (the launch chooses,
//! [`super::fused_reduce_launch`]); groups stride over the rows. For each stage in order, the
//! group's threads stride over the row (lane `l` takes elements `l, l + group, …`), evaluate
//! the stage's prologue at each and fold the reduced value into a private accumulator; the
//! group then combines the accumulators with warp shuffles and, for a block, shared memory
//! (`kiln_group_reduce`, in an order fixed by the geometry, so results are deterministic), and
//! every thread holds the stage's value: later stages and the epilogue read it (`red<s>`)
//! without another launch. Lane 0 writes each stage's value; the epilogue's threads stride over
//! the row again and write its outputs. The row is read once per pass; after the first it
//! comes from L1/L2.
//!
//! # Arithmetic (the IR's rules, [`kernel::ReduceKernel`])
//! Prologue and epilogue instructions are emitted exactly as in fused elementwise kernels
//! ([`super::fused::InstEmitter`]). Accumulators follow the eager CUDA reductions
//! (`acc_type`): float sums and products of f32/f64 values in `double` (as the CPU), of
//! f16/bf16 values in `float` (the CPU's f64 differs by at most one f32 rounding per add, far
//! below a 16-bit ulp), integer and Bool values in `long long`, wrapping. Max/min compare in
//! the value's compute type and NaN wins (`kiln_pick`, the CPU's rule). A stage's accumulator
//! is multiplied by its run-time `scale` in `double`, converted once to the stage's output
//! dtype, and that rounded value is what later stages and the epilogue read.
//!
//! **Sizes, strides, offsets and scalars are arguments**, as in [`super::fused`]. Signature:
//! `in0 … in{k-1}`, `out0 … out{S-1}` (one per stage: `n_out` elements), `out{S} …` (one per
//! epilogue output: `n_out · n_red` elements, row-major over the whole iteration space), then
//! `n_out, n_red, group`, the kept sizes `ks0 …` and reduced sizes `rs0 …`, for each input `p`
//! its element offset `p_off`, kept strides `p_k0 …` and reduced strides `p_r0 …` (two's
//! complement for negative strides), then the scalars `s0 …` as the bits of an f64.
//!
//! [`kernel::ReduceKernel`]: crate::kernel::ReduceKernel
//! [`kernel::Epilogue`]: crate::kernel::Epilogue

use super::emit::{dtype_tag, fnv1a, CUDA_CODEGEN_VERSION};
use super::fused::{InstEmitter, MAX_PARAM_BYTES};
use super::ops::ComputeType;
use super::reduce::{acc_type, arith, decompose, extreme, widen, PRELUDE, REDUCE_BLOCK};
use super::strided::storage_type;
use crate::kernel::{Inst, InstOp, ReduceKernel, ReduceStage};
use kiln_runtime::cuda::{CudaError, CudaErrorKind};
use kiln_runtime::op_kind::ReduceOp;
use kiln_runtime::DType;
use std::fmt::Write;

/// A generated fused reduction kernel: its CUDA C and what a launch needs to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FusedReduceKernel {
    /// The `extern "C"` kernel's name (`kiln_fused_red_<hash of the source>`).
    pub name: String,
    /// The CUDA C source.
    pub source: String,
    /// The dtype of each input buffer.
    pub inputs: Vec<DType>,
    /// The dtype of each output buffer: one per stage, then one per epilogue output.
    pub outputs: Vec<DType>,
    /// How many of [`FusedReduceKernel::outputs`] are stage values (one element per row).
    pub stages: usize,
    /// Dims of the iteration space (kept dims, then reduced dims).
    pub rank: usize,
    /// How many trailing dims are reduced.
    pub reduce_rank: usize,
    /// Run-time scalars it takes.
    pub scalars: usize,
}

impl FusedReduceKernel {
    /// The number of 64-bit parameters after the buffers: `n_out`, `n_red`, `group`, the sizes,
    /// each input's offset and strides, the scalars.
    pub fn words(&self) -> usize {
        3 + self.rank + self.inputs.len() * (1 + self.rank) + self.scalars
    }
}

/// Emits the CUDA kernel of `k`. Errors (op `cuda_codegen`): an invalid kernel
/// (`InvalidArgument`), or one the CUDA emitter does not generate (`Unsupported`: an op its
/// compute type cannot compute, more than [`MAX_PARAM_BYTES`] of parameters).
pub fn emit_fused_reduce(k: &ReduceKernel) -> Result<FusedReduceKernel, CudaError> {
    let op = "cuda_codegen";
    k.validate().map_err(|m| {
        CudaError::new(op, CudaErrorKind::InvalidArgument, format!("invalid fused reduction kernel: {m}"))
    })?;
    let unsupported = |m: String| CudaError::new(op, CudaErrorKind::Unsupported, m);
    let inputs: Vec<DType> = k.inputs.iter().map(|i| i.dtype).collect();
    let mut outputs: Vec<DType> = k.stages.iter().map(|s| s.output).collect();
    if let Some(ep) = &k.epilogue {
        outputs.extend(ep.outputs.iter().map(|&v| ep.dtype(v)));
    }
    let fused = FusedReduceKernel {
        name: String::new(),
        source: String::new(),
        inputs,
        outputs,
        stages: k.stages.len(),
        rank: k.rank,
        reduce_rank: k.reduce_rank,
        scalars: k.scalars,
    };
    let param_bytes = 8 * (fused.inputs.len() + fused.outputs.len() + fused.words());
    if param_bytes > MAX_PARAM_BYTES {
        return Err(unsupported(format!("a fused reduction over {} inputs and {} dims takes {param_bytes} bytes of parameters, over {MAX_PARAM_BYTES}", k.inputs.len(), k.rank)));
    }
    let kept = k.rank - k.reduce_rank;
    let mut em = InstEmitter::new();

    let mut body = String::new();
    for (s, st) in k.stages.iter().enumerate() {
        let lines = em.lines(&fused.inputs, &st.insts).map_err(|m| unsupported(format!("stage {s}: {m}")))?;
        stage(&mut body, &mut em, s, st, &lines, k.reduce_rank);
    }
    if let Some(ep) = &k.epilogue {
        let lines = em.lines(&fused.inputs, &ep.insts).map_err(|m| unsupported(format!("epilogue: {m}")))?;
        body.push_str("        for (unsigned long long j = lane; j < n_red; j += group) {\n");
        element_offsets(&mut body, &ep.insts, k.reduce_rank);
        for l in &lines {
            let _ = writeln!(body, "            {l}");
        }
        for (e, &v) in ep.outputs.iter().enumerate() {
            let _ =
                writeln!(body, "            out{}[o * n_red + j] = {};", k.stages.len() + e, em.store(ep.dtype(v), v));
        }
        body.push_str("        }\n");
    }

    let mut src = String::new();
    let tags = |ds: &[DType]| ds.iter().map(|&d| dtype_tag(d)).collect::<Vec<_>>().join(", ");
    let ops: Vec<&str> = k.stages.iter().map(|s| s.op.name()).collect();
    let _ = writeln!(
        src,
        "// kiln-codegen cuda v{CUDA_CODEGEN_VERSION}: fused reduction ({}) -> ({}) over {kept} kept and {} reduced dim(s), stages [{}], {} scalar(s)",
        tags(&fused.inputs),
        tags(&fused.outputs),
        k.reduce_rank,
        ops.join(", "),
        k.scalars
    );
    src.push_str(PRELUDE);
    src.push_str(&em.helper_source());
    let mut sig: Vec<String> = fused
        .inputs
        .iter()
        .enumerate()
        .map(|(j, &d)| format!("const {}* __restrict__ in{j}", storage_type(d)))
        .collect();
    sig.extend(fused.outputs.iter().enumerate().map(|(o, &d)| format!("{}* __restrict__ out{o}", storage_type(d))));
    let words = |prefix: &str, n: usize| (0..n).map(|m| format!("unsigned long long {prefix}{m}")).collect::<Vec<_>>();
    sig.extend(["n_out", "n_red", "group"].map(|p| format!("unsigned long long {p}")));
    sig.extend(words("ks", kept).into_iter().chain(words("rs", k.reduce_rank)));
    for j in 0..fused.inputs.len() {
        sig.push(format!("unsigned long long p{j}_off"));
        sig.extend(words(&format!("p{j}_k"), kept).into_iter().chain(words(&format!("p{j}_r"), k.reduce_rank)));
    }
    sig.extend((0..k.scalars).map(|j| format!("unsigned long long s{j}")));
    let _ = writeln!(
        src,
        "extern \"C\" __global__ void __launch_bounds__({REDUCE_BLOCK}) KILN_NAME({}) {{",
        sig.join(", ")
    );
    for (s, st) in k.stages.iter().enumerate() {
        let _ = writeln!(src, "    __shared__ {} scratch{s}[{}];", accumulator(st).c_type(), REDUCE_BLOCK / 32);
    }
    src.push_str("    const unsigned long long lane = threadIdx.x % group, per_block = blockDim.x / group;\n");
    src.push_str("    for (unsigned long long o = (unsigned long long)blockIdx.x * per_block + threadIdx.x / group; o < n_out; o += (unsigned long long)gridDim.x * per_block) {\n");
    let bases: Vec<(String, String)> = (0..fused.inputs.len()).map(|j| (format!("b{j}"), format!("p{j}_k"))).collect();
    for j in 0..fused.inputs.len() {
        let _ = writeln!(src, "        unsigned long long b{j} = p{j}_off;");
    }
    let operands: Vec<(&str, &str)> = bases.iter().map(|(b, st)| (b.as_str(), st.as_str())).collect();
    decompose(&mut src, "        ", "o", "ks", kept, &operands);
    src.push_str(&body);
    src.push_str("    }\n}\n");

    let name = format!("kiln_fused_red_{:016x}", fnv1a(src.as_bytes()));
    let source = src.replace("KILN_NAME", &name);
    Ok(FusedReduceKernel { name, source, ..fused })
}

/// The accumulator's type of stage `st`: sums and products in the eager reductions'
/// accumulator of the reduced value's dtype, max/min in its compute type.
fn accumulator(st: &ReduceStage) -> ComputeType {
    let d = st.dtype(st.reduced);
    match st.op {
        ReduceOp::Sum | ReduceOp::Prod => acc_type(d),
        ReduceOp::Max | ReduceOp::Min => ComputeType::of(d),
    }
}

/// Lines declaring, inside a loop over the row's element `j`, the element offset `p<i>` of
/// every input `insts` loads (the row's base `b<i>` plus `j`'s reduced coordinates times the
/// input's reduced strides).
fn element_offsets(src: &mut String, insts: &[Inst], reduce_rank: usize) {
    let mut loaded: Vec<u32> =
        insts.iter().filter_map(|i| if let InstOp::Load(j) = i.op { Some(j) } else { None }).collect();
    loaded.sort_unstable();
    loaded.dedup();
    let names: Vec<(String, String)> = loaded.iter().map(|j| (format!("p{j}"), format!("p{j}_r"))).collect();
    for (j, (p, _)) in loaded.iter().zip(&names) {
        let _ = writeln!(src, "            unsigned long long {p} = b{j};");
    }
    let operands: Vec<(&str, &str)> = names.iter().map(|(p, st)| (p.as_str(), st.as_str())).collect();
    decompose(src, "            ", "j", "rs", reduce_rank, &operands);
}

/// Stage `s`: its row sweep (the prologue `lines`, then the fold), the group's combination,
/// the scaled and rounded value `red<s>` and lane 0's store of it.
fn stage(src: &mut String, em: &mut InstEmitter, s: usize, st: &ReduceStage, lines: &[String], reduce_rank: usize) {
    let acc = accumulator(st);
    let ct = ComputeType::of(st.dtype(st.reduced));
    let (a, v) = (format!("acc{s}"), format!("v{}", st.reduced));
    let (init, step, combine) = match st.op {
        ReduceOp::Sum => (acc.lit(0.0), arith(acc, &a, "+", &widen(acc, ct, &v)), arith(acc, "a", "+", "b")),
        ReduceOp::Prod => (acc.lit(1.0), arith(acc, &a, "*", &widen(acc, ct, &v)), arith(acc, "a", "*", "b")),
        ReduceOp::Max | ReduceOp::Min => {
            let max = st.op == ReduceOp::Max;
            (extreme(acc, max), format!("kiln_pick<{max}>({a}, {v})"), format!("kiln_pick<{max}>(a, b)"))
        }
    };
    let t = acc.c_type();
    let _ = writeln!(src, "        {t} {a} = {init};");
    src.push_str("        for (unsigned long long j = lane; j < n_red; j += group) {\n");
    element_offsets(src, &st.insts, reduce_rank);
    for l in lines {
        let _ = writeln!(src, "            {l}");
    }
    let _ = writeln!(src, "            {a} = {step};\n        }}");
    let _ = writeln!(
        src,
        "        {a} = kiln_group_reduce({a}, []({t} a, {t} b) {{ return {combine}; }}, group, scratch{s});"
    );
    let (value, value_ct) = match st.scale {
        Some(j) => (format!("(double)({a}) * __longlong_as_double((long long)s{j})"), ComputeType::F64),
        None => (a.clone(), acc),
    };
    let out_ct = ComputeType::of(st.output);
    let _ = writeln!(src, "        const {} red{s} = {};", out_ct.c_type(), em.round_to(st.output, &value, value_ct));
    let _ =
        writeln!(src, "        if (lane == 0) out{s}[o] = {};", em.store_expr(st.output, &format!("red{s}"), out_ct));
}
