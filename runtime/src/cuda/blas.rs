//! cuBLAS: batched matrix products on a device's stream.
//!
//! libcublas is opened at run time (cudarc's dynamic loading) by the names cudarc tries
//! (`libcublas.so`, `libcublas.so.13`, …), so `LD_LIBRARY_PATH` decides which one; when none
//! opens, every product returns an error of kind [`CudaErrorKind::NoCublas`] instead of
//! panicking. One handle per device, created on first use and bound to the device's one
//! stream, so a product is ordered with every other kiln copy and launch on the device.
//!
//! Every product is one `cublasGemmStridedBatchedEx` call over row-major operands: an operand
//! stored column by column (a transposed view) is passed as a transpose flag, not copied
//! ([`MatrixLayout`]). f32 computes in f32 (TF32 tensor cores only after
//! [`set_allow_tf32`]`(true)`, PyTorch's `torch.backends.cuda.matmul.allow_tf32`), f64 in f64,
//! f16 and bf16 in f32 with the result rounded once.

use super::buffer::CudaBuffer;
use super::context::device;
use super::error::{CudaError, CudaErrorKind, Result};
use crate::dtype::DType;
use cudarc::cublas::{sys, CudaBlas};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

static ALLOW_TF32: AtomicBool = AtomicBool::new(false);

/// Lets f32 products use TF32 tensor cores (10-bit mantissa products, f32 sums): faster,
/// about 1e-3 relative error. Off by default, as PyTorch's
/// `torch.backends.cuda.matmul.allow_tf32`; process-wide, read at each product.
pub fn set_allow_tf32(allow: bool) {
    ALLOW_TF32.store(allow, Ordering::Relaxed);
}

/// Whether f32 products may use TF32 tensor cores (see [`set_allow_tf32`]).
pub fn allow_tf32() -> bool {
    ALLOW_TF32.load(Ordering::Relaxed)
}

/// How a row-major `rows x cols` matrix sits in memory, in the terms cuBLAS takes: row by row
/// (`transposed: false`, element `(r, c)` at `r * ld + c`) or column by column (`transposed:
/// true`, at `r + c * ld`); `ld` is the leading dimension (at least the row or column length,
/// and at least 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatrixLayout {
    /// Stored column by column (a transposed view of a row-major matrix).
    pub transposed: bool,
    /// The distance between consecutive rows (or columns when `transposed`), in elements.
    pub ld: usize,
}

impl MatrixLayout {
    /// The layout of a `rows x cols` view with these element strides, or `None` when cuBLAS
    /// cannot read it as is (neither dim has unit stride, or the rows overlap): the caller
    /// copies it first. The stride of a dim of size 1 is never used, so any value passes.
    pub fn of(rows: usize, cols: usize, row_stride: usize, col_stride: usize) -> Option<MatrixLayout> {
        if (cols <= 1 || col_stride == 1) && (rows <= 1 || row_stride >= cols.max(1)) {
            let ld = if rows <= 1 { cols.max(1) } else { row_stride };
            return Some(MatrixLayout { transposed: false, ld });
        }
        if (rows <= 1 || row_stride == 1) && (cols <= 1 || col_stride >= rows.max(1)) {
            let ld = if cols <= 1 { rows.max(1) } else { col_stride };
            return Some(MatrixLayout { transposed: true, ld });
        }
        None
    }
}

/// One operand of a batched product: its buffer, the element offset of its first matrix, how
/// each matrix is laid out and the element distance between consecutive matrices (0 repeats
/// one matrix for every batch entry).
#[derive(Clone, Copy, Debug)]
pub struct GemmOperand<'a> {
    /// The device buffer holding the elements.
    pub buf: &'a CudaBuffer,
    /// Element offset of the first matrix.
    pub offset: usize,
    /// Layout of every matrix.
    pub layout: MatrixLayout,
    /// Elements from one matrix to the next.
    pub batch_stride: usize,
}

/// The sizes of a batched product `out[b] = a[b] @ b[b]`: `batch` products of an `m x k` by a
/// `k x n` matrix, each output `m x n` row-major and contiguous, one after another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmShape {
    /// Number of products.
    pub batch: usize,
    /// Rows of `a` and of the output.
    pub m: usize,
    /// Columns of `a`, rows of `b`.
    pub k: usize,
    /// Columns of `b` and of the output.
    pub n: usize,
}

/// Whether libcublas can be opened (asked once).
pub fn cublas_available() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: `is_culib_present` only tries to dlopen the library by its usual names.
    *PRESENT.get_or_init(|| unsafe { sys::is_culib_present() })
}

/// The cuBLAS handle of `cuda:ordinal`, created on first use on the device's stream.
fn handle(op: &'static str, ordinal: usize) -> Result<&'static Mutex<CudaBlas>> {
    static HANDLES: OnceLock<Mutex<Vec<Option<&'static Mutex<CudaBlas>>>>> = OnceLock::new();
    if !cublas_available() {
        return Err(CudaError::new(
            op,
            CudaErrorKind::NoCublas,
            "cuBLAS (libcublas.so) not found: put the folder holding it (a CUDA toolkit's lib64, or pip's nvidia/cu13/lib) on LD_LIBRARY_PATH",
        ));
    }
    let dev = device(op, ordinal)?;
    let mut slots = HANDLES.get_or_init(|| Mutex::new(Vec::new())).lock().unwrap_or_else(|e| e.into_inner());
    if slots.len() <= ordinal {
        slots.resize(ordinal + 1, None);
    }
    if let Some(h) = slots[ordinal] {
        return Ok(h);
    }
    dev.bind(op)?;
    let blas = CudaBlas::new(dev.stream().clone()).map_err(|e| {
        CudaError::new(op, CudaErrorKind::Driver, format!("creating the cuBLAS handle of cuda:{ordinal} failed: {e}"))
    })?;
    // Kept for the life of the process, as the device itself.
    let h: &'static Mutex<CudaBlas> = Box::leak(Box::new(Mutex::new(blas)));
    slots[ordinal] = Some(h);
    Ok(h)
}

/// cuBLAS's element type and compute type for `dtype`, or `None` for dtypes it does not
/// multiply (integers, bool).
fn types(dtype: DType) -> Option<(sys::cudaDataType, sys::cublasComputeType_t)> {
    use sys::cublasComputeType_t as C;
    use sys::cudaDataType as D;
    let f32_compute = if allow_tf32() { C::CUBLAS_COMPUTE_32F_FAST_TF32 } else { C::CUBLAS_COMPUTE_32F };
    match dtype {
        DType::F32 => Some((D::CUDA_R_32F, f32_compute)),
        DType::F64 => Some((D::CUDA_R_64F, C::CUBLAS_COMPUTE_64F)),
        DType::F16 => Some((D::CUDA_R_16F, C::CUBLAS_COMPUTE_32F)),
        DType::BF16 => Some((D::CUDA_R_16BF, C::CUBLAS_COMPUTE_32F)),
        _ => None,
    }
}

/// A size as cuBLAS's `int`, or an error naming it.
fn int(op: &'static str, what: &str, v: usize) -> Result<i32> {
    i32::try_from(v).map_err(|_| {
        CudaError::new(op, CudaErrorKind::Unsupported, format!("{what} = {v} does not fit cuBLAS's 32-bit int"))
    })
}

/// An error unless `x`'s matrices (`rows x cols`, `batch` of them) lie inside its buffer.
fn check_extent(
    op: &'static str,
    name: &str,
    x: &GemmOperand<'_>,
    rows: usize,
    cols: usize,
    batch: usize,
    elem: usize,
) -> Result<()> {
    let (r, c) = if x.layout.transposed { (cols, rows) } else { (rows, cols) };
    let last = x.offset + (batch - 1) * x.batch_stride + (r - 1) * x.layout.ld + (c - 1);
    if (last + 1) * elem > x.buf.len_bytes() {
        return Err(CudaError::new(
            op,
            CudaErrorKind::InvalidArgument,
            format!(
                "{name}: {batch} matrices of {rows}x{cols} ({x:?}) reach element {last}, past the buffer's {} bytes",
                x.buf.len_bytes()
            ),
        ));
    }
    Ok(())
}

/// `out[b] = a[b] @ b[b]` for every `b < shape.batch`, in `dtype` (f32, f64, f16, bf16), into
/// the contiguous `batch x m x n` buffer `out`, queued on the device's stream. Every size must
/// be non-zero. Errors: no cuBLAS, no device, an unsupported dtype, operands on another device
/// or outside their buffers, sizes over 2^31 - 1, or cuBLAS's own status.
pub fn gemm(
    op: &'static str,
    dtype: DType,
    shape: GemmShape,
    a: GemmOperand<'_>,
    b: GemmOperand<'_>,
    out: &mut CudaBuffer,
) -> Result<()> {
    let GemmShape { batch, m, k, n } = shape;
    let Some((data_type, compute)) = types(dtype) else {
        return Err(CudaError::new(
            op,
            CudaErrorKind::Unsupported,
            format!("cuBLAS products take float32, float64, float16 and bfloat16, not {dtype}"),
        ));
    };
    if batch == 0 || m == 0 || k == 0 || n == 0 {
        return Err(CudaError::new(
            op,
            CudaErrorKind::InvalidArgument,
            format!("empty product {shape:?}: nothing for cuBLAS to do"),
        ));
    }
    let ordinal = out.ordinal();
    if a.buf.ordinal() != ordinal || b.buf.ordinal() != ordinal {
        return Err(CudaError::new(
            op,
            CudaErrorKind::InvalidArgument,
            format!("operands on cuda:{} and cuda:{}, output on cuda:{ordinal}", a.buf.ordinal(), b.buf.ordinal()),
        ));
    }
    let elem = dtype.size_in_bytes();
    check_extent(op, "lhs", &a, m, k, batch, elem)?;
    check_extent(op, "rhs", &b, k, n, batch, elem)?;
    if batch * m * n * elem > out.len_bytes() {
        return Err(CudaError::new(
            op,
            CudaErrorKind::InvalidArgument,
            format!("output of {batch}x{m}x{n} does not fit {} bytes", out.len_bytes()),
        ));
    }
    let (mi, ki, ni, bi) = (int(op, "m", m)?, int(op, "k", k)?, int(op, "n", n)?, int(op, "batch", batch)?);
    let (lda, ldb) = (int(op, "lhs leading dimension", a.layout.ld)?, int(op, "rhs leading dimension", b.layout.ld)?);
    let flag = |l: MatrixLayout| {
        if l.transposed {
            sys::cublasOperation_t::CUBLAS_OP_T
        } else {
            sys::cublasOperation_t::CUBLAS_OP_N
        }
    };
    let ptr = |x: &GemmOperand<'_>| (x.buf.device_ptr() as usize + x.offset * elem) as *const std::ffi::c_void;
    let (one64, zero64, one32, zero32) = (1.0f64, 0.0f64, 1.0f32, 0.0f32);
    let (alpha, beta) = if dtype == DType::F64 {
        (&one64 as *const f64 as *const std::ffi::c_void, &zero64 as *const f64 as *const std::ffi::c_void)
    } else {
        (&one32 as *const f32 as *const std::ffi::c_void, &zero32 as *const f32 as *const std::ffi::c_void)
    };
    let h = handle(op, ordinal)?;
    let blas = h.lock().unwrap_or_else(|e| e.into_inner());
    out.device().bind(op)?;
    // cuBLAS is column-major: the row-major `m x n` output is the column-major `n x m` matrix
    // `outᵀ = bᵀ aᵀ`, so `b` goes first; a row-major operand read column-major is its own
    // transpose (flag N), a column-major one needs the flag T.
    // SAFETY: the handle is bound to this device's stream and used under its mutex; every
    // pointer is a live allocation on this device whose matrices lie inside it
    // (`check_extent`), the output holds `batch * m * n` elements, the leading dimensions
    // satisfy cuBLAS's bounds (`MatrixLayout::of`), and `alpha`/`beta` are host scalars of the
    // compute type that outlive the call (host pointer mode, cuBLAS's default).
    let status = unsafe {
        cudarc::cublas::result::gemm_strided_batched_ex(
            *blas.handle(),
            flag(b.layout),
            flag(a.layout),
            ni,
            mi,
            ki,
            alpha,
            ptr(&b),
            data_type,
            ldb,
            b.batch_stride as i64,
            ptr(&a),
            data_type,
            lda,
            a.batch_stride as i64,
            beta,
            out.device_ptr() as *mut std::ffi::c_void,
            data_type,
            ni,
            (m * n) as i64,
            bi,
            compute,
            sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
        )
    };
    status.map_err(|e| {
        CudaError::new(
            op,
            CudaErrorKind::Launch,
            format!("cublasGemmStridedBatchedEx ({dtype}, {shape:?}) failed: {e}"),
        )
    })?;
    if super::kernel::launch_blocking() {
        out.device().synchronize().map_err(|e| e.in_op(op))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_major_and_transposed_views_need_no_copy() {
        // A contiguous 3x4 matrix, a row of a wider one, and the transpose of a 4x3 one.
        assert_eq!(MatrixLayout::of(3, 4, 4, 1), Some(MatrixLayout { transposed: false, ld: 4 }));
        assert_eq!(MatrixLayout::of(3, 4, 10, 1), Some(MatrixLayout { transposed: false, ld: 10 }));
        assert_eq!(MatrixLayout::of(3, 4, 1, 3), Some(MatrixLayout { transposed: true, ld: 3 }));
        // Unit dims: the unused stride does not matter, the leading dimension stays legal.
        assert_eq!(MatrixLayout::of(1, 4, 0, 1), Some(MatrixLayout { transposed: false, ld: 4 }));
        assert_eq!(MatrixLayout::of(4, 1, 1, 0), Some(MatrixLayout { transposed: false, ld: 1 }));
        assert_eq!(MatrixLayout::of(4, 1, 7, 0), Some(MatrixLayout { transposed: false, ld: 7 }));
        assert_eq!(MatrixLayout::of(1, 1, 0, 0), Some(MatrixLayout { transposed: false, ld: 1 }));
    }

    #[test]
    fn strided_and_overlapping_views_are_refused() {
        assert_eq!(MatrixLayout::of(3, 4, 8, 2), None); // every other column
        assert_eq!(MatrixLayout::of(3, 4, 2, 1), None); // rows overlap
        assert_eq!(MatrixLayout::of(3, 4, 0, 1), None); // an expanded row
        assert_eq!(MatrixLayout::of(3, 4, 1, 2), None); // columns overlap
    }

    #[test]
    fn tf32_is_off_until_allowed() {
        assert!(!allow_tf32());
        assert_eq!(types(DType::F32).map(|t| t.1), Some(sys::cublasComputeType_t::CUBLAS_COMPUTE_32F));
        assert_eq!(types(DType::I64), None);
    }
}
