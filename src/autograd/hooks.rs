//! Tensor hooks (`x.register_hook(f)`), `retain_grad()`, and the handles that remove hooks.

use super::node::Node;
use crate::tensor::{Tensor, WeakTensor};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

/// A hook on a gradient: sees it, and may return a replacement.
pub(crate) type Hook = Arc<dyn Fn(&Tensor) -> Option<Tensor> + Send + Sync>;

/// A hook run on a leaf after its `.grad` was updated (it sees the leaf).
pub(crate) type PostAccumulateHook = Arc<dyn Fn(&Tensor) + Send + Sync>;

static NEXT_HOOK_ID: AtomicU64 = AtomicU64::new(0);

/// Where a hook was registered.
enum HookOwner {
    /// A leaf's hooks (run by its `AccumulateGrad`).
    Leaf(WeakTensor),
    /// A non-leaf's hooks (run by its `grad_fn` before the rule).
    Node(Weak<Node>),
    /// A leaf's post-accumulate-grad hooks.
    LeafPost(WeakTensor),
}

/// Removes the hook it was returned for (`handle.remove()`). Dropping the handle keeps the hook.
pub struct HookHandle {
    owner: HookOwner,
    id: u64,
}

impl HookHandle {
    /// Removes the hook; a no-op when the tensor or graph is gone.
    pub fn remove(self) {
        let keep = |hooks: &mut Vec<(u64, Hook)>| hooks.retain(|(id, _)| *id != self.id);
        match &self.owner {
            HookOwner::Leaf(w) => {
                if let Some(t) = w.upgrade() {
                    keep(&mut t.autograd().lock().hooks);
                }
            }
            HookOwner::Node(w) => {
                if let Some(n) = w.upgrade() {
                    keep(&mut n.lock_hooks().hooks);
                }
            }
            HookOwner::LeafPost(w) => {
                if let Some(t) = w.upgrade() {
                    t.autograd().lock().post_accumulate_hooks.retain(|(id, _)| *id != self.id);
                }
            }
        }
    }
}

impl Tensor {
    /// Registers `hook` on this tensor's gradient (`x.register_hook(f)`): during backward it
    /// sees the gradient computed for this tensor and may return a replacement (`Some`) or leave
    /// it (`None`). Hooks run in registration order, before a leaf's accumulation into `.grad`.
    ///
    /// Panics when the tensor does not require grad.
    #[track_caller]
    pub fn register_hook(&self, hook: impl Fn(&Tensor) -> Option<Tensor> + Send + Sync + 'static) -> HookHandle {
        if !self.requires_grad() {
            panic!(
                "{}",
                crate::Error::new(
                    "register_hook",
                    crate::ErrorKind::Value,
                    format!(
                        "cannot register a hook on a tensor that doesn't require gradient (shape {:?}, dtype {})",
                        self.shape(),
                        self.dtype()
                    )
                )
            );
        }
        let id = NEXT_HOOK_ID.fetch_add(1, Ordering::Relaxed);
        let hook: Hook = Arc::new(hook);
        let owner = match self.autograd().grad_fn() {
            Some(node) => {
                node.lock_hooks().hooks.push((id, hook));
                HookOwner::Node(Arc::downgrade(&node))
            }
            None => {
                self.autograd().lock().hooks.push((id, hook));
                HookOwner::Leaf(self.downgrade())
            }
        };
        HookHandle { owner, id }
    }

    /// Registers `hook` to run after this leaf's gradient has been accumulated into `.grad`
    /// during backward (`x.register_post_accumulate_grad_hook(f)`); the hook receives the leaf
    /// (read `.grad()` from it). Hooks run in registration order. This is where data-parallel
    /// training learns that a parameter's gradient is ready.
    ///
    /// Panics when the tensor does not require grad or is not a leaf.
    #[track_caller]
    pub fn register_post_accumulate_grad_hook(&self, hook: impl Fn(&Tensor) + Send + Sync + 'static) -> HookHandle {
        if !self.requires_grad() || self.autograd().grad_fn().is_some() {
            panic!("{}", crate::Error::new("register_post_accumulate_grad_hook", crate::ErrorKind::Value, format!("post accumulate grad hooks can only be registered on leaf tensors that require grad (shape {:?}, dtype {})", self.shape(), self.dtype())));
        }
        let id = NEXT_HOOK_ID.fetch_add(1, Ordering::Relaxed);
        self.autograd().lock().post_accumulate_hooks.push((id, Arc::new(hook)));
        HookHandle { owner: HookOwner::LeafPost(self.downgrade()), id }
    }

    /// Makes this non-leaf keep its gradient in `.grad` during backward (`x.retain_grad()`); a
    /// no-op on leaves, which always do.
    #[track_caller]
    pub fn retain_grad(&self) {
        if !self.requires_grad() {
            panic!(
                "{}",
                crate::Error::new(
                    "retain_grad",
                    crate::ErrorKind::Value,
                    "can't retain_grad on a tensor that has requires_grad=False"
                )
            );
        }
        if let Some(node) = self.autograd().grad_fn() {
            node.lock_hooks().retain = Some(self.downgrade());
            self.autograd().lock().retains_grad = true;
        }
    }

    /// Whether this non-leaf keeps its gradient (`x.retains_grad`).
    pub fn retains_grad(&self) -> bool {
        self.autograd().lock().retains_grad
    }
}
