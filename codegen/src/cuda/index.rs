//! Indexing kernels along one dim: `gather` (and `index_select`, a gather whose index is
//! broadcast over the other dims), `scatter` and `scatter_add`, over strided operands.
//!
//! One index space (the iteration shape: the index's shape for gather and scatter, the result's
//! for `index_select`) is walked as the strided elementwise kernels walk theirs, with three
//! operands: the *target* `t` (the gathered input, or the scatter's destination), the int64
//! *index* `idx` and the *values* `v` (the gather's output, or the scatter's source). The
//! target's stride along the indexed dim is 0 in the index space; instead the index value `k`
//! at the position adds `k · dim_stride`. So the kernel does not know which dim is indexed,
//! dims collapse as for any strided kernel, and one kernel serves every (shape, view, dim):
//! compiled once per (kind, dtype, number of dims).
//!
//! Signature: `t, idx, v, n, size_0 … size_{d-1}`, then for `pt`, `pi`, `pv` (target, index,
//! values) the element offset and `d` strides, then `dim_size` and `dim_stride`, every number
//! `unsigned long long`.
//!
//! Index values are validated by the caller before the launch (an out-of-range value is the
//! op's error, and a scatter writes nothing then); the kernel checks `0 <= k < dim_size` again
//! and skips a bad position (a gather writes 0 there), so no launch reads or writes outside
//! the target whatever the index holds.
//!
//! `scatter_add` accumulates with atomics: `atomicAdd` for f32, f64, i32 and i64 (two's
//! complement, so integer sums wrap as on the CPU); f16, bf16, u8 and bool through a
//! compare-and-swap loop on the aligned 32-bit word holding the element (a sum of two halves
//! rounds once through `double`, as the CPU's `add`; bool adds as "or"). Where indices repeat,
//! the order of the additions depends on scheduling: float sums may differ in the last bits
//! from run to run. A plain `scatter` with repeated indices keeps one of the written values,
//! not necessarily the last.
//!
//! [`IndexKind::ScatterAddLines`] is the deterministic `scatter_add`: its index space leaves
//! out the scatter dim, so each thread owns one *line* (a position of every other dim) and
//! walks it along the scatter dim in order, adding each source value into the target element
//! its index names. Every target element is written by one thread only, in the CPU's
//! row-major order, with the CPU's sum (the same expression as the atomic kernels'), so the
//! result equals the CPU's bit for bit and no atomics are needed. [`IndexKind::ScatterLines`]
//! walks the lines the same way and stores instead of adding: where indices repeat along a
//! line, the last write in the CPU's order wins (the deterministic `scatter` and plain
//! `index_put_`). Three more parameters follow `dim_stride` in both: `line_len` (the index's
//! size along the scatter dim) and the index's and the values' strides along it, `line_pi` and
//! `line_pv`.

use super::emit::{dtype_tag, fnv1a, CUDA_CODEGEN_VERSION, ELEMENTWISE_BLOCK};
use super::ops::{helper, ComputeType};
use super::strided::{index_space_params, open_index_loop, storage_type, MAX_DIMS};
use kiln_runtime::cuda::{CudaError, CudaErrorKind};
use kiln_runtime::DType;
use std::fmt::Write;

/// What an indexing kernel does at each position of its index space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IndexKind {
    /// `v[pv] = t[pt + k·dim_stride]` (gather, index_select).
    Gather,
    /// `t[pt + k·dim_stride] = v[pv]` (scatter; one of repeated positions wins).
    Scatter,
    /// `t[pt + k·dim_stride] += v[pv]`, atomically (scatter_add).
    ScatterAdd,
    /// `t[pt + k·dim_stride] = v[pv]` along each line of the scatter dim, in order, one
    /// thread per line: the deterministic scatter (the last write wins, as on the CPU).
    ScatterLines,
    /// `t[pt + k·dim_stride] += v[pv]` along each line of the scatter dim, in order, one
    /// thread per line: the deterministic scatter_add (no atomics; the CPU's result).
    ScatterAddLines,
}

impl IndexKind {
    /// Every kind.
    pub const ALL: [IndexKind; 5] = [
        IndexKind::Gather,
        IndexKind::Scatter,
        IndexKind::ScatterAdd,
        IndexKind::ScatterLines,
        IndexKind::ScatterAddLines,
    ];

    /// The scatter kernel that adds (`accumulate`) or stores, along lines in order
    /// (`ordered`: [`IndexKind::ScatterAddLines`], [`IndexKind::ScatterLines`]) or one
    /// thread per position.
    pub fn scatter(accumulate: bool, ordered: bool) -> IndexKind {
        match (accumulate, ordered) {
            (false, false) => IndexKind::Scatter,
            (true, false) => IndexKind::ScatterAdd,
            (false, true) => IndexKind::ScatterLines,
            (true, true) => IndexKind::ScatterAddLines,
        }
    }

    /// The kind's name in kernel names and messages.
    pub fn name(self) -> &'static str {
        match self {
            IndexKind::Gather => "gather",
            IndexKind::Scatter => "scatter",
            IndexKind::ScatterAdd => "scatter_add",
            IndexKind::ScatterLines => "scatter_lines",
            IndexKind::ScatterAddLines => "scatter_add_lines",
        }
    }

    /// True when the kernel writes the target (a scatter), false when it writes the values (a
    /// gather).
    pub fn writes_target(self) -> bool {
        self != IndexKind::Gather
    }

    /// True for the kinds whose threads each walk a line of the scatter dim in order
    /// ([`IndexKind::ScatterLines`], [`IndexKind::ScatterAddLines`]).
    pub fn walks_lines(self) -> bool {
        matches!(self, IndexKind::ScatterLines | IndexKind::ScatterAddLines)
    }

    /// The number of parameter words after `dim_stride` (the line's length and the index's
    /// and values' strides along it for the kinds that [walk lines](IndexKind::walks_lines)).
    pub fn line_words(self) -> usize {
        if self.walks_lines() {
            3
        } else {
            0
        }
    }
}

/// A generated indexing kernel: its CUDA C and what a launch needs to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexKernel {
    /// The `extern "C"` kernel's name (`kiln_idx_<kind>_<dtype>_<hash>`).
    pub name: String,
    /// The CUDA C source.
    pub source: String,
    /// What it does.
    pub kind: IndexKind,
    /// The dtype of the target and the values.
    pub dtype: DType,
    /// Number of dims of the index space.
    pub ndim: usize,
}

/// The CPU's `add` of `a` and `b` (stored form of `dtype`) as a CUDA C expression of the stored
/// type, and the helpers it needs: floats round once (f16 and bf16 through `double`, exact
/// for their sums), integers wrap, bool is "or".
fn sum_of(dtype: DType, helpers: &mut Vec<String>) -> &'static str {
    match dtype {
        DType::F32 | DType::F64 => "a + b",
        // Unsigned arithmetic: the wrapping sum's bits, with no signed overflow.
        DType::I32 => "(int)((unsigned int)a + (unsigned int)b)",
        DType::I64 => "(long long)((unsigned long long)a + (unsigned long long)b)",
        DType::F16 => {
            helpers.push(helper("kiln_f16", ComputeType::F32));
            "kiln_f64_to_f16((double)kiln_f16_to_f32(a) + (double)kiln_f16_to_f32(b))"
        }
        DType::BF16 => {
            helpers.push(helper("kiln_bf16", ComputeType::F32));
            "kiln_f64_to_bf16((double)kiln_bf16_to_f32(a) + (double)kiln_bf16_to_f32(b))"
        }
        DType::U8 => "(unsigned char)(a + b)",
        DType::Bool => "(unsigned char)((a | b) != 0)",
    }
}

/// The statement storing or accumulating `v[pv]` at `t[at]`, and the helpers it needs.
fn store(kind: IndexKind, dtype: DType, helpers: &mut Vec<String>) -> String {
    match kind {
        IndexKind::Gather => "v[pv] = t[at];".into(),
        // Along a line in order (ScatterLines), the last write of a repeated index wins.
        IndexKind::Scatter | IndexKind::ScatterLines => "t[at] = v[pv];".into(),
        IndexKind::ScatterAdd => match dtype {
            DType::F32 | DType::F64 | DType::I32 => "atomicAdd(&t[at], v[pv]);".into(),
            // Wrapping: the same bits as a signed sum.
            DType::I64 => "atomicAdd((unsigned long long*)&t[at], (unsigned long long)v[pv]);".into(),
            _ => {
                let bits = if matches!(dtype, DType::F16 | DType::BF16) { 16 } else { 8 };
                let sum = sum_of(dtype, helpers);
                helpers.push(narrow_atomic_add(storage_type(dtype), bits, sum));
                "kiln_atomic_add(&t[at], v[pv]);".into()
            }
        },
        // This thread alone writes `t[at]`: a plain read, add and store.
        IndexKind::ScatterAddLines => {
            let ty = storage_type(dtype);
            format!("const {ty} a = t[at]; const {ty} b = v[pv]; t[at] = {};", sum_of(dtype, helpers))
        }
    }
}

/// `kiln_atomic_add(T* p, T b)` for a `bits`-wide `T`: a compare-and-swap loop on the aligned
/// 32-bit word holding `*p`, replacing its bits with `sum` (of `a`, the old value, and `b`).
/// Sound because device buffers start on (at least) 256-byte boundaries and are allocated in
/// whole blocks of at least 512 bytes, so the word lies inside the allocation; the other bytes
/// of the word are written back unchanged, atomically.
fn narrow_atomic_add(t: &str, bits: u32, sum: &str) -> String {
    let mask = if bits == 16 { "0xffffu" } else { "0xffu" };
    format!(
        "__device__ __forceinline__ void kiln_atomic_add({t}* p, {t} b) {{\n    \
unsigned int* w = (unsigned int*)((unsigned long long)p & ~3ULL);\n    \
const unsigned int shift = (unsigned int)((unsigned long long)p & 3ULL) * 8u;\n    \
unsigned int old = *w, seen;\n    \
do {{\n        \
seen = old;\n        \
const {t} a = ({t})((seen >> shift) & {mask});\n        \
const unsigned int s = (unsigned int)({sum}) & {mask};\n        \
old = atomicCAS(w, seen, (seen & ~({mask} << shift)) | (s << shift));\n    \
}} while (old != seen);\n}}\n"
    )
}

/// Emits the `kind` kernel for `dtype` over `ndim` dims (after collapsing). Errors (op
/// `cuda_codegen`, `InvalidArgument`): more than [`MAX_DIMS`] dims.
pub fn emit_index(kind: IndexKind, dtype: DType, ndim: usize) -> Result<IndexKernel, CudaError> {
    if ndim > MAX_DIMS {
        let m = format!("{ndim} dims after collapsing; indexing kernels index at most {MAX_DIMS}");
        return Err(CudaError::new("cuda_codegen", CudaErrorKind::InvalidArgument, m));
    }
    let mut helpers = Vec::new();
    let stmt = store(kind, dtype, &mut helpers);
    let ty = storage_type(dtype);
    let (t_const, v_const) = if kind.writes_target() { ("", "const ") } else { ("const ", "") };
    // The atomics of scatter_add may touch a neighbouring element's bytes: no `__restrict__`.
    let restrict = if kind == IndexKind::ScatterAdd { "" } else { " __restrict__" };

    let mut src = String::new();
    let _ = writeln!(
        src,
        "// kiln-codegen cuda v{CUDA_CODEGEN_VERSION}: {} ({}) over {ndim} dim(s)",
        kind.name(),
        dtype_tag(dtype)
    );
    helpers.iter().for_each(|h| src.push_str(h));
    let mut sig = vec![
        format!("{t_const}{ty}*{restrict} t"),
        "const long long* __restrict__ idx".into(),
        format!("{v_const}{ty}* __restrict__ v"),
    ];
    sig.extend(index_space_params(&["pt", "pi", "pv"], ndim));
    sig.extend(["unsigned long long dim_size".to_string(), "unsigned long long dim_stride".to_string()]);
    if kind.walks_lines() {
        sig.extend(["line_len", "line_pi", "line_pv"].map(|p| format!("unsigned long long {p}")));
    }
    let _ = writeln!(
        src,
        "extern \"C\" __global__ void __launch_bounds__({ELEMENTWISE_BLOCK}) KILN_NAME({}) {{",
        sig.join(", ")
    );
    open_index_loop(&mut src, &["pt", "pi", "pv"], ndim);
    // Validated before the launch; checked again so that no index reaches outside the target.
    let skip = if kind == IndexKind::Gather { format!("v[pv] = ({ty})0; continue;") } else { "continue;".into() };
    let indexed = |src: &mut String, pad: &str, pi: &str| {
        let _ = writeln!(src, "{pad}const long long k = idx[{pi}];");
        let _ = writeln!(src, "{pad}if (k < 0LL || (unsigned long long)k >= dim_size) {{ {skip} }}");
        let _ = writeln!(src, "{pad}const unsigned long long at = pt + (unsigned long long)k * dim_stride;");
    };
    if kind.walks_lines() {
        // The thread's line along the scatter dim, in order.
        src.push_str("        for (unsigned long long j = 0; j < line_len; ++j) {\n");
        indexed(&mut src, "            ", "pi + j * line_pi");
        let _ = writeln!(src, "            {}\n        }}\n    }}\n}}", stmt.replace("v[pv]", "v[pv + j * line_pv]"));
    } else {
        indexed(&mut src, "        ", "pi");
        let _ = writeln!(src, "        {stmt}\n    }}\n}}");
    }

    let name = format!("kiln_idx_{}_{}_{:016x}", kind.name(), dtype_tag(dtype), fnv1a(src.as_bytes()));
    let source = src.replace("KILN_NAME", &name);
    Ok(IndexKernel { name, source, kind, dtype, ndim })
}

/// Every (kind, dtype) the tensor layer can ask for: each kind on every dtype.
pub fn index_ops() -> Vec<(IndexKind, DType)> {
    IndexKind::ALL.iter().flat_map(|&k| DType::ALL.iter().map(move |&d| (k, d))).collect()
}
