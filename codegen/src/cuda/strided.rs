//! From an [`Expr`] to a CUDA C elementwise kernel over strided operands of any dtypes: the
//! kernel behind eager CUDA ops (each one a fused group of one op).
//!
//! Shapes and strides are **kernel arguments**, not baked into the source: one kernel per
//! (expression, operand dtypes, compute type, number of dims), so a new shape, a transposed or
//! broadcast view, or a new offset reuses the compiled kernel. The caller collapses the dims
//! first (size-1 dims dropped, dims contiguous in every operand merged), so a contiguous
//! operand set is one dim and the index math is one multiply-add per operand.
//!
//! Signature: `in0 … in{k-1}, out, n, size_0 … size_{d-1}`, then for each operand (inputs,
//! then the output) its element offset and `d` strides, all `unsigned long long`. Element `i`
//! (row-major over the sizes) reads `in_j[off_j + Σ coord_m · stride_j,m]` and writes
//! `out[off_o + Σ coord_m · stride_o,m]`. Inputs are converted to the compute type on load
//! (f16/bf16 through f32, integers and bool to `long long`), the output from it on store, with
//! the CPU casts' rules (float to integer truncates toward zero through i64, then wraps).

use super::emit::{dtype_tag, fnv1a, has_integer_op, max_input, Body, CUDA_CODEGEN_VERSION, ELEMENTWISE_BLOCK};
use super::ops::ComputeType;
use crate::expr::Expr;
use kiln_runtime::cuda::{CudaError, CudaErrorKind};
use kiln_runtime::DType;
use std::fmt::Write;

/// The most dims a strided kernel indexes (after collapsing).
pub const MAX_DIMS: usize = 8;

/// A generated strided elementwise kernel: its CUDA C and what a launch needs to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StridedKernel {
    /// The `extern "C"` kernel's name (`kiln_sew_<hash>`).
    pub name: String,
    /// The CUDA C source.
    pub source: String,
    /// The dtype of each input.
    pub inputs: Vec<DType>,
    /// The output's dtype.
    pub out: DType,
    /// Number of dims of the index space.
    pub ndim: usize,
}

/// The C type a dtype is stored as on the device (bool as a 0/1 byte, f16/bf16 as 16-bit words).
pub(super) fn storage_type(d: DType) -> &'static str {
    match d {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::F16 | DType::BF16 => "unsigned short",
        DType::I64 => "long long",
        DType::I32 => "int",
        DType::U8 | DType::Bool => "unsigned char",
    }
}

/// `v`, stored as `d`, converted to the compute type `ct`.
pub(super) fn load(d: DType, v: &str, ct: ComputeType, body: &mut Body) -> String {
    let v = match d {
        DType::F16 => {
            body.helpers.insert("kiln_f16");
            format!("kiln_f16_to_f32({v})")
        }
        DType::BF16 => {
            body.helpers.insert("kiln_bf16");
            format!("kiln_bf16_to_f32({v})")
        }
        _ => v.to_string(),
    };
    let native = matches!(
        (d, ct),
        (DType::F32 | DType::F16 | DType::BF16, ComputeType::F32)
            | (DType::F64, ComputeType::F64)
            | (DType::I64, ComputeType::I64)
    );
    if native {
        v
    } else {
        format!("({})({v})", ct.c_type())
    }
}

/// `v` of the compute type `ct`, converted to `d`'s stored form as the CPU cast does.
pub(super) fn store(d: DType, v: &str, ct: ComputeType, body: &mut Body) -> String {
    let float = ct != ComputeType::I64;
    match d {
        DType::F32 if ct == ComputeType::F32 => v.to_string(),
        DType::F32 => format!("(float)({v})"),
        DType::F64 => format!("(double)({v})"),
        DType::F16 | DType::BF16 => {
            let (helper, f32_fn, f64_fn) = match d {
                DType::F16 => ("kiln_f16", "kiln_f32_to_f16", "kiln_f64_to_f16"),
                _ => ("kiln_bf16", "kiln_f32_to_bf16", "kiln_f64_to_bf16"),
            };
            body.helpers.insert(helper);
            match ct {
                ComputeType::F32 => format!("{f32_fn}({v})"),
                ComputeType::F64 => format!("{f64_fn}({v})"),
                ComputeType::I64 => format!("{f64_fn}((double)({v}))"),
            }
        }
        DType::I64 if float => format!("(long long)({v})"),
        DType::I64 => v.to_string(),
        DType::I32 | DType::U8 if float => format!("({})(long long)({v})", storage_type(d)),
        DType::I32 | DType::U8 => format!("({})({v})", storage_type(d)),
        DType::Bool => format!("(unsigned char)(({v}) != {})", ct.lit(0.0)),
    }
}

/// An error unless every op of `expr` exists in the compute type `ct`: integer kernels hold
/// integer ops only and no casts (an eager cast is the store's conversion); float kernels no
/// bitwise ops.
fn check_ops(expr: &Expr, ct: ComputeType) -> Result<(), String> {
    let bad = |what: &str| Err(format!("{what} cannot be computed in {}: {expr}", ct.c_type()));
    match expr {
        Expr::Input(_) | Expr::Const(_) => Ok(()),
        Expr::Unary(op, a) => {
            if ct == ComputeType::I64 && super::ops::unary_int(*op, "x").is_none() {
                return bad(op.name());
            }
            check_ops(a, ct)
        }
        Expr::Binary(op, a, b) => {
            if ct == ComputeType::I64 && super::ops::binary_int(*op, "x", "y").is_none() {
                return bad(op.name());
            }
            check_ops(a, ct).and(check_ops(b, ct))
        }
        Expr::Cmp(_, a, b) => check_ops(a, ct).and(check_ops(b, ct)),
        Expr::Where(c, a, b) => check_ops(c, ct).and(check_ops(a, ct)).and(check_ops(b, ct)),
        Expr::Cast(..) if ct == ComputeType::I64 => bad("a cast"),
        Expr::Cast(_, a) => check_ops(a, ct),
    }
    .and_then(|()| if ct != ComputeType::I64 && has_integer_op(expr) { bad("a bitwise op") } else { Ok(()) })
}

/// Emits the kernel computing `expr` in `compute`'s compute type (f16/bf16 compute in f32,
/// integers and bool in i64) over inputs of the dtypes `inputs`, strided over `ndim` dims,
/// into an output of `out`. Errors (op `cuda_codegen`, `InvalidArgument`): an input index past
/// `inputs`, more than [`MAX_DIMS`] dims, or an op the compute type cannot compute.
pub fn emit_strided(
    expr: &Expr,
    inputs: &[DType],
    compute: DType,
    out: DType,
    ndim: usize,
) -> Result<StridedKernel, CudaError> {
    if ndim > MAX_DIMS {
        return Err(CudaError::new(
            "cuda_codegen",
            CudaErrorKind::InvalidArgument,
            format!("{ndim} dims after collapsing; strided kernels index at most {MAX_DIMS}"),
        ));
    }
    let (mut body, mut src) = prepare(expr, inputs, compute, out, &format!("strided elementwise over {ndim} dim(s)"))?;
    let ct = body.ct;
    let loads: Vec<String> =
        inputs.iter().enumerate().map(|(j, &d)| load(d, &format!("in{j}[p{j}]"), ct, &mut body)).collect();
    let value = store(out, &format!("kiln_body({})", loads.join(", ")), ct, &mut body);

    let k = inputs.len();
    let operands: Vec<String> = (0..k).map(|j| format!("p{j}")).chain(["po".to_string()]).collect();
    let operands: Vec<&str> = operands.iter().map(String::as_str).collect();
    let mut sig: Vec<String> =
        inputs.iter().enumerate().map(|(j, &d)| format!("const {}* __restrict__ in{j}", storage_type(d))).collect();
    sig.push(format!("{}* __restrict__ out", storage_type(out)));
    sig.extend(index_space_params(&operands, ndim));
    let _ = writeln!(
        src,
        "extern \"C\" __global__ void __launch_bounds__({ELEMENTWISE_BLOCK}) KILN_NAME({}) {{",
        sig.join(", ")
    );
    open_index_loop(&mut src, &operands, ndim);
    let _ = writeln!(src, "        out[po] = {value};\n    }}\n}}");

    let name = format!("kiln_sew_{}_{:016x}", dtype_tag(out), fnv1a(src.as_bytes()));
    let source = src.replace("KILN_NAME", &name);
    Ok(StridedKernel { name, source, inputs: inputs.to_vec(), out, ndim })
}

/// The checks and common start of an eager kernel computing `expr` in `compute`'s compute
/// type over `inputs` into `out`: the body (`kiln_body`; the helpers of the operands'
/// conversions already written) and the source's first lines (a comment naming the kernel `what` is, the expression, the
/// device function). Errors (op `cuda_codegen`, `InvalidArgument`): an input index past
/// `inputs`, or an op the compute type cannot compute.
pub(super) fn prepare(
    expr: &Expr,
    inputs: &[DType],
    compute: DType,
    out: DType,
    what: &str,
) -> Result<(Body, String), CudaError> {
    let bad = |m: String| Err(CudaError::new("cuda_codegen", CudaErrorKind::InvalidArgument, m));
    let ct = ComputeType::of(compute);
    if let Some(i) = max_input(expr).filter(|&i| i >= inputs.len()) {
        return bad(format!("the expression reads input {i} but the kernel has {} input(s): {expr}", inputs.len()));
    }
    if let Err(m) = check_ops(expr, ct) {
        return bad(m);
    }
    let mut body = Body::new(ct);
    let result = body.emit(expr);
    // The conversions every load and the store will use register their helpers now, so that
    // the device function's text (written below) includes them.
    for &d in inputs {
        load(d, "x", ct, &mut body);
    }
    store(out, "x", ct, &mut body);
    let tags: Vec<&str> = inputs.iter().map(|&d| dtype_tag(d)).collect();
    let mut src = String::new();
    let _ = writeln!(
        src,
        "// kiln-codegen cuda v{CUDA_CODEGEN_VERSION}: {what} ({}) -> {} in {}",
        tags.join(", "),
        dtype_tag(out),
        ct.c_type()
    );
    let _ = writeln!(src, "// {expr}");
    src.push_str(&body.device_fn(&result, inputs.len()));
    Ok((body, src))
}

/// The parameters of a strided index space over `ndim` dims: `n` (the element count), each
/// dim's size, then for each operand `p` its element offset `p_off` and strides `p_st0 …`.
pub(super) fn index_space_params(operands: &[&str], ndim: usize) -> Vec<String> {
    let mut sig = vec!["unsigned long long n".to_string()];
    sig.extend((0..ndim).map(|m| format!("unsigned long long size{m}")));
    for p in operands {
        sig.push(format!("unsigned long long {p}_off"));
        sig.extend((0..ndim).map(|m| format!("unsigned long long {p}_st{m}")));
    }
    sig
}

/// Opens the grid-stride loop over the index space of [`index_space_params`]: inside it, `i`
/// is the linear index and each operand's name holds its element's offset. The caller writes
/// the body and closes the loop and the function (`    }\n}\n`).
pub(super) fn open_index_loop(src: &mut String, operands: &[&str], ndim: usize) {
    src.push_str("    const unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;\n");
    src.push_str("    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {\n");
    for p in operands {
        let _ = writeln!(src, "        unsigned long long {p} = {p}_off;");
    }
    if ndim > 0 {
        src.push_str("        unsigned long long r = i;\n");
    }
    // Innermost dim first; the outermost coordinate is what remains of the index.
    for m in (0..ndim).rev() {
        if m == 0 {
            src.push_str("        {\n            const unsigned long long c = r;\n");
        } else {
            let _ = writeln!(
                src,
                "        {{\n            const unsigned long long c = r % size{m};\n            r /= size{m};"
            );
        }
        for p in operands {
            let _ = writeln!(src, "            {p} += c * {p}_st{m};");
        }
        src.push_str("        }\n");
    }
}
