//! A fused elementwise group of `kiln::compile` (a [`kernel::ElementwiseKernel`], what
//! `passes::lower_group` makes of a captured group) as one CUDA C kernel.
//!
//! The kernel follows the IR's meaning instruction by instruction: every instruction computes
//! in its dtype's compute type ([`ComputeType::of`]: f16/bf16 in `float`, integers and bool in
//! `long long`) with the formulas of [`super::ops`], and its value is rounded to its dtype
//! (f16/bf16 rounded, i32/u8 wrapped, bool made 0/1) exactly where the eager op would round,
//! so a fused kernel equals the chain of eager CUDA kernels it replaces.
//!
//! **Sizes, strides, offsets and scalars are arguments**: one kernel per group structure
//! (instructions, input and output dtypes, rank), so a new batch size, another view of an
//! input or a new learning rate reuses the compiled kernel. Signature: `in0 … in{k-1}`,
//! `out0 … out{m-1}`, `n`, `size0 … size{r-1}`, then for each input `p` its element offset
//! `p_off` and its strides `p_st0 …` (signed strides passed as their two's complement: the
//! unsigned index arithmetic wraps to the right element), then the scalars `s0 …` as the bits
//! of an f64. Element `i` (row-major over the sizes) reads each input through its view and
//! writes `out_o[i]`: outputs are contiguous. Each kernel comes with its vector variant
//! ([`super::fused_vector`]), which the launch picks when every input is one contiguous run
//! or one broadcast value and all are aligned.
//!
//! [`kernel::ElementwiseKernel`]: crate::kernel::ElementwiseKernel

use super::emit::{dtype_tag, fnv1a, Body, CUDA_CODEGEN_VERSION, ELEMENTWISE_BLOCK};
use super::fused_vector::{emit_fused_vector, FusedVectorKernel};
use super::ops::{self, ComputeType};
use super::strided::{index_space_params, load, open_index_loop, storage_type, store};
use crate::kernel::{ElementwiseKernel, Inst, InstOp};
use kiln_runtime::cuda::{CudaError, CudaErrorKind};
use kiln_runtime::op_kind::LogicalOp;
use kiln_runtime::DType;
use std::fmt::Write;

/// The most bytes of kernel parameters a fused kernel takes (CUDA's classic limit; a group
/// needing more runs its ops one by one).
pub const MAX_PARAM_BYTES: usize = 4096;

/// A generated fused kernel: its CUDA C and what a launch needs to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FusedKernel {
    /// The `extern "C"` kernel's name (`kiln_fused_<hash of the source>`).
    pub name: String,
    /// The CUDA C source.
    pub source: String,
    /// The dtype of each input buffer.
    pub inputs: Vec<DType>,
    /// The dtype of each output buffer.
    pub outputs: Vec<DType>,
    /// Dims of the index space.
    pub rank: usize,
    /// Run-time scalars it takes.
    pub scalars: usize,
    /// The variant with 16-byte accesses, for launches whose inputs are contiguous runs or
    /// broadcast values ([`super::fused_vector`]).
    pub vector: FusedVectorKernel,
}

impl FusedKernel {
    /// The number of 64-bit parameters after the buffers: `n`, the sizes, each input's offset
    /// and strides, the scalars.
    pub fn words(&self) -> usize {
        words(self.inputs.len(), self.rank, self.scalars)
    }
}

/// The 64-bit parameters after the buffers of a kernel over `inputs` inputs, `rank` dims and
/// `scalars` scalars ([`FusedKernel::words`]).
fn words(inputs: usize, rank: usize, scalars: usize) -> usize {
    1 + rank + inputs * (1 + rank) + scalars
}

/// Emits the CUDA kernel of `k`. Errors (op `cuda_codegen`): an invalid kernel
/// (`InvalidArgument`), or one the CUDA emitter does not generate (`Unsupported`: an op
/// its compute type cannot compute, more than [`MAX_PARAM_BYTES`] of parameters).
pub fn emit_fused(k: &ElementwiseKernel) -> Result<FusedKernel, CudaError> {
    let op = "cuda_codegen";
    k.validate()
        .map_err(|m| CudaError::new(op, CudaErrorKind::InvalidArgument, format!("invalid fused kernel: {m}")))?;
    let unsupported = |m: String| CudaError::new(op, CudaErrorKind::Unsupported, m);
    let inputs: Vec<DType> = k.inputs.iter().map(|i| i.dtype).collect();
    let outputs: Vec<DType> = k.outputs.iter().map(|&v| k.dtype(v)).collect();
    let param_bytes = 8 * (inputs.len() + outputs.len() + words(inputs.len(), k.rank, k.scalars));
    if param_bytes > MAX_PARAM_BYTES {
        return Err(unsupported(format!(
            "a fused kernel over {} inputs and {} dims takes {param_bytes} bytes of parameters, over {MAX_PARAM_BYTES}",
            k.inputs.len(),
            k.rank
        )));
    }
    // The vector variant takes fewer parameters (an offset and a flag per input, no sizes).
    let vector = emit_fused_vector(k, &inputs, &outputs).map_err(unsupported)?;
    let fused = FusedKernel {
        name: String::new(),
        source: String::new(),
        inputs,
        outputs,
        rank: k.rank,
        scalars: k.scalars,
        vector,
    };

    let mut insts = InstEmitter::new();
    let inputs = &fused.inputs;
    let lines = insts.lines(inputs, &k.insts).map_err(unsupported)?;
    let stores: Vec<String> = k
        .outputs
        .iter()
        .enumerate()
        .map(|(o, &v)| format!("            out{o}[i] = {};", insts.store(k.dtype(v), v)))
        .collect();
    let lines: Vec<String> = lines.into_iter().map(|l| format!("            {l}")).collect();

    let mut src = String::new();
    let tags = |ds: &[DType]| ds.iter().map(|&d| dtype_tag(d)).collect::<Vec<_>>().join(", ");
    let _ = writeln!(
        src,
        "// kiln-codegen cuda v{CUDA_CODEGEN_VERSION}: fused elementwise ({}) -> ({}) over {} dim(s), {} scalar(s)",
        tags(&fused.inputs),
        tags(&fused.outputs),
        k.rank,
        k.scalars
    );
    src.push_str(&insts.helper_source());
    let operands: Vec<String> = (0..fused.inputs.len()).map(|j| format!("p{j}")).collect();
    let operands: Vec<&str> = operands.iter().map(String::as_str).collect();
    let mut sig = buffer_params(&fused.inputs, &fused.outputs);
    sig.extend(index_space_params(&operands, k.rank));
    sig.extend((0..k.scalars).map(|j| format!("unsigned long long s{j}")));
    let _ = writeln!(
        src,
        "extern \"C\" __global__ void __launch_bounds__({ELEMENTWISE_BLOCK}) KILN_NAME({}) {{",
        sig.join(", ")
    );
    open_index_loop(&mut src, &operands, k.rank);
    src.push_str("        {\n");
    for l in lines.iter().chain(&stores) {
        src.push_str(l);
        src.push('\n');
    }
    src.push_str("        }\n    }\n}\n");

    let name = format!("kiln_fused_{:016x}", fnv1a(src.as_bytes()));
    let source = src.replace("KILN_NAME", &name);
    Ok(FusedKernel { name, source, ..fused })
}

/// The buffer parameters of a fused kernel: `in<j>` per input, `out<o>` per output.
pub(super) fn buffer_params(inputs: &[DType], outputs: &[DType]) -> Vec<String> {
    let mut sig: Vec<String> =
        inputs.iter().enumerate().map(|(j, &d)| format!("const {}* __restrict__ in{j}", storage_type(d))).collect();
    sig.extend(outputs.iter().enumerate().map(|(o, &d)| format!("{}* __restrict__ out{o}", storage_type(d))));
    sig
}

/// `v` (of the compute type `ct`) rounded to what `d` holds, as an eager result of dtype `d`
/// is: the store's conversion, then the load's back to the compute type of `d`.
pub(super) fn round_to(d: DType, v: &str, ct: ComputeType, helpers: &mut Body) -> String {
    let stored = store(d, v, ct, helpers);
    load(d, &stored, ComputeType::of(d), helpers)
}

/// Emits IR instructions as CUDA C statements (`const <ct> v<N> = …;`, reading input `i`'s
/// element as `in<i>[p<i>]` and a reduction stage's value as `red<s>`), collecting the
/// helpers they use: what the fused elementwise and fused reduction kernels share.
pub(super) struct InstEmitter {
    /// Collects the compute-type-independent helpers (f16/bf16 conversions, integer rem and
    /// pow).
    helpers: Body,
    /// The compute types float `kiln_rem` is needed in (an overload each).
    rem_types: Vec<ComputeType>,
}

impl InstEmitter {
    /// An emitter that has used no helper yet.
    pub(super) fn new() -> InstEmitter {
        InstEmitter { helpers: Body::new(ComputeType::F32), rem_types: Vec::new() }
    }

    /// One statement per instruction of `insts` (whose loads read inputs of the dtypes
    /// `inputs`, input `i`'s element as `in<i>[p<i>]`), or why one is not generated.
    pub(super) fn lines(&mut self, inputs: &[DType], insts: &[Inst]) -> Result<Vec<String>, String> {
        self.lines_reading(inputs, insts, |i| format!("in{i}[p{i}]"))
    }

    /// [`InstEmitter::lines`] with input `i`'s element (in its stored form) read as `read(i)`.
    pub(super) fn lines_reading(
        &mut self,
        inputs: &[DType],
        insts: &[Inst],
        read: fn(u32) -> String,
    ) -> Result<Vec<String>, String> {
        let mut lines = Vec::with_capacity(insts.len());
        for (v, inst) in insts.iter().enumerate() {
            let value = self
                .value(inputs, insts, inst, read)
                .map_err(|m| format!("instruction {v} ({:?} of {}): {m}", inst.op, inst.dtype))?;
            lines.push(format!("const {} v{v} = {value};", ComputeType::of(inst.dtype).c_type()));
        }
        Ok(lines)
    }

    /// Value `v<v>` (of dtype `d`) converted to `d`'s stored form.
    pub(super) fn store(&mut self, d: DType, v: u32) -> String {
        store(d, &format!("v{v}"), ComputeType::of(d), &mut self.helpers)
    }

    /// `v` of compute type `ct` rounded to what `d` holds ([`round_to`]).
    pub(super) fn round_to(&mut self, d: DType, v: &str, ct: ComputeType) -> String {
        round_to(d, v, ct, &mut self.helpers)
    }

    /// `v` of compute type `ct` converted to `d`'s stored form.
    pub(super) fn store_expr(&mut self, d: DType, v: &str, ct: ComputeType) -> String {
        store(d, v, ct, &mut self.helpers)
    }

    /// The source of every helper the emitted statements use.
    pub(super) fn helper_source(&self) -> String {
        let mut src: String = self.helpers.helpers.iter().map(|h| ops::helper(h, ComputeType::F32)).collect();
        src.extend(self.rem_types.iter().map(|&ct| ops::helper("kiln_rem", ct)));
        src
    }

    /// The right-hand side computing `inst` (operands are the `v<N>` temporaries), or why
    /// the CUDA emitter does not generate it.
    fn value(
        &mut self,
        inputs: &[DType],
        insts: &[Inst],
        inst: &Inst,
        read: fn(u32) -> String,
    ) -> Result<String, String> {
        let d = inst.dtype;
        let ct = ComputeType::of(d);
        let helpers = &mut self.helpers;
        let val = |v: u32| format!("v{v}");
        let zero_of = |v: u32| ComputeType::of(insts[v as usize].dtype).lit(0.0);
        let truth = |v: u32| format!("({} != {})", val(v), zero_of(v));
        Ok(match inst.op {
            InstOp::Load(i) => load(inputs[i as usize], &read(i), ct, helpers),
            InstOp::Scalar(j) => {
                round_to(d, &format!("__longlong_as_double((long long)s{j})"), ComputeType::F64, helpers)
            }
            InstOp::Const(c) => round_to(d, &ComputeType::F64.lit(c), ComputeType::F64, helpers),
            InstOp::Unary(op, a) => {
                let f = ops::unary_in(op, &val(a), ct)
                    .ok_or_else(|| format!("{} is not computed in {}", op.name(), ct.c_type()))?;
                round_to(d, &f, ct, helpers)
            }
            InstOp::Binary(op, a, b) => {
                let (f, helper) = ops::binary_in(op, &val(a), &val(b), ct)
                    .ok_or_else(|| format!("{} is not computed in {}", op.name(), ct.c_type()))?;
                match helper {
                    Some("kiln_rem") if !self.rem_types.contains(&ct) => self.rem_types.push(ct),
                    Some("kiln_rem") | None => {}
                    Some(h) => {
                        helpers.helpers.insert(h);
                    }
                }
                round_to(d, &f, ct, helpers)
            }
            InstOp::Cmp(op, a, b) => ops::cmp(op, &val(a), &val(b), ComputeType::I64),
            InstOp::Logical(op, a, b) => {
                let c = match op {
                    LogicalOp::And => "&&",
                    LogicalOp::Or => "||",
                    LogicalOp::Xor => "!=",
                };
                format!("({} {c} {}) ? 1LL : 0LL", truth(a), truth(b))
            }
            InstOp::Not(a) => format!("({} == {}) ? 1LL : 0LL", val(a), zero_of(a)),
            InstOp::Where(c, a, b) => format!("({} != 0LL) ? {} : {}", val(c), val(a), val(b)),
            InstOp::Cast(a) => round_to(d, &val(a), ComputeType::of(insts[a as usize].dtype), helpers),
            InstOp::Rand { dist, params } => {
                // The CPU generator's numbers (`super::philox`), seed and offset as run-time
                // scalars.
                helpers.helpers.insert("kiln_philox");
                super::philox::fused_draw(dist, d, params)
                    .ok_or_else(|| format!("random draws of {d} are not generated"))?
            }
            // Validation admits it only in reduction kernels, which declare `red<s>` (the
            // stage's value, rounded to its output dtype, in that dtype's compute type).
            InstOp::Reduced(s) => format!("red{s}"),
        })
    }
}
