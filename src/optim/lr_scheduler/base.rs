//! What every epoch-driven scheduler shares (PyTorch's `LRScheduler` base class): the base
//! learning rates, the epoch counter, the last learning rates, and metadata reading/writing.

use crate::error::{bail, Result};
use crate::optim::Optimizer;
use crate::StateDict;

/// The counters of PyTorch's `LRScheduler`.
#[derive(Clone, Debug)]
pub(super) struct Base {
    /// `base_lrs`: each group's `initial_lr`.
    pub base_lrs: Vec<f64>,
    /// `last_epoch`: -1 before the initial step.
    pub last_epoch: i64,
    /// `_step_count`.
    pub step_count: u64,
    /// `_last_lr`.
    pub last_lr: Vec<f64>,
}

impl Base {
    /// Base learning rates `initial_lrs` (PyTorch's `group.setdefault("initial_lr", group["lr"])`).
    pub fn new(initial_lrs: Vec<f64>) -> Base {
        Base { base_lrs: initial_lrs, last_epoch: -1, step_count: 0, last_lr: Vec::new() }
    }

    /// The optimizer's current learning rates.
    pub fn current_lrs(opt: &dyn Optimizer) -> Vec<f64> {
        (0..opt.num_param_groups()).map(|g| opt.lr(g)).collect()
    }

    /// One step: `last_epoch += 1`, then `get_lr(self, opt, is_initial)` gives the new rates.
    #[track_caller]
    pub fn step(&mut self, name: &'static str, opt: &mut dyn Optimizer, is_initial: bool, get_lr: impl FnOnce(&Base, &dyn Optimizer, bool) -> Vec<f64>) {
        if opt.num_param_groups() != self.base_lrs.len() {
            panic!("{}", crate::Error::new(name, crate::ErrorKind::Value, format!("the optimizer has {} parameter groups, but the scheduler was built for {}", opt.num_param_groups(), self.base_lrs.len())));
        }
        self.step_count += 1;
        self.last_epoch += 1;
        let lrs = get_lr(self, &*opt, is_initial);
        for (g, lr) in lrs.into_iter().enumerate() {
            opt.set_lr(g, lr);
        }
        self.last_lr = Base::current_lrs(opt);
    }

    /// Writes the counters into `sd`'s metadata.
    pub fn save(&self, sd: &mut StateDict) {
        sd.set_metadata("last_epoch", self.last_epoch.to_string());
        sd.set_metadata("_step_count", self.step_count.to_string());
        sd.set_metadata("base_lrs", show_list(&self.base_lrs));
        sd.set_metadata("_last_lr", show_list(&self.last_lr));
    }

    /// Reads the counters from `sd`'s metadata.
    pub fn load(sd: &StateDict, name: &str) -> Result<Base> {
        Ok(Base { last_epoch: get(sd, name, "last_epoch")?, step_count: get(sd, name, "_step_count")?, base_lrs: get_list(sd, name, "base_lrs")?, last_lr: get_list(sd, name, "_last_lr")? })
    }
}

/// Floats joined by commas, each parsing back to the same bits.
pub(super) fn show_list(v: &[f64]) -> String {
    v.iter().map(|x| format!("{x:?}")).collect::<Vec<_>>().join(",")
}

/// The metadata entry `key` parsed as a `T`; an error naming the key when it is absent or
/// unreadable.
pub(super) fn get<T: std::str::FromStr>(sd: &StateDict, name: &str, key: &str) -> Result<T> {
    let Some(text) = sd.metadata(key) else {
        bail!("load_state_dict", Value, "{name} state dict has no entry {key:?}");
    };
    match text.trim().parse() {
        Ok(v) => Ok(v),
        Err(_) => bail!("load_state_dict", Value, "{name} state dict entry {key:?} has the unreadable value {text:?}"),
    }
}

/// The metadata entry `key` parsed as comma-separated `T`s (empty text: an empty list).
pub(super) fn get_list<T: std::str::FromStr>(sd: &StateDict, name: &str, key: &str) -> Result<Vec<T>> {
    let Some(text) = sd.metadata(key) else {
        bail!("load_state_dict", Value, "{name} state dict has no entry {key:?}");
    };
    text.split(',').filter(|s| !s.trim().is_empty()).map(|s| s.trim().parse::<T>()).collect::<Result<Vec<T>, _>>().map_err(|_| crate::Error::new("load_state_dict", crate::ErrorKind::Value, format!("{name} state dict entry {key:?} has the unreadable value {text:?}")))
}

/// An error unless the loaded base has one learning rate per group of the scheduler.
pub(super) fn check_groups(name: &str, loaded: &Base, current: &Base) -> Result<()> {
    if loaded.base_lrs.len() != current.base_lrs.len() {
        bail!("load_state_dict", Value, "{name} state dict has {} base_lrs, but the scheduler has {} parameter groups", loaded.base_lrs.len(), current.base_lrs.len());
    }
    Ok(())
}
