//! Sorting kernels: a bitonic sort of every row of a contiguous `[rows, n]` buffer, stable,
//! with the CPU's order (`kiln_runtime::cpu::sort::sort_key`: NaN largest, `-0.0 == 0.0`).
//!
//! Each row is padded to `p = max(2, n.next_power_of_two())` `(key, position)` pairs in two
//! scratch buffers (`unsigned long long` keys, `unsigned int` positions); a pad is `(~0, ~0)`,
//! after every real pair. Pairs compare by key, then by position. Positions are distinct, so
//! the sorting network's result is the one stable order whatever it compares in which order,
//! in both directions: descending flips the key's bits (`key ^ ~0`), not the position, as the
//! CPU does, so equal values keep their original order there too.
//!
//! Four kernels, launched in the order of [`super::sort_launch::SortPlan`]:
//! - [`SortStage::Keys`] (per dtype): `x, keys, pos, rows, n, p, flip` writes the pairs.
//! - [`SortStage::Tile`]: `keys, pos, total, p, t, k_first, k_last` sorts (or merges) tiles of
//!   `t` pairs in dynamic shared memory (`12 t` bytes), one block per tile: for each bitonic
//!   size `k` in `k_first, 2 k_first, …, k_last`, the compare-exchange steps of distance
//!   `min(k, t) / 2` down to 1.
//! - [`SortStage::Step`]: `keys, pos, total, p, k, j`, one compare-exchange step of distance
//!   `j >= t` over global memory (rows longer than a tile).
//! - [`SortStage::Write`] (per dtype): `x, pos, out, idx, rows, n, p, kout` writes the first
//!   `kout` values of each sorted row and their positions (int64) into `[rows, kout]`.
//!
//! A pair of distance `j` is `(a, a + j)` with `a = 2j ⌊q / j⌋ + q mod j` for pair number `q`;
//! it is sorted ascending when bit `k` of `a`'s position in its row is 0, so the last size
//! (`k = p`) sorts every row ascending.

use super::emit::{dtype_tag, fnv1a, CUDA_CODEGEN_VERSION, ELEMENTWISE_BLOCK};
use super::ops::{helper, ComputeType};
use super::strided::storage_type;
use kiln_runtime::DType;
use std::fmt::Write;

/// The most pairs a tile (one block's shared memory) holds: 24 KiB of keys and positions.
pub const SORT_TILE: usize = 2048;

/// Threads per block of the tile kernel: one compare-exchange of a full tile each.
pub const SORT_TILE_BLOCK: u32 = (SORT_TILE / 2) as u32;

/// One kernel of the sort.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SortStage {
    /// Writes each row's `(key, position)` pairs, padded (reads the dtype's values).
    Keys,
    /// Sorts or merges tiles in shared memory (dtype-independent).
    Tile,
    /// One global compare-exchange step (dtype-independent).
    Step,
    /// Writes the sorted values and their positions (reads the dtype's values).
    Write,
}

impl SortStage {
    /// Every stage.
    pub const ALL: [SortStage; 4] = [SortStage::Keys, SortStage::Tile, SortStage::Step, SortStage::Write];

    /// The stage's name in kernel names.
    pub fn name(self) -> &'static str {
        match self {
            SortStage::Keys => "keys",
            SortStage::Tile => "tile",
            SortStage::Step => "step",
            SortStage::Write => "write",
        }
    }

    /// True when the kernel reads values of the sorted dtype (one kernel per dtype); false for
    /// the stages that only see pairs.
    pub fn per_dtype(self) -> bool {
        matches!(self, SortStage::Keys | SortStage::Write)
    }
}

/// A generated sorting kernel: its CUDA C and what a launch needs to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SortKernel {
    /// The `extern "C"` kernel's name (`kiln_sort_<stage>[_<dtype>]_<hash>`).
    pub name: String,
    /// The CUDA C source.
    pub source: String,
    /// Which kernel.
    pub stage: SortStage,
    /// The dtype of the values (`None` for the pair-only stages).
    pub dtype: Option<DType>,
}

/// The `kiln_sort_key(double)` helper: the CPU's `sort_key` of a value converted (exactly) to
/// `double`.
const KEY_HELPER: &str = "__device__ __forceinline__ unsigned long long kiln_sort_key(double v) {\n    \
if (v != v) return ~0ULL;\n    \
if (v == 0.0) v = 0.0; // -0.0 sorts as 0.0\n    \
const unsigned long long b = (unsigned long long)__double_as_longlong(v);\n    \
return (b >> 63) ? ~b : (b | (1ULL << 63));\n}\n";

/// The compare-exchange of pairs `a` and `b` (`a < b`) of `keys`/`pos`, putting them in
/// ascending order when `up`, descending otherwise.
const EXCHANGE_HELPER: &str = "__device__ __forceinline__ void kiln_exchange(unsigned long long* keys, unsigned int* pos, unsigned long long a, unsigned long long b, bool up) {\n    \
const unsigned long long ka = keys[a], kb = keys[b];\n    \
const unsigned int pa = pos[a], pb = pos[b];\n    \
const bool b_first = kb < ka || (kb == ka && pb < pa);\n    \
if (b_first == up) {\n        \
keys[a] = kb; keys[b] = ka;\n        \
pos[a] = pb; pos[b] = pa;\n    \
}\n}\n";

/// The first index of pair `q` at distance `j` (a power of two), as C.
const PAIR_LOW: &str = "((q & ~(j - 1ULL)) << 1) | (q & (j - 1ULL))";

/// The key of element `e` (stored as `dtype`) as C, and the helpers it needs.
fn key_of(dtype: DType, e: &str, helpers: &mut String) -> String {
    match dtype {
        DType::F32 | DType::F64 => format!("kiln_sort_key((double){e})"),
        DType::F16 | DType::BF16 => {
            let h = if dtype == DType::F16 { "kiln_f16" } else { "kiln_bf16" };
            helpers.push_str(&helper(h, ComputeType::F32));
            format!("kiln_sort_key((double){h}_to_f32({e}))")
        }
        // Integers and bool by value: the sign bit flipped orders two's complement unsigned.
        DType::I64 | DType::I32 | DType::U8 | DType::Bool => {
            format!("((unsigned long long)(long long){e} ^ (1ULL << 63))")
        }
    }
}

/// The grid-stride loop header over `count` items named `i`.
fn grid_loop(var: &str, count: &str) -> String {
    format!("    for (unsigned long long {var} = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; {var} < {count}; {var} += (unsigned long long)blockDim.x * gridDim.x) {{\n")
}

/// Emits the `stage` kernel; `dtype` is the values' for [`SortStage::per_dtype`] stages and
/// ignored by the others (every dtype sorts).
pub fn emit_sort(stage: SortStage, dtype: DType) -> SortKernel {
    let dtype = stage.per_dtype().then_some(dtype);
    let ty = dtype.map(storage_type).unwrap_or("");
    let tag = dtype.map(|d| format!("_{}", dtype_tag(d))).unwrap_or_default();
    let mut src = String::new();
    let _ = writeln!(src, "// kiln-codegen cuda v{CUDA_CODEGEN_VERSION}: sort {}{tag}", stage.name());
    let pairs = "unsigned long long* __restrict__ keys, unsigned int* __restrict__ pos";
    let block = if stage == SortStage::Tile { SORT_TILE_BLOCK } else { ELEMENTWISE_BLOCK };
    let open = |src: &mut String, params: &str| {
        let _ = writeln!(src, "extern \"C\" __global__ void __launch_bounds__({block}) KILN_NAME({params}) {{");
    };
    match stage {
        SortStage::Keys => {
            let mut helpers = String::from(KEY_HELPER);
            let key = key_of(dtype.expect("per dtype"), "x[r * n + j]", &mut helpers);
            src.push_str(&helpers);
            open(&mut src, &format!("const {ty}* __restrict__ x, {pairs}, unsigned long long rows, unsigned long long n, unsigned long long p, unsigned long long flip"));
            src.push_str(&grid_loop("i", "rows * p"));
            src.push_str("        const unsigned long long r = i / p, j = i - r * p;\n");
            let _ = writeln!(src, "        if (j < n) {{\n            keys[i] = {key} ^ flip;\n            pos[i] = (unsigned int)j;\n        }} else {{\n            keys[i] = ~0ULL;\n            pos[i] = 0xffffffffu;\n        }}\n    }}\n}}");
        }
        SortStage::Tile => {
            src.push_str(EXCHANGE_HELPER);
            open(&mut src, &format!("{pairs}, unsigned long long total, unsigned long long p, unsigned long long t, unsigned long long k_first, unsigned long long k_last"));
            src.push_str("    extern __shared__ unsigned long long sk[]; // t keys, then t positions\n");
            src.push_str("    unsigned int* sp = (unsigned int*)(sk + t);\n");
            src.push_str("    for (unsigned long long tile = blockIdx.x; tile < total / t; tile += gridDim.x) {\n");
            src.push_str("        const unsigned long long base = tile * t;\n");
            src.push_str("        for (unsigned long long i = threadIdx.x; i < t; i += blockDim.x) { sk[i] = keys[base + i]; sp[i] = pos[base + i]; }\n");
            src.push_str("        __syncthreads();\n");
            src.push_str("        for (unsigned long long k = k_first; k <= k_last; k <<= 1) {\n");
            src.push_str("            for (unsigned long long j = (k < t ? k : t) >> 1; j > 0; j >>= 1) {\n");
            src.push_str("                for (unsigned long long q = threadIdx.x; q < (t >> 1); q += blockDim.x) {\n");
            let _ = writeln!(src, "                    const unsigned long long a = {PAIR_LOW};");
            src.push_str(
                "                    kiln_exchange(sk, sp, a, a | j, (((base + a) & (p - 1ULL)) & k) == 0ULL);\n",
            );
            src.push_str("                }\n                __syncthreads();\n            }\n        }\n");
            src.push_str("        for (unsigned long long i = threadIdx.x; i < t; i += blockDim.x) { keys[base + i] = sk[i]; pos[base + i] = sp[i]; }\n");
            src.push_str("        __syncthreads();\n    }\n}\n");
        }
        SortStage::Step => {
            src.push_str(EXCHANGE_HELPER);
            open(&mut src, &format!("{pairs}, unsigned long long total, unsigned long long p, unsigned long long k, unsigned long long j"));
            src.push_str(&grid_loop("q", "(total >> 1)"));
            let _ = writeln!(src, "        const unsigned long long a = {PAIR_LOW};");
            src.push_str("        kiln_exchange(keys, pos, a, a | j, ((a & (p - 1ULL)) & k) == 0ULL);\n    }\n}\n");
        }
        SortStage::Write => {
            open(&mut src, &format!("const {ty}* __restrict__ x, const unsigned int* __restrict__ pos, {ty}* __restrict__ out, long long* __restrict__ idx, unsigned long long rows, unsigned long long n, unsigned long long p, unsigned long long kout"));
            src.push_str(&grid_loop("i", "rows * kout"));
            src.push_str("        const unsigned long long r = i / kout, j = i - r * kout;\n");
            // The first n pairs of a sorted row are its real ones (pads sort last): q < n.
            src.push_str("        const unsigned long long q = pos[r * p + j];\n");
            src.push_str("        out[i] = x[r * n + q];\n        idx[i] = (long long)q;\n    }\n}\n");
        }
    }
    let name = format!("kiln_sort_{}{tag}_{:016x}", stage.name(), fnv1a(src.as_bytes()));
    let source = src.replace("KILN_NAME", &name);
    SortKernel { name, source, stage, dtype }
}

/// Every kernel the tensor layer can ask for: the per-dtype stages on every dtype, the others
/// once.
pub fn sort_kernels() -> Vec<SortKernel> {
    SortStage::ALL
        .iter()
        .flat_map(|&s| {
            let dtypes: &[DType] = if s.per_dtype() { &DType::ALL } else { &[DType::F32] };
            dtypes.iter().map(move |&d| emit_sort(s, d))
        })
        .collect()
}
