//! The pieces the optimizers share: the per-parameter state store (keyed by parameter
//! identity), reading state tensors back from a state dict, and hyperparameter text.

use crate::error::{bail, Result};
use crate::{DType, Tensor};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Per-parameter state keyed by the parameter's identity (PyTorch's `self.state[p]`), in the
/// order parameters were first stepped. Lookups start at a cursor after the last hit, so a step
/// that visits parameters in the same order every time costs O(1) per parameter.
pub(crate) struct StateStore<S> {
    entries: Vec<(Tensor, S)>,
    cursor: AtomicUsize,
}

impl<S> Default for StateStore<S> {
    fn default() -> Self {
        StateStore { entries: Vec::new(), cursor: AtomicUsize::new(0) }
    }
}

impl<S> StateStore<S> {
    fn find(&self, p: &Tensor) -> Option<usize> {
        let n = self.entries.len();
        let start = self.cursor.load(Ordering::Relaxed).min(n);
        let at = (start..n).chain(0..start).find(|&i| self.entries[i].0.is_same(p))?;
        self.cursor.store(at + 1, Ordering::Relaxed);
        Some(at)
    }

    /// The state of `p`, if it has any.
    pub(crate) fn get(&self, p: &Tensor) -> Option<&S> {
        self.find(p).map(|i| &self.entries[i].1)
    }

    /// The state of `p`, created by `init` the first time.
    pub(crate) fn get_or_insert_with(&mut self, p: &Tensor, init: impl FnOnce() -> S) -> &mut S {
        let i = match self.find(p) {
            Some(i) => i,
            None => {
                self.entries.push((p.clone(), init()));
                self.entries.len() - 1
            }
        };
        &mut self.entries[i].1
    }
}

impl<S: Clone> Clone for StateStore<S> {
    fn clone(&self) -> Self {
        StateStore { entries: self.entries.clone(), cursor: AtomicUsize::new(self.cursor.load(Ordering::Relaxed)) }
    }
}

impl<S> StateStore<S> {
    /// A store holding `entries`.
    pub(crate) fn from_entries(entries: Vec<(Tensor, S)>) -> Self {
        StateStore { entries, cursor: AtomicUsize::new(0) }
    }
}

/// The saved state tensors of one parameter (`state.{index}.*` of a state dict), handed to
/// [`crate::optim::OptimizerConfig::load_state`]: each tensor is checked against the parameter's
/// shape, cast to its dtype and copied.
pub struct StateTensors<'a> {
    index: usize,
    param: &'a Tensor,
    entries: Vec<(String, Tensor, bool)>,
}

impl<'a> StateTensors<'a> {
    pub(crate) fn new(index: usize, param: &'a Tensor, entries: Vec<(String, Tensor)>) -> Self {
        StateTensors { index, param, entries: entries.into_iter().map(|(n, t)| (n, t, false)).collect() }
    }

    fn take_raw(&mut self, name: &str) -> Option<Tensor> {
        let e = self.entries.iter_mut().find(|e| e.0 == name)?;
        e.2 = true;
        Some(e.1.clone())
    }

    /// The state tensor `name`, if saved: shaped like the parameter, as a copy in its dtype.
    #[track_caller]
    pub fn optional(&mut self, name: &str) -> Result<Option<Tensor>> {
        let Some(t) = self.take_raw(name) else { return Ok(None) };
        if t.shape() != self.param.shape() {
            bail!(
                "load_state_dict",
                Shape,
                "state.{}.{name} has shape {:?}, but parameter {} has shape {:?}",
                self.index,
                t.shape(),
                self.index,
                self.param.shape()
            );
        }
        let _g = crate::no_grad_guard();
        Ok(Some(t.try_to_dtype(self.param.dtype())?.deep_clone()))
    }

    /// The state tensor `name`; an error naming it when it was not saved.
    #[track_caller]
    pub fn required(&mut self, name: &str) -> Result<Tensor> {
        match self.optional(name)? {
            Some(t) => Ok(t),
            None => bail!("load_state_dict", Value, "state.{}.{name} is missing from the state dict", self.index),
        }
    }

    /// The `step` count (a one-element tensor).
    #[track_caller]
    pub fn step(&mut self) -> Result<f64> {
        let Some(t) = self.take_raw("step") else {
            bail!("load_state_dict", Value, "state.{}.step is missing from the state dict", self.index)
        };
        if t.numel() != 1 {
            bail!(
                "load_state_dict",
                Shape,
                "state.{}.step must have one element, got shape {:?}",
                self.index,
                t.shape()
            );
        }
        t.try_to_dtype(DType::F64)?.try_item::<f64>()
    }

    /// An error for every saved tensor nothing asked for.
    #[track_caller]
    pub(crate) fn finish(self, optimizer: &str) -> Result<()> {
        if let Some(e) = self.entries.iter().find(|e| !e.2) {
            bail!(
                "load_state_dict",
                Value,
                "unexpected state tensor state.{}.{} for {optimizer} (with these hyperparameters)",
                self.index,
                e.0
            );
        }
        Ok(())
    }
}

/// `step` as PyTorch stores it: a 0-dim f32 tensor.
pub(crate) fn step_tensor(step: f64) -> Tensor {
    Tensor::scalar_opts(step, DType::F32)
}

/// A hyperparameter value written as metadata text and parsed back exactly.
pub trait HyperValue: Sized {
    /// The text form (floats round-trip bit for bit).
    fn show(&self) -> String;
    /// Parses the text form.
    fn parse_text(s: &str) -> Option<Self>;
}

impl HyperValue for f64 {
    fn show(&self) -> String {
        format!("{self:?}")
    }
    fn parse_text(s: &str) -> Option<Self> {
        s.trim().parse().ok()
    }
}

impl HyperValue for bool {
    fn show(&self) -> String {
        self.to_string()
    }
    fn parse_text(s: &str) -> Option<Self> {
        match s.trim() {
            "true" | "True" => Some(true),
            "false" | "False" => Some(false),
            _ => None,
        }
    }
}

impl HyperValue for Option<bool> {
    fn show(&self) -> String {
        self.map_or("None".to_string(), |b| b.show())
    }
    fn parse_text(s: &str) -> Option<Self> {
        match s.trim() {
            "None" => Some(None),
            other => bool::parse_text(other).map(Some),
        }
    }
}

impl HyperValue for (f64, f64) {
    fn show(&self) -> String {
        format!("{:?},{:?}", self.0, self.1)
    }
    fn parse_text(s: &str) -> Option<Self> {
        let (a, b) = s.split_once(',')?;
        Some((f64::parse_text(a)?, f64::parse_text(b)?))
    }
}

/// Parses `value` as the hyperparameter `key` of `optimizer`.
#[track_caller]
pub(crate) fn parse_hyper<T: HyperValue>(optimizer: &str, key: &str, value: &str) -> Result<T> {
    match T::parse_text(value) {
        Some(v) => Ok(v),
        None => {
            bail!("load_state_dict", Value, "hyperparameter {key} of {optimizer} has the unreadable value {value:?}")
        }
    }
}

/// Implements `hyperparameters` and `set_hyperparameter` of `OptimizerConfig` for the listed
/// fields (each a [`HyperValue`]).
macro_rules! hyperparameters {
    ($($field:ident),* $(,)?) => {
        fn hyperparameters(&self) -> Vec<(&'static str, String)> {
            use $crate::optim::state::HyperValue;
            vec![$((stringify!($field), self.$field.show())),*]
        }

        fn set_hyperparameter(&mut self, key: &str, value: &str) -> $crate::Result<()> {
            match key {
                $(stringify!($field) => self.$field = $crate::optim::state::parse_hyper(Self::NAME, key, value)?,)*
                _ => return Err($crate::Error::new("load_state_dict", $crate::ErrorKind::Value, format!("unknown hyperparameter {key:?} for {}", Self::NAME))),
            }
            Ok(())
        }
    };
}
pub(crate) use hyperparameters;

/// Implements `lr` and `set_lr` of `OptimizerConfig` over the field `lr`, and `momentum` and
/// `set_momentum` over the field (path) given after `momentum:`, e.g. `betas.0`.
macro_rules! lr_and_momentum {
    ($(momentum: $($m:tt).+)?) => {
        fn lr(&self) -> f64 {
            self.lr
        }

        fn set_lr(&mut self, lr: f64) {
            self.lr = lr;
        }

        $(
            fn momentum(&self) -> Option<f64> {
                Some(self.$($m).+)
            }

            fn set_momentum(&mut self, momentum: f64) {
                self.$($m).+ = momentum;
            }
        )?
    };
}
pub(crate) use lr_and_momentum;

/// An error for the first `(what, value)` whose value is not `>= 0` (NaN included): PyTorch's
/// `Invalid {what}: {value}` checks of the constructors.
#[track_caller]
pub(crate) fn non_negative(optimizer: &'static str, values: &[(&str, f64)]) -> Result<()> {
    for &(what, v) in values {
        check(optimizer, v >= 0.0, || format!("Invalid {what}: {v}"))?;
    }
    Ok(())
}

/// An error unless `ok`: PyTorch's "Invalid … value" checks of the constructors.
#[track_caller]
pub(crate) fn check(optimizer: &'static str, ok: bool, what: impl FnOnce() -> String) -> Result<()> {
    if !ok {
        return Err(crate::Error::new(optimizer, crate::ErrorKind::Value, what()));
    }
    Ok(())
}
