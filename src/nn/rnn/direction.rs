//! One layer of a recurrent network in one direction, over a batch laid out as packed steps
//! (a padded batch is the packed batch whose steps all have every sequence).

use super::merged_grad::{merges, row_major_t, RecurrentGrad};
use super::{step, Mode, Recurrent};
use crate::Tensor;

/// What one direction of one layer runs with: its mode, the recurrent weights and the
/// recurrent bias (used inside the step by a GRU only).
pub(super) struct Recurrence<'a> {
    /// The recurrence.
    pub mode: Mode,
    /// `W_hh`.
    pub w_hh: &'a Tensor,
    /// `b_hh`, where the step adds it itself.
    pub b_hh: Option<&'a Tensor>,
    /// `W_hrᵀ` (LSTM with `proj_size`).
    pub w_hr_t: Option<Tensor>,
}

/// The results of one direction: the output rows in packed order and the final states in the
/// packed batch order.
pub(super) struct Ran {
    /// `(Σ batch_sizes, H_out)`.
    pub output: Tensor,
    /// `(N, H_out)`: each sequence's hidden state after its last step (its first, backwards).
    pub h_n: Tensor,
    /// `(N, hidden_size)`, LSTM only.
    pub c_n: Option<Tensor>,
}

impl Recurrence<'_> {
    /// Runs the recurrence over `gates` (`(Σ batch_sizes, G)`: the input's contribution for
    /// every packed row, see `input_gates`) from the states `h0`, `c0` (`N = batch_sizes[0]`
    /// rows), forwards or backwards in time. Each sequence takes part only in its own steps,
    /// as PyTorch's packed layers: forwards, the rows of the sequences that ended are set
    /// aside with their last state; backwards, each sequence joins (from its initial state)
    /// at its own last step. While recording, `W_hh`'s gradient is merged into one product
    /// over all steps (`merged_grad`).
    #[track_caller]
    pub fn run(&self, gates: &Tensor, batch_sizes: &[usize], h0: Tensor, c0: Option<Tensor>, reverse: bool) -> Ran {
        let merged = merges(self.w_hh).then(|| match self.mode {
            Mode::Gru => {
                let shape = gates.shape();
                let rows = match self.b_hh {
                    Some(b) => b.broadcast_to(shape),
                    None => Tensor::zeros_opts(shape, gates.dtype(), gates.device()),
                };
                RecurrentGrad::new(&rows, self.w_hh, batch_sizes.len())
            }
            _ => RecurrentGrad::new(gates, self.w_hh, batch_sizes.len()),
        });
        let (steps, recurrent_bias, recurrent) = match (&merged, self.mode) {
            (Some(m), Mode::Gru) => {
                (split_steps(gates, batch_sizes), Some(split_steps(&m.carrier, batch_sizes)), Recurrent::Merged(m))
            }
            (Some(m), _) => (split_steps(&m.carrier, batch_sizes), None, Recurrent::Merged(m)),
            (None, _) => {
                (split_steps(gates, batch_sizes), None, Recurrent::Plain(row_major_t(self.w_hh, batch_sizes.len())))
            }
        };
        let b_hh = |t: usize| recurrent_bias.as_ref().map_or(self.b_hh, |b| Some(&b[t]));
        // The state each step starts from, for the merged gradient.
        let mut previous = Vec::with_capacity(if merged.is_some() { steps.len() } else { 0 });
        let n = batch_sizes[0];
        let mut outputs = Vec::with_capacity(steps.len());
        let (h, c) = if reverse {
            let mut rows = batch_sizes[batch_sizes.len() - 1];
            let (mut h, mut c) = (narrow_rows(&h0, 0, rows), c0.as_ref().map(|c| narrow_rows(c, 0, rows)));
            for (t, gi) in steps.iter().enumerate().rev() {
                let joining = batch_sizes[t] - rows;
                if joining > 0 {
                    h = Tensor::cat(&[h, h0.narrow(0, rows as i64, joining)], 0);
                    c = c.map(|c| {
                        Tensor::cat(&[c, c0.as_ref().expect("an LSTM's c0").narrow(0, rows as i64, joining)], 0)
                    });
                    rows = batch_sizes[t];
                }
                if merged.is_some() {
                    previous.push(h.clone());
                }
                (h, c) = step(self.mode, gi, &h, c.as_ref(), &recurrent, b_hh(t), self.w_hr_t.as_ref());
                outputs.push(h.clone());
            }
            outputs.reverse();
            previous.reverse();
            (h, c)
        } else {
            let (mut h, mut c) = (h0, c0);
            // The final states of the sequences that ended, in the order they ended.
            let (mut done_h, mut done_c) = (Vec::new(), Vec::new());
            let mut rows = n;
            for (t, (gi, &bs)) in steps.iter().zip(batch_sizes).enumerate() {
                if bs < rows {
                    done_h.push(h.narrow(0, bs as i64, rows - bs));
                    done_c.extend(c.as_ref().map(|c| c.narrow(0, bs as i64, rows - bs)));
                    (h, c) = (h.narrow(0, 0, bs), c.map(|c| c.narrow(0, 0, bs)));
                    rows = bs;
                }
                if merged.is_some() {
                    previous.push(h.clone());
                }
                (h, c) = step(self.mode, gi, &h, c.as_ref(), &recurrent, b_hh(t), self.w_hr_t.as_ref());
                outputs.push(h.clone());
            }
            (gather_rows(h, done_h), c.map(|c| gather_rows(c, done_c)))
        };
        if let Some(m) = &merged {
            m.finish(&previous);
        }
        Ran { output: Tensor::cat(&outputs, 0), h_n: h, c_n: c }
    }
}

/// `rows` rows of `t` from `start`, or `t` itself when that is all of it.
#[track_caller]
fn narrow_rows(t: &Tensor, start: usize, rows: usize) -> Tensor {
    if start == 0 && rows == t.shape()[0] {
        t.clone()
    } else {
        t.narrow(0, start as i64, rows)
    }
}

/// The final states of every sequence in packed order: `last` (the longest sequences') above
/// those set aside as their sequences ended (`done`, in the order they ended: the shortest
/// sequences, the last rows, first).
#[track_caller]
fn gather_rows(last: Tensor, mut done: Vec<Tensor>) -> Tensor {
    if done.is_empty() {
        return last;
    }
    done.reverse();
    done.insert(0, last);
    Tensor::cat(&done, 0)
}

/// The rows of `t` cut into consecutive pieces of `sizes` rows, taken by halving: each piece's
/// gradient is padded into its parent's extent, not into the whole of `t` (see the module doc
/// of `nn::rnn`).
#[track_caller]
fn split_steps(t: &Tensor, sizes: &[usize]) -> Vec<Tensor> {
    let mut out = Vec::with_capacity(sizes.len());
    halve(t, sizes, &mut out);
    out
}

/// Pushes the pieces of `t` of `sizes` rows onto `out`, in order.
#[track_caller]
fn halve(t: &Tensor, sizes: &[usize], out: &mut Vec<Tensor>) {
    if sizes.len() <= 2 {
        let mut start = 0;
        for &rows in sizes {
            out.push(narrow_rows(t, start, rows));
            start += rows;
        }
        return;
    }
    let half = sizes.len() / 2;
    let first: usize = sizes[..half].iter().sum();
    halve(&t.narrow(0, 0, first), &sizes[..half], out);
    halve(&t.narrow(0, first as i64, t.shape()[0] - first), &sizes[half..], out);
}
