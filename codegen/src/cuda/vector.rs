//! The contiguous fast path of the eager elementwise kernels: when, after collapsing, the
//! index space is one dim, the output and every input are contiguous there (or an input is
//! one broadcast value, stride 0) and every contiguous buffer's first element is aligned to
//! its vector access, each thread moves [`vector_width`] elements of each operand in one
//! access (16 bytes for the widest dtype of the kernel: `float4`-sized for f32, two doubles,
//! eight f16, …; narrower dtypes move the same element count in fewer bytes) and a scalar
//! loop finishes the tail. [`vector_launch`] is the launch decision (a pure function of
//! dtypes, strides, offsets and addresses); the strided kernel ([`super::strided`]) is the
//! fallback.
//!
//! Signature: `in0 … in{k-1}, out, n`, then each input's element offset and the output's
//! (`p0_off …, po_off`), all `unsigned long long`.

use super::emit::{dtype_tag, fnv1a, ELEMENTWISE_BLOCK};
use super::strided::{load, prepare, storage_type, store};
use crate::expr::Expr;
use kiln_runtime::cuda::CudaError;
use kiln_runtime::DType;
use std::fmt::Write;

/// The bytes the widest operand moves per vector access.
pub const VECTOR_BYTES: usize = 16;

/// A generated vector elementwise kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VectorKernel {
    /// The `extern "C"` kernel's name (`kiln_vew_<dtype>_<hash>`).
    pub name: String,
    /// The CUDA C source.
    pub source: String,
    /// The dtype of each input.
    pub inputs: Vec<DType>,
    /// The output's dtype.
    pub out: DType,
    /// Which inputs are one broadcast value (stride 0) rather than contiguous.
    pub broadcast: Vec<bool>,
    /// Elements per thread and vector access.
    pub width: usize,
}

/// Elements per vector access of a kernel over operands of `dtypes` (inputs and output):
/// [`VECTOR_BYTES`] over the widest element.
pub fn vector_width(dtypes: &[DType]) -> usize {
    VECTOR_BYTES / dtypes.iter().map(|d| d.size_in_bytes()).max().unwrap_or(1)
}

/// One operand of the launch decision: its dtype, strides over the collapsed index space, its
/// element offset and its buffer's device address.
#[derive(Clone, Copy, Debug)]
pub struct VectorOperand<'a> {
    /// The element type.
    pub dtype: DType,
    /// Strides over the collapsed dims, in elements.
    pub strides: &'a [usize],
    /// Element offset of the first element.
    pub offset: usize,
    /// The buffer's device address.
    pub address: u64,
}

impl VectorOperand<'_> {
    /// True when the operand's first element lies on a `width`-element boundary.
    fn aligned(&self, width: usize) -> bool {
        let bytes = (width * self.dtype.size_in_bytes()) as u64;
        (self.address + (self.offset * self.dtype.size_in_bytes()) as u64).is_multiple_of(bytes)
    }
}

/// The launch decision: `Some(broadcast)` (which inputs are stride-0 values) when the
/// vector kernel can run over the collapsed `shape` — one dim of at least one vector, the
/// output (`operands`' last) contiguous, every input contiguous or broadcast, every
/// contiguous operand aligned to its vector access ([`vector_width`] elements); `None` for
/// the strided kernel.
pub fn vector_launch(shape: &[usize], operands: &[VectorOperand<'_>]) -> Option<Vec<bool>> {
    let (out, inputs) = operands.split_last()?;
    vector_launch_outputs(shape, inputs, std::slice::from_ref(out))
}

/// [`vector_launch`] for a kernel with several outputs (a fused group's): every output must
/// be contiguous and aligned, the vector width is that of all operands' dtypes.
pub fn vector_launch_outputs(
    shape: &[usize],
    inputs: &[VectorOperand<'_>],
    outputs: &[VectorOperand<'_>],
) -> Option<Vec<bool>> {
    let [n] = shape else { return None };
    let dtypes: Vec<DType> = inputs.iter().chain(outputs).map(|o| o.dtype).collect();
    let width = vector_width(&dtypes);
    if *n < width || outputs.iter().any(|o| o.strides != [1] || !o.aligned(width)) {
        return None;
    }
    inputs
        .iter()
        .map(|o| match o.strides {
            [0] => Some(true),
            [1] if o.aligned(width) => Some(false),
            _ => None,
        })
        .collect()
}

/// The name of the aligned struct of `width` elements of `d` ([`vector_structs`]).
pub(super) fn vector_type(d: DType, width: usize) -> String {
    format!("kiln_v{}_{}", width, dtype_tag(d))
}

/// One aligned struct of `width` elements per distinct dtype of `dtypes` (the operands read
/// or written as vectors): the compiler loads and stores one as one vector instruction.
pub(super) fn vector_structs(dtypes: &[DType], width: usize) -> String {
    let mut src = String::new();
    let mut declared: Vec<DType> = Vec::new();
    for &d in dtypes {
        if !declared.contains(&d) {
            declared.push(d);
            let _ = writeln!(
                src,
                "struct __align__({}) {} {{ {} e[{width}]; }};",
                width * d.size_in_bytes(),
                vector_type(d, width),
                storage_type(d)
            );
        }
    }
    src
}

/// Emits the vector kernel computing `expr` in `compute`'s compute type over inputs of
/// `inputs` (contiguous, or one value where `broadcast`) into a contiguous output of `out`.
/// Errors as [`super::emit_strided`]'s.
pub fn emit_vector(
    expr: &Expr,
    inputs: &[DType],
    compute: DType,
    out: DType,
    broadcast: &[bool],
) -> Result<VectorKernel, CudaError> {
    assert_eq!(inputs.len(), broadcast.len(), "one broadcast flag per input");
    let all: Vec<DType> = inputs.iter().copied().chain([out]).collect();
    let width = vector_width(&all);
    let (mut body, mut src) = prepare(expr, inputs, compute, out, &format!("vector elementwise x{width}"))?;
    let ct = body.ct;
    let contiguous: Vec<DType> =
        all.iter().zip(broadcast.iter().chain([&false])).filter(|(_, &b)| !b).map(|(&d, _)| d).collect();
    src.push_str(&vector_structs(&contiguous, width));
    let vec_type = |d: DType| vector_type(d, width);
    let mut sig: Vec<String> =
        inputs.iter().enumerate().map(|(j, &d)| format!("const {}* __restrict__ in{j}", storage_type(d))).collect();
    sig.push(format!("{}* __restrict__ out", storage_type(out)));
    sig.push("unsigned long long n".into());
    sig.extend((0..inputs.len()).map(|j| format!("unsigned long long p{j}_off")));
    sig.push("unsigned long long po_off".into());
    let _ = writeln!(
        src,
        "extern \"C\" __global__ void __launch_bounds__({ELEMENTWISE_BLOCK}) KILN_NAME({}) {{",
        sig.join(", ")
    );
    src.push_str("    const unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;\n");
    src.push_str("    const unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;\n");
    // Broadcast values are loaded once per thread.
    let mut scalar_args: Vec<String> = Vec::new();
    let mut vector_args: Vec<String> = Vec::new();
    for (j, (&d, &b)) in inputs.iter().zip(broadcast).enumerate() {
        if b {
            let _ = writeln!(
                src,
                "    const {} b{j} = {};",
                ct.c_type(),
                load(d, &format!("in{j}[p{j}_off]"), ct, &mut body)
            );
            scalar_args.push(format!("b{j}"));
            vector_args.push(format!("b{j}"));
        } else {
            scalar_args.push(load(d, &format!("in{j}[p{j}_off + i]"), ct, &mut body));
            vector_args.push(load(d, &format!("a{j}.e[k]"), ct, &mut body));
        }
    }
    let _ = writeln!(src, "    const unsigned long long nv = n / {width}ULL;");
    src.push_str("    for (unsigned long long v = tid; v < nv; v += stride) {\n");
    for (j, (&d, &b)) in inputs.iter().zip(broadcast).enumerate() {
        if !b {
            let _ = writeln!(
                src,
                "        const {t} a{j} = *reinterpret_cast<const {t}*>(in{j} + p{j}_off + v * {width}ULL);",
                t = vec_type(d)
            );
        }
    }
    let _ = writeln!(src, "        {} r;", vec_type(out));
    let _ = writeln!(
        src,
        "#pragma unroll\n        for (int k = 0; k < {width}; ++k) r.e[k] = {};",
        store(out, &format!("kiln_body({})", vector_args.join(", ")), ct, &mut body)
    );
    let _ = writeln!(src, "        *reinterpret_cast<{}*>(out + po_off + v * {width}ULL) = r;\n    }}", vec_type(out));
    let _ = writeln!(src, "    for (unsigned long long i = nv * {width}ULL + tid; i < n; i += stride) {{");
    let _ = writeln!(
        src,
        "        out[po_off + i] = {};\n    }}\n}}",
        store(out, &format!("kiln_body({})", scalar_args.join(", ")), ct, &mut body)
    );

    let name = format!("kiln_vew_{}_{:016x}", dtype_tag(out), fnv1a(src.as_bytes()));
    let source = src.replace("KILN_NAME", &name);
    Ok(VectorKernel { name, source, inputs: inputs.to_vec(), out, broadcast: broadcast.to_vec(), width })
}
