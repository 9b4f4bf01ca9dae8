//! [`summary`]: a torchinfo-style table of a model's layers — output shapes, parameter
//! counts, trainable or frozen — with totals and memory estimates.
//!
//! PyTorch's torchinfo learns output shapes from forward hooks; kiln's built-in layers say
//! when they run instead: each one's `forward` opens a [`Layer`] with [`enter`] and closes
//! it with [`Layer::exit`] (one thread-local read when no summary is being taken). The
//! summary runs the model once and matches each recorded call to the model's
//! [`named_modules`](super::Module::named_modules) by address and type. A module of the
//! user's own (a `Net` with a `forward` of its own) records no call: it appears as a row
//! without an output shape above the first of its layers that ran. Layers that never run
//! in `forward` do not appear, as in torchinfo; the totals count every parameter.

use super::Module;
use crate::{DType, Tensor};
use std::cell::RefCell;
use std::fmt;

/// One module in the table.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerSummary {
    /// The module's dotted name in the model (`features.0`; `""` for the model).
    pub name: String,
    /// Its type (`Linear`).
    pub type_name: String,
    /// Its depth in the module tree (0 for the model).
    pub depth: usize,
    /// Its position among the rows of its depth, from 1 (torchinfo's `depth-idx`).
    pub index: usize,
    /// Its output's shape, when it reported one (kiln's layers do; a user's module does not).
    pub output_shape: Option<Vec<usize>>,
    /// Parameters it holds itself and below (a leaf layer) or itself only (a module whose
    /// children have rows of their own).
    pub params: usize,
    /// The parameters it holds all the way down.
    pub params_below: usize,
    /// Of those, the ones that require gradients (torchinfo's `Trainable` column: all,
    /// none or partly).
    pub trainable_below: usize,
}

/// What [`summary`] returns: the rows and totals, printed as torchinfo prints them.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSummary {
    /// One row per module that ran (and per user module above one), in call order.
    pub layers: Vec<LayerSummary>,
    /// Every parameter of the model, each shared tensor once.
    pub total_params: usize,
    /// Of those, the ones that require gradients.
    pub trainable_params: usize,
    /// The input's bytes.
    pub input_bytes: usize,
    /// The bytes of the outputs of the leaf layers that hold parameters, doubled for their
    /// gradients (torchinfo's "forward/backward pass size").
    pub forward_backward_bytes: usize,
    /// The parameters' bytes.
    pub param_bytes: usize,
}

thread_local! {
    /// The calls of the summary being taken on this thread, if one is.
    static RECORDING: RefCell<Option<Vec<Call>>> = const { RefCell::new(None) };
}

/// One recorded layer call.
struct Call {
    address: usize,
    type_name: String,
    output_shape: Option<Vec<usize>>,
    /// The output's bytes; `usize::MAX` while the call is open.
    output_bytes: usize,
    /// Whether calls started inside it.
    has_inner: bool,
}

/// An open layer call ([`enter`]); [`Layer::exit`] records its output.
#[must_use = "close the call with `exit(output)`"]
pub(crate) struct Layer(Option<usize>);

/// Opens a call of `module` when a summary is being taken on this thread.
pub(crate) fn enter<M: Module + ?Sized>(module: &M) -> Layer {
    Layer(RECORDING.with(|r| {
        let mut r = r.borrow_mut();
        let calls = r.as_mut()?;
        // Calls nest, so the innermost open call is the last one still open.
        if let Some(parent) = calls.iter_mut().rev().find(|c| c.output_bytes == usize::MAX) {
            parent.has_inner = true;
        }
        calls.push(Call {
            address: module as *const M as *const () as usize,
            type_name: module.type_name(),
            output_shape: None,
            output_bytes: usize::MAX,
            has_inner: false,
        });
        Some(calls.len() - 1)
    }))
}

impl Layer {
    /// Closes the call with its `output` (returned unchanged).
    pub(crate) fn exit(self, output: Tensor) -> Tensor {
        self.record(&output);
        output
    }

    /// Closes the call with `output`, the main output of a layer that returns more (an
    /// LSTM's sequence, an attention's values).
    pub(crate) fn record(mut self, output: &Tensor) {
        if let Some(i) = self.0.take() {
            RECORDING.with(|r| {
                if let Some(call) = r.borrow_mut().as_mut().and_then(|calls| calls.get_mut(i)) {
                    call.output_shape = Some(output.shape().to_vec());
                    call.output_bytes = output.numel() * output.dtype().size_in_bytes();
                }
            });
        }
    }
}

impl Drop for Layer {
    /// A call left by a panic is closed without an output.
    fn drop(&mut self) {
        if let Some(i) = self.0 {
            RECORDING.with(|r| {
                if let Some(call) = r.borrow_mut().as_mut().and_then(|calls| calls.get_mut(i)) {
                    call.output_bytes = 0;
                }
            });
        }
    }
}

/// The summary of `model` run on a uniform random f32 input of `input_shape` (batch
/// included, as torchinfo's `input_size`), without recording gradients
/// (`torchinfo.summary(model, input_size)`); print it with `{}`.
#[track_caller]
pub fn summary<M: Module + ?Sized>(model: &M, input_shape: &[usize]) -> ModelSummary {
    summary_with_input(model, &Tensor::rand_opts(input_shape, DType::F32, crate::Device::Cpu))
}

/// The summary of `model` run on `input` (an integer input for an embedding, another dtype
/// or device), without recording gradients.
#[track_caller]
pub fn summary_with_input<M: Module + ?Sized>(model: &M, input: &Tensor) -> ModelSummary {
    /// Stops recording however the forward pass ends.
    struct Stop;
    impl Drop for Stop {
        fn drop(&mut self) {
            RECORDING.with(|r| r.borrow_mut().take());
        }
    }
    RECORDING.with(|r| *r.borrow_mut() = Some(Vec::new()));
    let stop = Stop;
    let output = {
        let _no_grad = crate::no_grad_guard();
        model.forward(input)
    };
    let calls = RECORDING.with(|r| r.borrow_mut().take()).unwrap_or_default();
    drop(stop);
    tabulate(model, input, &output, calls)
}

/// The rows and totals from the recorded `calls` of `model` on `input`.
fn tabulate<M: Module + ?Sized>(model: &M, input: &Tensor, output: &Tensor, calls: Vec<Call>) -> ModelSummary {
    let modules = model.named_modules();
    // Each module's address and type, what a call is matched by.
    let keys: Vec<(usize, String)> =
        modules.iter().map(|(_, m)| (*m as *const dyn Module as *const () as usize, m.type_name())).collect();
    let mut used = vec![false; modules.len()];
    used[0] = true;
    let mut layers = vec![row("", model.as_dyn(), Some(output.shape().to_vec()), false)];
    let mut forward_backward_bytes = 0;
    for call in &calls {
        // The first unused module at the call's address with its type (zero-sized modules
        // may share an address), else one already used (a module called twice).
        let same = |i: &usize| keys[*i].0 == call.address && keys[*i].1 == call.type_name;
        let found = (0..modules.len()).filter(same).find(|&i| !used[i]).or_else(|| (0..modules.len()).find(same));
        let Some(i) = found else { continue }; // a layer outside the model (built in forward)
        if !call.has_inner && call.output_shape.is_some() && !modules[i].1.parameters().is_empty() {
            forward_backward_bytes += 2 * call.output_bytes;
        }
        if i == 0 {
            // The model is a kiln layer itself: its row counts what it holds.
            layers[0] = row("", model.as_dyn(), call.output_shape.clone(), !call.has_inner);
            continue;
        }
        // The user's modules above it that have no row yet.
        let name = &modules[i].0;
        for (k, _) in name.match_indices('.') {
            let prefix = &name[..k];
            if let Some(j) = modules.iter().position(|(n, _)| n == prefix) {
                if !used[j] {
                    used[j] = true;
                    layers.push(row(prefix, modules[j].1, None, false));
                }
            }
        }
        used[i] = true;
        layers.push(row(name, modules[i].1, call.output_shape.clone(), !call.has_inner));
    }
    number_rows(&mut layers);
    let params = model.parameters();
    ModelSummary {
        layers,
        total_params: params.iter().map(Tensor::numel).sum(),
        trainable_params: params.iter().filter(|p| p.requires_grad()).map(Tensor::numel).sum(),
        input_bytes: input.numel() * input.dtype().size_in_bytes(),
        forward_backward_bytes,
        param_bytes: params.iter().map(|p| p.numel() * p.dtype().size_in_bytes()).sum(),
    }
}

/// The row of module `m` named `name`: the parameters it holds all the way down when `leaf`,
/// else only those it holds itself (its children have rows); trainable or not over all.
fn row(name: &str, m: &dyn Module, output_shape: Option<Vec<usize>>, leaf: bool) -> LayerSummary {
    let all = m.named_parameters();
    let own = |n: &str| leaf || !n.contains('.');
    LayerSummary {
        name: name.to_string(),
        type_name: m.type_name(),
        depth: if name.is_empty() { 0 } else { name.split('.').count() },
        index: 0,
        output_shape,
        params: all.iter().filter(|(n, _)| own(n)).map(|(_, p)| p.numel()).sum(),
        params_below: all.iter().map(|(_, p)| p.numel()).sum(),
        trainable_below: all.iter().filter(|(_, p)| p.requires_grad()).map(|(_, p)| p.numel()).sum(),
    }
}

/// Numbers the rows of each depth in order, from 1, across the whole table (torchinfo's
/// `depth-idx`).
fn number_rows(layers: &mut [LayerSummary]) {
    let mut counters: Vec<usize> = Vec::new();
    for l in layers.iter_mut() {
        if counters.len() <= l.depth {
            counters.resize(l.depth + 1, 0);
        }
        counters[l.depth] += 1;
        l.index = counters[l.depth];
    }
}

/// `n` with thousands separated by commas (`62,006`).
fn grouped(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

impl fmt::Display for ModelSummary {
    /// torchinfo's table with the columns `output_size`, `num_params` and `trainable`, then
    /// the totals and the memory estimates in MB (10⁶ bytes); torchinfo's mult-adds line is
    /// not computed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let title = |l: &LayerSummary| {
            if l.depth == 0 {
                l.type_name.clone()
            } else {
                format!("{}: {}-{}", l.type_name, l.depth, l.index)
            }
        };
        // The first column fits the longest indented title, in steps of 5 (torchinfo's rule).
        let longest = self.layers.iter().map(|l| title(l).chars().count() + 5 * l.depth + 1).max().unwrap_or(0);
        let width = 40.max(longest.div_ceil(5) * 5);
        let rule = "=".repeat(width + 75);
        let line = |f: &mut fmt::Formatter<'_>, cells: [&str; 4]| {
            let text = format!("{:<width$} {:<25} {:<25} {:<25}", cells[0], cells[1], cells[2], cells[3]);
            writeln!(f, "{}", text.trim_end())
        };
        writeln!(f, "{rule}")?;
        line(f, ["Layer (type:depth-idx)", "Output Shape", "Param #", "Trainable"])?;
        writeln!(f, "{rule}")?;
        for l in &self.layers {
            let indent = match l.depth {
                0 => String::new(),
                1 => "├─".to_string(),
                d => format!("{}└─", "│    ".repeat(d - 1)),
            };
            let shape = l.output_shape.as_ref().map_or("--".to_string(), |s| format!("{s:?}"));
            let params = if l.params == 0 { "--".to_string() } else { grouped(l.params) };
            let trainable = match l.trainable_below {
                _ if l.params_below == 0 => "--",
                t if t == l.params_below => "True",
                0 => "False",
                _ => "Partial",
            };
            line(f, [&format!("{indent}{}", title(l)), &shape, &params, trainable])?;
        }
        writeln!(f, "{rule}")?;
        writeln!(f, "Total params: {}", grouped(self.total_params))?;
        writeln!(f, "Trainable params: {}", grouped(self.trainable_params))?;
        writeln!(f, "Non-trainable params: {}", grouped(self.total_params - self.trainable_params))?;
        writeln!(f, "{rule}")?;
        let mb = |b: usize| b as f64 / 1e6;
        let total = self.input_bytes + self.forward_backward_bytes + self.param_bytes;
        writeln!(f, "Input size (MB): {:.2}", mb(self.input_bytes))?;
        writeln!(f, "Forward/backward pass size (MB): {:.2}", mb(self.forward_backward_bytes))?;
        writeln!(f, "Params size (MB): {:.2}", mb(self.param_bytes))?;
        writeln!(f, "Estimated Total Size (MB): {:.2}", mb(total))?;
        write!(f, "{rule}")
    }
}
