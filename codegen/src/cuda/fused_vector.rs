//! The vector variant of a fused elementwise kernel ([`super::fused`]): when every input of a
//! launch is one contiguous run over the index space (row-major, size-1 dims aside) or one
//! broadcast value, and every contiguous operand is aligned, each thread moves
//! [`vector_width`] elements of each operand in one 16-byte access (the eager vector path's
//! width and structs, [`super::vector`]) and a scalar loop finishes the tail.
//! [`fused_vector_launch`] is the launch decision, the eager path's [`vector_launch_outputs`]
//! over the inputs read as flat runs; otherwise the strided kernel runs.
//!
//! The instructions are the strided kernel's ([`InstEmitter`]), so both variants compute the
//! same values; `i` is the element's row-major index (random draws use it), as there.
//!
//! Signature: `in0 … in{k-1}`, `out0 … out{m-1}`, `n`, then for each input its element
//! offset `p_off` and `p_bc` (1: one broadcast value, 0: a contiguous run), then the scalars
//! `s0 …` as the bits of an f64.

use super::emit::{dtype_tag, fnv1a, CUDA_CODEGEN_VERSION, ELEMENTWISE_BLOCK};
use super::fused::{buffer_params, InstEmitter};
use super::fused_launch::FusedOperand;
use super::vector::{vector_launch_outputs, vector_structs, vector_type, vector_width, VectorOperand};
use crate::kernel::{ElementwiseKernel, InstOp};
use kiln_runtime::DType;
use std::fmt::Write;

/// The vector variant of a fused kernel: its CUDA C and what a launch needs to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FusedVectorKernel {
    /// The `extern "C"` kernel's name (`kiln_fused_vec_<hash of the source>`).
    pub name: String,
    /// The CUDA C source.
    pub source: String,
    /// Elements per thread and vector access ([`vector_width`] of the inputs' and outputs'
    /// dtypes).
    pub width: usize,
}

impl FusedVectorKernel {
    /// The number of 64-bit parameters after the buffers of a kernel over `inputs` inputs and
    /// `scalars` scalars: `n`, each input's offset and broadcast flag, the scalars.
    pub fn words(inputs: usize, scalars: usize) -> usize {
        1 + 2 * inputs + scalars
    }
}

/// Emits the vector variant of `k` (validated, with inputs and outputs of the dtypes
/// `inputs` and `outputs`), or why an instruction is not generated.
pub(super) fn emit_fused_vector(
    k: &ElementwiseKernel,
    inputs: &[DType],
    outputs: &[DType],
) -> Result<FusedVectorKernel, String> {
    let all: Vec<DType> = inputs.iter().chain(outputs).copied().collect();
    let width = vector_width(&all);
    let mut insts = InstEmitter::new();
    // In the vector loop input `j`'s element `k` is `a<j>.e[k]`; in the tail, `in<j>[p<j>]`.
    let vector_lines = insts.lines_reading(inputs, &k.insts, |j| format!("a{j}.e[k]"))?;
    let tail_lines = insts.lines(inputs, &k.insts)?;
    let stores: Vec<String> = k.outputs.iter().map(|&v| insts.store(k.dtype(v), v)).collect();

    let mut src = String::new();
    let tags = |ds: &[DType]| ds.iter().map(|&d| dtype_tag(d)).collect::<Vec<_>>().join(", ");
    let _ = writeln!(
        src,
        "// kiln-codegen cuda v{CUDA_CODEGEN_VERSION}: fused elementwise x{width} ({}) -> ({}), {} scalar(s)",
        tags(inputs),
        tags(outputs),
        k.scalars
    );
    src.push_str(&insts.helper_source());
    src.push_str(&vector_structs(&all, width));
    let mut sig = buffer_params(inputs, outputs);
    sig.push("unsigned long long n".into());
    for j in 0..inputs.len() {
        sig.push(format!("unsigned long long p{j}_off"));
        sig.push(format!("unsigned long long p{j}_bc"));
    }
    sig.extend((0..k.scalars).map(|j| format!("unsigned long long s{j}")));
    let _ = writeln!(
        src,
        "extern \"C\" __global__ void __launch_bounds__({ELEMENTWISE_BLOCK}) KILN_NAME({}) {{",
        sig.join(", ")
    );
    src.push_str("    const unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;\n");
    src.push_str("    const unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;\n");
    let _ = writeln!(src, "    const unsigned long long nv = n / {width}ULL;");
    src.push_str("    for (unsigned long long v = tid; v < nv; v += stride) {\n");
    for (j, &d) in inputs.iter().enumerate() {
        let t = vector_type(d, width);
        let _ = writeln!(src, "        {t} a{j};");
        let _ = writeln!(src, "        if (p{j}_bc) {{\n#pragma unroll\n            for (int k = 0; k < {width}; ++k) a{j}.e[k] = in{j}[p{j}_off];");
        let _ = writeln!(src, "        }} else {{\n            a{j} = *reinterpret_cast<const {t}*>(in{j} + p{j}_off + v * {width}ULL);\n        }}");
    }
    for (o, &d) in outputs.iter().enumerate() {
        let _ = writeln!(src, "        {} r{o};", vector_type(d, width));
    }
    let _ = writeln!(src, "#pragma unroll\n        for (int k = 0; k < {width}; ++k) {{");
    if k.insts.iter().any(|i| matches!(i.op, InstOp::Rand { .. })) {
        let _ = writeln!(src, "            const unsigned long long i = v * {width}ULL + k;");
    }
    for l in &vector_lines {
        let _ = writeln!(src, "            {l}");
    }
    for (o, st) in stores.iter().enumerate() {
        let _ = writeln!(src, "            r{o}.e[k] = {st};");
    }
    src.push_str("        }\n");
    for (o, &d) in outputs.iter().enumerate() {
        let _ = writeln!(src, "        *reinterpret_cast<{}*>(out{o} + v * {width}ULL) = r{o};", vector_type(d, width));
    }
    src.push_str("    }\n");
    let _ = writeln!(src, "    for (unsigned long long i = nv * {width}ULL + tid; i < n; i += stride) {{");
    for j in 0..inputs.len() {
        let _ = writeln!(src, "        const unsigned long long p{j} = p{j}_bc ? p{j}_off : p{j}_off + i;");
    }
    for l in &tail_lines {
        let _ = writeln!(src, "        {l}");
    }
    for (o, st) in stores.iter().enumerate() {
        let _ = writeln!(src, "        out{o}[i] = {st};");
    }
    src.push_str("    }\n}\n");

    let name = format!("kiln_fused_vec_{:016x}", fnv1a(src.as_bytes()));
    let source = src.replace("KILN_NAME", &name);
    Ok(FusedVectorKernel { name, source, width })
}

/// The one stride of a view over `shape` read as a flat run: 0 when every dim of more than one
/// element has stride 0 (one broadcast value), 1 when the view is row-major contiguous there;
/// `None` otherwise.
fn flat_stride(shape: &[usize], strides: &[isize]) -> Option<usize> {
    let dims: Vec<(usize, isize)> = shape.iter().zip(strides).filter(|(&n, _)| n > 1).map(|(&n, &s)| (n, s)).collect();
    if dims.iter().all(|&(_, s)| s == 0) {
        return Some(0);
    }
    let mut want = 1isize;
    for &(n, s) in dims.iter().rev() {
        if s != want {
            return None;
        }
        want *= n as isize;
    }
    Some(1)
}

/// The launch decision of a fused kernel's vector variant over `shape`: `Some(broadcast)`
/// (which inputs are one broadcast value) when every input (its dtype, buffer address and
/// view) is a contiguous run or a broadcast value and [`vector_launch_outputs`] accepts them
/// with the outputs (dtype and buffer address; written contiguously from element 0); `None`
/// for the strided kernel.
pub fn fused_vector_launch(
    shape: &[usize],
    inputs: &[(DType, u64, FusedOperand<'_>)],
    outputs: &[(DType, u64)],
) -> Option<Vec<bool>> {
    let n = kiln_runtime::layout::numel(shape);
    let flat: Vec<[usize; 1]> =
        inputs.iter().map(|(_, _, v)| flat_stride(shape, v.strides).map(|s| [s])).collect::<Option<_>>()?;
    let ins: Vec<VectorOperand<'_>> = inputs
        .iter()
        .zip(&flat)
        .map(|(&(dtype, address, v), s)| VectorOperand { dtype, strides: s, offset: v.offset, address })
        .collect();
    let outs: Vec<VectorOperand<'_>> =
        outputs.iter().map(|&(dtype, address)| VectorOperand { dtype, strides: &[1], offset: 0, address }).collect();
    vector_launch_outputs(&[n], &ins, &outs)
}
