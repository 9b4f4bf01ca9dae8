//! Stochastic gradient descent, optionally with momentum, dampening, Nesterov momentum and
//! weight decay (`torch.optim.SGD`).

use super::optimizer::{Optim, OptimizerConfig};
use super::state::{add_scaled_, check, effective_grad, hyperparameters, lr_and_momentum, non_negative, StateTensors};
use crate::{Result, Tensor};

/// SGD's hyperparameters (`torch.optim.SGD`'s arguments and defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct SgdConfig {
    /// Learning rate (default 1e-3).
    pub lr: f64,
    /// Momentum factor (default 0).
    pub momentum: f64,
    /// Dampening for momentum (default 0).
    pub dampening: f64,
    /// L2 penalty added to the gradient (default 0).
    pub weight_decay: f64,
    /// Nesterov momentum (needs `momentum > 0` and `dampening == 0`).
    pub nesterov: bool,
    /// Maximize the objective instead of minimizing it.
    pub maximize: bool,
}

impl Default for SgdConfig {
    fn default() -> Self {
        SgdConfig { lr: 1e-3, momentum: 0.0, dampening: 0.0, weight_decay: 0.0, nesterov: false, maximize: false }
    }
}

/// SGD's per-parameter state: the momentum buffer (only with `momentum != 0`).
#[derive(Clone, Debug, Default)]
pub struct SgdState {
    /// `momentum_buffer`, created from the first gradient.
    pub momentum_buffer: Option<Tensor>,
}

/// Stochastic gradient descent (`torch.optim.SGD`).
pub type Sgd = Optim<SgdConfig>;

impl OptimizerConfig for SgdConfig {
    type State = SgdState;
    const NAME: &'static str = "SGD";

    fn validate(&self) -> Result<()> {
        non_negative(
            Self::NAME,
            &[("learning rate", self.lr), ("momentum value", self.momentum), ("weight_decay value", self.weight_decay)],
        )?;
        check(Self::NAME, !self.nesterov || (self.momentum > 0.0 && self.dampening == 0.0), || {
            format!(
                "Nesterov momentum requires a momentum and zero dampening (momentum {}, dampening {})",
                self.momentum, self.dampening
            )
        })
    }

    lr_and_momentum!(momentum: momentum);

    hyperparameters!(lr, momentum, dampening, weight_decay, nesterov, maximize);

    fn init_state(&self, _param: &Tensor) -> SgdState {
        SgdState::default()
    }

    fn update(&self, param: &Tensor, grad: &Tensor, state: &mut SgdState) {
        let mut grad = effective_grad(param, grad, self.maximize, self.weight_decay);
        if self.momentum != 0.0 {
            let buf = match &state.momentum_buffer {
                None => state.momentum_buffer.insert(grad.detach().deep_clone()),
                Some(buf) => {
                    buf.mul_(self.momentum);
                    add_scaled_(buf, &grad, 1.0 - self.dampening);
                    buf
                }
            };
            grad = if self.nesterov { grad.add(buf.mul(self.momentum)) } else { buf.clone() };
        }
        add_scaled_(param, &grad, -self.lr);
    }

    fn state_tensors(&self, state: &SgdState) -> Vec<(&'static str, Tensor)> {
        state.momentum_buffer.iter().map(|b| ("momentum_buffer", b.clone())).collect()
    }

    fn load_state(&self, saved: &mut StateTensors<'_>) -> Result<SgdState> {
        Ok(SgdState { momentum_buffer: saved.optional("momentum_buffer")? })
    }
}
