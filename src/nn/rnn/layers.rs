//! `RNN`, `LSTM` and `GRU`: stacked, optionally bidirectional recurrent layers over whole
//! sequences, padded or packed (PyTorch's `nn.RNN`, `nn.LSTM`, `nn.GRU`, which share
//! `RNNBase`, here [`Base`]).

use super::base::Base;
use super::{Mode, RNNOpts};
use crate::error::{OrPanic, Result};
use crate::nn::utils::rnn::PackedSequence;
use crate::nn::{FieldVisitor, FieldVisitorMut, Module, Visit};
use crate::Tensor;
use std::fmt;

/// The parts of `RNN`, `LSTM` and `GRU` that only differ in the name: the struct, its
/// accessors, the hand-written field walk (the parameter names depend on the layer count) and
/// `Display`.
macro_rules! recurrent_layer {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        pub struct $name {
            base: Base,
        }

        impl $name {
            /// The number of expected features in the input.
            pub fn input_size(&self) -> usize {
                self.base.input_size
            }

            /// The number of features in the hidden state.
            pub fn hidden_size(&self) -> usize {
                self.base.hidden_size
            }

            /// The options the layer was built with.
            pub fn opts(&self) -> &RNNOpts {
                &self.base.opts
            }

            /// PyTorch's `all_weights`: per layer and direction (layer-major, the backward
            /// direction second), the parameters in state-dict order (`weight_ih`, `weight_hh`,
            /// then `bias_ih`, `bias_hh` and `weight_hr` where present).
            pub fn all_weights(&self) -> Vec<Vec<Tensor>> {
                self.base.weights.iter().map(|w| w.named("").into_iter().map(|(_, t)| t.clone()).collect()).collect()
            }
        }

        impl Visit for $name {
            fn type_name(&self) -> String {
                stringify!($name).to_string()
            }
            fn visit_fields<'a>(&'a self, visitor: &mut dyn FieldVisitor<'a>) {
                for (name, tensor) in self.base.named() {
                    visitor.parameter(&name, tensor);
                }
            }
            fn visit_fields_mut(&mut self, visitor: &mut dyn FieldVisitorMut) {
                for k in 0..self.base.weights.len() {
                    let suffix = self.base.suffix(k);
                    self.base.weights[k].visit_mut(&suffix, visitor);
                }
            }
            fn extra_repr(&self) -> String {
                self.base.describe()
            }
            fn own_training(&self) -> Option<bool> {
                Some(self.base.training)
            }
            fn set_own_training(&mut self, mode: bool) {
                self.base.training = mode;
            }
            fn as_dyn(&self) -> &dyn Module {
                self
            }
            fn as_dyn_mut(&mut self) -> &mut dyn Module {
                self
            }
        }

        impl Module for $name {
            /// The output sequence, from a zero initial state.
            #[track_caller]
            fn forward(&self, input: &Tensor) -> Tensor {
                self.forward_with_state(input, None).0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                crate::nn::fmt_module(self, f)
            }
        }
    };
}

/// The forward methods of the layers whose state is one tensor, `h` (`RNN`, `GRU`).
macro_rules! hidden_state_forwards {
    ($name:ident) => {
        impl $name {
            /// The output sequence and the final hidden state `h_n`, from the optional initial
            /// state `h0` (zeros when `None`). Panics on shapes that do not fit, naming them.
            #[track_caller]
            pub fn forward_with_state(&self, input: &Tensor, h0: Option<&Tensor>) -> (Tensor, Tensor) {
                let layer = crate::nn::summary::enter(self);
                let out = self.try_forward_with_state(input, h0).or_panic();
                layer.record(&out.0);
                out
            }

            #[doc = concat!("[`", stringify!($name), "::forward_with_state`] returning an error for a wrong rank, feature")]
            /// size, state shape, dtype or device.
            #[track_caller]
            pub fn try_forward_with_state(&self, input: &Tensor, h0: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
                let (out, h_n, _) = self.base.forward_padded(input, h0, None)?;
                Ok((out, h_n))
            }

            /// The output for a packed batch (packed as the input) and the final hidden state
            /// `h_n`, from the optional initial state `h0` (zeros when `None`); see the module
            /// doc of [`nn::utils::rnn`](crate::nn::utils::rnn) for how to pack. Each sequence
            /// stops at its own length: `h_n` is its state after its last step (backwards,
            /// after its first, the reverse direction starting at its own end). `h0` and `h_n`
            /// are `(D·num_layers, N, H_out)` in the original batch's order. Panics on data or
            /// states that do not fit, naming them.
            #[track_caller]
            pub fn forward_packed(&self, input: &PackedSequence, h0: Option<&Tensor>) -> (PackedSequence, Tensor) {
                self.try_forward_packed(input, h0).or_panic()
            }

            #[doc = concat!("[`", stringify!($name), "::forward_packed`] returning an error for packed data of the wrong")]
            /// feature size, dtype or device, or a wrong state shape.
            #[track_caller]
            pub fn try_forward_packed(
                &self,
                input: &PackedSequence,
                h0: Option<&Tensor>,
            ) -> Result<(PackedSequence, Tensor)> {
                let (out, h_n, _) = self.base.forward_packed(input, h0, None)?;
                Ok((out, h_n))
            }
        }
    };
}

recurrent_layer!(
    /// A multi-layer Elman RNN (`nn.RNN`): per layer `h_t = tanh(W_ih x_t + b_ih + W_hh h_{t-1}
    /// + b_hh)` (or relu, [`RNNOpts::nonlinearity`]).
    ///
    /// Input `(L, N, H_in)` (`(N, L, H_in)` with `batch_first`, or unbatched `(L, H_in)`); output
    /// `(L, N, D·hidden_size)` in the input's layout; `h_0`/`h_n` `(D·num_layers, N,
    /// hidden_size)` (without `N` when unbatched). Parameters `weight_ih_l{k}`, `weight_hh_l{k}`,
    /// `bias_ih_l{k}`, `bias_hh_l{k}` (and `…_reverse`), as PyTorch names them.
    RNN
);

recurrent_layer!(
    /// A multi-layer long short-term memory (`nn.LSTM`): per layer and step, gates `i, f, g, o`
    /// from `W_ih x_t + b_ih + W_hh h_{t-1} + b_hh`, `c_t = f ∘ c_{t-1} + i ∘ g`,
    /// `h_t = o ∘ tanh(c_t)`, projected by `W_hr` when `proj_size > 0`.
    ///
    /// Input `(L, N, H_in)` (`(N, L, H_in)` with `batch_first`, or unbatched `(L, H_in)`); output
    /// `(L, N, D·H_out)` in the input's layout, `H_out = proj_size` if set, else `hidden_size`;
    /// `h_0`/`h_n` `(D·num_layers, N, H_out)`, `c_0`/`c_n` `(D·num_layers, N, hidden_size)`.
    /// Parameters `weight_ih_l{k}` `(4·hidden_size, …)`, `weight_hh_l{k}`, `bias_ih_l{k}`,
    /// `bias_hh_l{k}`, `weight_hr_l{k}` `(proj_size, hidden_size)` (and `…_reverse`).
    LSTM
);

recurrent_layer!(
    /// A multi-layer gated recurrent unit (`nn.GRU`): per layer and step,
    /// `r = σ(W_ir x + b_ir + W_hr h + b_hr)`, `z = σ(W_iz x + b_iz + W_hz h + b_hz)`,
    /// `n = tanh(W_in x + b_in + r ∘ (W_hn h + b_hn))`, `h' = (1 - z) ∘ n + z ∘ h`.
    ///
    /// Shapes as [`RNN`]'s; parameters `weight_ih_l{k}` `(3·hidden_size, …)` with the gates
    /// `r, z, n` stacked, `weight_hh_l{k}`, `bias_ih_l{k}`, `bias_hh_l{k}` (and `…_reverse`).
    GRU
);

hidden_state_forwards!(RNN);
hidden_state_forwards!(GRU);

impl RNN {
    /// `nn.RNN(input_size, hidden_size)`: one layer, tanh, with biases.
    #[track_caller]
    pub fn new(input_size: usize, hidden_size: usize) -> RNN {
        RNN::with_opts(input_size, hidden_size, RNNOpts::default())
    }

    /// `nn.RNN(input_size, hidden_size, num_layers=…, nonlinearity=…, bias=…, batch_first=…,
    /// dropout=…, bidirectional=…)`; panics on a `proj_size` (an LSTM option) or a dropout
    /// probability outside `[0, 1]`.
    #[track_caller]
    pub fn with_opts(input_size: usize, hidden_size: usize, opts: RNNOpts) -> RNN {
        RNN { base: Base::new("RNN", Mode::Rnn(opts.nonlinearity), input_size, hidden_size, opts) }
    }
}

impl GRU {
    /// `nn.GRU(input_size, hidden_size)`: one layer, with biases.
    #[track_caller]
    pub fn new(input_size: usize, hidden_size: usize) -> GRU {
        GRU::with_opts(input_size, hidden_size, RNNOpts::default())
    }

    /// `nn.GRU(input_size, hidden_size, num_layers=…, bias=…, batch_first=…, dropout=…,
    /// bidirectional=…)`; panics on a `proj_size` or `nonlinearity` (options of LSTM and RNN)
    /// or a dropout probability outside `[0, 1]`.
    #[track_caller]
    pub fn with_opts(input_size: usize, hidden_size: usize, opts: RNNOpts) -> GRU {
        GRU { base: Base::new("GRU", Mode::Gru, input_size, hidden_size, opts) }
    }
}

impl LSTM {
    /// `nn.LSTM(input_size, hidden_size)`: one layer, with biases, no projection.
    #[track_caller]
    pub fn new(input_size: usize, hidden_size: usize) -> LSTM {
        LSTM::with_opts(input_size, hidden_size, RNNOpts::default())
    }

    /// `nn.LSTM(input_size, hidden_size, num_layers=…, bias=…, batch_first=…, dropout=…,
    /// bidirectional=…, proj_size=…)`; panics on `proj_size >= hidden_size`, a `nonlinearity`
    /// (an RNN option) or a dropout probability outside `[0, 1]`.
    #[track_caller]
    pub fn with_opts(input_size: usize, hidden_size: usize, opts: RNNOpts) -> LSTM {
        LSTM { base: Base::new("LSTM", Mode::Lstm, input_size, hidden_size, opts) }
    }

    /// The output sequence and the final state `(h_n, c_n)`, from the optional initial state
    /// `(h0, c0)` (zeros when `None`). Panics on shapes that do not fit, naming them.
    #[track_caller]
    pub fn forward_with_state(&self, input: &Tensor, state: Option<(&Tensor, &Tensor)>) -> (Tensor, (Tensor, Tensor)) {
        let layer = crate::nn::summary::enter(self);
        let out = self.try_forward_with_state(input, state).or_panic();
        layer.record(&out.0);
        out
    }

    /// [`LSTM::forward_with_state`] returning an error for a wrong rank, feature size, state
    /// shape, dtype or device.
    #[track_caller]
    pub fn try_forward_with_state(
        &self,
        input: &Tensor,
        state: Option<(&Tensor, &Tensor)>,
    ) -> Result<(Tensor, (Tensor, Tensor))> {
        let (h0, c0) = state.unzip();
        let (out, h_n, c_n) = self.base.forward_padded(input, h0, c0)?;
        Ok((out, (h_n, c_n.expect("an LSTM returns a cell state"))))
    }

    /// The output for a packed batch (packed as the input) and the final state `(h_n, c_n)`,
    /// from the optional initial state `(h0, c0)` (zeros when `None`); see the module doc of
    /// [`nn::utils::rnn`](crate::nn::utils::rnn) for how to pack. Each sequence stops at its
    /// own length: `h_n`, `c_n` are its states after its last step (backwards, after its
    /// first, the reverse direction starting at its own end). The states are `(D·num_layers,
    /// N, H)` in the original batch's order. Panics on data or states that do not fit, naming
    /// them.
    #[track_caller]
    pub fn forward_packed(
        &self,
        input: &PackedSequence,
        state: Option<(&Tensor, &Tensor)>,
    ) -> (PackedSequence, (Tensor, Tensor)) {
        self.try_forward_packed(input, state).or_panic()
    }

    /// [`LSTM::forward_packed`] returning an error for packed data of the wrong feature size,
    /// dtype or device, or a wrong state shape.
    #[track_caller]
    pub fn try_forward_packed(
        &self,
        input: &PackedSequence,
        state: Option<(&Tensor, &Tensor)>,
    ) -> Result<(PackedSequence, (Tensor, Tensor))> {
        let (h0, c0) = state.unzip();
        let (out, h_n, c_n) = self.base.forward_packed(input, h0, c0)?;
        Ok((out, (h_n, c_n.expect("an LSTM returns a cell state"))))
    }
}
