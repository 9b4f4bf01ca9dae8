//! `RNNCell`, `LSTMCell` and `GRUCell`: one step of each recurrence (PyTorch's
//! `nn.RNNCell`, `nn.LSTMCell`, `nn.GRUCell`).

use super::{check_like, init_param, input_gates, step, Mode, RNNNonlinearity, Recurrent};
use crate::error::{bail, OrPanic, Result};
use crate::nn::repr::py_bool;
use crate::nn::Module;
use crate::Tensor;

/// The checked input of a cell: `(N, H_in)`, and whether it came unbatched as `(H_in)`.
struct CellInput {
    x: Tensor,
    unbatched: bool,
}

/// Checks a cell's input against `weight_ih` (its rank, feature size, dtype and device).
#[track_caller]
fn check_input(cell: &'static str, input: &Tensor, weight_ih: &Tensor) -> Result<CellInput> {
    let input_size = weight_ih.shape()[1];
    if input.dim() != 1 && input.dim() != 2 {
        bail!(
            cell,
            Shape,
            "expected input to be 1-d (H_in) or 2-d (N, H_in) with H_in = {input_size}, got shape {:?}",
            input.shape()
        );
    }
    if input.shape()[input.dim() - 1] != input_size {
        bail!(
            cell,
            Shape,
            "input of shape {:?} has {} features, expected input_size {input_size}",
            input.shape(),
            input.shape()[input.dim() - 1]
        );
    }
    check_like(cell, "the input", input, weight_ih)?;
    let unbatched = input.dim() == 1;
    Ok(CellInput { x: if unbatched { input.unsqueeze(0) } else { input.clone() }, unbatched })
}

/// Checks a state (`hx` or `cx`) of a cell, returning it batched `(N, hidden_size)`; `None`
/// gives zeros.
#[track_caller]
fn check_state(
    cell: &'static str,
    name: &str,
    state: Option<&Tensor>,
    input: &CellInput,
    hidden_size: usize,
    weight: &Tensor,
) -> Result<Tensor> {
    let n = input.x.shape()[0];
    let Some(s) = state else {
        return Tensor::try_zeros_opts([n, hidden_size], input.x.dtype(), input.x.device());
    };
    let want: Vec<usize> = if input.unbatched { vec![hidden_size] } else { vec![n, hidden_size] };
    if s.shape() != want.as_slice() {
        bail!(
            cell,
            Shape,
            "expected {name} of shape {want:?} for an input of shape {:?}, got {name} of shape {:?}",
            if input.unbatched { input.x.squeeze_dim(0).shape().to_vec() } else { input.x.shape().to_vec() },
            s.shape()
        );
    }
    check_like(cell, name, s, weight)?;
    Ok(if input.unbatched { s.unsqueeze(0) } else { s.clone() })
}

/// Undoes the unbatched input's added batch dim.
fn unbatch(t: Tensor, unbatched: bool) -> Tensor {
    if unbatched {
        t.squeeze_dim(0)
    } else {
        t
    }
}

/// `cell(…)` text: `RNNCell(10, 20, bias=False, nonlinearity=relu)`, options printed only when
/// they differ from the defaults.
fn describe(input_size: usize, hidden_size: usize, bias: bool, nonlinearity: Option<RNNNonlinearity>) -> String {
    let mut s = format!("{input_size}, {hidden_size}");
    if !bias {
        s += &format!(", bias={}", py_bool(bias));
    }
    if let Some(RNNNonlinearity::Relu) = nonlinearity {
        s += ", nonlinearity=relu";
    }
    s
}

/// Refuses a hidden size of 0, as PyTorch does.
#[track_caller]
fn check_sizes(cell: &'static str, hidden_size: usize) {
    if hidden_size == 0 {
        crate::error::fail(cell, crate::ErrorKind::Value, "hidden_size must be greater than zero");
    }
}

/// An Elman RNN cell: `h' = tanh(W_ih x + b_ih + W_hh h + b_hh)` (or relu), on `(N, H_in)` or
/// unbatched `(H_in)` input.
#[derive(crate::nn::Module)]
#[module(extra_repr = "describe")]
pub struct RNNCell {
    /// `(hidden_size, input_size)`.
    pub weight_ih: Tensor,
    /// `(hidden_size, hidden_size)`.
    pub weight_hh: Tensor,
    /// `(hidden_size)`, unless built without biases.
    pub bias_ih: Option<Tensor>,
    /// `(hidden_size)`, unless built without biases.
    pub bias_hh: Option<Tensor>,
    /// The number of input features.
    pub input_size: usize,
    /// The size of the hidden state.
    pub hidden_size: usize,
    /// tanh or relu.
    #[module(skip)]
    pub nonlinearity: RNNNonlinearity,
}

impl RNNCell {
    /// `nn.RNNCell(input_size, hidden_size)`: with biases, tanh.
    #[track_caller]
    pub fn new(input_size: usize, hidden_size: usize) -> RNNCell {
        RNNCell::with_opts(input_size, hidden_size, true, RNNNonlinearity::Tanh)
    }

    /// `nn.RNNCell(input_size, hidden_size, bias, nonlinearity)`.
    #[track_caller]
    pub fn with_opts(input_size: usize, hidden_size: usize, bias: bool, nonlinearity: RNNNonlinearity) -> RNNCell {
        check_sizes("RNNCell", hidden_size);
        let h = hidden_size;
        RNNCell {
            weight_ih: init_param(&[h, input_size], h),
            weight_hh: init_param(&[h, h], h),
            bias_ih: bias.then(|| init_param(&[h], h)),
            bias_hh: bias.then(|| init_param(&[h], h)),
            input_size,
            hidden_size,
            nonlinearity,
        }
    }

    /// One step: `h'` from `input` `(N, H_in)` (or `(H_in)`) and `hx` `(N, hidden_size)` (or
    /// `(hidden_size)`; zeros when `None`). Panics on shapes that do not fit, naming them.
    #[track_caller]
    pub fn forward_with_state(&self, input: &Tensor, hx: Option<&Tensor>) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        let out = self.try_forward_with_state(input, hx).or_panic();
        layer.record(&out);
        out
    }

    /// [`RNNCell::forward_with_state`] returning an error for a wrong rank, feature size,
    /// state shape, dtype or device.
    #[track_caller]
    pub fn try_forward_with_state(&self, input: &Tensor, hx: Option<&Tensor>) -> Result<Tensor> {
        let x = check_input("RNNCell", input, &self.weight_ih)?;
        let h = check_state("RNNCell", "hx", hx, &x, self.hidden_size, &self.weight_hh)?;
        let mode = Mode::Rnn(self.nonlinearity);
        let gi = input_gates(mode, &x.x, &self.weight_ih, self.bias_ih.as_ref(), self.bias_hh.as_ref());
        let (h, _) = step(mode, &gi, &h, None, &Recurrent::Plain(self.weight_hh.t()), None, None);
        Ok(unbatch(h, x.unbatched))
    }

    fn describe(&self) -> String {
        describe(self.input_size, self.hidden_size, self.bias_ih.is_some(), Some(self.nonlinearity))
    }
}

impl Module for RNNCell {
    /// `h'` from a zero hidden state.
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        self.forward_with_state(input, None)
    }
}

/// An LSTM cell: gates `i, f, g, o` from `W_ih x + b_ih + W_hh h + b_hh`,
/// `c' = f ∘ c + i ∘ g`, `h' = o ∘ tanh(c')`.
#[derive(crate::nn::Module)]
#[module(extra_repr = "describe")]
pub struct LSTMCell {
    /// `(4·hidden_size, input_size)`: the gates `i, f, g, o` stacked.
    pub weight_ih: Tensor,
    /// `(4·hidden_size, hidden_size)`.
    pub weight_hh: Tensor,
    /// `(4·hidden_size)`, unless built without biases.
    pub bias_ih: Option<Tensor>,
    /// `(4·hidden_size)`, unless built without biases.
    pub bias_hh: Option<Tensor>,
    /// The number of input features.
    pub input_size: usize,
    /// The size of the hidden and cell states.
    pub hidden_size: usize,
}

impl LSTMCell {
    /// `nn.LSTMCell(input_size, hidden_size)`.
    #[track_caller]
    pub fn new(input_size: usize, hidden_size: usize) -> LSTMCell {
        LSTMCell::with_bias(input_size, hidden_size, true)
    }

    /// `nn.LSTMCell(input_size, hidden_size, bias)`.
    #[track_caller]
    pub fn with_bias(input_size: usize, hidden_size: usize, bias: bool) -> LSTMCell {
        check_sizes("LSTMCell", hidden_size);
        let h = hidden_size;
        LSTMCell {
            weight_ih: init_param(&[4 * h, input_size], h),
            weight_hh: init_param(&[4 * h, h], h),
            bias_ih: bias.then(|| init_param(&[4 * h], h)),
            bias_hh: bias.then(|| init_param(&[4 * h], h)),
            input_size,
            hidden_size,
        }
    }

    /// One step: `(h', c')` from `input` `(N, H_in)` (or `(H_in)`) and the state `(h, c)`, each
    /// `(N, hidden_size)` (or `(hidden_size)`; zeros when `None`).
    #[track_caller]
    pub fn forward_with_state(&self, input: &Tensor, state: Option<(&Tensor, &Tensor)>) -> (Tensor, Tensor) {
        let layer = crate::nn::summary::enter(self);
        let out = self.try_forward_with_state(input, state).or_panic();
        layer.record(&out.0);
        out
    }

    /// [`LSTMCell::forward_with_state`] returning an error for a wrong rank, feature size,
    /// state shape, dtype or device.
    #[track_caller]
    pub fn try_forward_with_state(
        &self,
        input: &Tensor,
        state: Option<(&Tensor, &Tensor)>,
    ) -> Result<(Tensor, Tensor)> {
        let x = check_input("LSTMCell", input, &self.weight_ih)?;
        let (h, c) = match state {
            Some((h, c)) => (Some(h), Some(c)),
            None => (None, None),
        };
        let h = check_state("LSTMCell", "hx", h, &x, self.hidden_size, &self.weight_hh)?;
        let c = check_state("LSTMCell", "cx", c, &x, self.hidden_size, &self.weight_hh)?;
        let gi = input_gates(Mode::Lstm, &x.x, &self.weight_ih, self.bias_ih.as_ref(), self.bias_hh.as_ref());
        let (h, c) = step(Mode::Lstm, &gi, &h, Some(&c), &Recurrent::Plain(self.weight_hh.t()), None, None);
        let c = c.expect("an LSTM step returns a cell state");
        Ok((unbatch(h, x.unbatched), unbatch(c, x.unbatched)))
    }

    fn describe(&self) -> String {
        describe(self.input_size, self.hidden_size, self.bias_ih.is_some(), None)
    }
}

impl Module for LSTMCell {
    /// `h'` from a zero state (`c'` is dropped; use [`LSTMCell::forward_with_state`] for it).
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        self.forward_with_state(input, None).0
    }
}

/// A GRU cell: `r = σ(W_ir x + b_ir + W_hr h + b_hr)`, `z = σ(W_iz x + b_iz + W_hz h + b_hz)`,
/// `n = tanh(W_in x + b_in + r ∘ (W_hn h + b_hn))`, `h' = (1 - z) ∘ n + z ∘ h`.
#[derive(crate::nn::Module)]
#[module(extra_repr = "describe")]
pub struct GRUCell {
    /// `(3·hidden_size, input_size)`: the gates `r, z, n` stacked.
    pub weight_ih: Tensor,
    /// `(3·hidden_size, hidden_size)`.
    pub weight_hh: Tensor,
    /// `(3·hidden_size)`, unless built without biases.
    pub bias_ih: Option<Tensor>,
    /// `(3·hidden_size)`, unless built without biases.
    pub bias_hh: Option<Tensor>,
    /// The number of input features.
    pub input_size: usize,
    /// The size of the hidden state.
    pub hidden_size: usize,
}

impl GRUCell {
    /// `nn.GRUCell(input_size, hidden_size)`.
    #[track_caller]
    pub fn new(input_size: usize, hidden_size: usize) -> GRUCell {
        GRUCell::with_bias(input_size, hidden_size, true)
    }

    /// `nn.GRUCell(input_size, hidden_size, bias)`.
    #[track_caller]
    pub fn with_bias(input_size: usize, hidden_size: usize, bias: bool) -> GRUCell {
        check_sizes("GRUCell", hidden_size);
        let h = hidden_size;
        GRUCell {
            weight_ih: init_param(&[3 * h, input_size], h),
            weight_hh: init_param(&[3 * h, h], h),
            bias_ih: bias.then(|| init_param(&[3 * h], h)),
            bias_hh: bias.then(|| init_param(&[3 * h], h)),
            input_size,
            hidden_size,
        }
    }

    /// One step: `h'` from `input` `(N, H_in)` (or `(H_in)`) and `hx` `(N, hidden_size)` (or
    /// `(hidden_size)`; zeros when `None`).
    #[track_caller]
    pub fn forward_with_state(&self, input: &Tensor, hx: Option<&Tensor>) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        let out = self.try_forward_with_state(input, hx).or_panic();
        layer.record(&out);
        out
    }

    /// [`GRUCell::forward_with_state`] returning an error for a wrong rank, feature size,
    /// state shape, dtype or device.
    #[track_caller]
    pub fn try_forward_with_state(&self, input: &Tensor, hx: Option<&Tensor>) -> Result<Tensor> {
        let x = check_input("GRUCell", input, &self.weight_ih)?;
        let h = check_state("GRUCell", "hx", hx, &x, self.hidden_size, &self.weight_hh)?;
        let gi = input_gates(Mode::Gru, &x.x, &self.weight_ih, self.bias_ih.as_ref(), None);
        let (h, _) = step(Mode::Gru, &gi, &h, None, &Recurrent::Plain(self.weight_hh.t()), self.bias_hh.as_ref(), None);
        Ok(unbatch(h, x.unbatched))
    }

    fn describe(&self) -> String {
        describe(self.input_size, self.hidden_size, self.bias_ih.is_some(), None)
    }
}

impl Module for GRUCell {
    /// `h'` from a zero hidden state.
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        self.forward_with_state(input, None)
    }
}
