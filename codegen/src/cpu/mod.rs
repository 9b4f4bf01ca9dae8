//! The Cranelift CPU back end: an [`ElementwiseKernel`] compiled to native code with
//! `cranelift-jit`.
//!
//! [`CpuKernel::compile`] validates the kernel, emits one `extern "C" fn(*const KernelArgs)`
//! and finalizes it in a JIT module of its own, which the `CpuKernel` owns and frees on drop.
//! One file per job: `cpu/emit.rs` the rows, loads and stores; `cpu/ops.rs` per-op
//! instruction selection; [`math`] the inline f32 transcendentals and their error bounds;
//! `cpu/jit_symbols.rs` the Rust functions for the ops that are called rather than inlined;
//! `cpu/jit.rs` the host ISA and module setup; `cpu/reduce.rs` the outputs' loop, the stages
//! and the accumulators of a [`ReduceKernel`] ([`CpuKernel::compile_reduce`]), whose prologues
//! go through the same per-instruction emission as elementwise kernels; `cpu/run_loops.rs` the
//! loops over one output's reduced sub-space, shared by the stages and the epilogue;
//! `cpu/epilogue.rs` the epilogue's pass ([`crate::kernel::Epilogue`]); `cpu/tiled_rows.rs` the
//! tiled rows of f32 kernels whose transcendentals and random draws call native slice routines.

mod elementwise;
mod emit;
mod epilogue;
mod jit;
mod jit_symbols;
mod kept_tile_values;
pub mod math;
mod native_epilogue;
mod native_rows;
mod ops;
mod reduce;
mod run_loops;
mod tiled_rows;

use crate::kernel::{ElementwiseKernel, KernelArgs, ReduceKernel};
use cranelift_codegen::print_errors::pretty_error;
use cranelift_jit::JITModule;
use cranelift_module::{Linkage, Module, ModuleError};
use std::time::{Duration, Instant};
pub use tiled_rows::{MAX_STAGES, TILE};

/// A compiled elementwise or reduction kernel: native code in JIT memory owned by this value.
pub struct CpuKernel {
    /// The module that owns the code; `None` only during drop.
    module: Option<JITModule>,
    entry: unsafe extern "C" fn(*const KernelArgs),
    clif: String,
    /// The native routines the code calls, sorted ([`CpuKernel::native_calls`]).
    native_calls: Vec<String>,
    compile_time: Duration,
    vectorized: bool,
    tiled: bool,
}

// SAFETY: after `finalize_definitions` the module is never mutated again (only freed in
// `drop`, which has `&mut self`); the generated code is read-only, position-independent of the
// calling thread and keeps no state, so calling it from several threads at once is sound.
unsafe impl Send for CpuKernel {}
// SAFETY: see `Send`: `&CpuKernel` only allows `call`, `clif` and `compile_time`, none of
// which mutate anything.
unsafe impl Sync for CpuKernel {}

impl CpuKernel {
    /// Compiles `k` (validated first) into a function named `name` (for debugging output).
    /// Errors for an invalid kernel and for code generation failures. With the environment
    /// variable `KILN_CPU_DISASM` set, prints the machine code to stderr.
    ///
    /// f16 and bf16 values are held as the f32 of the same number, every op computed in f32
    /// and rounded back, transcendentals by the eager routine, so results equal eager ones bit
    /// for bit. A kernel whose float values are f32 or bf16 (inputs also Bool; unit or
    /// broadcast inner strides) runs the F32X4 vector loop ([`CpuKernel::is_vectorized`]):
    /// four bf16 loaded, rounded and stored per vector, a transcendental one helper call per
    /// vector that runs the eager routine on each lane; a kernel with f16 values, or a strided
    /// input, runs the scalar loop.
    ///
    /// An f32 kernel on the vector plan whose transcendentals have native slice routines
    /// (exp, tanh, sigmoid), or which draws random numbers, walks its rows in tiles of [`TILE`]
    /// elements and calls those routines per tile ([`CpuKernel::is_tiled`]; see
    /// `cpu/tiled_rows.rs` for their error bounds: with AVX2+FMA or AVX-512F the
    /// transcendentals are not bit-identical to the inline forms; the draws always are). A
    /// kernel holding f16 or bf16 values is never tiled.
    pub fn compile(k: &ElementwiseKernel, name: &str) -> Result<CpuKernel, String> {
        Self::compile_elementwise(k, name, true)
    }

    /// [`CpuKernel::compile`] without tiles: every transcendental inline, 128 bits at a time
    /// (to compare both paths in tests and benchmarks).
    pub fn compile_untiled(k: &ElementwiseKernel, name: &str) -> Result<CpuKernel, String> {
        Self::compile_elementwise(k, name, false)
    }

    /// [`CpuKernel::compile`], tiled where `tile` allows and the kernel qualifies.
    fn compile_elementwise(k: &ElementwiseKernel, name: &str, tile: bool) -> Result<CpuKernel, String> {
        let t0 = Instant::now();
        k.validate()?;
        Self::compile_with(t0, name, |module, func| {
            let (plan, tiled) = elementwise::build(k, module, func, tile)?;
            Ok((matches!(plan, emit::Plan::Vector(_)), tiled))
        })
    }

    /// Compiles reduction kernel `k` (validated first) into a function named `name`; the
    /// result is called like an elementwise kernel, `row_start..row_end` indexing output
    /// elements (see [`ReduceKernel`] and [`CpuKernel::call`]). Errors as [`CpuKernel::compile`]
    /// does. f16 and bf16 values are held and rounded as in elementwise kernels, and sums and
    /// products of them accumulate in f64 as eager's do, so results equal eager ones (each
    /// rounded once from the f64 accumulator, through f32). [`CpuKernel::is_vectorized`]
    /// tells whether every stage's last reduced dim runs the F32X4/F64X2 loop (each stage
    /// picks its plan on its own prologue; the epilogue picks its own, with the rules of
    /// elementwise kernels). With one reduced dim, an f32 stage or epilogue that computes a
    /// slice-routine transcendental per element is tiled as elementwise rows are
    /// ([`CpuKernel::is_tiled`]).
    pub fn compile_reduce(k: &ReduceKernel, name: &str) -> Result<CpuKernel, String> {
        let t0 = Instant::now();
        k.validate()?;
        Self::compile_with(t0, name, |module, func| reduce::build(k, module, func))
    }

    /// The module setup, definition and finalization shared by both kernel kinds; `build`
    /// emits the body and says whether it is vectorized and whether it is tiled.
    fn compile_with(
        t0: Instant,
        name: &str,
        build: impl FnOnce(&mut JITModule, &mut cranelift_codegen::ir::Function) -> Result<(bool, bool), String>,
    ) -> Result<CpuKernel, String> {
        let mut module = jit::new_module()?;
        let sig = jit::kernel_signature(&module);
        let fname = format!("kiln_kernel_{name}");
        let id = module.declare_function(&fname, Linkage::Export, &sig).map_err(|e| e.to_string())?;
        let mut ctx = module.make_context();
        ctx.func.signature = sig;
        let (vectorized, tiled) = build(&mut module, &mut ctx.func)?;
        let clif = ctx.func.display().to_string();
        // Every import of the module is a helper the code calls (declared on first use).
        let mut native_calls: Vec<String> = module
            .declarations()
            .get_functions()
            .filter(|(_, d)| d.linkage == Linkage::Import)
            .filter_map(|(_, d)| d.name.clone())
            .collect();
        native_calls.sort();
        let disasm = std::env::var_os("KILN_CPU_DISASM").is_some();
        ctx.set_disasm(disasm);
        module.define_function(id, &mut ctx).map_err(|e| match e {
            ModuleError::Compilation(err) => format!("cranelift: {}\n{clif}", pretty_error(&ctx.func, err)),
            e => e.to_string(),
        })?;
        if disasm {
            if let Some(code) = ctx.compiled_code() {
                eprintln!("{}", code.vcode.as_deref().unwrap_or(""));
            }
        }
        module.clear_context(&mut ctx);
        module.finalize_definitions().map_err(|e| e.to_string())?;
        let ptr = module.get_finalized_function(id);
        // SAFETY: `ptr` is the finalized code of a function declared with the signature
        // `fn(i64)` in the host's default calling convention, which is the C ABI of
        // `extern "C" fn(*const KernelArgs)` on a 64-bit host.
        let entry = unsafe { std::mem::transmute::<*const u8, unsafe extern "C" fn(*const KernelArgs)>(ptr) };
        Ok(CpuKernel { module: Some(module), entry, clif, native_calls, compile_time: t0.elapsed(), vectorized, tiled })
    }

    /// The CLIF text of the generated function (for `KILN_DEBUG=kernels`).
    pub fn clif(&self) -> &str {
        &self.clif
    }

    /// The native routines the generated code calls, by symbol, sorted: the row sweeps of
    /// `kiln_runtime::cpu::row_reduce` (`kiln_row_*`), the f32 slice routines of
    /// `kiln_runtime::cpu::simd::slice_math` (`kiln_vm_*`) and the scalar helpers (`kiln_f32_Erf`, …).
    /// Empty when everything is inline code.
    pub fn native_calls(&self) -> &[String] {
        &self.native_calls
    }

    /// How long [`CpuKernel::compile`] (or [`CpuKernel::compile_reduce`]) took (validation, emission, Cranelift, finalization).
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    /// True when the inner loop is the F32X4/F64X2 vector loop (plus a scalar tail); false
    /// for the scalar loop.
    pub fn is_vectorized(&self) -> bool {
        self.vectorized
    }

    /// True when the rows (of an elementwise kernel, or of some stage or the epilogue of a
    /// reduction kernel) are walked in tiles whose transcendentals and random draws are native
    /// slice-routine calls ([`CpuKernel::compile`]); false for the untiled loop.
    pub fn is_tiled(&self) -> bool {
        self.tiled
    }

    /// Runs the kernel for rows `args.row_start..args.row_end`.
    ///
    /// # Safety
    /// `args` must describe the kernel this was compiled from: `inputs` holds one pointer per
    /// kernel input, `outputs` one per output, `scalars` at least `k.scalars` values, `shape`
    /// `k.rank` sizes and `strides` `inputs × rank` element strides; for every row in the
    /// range and every inner index, each input's element address (base + Σ idx·stride, in
    /// elements of its dtype) must be valid to read and hold a valid value of its dtype (Bool:
    /// 0 or 1), and each output's `row·inner + j` must be valid to write and not overlap an
    /// input element read by a later index (elementwise in-place, the same index, is fine). `row_end`
    /// must not exceed the number of rows (the product of all sizes but the last). Several
    /// threads may call at once on disjoint row ranges.
    ///
    /// For a kernel from [`CpuKernel::compile_reduce`], rows are output elements: every input
    /// element of the reduced dims of each output in the range must be valid to read as
    /// above, `outputs[s] + row` (in elements of stage `s`'s output dtype) valid to write for
    /// every stage `s` and every row in the range and not overlap any input or another output,
    /// and `row_end` must not exceed the number of outputs (the product of the sizes of the
    /// kept dims, 1 for a full reduction). With an epilogue, `outputs` holds one more pointer
    /// per epilogue output `e`, and `outputs[S + e] + row·R + r` (`S` the number of stages, in
    /// elements of that value's dtype; `R` the number of reduced elements per output, `r < R`)
    /// must be valid to write for every row in the range and overlap no input nor another
    /// output.
    pub unsafe fn call(&self, args: &KernelArgs) {
        // SAFETY: the caller upholds the contract above, which is what the code assumes.
        unsafe { (self.entry)(args) }
    }
}

impl Drop for CpuKernel {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: the code is only reachable through `self.entry`, which dies with `self`;
            // `drop` has `&mut self`, so no call is running.
            unsafe { m.free_memory() };
        }
    }
}

impl std::fmt::Debug for CpuKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuKernel")
            .field("compile_time", &self.compile_time)
            .field("vectorized", &self.vectorized)
            .field("tiled", &self.tiled)
            .finish()
    }
}
