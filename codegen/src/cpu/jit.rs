//! Module and ISA setup: a host-native Cranelift ISA at `opt_level = speed` and a `JITModule`
//! that knows the Rust helper functions the generated code may call.

use super::helpers;
use cranelift_codegen::ir::{types, AbiParam, Signature};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId, Linkage, Module};
use std::collections::HashMap;

/// The host ISA, detected with `cranelift_native` (SSE4.1/AVX where the CPU has them).
pub(crate) fn host_isa() -> Result<OwnedTargetIsa, String> {
    let mut flags = settings::builder();
    let set = |f: &mut settings::Builder, k: &str, v: &str| f.set(k, v).map_err(|e| format!("cranelift flag {k}={v}: {e}"));
    set(&mut flags, "opt_level", "speed")?;
    // The IR verifier costs about half of the JIT time; the kernels' tests run it (debug).
    set(&mut flags, "enable_verifier", if cfg!(debug_assertions) { "true" } else { "false" })?;
    // The JIT resolves helper addresses itself; it needs absolute (non-PIC) calls.
    set(&mut flags, "use_colocated_libcalls", "false")?;
    set(&mut flags, "is_pic", "false")?;
    let isa_builder = cranelift_native::builder().map_err(|e| format!("the host is not supported by Cranelift: {e}"))?;
    isa_builder.finish(settings::Flags::new(flags)).map_err(|e| format!("cranelift ISA: {e}"))
}

/// A fresh JIT module with every helper of [`helpers::all`] registered as a symbol and
/// declared as an import; returns the module and the helpers' ids by name.
pub(crate) fn new_module() -> Result<(JITModule, HashMap<&'static str, FuncId>), String> {
    let isa = host_isa()?;
    let mut builder = JITBuilder::with_isa(isa, cranelift_module::default_libcall_names());
    let all = helpers::all();
    for h in &all {
        builder.symbol(h.name, h.ptr);
    }
    let mut module = JITModule::new(builder);
    let mut ids = HashMap::new();
    for h in &all {
        let mut sig = module.make_signature();
        for &p in h.params {
            sig.params.push(AbiParam::new(p));
        }
        sig.returns.push(AbiParam::new(h.ret));
        let id = module.declare_function(h.name, Linkage::Import, &sig).map_err(|e| e.to_string())?;
        ids.insert(h.name, id);
    }
    Ok((module, ids))
}

/// The kernel's own signature: `extern "C" fn(*const KernelArgs)`.
pub(crate) fn kernel_signature(module: &JITModule) -> Signature {
    let mut sig = module.make_signature();
    sig.params.push(AbiParam::new(types::I64));
    sig
}
