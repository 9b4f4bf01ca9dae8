//! Reductions and softmax as CUDA C: one kernel per (reduction, input dtype, number of kept
//! dims, number of reduced dims), with shapes, strides and offsets as kernel arguments (as the
//! strided elementwise kernels, [`super::strided`]).
//!
//! # Schedule
//! Each output element (a *row*: the reduced elements of one index of the kept dims) belongs to
//! a **group** of threads: a warp (32 lanes) for short rows, or the whole block of
//! [`REDUCE_BLOCK`] threads for long ones (the launch chooses, [`super::reduce_launch`]). A
//! group's threads stride over the row (lane `l` takes elements `l, l + group, …`), each
//! folding its elements in order into its accumulator; the group then combines the
//! accumulators with a warp butterfly (`__shfl_xor_sync`) and, for a block group, the warps'
//! values through shared memory, in a fixed order, so every thread of the group holds the same
//! result and the result depends only on the launch geometry (deterministic). Groups stride
//! over the outputs (grid-stride loop).
//!
//! `cumsum` uses the same index space and output views as softmax, but one lane per row
//! walks it in order (a scan in the CPU's order of additions; the launch gives it a warp).
//!
//! Two-pass reductions run both passes in one kernel, reading the row twice: `var`/`std` (the
//! mean, then Σ (x − mean)², as the CPU's two passes), `logsumexp` (the max, then Σ exp(x −
//! max)), softmax and log-softmax (the max, the sum of exponentials, then a third pass writing
//! each element).
//!
//! # Arithmetic (the CPU's rules, `kiln_runtime::cpu::reduce`)
//! - Elements load in their compute type (f16/bf16 as f32, integers and bool as `long long`).
//! - **Accumulators** of sums, products, means, variances and logsumexp's sum: `double` for f32
//!   and f64 input, `float` for f16 and bf16, `long long` (wrapping, through unsigned
//!   arithmetic) for integers and bool. The CPU accumulates every float dtype in f64; an f32
//!   sum here therefore differs from the CPU's only by the order of f64 additions (far below an
//!   f32 ulp of the result), an f16/bf16 sum by at most one rounding of f32 before the final
//!   rounding to 16 bits. Softmax sums its exponentials in the compute type, as the CPU does.
//! - max/min compare in the compute type and **NaN propagates**; argmax/argmin and
//!   `max_dim`/`min_dim` pick the first NaN, else the first index among equal extremes
//!   (PyTorch's CPU rule), whatever order the group combines in.
//! - all/any: `x != 0` (NaN counts as non-zero); Bool output, U8 for U8 input.
//! - Result dtypes: sums and products of integer and bool input are i64, indices i64; every
//!   other result keeps the input dtype (the tensor layer rejects what PyTorch rejects first).

use super::emit::{dtype_tag, CUDA_CODEGEN_VERSION};
use super::ops::{self, ComputeType};
use super::strided::{load, storage_type, store, MAX_DIMS};
use kiln_runtime::cuda::{CudaError, CudaErrorKind};
use kiln_runtime::DType;
use std::collections::BTreeSet;
use std::fmt::Write;

/// Threads per block of the reduction kernels.
pub const REDUCE_BLOCK: u32 = 256;

/// A reduction (or a softmax, which reduces each row twice and then writes it) on CUDA.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CudaReduce {
    /// Σ x (integer and bool input give i64).
    Sum,
    /// Σ x / n (float input).
    Mean,
    /// Π x (integer and bool input give i64).
    Prod,
    /// The largest value; NaN propagates.
    Max,
    /// The smallest value; NaN propagates.
    Min,
    /// The index of the largest (`max`) or smallest value: the first NaN, else the first among
    /// ties; with `values`, the value too (`max_dim`/`min_dim`: values in `out`, indices in a
    /// second output), else the index alone in `out` (`argmax`/`argmin`).
    Arg {
        /// Largest (true) or smallest.
        max: bool,
        /// Whether the kernel writes the values as well as the indices.
        values: bool,
    },
    /// Whether every element is non-zero.
    All,
    /// Whether any element is non-zero.
    Any,
    /// The variance with the correction given as the launch's parameter (an `i64`), divided by
    /// `max(n - correction, 0)`; with `sqrt`, the standard deviation (float input).
    Var {
        /// Standard deviation instead of variance.
        sqrt: bool,
    },
    /// log Σ exp(x), shifted by the row's max (0 when the max is infinite), float input.
    LogSumExp,
    /// softmax (or log-softmax with `log`) along the reduced dim, written elementwise into an
    /// output shaped like the input (float input).
    Softmax {
        /// log-softmax instead of softmax.
        log: bool,
    },
    /// Cumulative sums along the reduced dim into an output shaped like the input (integer and
    /// bool input give i64): one lane per row adds in order, as the CPU's sequential scan.
    CumSum,
}

impl CudaReduce {
    /// Every reduction kind.
    pub const ALL: [CudaReduce; 17] = [
        CudaReduce::Sum,
        CudaReduce::Mean,
        CudaReduce::Prod,
        CudaReduce::Max,
        CudaReduce::Min,
        CudaReduce::Arg { max: true, values: false },
        CudaReduce::Arg { max: false, values: false },
        CudaReduce::Arg { max: true, values: true },
        CudaReduce::Arg { max: false, values: true },
        CudaReduce::All,
        CudaReduce::Any,
        CudaReduce::Var { sqrt: false },
        CudaReduce::Var { sqrt: true },
        CudaReduce::LogSumExp,
        CudaReduce::Softmax { log: false },
        CudaReduce::Softmax { log: true },
        CudaReduce::CumSum,
    ];

    /// The name in kernel names and messages.
    pub fn name(self) -> &'static str {
        match self {
            CudaReduce::Sum => "sum",
            CudaReduce::Mean => "mean",
            CudaReduce::Prod => "prod",
            CudaReduce::Max => "amax",
            CudaReduce::Min => "amin",
            CudaReduce::Arg { max: true, values: false } => "argmax",
            CudaReduce::Arg { max: false, values: false } => "argmin",
            CudaReduce::Arg { max: true, values: true } => "max_dim",
            CudaReduce::Arg { max: false, values: true } => "min_dim",
            CudaReduce::All => "all",
            CudaReduce::Any => "any",
            CudaReduce::Var { sqrt: false } => "var",
            CudaReduce::Var { sqrt: true } => "std",
            CudaReduce::LogSumExp => "logsumexp",
            CudaReduce::Softmax { log: false } => "softmax",
            CudaReduce::Softmax { log: true } => "log_softmax",
            CudaReduce::CumSum => "cumsum",
        }
    }

    /// Whether the kind takes input of `dtype` (float-only kinds refuse the others).
    pub fn accepts(self, dtype: DType) -> bool {
        match self {
            CudaReduce::Mean | CudaReduce::Var { .. } | CudaReduce::LogSumExp | CudaReduce::Softmax { .. } => {
                dtype.is_float()
            }
            _ => true,
        }
    }

    /// The dtype of the kernel's `out` for input of `dtype`.
    pub fn out_dtype(self, dtype: DType) -> DType {
        match self {
            CudaReduce::Sum | CudaReduce::Prod | CudaReduce::CumSum if !dtype.is_float() => DType::I64,
            CudaReduce::Arg { values: false, .. } => DType::I64,
            CudaReduce::All | CudaReduce::Any if dtype == DType::U8 => DType::U8,
            CudaReduce::All | CudaReduce::Any => DType::Bool,
            _ => dtype,
        }
    }

    /// Whether the kernel has a second output, the i64 indices (`max_dim`/`min_dim`).
    pub fn has_indices(self) -> bool {
        matches!(self, CudaReduce::Arg { values: true, .. })
    }

    /// Whether the output is shaped like the input (softmax, cumsum), with strides of its own.
    pub fn keeps_shape(self) -> bool {
        matches!(self, CudaReduce::Softmax { .. } | CudaReduce::CumSum)
    }

    /// Whether one lane of each group does the work (a scan): the launch gives it a warp.
    pub fn is_scan(self) -> bool {
        self == CudaReduce::CumSum
    }
}

/// The CUDA C kernel of one eager [`CudaReduce`] (the IR `kernel::ReduceKernel` of
/// `kiln::compile` becomes a [`super::FusedReduceKernel`] instead), and what a launch needs to
/// know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaReduceKernel {
    /// The `extern "C"` kernel's name (`kiln_red_<kind>_<dtype>_k<K>_r<R>`).
    pub name: String,
    /// The whole CUDA C source (header line, shared prelude, helpers, kernel).
    pub source: String,
    /// The reduction.
    pub kind: CudaReduce,
    /// The input's dtype.
    pub dtype: DType,
    /// The dtype of `out`.
    pub out: DType,
    /// Number of kept dims (after collapsing).
    pub kept: usize,
    /// Number of reduced dims (after collapsing).
    pub red: usize,
    helpers: BTreeSet<&'static str>,
    function: String,
}

/// What every reduction kernel uses: the (value, index) pair of arg-reductions, warp shuffles,
/// the group reduction, and the NaN-aware picks.
pub(super) const PRELUDE: &str = r#"template <typename T> struct KilnArg { T v; long long i; };
template <typename T> __device__ __forceinline__ T kiln_shfl(T v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }
template <typename T> __device__ __forceinline__ KilnArg<T> kiln_shfl(KilnArg<T> a, int m) {
    KilnArg<T> r;
    r.v = kiln_shfl(a.v, m);
    r.i = kiln_shfl(a.i, m);
    return r;
}
// Every thread of the group (a warp when group == 32, else the whole block) gets the combined
// value, in an order fixed by the geometry: a butterfly within each warp, then the warps' values
// in warp order (every thread reads them all). f is commutative, so the butterfly's lanes agree.
template <typename T, typename F>
__device__ __forceinline__ T kiln_group_reduce(T v, F f, unsigned long long group, T* scratch) {
    for (int m = 16; m > 0; m >>= 1) v = f(v, kiln_shfl(v, m));
    if (group <= 32ULL) return v;
    __syncthreads();
    if ((threadIdx.x & 31u) == 0u) scratch[threadIdx.x >> 5] = v;
    __syncthreads();
    T r = scratch[0];
    for (unsigned w = 1; w < (blockDim.x >> 5); ++w) r = f(r, scratch[w]);
    return r;
}
// b if it beats a (larger with MAX, smaller without); NaN beats everything (PyTorch's max/min).
template <bool MAX, typename T> __device__ __forceinline__ T kiln_pick(T a, T b) {
    return ((MAX ? (b > a) : (b < a)) || (b != b)) ? b : a;
}
// The first NaN, else the better value, the smaller index among equals (argmax/argmin).
template <bool MAX, typename T> __device__ __forceinline__ KilnArg<T> kiln_pick_arg(KilnArg<T> a, KilnArg<T> b) {
    const bool an = a.v != a.v, bn = b.v != b.v;
    bool bw;
    if (an || bn) bw = bn && (!an || b.i < a.i);
    else if (a.v == b.v) bw = b.i < a.i;
    else bw = MAX ? (b.v > a.v) : (b.v < a.v);
    return bw ? b : a;
}
"#;

/// The accumulator of sums, products, means and variances for input of `dtype`.
pub(super) fn acc_type(dtype: DType) -> ComputeType {
    match dtype {
        DType::F32 | DType::F64 => ComputeType::F64,
        DType::F16 | DType::BF16 => ComputeType::F32,
        _ => ComputeType::I64,
    }
}

/// One pass over a row: an accumulator of C type `ty` starting at `init`, folded with `step`
/// (an expression of `a`, the accumulator, `v`, the element in the compute type, and `j`, its
/// index in the row) and combined across the group with `combine` (of `a` and `b`).
struct Pass {
    ty: String,
    init: String,
    step: String,
    combine: String,
}

impl Pass {
    fn new(
        ty: impl Into<String>,
        init: impl Into<String>,
        step: impl Into<String>,
        combine: impl Into<String>,
    ) -> Pass {
        Pass { ty: ty.into(), init: init.into(), step: step.into(), combine: combine.into() }
    }
}

/// Wrapping `a op b` on `long long`.
fn wrapping(a: &str, op: &str, b: &str) -> String {
    format!("(long long)((unsigned long long)({a}) {op} (unsigned long long)({b}))")
}

/// `a + b` or `a * b` in the accumulator type (wrapping for integers).
pub(super) fn arith(acc: ComputeType, a: &str, op: &str, b: &str) -> String {
    if acc == ComputeType::I64 {
        wrapping(a, op, b)
    } else {
        format!("{a} {op} {b}")
    }
}

/// `v` (of the compute type) widened to the accumulator type.
pub(super) fn widen(acc: ComputeType, ct: ComputeType, v: &str) -> String {
    if acc == ct {
        v.to_string()
    } else {
        format!("({})({v})", acc.c_type())
    }
}

/// The lowest (`max`) or highest value of the compute type: the identity of max/min.
pub(super) fn extreme(ct: ComputeType, max: bool) -> String {
    match ct {
        ComputeType::I64 if max => "(-9223372036854775807LL - 1LL)".into(),
        ComputeType::I64 => "9223372036854775807LL".into(),
        _ => ct.lit(if max { f64::NEG_INFINITY } else { f64::INFINITY }),
    }
}

/// The passes of `kind`, the final value (an expression of the passes' results `r0`, `r1`, …
/// and `n`, the row length as `unsigned long long`), and its C type.
fn passes(kind: CudaReduce, ct: ComputeType, acc: ComputeType) -> (Vec<Pass>, String, ComputeType) {
    let (t, a) = (ct.c_type(), acc.c_type());
    let sum = |v: &str| Pass::new(a, acc.lit(0.0), arith(acc, "a", "+", &widen(acc, ct, v)), arith(acc, "a", "+", "b"));
    match kind {
        CudaReduce::Sum => (vec![sum("v")], "r0".into(), acc),
        CudaReduce::Mean => (vec![sum("v")], format!("r0 / ({a})n"), acc),
        CudaReduce::Prod => (
            vec![Pass::new(a, acc.lit(1.0), arith(acc, "a", "*", &widen(acc, ct, "v")), arith(acc, "a", "*", "b"))],
            "r0".into(),
            acc,
        ),
        CudaReduce::Max | CudaReduce::Min => {
            let m = kind == CudaReduce::Max;
            let pick = format!("kiln_pick<{m}>(a, b)");
            (vec![Pass::new(t, extreme(ct, m), format!("kiln_pick<{m}>(a, v)"), pick)], "r0".into(), ct)
        }
        CudaReduce::Arg { max, .. } => {
            let pair = format!("KilnArg<{t}>");
            let init = format!("{pair}{{{}, 9223372036854775807LL}}", extreme(ct, max));
            let step = format!("kiln_pick_arg<{max}>(a, {pair}{{v, (long long)j}})");
            (vec![Pass::new(pair, init, step, format!("kiln_pick_arg<{max}>(a, b)"))], "r0".into(), ct)
        }
        CudaReduce::All | CudaReduce::Any => {
            let (init, op) = if kind == CudaReduce::All { ("1LL", "&") } else { ("0LL", "|") };
            let step = format!("a {op} (long long)(v != {})", ct.lit(0.0));
            (vec![Pass::new("long long", init, step, format!("a {op} b"))], "r0".into(), ComputeType::I64)
        }
        CudaReduce::Var { sqrt } => {
            let dev = format!("({} - mean)", widen(acc, ct, "v"));
            let sq = Pass::new(a, acc.lit(0.0), format!("a + {dev} * {dev}"), "a + b");
            let var = format!("r1 / ((({a})n - corr > {z}) ? (({a})n - corr) : {z})", z = acc.lit(0.0));
            let value = if sqrt { format!("{}({var})", acc.func("sqrt")) } else { var };
            (vec![sum("v"), sq], value, acc)
        }
        CudaReduce::LogSumExp => {
            let max = Pass::new(t, extreme(ct, true), "kiln_pick<true>(a, v)", "kiln_pick<true>(a, b)");
            let e = format!("{}(v - shift)", ct.func("exp"));
            let se = Pass::new(a, acc.lit(0.0), format!("a + {}", widen(acc, ct, &e)), "a + b");
            (vec![max, se], format!("{}(r1) + ({a})shift", acc.func("log")), acc)
        }
        CudaReduce::CumSum => (Vec::new(), String::new(), acc),
        CudaReduce::Softmax { .. } => {
            // The max ignores NaN (it still reaches the sum), as the CPU's softmax.
            let max = Pass::new(t, extreme(ct, true), "(v > a) ? v : a", "(b > a) ? b : a");
            let se = Pass::new(t, ct.lit(0.0), format!("a + {}(v - r0)", ct.func("exp")), "a + b");
            (vec![max, se], String::new(), ct)
        }
    }
}

/// Lines adding the coordinates of the linear index `idx` over `sizes{0..n}` (row-major) times
/// each operand's strides (`{prefix}{m}`) to its offset variable.
pub(super) fn decompose(src: &mut String, indent: &str, idx: &str, sizes: &str, n: usize, operands: &[(&str, &str)]) {
    if n == 0 {
        return;
    }
    if n == 1 {
        for (var, st) in operands {
            let _ = writeln!(src, "{indent}{var} += {idx} * {st}0;");
        }
        return;
    }
    let _ = writeln!(src, "{indent}{{\n{indent}    unsigned long long r = {idx};");
    for m in (0..n).rev() {
        if m == 0 {
            let _ = writeln!(src, "{indent}    const unsigned long long c0 = r;");
        } else {
            let _ = writeln!(
                src,
                "{indent}    const unsigned long long c{m} = r % {sizes}{m};\n{indent}    r /= {sizes}{m};"
            );
        }
        for (var, st) in operands {
            let _ = writeln!(src, "{indent}    {var} += c{m} * {st}{m};");
        }
    }
    let _ = writeln!(src, "{indent}}}");
}

/// Emits the kernel of `kind` over input of `dtype` with `kept` kept and `red` reduced dims.
///
/// Signature: `x, out` (then `idx`, i64, for `max_dim`/`min_dim`), `n_out, n_red, group,
/// param` (`param`: the correction of `var`/`std` as an `i64`, else unused), the kept sizes
/// `ks0…`, the reduced sizes `rs0…`, the input's offset `x_off`, kept strides `xk0…` and
/// reduced strides `xr0…`; softmax then takes the output's offset `o_off` and strides `ok0…`,
/// `or0…` (other reductions write `out[o]` for output `o`, row-major over the kept dims). All
/// sizes are `unsigned long long`. Errors (op `cuda_codegen`, `InvalidArgument`): a dtype the
/// kind does not take, more than [`MAX_DIMS`] kept or reduced dims, a softmax over other than
/// one reduced dim (a size-1 dim collapses away: 0 is allowed).
pub fn emit_reduce(kind: CudaReduce, dtype: DType, kept: usize, red: usize) -> Result<CudaReduceKernel, CudaError> {
    let bad = |m: String| Err(CudaError::new("cuda_codegen", CudaErrorKind::InvalidArgument, m));
    if !kind.accepts(dtype) {
        return bad(format!("{} does not take {dtype} input", kind.name()));
    }
    if kept > MAX_DIMS || red > MAX_DIMS {
        return bad(format!(
            "{} over {kept} kept and {red} reduced dims after collapsing; reductions index at most {MAX_DIMS} of each",
            kind.name()
        ));
    }
    if kind.keeps_shape() && red > 1 {
        return bad(format!("{} runs along one dim, not {red}", kind.name()));
    }
    let (ct, acc) = (ComputeType::of(dtype), acc_type(dtype));
    let out = kind.out_dtype(dtype);
    let mut body = super::emit::Body::new(ct);
    let value = load(dtype, "x[p]", ct, &mut body);
    let (passes, fin, fin_ct) = passes(kind, ct, acc);

    let mut sig = vec![
        format!("const {}* __restrict__ x", storage_type(dtype)),
        format!("{}* __restrict__ out", storage_type(out)),
    ];
    if kind.has_indices() {
        sig.push("long long* __restrict__ idx".into());
    }
    sig.extend(["n_out", "n_red", "group", "param"].map(|p| format!("unsigned long long {p}")));
    let words =
        |prefix: &str, n: usize| (0..n).map(move |m| format!("unsigned long long {prefix}{m}")).collect::<Vec<_>>();
    sig.extend(words("ks", kept).into_iter().chain(words("rs", red)));
    sig.push("unsigned long long x_off".into());
    sig.extend(words("xk", kept).into_iter().chain(words("xr", red)));
    if kind.keeps_shape() {
        sig.push("unsigned long long o_off".into());
        sig.extend(words("ok", kept).into_iter().chain(words("or", red)));
    }

    let mut f = String::new();
    let _ =
        writeln!(f, "extern \"C\" __global__ void __launch_bounds__({REDUCE_BLOCK}) KILN_NAME({}) {{", sig.join(", "));
    for (i, p) in passes.iter().enumerate() {
        let _ = writeln!(f, "    __shared__ {} scratch{i}[{}];", p.ty, REDUCE_BLOCK / 32);
    }
    f.push_str("    const unsigned long long lane = threadIdx.x % group, per_block = blockDim.x / group;\n");
    f.push_str("    const unsigned long long n = n_red;\n");
    if matches!(kind, CudaReduce::Var { .. }) {
        let _ = writeln!(f, "    const {a} corr = ({a})(long long)param;", a = acc.c_type());
    } else {
        f.push_str("    (void)param;\n");
    }
    f.push_str("    for (unsigned long long o = (unsigned long long)blockIdx.x * per_block + threadIdx.x / group; o < n_out; o += (unsigned long long)gridDim.x * per_block) {\n");
    f.push_str("        unsigned long long base = x_off;\n");
    let mut operands = vec![("base", "xk")];
    if kind.keeps_shape() {
        f.push_str("        unsigned long long obase = o_off;\n");
        operands.push(("obase", "ok"));
    }
    decompose(&mut f, "        ", "o", "ks", kept, &operands);
    for (i, p) in passes.iter().enumerate() {
        let _ = writeln!(f, "        {} r{i};\n        {{\n            {} a = {};", p.ty, p.ty, p.init);
        f.push_str("            for (unsigned long long j = lane; j < n_red; j += group) {\n                unsigned long long p = base;\n");
        decompose(&mut f, "                ", "j", "rs", red, &[("p", "xr")]);
        let _ = writeln!(
            f,
            "                const {} v = {value};\n                a = {};\n            }}",
            ct.c_type(),
            p.step
        );
        let _ = writeln!(f, "            r{i} = kiln_group_reduce(a, []({t} a, {t} b) {{ return {}; }}, group, scratch{i});\n        }}", p.combine, t = p.ty);
        // Values the next pass reads.
        match (kind, i) {
            (CudaReduce::Var { .. }, 0) => {
                let _ = writeln!(f, "        const {a} mean = r0 / ({a})n;", a = acc.c_type());
            }
            (CudaReduce::LogSumExp, 0) => {
                let _ = writeln!(
                    f,
                    "        const {t} shift = ({}(r0) == {}) ? {} : r0;",
                    ct.func("fabs"),
                    ct.lit(f64::INFINITY),
                    ct.lit(0.0),
                    t = ct.c_type()
                );
            }
            _ => {}
        }
    }
    match kind {
        CudaReduce::Softmax { log } => {
            let scale = if log { format!("{}(r1)", ct.func("log")) } else { format!("{} / r1", ct.lit(1.0)) };
            let _ = writeln!(f, "        const {} s = {scale};", ct.c_type());
            f.push_str("        for (unsigned long long j = lane; j < n_red; j += group) {\n            unsigned long long p = base, q = obase;\n");
            decompose(&mut f, "            ", "j", "rs", red, &[("p", "xr"), ("q", "or")]);
            let y = if log { "(v - r0) - s".to_string() } else { format!("{}(v - r0) * s", ct.func("exp")) };
            let _ = writeln!(
                f,
                "            const {} v = {value};\n            out[q] = {};\n        }}",
                ct.c_type(),
                store(out, &y, ct, &mut body)
            );
        }
        CudaReduce::CumSum => {
            // One lane walks the row in order (the other lanes of its warp wait): a scan with
            // the CPU's order of additions.
            let _ = writeln!(f, "        if (lane == 0) {{\n            {} acc = {};", acc.c_type(), acc.lit(0.0));
            f.push_str("            for (unsigned long long j = 0; j < n_red; ++j) {\n                unsigned long long p = base, q = obase;\n");
            decompose(&mut f, "                ", "j", "rs", red, &[("p", "xr"), ("q", "or")]);
            let sum = arith(acc, "acc", "+", &widen(acc, ct, "v"));
            let _ = writeln!(f, "                const {} v = {value};\n                acc = {sum};\n                out[q] = {};\n            }}\n        }}", ct.c_type(), store(out, "acc", acc, &mut body));
        }
        CudaReduce::Arg { values, .. } => {
            if values {
                let _ = writeln!(
                    f,
                    "        if (lane == 0) {{\n            out[o] = {};\n            idx[o] = r0.i;\n        }}",
                    store(out, "r0.v", ct, &mut body)
                );
            } else {
                f.push_str("        if (lane == 0) out[o] = r0.i;\n");
            }
        }
        _ => {
            let _ = writeln!(f, "        if (lane == 0) out[o] = {};", store(out, &fin, fin_ct, &mut body));
        }
    }
    f.push_str("    }\n}\n");

    let name = format!("kiln_red_{}_{}_k{kept}_r{red}", kind.name(), dtype_tag(dtype));
    let function = f.replace("KILN_NAME", &name);
    let helpers = body.helpers.clone();
    let source = program(
        &[(&helpers, &function)],
        &format!("{} of {} over {kept} kept and {red} reduced dim(s)", kind.name(), dtype_tag(dtype)),
    );
    Ok(CudaReduceKernel { name, source, kind, dtype, out, kept, red, helpers, function })
}

/// One translation unit holding kernels (each with the helpers it uses): the header line, the
/// prelude, each helper once, then the kernels.
fn program(kernels: &[(&BTreeSet<&'static str>, &String)], what: &str) -> String {
    let mut src = format!("// kiln-codegen cuda v{CUDA_CODEGEN_VERSION}: reduction: {what}\n{PRELUDE}");
    let helpers: BTreeSet<&'static str> = kernels.iter().flat_map(|(h, _)| h.iter().copied()).collect();
    for h in helpers {
        src.push_str(&ops::helper(h, ComputeType::F32));
    }
    for (_, f) in kernels {
        src.push_str(f);
    }
    src
}

/// One CUDA C program holding all of `kernels` (the helpers they share emitted once): what
/// the NVRTC test compiles in one call instead of one per kernel.
pub fn reduce_program(kernels: &[CudaReduceKernel]) -> String {
    let parts: Vec<(&BTreeSet<&'static str>, &String)> = kernels.iter().map(|k| (&k.helpers, &k.function)).collect();
    program(&parts, &format!("{} kernels", kernels.len()))
}

/// Every (kind, input dtype) the tensor layer can ask for.
pub fn reduce_ops() -> Vec<(CudaReduce, DType)> {
    CudaReduce::ALL
        .iter()
        .flat_map(|&k| DType::ALL.iter().filter(move |&&d| k.accepts(d)).map(move |&d| (k, d)))
        .collect()
}
