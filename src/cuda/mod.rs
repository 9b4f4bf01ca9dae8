//! CUDA (`torch.cuda`): the process-wide functions users call, re-exported from the runtime
//! ([`is_available`], [`device_count`], [`synchronize`], [`memory_allocated`],
//! [`max_memory_allocated`], [`memory_reserved`], [`memory_stats`],
//! [`reset_peak_memory_stats`], [`empty_cache`]; each takes the device's ordinal where
//! PyTorch takes a device), and, inside the crate, CUDA tensors: moving storage between
//! devices and running eager ops on the device.
//!
//! - [`transfer`]: host↔device copies of tensors (`to`, `to_non_blocking` from pinned memory
//!   and to pinned memory, `to_vec`, printing, creation).
//! - [`advanced`]: advanced indexing (`index`, `index_put_`): each element's storage offset
//!   computed by elementwise kernels, then the gather/scatter kernels of [`index`].
//! - [`conv`]: `conv2d`/`conv1d` and their gradients: `im2col`/`col2im` kernels from the
//!   CUDA C emitter (`kiln_codegen::cuda::im2col`; `col2im` gathers, so it is deterministic)
//!   around batched cuBLAS products.
//! - [`fused`]: `kiln::compile`'s fused elementwise groups, one kernel each from the CUDA C
//!   emitter (`kiln_codegen::cuda::fused`), loaded once per process and device.
//! - [`elementwise`]: eager elementwise ops (unary, binary, comparisons, `where`, casts,
//!   copies and fills) as strided kernels from the CUDA C emitter, each a fused group of one
//!   op; compiled once per (op, dtypes, dims) and device, and kept loaded.
//! - [`index`]: `gather`/`index_select` and `scatter`/`scatter_add` along one dim, as indexing
//!   kernels from the same emitter (`kiln_codegen::cuda::index`), index values validated on
//!   the device before the launch.
//! - [`join`]: `cat` and `stack`, each input copied into its slice of the output by the
//!   strided copy kernel.
//! - [`matmul`](mod@matmul): matrix products (`matmul`, `mm`, `bmm`, `mv`, `dot`, and `linear` through
//!   them) as cuBLAS strided-batched calls, transposed views passed as flags.
//! - [`pool`]: `max_pool2d` (values and argmax indices), `avg_pool2d` and their gradients as
//!   pooling kernels from the same emitter (`kiln_codegen::cuda::pool`); the gradients gather,
//!   so they are deterministic.
//! - [`random`]: `rand`/`randn`/`uniform_`/`normal_` drawn on the device by the Philox
//!   kernels of `kiln_codegen::cuda::philox` (the CPU generator's numbers).
//! - [`reduce`](mod@reduce): reductions over dims, softmax and cumsum along a dim, as reduction kernels from the
//!   same emitter (`kiln_codegen::cuda::reduce`), compiled once per (reduction, dtype, dims)
//!   and device.
//!
//! - [`scan`](mod@scan): `cumprod`, `cummax`/`cummin` and `logcumsumexp` along a dim, as scan
//!   kernels from the same emitter (`kiln_codegen::cuda::scan`), one thread per line.
//! - [`select`]: `nonzero` and `masked_select` through the compaction kernels (count, scan,
//!   write; the count read back).
//! - [`sort`]: `sort`, `argsort`, `topk` through the bitonic sort kernels (stable, the CPU's
//!   order), the sorted dim moved last.
//!
//! An op with no CUDA kernel yet fails with "`op` is not implemented for CUDA tensors yet"
//! (see `tensor::check_device_supported`); without a GPU, making a CUDA tensor fails with the
//! runtime's "no CUDA device available", named after the op and the caller's line.

pub(crate) mod advanced;
pub(crate) mod conv;
pub(crate) mod elementwise;
pub(crate) mod fused;
pub(crate) mod index;
pub(crate) mod join;
pub(crate) mod matmul;
pub(crate) mod pool;
pub(crate) mod random;
pub(crate) mod reduce;
pub(crate) mod scan;
pub(crate) mod select;
pub(crate) mod sort;
pub(crate) mod transfer;

pub use kiln_runtime::cuda::{
    device_count, empty_cache, is_available, max_memory_allocated, memory_allocated, memory_reserved, memory_stats,
    reset_peak_memory_stats, synchronize, CudaError, CudaMemoryStats,
};

pub(crate) use elementwise::{copy_into, map};
pub(crate) use matmul::matmul;
pub(crate) use reduce::{along, reduce};
pub(crate) use transfer::{to_device, to_device_non_blocking, upload};

use crate::error::{Error, ErrorKind};
use kiln_runtime::cuda::CudaErrorKind;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

/// Kernels loaded in this process, by key (op, dtypes, dims, device): each is emitted,
/// compiled and loaded once. A `static` of this type per kernel family.
pub(crate) struct LoadedKernels<K, V>(Mutex<Option<HashMap<K, Arc<V>>>>);

impl<K: Hash + Eq, V> LoadedKernels<K, V> {
    /// An empty cache (usable in a `static`).
    pub(crate) const fn new() -> Self {
        LoadedKernels(Mutex::new(None))
    }

    /// The kernel loaded under `key`, if any.
    pub(crate) fn get(&self, key: &K) -> Option<Arc<V>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).as_ref().and_then(|m| m.get(key).cloned())
    }

    /// The kernel under `key`, loading it with `load` the first time (a racing thread may
    /// load it too: both are the same kernel); a load error is `op`'s, at the caller's line.
    #[track_caller]
    pub(crate) fn get_or_load(
        &self,
        op: &'static str,
        key: K,
        load: impl FnOnce() -> Result<V, CudaError>,
    ) -> crate::error::Result<Arc<V>> {
        if let Some(k) = self.get(&key) {
            return Ok(k);
        }
        let kernel = load().or_op(op)?;
        Ok(self.insert(key, kernel))
    }

    /// Keeps `kernel` under `key` (a racing thread's copy may be replaced: both are the same
    /// kernel) and returns it.
    pub(crate) fn insert(&self, key: K, kernel: V) -> Arc<V> {
        let k = Arc::new(kernel);
        self.0.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashMap::new).insert(key, k.clone());
        k
    }
}

/// An error ("no CUDA device available", as `op`'s) unless `device` can be used: for ops that
/// must fail before doing anything else (drawing random numbers).
#[track_caller]
pub(crate) fn check_available(op: &'static str, device: kiln_runtime::Device) -> crate::error::Result<()> {
    match device {
        kiln_runtime::Device::Cuda(i) => kiln_runtime::cuda::device(op, i).map(drop).or_op(op),
        kiln_runtime::Device::Cpu => Ok(()),
    }
}

/// `t` when its elements are contiguous from its storage's first one (what a kernel reading
/// a plain buffer needs), else a contiguous copy, without recording: a contiguous view with
/// an offset (a narrowed batch) is copied too.
pub(crate) fn dense(t: &crate::Tensor) -> crate::Tensor {
    if t.is_contiguous() && t.layout().offset() == 0 {
        return t.clone();
    }
    let _off = crate::autograd::no_grad_guard();
    t.deep_clone()
}

/// The ordinal of a tensor the op layer sent down a CUDA branch (so it is on a CUDA device).
pub(crate) fn ordinal_of(t: &crate::Tensor) -> usize {
    match t.device() {
        kiln_runtime::Device::Cuda(i) => i,
        kiln_runtime::Device::Cpu => unreachable!("a CUDA kernel was asked for a CPU tensor"),
    }
}

/// True when any of `tensors` is on a CUDA device: the op takes its CUDA branch (which checks
/// that they all are, 0-dim CPU scalars aside).
pub(crate) fn any_on_cuda(tensors: &[&crate::Tensor]) -> bool {
    tensors.iter().any(|t| t.device().is_cuda())
}

/// A runtime result as kiln's, its error reported as `op`'s at the caller's line (a method,
/// not a `map_err` closure, so that `#[track_caller]` reaches the user's line).
pub(crate) trait OrOp<T> {
    /// The value, or the runtime's error as kiln's error of `op`.
    fn or_op(self, op: &'static str) -> crate::error::Result<T>;
}

impl<T> OrOp<T> for Result<T, CudaError> {
    #[track_caller]
    fn or_op(self, op: &'static str) -> crate::error::Result<T> {
        match self {
            Ok(v) => Ok(v),
            Err(e) => Err(error(op, e)),
        }
    }
}

/// A runtime error as kiln's error of `op`, located at the caller.
#[track_caller]
fn error(op: &'static str, e: CudaError) -> Error {
    let e = e.in_op(op);
    let kind = match e.kind {
        CudaErrorKind::Unsupported => ErrorKind::Unsupported,
        CudaErrorKind::InvalidArgument => ErrorKind::Value,
        CudaErrorKind::Timeout => ErrorKind::Timeout,
        CudaErrorKind::OutOfMemory => ErrorKind::OutOfMemory,
        _ => ErrorKind::Device,
    };
    Error::new(op, kind, e.message.clone()).caused_by(e)
}
