//! From an [`Expr`] to one CUDA C elementwise kernel.
//!
//! The kernel is `extern "C"`, takes `in0 … in{k-1}, out, n` (contiguous buffers of the kernel's
//! dtype and the element count), and runs a grid-stride loop. For f32 and f64 the loop moves
//! 16 bytes per access (`float4` / `double2`; kiln's device blocks are 256-byte aligned) and a
//! scalar loop finishes the tail. The expression becomes one `__device__` function of the
//! input elements (`kiln_body`), written as SSA temporaries with repeated subexpressions shared.
//! f16 and bf16 are stored as 16-bit words and computed in f32.

use super::ops::{self, ComputeType};
use crate::expr::Expr;
use kiln_runtime::cuda::{CudaError, CudaErrorKind};
use kiln_runtime::DType;
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write;

/// The emitter's version, written into every kernel's first line: part of the kernel cache key.
pub const CUDA_CODEGEN_VERSION: u32 = 1;

/// Threads per block of the elementwise kernels.
pub const ELEMENTWISE_BLOCK: u32 = 256;

/// The CUDA C kernel of one [`Expr`] over contiguous inputs (eager ops and benches; the IR
/// `kernel::ElementwiseKernel` of `kiln::compile` becomes a [`super::FusedKernel`] instead),
/// and what a launch needs to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExprKernel {
    /// The `extern "C"` kernel's name (`kiln_ew_<dtype>_<hash>`: equal exprs share it).
    pub name: String,
    /// The CUDA C source.
    pub source: String,
    /// Number of input buffers.
    pub num_inputs: usize,
    /// The dtype of every input and of the output.
    pub dtype: DType,
    /// Elements per vectorized access (4 for f32, 2 for f64, else 1).
    pub vector_width: usize,
}

/// The short name of a dtype in kernel names.
pub(super) fn dtype_tag(d: DType) -> &'static str {
    match d {
        DType::Bool => "b8",
        DType::U8 => "u8",
        DType::I32 => "i32",
        DType::I64 => "i64",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::F32 => "f32",
        DType::F64 => "f64",
    }
}

/// Emits the kernel computing `expr` elementwise over `num_inputs` contiguous inputs of `dtype`
/// into an output of `dtype`. Errors (op `cuda_codegen`): an input index ≥ `num_inputs`
/// (`InvalidArgument`), or an integer/bool `dtype` (`Unsupported`: not generated yet).
pub fn emit_elementwise(expr: &Expr, num_inputs: usize, dtype: DType) -> Result<ExprKernel, CudaError> {
    let op = "cuda_codegen";
    let ct = match dtype {
        DType::F32 | DType::F16 | DType::BF16 => ComputeType::F32,
        DType::F64 => ComputeType::F64,
        d => {
            return Err(CudaError::new(
                op,
                CudaErrorKind::Unsupported,
                format!("CUDA elementwise kernels for {d} are not supported yet (float dtypes only): {expr}"),
            ))
        }
    };
    if let Some(i) = max_input(expr).filter(|&i| i >= num_inputs) {
        return Err(CudaError::new(
            op,
            CudaErrorKind::InvalidArgument,
            format!("the expression reads input {i} but the kernel has {num_inputs} input(s): {expr}"),
        ));
    }
    if has_integer_op(expr) {
        return Err(CudaError::new(
            op,
            CudaErrorKind::InvalidArgument,
            format!("bitwise ops are integer ops; a {dtype} kernel cannot compute them: {expr}"),
        ));
    }
    let mut body = Body::new(ct);
    let result = body.emit(expr);
    if matches!(dtype, DType::F16) {
        body.helpers.insert("kiln_f16");
    }
    if matches!(dtype, DType::BF16) {
        body.helpers.insert("kiln_bf16");
    }
    let mut src = String::new();
    let _ = writeln!(
        src,
        "// kiln-codegen cuda v{CUDA_CODEGEN_VERSION}: elementwise {} over {num_inputs} input(s)",
        dtype_tag(dtype)
    );
    let _ = writeln!(src, "// {expr}");
    src.push_str(&body.device_fn(&result, num_inputs));

    let (store_t, load, store, vec) = match dtype {
        DType::F32 => ("float", "", "", Some(("float4", 4usize))),
        DType::F64 => ("double", "", "", Some(("double2", 2usize))),
        DType::F16 => ("unsigned short", "kiln_f16_to_f32", "kiln_f32_to_f16", None),
        _ => ("unsigned short", "kiln_bf16_to_f32", "kiln_f32_to_bf16", None),
    };
    let mut sig: Vec<String> = (0..num_inputs).map(|i| format!("const {store_t}* in{i}")).collect();
    sig.push(format!("{store_t}* out"));
    sig.push("unsigned long long n".into());
    let _ = writeln!(
        src,
        "extern \"C\" __global__ void __launch_bounds__({ELEMENTWISE_BLOCK}) KILN_NAME({}) {{",
        sig.join(", ")
    );
    src.push_str("    const unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;\n");
    src.push_str("    const unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;\n");
    let vector_width = match vec {
        Some((vt, w)) => {
            let lanes = ["x", "y", "z", "w"];
            let _ = writeln!(src, "    const unsigned long long nv = n / {w};");
            src.push_str("    for (unsigned long long v = tid; v < nv; v += stride) {\n");
            for i in 0..num_inputs {
                let _ = writeln!(src, "        const {vt} a{i} = reinterpret_cast<const {vt}*>(in{i})[v];");
            }
            let _ = writeln!(src, "        {vt} r;");
            for lane in &lanes[..w] {
                let args: Vec<String> = (0..num_inputs).map(|i| format!("a{i}.{lane}")).collect();
                let _ = writeln!(src, "        r.{lane} = kiln_body({});", args.join(", "));
            }
            let _ = writeln!(src, "        reinterpret_cast<{vt}*>(out)[v] = r;\n    }}");
            let _ = writeln!(src, "    for (unsigned long long i = nv * {w} + tid; i < n; i += stride) {{");
            w
        }
        None => {
            src.push_str("    for (unsigned long long i = tid; i < n; i += stride) {\n");
            1
        }
    };
    let args: Vec<String> = (0..num_inputs)
        .map(|i| if load.is_empty() { format!("in{i}[i]") } else { format!("{load}(in{i}[i])") })
        .collect();
    let call = format!("kiln_body({})", args.join(", "));
    let value = if store.is_empty() { call } else { format!("{store}({call})") };
    let _ = writeln!(src, "        out[i] = {value};\n    }}\n}}");

    let name = format!("kiln_ew_{}_{:016x}", dtype_tag(dtype), fnv1a(src.as_bytes()));
    let source = src.replace("KILN_NAME", &name);
    Ok(ExprKernel { name, source, num_inputs, dtype, vector_width })
}

/// True when `expr` uses an op defined on integers only (bitwise ops, shifts, bitwise not),
/// which a float kernel cannot compute.
pub(super) fn has_integer_op(e: &Expr) -> bool {
    match e {
        Expr::Input(_) | Expr::Const(_) => false,
        Expr::Unary(op, a) => op.is_int_only() || has_integer_op(a),
        Expr::Cast(_, a) => has_integer_op(a),
        Expr::Binary(op, a, b) => op.is_bitwise() || has_integer_op(a) || has_integer_op(b),
        Expr::Cmp(_, a, b) => has_integer_op(a) || has_integer_op(b),
        Expr::Where(c, a, b) => has_integer_op(c) || has_integer_op(a) || has_integer_op(b),
    }
}

/// The largest input index `expr` reads.
pub(super) fn max_input(e: &Expr) -> Option<usize> {
    match e {
        Expr::Input(i) => Some(*i),
        Expr::Const(_) => None,
        Expr::Unary(_, a) | Expr::Cast(_, a) => max_input(a),
        Expr::Binary(_, a, b) | Expr::Cmp(_, a, b) => max_input(a).max(max_input(b)),
        Expr::Where(c, a, b) => max_input(c).max(max_input(a)).max(max_input(b)),
    }
}

/// FNV-1a of `bytes`: kernel names from their source.
pub(super) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3))
}

/// The body of `kiln_body`: one `const T tK = …;` per distinct subexpression.
pub(super) struct Body {
    pub(super) ct: ComputeType,
    pub(super) lines: Vec<String>,
    seen: HashMap<String, String>,
    pub(super) helpers: BTreeSet<&'static str>,
}

impl Body {
    /// An empty body computing in `ct`.
    pub(super) fn new(ct: ComputeType) -> Body {
        Body { ct, lines: Vec::new(), seen: HashMap::new(), helpers: BTreeSet::new() }
    }

    /// The helpers it uses and `kiln_body(x0, …)`, the `__device__` function returning `result`.
    pub(super) fn device_fn(&self, result: &str, num_inputs: usize) -> String {
        let t = self.ct.c_type();
        let mut src: String = self.helpers.iter().map(|h| ops::helper(h, self.ct)).collect();
        let params: Vec<String> = (0..num_inputs).map(|i| format!("{t} x{i}")).collect();
        let _ = writeln!(src, "__device__ __forceinline__ {t} kiln_body({}) {{", params.join(", "));
        for l in &self.lines {
            let _ = writeln!(src, "    {l}");
        }
        let _ = writeln!(src, "    return {result};\n}}");
        src
    }

    /// The name (temporary, parameter or literal) holding `e`'s value.
    pub(super) fn emit(&mut self, e: &Expr) -> String {
        let ct = self.ct;
        let rhs = match e {
            Expr::Input(i) => return format!("x{i}"),
            Expr::Const(c) => return ct.lit(*c),
            Expr::Unary(op, a) => {
                let a = self.emit(a);
                ops::unary_in(*op, &a, ct).expect("kernels are checked to hold only ops their compute type computes")
            }
            Expr::Binary(op, a, b) => {
                let (a, b) = (self.emit(a), self.emit(b));
                let (formula, helper) = ops::binary_in(*op, &a, &b, ct)
                    .expect("kernels are checked to hold only ops their compute type computes");
                self.helpers.extend(helper);
                formula
            }
            Expr::Cmp(op, a, b) => {
                let (a, b) = (self.emit(a), self.emit(b));
                ops::cmp(*op, &a, &b, ct)
            }
            Expr::Where(c, a, b) => {
                let (c, a, b) = (self.emit(c), self.emit(a), self.emit(b));
                format!("({c} != {}) ? {a} : {b}", ct.lit(0.0))
            }
            Expr::Cast(d, a) => {
                let a = self.emit(a);
                self.cast(*d, &a)
            }
        };
        if let Some(t) = self.seen.get(&rhs) {
            return t.clone();
        }
        let t = format!("t{}", self.lines.len());
        self.lines.push(format!("const {} {t} = {rhs};", ct.c_type()));
        self.seen.insert(rhs, t.clone());
        t
    }

    /// `a` rounded to what `d` can hold, as the eager cast rounds (float→int truncates toward
    /// zero and saturates to i64, then wraps to the narrower type).
    fn cast(&mut self, d: DType, a: &str) -> String {
        let ct = self.ct;
        let t = ct.c_type();
        match (d, ct) {
            (_, ComputeType::I64) => unreachable!("casts in integer kernels are refused before emission"),
            (DType::F64, _) | (DType::F32, ComputeType::F32) => a.to_string(),
            (DType::F32, ComputeType::F64) => format!("(double)(float){a}"),
            (DType::F16, ComputeType::F32) => {
                self.helpers.insert("kiln_f16");
                format!("kiln_f16_to_f32(kiln_f32_to_f16({a}))")
            }
            (DType::F16, ComputeType::F64) => {
                self.helpers.insert("kiln_f16");
                format!("(double)kiln_f16_to_f32(kiln_f64_to_f16({a}))")
            }
            (DType::BF16, ComputeType::F32) => {
                self.helpers.insert("kiln_bf16");
                format!("kiln_bf16_to_f32(kiln_f32_to_bf16({a}))")
            }
            (DType::BF16, ComputeType::F64) => {
                self.helpers.insert("kiln_bf16");
                format!("(double)kiln_bf16_to_f32(kiln_f64_to_bf16({a}))")
            }
            (DType::I64, _) => format!("({t})(long long){a}"),
            (DType::I32, _) => format!("({t})(int)(long long){a}"),
            (DType::U8, _) => format!("({t})(unsigned char)(long long){a}"),
            (DType::Bool, _) => format!("({a} != {}) ? {} : {}", ct.lit(0.0), ct.lit(1.0), ct.lit(0.0)),
        }
    }
}
