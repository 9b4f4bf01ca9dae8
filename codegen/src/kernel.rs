//! The fused-kernel IR: what one generated kernel computes, independent of the back end.
//!
//! The fusion pass turns a group of captured elementwise nodes into an [`ElementwiseKernel`];
//! the Cranelift emitter ([`crate::cpu`]) turns that into machine code. The kernel's meaning is
//! defined op by op: every instruction produces exactly what the eager op of the same kind would
//! produce for a tensor of the instruction's dtype (floats compute in their own precision, f32 in
//! f32 and f64 in f64; integers in i64 with wrapping, then cast to the instruction's dtype; Bool
//! values are 0 or 1), so a fused kernel equals the chain of eager ops it replaces, up to the
//! stated error of the inline transcendental approximations.

use crate::ir::RandDist;
use kiln_runtime::op_kind::{BinaryOp, CmpOp, LogicalOp, ReduceOp, UnaryOp};
use kiln_runtime::DType;
use std::hash::{Hash, Hasher};

/// An SSA value: the index of the instruction that produces it.
pub type Val = u32;

/// What the innermost dimension of the iteration space does to an input's address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InnerStride {
    /// Stride 0: the same element for the whole row (a broadcast along the inner dim).
    Broadcast,
    /// Stride 1: consecutive elements (vector loads).
    Unit,
    /// Any other stride (given at run time).
    Strided,
}

/// One input buffer of a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelInput {
    /// Element type in memory.
    pub dtype: DType,
    /// How the inner dim steps through it (the kernel is specialized on this).
    pub inner: InnerStride,
}

/// One instruction: an op and the dtype of its result.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Inst {
    /// What is computed.
    pub op: InstOp,
    /// The result's dtype.
    pub dtype: DType,
}

/// The ops of the IR (operands are earlier instructions).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum InstOp {
    /// The element of input `i` at the current index; `dtype` is the input's dtype.
    Load(u32),
    /// Run-time scalar argument `j` (passed as f64, converted to `dtype` as the eager
    /// scalar-to-tensor conversion does: truncation toward zero for integers, `!= 0` for Bool).
    Scalar(u32),
    /// A constant, converted to `dtype` like [`InstOp::Scalar`].
    Const(f64),
    /// `op(a)`; `a` has the instruction's dtype.
    Unary(UnaryOp, Val),
    /// `op(a, b)`; both have the instruction's dtype.
    Binary(BinaryOp, Val, Val),
    /// A comparison of two values of the same dtype; the instruction's dtype is Bool.
    Cmp(CmpOp, Val, Val),
    /// A logical op on the truth (`!= 0`) of two values of any dtypes; the result is Bool.
    Logical(LogicalOp, Val, Val),
    /// Logical not of the truth of a value of any dtype; the result is Bool.
    Not(Val),
    /// `cond ? a : b` with `cond` Bool and `a`, `b` of the instruction's dtype.
    Where(Val, Val, Val),
    /// The value converted to the instruction's dtype with the eager cast rules (floats to
    /// integers truncate toward zero, anything to Bool is `!= 0`, integers wrap).
    Cast(Val),
    /// The current output's value of reduction stage `s` ([`ReduceKernel::stages`]), after that
    /// stage's [`ReduceStage::scale`] and its conversion to [`ReduceStage::output`] (so the
    /// instruction's dtype must be that `output`). Valid only in a [`ReduceKernel`]: in the
    /// prologue of a later stage (`s` below the reading stage's index) and in the
    /// [`Epilogue`] (any stage); elementwise kernels reject it.
    Reduced(u32),
    /// Element `index` of a Philox draw in distribution `dist`, exactly as the eager
    /// `rand`/`randn` of the instruction's dtype (F32 or F64) make it. The draw's seed and
    /// offset are run-time scalars `params..params + 4` (seed low and high 32 bits, offset low
    /// and high 32 bits: [`crate::ir::draw_words`]); `index` is the current element's row-major
    /// linear index in the whole iteration space, `index_base + row·inner + j` (see
    /// [`KernelArgs::index_base`]).
    Rand {
        /// Uniform on `[0, 1)` or standard normal.
        dist: RandDist,
        /// The first of the four run-time scalars of the draw.
        params: u32,
    },
}

impl InstOp {
    /// The same op with each operand `v` replaced by `f(v)`.
    pub fn map_vals(self, f: impl Fn(Val) -> Val) -> InstOp {
        use InstOp::*;
        match self {
            Unary(op, a) => Unary(op, f(a)),
            Binary(op, a, b) => Binary(op, f(a), f(b)),
            Cmp(op, a, b) => Cmp(op, f(a), f(b)),
            Logical(op, a, b) => Logical(op, f(a), f(b)),
            Not(a) => Not(f(a)),
            Where(c, a, b) => Where(f(c), f(a), f(b)),
            Cast(a) => Cast(f(a)),
            Load(_) | Scalar(_) | Const(_) | Reduced(_) | Rand { .. } => self,
        }
    }
}

/// A fused elementwise kernel over an iteration space of `rank` dims (sizes and input strides
/// are run-time arguments; see [`KernelArgs`]). Each output is written contiguously in the
/// iteration space's row-major order.
#[derive(Clone, Debug, PartialEq)]
pub struct ElementwiseKernel {
    /// Dims of the iteration space (at least 1).
    pub rank: usize,
    /// The input buffers.
    pub inputs: Vec<KernelInput>,
    /// How many run-time scalars [`InstOp::Scalar`] may read.
    pub scalars: usize,
    /// The instructions in dependency order.
    pub insts: Vec<Inst>,
    /// The values written out, one buffer each, in the value's dtype.
    pub outputs: Vec<Val>,
}

/// How many cheap instructions a costly one ([`InstOp::is_costly`]) counts as when a launch
/// sizes its tasks ([`ElementwiseKernel::work_per_element`]). Chosen on the LSTM bench, whose
/// step kernels of sigmoids and tanhs it spreads over both threads: compiled step 48.6-49.8 ms
/// with 8 against 57.3-62.6 ms with 0 (Zen 5 EPYC, alternating runs of one build).
pub const COSTLY_WEIGHT: usize = 8;

impl InstOp {
    /// True for ops far costlier than an add: inline polynomials (exp, log, tanh, sigmoid,
    /// erf, trig, …) and helper calls (`rem`, `pow`, `atan2`).
    pub fn is_costly(&self) -> bool {
        use UnaryOp::*;
        match *self {
            InstOp::Unary(u, _) => !matches!(
                u,
                Neg | Abs | Sqrt | Rsqrt | Reciprocal | Square | Floor | Ceil | Trunc | Round | Relu | Sign
            ),
            InstOp::Binary(b, ..) => matches!(b, BinaryOp::Rem | BinaryOp::Pow | BinaryOp::Atan2),
            _ => false,
        }
    }
}

impl ElementwiseKernel {
    /// The dtype of value `v`.
    pub fn dtype(&self, v: Val) -> DType {
        self.insts[v as usize].dtype
    }

    /// The work of one element in units of a cheap instruction's: 1, plus
    /// [`COSTLY_WEIGHT`] per costly instruction. A launch gives each task that much less
    /// of the iteration space, so a kernel of sigmoids and tanhs over a few thousand elements
    /// (an LSTM step's gates) still spreads over the threads.
    pub fn work_per_element(&self) -> usize {
        1 + COSTLY_WEIGHT * self.insts.iter().filter(|i| i.op.is_costly()).count()
    }

    /// A structural hash: equal for kernels that compile to the same code.
    pub fn structural_hash(&self) -> u64 {
        let mut h = ahash_hasher();
        self.rank.hash(&mut h);
        self.inputs.hash(&mut h);
        self.scalars.hash(&mut h);
        self.outputs.hash(&mut h);
        hash_insts(&self.insts, &mut h);
        h.finish()
    }

    /// Checks operand order, input and scalar indices and the dtype rules above
    /// ([`InstOp::Reduced`] is refused: it exists only in reduction kernels).
    pub fn validate(&self) -> Result<(), String> {
        if self.rank == 0 {
            return Err("the iteration space needs at least one dim".into());
        }
        check_insts(&self.inputs, self.scalars, &self.insts, &self.outputs, &[])
    }
}

/// The rules of [`ElementwiseKernel::validate`] for `insts` reading `inputs` and `scalars`
/// scalars, with `outputs` defined; `reduced[s]` is the dtype [`InstOp::Reduced`]`(s)` must
/// have (stages past its end may not be read: all of them in elementwise kernels).
fn check_insts(
    inputs: &[KernelInput],
    scalars: usize,
    insts: &[Inst],
    outputs: &[Val],
    reduced: &[DType],
) -> Result<(), String> {
    for (k, inst) in insts.iter().enumerate() {
        let before = |v: Val| -> Result<DType, String> {
            if (v as usize) < k {
                Ok(insts[v as usize].dtype)
            } else {
                Err(format!("instruction {k} reads value {v}, which is not defined before it"))
            }
        };
        let same = |v: Val| -> Result<(), String> {
            let d = before(v)?;
            if d != inst.dtype {
                return Err(format!(
                    "instruction {k} ({:?}) of dtype {} reads value {v} of dtype {d}",
                    inst.op, inst.dtype
                ));
            }
            Ok(())
        };
        match inst.op {
            InstOp::Load(i) => {
                let input = inputs.get(i as usize).ok_or_else(|| format!("instruction {k} loads input {i}, but there are {}", inputs.len()))?;
                if input.dtype != inst.dtype {
                    return Err(format!("instruction {k} loads input {i} of dtype {} as {}", input.dtype, inst.dtype));
                }
            }
            InstOp::Rand { params, .. } => {
                if params as usize + 4 > scalars {
                    return Err(format!("random instruction {k} reads scalars {params}..{}, but there are {scalars}", params + 4));
                }
                if !matches!(inst.dtype, DType::F32 | DType::F64) {
                    return Err(format!("random instruction {k} must be F32 or F64, not {}", inst.dtype));
                }
            }
            InstOp::Scalar(j) if j as usize >= scalars => {
                return Err(format!("instruction {k} reads scalar {j}, but there are {scalars}"));
            }
            InstOp::Scalar(_) | InstOp::Const(_) => {}
            InstOp::Unary(_, a) => same(a)?,
            InstOp::Binary(_, a, b) => {
                same(a)?;
                same(b)?;
            }
            InstOp::Cmp(_, a, b) => {
                if before(a)? != before(b)? || inst.dtype != DType::Bool {
                    return Err(format!("comparison {k} needs two operands of one dtype and a Bool result"));
                }
            }
            InstOp::Logical(_, a, b) => {
                before(a)?;
                before(b)?;
                if inst.dtype != DType::Bool {
                    return Err(format!("logical op {k} must have a Bool result"));
                }
            }
            InstOp::Not(a) => {
                before(a)?;
                if inst.dtype != DType::Bool {
                    return Err(format!("logical not {k} must have a Bool result"));
                }
            }
            InstOp::Where(c, a, b) => {
                if before(c)? != DType::Bool {
                    return Err(format!("where {k} needs a Bool condition"));
                }
                same(a)?;
                same(b)?;
            }
            InstOp::Cast(a) => {
                before(a)?;
            }
            InstOp::Reduced(s) => match reduced.get(s as usize) {
                None if reduced.is_empty() => {
                    return Err(format!(
                        "instruction {k} reads the reduced value of stage {s} (InstOp::Reduced), which only a reduction kernel's epilogue or later stages may do"
                    ))
                }
                None => {
                    return Err(format!(
                        "instruction {k} reads the reduced value of stage {s} (InstOp::Reduced), but only stages 0..{} are computed before it",
                        reduced.len()
                    ))
                }
                Some(&d) if d != inst.dtype => {
                    return Err(format!("instruction {k} reads the reduced value of stage {s} as {}, but that stage's output dtype is {d}", inst.dtype));
                }
                Some(_) => {}
            },
        }
    }
    for &o in outputs {
        if o as usize >= insts.len() {
            return Err(format!("output value {o} is not defined"));
        }
    }
    Ok(())
}

/// Hashes instructions: each one's dtype and op.
fn hash_insts(insts: &[Inst], h: &mut impl Hasher) {
    for inst in insts {
        inst.dtype.hash(h);
        hash_op(&inst.op, h);
    }
}

/// Hashes an op, its float constant by bits.
fn hash_op(op: &InstOp, h: &mut impl Hasher) {
    std::mem::discriminant(op).hash(h);
    match *op {
        InstOp::Load(i) | InstOp::Scalar(i) => i.hash(h),
        InstOp::Const(c) => c.to_bits().hash(h),
        InstOp::Unary(o, a) => (o, a).hash(h),
        InstOp::Binary(o, a, b) => (o, a, b).hash(h),
        InstOp::Cmp(o, a, b) => (o, a, b).hash(h),
        InstOp::Logical(o, a, b) => (o, a, b).hash(h),
        InstOp::Not(a) | InstOp::Cast(a) => a.hash(h),
        InstOp::Where(c, a, b) => (c, a, b).hash(h),
        InstOp::Reduced(s) => s.hash(h),
        InstOp::Rand { dist, params } => (dist, params).hash(h),
    }
}

/// A hasher with fixed keys, so structural hashes are the same in every process.
pub fn ahash_hasher() -> ahash::AHasher {
    ahash::RandomState::with_seeds(0x6b69_6c6e, 0x636f_6d70, 0x696c_6521, 0x0000_0001).build_hasher()
}

use std::hash::BuildHasher;

/// The run-time arguments of one call of a compiled elementwise kernel (C layout: the JIT code
/// reads these fields at fixed offsets).
///
/// The iteration space `[d0, …, d(r-1)]` is seen as `outer × inner` rows with `inner =
/// d(r-1)`; one call computes rows `row_start..row_end`, so callers split work across threads
/// by rows. Row `r`'s outer multi-index is `r` decomposed over `d0..d(r-2)` (row-major); input
/// `i`'s element for multi-index `idx` is at `inputs[i] + Σ idx[d]·strides[i·rank + d]`
/// elements; output `o`'s element is at `outputs[o] + row·inner + j`, and its linear index
/// (what [`InstOp::Rand`] draws) is `index_base + row·inner + j`: a caller that splits one row
/// across threads moves the base pointers to each chunk and passes the chunk's first index as
/// `index_base`. For a [`ReduceKernel`], rows are output elements instead, `outputs[s]`
/// receives the values of stage `s` and `outputs[stages.len()..]` the [`Epilogue`]'s values
/// (see there).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct KernelArgs {
    /// One base pointer per input (already at the view's offset).
    pub inputs: *const *const u8,
    /// One base pointer per output.
    pub outputs: *const *mut u8,
    /// The run-time scalars.
    pub scalars: *const f64,
    /// `rank` sizes.
    pub shape: *const usize,
    /// `inputs.len() × rank` element strides (0 for broadcast dims), input-major.
    pub strides: *const isize,
    /// First row to compute.
    pub row_start: usize,
    /// One past the last row to compute.
    pub row_end: usize,
    /// The linear index of element `(row 0, j 0)` in the whole iteration space: 0, unless
    /// the base pointers were moved to a chunk of a row (then that chunk's first index).
    /// Only [`InstOp::Rand`] reads it.
    pub index_base: usize,
}

/// A fused reduction kernel: one or more reductions ([`ReduceKernel::stages`]) over the trailing
/// dims of an iteration space, computed one after the other for each output, and an optional
/// [`Epilogue`] over each output's reduced sub-space.
///
/// The iteration space `[d0, …, d(rank-1)]` is `outer × reduced`: the **last** `reduce_rank`
/// dims are reduced, the first `rank - reduce_rank` dims index the outputs (row-major, so
/// output `o` is `o` decomposed over `d0..d(rank-reduce_rank-1)`). Each stage's prologue
/// [`ReduceStage::insts`] follows the rules of [`ElementwiseKernel`] (same IR, same dtype rules,
/// inputs' [`KernelInput::inner`] describes the last dim of the iteration space) and is
/// evaluated at every element of output `o`'s reduced sub-space; stage `k`'s prologue may also
/// read [`InstOp::Reduced`]`(j)`, output `o`'s value of an earlier stage `j < k` (softmax's
/// `Σ exp(x - max)` reads the max; layer norm's `Σ (x - mean)²` the mean). The reduction
/// follows the eager kernels (`kiln_runtime::cpu::reduce`):
/// - `Sum`/`Prod` of float values accumulate in f64, of integer or Bool values in i64
///   (wrapping); on the CPU's f32 vector plan a sum first adds the four vectors of one
///   unrolled iteration in f32 (pairwise, two roundings per lane), then accumulates that in
///   f64 (promoting every vector cost most of a sum's loop);
/// - `Max`/`Min` compare in the value's dtype (exactly: f32 is compared as f64) and NaN wins;
///   the sign of a zero result may differ from eager when `-0.0` and `+0.0` tie.
///
/// Each output's accumulator of stage `s` is then multiplied by run-time scalar
/// [`ReduceStage::scale`] when given (in f64; only for float values: `mean` passes `1/n`),
/// converted once to [`ReduceStage::output`] with the eager cast rules (an f64 accumulator rounds
/// to f32 once) and written contiguously at `outputs[s] + o`. An empty reduction writes the
/// identity (0, 1, or for Max/Min the lowest/highest value of the dtype, -inf/+inf for floats;
/// eager rejects empty max/min, so callers do too).
///
/// With an [`Epilogue`], once every stage of output `o` is written its instructions are
/// evaluated at every element of that output's reduced sub-space and their values written out
/// (see there).
///
/// Summation order differs from eager (vector lanes, then the scalar tail): for f32 values
/// the groups of four and the f64 accumulation keep `|compiled − eager| ≤ 2^-23·Σ|x|` before
/// the final rounding, about one f32 ulp of the result in practice; f64 sums differ by a few
/// ulps of `Σ|x|`.
///
/// A call computes outputs `args.row_start..args.row_end` ([`KernelArgs`]: `row_start`/
/// `row_end` index output elements, `shape` has `rank` sizes, `strides` is `inputs × rank`
/// element strides, input-major, and `outputs` holds one pointer per stage, then one per
/// [`Epilogue::outputs`] entry).
#[derive(Clone, Debug, PartialEq)]
pub struct ReduceKernel {
    /// Dims of the iteration space (at least 1).
    pub rank: usize,
    /// How many trailing dims are reduced (`1..=rank`).
    pub reduce_rank: usize,
    /// The input buffers.
    pub inputs: Vec<KernelInput>,
    /// How many run-time scalars [`InstOp::Scalar`] (and each stage's `scale`) may read.
    pub scalars: usize,
    /// The reductions, at least one, computed one after the other for each output.
    pub stages: Vec<ReduceStage>,
    /// What is computed from each output's stage values over its reduced sub-space (softmax's
    /// normalisation, layer norm's scaling), in the same call; `None` for a plain reduction.
    pub epilogue: Option<Epilogue>,
}

/// One reduction of a [`ReduceKernel`]: a prologue evaluated over each output's reduced
/// sub-space, reduced with `op`.
#[derive(Clone, Debug, PartialEq)]
pub struct ReduceStage {
    /// The prologue, in dependency order (values index this list).
    pub insts: Vec<Inst>,
    /// The value reduced.
    pub reduced: Val,
    /// The reduction.
    pub op: ReduceOp,
    /// The dtype each output element is converted to (and written in).
    pub output: DType,
    /// Run-time scalar the accumulator is multiplied by before conversion (floats only).
    pub scale: Option<u32>,
}

impl ReduceStage {
    /// The dtype of value `v` of this stage's prologue.
    pub fn dtype(&self, v: Val) -> DType {
        self.insts[v as usize].dtype
    }

    /// Hashes what makes the stage's code: its prologue, reduced value, op, output and scale.
    fn hash_into(&self, h: &mut impl Hasher) {
        self.insts.len().hash(h);
        hash_insts(&self.insts, h);
        self.reduced.hash(h);
        self.op.hash(h);
        self.output.hash(h);
        self.scale.hash(h);
    }
}

/// A reduce→broadcast epilogue of a [`ReduceKernel`]: elementwise instructions evaluated,
/// after every stage of output `o` is done and its value written to `outputs[s] + o`, at every
/// element of that output's reduced sub-space (the trailing `reduce_rank` dims).
///
/// The instructions follow the rules of [`ElementwiseKernel`] over the kernel's inputs,
/// strides and scalars (those of the prologues): [`InstOp::Load`] reads input `i` at the
/// current full multi-index, [`InstOp::Scalar`] and [`InstOp::Const`] as usual, and
/// [`InstOp::Reduced`]`(s)` is output `o`'s value of stage `s` after its `scale` and the
/// conversion to its [`ReduceStage::output`] (the instruction's dtype must be that `output`).
/// The epilogue cannot read prologue values: it recomputes from loads what it needs.
///
/// Output `e`'s values are written contiguously in the row-major order of the whole iteration
/// space: the element at reduced multi-index `r` (its row-major rank among the `R` elements of
/// the reduced dims) of output `o` goes to `outputs[S + e] + o·R + r` (`S` the number of
/// stages; in elements of the value's dtype), so buffer `S + e` holds as many elements as the
/// iteration space. The CPU back end runs it on the F32X4/F64X2 plan under the rules of
/// elementwise kernels (each `Reduced` counting as a run-time scalar of its stage's `output`).
#[derive(Clone, Debug, PartialEq)]
pub struct Epilogue {
    /// The instructions, in dependency order (values index this list, not the prologues').
    pub insts: Vec<Inst>,
    /// The values written out, one buffer each (`outputs[S + e]`), in the value's dtype; at
    /// least one.
    pub outputs: Vec<Val>,
}

impl Epilogue {
    /// The dtype of value `v`.
    pub fn dtype(&self, v: Val) -> DType {
        self.insts[v as usize].dtype
    }
}

impl ReduceKernel {
    /// Stage `s`'s prologue seen as an elementwise kernel with the reduced value as its one
    /// output (rank, inputs and scalars as this kernel's; its [`InstOp::Reduced`] reads, if
    /// any, make it invalid as an elementwise kernel).
    pub fn stage_prologue(&self, s: usize) -> ElementwiseKernel {
        let st = &self.stages[s];
        ElementwiseKernel {
            rank: self.rank,
            inputs: self.inputs.clone(),
            scalars: self.scalars,
            insts: st.insts.clone(),
            outputs: vec![st.reduced],
        }
    }

    /// A structural hash: equal for kernels that compile to the same code.
    pub fn structural_hash(&self) -> u64 {
        let mut h = ahash_hasher();
        "reduce".hash(&mut h);
        self.rank.hash(&mut h);
        self.inputs.hash(&mut h);
        self.scalars.hash(&mut h);
        self.reduce_rank.hash(&mut h);
        self.stages.len().hash(&mut h);
        for st in &self.stages {
            st.hash_into(&mut h);
        }
        if let Some(ep) = &self.epilogue {
            "epilogue".hash(&mut h);
            ep.outputs.hash(&mut h);
            ep.insts.len().hash(&mut h);
            hash_insts(&ep.insts, &mut h);
        }
        h.finish()
    }

    /// Checks `reduce_rank`, that there is at least one stage, each stage's prologue as
    /// [`ElementwiseKernel::validate`] does except that stage `k` may read
    /// [`InstOp::Reduced`]`(j)` for `j < k` (of dtype stage `j`'s `output`), its reduced value
    /// and its `scale` (a valid scalar index, and a float reduced value), and the epilogue (the
    /// same rules, with `Reduced` of any stage, and at least one output). No part may draw
    /// random numbers ([`InstOp::Rand`] is refused).
    pub fn validate(&self) -> Result<(), String> {
        if self.reduce_rank == 0 || self.reduce_rank > self.rank {
            return Err(format!("reduce_rank {} must be in 1..={}", self.reduce_rank, self.rank));
        }
        if self.stages.is_empty() {
            return Err("a reduction kernel needs at least one stage".into());
        }
        let outputs: Vec<DType> = self.stages.iter().map(|s| s.output).collect();
        for (s, st) in self.stages.iter().enumerate() {
            let what = if self.stages.len() == 1 { "prologue".to_string() } else { format!("stage {s} prologue") };
            check_insts(&self.inputs, self.scalars, &st.insts, &[st.reduced], &outputs[..s])
                .map_err(|e| format!("{what}: {e}"))?;
            if let Some(k) = st.insts.iter().position(|i| matches!(i.op, InstOp::Rand { .. })) {
                return Err(format!(
                    "{what}: instruction {k} draws random numbers, which a reduction kernel does not support"
                ));
            }
            if let Some(j) = st.scale {
                if j as usize >= self.scalars {
                    return Err(format!("{what}: scale reads scalar {j}, but there are {}", self.scalars));
                }
                if !st.dtype(st.reduced).is_float() {
                    return Err(format!("{what}: scale needs a float reduced value, not {}", st.dtype(st.reduced)));
                }
            }
        }
        if let Some(ep) = &self.epilogue {
            if ep.outputs.is_empty() {
                return Err("epilogue: it needs at least one output".into());
            }
            check_insts(&self.inputs, self.scalars, &ep.insts, &ep.outputs, &outputs)
                .map_err(|e| format!("epilogue: {e}"))?;
            if let Some(k) = ep.insts.iter().position(|i| matches!(i.op, InstOp::Rand { .. })) {
                return Err(format!(
                    "epilogue: instruction {k} draws random numbers, which a reduction kernel does not support"
                ));
            }
        }
        Ok(())
    }
}
