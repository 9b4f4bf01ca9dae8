//! The column kernels of a 2-d convolution on CUDA: `im2col` lays an NCHW input out as the
//! columns a product with the weight reads, and `col2im` adds columns back into an input's
//! shape (its adjoint: the input gradient's last step).
//!
//! Layouts (contiguous, row-major): the input is `planes x h x w` (`planes = N * C_in`); the
//! columns are `planes x kh x kw x (oh * ow)`. With `C_in = G * C_in/G` that is `[N, G, C_in/G
//! * kh * kw, oh * ow]`, each group's column matrix where the batched product reads it, so
//! groups need nothing of the kernels. Column entry `(p, ki, kj, oy, ox)` holds input `(p, oy*sh
//! - ph + ki*dh, ox*sw - pw + kj*dw)`, or 0 in the padding (as `kiln_runtime::cpu::conv::im2col`).
//!
//! Both kernels write one element per thread ([`super::grid`]): `im2col` one column entry,
//! `col2im` one input element, which **gathers** the column entries that map to it (at most one
//! per kernel tap `(ki, kj)`: the tap's row `oy = (iy + ph - ki*dh) / sh` when that divides
//! exactly and lies in `0..oh`, and its column likewise), summed from 0 in ascending `(ki, kj)`
//! order, the CPU `col2im`'s order. No atomics, so the input gradient is deterministic.
//!
//! Signature: `im2col(x, col, n, …)`, `col2im(col, im, n, …)`, then the geometry words
//! [`COL_GEOMETRY_WORDS`], every number `unsigned long long`.

use super::grid::{emit_grid_kernel, GridBuffer};
use super::strided::storage_type;
use kiln_runtime::cpu::conv::ConvGeom;
use kiln_runtime::cuda::{CudaError, CudaErrorKind};
use kiln_runtime::DType;

/// The geometry words after `n`, in order.
pub const COL_GEOMETRY_WORDS: [&str; 12] = ["h", "w", "oh", "ow", "kh", "kw", "sh", "sw", "ph", "pw", "dh", "dw"];

/// Which column kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ColKind {
    /// Input planes to columns (padding reads as 0).
    Im2col,
    /// Columns added back into input planes (each input element sums its entries).
    Col2im,
}

impl ColKind {
    /// Both kinds.
    pub const ALL: [ColKind; 2] = [ColKind::Im2col, ColKind::Col2im];

    /// The kind's name in kernel names and messages.
    pub fn name(self) -> &'static str {
        match self {
            ColKind::Im2col => "im2col",
            ColKind::Col2im => "col2im",
        }
    }

    /// The kernel's (read, written) buffer names.
    pub fn buffers(self) -> [&'static str; 2] {
        match self {
            ColKind::Im2col => ["x", "col"],
            ColKind::Col2im => ["col", "im"],
        }
    }

    /// The elements of the buffer the kernel reads and of the one it writes, for every image
    /// and channel of `g`: (read, written). The launch runs one thread per written element.
    pub fn lengths(self, g: &ConvGeom) -> (usize, usize) {
        let planes = g.n * g.c_in;
        let (image, cols) = (planes * g.h * g.w, planes * g.kh * g.kw * g.oh * g.ow);
        match self {
            ColKind::Im2col => (image, cols),
            ColKind::Col2im => (cols, image),
        }
    }
}

/// A generated column kernel: its CUDA C and what a launch needs to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColKernel {
    /// The `extern "C"` kernel's name (`kiln_col_<kind>_<dtype>_<hash>`).
    pub name: String,
    /// The CUDA C source.
    pub source: String,
    /// What it computes.
    pub kind: ColKind,
    /// The dtype of the values (f32 or f64).
    pub dtype: DType,
}

/// The loop body of `kind` with values of C type `t`.
fn body(kind: ColKind, t: &str) -> String {
    match kind {
        ColKind::Im2col => format!(
            "\
        const long long l = (long long)(i % (unsigned long long)(oh * ow)), r = (long long)(i / (unsigned long long)(oh * ow));
        const long long kj = r % kw, ki = (r / kw) % kh, p = r / (kw * kh);
        const long long iy = (l / ow) * sh - ph + ki * dh, ix = (l % ow) * sw - pw + kj * dw;
        col[i] = (iy >= 0 && iy < h && ix >= 0 && ix < w) ? x[(p * h + iy) * w + ix] : ({t})0;
"
        ),
        ColKind::Col2im => format!(
            "\
        const long long ix = (long long)(i % w), iy = (long long)((i / w) % h), p = (long long)(i / (w * h));
        const {t}* plane = col + p * kh * kw * oh * ow;
        {t} g = ({t})0;
        for (long long ki = 0; ki < kh; ++ki) {{
            const long long ty = iy + ph - ki * dh;
            if (ty < 0 || ty % sh != 0 || ty / sh >= oh) continue;
            for (long long kj = 0; kj < kw; ++kj) {{
                const long long tx = ix + pw - kj * dw;
                if (tx < 0 || tx % sw != 0 || tx / sw >= ow) continue;
                g += plane[((ki * kw + kj) * oh + ty / sh) * ow + tx / sw];
            }}
        }}
        im[i] = g;
"
        ),
    }
}

/// Emits the `kind` kernel for `dtype`. Errors (op `cuda_codegen`, `Unsupported`): a dtype
/// other than f32 and f64 (the tensor layer computes f16 and bf16 convolutions in f32, as on
/// the CPU).
pub fn emit_col(kind: ColKind, dtype: DType) -> Result<ColKernel, CudaError> {
    if !matches!(dtype, DType::F32 | DType::F64) {
        let m = format!("CUDA column kernels take float32 and float64, not {dtype} ({})", kind.name());
        return Err(CudaError::new("cuda_codegen", CudaErrorKind::Unsupported, m));
    }
    let t = storage_type(dtype);
    let [read, written] = kind.buffers();
    let buffers =
        [GridBuffer { name: read, ty: t, written: false }, GridBuffer { name: written, ty: t, written: true }];
    let (name, source) = emit_grid_kernel("col", kind.name(), dtype, &buffers, &COL_GEOMETRY_WORDS, &body(kind, t));
    Ok(ColKernel { name, source, kind, dtype })
}

/// Every (kind, dtype) the tensor layer can ask for: each kind in f32 and f64.
pub fn col_ops() -> Vec<(ColKind, DType)> {
    ColKind::ALL.iter().flat_map(|&k| [DType::F32, DType::F64].map(move |d| (k, d))).collect()
}
