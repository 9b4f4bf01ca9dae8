//! Custom differentiable functions (`torch.autograd.Function`): a forward computed without
//! recording, and a backward rule the user writes, recorded as one node.
//!
//! [`Function::apply`] runs [`Function::forward`] under [`no_grad`](super::no_grad), then, when
//! grad mode is on and some input requires grad, records the output with a rule that owns the
//! function (in an `Arc`) and calls [`Function::backward`]. The tensors the forward saved with
//! [`FunctionCtx::save_for_backward`] go through the same saved-tensor machinery as built-in
//! ops: an in-place write to one of them before backward makes backward fail, and they are
//! freed after a backward that does not retain the graph.

use super::node::{record, BackwardCtx, Grads, Saved};
use crate::tensor::Tensor;
use smallvec::SmallVec;
use std::sync::Arc;

/// A differentiable function with a hand-written backward (`torch.autograd.Function`).
///
/// Non-tensor arguments are fields of the type implementing it (so the methods take `&self`);
/// the tensor inputs are the slice given to [`Function::apply`]. The node it records is named
/// after the type, as in PyTorch: `BinaryActiveBackward` for `struct BinaryActive`.
///
/// ```
/// use kiln::autograd::{Function, FunctionCtx};
/// use kiln::Tensor;
///
/// /// `y = x * scale`, with the gradient `g * scale`.
/// struct Scale {
///     scale: f64,
/// }
///
/// impl Function for Scale {
///     fn forward(&self, _ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Tensor {
///         &inputs[0] * self.scale
///     }
///     fn backward(&self, _ctx: &FunctionCtx, grad_output: &Tensor) -> Vec<Option<Tensor>> {
///         vec![Some(grad_output * self.scale)]
///     }
/// }
///
/// let x = Tensor::new(&[1.0f32, 2.0]).requires_grad_(true);
/// let y = Scale { scale: 3.0 }.apply(&[x.clone()]);
/// assert_eq!(y.grad_fn().unwrap().name(), "ScaleBackward");
/// y.backward_with(&Tensor::ones(&[2]));
/// assert_eq!(x.grad().unwrap().to_vec::<f32>(), vec![3.0, 3.0]);
/// ```
pub trait Function: Send + Sync + 'static {
    /// Computes the output from `inputs` (as given to [`Function::apply`]); runs with grad mode
    /// off. Save what backward needs with [`FunctionCtx::save_for_backward`].
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Tensor;

    /// The gradient of each input (one entry per input, in order; `None` means no gradient, i.e.
    /// zero) given the gradient of the output. Written with tensor ops, it is differentiable
    /// itself: under `create_graph` it runs with grad mode on and records its ops. A gradient
    /// may have a shape that broadcasts to the input's; it is summed down to it.
    fn backward(&self, ctx: &FunctionCtx, grad_output: &Tensor) -> Vec<Option<Tensor>>;

    /// Runs [`Function::forward`] on `inputs` and, when grad mode is on and some input requires
    /// grad, records the output with a node named `<TypeName>Backward` whose rule is
    /// [`Function::backward`] (`MyFunction.apply(*inputs)`).
    #[track_caller]
    fn apply(self, inputs: &[Tensor]) -> Tensor
    where
        Self: Sized,
    {
        apply_function(self, inputs)
    }
}

/// The context of one call of a [`Function`] (`ctx`): what the forward saved and marked, and
/// which inputs need a gradient.
pub struct FunctionCtx {
    needs: SmallVec<[bool; 2]>,
    /// In forward: the tensors given to `save_for_backward`; in backward: those tensors,
    /// unpacked (checked against in-place writes).
    saved: Vec<Tensor>,
    non_differentiable: Vec<Tensor>,
}

impl FunctionCtx {
    /// Saves tensors for [`Function::backward`] (`ctx.save_for_backward(a, b)`); each call
    /// replaces what an earlier one saved. Save inputs and the output this way rather than
    /// keeping them in fields: saved tensors are checked against in-place writes and freed with
    /// the graph, and a saved output keeps its history for double backward.
    pub fn save_for_backward(&mut self, tensors: &[&Tensor]) {
        self.saved = tensors.iter().map(|&t| t.clone()).collect();
    }

    /// The tensors saved by [`FunctionCtx::save_for_backward`], in order (`ctx.saved_tensors`).
    /// In backward they have been checked: backward fails before it is called when one of them
    /// was modified in place after it was saved.
    pub fn saved_tensors(&self) -> Vec<Tensor> {
        self.saved.clone()
    }

    /// Marks an output as not differentiable (`ctx.mark_non_differentiable(out)`): it then does
    /// not require grad and no node is recorded.
    pub fn mark_non_differentiable(&mut self, output: &Tensor) {
        self.non_differentiable.push(output.clone());
    }

    /// Whether input `i` needs a gradient (`ctx.needs_input_grad[i]`): false for inputs that
    /// don't require grad (and for all inputs while grad mode is off), so backward can skip
    /// their work and return `None`.
    pub fn needs_input_grad(&self, i: usize) -> bool {
        self.needs.get(i).copied().unwrap_or(false)
    }
}

/// `<TypeName>Backward` for the function type `F` (its path and generic arguments dropped).
fn node_name<F>() -> String {
    let full = std::any::type_name::<F>();
    let base = full.split('<').next().unwrap_or(full);
    let name = base.rsplit("::").next().unwrap_or(base);
    format!("{name}Backward")
}

/// [`Function::apply`].
#[track_caller]
fn apply_function<F: Function>(f: F, inputs: &[Tensor]) -> Tensor {
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let recording = super::is_recording(&refs);
    let mut ctx = FunctionCtx {
        needs: inputs.iter().map(|t| recording && t.requires_grad()).collect(),
        saved: Vec::new(),
        non_differentiable: Vec::new(),
    };
    let out = {
        let _off = super::no_grad_guard();
        f.forward(&mut ctx, inputs)
    };
    let marked = ctx.non_differentiable.iter().any(|t| t.is_same(&out));
    // An input returned as is (or any tensor with history) gets a fresh handle, so that recording
    // does not overwrite the history of a tensor the caller holds.
    let fresh =
        |t: &Tensor| if t.requires_grad() || inputs.iter().any(|i| i.is_same(t)) { t.detach() } else { t.clone() };
    if marked || !recording || !out.dtype().is_float() {
        return if marked { fresh(&out) } else { out };
    }
    let saved: Vec<Saved> = ctx
        .saved
        .iter()
        .map(|t| match inputs.iter().find(|i| i.is_same(t)) {
            Some(input) => Saved::of(input),
            None if t.is_same(&out) => Saved::Output,
            None => Saved::of(t),
        })
        .collect();
    let out = fresh(&out);
    let n_inputs = inputs.len();
    let f = Arc::new(f);
    record(out, node_name::<F>(), &refs, saved, move |bctx: &BackwardCtx, g: &Tensor, s: &[Tensor]| {
        let ctx = FunctionCtx {
            needs: (0..n_inputs).map(|i| bctx.needs_input_grad(i)).collect(),
            saved: s.to_vec(),
            non_differentiable: Vec::new(),
        };
        f.backward(&ctx, g).into_iter().collect::<Grads>()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Plain;
    struct Generic<T>(std::marker::PhantomData<T>);

    #[test]
    fn node_names_drop_paths_and_generics() {
        assert_eq!(node_name::<Plain>(), "PlainBackward");
        assert_eq!(node_name::<Generic<Vec<u8>>>(), "GenericBackward");
    }
}
