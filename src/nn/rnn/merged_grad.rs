//! The recurrent weight's gradient as one product over all steps (cuDNN's layout), instead of
//! one small product per step and a sum of them all.
//!
//! A step's recurrent contribution is `r_t = h_{t-1}·W_hhᵀ` (rows of the step's sequences), so
//! `∂L/∂W_hh = Σ_t (∂L/∂r_t)ᵀ·h_{t-1}`. Autograd through the steps would make that one
//! `(G, rows_t)·(rows_t, H)` product per step (tiny inner size: the batch) and a sum of `L`
//! gradients. Here `W_hh`'s gradient comes from a *carrier*: a tensor of every packed row `(Σ batch_sizes, G)` that each step adds to its
//! recurrent product (for `RNN`/`LSTM` the input's contribution to the gates, which the steps
//! add anyway; for `GRU`, whose recurrent product is used apart from the input's, `b_hh` over
//! every row). The carrier's rows of step `t` get exactly `∂L/∂r_t`, so its gradient is all of
//! them stacked, and its node computes `W_hh`'s gradient as one product with the stacked
//! previous hidden states, `(Σ ∂L/∂r_t)ᵀ·H_prev`, which the recurrence hands over once it has
//! run ([`RecurrentGrad::finish`]).
//!
//! The steps' products are nodes of their own ([`RecurrentGrad::product`]): they pass the
//! hidden state its gradient, `∂L/∂r_t·W_hh`, and give `W_hh` none. Under `create_graph` the
//! roles swap back: each step gives `W_hh` its own `(∂L/∂r_t)ᵀ·h_{t-1}` and the carrier gives
//! none, so the backward pass is recorded exactly as the ordinary ops would record it and
//! differentiates again (the stacked states are held without history: with it, they would
//! make a reference cycle through the carrier's node).

use crate::autograd::{self, grads, Saved};
use crate::Tensor;
use std::sync::{Arc, OnceLock};

/// The previous hidden states of every packed row, once the recurrence has run.
type HiddenRows = Arc<OnceLock<Tensor>>;

/// One direction of one layer whose `W_hh` gradient is merged: the carrier to add into the
/// steps, `W_hh` for their products, and where the hidden states go.
pub(super) struct RecurrentGrad {
    /// The carrier rows `(Σ batch_sizes, G)`, with the node that gives `W_hh` its gradient.
    pub carrier: Tensor,
    w_hh: Tensor,
    /// `W_hhᵀ`, row-major when the recurrence has several steps, without history: see
    /// [`row_major_t`].
    w_hh_t: Tensor,
    hidden: HiddenRows,
}

/// `wᵀ` for the products of `steps` steps: copied into row-major storage when there is more
/// than one. `h·wᵀ` through a transposed view has its shared dim contiguous in both operands,
/// and with a batch's few rows the `gemm` crate runs that form 1.7-13x slower than with the
/// right operand row-major (one thread, 32x256 by 256x1024: 138 against 82 µs; 32x1024 by
/// 1024x256: 494 against 75 µs), so one copy per forward call saves that on each step; a
/// single step (sampling a character at a time) keeps the view rather than pay the copy.
#[track_caller]
pub(super) fn row_major_t(w: &Tensor, steps: usize) -> Tensor {
    if steps > 1 {
        w.t().contiguous()
    } else {
        w.t()
    }
}

impl RecurrentGrad {
    /// Merges `w_hh`'s gradient through `rows` (the carrier's value: what the steps add to
    /// their recurrent products anyway), for a recurrence of `steps` steps.
    #[track_caller]
    pub fn new(rows: &Tensor, w_hh: &Tensor, steps: usize) -> RecurrentGrad {
        let hidden: HiddenRows = Arc::new(OnceLock::new());
        let states = hidden.clone();
        let carrier =
            autograd::record(rows.detach(), "RecurrentWeightBackward", &[rows, w_hh], [], move |ctx, g, _| {
                // Under `create_graph` the steps give `W_hh` its gradient (see the module doc).
                let dw = (ctx.needs_input_grad(1) && !autograd::is_grad_enabled()).then(|| {
                    let h = states.get().expect("the recurrence hands over its hidden states before backward");
                    g.t().matmul(h)
                });
                grads![ctx.needs_input_grad(0).then(|| g.clone()), dw]
            });
        RecurrentGrad { carrier, w_hh: w_hh.clone(), w_hh_t: row_major_t(&w_hh.detach(), steps), hidden }
    }

    /// A step's recurrent product `h·W_hhᵀ`, recorded with a rule that gives `W_hh` no
    /// gradient except under `create_graph` (the carrier gives it otherwise).
    #[track_caller]
    pub fn product(&self, h: &Tensor) -> Tensor {
        let out = h.detach().matmul(&self.w_hh_t);
        let saved = [Saved::of(h), Saved::of(&self.w_hh)];
        autograd::record(out, "RecurrentStepBackward", &[h, &self.w_hh], saved, |ctx, g, s| {
            let dw = (ctx.needs_input_grad(1) && autograd::is_grad_enabled()).then(|| g.t().matmul(&s[0]));
            grads![ctx.needs_input_grad(0).then(|| g.matmul(&s[1])), dw]
        })
    }

    /// Hands over the hidden state each step started from (`h_{t-1}`, in step order: their rows
    /// stacked are the carrier's rows).
    #[track_caller]
    pub fn finish(&self, previous: &[Tensor]) {
        let stacked = Tensor::cat(previous, 0).detach();
        // A carrier is made per forward call, and each forward finishes it once.
        let _ = self.hidden.set(stacked);
    }
}

/// Whether a recurrence over these weights merges `W_hh`'s gradient: when its product with the
/// hidden state would record a node for `W_hh`.
pub(super) fn merges(w_hh: &Tensor) -> bool {
    autograd::is_recording(&[w_hh])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_steps_multiply_by_a_row_major_copy_one_step_by_the_view() {
        let w = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3]);
        let copy = row_major_t(&w, 2);
        assert!(copy.is_contiguous() && !copy.shares_storage_with(&w));
        assert_eq!(copy.to_vec::<f32>(), [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
        let view = row_major_t(&w, 1);
        assert!(view.shares_storage_with(&w) && view.shape() == [3, 2]);
    }
}
