//! The skeleton of the kernels that write one element per thread over contiguous planes, the
//! geometry passed as arguments (pooling, im2col/col2im): the signature (buffers, `n`, the
//! geometry words), the words converted to signed `long long`, a grid-stride loop over `i <
//! n` around the kind's body, and the kernel's name with a hash of its source.

use super::emit::{dtype_tag, fnv1a, CUDA_CODEGEN_VERSION, ELEMENTWISE_BLOCK};
use std::fmt::Write;

/// One buffer parameter: its name, its C element type, and whether the kernel writes it.
pub(super) struct GridBuffer<'a> {
    /// Parameter name.
    pub name: &'a str,
    /// C element type (`float`, `long long`, …).
    pub ty: &'a str,
    /// True when the kernel writes it (not `const`).
    pub written: bool,
}

/// Emits `extern "C"` kernel `kiln_<family>_<kind>_<dtype tag>_<hash>`: parameters `buffers`,
/// `unsigned long long n`, then one `unsigned long long <word>_` per geometry word (taken
/// unsigned, as every kernel argument, and used signed as `<word>`: padding makes windows
/// start before the input); `body` runs once per `i` in `0..n`. Returns (name, source).
pub(super) fn emit_grid_kernel(
    family: &str,
    kind: &str,
    dtype: kiln_runtime::DType,
    buffers: &[GridBuffer<'_>],
    words: &[&str],
    body: &str,
) -> (String, String) {
    let mut sig: Vec<String> = buffers
        .iter()
        .map(|b| {
            let c = if b.written { "" } else { "const " };
            format!("{c}{}* __restrict__ {}", b.ty, b.name)
        })
        .collect();
    sig.push("unsigned long long n".into());
    sig.extend(words.iter().map(|g| format!("unsigned long long {g}_")));

    let mut src = String::new();
    let _ = writeln!(src, "// kiln-codegen cuda v{CUDA_CODEGEN_VERSION}: {kind} ({})", dtype_tag(dtype));
    let _ = writeln!(
        src,
        "extern \"C\" __global__ void __launch_bounds__({ELEMENTWISE_BLOCK}) KILN_NAME({}) {{",
        sig.join(", ")
    );
    for g in words {
        let _ = writeln!(src, "    const long long {g} = (long long){g}_;");
    }
    src.push_str("    const unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;\n");
    src.push_str("    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {\n");
    src.push_str(body);
    src.push_str("    }\n}\n");

    let name = format!("kiln_{family}_{kind}_{}_{:016x}", dtype_tag(dtype), fnv1a(src.as_bytes()));
    let source = src.replace("KILN_NAME", &name);
    (name, source)
}
