//! The autograd state every tensor carries: whether it requires grad, its `grad_fn`, its
//! accumulated `.grad`, and its hooks.

use super::hooks::{Hook, PostAccumulateHook};
use super::node::Node;
use crate::tensor::Tensor;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// Per-tensor autograd state. A tensor that requires grad is either a *leaf* (created by the
/// user, `requires_grad_(true)`, gradients accumulate into `.grad`) or has a `grad_fn` (the
/// node that computed it). `requires_grad` mirrors "leaf flag or grad_fn" in an atomic so the
/// check every op makes on its inputs takes no lock.
#[derive(Default)]
pub(crate) struct AutogradMeta {
    requires_grad: AtomicBool,
    inner: Mutex<MetaInner>,
}

/// The lock-protected part of [`AutogradMeta`].
#[derive(Default)]
pub(crate) struct MetaInner {
    /// A leaf that requires grad (set by `requires_grad_`).
    pub leaf_requires_grad: bool,
    /// The node that computed this tensor (non-leaves only).
    pub grad_fn: Option<Arc<Node>>,
    /// The accumulated gradient (leaves, and non-leaves with `retain_grad`).
    pub grad: Option<Tensor>,
    /// The leaf's `AccumulateGrad` node while some graph holds it.
    pub accumulator: Weak<Node>,
    /// `retain_grad()` was called on this non-leaf.
    pub retains_grad: bool,
    /// Hooks on a leaf's gradient (a non-leaf's hooks live on its `grad_fn`).
    pub hooks: Vec<(u64, Hook)>,
    /// Hooks run on a leaf after its gradient was accumulated into `.grad`.
    pub post_accumulate_hooks: Vec<(u64, PostAccumulateHook)>,
    /// Made by a view op while recording: in-place writes through it are refused.
    pub is_tracked_view: bool,
}

impl AutogradMeta {
    /// Whether the tensor requires grad (leaf flag or a `grad_fn`).
    #[inline]
    pub fn requires_grad(&self) -> bool {
        self.requires_grad.load(Ordering::Relaxed)
    }

    /// The locked state.
    pub fn lock(&self) -> MutexGuard<'_, MetaInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Recomputes the `requires_grad` mirror after a change to `inner`.
    pub fn sync_flag(&self, inner: &MetaInner) {
        let flag = inner.leaf_requires_grad || inner.grad_fn.is_some();
        self.requires_grad.store(flag, Ordering::Relaxed);
    }

    /// Sets the node that computed this tensor (a fresh op output, or history rebased by an
    /// in-place op).
    pub fn set_grad_fn(&self, node: Option<Arc<Node>>) {
        let mut inner = self.lock();
        inner.grad_fn = node;
        self.sync_flag(&inner);
    }

    /// The node that computed this tensor, if any.
    pub fn grad_fn(&self) -> Option<Arc<Node>> {
        if !self.requires_grad() {
            return None;
        }
        self.lock().grad_fn.clone()
    }
}
