//! Recurrent layers: `RNN`, `LSTM`, `GRU` and their cells `RNNCell`, `LSTMCell`, `GRUCell`
//! (PyTorch's `torch.nn.modules.rnn`), built from ordinary tensor ops so that autograd and
//! `kiln::compile` handle them like any other module.
//!
//! What matches PyTorch exactly: the parameter names and their order in the state dict
//! (`weight_ih_l0`, `weight_hh_l0`, `bias_ih_l0`, `bias_hh_l0`, `weight_hr_l0` with `proj_size`,
//! and a `_reverse` suffix for the backward direction of a bidirectional layer), their shapes,
//! the gate order (LSTM `i, f, g, o`; GRU `r, z, n` with `n = tanh(W_in x + b_in + r ∘ (W_hn h +
//! b_hn))`), the initialisation (every parameter U(±1/√hidden_size)), the input and state shapes
//! (`(L, N, H_in)`, `(N, L, H_in)` with `batch_first`, or unbatched `(L, H_in)`; states
//! `(D·num_layers, N, H_out)`), dropout between layers in train mode only, and the printed form
//! (`LSTM(10, 20, num_layers=2, batch_first=True)`). A PyTorch `state_dict()` loads unchanged.
//!
//! Where PyTorch's API does not map onto Rust directly:
//! - **Options.** The layers take an options struct, as `Conv2d::with_opts` takes `ConvOpts`:
//!   `nn::LSTM::new(10, 20)` has PyTorch's defaults, and
//!   `nn::LSTM::with_opts(10, 20, nn::RNNOpts { num_layers: 2, batch_first: true, ..Default::default() })`
//!   (or `nn::RNNOpts::default().num_layers(2).batch_first(true)`) sets the keyword arguments.
//!   One struct serves the three layers, as PyTorch's `RNNBase` takes one set of keyword
//!   arguments; `nonlinearity` other than tanh is refused by `LSTM`/`GRU` and `proj_size` by
//!   `RNN`/`GRU` (PyTorch raises for both).
//! - **States.** `Module::forward(&x)` returns the output sequence only (a `Module` has one
//!   input and one output); `forward_with_state(&x, state)` takes the optional initial state
//!   and returns the output with the final state: `(output, h_n)` for `RNN`/`GRU`,
//!   `(output, (h_n, c_n))` for `LSTM`, like PyTorch's tuple. The cells have the same method
//!   (a second inherent `forward` taking the state would hide `Module::forward`); a cell's
//!   `Module::forward` returns the new hidden state `h'` (for `LSTMCell`, `h'` without `c'`).
//! - **Errors.** `forward_with_state` panics on a wrong input rank, feature size, dtype, device
//!   or state shape with a message naming the layer and the shapes, located at the caller's
//!   line; `try_forward_with_state` returns it as an error instead.
//! - **Packed sequences.** PyTorch's `forward` takes a tensor or a `PackedSequence`; here a
//!   packed batch goes through its own method, `forward_packed(&packed, state)`, which returns
//!   `(PackedSequence, state)` (and `try_forward_packed`), so that each method's result type
//!   says what comes back. Semantics as PyTorch's: each sequence stops at its own length, the
//!   final state of each is the one after its last step, the reverse direction starts at each
//!   sequence's own end, the initial and final states are in the original batch's order
//!   (permuted by `sorted_indices`/`unsorted_indices` inside), and `batch_first` does not
//!   apply.
//!
//! How it runs: a padded batch is run as the packed batch whose steps all have every sequence,
//! so both go through one loop (`direction`). Per layer and direction, one product computes
//! the input's contribution to the gates for every packed row at once (with both biases folded
//! in where the gate is linear in them), and only the recurrent product `h·W_hhᵀ` and the gate
//! arithmetic run per step, on the rows of the sequences that have that step. The per-step
//! slices of that product are taken by halving (`split_steps`), so that backward pads each
//! slice's gradient into its parent's extent (O(L log L) elements) rather than into the whole
//! sequence's (O(L²)). While recording, `W_hh`'s gradient is one product over every step's
//! rows (`merged_grad`) rather than a small product per step and a sum of them all.

#![allow(clippy::upper_case_acronyms)]

mod base;
mod cells;
mod direction;
mod layers;
mod merged_grad;

pub use cells::{GRUCell, LSTMCell, RNNCell};
pub use layers::{GRU, LSTM, RNN};

use super::init::uniform_;
use crate::error::{bail, Result};
use crate::Tensor;

/// The nonlinearity of an Elman `RNN`/`RNNCell` (PyTorch's `nonlinearity="tanh"` or `"relu"`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RNNNonlinearity {
    /// `h' = tanh(W_ih x + b_ih + W_hh h + b_hh)` (the default).
    #[default]
    Tanh,
    /// `h' = relu(W_ih x + b_ih + W_hh h + b_hh)`.
    Relu,
}

impl RNNNonlinearity {
    /// PyTorch's spelling: `tanh` or `relu`.
    pub fn name(self) -> &'static str {
        match self {
            RNNNonlinearity::Tanh => "tanh",
            RNNNonlinearity::Relu => "relu",
        }
    }
}

/// The keyword arguments of `nn.RNN`, `nn.LSTM` and `nn.GRU` beyond `input_size` and
/// `hidden_size`; `Default` is PyTorch's defaults. Set fields with struct-update syntax
/// (`RNNOpts { num_layers: 2, ..Default::default() }`) or the chainable setters of the same
/// names (`RNNOpts::default().num_layers(2)`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RNNOpts {
    /// Number of stacked recurrent layers (1).
    pub num_layers: usize,
    /// Whether the layers have the biases `b_ih` and `b_hh` (true).
    pub bias: bool,
    /// Input and output as `(N, L, H)` instead of `(L, N, H)` (false); states keep
    /// `(D·num_layers, N, H)`.
    pub batch_first: bool,
    /// Dropout probability on the outputs of each layer but the last, in train mode (0).
    pub dropout: f64,
    /// Whether each layer also runs backwards over the sequence (false).
    pub bidirectional: bool,
    /// `RNN` only: the nonlinearity (tanh).
    pub nonlinearity: RNNNonlinearity,
    /// `LSTM` only: when non-zero, the hidden state is projected to this size by
    /// `weight_hr_l{k}` (0).
    pub proj_size: usize,
}

impl Default for RNNOpts {
    /// One layer, with biases, sequence-first, no dropout, one direction, tanh, no projection.
    fn default() -> Self {
        RNNOpts {
            num_layers: 1,
            bias: true,
            batch_first: false,
            dropout: 0.0,
            bidirectional: false,
            nonlinearity: RNNNonlinearity::Tanh,
            proj_size: 0,
        }
    }
}

impl RNNOpts {
    /// Sets [`RNNOpts::num_layers`].
    pub fn num_layers(mut self, num_layers: usize) -> Self {
        self.num_layers = num_layers;
        self
    }

    /// Sets [`RNNOpts::bias`].
    pub fn bias(mut self, bias: bool) -> Self {
        self.bias = bias;
        self
    }

    /// Sets [`RNNOpts::batch_first`].
    pub fn batch_first(mut self, batch_first: bool) -> Self {
        self.batch_first = batch_first;
        self
    }

    /// Sets [`RNNOpts::dropout`].
    pub fn dropout(mut self, dropout: f64) -> Self {
        self.dropout = dropout;
        self
    }

    /// Sets [`RNNOpts::bidirectional`].
    pub fn bidirectional(mut self, bidirectional: bool) -> Self {
        self.bidirectional = bidirectional;
        self
    }

    /// Sets [`RNNOpts::nonlinearity`].
    pub fn nonlinearity(mut self, nonlinearity: RNNNonlinearity) -> Self {
        self.nonlinearity = nonlinearity;
        self
    }

    /// Sets [`RNNOpts::proj_size`].
    pub fn proj_size(mut self, proj_size: usize) -> Self {
        self.proj_size = proj_size;
        self
    }
}

/// Which recurrence a layer or cell runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Elman RNN with this nonlinearity.
    Rnn(RNNNonlinearity),
    /// Long short-term memory.
    Lstm,
    /// Gated recurrent unit.
    Gru,
}

impl Mode {
    /// How many gates the input and hidden products compute (`gate_size / hidden_size`).
    fn gates(self) -> usize {
        match self {
            Mode::Rnn(_) => 1,
            Mode::Lstm => 4,
            Mode::Gru => 3,
        }
    }
}

/// A parameter of shape `shape` drawn from U(±1/√hidden_size), PyTorch's `reset_parameters` for
/// every recurrent parameter.
#[track_caller]
fn init_param(shape: &[usize], hidden_size: usize) -> Tensor {
    let t = Tensor::empty(shape);
    let bound = if hidden_size > 0 { 1.0 / (hidden_size as f64).sqrt() } else { 0.0 };
    uniform_(&t, -bound, bound);
    t.requires_grad_(true)
}

/// The input's contribution to the gates for all steps: `x·W_ihᵀ + b_ih`, plus `b_hh` where
/// the recurrence adds it linearly (RNN, LSTM; GRU's `b_hn` sits inside `r ∘ (…)`).
#[track_caller]
fn input_gates(mode: Mode, x: &Tensor, w_ih: &Tensor, b_ih: Option<&Tensor>, b_hh: Option<&Tensor>) -> Tensor {
    let bias = match (mode, b_ih, b_hh) {
        (Mode::Gru, b, _) => b.cloned(),
        (_, Some(a), Some(b)) => Some(a + b),
        (_, a, b) => a.or(b).cloned(),
    };
    super::functional::linear(x, w_ih, bias.as_ref())
}

/// How a step computes its recurrent product `h·W_hhᵀ`.
enum Recurrent<'a> {
    /// By an ordinary product with `W_hhᵀ`.
    Plain(Tensor),
    /// Through a merged weight gradient (`merged_grad`).
    Merged(&'a merged_grad::RecurrentGrad),
}

impl Recurrent<'_> {
    /// `h·W_hhᵀ`.
    #[track_caller]
    fn product(&self, h: &Tensor) -> Tensor {
        match self {
            Recurrent::Plain(w_hh_t) => h.matmul(w_hh_t),
            Recurrent::Merged(m) => m.product(h),
        }
    }
}

/// One recurrent step. `gi` is the input's contribution (with the biases `input_gates` folded
/// in), `recurrent` gives `h·W_hhᵀ`, and `b_hh` (GRU only) is added to it, broadcast; returns
/// `h'` and, for an LSTM, `c'`.
#[track_caller]
fn step(
    mode: Mode,
    gi: &Tensor,
    h: &Tensor,
    c: Option<&Tensor>,
    recurrent: &Recurrent,
    b_hh: Option<&Tensor>,
    w_hr_t: Option<&Tensor>,
) -> (Tensor, Option<Tensor>) {
    match mode {
        Mode::Rnn(act) => {
            let pre = gi + &recurrent.product(h);
            let h = match act {
                RNNNonlinearity::Tanh => pre.tanh(),
                RNNNonlinearity::Relu => pre.relu(),
            };
            (h, None)
        }
        Mode::Lstm => {
            let gates = gi + &recurrent.product(h);
            let g = gates.chunk(4, -1);
            let (i, f, cell, o) = (g[0].sigmoid(), g[1].sigmoid(), g[2].tanh(), g[3].sigmoid());
            let c = c.expect("an LSTM step has a cell state");
            let c = &f * c + &i * &cell;
            let h = &o * &c.tanh();
            let h = match w_hr_t {
                Some(w) => h.matmul(w),
                None => h,
            };
            (h, Some(c))
        }
        Mode::Gru => {
            let gh = recurrent.product(h);
            let gh = match b_hh {
                Some(b) => gh + b,
                None => gh,
            };
            let xi = gi.chunk(3, -1);
            let hh = gh.chunk(3, -1);
            let r = (&xi[0] + &hh[0]).sigmoid();
            let z = (&xi[1] + &hh[1]).sigmoid();
            let n = (&xi[2] + &(&r * &hh[2])).tanh();
            // (1 - z) ∘ n + z ∘ h, with one product fewer.
            let h = &n + &(&z * &(h - &n));
            (h, None)
        }
    }
}

/// Checks that `t` has the parameters' dtype and device.
#[track_caller]
fn check_like(layer: &'static str, what: &str, t: &Tensor, weight: &Tensor) -> Result<()> {
    if t.dtype() != weight.dtype() {
        bail!(layer, DType, "{what} has dtype {}, but the layer's parameters have dtype {}", t.dtype(), weight.dtype());
    }
    if t.device() != weight.device() {
        bail!(layer, Device, "{what} is on {}, but the layer's parameters are on {}", t.device(), weight.device());
    }
    Ok(())
}

/// Refuses a dropout probability outside `[0, 1]`.
#[track_caller]
fn check_dropout(layer: &'static str, p: f64) {
    if !(0.0..=1.0).contains(&p) {
        crate::error::fail(
            layer,
            crate::ErrorKind::Value,
            format!("dropout should be a number in range [0, 1] representing the probability of an element being zeroed, got {p}"),
        );
    }
}
