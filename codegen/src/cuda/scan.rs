//! Cumulative scans along one dim as CUDA C: `cumprod`, `cummax`/`cummin` (values and int64
//! indices) and `logcumsumexp`, over a contiguous input seen as `[outer, len, inner]` (the
//! scanned dim in the middle, as the CPU kernels of `ops::scan` see it).
//!
//! One thread per line (`outer · inner` lines, grid-stride), each walking its line in order,
//! so every result is folded in the CPU's order with the CPU's arithmetic: threads of a warp
//! take neighbouring lines, which are neighbouring elements when `inner > 1`. (A parallel
//! scan of long lines is future work, as for `cumsum`.)
//!
//! # Arithmetic (the CPU's, `ops::scan`)
//! - `cumprod` multiplies in `double` for every float dtype (rounded once per element into the
//!   dtype), in wrapping `long long` for integers and bool, whose result is i64.
//! - `cummax`/`cummin` compare in the compute type (f16/bf16 as `float`, exactly; integers and
//!   bool as `long long`) and copy the chosen element's stored bits: a later element replaces
//!   the extreme when it is NaN, or when the extreme is not NaN and the element is at least as
//!   large (small), so ties take the last index and NaN the latest NaN (PyTorch's rule).
//! - `logcumsumexp` (float input) adds `log(exp(a) + exp(b))` in `double` as PyTorch's
//!   `_log_add_exp_helper`: NaN propagates, two equal infinities give themselves.
//!
//! Signature: `x, out` (then `idx`, int64, for `cummax`/`cummin`), `n` (the number of lines),
//! then the words [`SCAN_WORDS`] (`len`, the scanned dim's size, and `inner`, the elements
//! after it), every number `unsigned long long`.

use super::emit::Body;
use super::grid::{emit_grid_kernel, GridBuffer};
use super::ops::{self, ComputeType};
use super::reduce::arith;
use super::strided::{load, storage_type, store};
use kiln_runtime::cuda::{CudaError, CudaErrorKind};
use kiln_runtime::DType;

/// The geometry words after `n`, in order.
pub const SCAN_WORDS: [&str; 2] = ["len", "inner"];

/// Which scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScanKind {
    /// Running products (integer and bool input give i64).
    CumProd,
    /// Running maxima and their indices.
    CumMax,
    /// Running minima and their indices.
    CumMin,
    /// `log Σ_{j≤i} exp(x_j)` (float input).
    LogCumSumExp,
}

impl ScanKind {
    /// Every kind.
    pub const ALL: [ScanKind; 4] = [ScanKind::CumProd, ScanKind::CumMax, ScanKind::CumMin, ScanKind::LogCumSumExp];

    /// The op's name, in kernel names and messages.
    pub fn name(self) -> &'static str {
        match self {
            ScanKind::CumProd => "cumprod",
            ScanKind::CumMax => "cummax",
            ScanKind::CumMin => "cummin",
            ScanKind::LogCumSumExp => "logcumsumexp",
        }
    }

    /// Whether the kind takes input of `dtype` (`logcumsumexp` floats only).
    pub fn accepts(self, dtype: DType) -> bool {
        self != ScanKind::LogCumSumExp || dtype.is_float()
    }

    /// The dtype of `out` for input of `dtype`.
    pub fn out_dtype(self, dtype: DType) -> DType {
        if self == ScanKind::CumProd && !dtype.is_float() {
            DType::I64
        } else {
            dtype
        }
    }

    /// Whether the kernel also writes int64 indices (`cummax`/`cummin`).
    pub fn has_indices(self) -> bool {
        matches!(self, ScanKind::CumMax | ScanKind::CumMin)
    }
}

/// A generated scan kernel: its CUDA C and what a launch needs to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanKernel {
    /// The `extern "C"` kernel's name (`kiln_scan_<kind>_<dtype>_<hash>`).
    pub name: String,
    /// The whole CUDA C source (the helpers it uses, then the kernel).
    pub source: String,
    /// What it computes.
    pub kind: ScanKind,
    /// The input's dtype.
    pub dtype: DType,
    /// The dtype of `out`.
    pub out: DType,
}

/// PyTorch's `_log_add_exp_helper` in `double` (the CPU's `log_add_exp`).
const LOG_ADD_EXP: &str = "\
__device__ __forceinline__ double kiln_log_add_exp(double a, double b) {
    if (a != a || b != b) return a + b;
    const double lo = fmin(a, b), hi = fmax(a, b);
    return (lo != hi || fabs(lo) != INF) ? hi + log1p(exp(lo - hi)) : a;
}
";

/// The loop of `kind` over one line (`p`: the element's position, `v`: it loaded, in the
/// types `load`/`store` give for `dtype`), as the lines before, in and after the loop.
fn scan_loop(kind: ScanKind, dtype: DType, body: &mut Body) -> (String, String) {
    let out = kind.out_dtype(dtype);
    match kind {
        ScanKind::CumProd => {
            let acc = if dtype.is_float() { ComputeType::F64 } else { ComputeType::I64 };
            let step = arith(acc, "acc", "*", &load(dtype, "x[p]", acc, body));
            let init = format!("        {} acc = {};\n", acc.c_type(), acc.lit(1.0));
            (init, format!("            acc = {step};\n            out[p] = {};\n", store(out, "acc", acc, body)))
        }
        ScanKind::CumMax | ScanKind::CumMin => {
            let ct = ComputeType::of(dtype);
            let beats = if kind == ScanKind::CumMax { ">=" } else { "<=" };
            let init = format!(
                "        {t} best = {zero};\n        {s} best_bits = 0;\n        long long index = 0;\n",
                t = ct.c_type(),
                zero = ct.lit(0.0),
                s = storage_type(dtype)
            );
            let step = format!(
                "            const {t} v = {v};\n            if (j == 0 || v != v || (best == best && v {beats} best)) {{\n                best = v;\n                best_bits = x[p];\n                index = j;\n            }}\n            out[p] = best_bits;\n            idx[p] = index;\n",
                t = ct.c_type(),
                v = load(dtype, "x[p]", ct, body)
            );
            (init, step)
        }
        ScanKind::LogCumSumExp => {
            let acc = ComputeType::F64;
            let init = format!("        double acc = {};\n", acc.lit(f64::NEG_INFINITY));
            let v = load(dtype, "x[p]", acc, body);
            (
                init,
                format!(
                    "            acc = kiln_log_add_exp({v}, acc);\n            out[p] = {};\n",
                    store(out, "acc", acc, body)
                ),
            )
        }
    }
}

/// Emits the `kind` kernel for input of `dtype`. Errors (op `cuda_codegen`,
/// `InvalidArgument`): a dtype the kind does not take.
pub fn emit_scan(kind: ScanKind, dtype: DType) -> Result<ScanKernel, CudaError> {
    if !kind.accepts(dtype) {
        let m = format!("{} does not take {dtype} input", kind.name());
        return Err(CudaError::new("cuda_codegen", CudaErrorKind::InvalidArgument, m));
    }
    let out = kind.out_dtype(dtype);
    let mut helpers = Body::new(ComputeType::of(dtype));
    let (init, step) = scan_loop(kind, dtype, &mut helpers);
    let mut buffers = vec![
        GridBuffer { name: "x", ty: storage_type(dtype), written: false },
        GridBuffer { name: "out", ty: storage_type(out), written: true },
    ];
    if kind.has_indices() {
        buffers.push(GridBuffer { name: "idx", ty: "long long", written: true });
    }
    let mut loop_body =
        String::from("        const unsigned long long base = (i / inner) * len * inner + i % inner;\n");
    loop_body.push_str(&init);
    loop_body.push_str("        for (long long j = 0; j < len; ++j) {\n            const unsigned long long p = base + (unsigned long long)(j * inner);\n");
    loop_body.push_str(&step);
    loop_body.push_str("        }\n");
    let (name, kernel) = emit_grid_kernel("scan", kind.name(), dtype, &buffers, &SCAN_WORDS, &loop_body);

    // The helpers go after the header line, before the kernel.
    let (header, function) = kernel.split_once('\n').expect("the grid kernel starts with its header line");
    let mut source = format!("{header}\n");
    for h in &helpers.helpers {
        source.push_str(&ops::helper(h, ComputeType::F32));
    }
    if kind == ScanKind::LogCumSumExp {
        source.push_str(&LOG_ADD_EXP.replace("INF", &ComputeType::F64.lit(f64::INFINITY)));
    }
    source.push_str(function);
    Ok(ScanKernel { name, source, kind, dtype, out })
}

/// Every (kind, input dtype) the tensor layer can ask for: each kind on every dtype it takes.
pub fn scan_ops() -> Vec<(ScanKind, DType)> {
    ScanKind::ALL
        .iter()
        .flat_map(|&k| DType::ALL.iter().filter(move |&&d| k.accepts(d)).map(move |&d| (k, d)))
        .collect()
}
