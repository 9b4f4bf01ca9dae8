//! The bounds check of index values on the device: one pass over an int64 index (a strided
//! view) that raises a flag word when any value lies outside `[lo, hi)`.
//!
//! It replaces the `min`/`max` reductions the indexing ops ran before (two kernels, two
//! read-backs): the caller zeroes a 4-byte flag, launches this kernel and reads the flag back
//! (one kernel, one 4-byte read-back, so still one synchronization per checked op: an error
//! must be the op's own, raised at the caller's line before any scatter writes). Only when the
//! flag is set does the caller look for the first bad value in row-major order on the host,
//! for the error message. Every thread that sees a bad value stores the same word `1`, so the
//! racing stores need no atomics.
//!
//! Signature: `idx, flag, n, size_0 … size_{d-1}`, the index's element offset and `d` strides,
//! then `lo` and `hi` (an `i64`'s bits), every number `unsigned long long`.

use super::emit::{fnv1a, CUDA_CODEGEN_VERSION, ELEMENTWISE_BLOCK};
use super::strided::{index_space_params, open_index_loop, MAX_DIMS};
use kiln_runtime::cuda::{CudaError, CudaErrorKind};
use std::fmt::Write;

/// A generated bounds-check kernel over an index of `ndim` dims (after collapsing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundsKernel {
    /// The `extern "C"` kernel's name (`kiln_idx_bounds_<ndim>d_<hash>`).
    pub name: String,
    /// The CUDA C source.
    pub source: String,
    /// Number of dims of the index's view.
    pub ndim: usize,
}

/// Emits the bounds check over an int64 index of `ndim` dims. Errors (op `cuda_codegen`,
/// `InvalidArgument`): more than [`MAX_DIMS`] dims.
pub fn emit_bounds(ndim: usize) -> Result<BoundsKernel, CudaError> {
    if ndim > MAX_DIMS {
        let m = format!("{ndim} dims after collapsing; the bounds check indexes at most {MAX_DIMS}");
        return Err(CudaError::new("cuda_codegen", CudaErrorKind::InvalidArgument, m));
    }
    let mut sig = vec!["const long long* __restrict__ idx".to_string(), "unsigned int* __restrict__ flag".into()];
    sig.extend(index_space_params(&["pi"], ndim));
    sig.extend(["unsigned long long lo".to_string(), "unsigned long long hi".to_string()]);
    let mut src = String::new();
    let _ = writeln!(src, "// kiln-codegen cuda v{CUDA_CODEGEN_VERSION}: index bounds over {ndim} dim(s)");
    let _ = writeln!(
        src,
        "extern \"C\" __global__ void __launch_bounds__({ELEMENTWISE_BLOCK}) KILN_NAME({}) {{",
        sig.join(", ")
    );
    open_index_loop(&mut src, &["pi"], ndim);
    src.push_str("        const long long k = idx[pi];\n");
    src.push_str("        if (k < (long long)lo || k >= (long long)hi) *flag = 1u;\n    }\n}\n");
    let name = format!("kiln_idx_bounds_{ndim}d_{:016x}", fnv1a(src.as_bytes()));
    let source = src.replace("KILN_NAME", &name);
    Ok(BoundsKernel { name, source, ndim })
}
