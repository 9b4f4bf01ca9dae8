//! `OneCycleLR`: the 1cycle policy (warm up to `max_lr`, anneal far below the start), with the
//! momentum cycled the opposite way.

use super::base::{get, get_choice, get_list, show_list, Base};
use super::LRScheduler;
use crate::error::{bail, OrPanic};
use crate::optim::Optimizer;
use crate::{Result, StateDict};
use std::f64::consts::PI;

/// How `OneCycleLR` moves between two values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnnealStrategy {
    /// Cosine annealing (PyTorch's `"cos"`, the default).
    Cos,
    /// Linear annealing (`"linear"`).
    Linear,
}

impl AnnealStrategy {
    fn apply(self, start: f64, end: f64, pct: f64) -> f64 {
        match self {
            AnnealStrategy::Cos => {
                let cos_out = (PI * pct).cos() + 1.0;
                end + (start - end) / 2.0 * cos_out
            }
            AnnealStrategy::Linear => (end - start) * pct + start,
        }
    }

    fn name(self) -> &'static str {
        match self {
            AnnealStrategy::Cos => "cos",
            AnnealStrategy::Linear => "linear",
        }
    }
}

/// `OneCycleLR`'s settings (`torch.optim.lr_scheduler.OneCycleLR`'s arguments). Start from
/// [`OneCycleLRConfig::new`] for PyTorch's defaults:
/// `OneCycleLRConfig { three_phase: true, ..OneCycleLRConfig::new(0.1, 1000) }`.
#[derive(Clone, Debug, PartialEq)]
pub struct OneCycleLRConfig {
    /// The peak learning rate: one value for every group, or one per group.
    pub max_lr: Vec<f64>,
    /// The number of steps in the cycle (`step` may be called this many times).
    pub total_steps: usize,
    /// The fraction of the cycle spent increasing the learning rate (default 0.3).
    pub pct_start: f64,
    /// Cosine or linear annealing (default cosine).
    pub anneal_strategy: AnnealStrategy,
    /// Cycle the momentum (SGD/RMSprop `momentum`, Adam `betas.0`) inversely (default true).
    pub cycle_momentum: bool,
    /// The lowest momentum, reached at the peak learning rate (default 0.85).
    pub base_momentum: f64,
    /// The highest momentum, at the start and end (default 0.95).
    pub max_momentum: f64,
    /// The initial learning rate is `max_lr / div_factor` (default 25).
    pub div_factor: f64,
    /// The final learning rate is `initial_lr / final_div_factor` (default 1e4).
    pub final_div_factor: f64,
    /// Three phases (up, down to the initial rate, then to the minimum) instead of two.
    pub three_phase: bool,
}

impl OneCycleLRConfig {
    /// PyTorch's defaults with peak `max_lr` over `total_steps` steps.
    pub fn new(max_lr: f64, total_steps: usize) -> Self {
        OneCycleLRConfig {
            max_lr: vec![max_lr],
            total_steps,
            pct_start: 0.3,
            anneal_strategy: AnnealStrategy::Cos,
            cycle_momentum: true,
            base_momentum: 0.85,
            max_momentum: 0.95,
            div_factor: 25.0,
            final_div_factor: 1e4,
            three_phase: false,
        }
    }
}

/// The values one group anneals between.
#[derive(Clone, Copy, Debug)]
struct GroupValues {
    initial_lr: f64,
    max_lr: f64,
    min_lr: f64,
    max_momentum: f64,
    base_momentum: f64,
}

/// Which `GroupValues` a phase starts and ends at.
#[derive(Clone, Copy, Debug)]
enum Key {
    Initial,
    Max,
    Min,
    MaxMomentum,
    BaseMomentum,
}

impl GroupValues {
    fn get(&self, k: Key) -> f64 {
        match k {
            Key::Initial => self.initial_lr,
            Key::Max => self.max_lr,
            Key::Min => self.min_lr,
            Key::MaxMomentum => self.max_momentum,
            Key::BaseMomentum => self.base_momentum,
        }
    }
}

/// One phase of the cycle: its last step and the values it goes between.
#[derive(Clone, Copy, Debug)]
struct Phase {
    end_step: f64,
    lr: (Key, Key),
    momentum: (Key, Key),
}

/// The 1cycle learning-rate policy (`torch.optim.lr_scheduler.OneCycleLR`): call `step` after
/// every batch, at most `total_steps` times.
#[derive(Clone, Debug)]
pub struct OneCycleLR {
    base: Base,
    config: OneCycleLRConfig,
    groups: Vec<GroupValues>,
}

impl OneCycleLR {
    /// A 1cycle schedule for `opt`. Sets each group's learning rate to `max_lr / div_factor`
    /// (and its momentum to `max_momentum`). Panics on invalid settings.
    #[track_caller]
    pub fn new(opt: &mut dyn Optimizer, config: OneCycleLRConfig) -> OneCycleLR {
        Self::try_new(opt, config).or_panic()
    }

    /// [`OneCycleLR::new`] returning an error: `total_steps` 0, `pct_start` outside `[0, 1]`,
    /// a `max_lr` list of the wrong length, or `cycle_momentum` with an optimizer without one.
    #[track_caller]
    pub fn try_new(opt: &mut dyn Optimizer, config: OneCycleLRConfig) -> Result<OneCycleLR> {
        let n = opt.num_param_groups();
        if config.total_steps == 0 {
            bail!("OneCycleLR", Value, "Expected positive integer total_steps, but got 0");
        }
        if !(0.0..=1.0).contains(&config.pct_start) {
            bail!("OneCycleLR", Value, "Expected float between 0 and 1 pct_start, but got {}", config.pct_start);
        }
        let max_lrs = match config.max_lr.len() {
            1 => vec![config.max_lr[0]; n],
            len if len == n => config.max_lr.clone(),
            len => bail!("OneCycleLR", Value, "expected {n} values for max_lr, got {len}"),
        };
        if config.cycle_momentum && (0..n).any(|g| opt.momentum(g).is_none()) {
            bail!("OneCycleLR", Value, "optimizer must support momentum or beta1 with `cycle_momentum` option enabled");
        }
        let groups: Vec<GroupValues> = max_lrs
            .iter()
            .map(|&max_lr| {
                let initial_lr = max_lr / config.div_factor;
                GroupValues {
                    initial_lr,
                    max_lr,
                    min_lr: initial_lr / config.final_div_factor,
                    max_momentum: config.max_momentum,
                    base_momentum: config.base_momentum,
                }
            })
            .collect();
        if config.cycle_momentum {
            for g in 0..n {
                opt.set_momentum(g, config.max_momentum);
            }
        }
        let base = Base::new(groups.iter().map(|g| g.initial_lr).collect());
        let mut s = OneCycleLR { base, config, groups };
        s.try_advance(opt, true)?;
        Ok(s)
    }

    fn phases(&self) -> Vec<Phase> {
        let total = self.config.total_steps as f64;
        let pct = self.config.pct_start;
        use Key::*;
        if self.config.three_phase {
            vec![
                Phase { end_step: pct * total - 1.0, lr: (Initial, Max), momentum: (MaxMomentum, BaseMomentum) },
                Phase { end_step: 2.0 * pct * total - 2.0, lr: (Max, Initial), momentum: (BaseMomentum, MaxMomentum) },
                Phase { end_step: total - 1.0, lr: (Initial, Min), momentum: (MaxMomentum, MaxMomentum) },
            ]
        } else {
            vec![
                Phase { end_step: pct * total - 1.0, lr: (Initial, Max), momentum: (MaxMomentum, BaseMomentum) },
                Phase { end_step: total - 1.0, lr: (Max, Min), momentum: (BaseMomentum, MaxMomentum) },
            ]
        }
    }

    /// [`LRScheduler::step`] returning an error when called more than `total_steps` times.
    #[track_caller]
    pub fn try_step(&mut self, opt: &mut dyn Optimizer) -> Result<()> {
        self.try_advance(opt, false)
    }

    #[track_caller]
    fn try_advance(&mut self, opt: &mut dyn Optimizer, initial: bool) -> Result<()> {
        let step_num = self.base.last_epoch + 1;
        if step_num > self.config.total_steps as i64 {
            bail!(
                "OneCycleLR",
                Value,
                "Tried to step {step_num} times. The specified number of total steps is {}",
                self.config.total_steps
            );
        }
        let phases = self.phases();
        let anneal = self.config.anneal_strategy;
        let mut momenta = Vec::with_capacity(self.groups.len());
        let groups = &self.groups;
        self.base.step("OneCycleLR", opt, initial, |_, _, _| {
            groups
                .iter()
                .map(|gv| {
                    let mut start_step = 0.0;
                    for (i, phase) in phases.iter().enumerate() {
                        if step_num as f64 <= phase.end_step || i == phases.len() - 1 {
                            let pct = (step_num as f64 - start_step) / (phase.end_step - start_step);
                            momenta.push(anneal.apply(gv.get(phase.momentum.0), gv.get(phase.momentum.1), pct));
                            return anneal.apply(gv.get(phase.lr.0), gv.get(phase.lr.1), pct);
                        }
                        start_step = phase.end_step;
                    }
                    unreachable!("the last phase always matches")
                })
                .collect()
        });
        if self.config.cycle_momentum {
            for (g, m) in momenta.into_iter().enumerate() {
                opt.set_momentum(g, m);
            }
        }
        Ok(())
    }
}

impl LRScheduler for OneCycleLR {
    /// Panics when called more than `total_steps` times (see [`OneCycleLR::try_step`]).
    #[track_caller]
    fn step(&mut self, opt: &mut dyn Optimizer) {
        self.try_advance(opt, false).or_panic()
    }

    fn get_last_lr(&self) -> Vec<f64> {
        self.base.last_lr.clone()
    }

    fn state_dict(&self) -> StateDict {
        let mut sd = StateDict::new();
        self.base.save(&mut sd);
        let c = &self.config;
        sd.set_metadata("total_steps", c.total_steps.to_string());
        sd.set_metadata("pct_start", format!("{:?}", c.pct_start));
        sd.set_metadata("anneal_strategy", c.anneal_strategy.name());
        sd.set_metadata("cycle_momentum", c.cycle_momentum.to_string());
        sd.set_metadata("three_phase", c.three_phase.to_string());
        let list = |f: fn(&GroupValues) -> f64| show_list(&self.groups.iter().map(f).collect::<Vec<_>>());
        sd.set_metadata("max_lr", list(|g| g.max_lr));
        sd.set_metadata("initial_lr", list(|g| g.initial_lr));
        sd.set_metadata("min_lr", list(|g| g.min_lr));
        sd.set_metadata("max_momentum", list(|g| g.max_momentum));
        sd.set_metadata("base_momentum", list(|g| g.base_momentum));
        sd
    }

    fn load_state_dict(&mut self, sd: &StateDict) -> Result<()> {
        const NAME: &str = "OneCycleLR";
        let base = self.base.load_matching(sd, NAME)?;
        let anneal_strategy = get_choice(
            sd,
            NAME,
            "anneal_strategy",
            &[("cos", AnnealStrategy::Cos), ("linear", AnnealStrategy::Linear)],
        )?;
        let mut lists: Vec<Vec<f64>> = Vec::with_capacity(5);
        for key in ["max_lr", "initial_lr", "min_lr", "max_momentum", "base_momentum"] {
            lists.push(get_list(sd, NAME, key)?);
        }
        if lists.iter().any(|l| l.len() != base.base_lrs.len()) {
            bail!(
                "load_state_dict",
                Value,
                "{NAME} state dict has per-group lists of the wrong length (expected {})",
                base.base_lrs.len()
            );
        }
        let groups = (0..base.base_lrs.len())
            .map(|g| GroupValues {
                max_lr: lists[0][g],
                initial_lr: lists[1][g],
                min_lr: lists[2][g],
                max_momentum: lists[3][g],
                base_momentum: lists[4][g],
            })
            .collect();
        let config = OneCycleLRConfig {
            max_lr: lists[0].clone(),
            total_steps: get(sd, NAME, "total_steps")?,
            pct_start: get(sd, NAME, "pct_start")?,
            anneal_strategy,
            cycle_momentum: get(sd, NAME, "cycle_momentum")?,
            base_momentum: self.config.base_momentum,
            max_momentum: self.config.max_momentum,
            div_factor: self.config.div_factor,
            final_div_factor: self.config.final_div_factor,
            three_phase: get(sd, NAME, "three_phase")?,
        };
        *self = OneCycleLR { base, config, groups };
        Ok(())
    }
}
