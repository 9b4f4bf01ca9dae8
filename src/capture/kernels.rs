//! The kernel cache and the parallel launch of compiled elementwise kernels.

use crate::debug::{self, Topic};
use kiln_codegen::cpu::CpuKernel;
use kiln_codegen::ir::{Graph, NodeId};
use kiln_codegen::kernel::{ElementwiseKernel, KernelArgs};
use kiln_codegen::passes::LoweredGroup;
use kiln_runtime::cpu::parallel::{for_ranges, GRAIN};
use kiln_runtime::DType;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// A JIT-compiled kernel, named by its content hash.
pub(crate) struct CompiledKernel {
    /// `k` + the kernel's structural hash in hex.
    pub(crate) name: String,
    /// What the kernel computes, in words (the ops of its members).
    pub(crate) summary: String,
    /// The machine code.
    pub(crate) jit: CpuKernel,
}

/// Kernels compiled by this process, least recently used first.
static KERNELS: Mutex<VecDeque<(u64, Arc<CompiledKernel>)>> = Mutex::new(VecDeque::new());

/// How many kernels the process keeps.
const KERNEL_CACHE_CAP: usize = 1024;

/// The compiled form of `k` (from the cache: true), or why the JIT refused it.
pub(crate) fn get_or_compile(k: &ElementwiseKernel, graph: &Graph, members: &[NodeId]) -> Result<(Arc<CompiledKernel>, bool), String> {
    if k.insts.iter().any(|i| matches!(i.dtype, DType::F16 | DType::BF16)) {
        return Err("f16/bf16 kernels are not generated on the CPU yet".into());
    }
    let hash = k.structural_hash();
    {
        let mut cache = KERNELS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(pos) = cache.iter().position(|(h, _)| *h == hash) {
            let entry = cache.remove(pos).expect("found");
            let kernel = entry.1.clone();
            cache.push_back(entry);
            debug::log(Topic::Cache, format!("kernel {} hit", kernel.name));
            return Ok((kernel, true));
        }
    }
    let name = format!("k{hash:016x}");
    let jit = CpuKernel::compile(k, &name)?;
    let summary: Vec<String> = members.iter().map(|&m| graph.node(m).kind.name()).collect();
    let kernel = Arc::new(CompiledKernel { name, summary: summary.join(" "), jit });
    debug::log(Topic::Cache, format!("kernel {} miss: compiled in {:.1?}", kernel.name, kernel.jit.compile_time()));
    if debug::enabled(Topic::Kernels) {
        debug::log(Topic::Kernels, format!("kernel {} ({}):\n{}", kernel.name, kernel.summary, kernel.jit.clif()));
    }
    super::dump::kernel(&kernel.name, &kernel.summary, kernel.jit.clif());
    let mut cache = KERNELS.lock().unwrap_or_else(|e| e.into_inner());
    if cache.len() >= KERNEL_CACHE_CAP {
        cache.pop_front();
    }
    cache.push_back((hash, kernel.clone()));
    Ok((kernel, false))
}

/// A raw pointer that may cross to the pool's threads.
#[derive(Clone, Copy)]
struct SendPtr(*const u8);
// SAFETY: the pointers address buffers that outlive the parallel launch (the caller holds
// them); threads write disjoint rows of the outputs and only read the inputs.
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

/// Runs `kernel` over `lowered`'s iteration space, split across kiln's thread pool.
///
/// # Safety
/// `inputs[k]` must point at input `k`'s element 0 (the view's offset applied) of a buffer
/// that holds every element the strides reach, `outputs[o]` at a buffer of the group's numel
/// elements of output `o`'s dtype, and no output may overlap an input or another output.
pub(crate) unsafe fn launch(kernel: &CompiledKernel, lowered: &LoweredGroup, inputs: &[*const u8], outputs: &[*mut u8], scalars: &[f64], graph: &Graph) {
    let shape = &lowered.shape;
    let rank = shape.len();
    let numel: usize = shape.iter().product();
    if numel == 0 {
        return;
    }
    let inner = shape[rank - 1];
    let rows = numel / inner;
    let in_sizes: Vec<usize> = lowered.loads.iter().map(|u| graph.node(u.node).dtype.size_in_bytes()).collect();
    let out_sizes: Vec<usize> = lowered.outputs.iter().map(|&o| graph.node(o).dtype.size_in_bytes()).collect();
    let ins: Vec<SendPtr> = inputs.iter().map(|&p| SendPtr(p)).collect();
    let outs: Vec<SendPtr> = outputs.iter().map(|&p| SendPtr(p as *const u8)).collect();
    let run = |range: std::ops::Range<usize>| {
        if rank == 1 {
            // One row: split it by moving the base pointers (and the index random draws see).
            let a = range.start;
            let in_ptrs: Vec<*const u8> =
                ins.iter().enumerate().map(|(k, p)| p.0.wrapping_offset(a as isize * lowered.strides[k] * in_sizes[k] as isize)).collect();
            let out_ptrs: Vec<*mut u8> = outs.iter().enumerate().map(|(o, p)| p.0.wrapping_add(a * out_sizes[o]) as *mut u8).collect();
            let len = [range.len()];
            let args = KernelArgs {
                inputs: in_ptrs.as_ptr(),
                outputs: out_ptrs.as_ptr(),
                scalars: scalars.as_ptr(),
                shape: len.as_ptr(),
                strides: lowered.strides.as_ptr(),
                row_start: 0,
                row_end: 1,
                index_base: a,
            };
            // SAFETY: the chunk's pointers stay inside the buffers the caller vouched for.
            unsafe { kernel.jit.call(&args) };
        } else {
            let in_ptrs: Vec<*const u8> = ins.iter().map(|p| p.0).collect();
            let out_ptrs: Vec<*mut u8> = outs.iter().map(|p| p.0 as *mut u8).collect();
            let args = KernelArgs {
                inputs: in_ptrs.as_ptr(),
                outputs: out_ptrs.as_ptr(),
                scalars: scalars.as_ptr(),
                shape: shape.as_ptr(),
                strides: lowered.strides.as_ptr(),
                row_start: range.start,
                row_end: range.end,
                index_base: 0,
            };
            // SAFETY: rows in `range` are inside the iteration space the caller vouched for.
            unsafe { kernel.jit.call(&args) };
        }
    };
    if rank == 1 {
        for_ranges(numel, GRAIN, run);
    } else {
        for_ranges(rows, (GRAIN / inner).max(1), run);
    }
}
