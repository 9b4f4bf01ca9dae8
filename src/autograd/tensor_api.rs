//! The autograd methods of [`Tensor`]: flags, `.grad`, `grad_fn`, `backward`, `detach`.

use super::engine::{self, BackwardOpts};
use super::node::GradFn;
use crate::error::{bail, AtCaller, OrPanic, Result};
use crate::tensor::Tensor;

impl Tensor {
    /// Whether gradients are computed for this tensor: a leaf marked with `requires_grad_`, or the
    /// result of a recorded op on such tensors (`x.requires_grad`).
    #[inline]
    pub fn requires_grad(&self) -> bool {
        self.autograd().requires_grad()
    }

    /// Marks this leaf as requiring grad (or not) and returns the same tensor, so it chains:
    /// `Tensor::ones(&[2, 2]).requires_grad_(true)`. Only floating-point tensors can require
    /// grad; a non-leaf cannot be unmarked (use [`Tensor::detach`]).
    #[track_caller]
    pub fn requires_grad_(&self, requires_grad: bool) -> Tensor {
        self.try_requires_grad_(requires_grad).or_panic()
    }

    /// [`Tensor::requires_grad_`] returning an error.
    #[track_caller]
    pub fn try_requires_grad_(&self, requires_grad: bool) -> Result<Tensor> {
        if requires_grad && !self.dtype().is_float() {
            bail!(
                "requires_grad_",
                DType,
                "only tensors of floating point dtype can require gradients (got {}, shape {:?})",
                self.dtype(),
                self.shape()
            );
        }
        let meta = self.autograd();
        let mut inner = meta.lock();
        if inner.grad_fn.is_some() {
            if !requires_grad {
                bail!("requires_grad_", Value, "you can only change requires_grad flags of leaf variables; to use a computed tensor in a subgraph that doesn't require differentiation use `x.detach()`");
            }
        } else {
            inner.leaf_requires_grad = requires_grad;
            meta.sync_flag(&inner);
        }
        drop(inner);
        Ok(self.clone())
    }

    /// True for tensors not computed by a recorded op: every tensor that doesn't require grad,
    /// and the tensors the user marked with `requires_grad_` (`x.is_leaf`).
    pub fn is_leaf(&self) -> bool {
        self.autograd().grad_fn().is_none()
    }

    /// The node of the op that computed this tensor (`x.grad_fn`); `None` for leaves.
    pub fn grad_fn(&self) -> Option<GradFn> {
        self.autograd().grad_fn().map(GradFn)
    }

    /// The gradient accumulated by backward (`x.grad`): leaves, and non-leaves that called
    /// [`Tensor::retain_grad`].
    pub fn grad(&self) -> Option<Tensor> {
        if !self.requires_grad() {
            return None;
        }
        self.autograd().lock().grad.clone()
    }

    /// Replaces the accumulated gradient (`x.grad = g`, or `x.grad = None`).
    #[track_caller]
    pub fn set_grad(&self, grad: Option<Tensor>) {
        if let Some(g) = &grad {
            if g.shape() != self.shape() || g.dtype() != self.dtype() {
                panic!(
                    "{}",
                    crate::Error::new(
                        "set_grad",
                        crate::ErrorKind::Shape,
                        format!(
                            "assigned grad has shape {:?} and dtype {}, but the tensor has shape {:?} and dtype {}",
                            g.shape(),
                            g.dtype(),
                            self.shape(),
                            self.dtype()
                        )
                    )
                );
            }
        }
        self.replace_grad(grad);
    }

    /// Sets `.grad` to `None`, as PyTorch's `zero_grad()` does by default.
    pub fn zero_grad(&self) {
        self.replace_grad(None);
    }

    /// Replaces `.grad`; inside a compiled call, the call's journal keeps the old one (see
    /// `capture::journal`).
    fn replace_grad(&self, grad: Option<Tensor>) {
        let mut inner = self.autograd().lock();
        crate::capture::journal_grad(self, &inner.grad);
        inner.grad = grad;
    }

    /// Puts back a `.grad` that a failed compiled call changed (not journaled again).
    pub(crate) fn restore_grad(&self, grad: Option<Tensor>) {
        self.autograd().lock().grad = grad;
    }

    /// Computes the gradient of this scalar with respect to the leaves of its graph and adds it
    /// into their `.grad` (`loss.backward()`). The graph's saved tensors are freed.
    #[track_caller]
    pub fn backward(&self) {
        self.try_backward_with_opts(None, BackwardOpts::default()).or_panic()
    }

    /// The vector-Jacobian product: backward with `gradient` as the gradient of this tensor
    /// (`y.backward(v)`), for non-scalar outputs.
    #[track_caller]
    pub fn backward_with(&self, gradient: &Tensor) {
        self.try_backward_with_opts(Some(gradient), BackwardOpts::default()).or_panic()
    }

    /// [`Tensor::backward`] with `retain_graph` / `create_graph`.
    #[track_caller]
    pub fn backward_opts(&self, opts: BackwardOpts) {
        self.try_backward_with_opts(None, opts).or_panic()
    }

    /// Backward with an optional output gradient (`None`: this tensor must have one element) and
    /// options, returning an error instead of panicking.
    #[track_caller]
    pub fn try_backward_with_opts(&self, gradient: Option<&Tensor>, opts: BackwardOpts) -> Result<()> {
        let root = engine::root_edges("backward", &[self])?.remove(0);
        let g = output_gradient("backward", self, gradient)?;
        engine::run(vec![(root, g)], opts, None).at_caller()?;
        Ok(())
    }

    /// Sums this tensor down to `shape`, over the dims broadcasting would expand to this
    /// tensor's shape (`x.sum_to_size(shape)`); differentiable.
    #[track_caller]
    pub fn sum_to_size(&self, shape: impl crate::tensor::IntoShape) -> Tensor {
        use crate::error::OrPanic;
        let shape = &*crate::tensor::sizes("sum_to_size", shape).or_panic();
        let fits = kiln_runtime::layout::broadcast_shapes(shape, self.shape()).as_deref() == Some(self.shape());
        if !fits {
            panic!(
                "{}",
                crate::Error::new(
                    "sum_to_size",
                    crate::ErrorKind::Shape,
                    format!("size {shape:?} is not expandable to size {:?}", self.shape())
                )
            );
        }
        engine::sum_to_size(self, shape)
    }

    /// A tensor sharing this one's storage but outside the graph: no history, does not require
    /// grad (`x.detach()`). In-place writes to either are seen by both.
    pub fn detach(&self) -> Tensor {
        self.with_layout(self.layout().clone())
    }

    /// Removes this tensor from the graph in place (`x.detach_()`): it becomes a leaf that does
    /// not require grad.
    pub fn detach_(&self) -> &Tensor {
        let meta = self.autograd();
        let mut inner = meta.lock();
        inner.grad_fn = None;
        inner.leaf_requires_grad = false;
        meta.sync_flag(&inner);
        self
    }
}

/// The gradient backward starts from: `gradient`, checked against `out`, or ones for a
/// one-element `out`.
#[track_caller]
pub(crate) fn output_gradient(op: &'static str, out: &Tensor, gradient: Option<&Tensor>) -> Result<Tensor> {
    match gradient {
        Some(g) => {
            if g.shape() != out.shape() {
                bail!(
                    op,
                    Shape,
                    "mismatch in shape: grad_output has a shape of {:?} and output has a shape of {:?}",
                    g.shape(),
                    out.shape()
                );
            }
            if g.device() != out.device() {
                bail!(op, Device, "the gradient is on {} but the output is on {}", g.device(), out.device());
            }
            Ok(g.to_dtype(out.dtype()))
        }
        None => {
            if out.numel() != 1 {
                bail!(op, Shape, "grad can be implicitly created only for scalar outputs, but the output has shape {:?}; pass the gradient with backward_with(&gradient)", out.shape());
            }
            Ok(Tensor::ones_opts(out.shape(), out.dtype(), out.device()))
        }
    }
}
