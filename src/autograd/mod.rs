//! Autograd: define-by-run reverse-mode differentiation with PyTorch's semantics.
//!
//! Every op whose input requires grad (while grad mode is on) records a node: its backward
//! rule, written with ordinary tensor ops next to the op's forward in `crate::ops`, the tensors
//! the rule saved, and an edge per input to where that input's gradient goes. `backward()`
//! runs the nodes in dependency order ([`engine`]), iteratively (a graph may be arbitrarily
//! deep), and accumulates into the `.grad` of leaves. Because rules are tensor ops, running them
//! with grad mode on (`create_graph`) records the backward pass itself: higher-order gradients.
//!
//! In-place safety: saved tensors remember their storage's version; an in-place write after the
//! save makes the backward that needs it fail with PyTorch's message. In-place ops on a leaf that
//! requires grad are refused while grad mode is on.

mod arrived;
mod callbacks;
mod engine;
mod function;
mod grad_mode;
mod gradcheck;
mod hooks;
mod inplace;
mod meta;
mod node;
mod tensor_api;

pub use callbacks::queue_callback;
pub use engine::BackwardOpts;
pub use function::{Function, FunctionCtx};
pub use grad_mode::{
    enable_grad, enable_grad_guard, grad_mode, is_grad_enabled, no_grad, no_grad_guard, set_grad_enabled, GradModeGuard,
};
pub use gradcheck::{gradcheck, gradgradcheck, GradcheckError, GradcheckOpts};
pub use hooks::HookHandle;
pub(crate) use node::Node;
pub use node::{BackwardCtx, GradFn};

pub(crate) use inplace::inplace;
pub(crate) use meta::AutogradMeta;
pub(crate) use node::{grads, is_recording, record, record_slice, record_view, Grads, Saved, SliceOf};

use crate::error::{bail, AtCaller, Result};
use crate::tensor::Tensor;

/// Options of [`grad`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GradOpts {
    /// Keep the graph's saved tensors (implied by `create_graph`).
    pub retain_graph: bool,
    /// Record the backward pass so the returned gradients have history.
    pub create_graph: bool,
    /// Return `None` for an input the outputs don't depend on, instead of an error.
    pub allow_unused: bool,
}

/// The gradients of `outputs` with respect to `inputs` (`torch.autograd.grad`), without
/// touching any `.grad`. `grad_outputs` gives the gradient of each output (required for outputs
/// with more than one element); the result has one entry per input.
///
/// ```
/// use kiln::Tensor;
/// let x = Tensor::new(&[3.0f64]).requires_grad_(true);
/// let y = &x * &x * &x;
/// let opts = kiln::autograd::GradOpts { create_graph: true, ..Default::default() };
/// let dy = kiln::autograd::grad(&[&y], &[&x], None, opts).unwrap()[0].clone().unwrap();
/// assert_eq!(dy.item::<f64>(), 27.0); // 3x²
/// let d2y = kiln::autograd::grad(&[&dy], &[&x], None, Default::default()).unwrap()[0].clone().unwrap();
/// assert_eq!(d2y.item::<f64>(), 18.0); // 6x
/// ```
#[track_caller]
pub fn grad(
    outputs: &[&Tensor],
    inputs: &[&Tensor],
    grad_outputs: Option<&[&Tensor]>,
    opts: GradOpts,
) -> Result<Vec<Option<Tensor>>> {
    if let Some(g) = grad_outputs {
        if g.len() != outputs.len() {
            bail!("grad", Value, "grad_outputs has {} tensors but there are {} outputs", g.len(), outputs.len());
        }
    }
    let roots = engine::root_edges("grad", outputs)?;
    let mut targets = Vec::with_capacity(inputs.len());
    for (i, t) in inputs.iter().enumerate() {
        match node::gradient_edge(t) {
            Some(e) => targets.push(e),
            None => bail!("grad", Value, "input {i} (shape {:?}) does not require grad", t.shape()),
        }
    }
    let mut start = Vec::with_capacity(outputs.len());
    for (i, (root, out)) in roots.into_iter().zip(outputs).enumerate() {
        let g = tensor_api::output_gradient("grad", out, grad_outputs.map(|g| g[i]))?;
        start.push((root, g));
    }
    let bopts = BackwardOpts { retain_graph: opts.retain_graph, create_graph: opts.create_graph };
    let grads = engine::run(start, bopts, Some(&targets)).at_caller()?;
    if !opts.allow_unused {
        if let Some(i) = grads.iter().position(Option::is_none) {
            bail!("grad", Value, "one of the differentiated tensors (input {i}, shape {:?}) appears to not have been used in the graph; set allow_unused: true if this is the desired behavior", inputs[i].shape());
        }
    }
    Ok(grads)
}
