//! `LinearLR`: a linear ramp of a multiplicative factor over the first `total_iters` epochs.

use super::base::{get, impl_lr_scheduler, Base, EpochSchedule, WithBase};
use crate::error::{bail, OrPanic};
use crate::optim::Optimizer;
use crate::{Result, StateDict};

/// Multiplies each group's base learning rate by a factor going linearly from `start_factor`
/// to `end_factor` over `total_iters` epochs, then constant (`torch.optim.lr_scheduler.LinearLR`;
/// PyTorch's defaults are 1/3, 1.0 and 5).
#[derive(Clone, Debug)]
pub struct LinearLR {
    base: Base,
    start_factor: f64,
    end_factor: f64,
    total_iters: i64,
}

impl LinearLR {
    /// A linear warm-up (or decay) of `opt`'s learning rates. Panics when `start_factor` is not
    /// in `(0, 1]` or `end_factor` not in `[0, 1]`.
    #[track_caller]
    pub fn new(opt: &mut dyn Optimizer, start_factor: f64, end_factor: f64, total_iters: usize) -> LinearLR {
        Self::try_new(opt, start_factor, end_factor, total_iters).or_panic()
    }

    /// [`LinearLR::new`] returning an error.
    #[track_caller]
    pub fn try_new(
        opt: &mut dyn Optimizer,
        start_factor: f64,
        end_factor: f64,
        total_iters: usize,
    ) -> Result<LinearLR> {
        if !(start_factor > 0.0 && start_factor <= 1.0) {
            bail!("LinearLR", Value, "Starting multiplicative factor expected to be greater than 0 and less or equal to 1 (got {start_factor})");
        }
        if !(0.0..=1.0).contains(&end_factor) {
            bail!("LinearLR", Value, "Ending multiplicative factor expected to be between 0 and 1 (got {end_factor})");
        }
        Ok(LinearLR {
            base: Base::new(Base::current_lrs(opt)),
            start_factor,
            end_factor,
            total_iters: total_iters as i64,
        }
        .started(opt))
    }
}

impl EpochSchedule for LinearLR {
    fn new_lrs(&self, lrs: Vec<f64>, initial: bool) -> Vec<f64> {
        let (start, end, total) = (self.start_factor, self.end_factor, self.total_iters);
        let e = self.base.last_epoch;
        if e == 0 {
            lrs.into_iter().map(|lr| lr * start).collect()
        } else if initial || e > total {
            lrs
        } else {
            let factor = 1.0 + (end - start) / (total as f64 * start + (e - 1) as f64 * (end - start));
            lrs.into_iter().map(|lr| lr * factor).collect()
        }
    }

    fn save_settings(&self, sd: &mut StateDict) {
        sd.set_metadata("start_factor", format!("{:?}", self.start_factor));
        sd.set_metadata("end_factor", format!("{:?}", self.end_factor));
        sd.set_metadata("total_iters", self.total_iters.to_string());
    }

    fn load_settings(base: Base, sd: &StateDict) -> Result<Self> {
        let name = Self::NAME;
        Ok(LinearLR {
            base,
            start_factor: get(sd, name, "start_factor")?,
            end_factor: get(sd, name, "end_factor")?,
            total_iters: get(sd, name, "total_iters")?,
        })
    }
}

impl_lr_scheduler!(LinearLR = "LinearLR");
