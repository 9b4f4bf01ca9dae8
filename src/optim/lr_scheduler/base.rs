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

    /// Starts a step: checks the optimizer's group count (panicking with an error naming
    /// `name`), then `_step_count += 1` and `last_epoch += 1`.
    #[track_caller]
    pub fn begin_step(&mut self, name: &'static str, opt: &dyn Optimizer) {
        if opt.num_param_groups() != self.base_lrs.len() {
            panic!(
                "{}",
                crate::Error::new(
                    name,
                    crate::ErrorKind::Value,
                    format!(
                        "the optimizer has {} parameter groups, but the scheduler was built for {}",
                        opt.num_param_groups(),
                        self.base_lrs.len()
                    )
                )
            );
        }
        self.step_count += 1;
        self.last_epoch += 1;
    }

    /// Ends a step: sets the optimizer's learning rates to `lrs` and records them as `_last_lr`.
    pub fn finish_step(&mut self, opt: &mut dyn Optimizer, lrs: Vec<f64>) {
        for (g, lr) in lrs.into_iter().enumerate() {
            opt.set_lr(g, lr);
        }
        self.last_lr = Base::current_lrs(opt);
    }

    /// One step: `last_epoch += 1`, then `get_lr(self, opt, is_initial)` gives the new rates.
    #[track_caller]
    pub fn step(
        &mut self,
        name: &'static str,
        opt: &mut dyn Optimizer,
        is_initial: bool,
        get_lr: impl FnOnce(&Base, &dyn Optimizer, bool) -> Vec<f64>,
    ) {
        self.begin_step(name, opt);
        let lrs = get_lr(self, &*opt, is_initial);
        self.finish_step(opt, lrs);
    }

    /// Writes the counters into `sd`'s metadata.
    pub fn save(&self, sd: &mut StateDict) {
        sd.set_metadata("last_epoch", self.last_epoch.to_string());
        sd.set_metadata("_step_count", self.step_count.to_string());
        sd.set_metadata("base_lrs", show_list(&self.base_lrs));
        sd.set_metadata("_last_lr", show_list(&self.last_lr));
    }

    /// Reads the counters from `sd`'s metadata.
    #[track_caller]
    pub fn load(sd: &StateDict, name: &str) -> Result<Base> {
        Ok(Base {
            last_epoch: get(sd, name, "last_epoch")?,
            step_count: get(sd, name, "_step_count")?,
            base_lrs: get_list(sd, name, "base_lrs")?,
            last_lr: get_list(sd, name, "_last_lr")?,
        })
    }

    /// [`Base::load`], then an error unless the loaded base has one learning rate per group of
    /// `self` (the scheduler's current base).
    #[track_caller]
    pub fn load_matching(&self, sd: &StateDict, name: &str) -> Result<Base> {
        let loaded = Base::load(sd, name)?;
        check_groups(name, &loaded, self)?;
        Ok(loaded)
    }
}

/// A scheduler holding a [`Base`] in its field `base` (implemented by [`impl_lr_scheduler!`]).
pub(super) trait WithBase {
    /// PyTorch's class name, used in messages.
    const NAME: &'static str;
    /// The counters.
    fn base(&self) -> &Base;
    /// The counters, to update.
    fn base_mut(&mut self) -> &mut Base;
}

/// A scheduler made of a [`Base`] and settings, whose new learning rates depend only on the
/// optimizer's current ones, the counters and the settings (StepLR, CosineAnnealingLR, …).
/// [`impl_lr_scheduler!`] turns one into an [`LRScheduler`](super::LRScheduler).
pub(super) trait EpochSchedule: WithBase + Sized {
    /// The new learning rates from the optimizer's current ones `lrs`, once `last_epoch` has
    /// advanced; `initial` for the constructor's step (PyTorch's `_initial_step`).
    fn new_lrs(&self, lrs: Vec<f64>, initial: bool) -> Vec<f64>;
    /// Writes the settings (not the counters) into `sd`'s metadata.
    fn save_settings(&self, sd: &mut StateDict);
    /// The scheduler of counters `base` with the settings read from `sd`'s metadata.
    #[track_caller]
    fn load_settings(base: Base, sd: &StateDict) -> Result<Self>;

    /// The constructor's step: sets the initial learning rates and returns the scheduler.
    #[track_caller]
    fn started(mut self, opt: &mut dyn Optimizer) -> Self {
        self.advance(opt, true);
        self
    }

    /// One step: advances the counters and sets the optimizer's learning rates.
    #[track_caller]
    fn advance(&mut self, opt: &mut dyn Optimizer, initial: bool) {
        self.base_mut().begin_step(Self::NAME, opt);
        let lrs = self.new_lrs(Base::current_lrs(opt), initial);
        self.base_mut().finish_step(opt, lrs);
    }

    /// The counters and settings as metadata ([`LRScheduler::state_dict`](super::LRScheduler::state_dict)).
    fn save(&self) -> StateDict {
        let mut sd = StateDict::new();
        self.base().save(&mut sd);
        self.save_settings(&mut sd);
        sd
    }

    /// Restores what [`EpochSchedule::save`] wrote, changing nothing on an error
    /// ([`LRScheduler::load_state_dict`](super::LRScheduler::load_state_dict)).
    #[track_caller]
    fn load(&mut self, sd: &StateDict) -> Result<()> {
        let base = self.base().load_matching(sd, Self::NAME)?;
        *self = Self::load_settings(base, sd)?;
        Ok(())
    }
}

/// Implements [`WithBase`] (over the field `base`, with PyTorch's class name `$name`) and
/// [`LRScheduler`](super::LRScheduler) (through [`EpochSchedule`]'s default methods) for `$ty`.
macro_rules! impl_lr_scheduler {
    ($($ty:ident = $name:literal),+ $(,)?) => {
        $(
            impl $crate::optim::lr_scheduler::base::WithBase for $ty {
                const NAME: &'static str = $name;

                fn base(&self) -> &$crate::optim::lr_scheduler::base::Base {
                    &self.base
                }

                fn base_mut(&mut self) -> &mut $crate::optim::lr_scheduler::base::Base {
                    &mut self.base
                }
            }

            impl $crate::optim::lr_scheduler::LRScheduler for $ty {
                #[track_caller]
                fn step(&mut self, opt: &mut dyn $crate::optim::Optimizer) {
                    $crate::optim::lr_scheduler::base::EpochSchedule::advance(self, opt, false)
                }

                fn get_last_lr(&self) -> Vec<f64> {
                    self.base.last_lr.clone()
                }

                fn state_dict(&self) -> $crate::StateDict {
                    $crate::optim::lr_scheduler::base::EpochSchedule::save(self)
                }

                fn load_state_dict(&mut self, sd: &$crate::StateDict) -> $crate::Result<()> {
                    $crate::optim::lr_scheduler::base::EpochSchedule::load(self, sd)
                }
            }
        )+
    };
}
pub(super) use impl_lr_scheduler;

/// Floats joined by commas, each parsing back to the same bits.
pub(super) fn show_list(v: &[f64]) -> String {
    v.iter().map(|x| format!("{x:?}")).collect::<Vec<_>>().join(",")
}

/// The metadata entry `key` parsed as a `T`; an error naming the key when it is absent or
/// unreadable.
#[track_caller]
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
#[track_caller]
pub(super) fn get_list<T: std::str::FromStr>(sd: &StateDict, name: &str, key: &str) -> Result<Vec<T>> {
    let Some(text) = sd.metadata(key) else {
        bail!("load_state_dict", Value, "{name} state dict has no entry {key:?}");
    };
    match text.split(',').filter(|s| !s.trim().is_empty()).map(|s| s.trim().parse::<T>()).collect() {
        Ok(list) => Ok(list),
        Err(_) => bail!("load_state_dict", Value, "{name} state dict entry {key:?} has the unreadable value {text:?}"),
    }
}

/// An error unless the loaded base has one learning rate per group of the scheduler.
#[track_caller]
fn check_groups(name: &str, loaded: &Base, current: &Base) -> Result<()> {
    if loaded.base_lrs.len() != current.base_lrs.len() {
        bail!(
            "load_state_dict",
            Value,
            "{name} state dict has {} base_lrs, but the scheduler has {} parameter groups",
            loaded.base_lrs.len(),
            current.base_lrs.len()
        );
    }
    Ok(())
}

/// The metadata entry `key`, which must be one of the names in `choices`, as its value; an error
/// naming the key, what it holds and the names expected.
#[track_caller]
pub(super) fn get_choice<T: Copy>(sd: &StateDict, name: &str, key: &str, choices: &[(&str, T)]) -> Result<T> {
    let text = sd.metadata(key);
    match choices.iter().find(|(k, _)| Some(*k) == text) {
        Some(&(_, v)) => Ok(v),
        None => {
            let expected = choices.iter().map(|(k, _)| format!("{k:?}")).collect::<Vec<_>>().join(" or ");
            bail!("load_state_dict", Value, "{name} state dict has the {key} {text:?} (expected {expected})")
        }
    }
}
