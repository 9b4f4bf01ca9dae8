//! What `RNN`, `LSTM` and `GRU` share (PyTorch's `RNNBase`): the parameters, the checks of
//! the input and the initial states, and the run over every layer and direction, for a padded
//! input and for a [`PackedSequence`].

use super::direction::Recurrence;
use super::{check_dropout, check_like, init_param, input_gates, Mode, RNNNonlinearity, RNNOpts};
use crate::error::{bail, Result};
use crate::nn::functional as F;
use crate::nn::repr::{py_bool, py_float};
use crate::nn::utils::rnn::{index_tensor, PackedSequence};
use crate::nn::FieldVisitorMut;
use crate::Tensor;

/// The parameters of one layer in one direction, in PyTorch's order.
pub(super) struct DirWeights {
    weight_ih: Tensor,
    weight_hh: Tensor,
    bias_ih: Option<Tensor>,
    bias_hh: Option<Tensor>,
    weight_hr: Option<Tensor>,
}

impl DirWeights {
    /// The parameters with their names (`weight_ih_l1_reverse`), in PyTorch's order.
    pub(super) fn named<'a>(&'a self, suffix: &str) -> Vec<(String, &'a Tensor)> {
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
    pub(super) fn visit_mut(&mut self, suffix: &str, visitor: &mut dyn FieldVisitorMut) {
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

/// A checked padded input: `x` is `(L, N, H_in)`, the states `(D·num_layers, N, H)`.
struct Checked {
    x: Tensor,
    h0: Option<Tensor>,
    c0: Option<Tensor>,
    unbatched: bool,
}

/// What a layer returns: the output sequence, `h_n` and (LSTM) `c_n`.
pub(super) type Outputs<O> = (O, Tensor, Option<Tensor>);

/// What `RNN`, `LSTM` and `GRU` share (PyTorch's `RNNBase`).
pub(super) struct Base {
    pub name: &'static str,
    pub mode: Mode,
    pub input_size: usize,
    pub hidden_size: usize,
    pub opts: RNNOpts,
    /// Layer-major, direction-minor: `weights[layer * D + direction]`.
    pub weights: Vec<DirWeights>,
    pub training: bool,
}

impl Base {
    /// Checks the options and draws every parameter from U(±1/√hidden_size).
    #[track_caller]
    pub(super) fn new(name: &'static str, mode: Mode, input_size: usize, hidden_size: usize, opts: RNNOpts) -> Base {
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
    pub(super) fn suffix(&self, k: usize) -> String {
        let (layer, dir) = (k / self.dirs(), k % self.dirs());
        if dir == 1 {
            format!("_l{layer}_reverse")
        } else {
            format!("_l{layer}")
        }
    }

    pub(super) fn named(&self) -> Vec<(String, &Tensor)> {
        self.weights.iter().enumerate().flat_map(|(k, w)| w.named(&self.suffix(k))).collect()
    }

    /// PyTorch's `RNNBase.extra_repr`: sizes, then the options that differ from the defaults.
    pub(super) fn describe(&self) -> String {
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

    /// The output sequence `(L, N, D·H_out)`, `h_n` and (LSTM) `c_n` for a padded input, in
    /// the input's layout (`batch_first`, unbatched).
    #[track_caller]
    pub(super) fn forward_padded(
        &self,
        input: &Tensor,
        h0: Option<&Tensor>,
        c0: Option<&Tensor>,
    ) -> Result<Outputs<Tensor>> {
        let Checked { x, h0, c0, unbatched } = self.check(input, h0, c0)?;
        let (seq, n) = (x.shape()[0], x.shape()[1]);
        // A padded batch is the packed batch whose every step has all the sequences.
        let data = x.reshape([(seq * n) as i64, self.input_size as i64]);
        let (out, h_n, c_n) = self.run(&data, &vec![n; seq], h0, c0);
        let out = out.reshape([seq as i64, n as i64, (self.dirs() * self.out_size()) as i64]);
        Ok(if unbatched {
            (out.squeeze_dim(1), h_n.squeeze_dim(1), c_n.map(|c| c.squeeze_dim(1)))
        } else if self.opts.batch_first {
            (out.transpose(0, 1), h_n, c_n)
        } else {
            (out, h_n, c_n)
        })
    }

    /// The output sequence (packed as the input), `h_n` and (LSTM) `c_n` for a packed input:
    /// the initial states are taken in the original batch's order and put in the packed order
    /// (`sorted_indices`), the final states put back (`unsorted_indices`), as PyTorch's
    /// `permute_hidden`.
    #[track_caller]
    pub(super) fn forward_packed(
        &self,
        input: &PackedSequence,
        h0: Option<&Tensor>,
        c0: Option<&Tensor>,
    ) -> Result<Outputs<PackedSequence>> {
        let name = self.name;
        let data = input.data();
        let shape = data.shape();
        if shape.len() != 2 || shape[1] != self.input_size {
            bail!(
                name,
                Shape,
                "expected packed data of shape (Σ lengths, H_in) with H_in = input_size {}, got shape {shape:?}",
                self.input_size
            );
        }
        check_like(name, "the input", data, &self.weights[0].weight_ih)?;
        let n = input.batch_size();
        let what = format!("a packed input of {n} sequences (data of shape {shape:?})");
        let (h0, c0) = self.check_states(h0, c0, n, false, &what)?;
        let sorted = |t: Tensor| match input.sorted_indices() {
            Some(order) => t.index_select(1, &index_tensor(order.to_vec(), t.device())),
            None => t,
        };
        let (out, h_n, c_n) = self.run(data, input.batch_sizes(), h0.map(sorted), c0.map(sorted));
        let unsorted = |t: Tensor| match input.unsorted_indices() {
            Some(rank) => t.index_select(1, &index_tensor(rank.to_vec(), t.device())),
            None => t,
        };
        Ok((input.with_data(out), unsorted(h_n), c_n.map(unsorted)))
    }

    /// Checks a padded input and the initial states and brings them to `(L, N, H_in)` and
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
        let (h0, c0) = self.check_states(h0, c0, x.shape()[1], unbatched, &format!("an input of shape {shape:?}"))?;
        Ok(Checked { x, h0, c0, unbatched })
    }

    /// Checks the optional initial states for a batch of `n` sequences (`input` describes the
    /// input in messages); returns them batched.
    #[track_caller]
    fn check_states(
        &self,
        h0: Option<&Tensor>,
        c0: Option<&Tensor>,
        n: usize,
        unbatched: bool,
        input: &str,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let layers = self.dirs() * self.opts.num_layers;
        let h0 = match h0 {
            Some(h) => Some(self.check_state("h0", h, layers, n, self.out_size(), unbatched, input)?),
            None => None,
        };
        let c0 = match c0 {
            Some(c) => Some(self.check_state("c0", c, layers, n, self.hidden_size, unbatched, input)?),
            None => None,
        };
        Ok((h0, c0))
    }

    /// Checks one initial state: `(layers, n, size)`, or `(layers, size)` for an unbatched
    /// input (described by `input` in the message); returns it batched.
    #[track_caller]
    fn check_state(
        &self,
        what: &str,
        state: &Tensor,
        layers: usize,
        n: usize,
        size: usize,
        unbatched: bool,
        input: &str,
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
                "expected {what} of shape {want:?} {dims} for {input}, got {what} of shape {:?}",
                state.shape()
            );
        }
        check_like(self.name, what, state, &self.weights[0].weight_hh)?;
        Ok(if unbatched { state.unsqueeze(1) } else { state.clone() })
    }

    /// Runs every layer and direction over packed rows `data` (`(Σ batch_sizes, H_in)`) from
    /// the states `h0`, `c0` (`(D·num_layers, N, H)`, zeros when `None`), all in the packed
    /// batch order: the output rows `(Σ batch_sizes, D·H_out)`, `h_n` and (LSTM) `c_n`.
    #[track_caller]
    fn run(&self, data: &Tensor, batch_sizes: &[usize], h0: Option<Tensor>, c0: Option<Tensor>) -> Outputs<Tensor> {
        let n = batch_sizes[0];
        let (dirs, mode) = (self.dirs(), self.mode);
        let (dtype, device) = (data.dtype(), data.device());
        let mut layer_input = data.clone();
        let mut h_n = Vec::with_capacity(self.weights.len());
        let mut c_n = Vec::with_capacity(self.weights.len());
        for layer in 0..self.opts.num_layers {
            let mut outputs = Vec::with_capacity(dirs);
            for dir in 0..dirs {
                let k = layer * dirs + dir;
                let w = &self.weights[k];
                let h = match &h0 {
                    Some(h0) => h0.select(0, k as i64),
                    None => Tensor::zeros_opts([n, self.out_size()], dtype, device),
                };
                let c = match (&c0, mode) {
                    (Some(c0), _) => Some(c0.select(0, k as i64)),
                    (None, Mode::Lstm) => Some(Tensor::zeros_opts([n, self.hidden_size], dtype, device)),
                    (None, _) => None,
                };
                let gates = input_gates(mode, &layer_input, &w.weight_ih, w.bias_ih.as_ref(), w.bias_hh.as_ref());
                let recurrence = Recurrence {
                    mode,
                    w_hh: &w.weight_hh,
                    b_hh: w.bias_hh.as_ref(),
                    w_hr_t: w.weight_hr.as_ref().map(Tensor::t),
                };
                let ran = recurrence.run(&gates, batch_sizes, h, c, dir == 1);
                outputs.push(ran.output);
                h_n.push(ran.h_n);
                c_n.extend(ran.c_n);
            }
            let out = if dirs == 1 { outputs.swap_remove(0) } else { Tensor::cat(&outputs, 1) };
            let between = layer + 1 < self.opts.num_layers;
            layer_input = if self.training && between && self.opts.dropout > 0.0 {
                F::dropout(&out, self.opts.dropout, true)
            } else {
                out
            };
        }
        let h_n = Tensor::stack(&h_n, 0);
        let c_n = (!c_n.is_empty()).then(|| Tensor::stack(&c_n, 0));
        (layer_input, h_n, c_n)
    }
}
