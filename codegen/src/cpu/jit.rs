//! Module and ISA setup: a host-native Cranelift ISA at `opt_level = speed` and a `JITModule`
//! that finds the Rust helper functions the generated code calls.

use super::jit_symbols;
use cranelift_codegen::ir::{types, AbiParam, Signature};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::Module;

/// The host ISA, detected with `cranelift_native` (SSE4.1/AVX where the CPU has them).
pub(crate) fn host_isa() -> Result<OwnedTargetIsa, String> {
    let mut flags = settings::builder();
    let set =
        |f: &mut settings::Builder, k: &str, v: &str| f.set(k, v).map_err(|e| format!("cranelift flag {k}={v}: {e}"));
    set(&mut flags, "opt_level", "speed")?;
    // The IR verifier costs about half of the JIT time; the kernels' tests run it (debug).
    set(&mut flags, "enable_verifier", if cfg!(debug_assertions) { "true" } else { "false" })?;
    // The JIT resolves helper addresses itself; it needs absolute (non-PIC) calls.
    set(&mut flags, "use_colocated_libcalls", "false")?;
    set(&mut flags, "is_pic", "false")?;
    // Tiled kernels keep 4 KiB tile buffers on the stack: probe frames over a page inline.
    set(&mut flags, "enable_probestack", "true")?;
    set(&mut flags, "probestack_strategy", "inline")?;
    let isa_builder =
        cranelift_native::builder().map_err(|e| format!("the host is not supported by Cranelift: {e}"))?;
    isa_builder.finish(settings::Flags::new(flags)).map_err(|e| format!("cranelift ISA: {e}"))
}

/// A fresh JIT module that resolves the helper symbols of [`jit_symbols::find`]; a kernel's code
/// declares the helpers it calls as it is emitted (`FnEmitter::call`).
pub(crate) fn new_module() -> Result<JITModule, String> {
    let isa = host_isa()?;
    let mut builder = JITBuilder::with_isa(isa, cranelift_module::default_libcall_names());
    builder.symbol_lookup_fn(Box::new(|name| jit_symbols::find(name).map(|h| h.ptr)));
    Ok(JITModule::new(builder))
}

/// The kernel's own signature: `extern "C" fn(*const KernelArgs)`.
pub(crate) fn kernel_signature(module: &JITModule) -> Signature {
    let mut sig = module.make_signature();
    sig.params.push(AbiParam::new(types::I64));
    sig
}
