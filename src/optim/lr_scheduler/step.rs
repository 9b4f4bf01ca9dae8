//! Multiplicative decays: `StepLr` (every `step_size` epochs), `MultiStepLr` (at milestones)
//! and `ExponentialLr` (every epoch).

use super::base::{check_groups, get, get_list, Base};
use super::LrScheduler;
use crate::optim::Optimizer;
use crate::{Result, StateDict};

/// Multiplies each group's learning rate by `gamma` every `step_size` epochs
/// (`torch.optim.lr_scheduler.StepLR`).
#[derive(Clone, Debug)]
pub struct StepLr {
    base: Base,
    step_size: i64,
    gamma: f64,
}

impl StepLr {
    /// A schedule decaying `opt`'s learning rates by `gamma` every `step_size` steps.
    #[track_caller]
    pub fn new(opt: &mut dyn Optimizer, step_size: usize, gamma: f64) -> StepLr {
        assert!(step_size > 0, "StepLR: step_size must be positive");
        let mut s = StepLr { base: Base::new(Base::current_lrs(opt)), step_size: step_size as i64, gamma };
        s.advance(opt, true);
        s
    }

    #[track_caller]
    fn advance(&mut self, opt: &mut dyn Optimizer, initial: bool) {
        let (step_size, gamma) = (self.step_size, self.gamma);
        self.base.step("StepLR", opt, initial, |b, opt, _| {
            let lrs = Base::current_lrs(opt);
            if b.last_epoch == 0 || b.last_epoch % step_size != 0 {
                lrs
            } else {
                lrs.into_iter().map(|lr| lr * gamma).collect()
            }
        });
    }
}

impl LrScheduler for StepLr {
    #[track_caller]
    fn step(&mut self, opt: &mut dyn Optimizer) {
        self.advance(opt, false)
    }

    fn get_last_lr(&self) -> Vec<f64> {
        self.base.last_lr.clone()
    }

    fn state_dict(&self) -> StateDict {
        let mut sd = StateDict::new();
        self.base.save(&mut sd);
        sd.set_metadata("step_size", self.step_size.to_string());
        sd.set_metadata("gamma", format!("{:?}", self.gamma));
        sd
    }

    fn load_state_dict(&mut self, sd: &StateDict) -> Result<()> {
        let base = Base::load(sd, "StepLR")?;
        check_groups("StepLR", &base, &self.base)?;
        let (step_size, gamma) = (get(sd, "StepLR", "step_size")?, get(sd, "StepLR", "gamma")?);
        *self = StepLr { base, step_size, gamma };
        Ok(())
    }
}

/// Multiplies each group's learning rate by `gamma` at each milestone epoch; a milestone listed
/// twice multiplies by `gamma²` (`torch.optim.lr_scheduler.MultiStepLR`).
#[derive(Clone, Debug)]
pub struct MultiStepLr {
    base: Base,
    milestones: Vec<i64>,
    gamma: f64,
}

impl MultiStepLr {
    /// A schedule decaying `opt`'s learning rates by `gamma` at each of `milestones`.
    #[track_caller]
    pub fn new(opt: &mut dyn Optimizer, milestones: impl IntoIterator<Item = usize>, gamma: f64) -> MultiStepLr {
        let mut milestones: Vec<i64> = milestones.into_iter().map(|m| m as i64).collect();
        milestones.sort_unstable();
        let mut s = MultiStepLr { base: Base::new(Base::current_lrs(opt)), milestones, gamma };
        s.advance(opt, true);
        s
    }

    #[track_caller]
    fn advance(&mut self, opt: &mut dyn Optimizer, initial: bool) {
        let gamma = self.gamma;
        let milestones = &self.milestones;
        self.base.step("MultiStepLR", opt, initial, |b, opt, _| {
            let lrs = Base::current_lrs(opt);
            let count = milestones.iter().filter(|&&m| m == b.last_epoch).count();
            if count == 0 {
                lrs
            } else {
                lrs.into_iter().map(|lr| lr * gamma.powf(count as f64)).collect()
            }
        });
    }
}

impl LrScheduler for MultiStepLr {
    #[track_caller]
    fn step(&mut self, opt: &mut dyn Optimizer) {
        self.advance(opt, false)
    }

    fn get_last_lr(&self) -> Vec<f64> {
        self.base.last_lr.clone()
    }

    fn state_dict(&self) -> StateDict {
        let mut sd = StateDict::new();
        self.base.save(&mut sd);
        sd.set_metadata("milestones", self.milestones.iter().map(|m| m.to_string()).collect::<Vec<_>>().join(","));
        sd.set_metadata("gamma", format!("{:?}", self.gamma));
        sd
    }

    fn load_state_dict(&mut self, sd: &StateDict) -> Result<()> {
        let base = Base::load(sd, "MultiStepLR")?;
        check_groups("MultiStepLR", &base, &self.base)?;
        let (milestones, gamma) = (get_list(sd, "MultiStepLR", "milestones")?, get(sd, "MultiStepLR", "gamma")?);
        *self = MultiStepLr { base, milestones, gamma };
        Ok(())
    }
}

/// Multiplies each group's learning rate by `gamma` every epoch
/// (`torch.optim.lr_scheduler.ExponentialLR`).
#[derive(Clone, Debug)]
pub struct ExponentialLr {
    base: Base,
    gamma: f64,
}

impl ExponentialLr {
    /// A schedule decaying `opt`'s learning rates by `gamma` every step.
    #[track_caller]
    pub fn new(opt: &mut dyn Optimizer, gamma: f64) -> ExponentialLr {
        let mut s = ExponentialLr { base: Base::new(Base::current_lrs(opt)), gamma };
        s.advance(opt, true);
        s
    }

    #[track_caller]
    fn advance(&mut self, opt: &mut dyn Optimizer, initial: bool) {
        let gamma = self.gamma;
        self.base.step("ExponentialLR", opt, initial, |_, opt, initial| {
            let lrs = Base::current_lrs(opt);
            if initial {
                lrs
            } else {
                lrs.into_iter().map(|lr| lr * gamma).collect()
            }
        });
    }
}

impl LrScheduler for ExponentialLr {
    #[track_caller]
    fn step(&mut self, opt: &mut dyn Optimizer) {
        self.advance(opt, false)
    }

    fn get_last_lr(&self) -> Vec<f64> {
        self.base.last_lr.clone()
    }

    fn state_dict(&self) -> StateDict {
        let mut sd = StateDict::new();
        self.base.save(&mut sd);
        sd.set_metadata("gamma", format!("{:?}", self.gamma));
        sd
    }

    fn load_state_dict(&mut self, sd: &StateDict) -> Result<()> {
        let base = Base::load(sd, "ExponentialLR")?;
        check_groups("ExponentialLR", &base, &self.base)?;
        let gamma = get(sd, "ExponentialLR", "gamma")?;
        *self = ExponentialLr { base, gamma };
        Ok(())
    }
}
