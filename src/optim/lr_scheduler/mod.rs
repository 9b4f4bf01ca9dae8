//! Learning-rate schedulers (PyTorch's `torch.optim.lr_scheduler`).
//!
//! Each scheduler computes PyTorch's recursive ("chainable") form, reading the optimizer's
//! current learning rates and writing the new ones, so its `get_last_lr()` matches PyTorch's to
//! rounding. Constructors set the initial learning rate the way PyTorch's do (one initial step).
//!
//! ```
//! use kiln::optim::lr_scheduler::{LRScheduler, StepLR};
//! use kiln::optim::{Optimizer, SGD, SGDConfig};
//! let w = kiln::Tensor::zeros(&[2]).requires_grad_(true);
//! let mut opt = SGD::new(vec![w], SGDConfig { lr: 1.0, ..Default::default() });
//! let mut sched = StepLR::new(&mut opt, 30, 0.1);
//! for _epoch in 0..60 {
//!     // train one epoch with `opt` …
//!     sched.step(&mut opt);
//! }
//! assert!((opt.lr(0) - 0.01).abs() < 1e-12);
//! ```
//!
//! A scheduler's `state_dict()` holds only metadata: `last_epoch`, `_step_count`, `base_lrs`
//! and `_last_lr` (comma-separated floats) and the scheduler's own settings, under PyTorch's
//! attribute names (`step_size`, `gamma`, `T_max`, …).

mod base;
mod cosine;
mod linear;
mod one_cycle;
mod plateau;
mod step;

pub use cosine::CosineAnnealingLR;
pub use linear::LinearLR;
pub use one_cycle::{AnnealStrategy, OneCycleLR, OneCycleLRConfig};
pub use plateau::{PlateauMode, ReduceLROnPlateau, ReduceLROnPlateauConfig, ThresholdMode};
pub use step::{ExponentialLR, MultiStepLR, StepLR};

use super::Optimizer;
use crate::{Result, StateDict};

/// A learning-rate schedule driven by the number of `step` calls (PyTorch's `LRScheduler`).
pub trait LRScheduler {
    /// Advances the schedule by one epoch (or iteration) and sets the optimizer's learning
    /// rates (`scheduler.step()`); call it after `opt.step()`.
    fn step(&mut self, opt: &mut dyn Optimizer);
    /// The learning rate of each group after the last step (`scheduler.get_last_lr()`).
    fn get_last_lr(&self) -> Vec<f64>;
    /// The scheduler's counters and settings, as metadata.
    fn state_dict(&self) -> StateDict;
    /// Restores what [`LRScheduler::state_dict`] wrote; an error names a missing or unreadable
    /// entry and changes nothing; it names the caller's line (`#[track_caller]` in every
    /// implementation).
    #[track_caller]
    fn load_state_dict(&mut self, sd: &StateDict) -> Result<()>;
}
