//! The capture state every storage carries: which trace refers to it, which node of that trace
//! holds its current value, and whether its data is stale until the trace is realized.

use kiln_codegen::ir::NodeId;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Per-storage capture state (all zero outside capture). Eager code pays one relaxed load of
/// `trace` per storage access.
#[derive(Default)]
pub(crate) struct CellCapture {
    /// The id of the trace that reads or computes this storage (0: none).
    trace: AtomicU64,
    /// The node of that trace holding the storage's current value.
    node: AtomicU32,
    /// The data is stale (not computed yet, or assigned by the trace) until it is realized.
    lazy: AtomicBool,
    /// The storage's length while it is lazy.
    len: AtomicUsize,
    /// The storage holds no data yet: a trace made it and has not been realized. (A realized
    /// storage that a trace assigns is lazy but keeps its data, which stays valid, and
    /// readable by other threads, until the trace installs the new value.)
    unwritten: AtomicBool,
    /// The trace that would have computed this storage failed (see [`super::journal`]): its
    /// data will never exist.
    abandoned: AtomicBool,
}

impl CellCapture {
    /// The state of a storage that `node` of `trace` will compute.
    pub(crate) fn lazy(trace: u64, node: NodeId, len: usize) -> CellCapture {
        CellCapture {
            trace: AtomicU64::new(trace),
            node: AtomicU32::new(node),
            lazy: AtomicBool::new(true),
            len: AtomicUsize::new(len),
            unwritten: AtomicBool::new(true),
            abandoned: AtomicBool::new(false),
        }
    }

    /// The trace that refers to this storage (0: none).
    pub(crate) fn trace(&self) -> u64 {
        self.trace.load(Ordering::Acquire)
    }

    /// Whether the data is stale until the trace is realized.
    pub(crate) fn is_lazy(&self) -> bool {
        self.lazy.load(Ordering::Acquire)
    }

    /// Whether the storage has no data yet (made by a trace that has not been realized).
    pub(crate) fn is_unwritten(&self) -> bool {
        self.unwritten.load(Ordering::Acquire)
    }

    /// Whether the trace that would have computed this storage failed.
    pub(crate) fn is_abandoned(&self) -> bool {
        self.abandoned.load(Ordering::Acquire)
    }

    /// The planned length of a lazy storage.
    pub(crate) fn lazy_len(&self) -> Option<usize> {
        self.is_lazy().then(|| self.len.load(Ordering::Relaxed))
    }

    /// The node holding the current value, when `trace` refers to this storage.
    pub(crate) fn node_in(&self, trace: u64) -> Option<NodeId> {
        (self.trace() == trace).then(|| self.node.load(Ordering::Relaxed))
    }

    /// Points the storage at `node` of `trace`.
    pub(crate) fn set(&self, trace: u64, node: NodeId, lazy: bool, len: usize) {
        self.node.store(node, Ordering::Relaxed);
        self.len.store(len, Ordering::Relaxed);
        self.lazy.store(lazy, Ordering::Release);
        self.trace.store(trace, Ordering::Release);
    }

    /// Forgets the trace (the storage is realized).
    pub(crate) fn clear(&self) {
        self.unwritten.store(false, Ordering::Release);
        self.lazy.store(false, Ordering::Release);
        self.trace.store(0, Ordering::Release);
    }

    /// Forgets a trace that failed: a storage that had data keeps it (it was never
    /// overwritten: traces install results only when they have run), and one the trace was
    /// to compute is marked abandoned, so reading it is a clear error.
    pub(crate) fn roll_back(&self) {
        if self.is_unwritten() {
            self.abandoned.store(true, Ordering::Release);
        } else {
            self.clear();
        }
    }
}
