//! Stream compaction kernels: the coordinates of the set flags of a contiguous bool buffer, in
//! row-major order (`nonzero`, and `masked_select`'s positions as the coordinates over a flat
//! shape).
//!
//! Three kernels over *chunks* of [`COMPACT_CHUNK`] flags (a block of [`COMPACT_BLOCK`]
//! threads, [`COMPACT_ITEMS`] consecutive flags per thread):
//! - [`CompactStage::Count`]: `flags, counts, n, chunks`: the set flags of each chunk.
//! - [`CompactStage::Scan`]: `counts, chunks`, one block: the counts in place become their
//!   exclusive prefix sums (each chunk's first output row) and `counts[chunks]` the total, which
//!   the host reads back to size the output (a sync, as in PyTorch).
//! - [`CompactStage::Write`]: `flags, counts, sizes, out, n, chunks, ndim`: each chunk's set
//!   flags in order (a block-wide scan of the threads' counts), flag `i` written as its
//!   coordinates over the `ndim` sizes in `sizes` (int64), row `counts[c] + rank` of `out`.
//!
//! Every block-wide scan adds in a fixed order, and the counts are exact integers: the result
//! is deterministic.

use super::emit::{fnv1a, CUDA_CODEGEN_VERSION};
use std::fmt::Write;

/// Threads per block of the compaction kernels (the block scan assumes 8 warps).
pub const COMPACT_BLOCK: u32 = 256;

/// Consecutive flags each thread reads.
pub const COMPACT_ITEMS: usize = 4;

/// Flags per chunk (one block's share).
pub const COMPACT_CHUNK: usize = COMPACT_BLOCK as usize * COMPACT_ITEMS;

/// One kernel of the compaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompactStage {
    /// Counts each chunk's set flags.
    Count,
    /// Turns the counts into offsets and their total (one block).
    Scan,
    /// Writes the coordinates of the set flags.
    Write,
}

impl CompactStage {
    /// Every stage.
    pub const ALL: [CompactStage; 3] = [CompactStage::Count, CompactStage::Scan, CompactStage::Write];

    /// The stage's name in kernel names.
    pub fn name(self) -> &'static str {
        match self {
            CompactStage::Count => "count",
            CompactStage::Scan => "scan",
            CompactStage::Write => "write",
        }
    }
}

/// A generated compaction kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactKernel {
    /// The `extern "C"` kernel's name (`kiln_compact_<stage>_<hash>`).
    pub name: String,
    /// The CUDA C source.
    pub source: String,
    /// Which kernel.
    pub stage: CompactStage,
}

/// `kiln_block_scan(v, &total)`: the exclusive prefix sum of `v` over the block's threads in
/// thread order (a warp shuffle scan, then the 8 warps' totals in order) and the block's total.
/// Every thread of the block must call it.
const BLOCK_SCAN: &str = "__device__ __forceinline__ long long kiln_block_scan(long long v, long long* total) {\n    \
__shared__ long long warp_total[8];\n    \
const unsigned int lane = threadIdx.x & 31u, w = threadIdx.x >> 5;\n    \
long long x = v;\n    \
for (unsigned int d = 1; d < 32u; d <<= 1) {\n        \
const long long y = __shfl_up_sync(0xffffffffu, x, d);\n        \
if (lane >= d) x += y;\n    \
}\n    \
if (lane == 31u) warp_total[w] = x;\n    \
__syncthreads();\n    \
long long before = 0, all = 0;\n    \
for (unsigned int k = 0; k < 8u; k++) {\n        \
const long long t = warp_total[k];\n        \
if (k < w) before += t;\n        \
all += t;\n    \
}\n    \
__syncthreads();\n    \
*total = all;\n    \
return before + x - v;\n}\n";

/// The loop over chunks, and each thread's count of set flags among its items (`first` is its
/// first flag's index).
fn open_chunk_loop(src: &mut String) {
    src.push_str("    for (unsigned long long c = blockIdx.x; c < chunks; c += gridDim.x) {\n");
    let _ = writeln!(src, "        const unsigned long long first = c * {COMPACT_CHUNK}ULL + (unsigned long long)threadIdx.x * {COMPACT_ITEMS}ULL;");
    src.push_str("        long long mine = 0;\n");
    let _ = writeln!(src, "        for (unsigned long long e = first; e < first + {COMPACT_ITEMS}ULL && e < n; e++) mine += flags[e] != 0;");
}

/// Emits the `stage` kernel.
pub fn emit_compact(stage: CompactStage) -> CompactKernel {
    let mut src = String::new();
    let _ = writeln!(src, "// kiln-codegen cuda v{CUDA_CODEGEN_VERSION}: compaction {}", stage.name());
    src.push_str(BLOCK_SCAN);
    let head = |params: &str| {
        format!("extern \"C\" __global__ void __launch_bounds__({COMPACT_BLOCK}) KILN_NAME({params}) {{\n")
    };
    let flags = "const unsigned char* __restrict__ flags";
    match stage {
        CompactStage::Count => {
            src.push_str(&head(&format!(
                "{flags}, long long* __restrict__ counts, unsigned long long n, unsigned long long chunks"
            )));
            open_chunk_loop(&mut src);
            src.push_str("        long long total;\n        kiln_block_scan(mine, &total);\n");
            src.push_str("        if (threadIdx.x == 0) counts[c] = total;\n    }\n}\n");
        }
        CompactStage::Scan => {
            src.push_str(&head("long long* __restrict__ counts, unsigned long long chunks"));
            src.push_str("    long long carry = 0;\n");
            let _ =
                writeln!(src, "    for (unsigned long long base = 0; base < chunks; base += {COMPACT_BLOCK}ULL) {{");
            src.push_str("        const unsigned long long c = base + threadIdx.x;\n");
            src.push_str("        const long long v = c < chunks ? counts[c] : 0;\n");
            src.push_str("        long long total;\n        const long long before = kiln_block_scan(v, &total);\n");
            src.push_str("        if (c < chunks) counts[c] = carry + before;\n        carry += total;\n    }\n");
            src.push_str("    if (threadIdx.x == 0) counts[chunks] = carry;\n}\n");
        }
        CompactStage::Write => {
            let params = format!("{flags}, const long long* __restrict__ counts, const long long* __restrict__ sizes, long long* __restrict__ out, unsigned long long n, unsigned long long chunks, unsigned long long ndim");
            src.push_str(&head(&params));
            open_chunk_loop(&mut src);
            src.push_str(
                "        long long total;\n        long long row = counts[c] + kiln_block_scan(mine, &total);\n",
            );
            let _ = writeln!(
                src,
                "        for (unsigned long long e = first; e < first + {COMPACT_ITEMS}ULL && e < n; e++) {{"
            );
            src.push_str("            if (flags[e] == 0) continue;\n");
            src.push_str("            unsigned long long rest = e;\n");
            src.push_str("            for (unsigned long long d = ndim; d-- > 0;) {\n");
            src.push_str("                const unsigned long long s = (unsigned long long)sizes[d];\n");
            src.push_str("                out[(unsigned long long)row * ndim + d] = (long long)(rest % s);\n");
            src.push_str("                rest /= s;\n            }\n            row++;\n        }\n    }\n}\n");
        }
    }
    let name = format!("kiln_compact_{}_{:016x}", stage.name(), fnv1a(src.as_bytes()));
    let source = src.replace("KILN_NAME", &name);
    CompactKernel { name, source, stage }
}

/// The number of chunks of `n` flags.
pub fn compact_chunks(n: usize) -> usize {
    n.div_ceil(COMPACT_CHUNK)
}
