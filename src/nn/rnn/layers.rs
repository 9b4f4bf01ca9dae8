//! `RNN`, `LSTM` and `GRU`: stacked, optionally bidirectional recurrent layers over whole
//! sequences (PyTorch's `nn.RNN`, `nn.LSTM`, `nn.GRU`, which share `RNNBase`).

use super::{check_dropout, check_like, init_param, input_gates, step, unbind_steps, Mode, RNNNonlinearity, RNNOpts};
use crate::error::{bail, OrPanic, Result};
use crate::nn::functional as F;
use crate::nn::repr::{py_bool, py_float};
use crate::nn::{FieldVisitor, FieldVisitorMut, Module, Visit};
use crate::Tensor;
use std::fmt;

/// The parameters of one layer in one direction, in PyTorch's order.
struct DirWeights {
    weight_ih: Tensor,
    weight_hh: Tensor,
    bias_ih: Option<Tensor>,
    bias_hh: Option<Tensor>,
    weight_hr: Option<Tensor>,
}

impl DirWeights {
    /// The parameters with their names (`weight_ih_l1_reverse`), in PyTorch's order.
    fn named<'a>(&'a self, suffix: &str) -> Vec<(String, &'a Tensor)> {
        let mut out =
            vec![(format!("weight_ih{suffix}"), &self.weight_ih), (format!("weight_hh{suffix}"), &self.weight_hh)];
        if let Some(b) = &self.bias_ih {
            out.push((format!("bias_ih{suffix}"), b));
        }
        if let Some(b) = &self.bias_hh {
            out.push((format!("bias_hh{suffix}"), b));
        }
        if let Some(w) = &self.weight_hr {
            out.push((format!("weight_hr{suffix}"), w));
        }
        out
    }

    /// The mutable form of [`DirWeights::named`], handed to a visitor.
    fn visit_mut(&mut self, suffix: &str, visitor: &mut dyn FieldVisitorMut) {
        visitor.parameter(&format!("weight_ih{suffix}"), &mut self.weight_ih);
        visitor.parameter(&format!("weight_hh{suffix}"), &mut self.weight_hh);
        if let Some(b) = &mut self.bias_ih {
            visitor.parameter(&format!("bias_ih{suffix}"), b);
        }
        if let Some(b) = &mut self.bias_hh {
            visitor.parameter(&format!("bias_hh{suffix}"), b);
        }
        if let Some(w) = &mut self.weight_hr {
            visitor.parameter(&format!("weight_hr{suffix}"), w);
        }
    }
}

/// A checked input: `x` is `(L, N, H_in)`, the states `(D·num_layers, N, H)`.
struct Checked {
    x: Tensor,
    h0: Option<Tensor>,
    c0: Option<Tensor>,
    unbatched: bool,
}

/// What `RNN`, `LSTM` and `GRU` share (PyTorch's `RNNBase`).
struct Base {
    name: &'static str,
    mode: Mode,
    input_size: usize,
    hidden_size: usize,
    opts: RNNOpts,
    /// Layer-major, direction-minor: `weights[layer * D + direction]`.
    weights: Vec<DirWeights>,
    training: bool,
}

impl Base {
    /// Checks the options and draws every parameter from U(±1/√hidden_size).
    #[track_caller]
    fn new(name: &'static str, mode: Mode, input_size: usize, hidden_size: usize, opts: RNNOpts) -> Base {
        check_dropout(name, opts.dropout);
        let problem = if hidden_size == 0 {
            Some("hidden_size must be greater than zero".to_string())
        } else if opts.num_layers == 0 {
            Some("num_layers must be greater than zero".to_string())
        } else if opts.proj_size > 0 && mode != Mode::Lstm {
            Some("proj_size argument is only supported for LSTM, not RNN or GRU".to_string())
        } else if opts.proj_size > 0 && opts.proj_size >= hidden_size {
            Some(format!("proj_size ({}) has to be smaller than hidden_size ({hidden_size})", opts.proj_size))
        } else if opts.nonlinearity != RNNNonlinearity::Tanh && !matches!(mode, Mode::Rnn(_)) {
            Some(format!("nonlinearity={} is an option of RNN only", opts.nonlinearity.name()))
        } else {
            None
        };
        if let Some(message) = problem {
            crate::error::fail(name, crate::ErrorKind::Value, message);
        }
        let dirs = if opts.bidirectional { 2 } else { 1 };
        let gate = mode.gates() * hidden_size;
        let real_hidden = if opts.proj_size > 0 { opts.proj_size } else { hidden_size };
        let mut weights = Vec::with_capacity(opts.num_layers * dirs);
        for layer in 0..opts.num_layers {
            let layer_input = if layer == 0 { input_size } else { real_hidden * dirs };
            for _ in 0..dirs {
                weights.push(DirWeights {
                    weight_ih: init_param(&[gate, layer_input], hidden_size),
                    weight_hh: init_param(&[gate, real_hidden], hidden_size),
                    bias_ih: opts.bias.then(|| init_param(&[gate], hidden_size)),
                    bias_hh: opts.bias.then(|| init_param(&[gate], hidden_size)),
                    weight_hr: (opts.proj_size > 0).then(|| init_param(&[opts.proj_size, hidden_size], hidden_size)),
                });
            }
        }
        Base { name, mode, input_size, hidden_size, opts, weights, training: true }
    }

    /// `D`: 2 when bidirectional, else 1.
    fn dirs(&self) -> usize {
        if self.opts.bidirectional {
            2
        } else {
            1
        }
    }

    /// `H_out`: `proj_size` when set, else `hidden_size`.
    fn out_size(&self) -> usize {
        if self.opts.proj_size > 0 {
            self.opts.proj_size
        } else {
            self.hidden_size
        }
    }

    /// `_l{layer}` plus `_reverse` for the backward direction.
    fn suffix(&self, k: usize) -> String {
        let (layer, dir) = (k / self.dirs(), k % self.dirs());
        if dir == 1 {
            format!("_l{layer}_reverse")
        } else {
            format!("_l{layer}")
        }
    }

    fn named(&self) -> Vec<(String, &Tensor)> {
        self.weights.iter().enumerate().flat_map(|(k, w)| w.named(&self.suffix(k))).collect()
    }

    /// PyTorch's `RNNBase.extra_repr`: sizes, then the options that differ from the defaults.
    fn describe(&self) -> String {
        let o = &self.opts;
        let mut s = format!("{}, {}", self.input_size, self.hidden_size);
        if o.proj_size != 0 {
            s += &format!(", proj_size={}", o.proj_size);
        }
        if o.num_layers != 1 {
            s += &format!(", num_layers={}", o.num_layers);
        }
        if !o.bias {
            s += &format!(", bias={}", py_bool(o.bias));
        }
        if o.batch_first {
            s += &format!(", batch_first={}", py_bool(o.batch_first));
        }
        if o.dropout != 0.0 {
            s += &format!(", dropout={}", py_float(o.dropout));
        }
        if o.bidirectional {
            s += &format!(", bidirectional={}", py_bool(o.bidirectional));
        }
        s
    }

    /// Checks the input and the initial states and brings them to `(L, N, H_in)` and
    /// `(D·num_layers, N, H)`.
    #[track_caller]
    fn check(&self, input: &Tensor, h0: Option<&Tensor>, c0: Option<&Tensor>) -> Result<Checked> {
        let name = self.name;
        let shape = input.shape();
        let layout = if self.opts.batch_first { "(N, L, H_in)" } else { "(L, N, H_in)" };
        if shape.len() != 2 && shape.len() != 3 {
            bail!(
                name,
                Shape,
                "expected input to be 2-d (L, H_in) or 3-d {layout} with H_in = {}, got shape {shape:?}",
                self.input_size
            );
        }
        if shape[shape.len() - 1] != self.input_size {
            bail!(
                name,
                Shape,
                "input of shape {shape:?} {} has {} features, expected input_size {}",
                if shape.len() == 2 { "(L, H_in)" } else { layout },
                shape[shape.len() - 1],
                self.input_size
            );
        }
        check_like(name, "the input", input, &self.weights[0].weight_ih)?;
        let unbatched = shape.len() == 2;
        let x = if unbatched {
            input.unsqueeze(1)
        } else if self.opts.batch_first {
            input.transpose(0, 1)
        } else {
            input.clone()
        };
        if x.shape()[0] == 0 {
            bail!(name, Shape, "expected a sequence of length at least 1, got input of shape {shape:?}");
        }
        let n = x.shape()[1];
        let layers = self.dirs() * self.opts.num_layers;
        let h0 = match h0 {
            Some(h) => Some(self.check_state("h0", h, layers, n, self.out_size(), unbatched, shape)?),
            None => None,
        };
        let c0 = match c0 {
            Some(c) => Some(self.check_state("c0", c, layers, n, self.hidden_size, unbatched, shape)?),
            None => None,
        };
        Ok(Checked { x, h0, c0, unbatched })
    }

    /// Checks one initial state: `(layers, n, size)`, or `(layers, size)` for an unbatched
    /// input; returns it batched.
    #[track_caller]
    fn check_state(
        &self,
        what: &str,
        state: &Tensor,
        layers: usize,
        n: usize,
        size: usize,
        unbatched: bool,
        input_shape: &[usize],
    ) -> Result<Tensor> {
        let (want, dims) = if unbatched {
            (vec![layers, size], "(D·num_layers, H)")
        } else {
            (vec![layers, n, size], "(D·num_layers, N, H)")
        };
        if state.shape() != want.as_slice() {
            bail!(
                self.name,
                Shape,
                "expected {what} of shape {want:?} {dims} for an input of shape {input_shape:?}, got {what} of shape {:?}",
                state.shape()
            );
        }
        check_like(self.name, what, state, &self.weights[0].weight_hh)?;
        Ok(if unbatched { state.unsqueeze(1) } else { state.clone() })
    }

    /// Runs every layer and direction: the output `(L, N, D·H_out)`, `h_n` and (LSTM) `c_n`,
    /// brought back to the input's layout.
    #[track_caller]
    fn run(&self, input: Checked) -> (Tensor, Tensor, Option<Tensor>) {
        let Checked { x, h0, c0, unbatched } = input;
        let (seq, n) = (x.shape()[0], x.shape()[1]);
        let (dirs, mode) = (self.dirs(), self.mode);
        let (dtype, device) = (x.dtype(), x.device());
        let mut layer_input = x;
        let mut h_n = Vec::with_capacity(self.weights.len());
        let mut c_n = Vec::with_capacity(self.weights.len());
        for layer in 0..self.opts.num_layers {
            let mut outputs = Vec::with_capacity(dirs);
            for dir in 0..dirs {
                let k = layer * dirs + dir;
                let w = &self.weights[k];
                let mut h = match &h0 {
                    Some(h0) => h0.select(0, k as i64),
                    None => Tensor::zeros_opts(&[n, self.out_size()], dtype, device),
                };
                let mut c = match (&c0, mode) {
                    (Some(c0), _) => Some(c0.select(0, k as i64)),
                    (None, Mode::Lstm) => Some(Tensor::zeros_opts(&[n, self.hidden_size], dtype, device)),
                    (None, _) => None,
                };
                let gi = input_gates(mode, &layer_input, &w.weight_ih, w.bias_ih.as_ref(), w.bias_hh.as_ref());
                let steps = unbind_steps(&gi);
                let w_hh_t = w.weight_hh.t();
                let w_hr_t = w.weight_hr.as_ref().map(Tensor::t);
                let mut ys = Vec::with_capacity(seq);
                for i in 0..seq {
                    let t = if dir == 0 { i } else { seq - 1 - i };
                    let (h2, c2) = step(mode, &steps[t], &h, c.as_ref(), &w_hh_t, w.bias_hh.as_ref(), w_hr_t.as_ref());
                    h = h2;
                    c = c2;
                    ys.push(h.clone());
                }
                if dir == 1 {
                    ys.reverse();
                }
                outputs.push(Tensor::stack(&ys, 0));
                h_n.push(h);
                c_n.extend(c);
            }
            let out = if dirs == 1 { outputs.swap_remove(0) } else { Tensor::cat(&outputs, 2) };
            let between = layer + 1 < self.opts.num_layers;
            layer_input = if self.training && between && self.opts.dropout > 0.0 {
                F::dropout(&out, self.opts.dropout, true)
            } else {
                out
            };
        }
        let h_n = Tensor::stack(&h_n, 0);
        let c_n = (!c_n.is_empty()).then(|| Tensor::stack(&c_n, 0));
        if unbatched {
            (layer_input.squeeze_dim(1), h_n.squeeze_dim(1), c_n.map(|c| c.squeeze_dim(1)))
        } else if self.opts.batch_first {
            (layer_input.transpose(0, 1), h_n, c_n)
        } else {
            (layer_input, h_n, c_n)
        }
    }
}

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

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                crate::nn::fmt_module(self, f)
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

    /// The output sequence and the final hidden state `h_n`, from the optional initial state
    /// `h0` (zeros when `None`). Panics on shapes that do not fit, naming them.
    #[track_caller]
    pub fn forward_with_state(&self, input: &Tensor, h0: Option<&Tensor>) -> (Tensor, Tensor) {
        self.try_forward_with_state(input, h0).or_panic()
    }

    /// [`RNN::forward_with_state`] returning an error for a wrong rank, feature size, state
    /// shape, dtype or device.
    #[track_caller]
    pub fn try_forward_with_state(&self, input: &Tensor, h0: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
        let checked = self.base.check(input, h0, None)?;
        let (out, h_n, _) = self.base.run(checked);
        Ok((out, h_n))
    }
}

impl Module for RNN {
    /// The output sequence, from a zero initial state.
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        self.forward_with_state(input, None).0
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
        self.try_forward_with_state(input, state).or_panic()
    }

    /// [`LSTM::forward_with_state`] returning an error for a wrong rank, feature size, state
    /// shape, dtype or device.
    #[track_caller]
    pub fn try_forward_with_state(
        &self,
        input: &Tensor,
        state: Option<(&Tensor, &Tensor)>,
    ) -> Result<(Tensor, (Tensor, Tensor))> {
        let (h0, c0) = match state {
            Some((h, c)) => (Some(h), Some(c)),
            None => (None, None),
        };
        let checked = self.base.check(input, h0, c0)?;
        let (out, h_n, c_n) = self.base.run(checked);
        Ok((out, (h_n, c_n.expect("an LSTM returns a cell state"))))
    }
}

impl Module for LSTM {
    /// The output sequence, from a zero initial state.
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        self.forward_with_state(input, None).0
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

    /// The output sequence and the final hidden state `h_n`, from the optional initial state
    /// `h0` (zeros when `None`). Panics on shapes that do not fit, naming them.
    #[track_caller]
    pub fn forward_with_state(&self, input: &Tensor, h0: Option<&Tensor>) -> (Tensor, Tensor) {
        self.try_forward_with_state(input, h0).or_panic()
    }

    /// [`GRU::forward_with_state`] returning an error for a wrong rank, feature size, state
    /// shape, dtype or device.
    #[track_caller]
    pub fn try_forward_with_state(&self, input: &Tensor, h0: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
        let checked = self.base.check(input, h0, None)?;
        let (out, h_n, _) = self.base.run(checked);
        Ok((out, h_n))
    }
}

impl Module for GRU {
    /// The output sequence, from a zero initial state.
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        self.forward_with_state(input, None).0
    }
}
