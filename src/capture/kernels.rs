//! The kernel cache and the parallel launch of compiled elementwise and reduction kernels.

use crate::debug::{self, Topic};
use kiln_codegen::cpu::CpuKernel;
use kiln_codegen::ir::{Graph, NodeId};
use kiln_codegen::kernel::KernelArgs;
use kiln_codegen::passes::{GroupKernel, LoweredGroup};
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
pub(crate) fn get_or_compile(k: &GroupKernel, graph: &Graph, members: &[NodeId]) -> Result<(Arc<CompiledKernel>, bool), String> {
    let half = |d: DType| matches!(d, DType::F16 | DType::BF16);
    if k.insts().any(|i| half(i.dtype)) || matches!(k, GroupKernel::Reduce(r) if r.stages.iter().any(|s| half(s.output))) {
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
    let jit = match k {
        GroupKernel::Elementwise(k) => CpuKernel::compile(k, &name)?,
        GroupKernel::Reduce(k) => CpuKernel::compile_reduce(k, &name)?,
    };
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
/// that holds every element the strides reach, `outputs[o]` at a buffer of output `o`'s numel
/// elements of its dtype, and no output may overlap an input or another output.
pub(crate) unsafe fn launch(kernel: &CompiledKernel, lowered: &LoweredGroup, inputs: &[*const u8], outputs: &[*mut u8], scalars: &[f64], graph: &Graph) {
    if lowered.reduce_rank > 0 {
        // SAFETY: the caller's guarantees are the reduction's.
        return unsafe { launch_reduce(kernel, lowered, inputs, outputs, scalars) };
    }
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
            // SAFETY: the chunk's pointers stay inside the buffers the caller vouched for.
            unsafe { call(kernel, &in_ptrs, &out_ptrs, scalars, &len, &lowered.strides, 0..1, a) };
        } else {
            let in_ptrs: Vec<*const u8> = ins.iter().map(|p| p.0).collect();
            let out_ptrs: Vec<*mut u8> = outs.iter().map(|p| p.0 as *mut u8).collect();
            // SAFETY: rows in `range` are inside the iteration space the caller vouched for.
            unsafe { call(kernel, &in_ptrs, &out_ptrs, scalars, shape, &lowered.strides, range, 0) };
        }
    };
    if rank == 1 {
        for_ranges(numel, GRAIN, run);
    } else {
        for_ranges(rows, (GRAIN / inner).max(1), run);
    }
}

/// Runs reduction `kernel`, its outputs split across the pool (each thread reduces whole
/// outputs, so results don't depend on the split). Empty reductions still run: they write
/// the identity.
///
/// # Safety
/// As [`launch`].
unsafe fn launch_reduce(kernel: &CompiledKernel, lowered: &LoweredGroup, inputs: &[*const u8], outputs: &[*mut u8], scalars: &[f64]) {
    let shape = &lowered.shape;
    let kept = shape.len() - lowered.reduce_rank;
    let rows: usize = shape[..kept].iter().product();
    let per_row: usize = shape[kept..].iter().product();
    let ins: Vec<SendPtr> = inputs.iter().map(|&p| SendPtr(p)).collect();
    let outs: Vec<SendPtr> = outputs.iter().map(|&p| SendPtr(p as *const u8)).collect();
    for_ranges(rows, (GRAIN / per_row.max(1)).max(1), |range| {
        let in_ptrs: Vec<*const u8> = ins.iter().map(|p| p.0).collect();
        let out_ptrs: Vec<*mut u8> = outs.iter().map(|p| p.0 as *mut u8).collect();
        // SAFETY: outputs in `range` are inside the iteration space the caller vouched for.
        unsafe { call(kernel, &in_ptrs, &out_ptrs, scalars, shape, &lowered.strides, range, 0) };
    });
}

/// One call of `kernel` for rows `rows` of the iteration space `shape`, whose first element
/// has linear index `index_base` plus its own (see [`KernelArgs`]).
///
/// # Safety
/// The pointers, sizes and strides must describe buffers that hold every element the rows
/// reach (see [`KernelArgs`]).
#[allow(clippy::too_many_arguments)]
unsafe fn call(kernel: &CompiledKernel, inputs: &[*const u8], outputs: &[*mut u8], scalars: &[f64], shape: &[usize], strides: &[isize], rows: std::ops::Range<usize>, index_base: usize) {
    let args = KernelArgs {
        inputs: inputs.as_ptr(),
        outputs: outputs.as_ptr(),
        scalars: scalars.as_ptr(),
        shape: shape.as_ptr(),
        strides: strides.as_ptr(),
        row_start: rows.start,
        row_end: rows.end,
        index_base,
    };
    // SAFETY: the caller vouches for every pointer the arguments hold.
    unsafe { kernel.jit.call(&args) };
}
