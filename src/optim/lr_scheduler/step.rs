//! Multiplicative decays: `StepLR` (every `step_size` epochs), `MultiStepLR` (at milestones)
//! and `ExponentialLR` (every epoch).

use super::base::{get, get_list, impl_lr_scheduler, Base, EpochSchedule, WithBase};
use crate::optim::Optimizer;
use crate::{Result, StateDict};

/// Multiplies each group's learning rate by `gamma` every `step_size` epochs
/// (`torch.optim.lr_scheduler.StepLR`).
#[derive(Clone, Debug)]
pub struct StepLR {
    base: Base,
    step_size: i64,
    gamma: f64,
}

impl StepLR {
    /// A schedule decaying `opt`'s learning rates by `gamma` every `step_size` steps.
    #[track_caller]
    pub fn new(opt: &mut dyn Optimizer, step_size: usize, gamma: f64) -> StepLR {
        if step_size == 0 {
            crate::error::fail("StepLR", crate::ErrorKind::Value, "step_size must be positive");
        }
        StepLR { base: Base::new(Base::current_lrs(opt)), step_size: step_size as i64, gamma }.started(opt)
    }
}

impl EpochSchedule for StepLR {
    fn new_lrs(&self, lrs: Vec<f64>, _initial: bool) -> Vec<f64> {
        let e = self.base.last_epoch;
        if e == 0 || e % self.step_size != 0 {
            lrs
        } else {
            lrs.into_iter().map(|lr| lr * self.gamma).collect()
        }
    }

    fn save_settings(&self, sd: &mut StateDict) {
        sd.set_metadata("step_size", self.step_size.to_string());
        sd.set_metadata("gamma", format!("{:?}", self.gamma));
    }

    fn load_settings(base: Base, sd: &StateDict) -> Result<Self> {
        Ok(StepLR { base, step_size: get(sd, Self::NAME, "step_size")?, gamma: get(sd, Self::NAME, "gamma")? })
    }
}

/// Multiplies each group's learning rate by `gamma` at each milestone epoch; a milestone listed
/// twice multiplies by `gamma²` (`torch.optim.lr_scheduler.MultiStepLR`).
#[derive(Clone, Debug)]
pub struct MultiStepLR {
    base: Base,
    milestones: Vec<i64>,
    gamma: f64,
}

impl MultiStepLR {
    /// A schedule decaying `opt`'s learning rates by `gamma` at each of `milestones`.
    #[track_caller]
    pub fn new(opt: &mut dyn Optimizer, milestones: impl IntoIterator<Item = usize>, gamma: f64) -> MultiStepLR {
        let mut milestones: Vec<i64> = milestones.into_iter().map(|m| m as i64).collect();
        milestones.sort_unstable();
        MultiStepLR { base: Base::new(Base::current_lrs(opt)), milestones, gamma }.started(opt)
    }
}

impl EpochSchedule for MultiStepLR {
    fn new_lrs(&self, lrs: Vec<f64>, _initial: bool) -> Vec<f64> {
        let count = self.milestones.iter().filter(|&&m| m == self.base.last_epoch).count();
        if count == 0 {
            lrs
        } else {
            lrs.into_iter().map(|lr| lr * self.gamma.powf(count as f64)).collect()
        }
    }

    fn save_settings(&self, sd: &mut StateDict) {
        sd.set_metadata("milestones", self.milestones.iter().map(|m| m.to_string()).collect::<Vec<_>>().join(","));
        sd.set_metadata("gamma", format!("{:?}", self.gamma));
    }

    fn load_settings(base: Base, sd: &StateDict) -> Result<Self> {
        Ok(MultiStepLR {
            base,
            milestones: get_list(sd, Self::NAME, "milestones")?,
            gamma: get(sd, Self::NAME, "gamma")?,
        })
    }
}

/// Multiplies each group's learning rate by `gamma` every epoch
/// (`torch.optim.lr_scheduler.ExponentialLR`).
#[derive(Clone, Debug)]
pub struct ExponentialLR {
    base: Base,
    gamma: f64,
}

impl ExponentialLR {
    /// A schedule decaying `opt`'s learning rates by `gamma` every step.
    #[track_caller]
    pub fn new(opt: &mut dyn Optimizer, gamma: f64) -> ExponentialLR {
        ExponentialLR { base: Base::new(Base::current_lrs(opt)), gamma }.started(opt)
    }
}

impl EpochSchedule for ExponentialLR {
    fn new_lrs(&self, lrs: Vec<f64>, initial: bool) -> Vec<f64> {
        if initial {
            lrs
        } else {
            lrs.into_iter().map(|lr| lr * self.gamma).collect()
        }
    }

    fn save_settings(&self, sd: &mut StateDict) {
        sd.set_metadata("gamma", format!("{:?}", self.gamma));
    }

    fn load_settings(base: Base, sd: &StateDict) -> Result<Self> {
        Ok(ExponentialLR { base, gamma: get(sd, Self::NAME, "gamma")? })
    }
}

impl_lr_scheduler!(StepLR = "StepLR", MultiStepLR = "MultiStepLR", ExponentialLR = "ExponentialLR");
