//! `CosineAnnealingLR`: cosine annealing between each group's base rate and `eta_min`.

use super::base::{get, impl_lr_scheduler, Base, EpochSchedule, WithBase};
use crate::optim::Optimizer;
use crate::{Result, StateDict};
use std::f64::consts::PI;

/// Anneals each group's learning rate from its base value to `eta_min` over `t_max` epochs
/// along a cosine, then back up (a period of `2 * t_max`), with PyTorch's recursive formula
/// (`torch.optim.lr_scheduler.CosineAnnealingLR`).
#[derive(Clone, Debug)]
pub struct CosineAnnealingLR {
    base: Base,
    t_max: i64,
    eta_min: f64,
}

impl CosineAnnealingLR {
    /// A cosine schedule of half-period `t_max` steps down to `eta_min`.
    #[track_caller]
    pub fn new(opt: &mut dyn Optimizer, t_max: usize, eta_min: f64) -> CosineAnnealingLR {
        if t_max == 0 {
            crate::error::fail("CosineAnnealingLR", crate::ErrorKind::Value, "T_max must be positive");
        }
        CosineAnnealingLR { base: Base::new(Base::current_lrs(opt)), t_max: t_max as i64, eta_min }.started(opt)
    }
}

impl EpochSchedule for CosineAnnealingLR {
    fn new_lrs(&self, lrs: Vec<f64>, initial: bool) -> Vec<f64> {
        let (t_max, eta_min) = (self.t_max, self.eta_min);
        let e = self.base.last_epoch;
        let t = t_max as f64;
        if initial {
            lrs
        } else if (e - 1 - t_max).rem_euclid(2 * t_max) == 0 {
            lrs.iter()
                .zip(&self.base.base_lrs)
                .map(|(lr, base)| lr + (base - eta_min) * (1.0 - (PI / t).cos()) / 2.0)
                .collect()
        } else {
            let ratio = (1.0 + (PI * e as f64 / t).cos()) / (1.0 + (PI * (e - 1) as f64 / t).cos());
            lrs.iter().map(|lr| ratio * (lr - eta_min) + eta_min).collect()
        }
    }

    fn save_settings(&self, sd: &mut StateDict) {
        sd.set_metadata("T_max", self.t_max.to_string());
        sd.set_metadata("eta_min", format!("{:?}", self.eta_min));
    }

    fn load_settings(base: Base, sd: &StateDict) -> Result<Self> {
        Ok(CosineAnnealingLR { base, t_max: get(sd, Self::NAME, "T_max")?, eta_min: get(sd, Self::NAME, "eta_min")? })
    }
}

impl_lr_scheduler!(CosineAnnealingLR = "CosineAnnealingLR");
