//! `ReduceLROnPlateau`: cut the learning rate when a metric stops improving.

use super::base::{get, get_choice, get_list, show_list, Base};
use crate::error::{bail, OrPanic};
use crate::optim::Optimizer;
use crate::{Result, StateDict};

/// Whether the metric should go down (a loss) or up (an accuracy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlateauMode {
    /// Lower is better (`"min"`, the default).
    Min,
    /// Higher is better (`"max"`).
    Max,
}

/// How `threshold` measures a significant improvement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThresholdMode {
    /// Relative: better than `best * (1 ∓ threshold)` (`"rel"`, the default).
    Rel,
    /// Absolute: better than `best ∓ threshold` (`"abs"`).
    Abs,
}

/// `ReduceLROnPlateau`'s settings (`torch.optim.lr_scheduler.ReduceLROnPlateau`'s arguments
/// and defaults, through `Default`).
#[derive(Clone, Debug, PartialEq)]
pub struct ReduceLROnPlateauConfig {
    /// Minimize or maximize the metric.
    pub mode: PlateauMode,
    /// New learning rate = old × `factor` (default 0.1, must be < 1).
    pub factor: f64,
    /// Epochs without improvement tolerated before reducing (default 10).
    pub patience: usize,
    /// The smallest improvement that counts (default 1e-4).
    pub threshold: f64,
    /// Relative or absolute `threshold`.
    pub threshold_mode: ThresholdMode,
    /// Epochs to wait after a reduction before counting bad epochs again (default 0).
    pub cooldown: usize,
    /// Lower bound of the learning rate: one value for every group, or one per group (default 0).
    pub min_lr: Vec<f64>,
    /// Reductions smaller than this are skipped (default 1e-8).
    pub eps: f64,
}

impl Default for ReduceLROnPlateauConfig {
    fn default() -> Self {
        ReduceLROnPlateauConfig {
            mode: PlateauMode::Min,
            factor: 0.1,
            patience: 10,
            threshold: 1e-4,
            threshold_mode: ThresholdMode::Rel,
            cooldown: 0,
            min_lr: vec![0.0],
            eps: 1e-8,
        }
    }
}

/// Reduces each group's learning rate by `factor` when the metric given to
/// [`ReduceLROnPlateau::step_with_metric`] has not improved for `patience` epochs
/// (`torch.optim.lr_scheduler.ReduceLROnPlateau`). It is not an [`super::LRScheduler`]: its step
/// needs the metric.
#[derive(Clone, Debug)]
pub struct ReduceLROnPlateau {
    config: ReduceLROnPlateauConfig,
    last_epoch: i64,
    best: f64,
    num_bad_epochs: usize,
    cooldown_counter: usize,
    last_lr: Vec<f64>,
}

impl ReduceLROnPlateau {
    /// A plateau scheduler for `opt` (its learning rates are left as they are). Panics when
    /// `factor >= 1` or `min_lr` has neither one value nor one per group.
    #[track_caller]
    pub fn new(opt: &mut dyn Optimizer, config: ReduceLROnPlateauConfig) -> ReduceLROnPlateau {
        Self::try_new(opt, config).or_panic()
    }

    /// [`ReduceLROnPlateau::new`] returning an error.
    #[track_caller]
    pub fn try_new(opt: &mut dyn Optimizer, config: ReduceLROnPlateauConfig) -> Result<ReduceLROnPlateau> {
        if config.factor >= 1.0 {
            bail!("ReduceLROnPlateau", Value, "Factor should be < 1.0 (got {})", config.factor);
        }
        let n = opt.num_param_groups();
        if config.min_lr.len() != 1 && config.min_lr.len() != n {
            bail!("ReduceLROnPlateau", Value, "expected {n} min_lrs, got {}", config.min_lr.len());
        }
        let best = Self::worst(config.mode);
        Ok(ReduceLROnPlateau {
            config,
            last_epoch: 0,
            best,
            num_bad_epochs: 0,
            cooldown_counter: 0,
            last_lr: Base::current_lrs(opt),
        })
    }

    fn worst(mode: PlateauMode) -> f64 {
        match mode {
            PlateauMode::Min => f64::INFINITY,
            PlateauMode::Max => f64::NEG_INFINITY,
        }
    }

    fn is_better(&self, a: f64, best: f64) -> bool {
        let t = self.config.threshold;
        match (self.config.mode, self.config.threshold_mode) {
            (PlateauMode::Min, ThresholdMode::Rel) => a < best * (1.0 - t),
            (PlateauMode::Min, ThresholdMode::Abs) => a < best - t,
            (PlateauMode::Max, ThresholdMode::Rel) => a > best * (t + 1.0),
            (PlateauMode::Max, ThresholdMode::Abs) => a > best + t,
        }
    }

    /// Records this epoch's `metric` and reduces the learning rates after `patience` epochs
    /// without improvement (`scheduler.step(metric)`). Panics when the optimizer's group count
    /// no longer matches a per-group `min_lr`.
    #[track_caller]
    pub fn step_with_metric(&mut self, opt: &mut dyn Optimizer, metric: f64) {
        self.try_step_with_metric(opt, metric).or_panic()
    }

    /// [`ReduceLROnPlateau::step_with_metric`] returning an error.
    #[track_caller]
    pub fn try_step_with_metric(&mut self, opt: &mut dyn Optimizer, metric: f64) -> Result<()> {
        self.last_epoch += 1;
        if self.is_better(metric, self.best) {
            self.best = metric;
            self.num_bad_epochs = 0;
        } else {
            self.num_bad_epochs += 1;
        }
        if self.cooldown_counter > 0 {
            self.cooldown_counter -= 1;
            self.num_bad_epochs = 0;
        }
        if self.num_bad_epochs > self.config.patience {
            self.reduce_lr(opt)?;
            self.cooldown_counter = self.config.cooldown;
            self.num_bad_epochs = 0;
        }
        self.last_lr = Base::current_lrs(opt);
        Ok(())
    }

    #[track_caller]
    fn reduce_lr(&mut self, opt: &mut dyn Optimizer) -> Result<()> {
        let n = opt.num_param_groups();
        let min_lrs = match self.config.min_lr.len() {
            1 => vec![self.config.min_lr[0]; n],
            len if len == n => self.config.min_lr.clone(),
            len => bail!(
                "ReduceLROnPlateau",
                Value,
                "The number of param groups in the optimizer ({n}) differs from the number of min_lrs ({len})"
            ),
        };
        for (g, min_lr) in min_lrs.into_iter().enumerate() {
            let old = opt.lr(g);
            let new = (old * self.config.factor).max(min_lr);
            if old - new > self.config.eps {
                opt.set_lr(g, new);
            }
        }
        Ok(())
    }

    /// The learning rate of each group after the last step (`scheduler.get_last_lr()`).
    pub fn get_last_lr(&self) -> Vec<f64> {
        self.last_lr.clone()
    }

    /// The best metric seen so far.
    pub fn best(&self) -> f64 {
        self.best
    }

    /// The counters (`best`, `num_bad_epochs`, `cooldown_counter`, `last_epoch`, `_last_lr`)
    /// and settings, as metadata.
    pub fn state_dict(&self) -> StateDict {
        let mut sd = StateDict::new();
        let c = &self.config;
        sd.set_metadata("mode", if c.mode == PlateauMode::Min { "min" } else { "max" });
        sd.set_metadata("threshold_mode", if c.threshold_mode == ThresholdMode::Rel { "rel" } else { "abs" });
        sd.set_metadata("factor", format!("{:?}", c.factor));
        sd.set_metadata("patience", c.patience.to_string());
        sd.set_metadata("threshold", format!("{:?}", c.threshold));
        sd.set_metadata("cooldown", c.cooldown.to_string());
        sd.set_metadata("min_lrs", show_list(&c.min_lr));
        sd.set_metadata("eps", format!("{:?}", c.eps));
        sd.set_metadata("last_epoch", self.last_epoch.to_string());
        sd.set_metadata("best", format!("{:?}", self.best));
        sd.set_metadata("num_bad_epochs", self.num_bad_epochs.to_string());
        sd.set_metadata("cooldown_counter", self.cooldown_counter.to_string());
        sd.set_metadata("_last_lr", show_list(&self.last_lr));
        sd
    }

    /// Restores what [`ReduceLROnPlateau::state_dict`] wrote; an error names a missing or
    /// unreadable entry and changes nothing.
    #[track_caller]
    pub fn load_state_dict(&mut self, sd: &StateDict) -> Result<()> {
        const NAME: &str = "ReduceLROnPlateau";
        let mode = get_choice(sd, NAME, "mode", &[("min", PlateauMode::Min), ("max", PlateauMode::Max)])?;
        let threshold_mode =
            get_choice(sd, NAME, "threshold_mode", &[("rel", ThresholdMode::Rel), ("abs", ThresholdMode::Abs)])?;
        let config = ReduceLROnPlateauConfig {
            mode,
            threshold_mode,
            factor: get(sd, NAME, "factor")?,
            patience: get(sd, NAME, "patience")?,
            threshold: get(sd, NAME, "threshold")?,
            cooldown: get(sd, NAME, "cooldown")?,
            min_lr: get_list(sd, NAME, "min_lrs")?,
            eps: get(sd, NAME, "eps")?,
        };
        *self = ReduceLROnPlateau {
            config,
            last_epoch: get(sd, NAME, "last_epoch")?,
            best: get(sd, NAME, "best")?,
            num_bad_epochs: get(sd, NAME, "num_bad_epochs")?,
            cooldown_counter: get(sd, NAME, "cooldown_counter")?,
            last_lr: get_list(sd, NAME, "_last_lr")?,
        };
        Ok(())
    }
}
