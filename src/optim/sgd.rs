//! Stochastic gradient descent, optionally with momentum, dampening, Nesterov momentum and
//! weight decay (`torch.optim.SGD`).

use super::optimizer::{step_compiled_in_kiln, Optim, OptimizerConfig};
use super::rule::{effective_grad, Values};
use super::state::{check, hyperparameters, lr_and_momentum, non_negative, StateTensors};
use crate::{Result, Tensor};
use smallvec::SmallVec;

/// SGD's hyperparameters (`torch.optim.SGD`'s arguments and defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct SGDConfig {
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
    /// PyTorch's multi-tensor option; see [`crate::optim`] for what kiln runs.
    pub foreach: Option<bool>,
    /// PyTorch's one-pass kernel option; see [`crate::optim`] for what kiln runs.
    pub fused: Option<bool>,
}

impl Default for SGDConfig {
    fn default() -> Self {
        SGDConfig {
            lr: 1e-3,
            momentum: 0.0,
            dampening: 0.0,
            weight_decay: 0.0,
            nesterov: false,
            maximize: false,
            foreach: None,
            fused: None,
        }
    }
}

/// SGD's per-parameter state: the momentum buffer (only with `momentum != 0`).
#[derive(Clone, Debug, Default)]
pub struct SGDState {
    /// `momentum_buffer`, created from the first gradient.
    pub momentum_buffer: Option<Tensor>,
}

/// What one SGD update needs to know beyond the hyperparameters.
#[derive(Clone, Copy, Debug)]
pub struct SGDConsts {
    /// The momentum buffer is new: it starts as the gradient.
    first: bool,
}

/// Stochastic gradient descent (`torch.optim.SGD`).
pub type SGD = Optim<SGDConfig>;

impl OptimizerConfig for SGDConfig {
    type State = SGDState;
    type Consts = SGDConsts;
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

    step_compiled_in_kiln!();

    hyperparameters!(lr, momentum, dampening, weight_decay, nesterov, maximize, foreach, fused);

    fn init_state(&self, _param: &Tensor) -> SGDState {
        SGDState::default()
    }

    fn fused_and_foreach(&self) -> (Option<bool>, Option<bool>) {
        (self.fused, self.foreach)
    }

    fn prepare(&self, param: &Tensor, state: &mut SGDState) -> (SGDConsts, SmallVec<[Tensor; 3]>) {
        if self.momentum == 0.0 {
            return (SGDConsts { first: false }, SmallVec::new());
        }
        let first = state.momentum_buffer.is_none();
        let buf = state.momentum_buffer.get_or_insert_with(|| param.zeros_like());
        (SGDConsts { first }, SmallVec::from_iter([buf.clone()]))
    }

    /// PyTorch's `_single_tensor_sgd`; `s` is `[momentum_buffer]` when there is momentum.
    #[inline(always)]
    fn rule<V: Values>(&self, k: &SGDConsts, param: &V, grad: &V, s: &mut [V]) -> V {
        let mut grad = effective_grad(param, grad, self.maximize, self.weight_decay);
        if self.momentum != 0.0 {
            // The first step's buffer is the gradient itself.
            s[0] =
                if k.first { grad.clone() } else { s[0].mul_s(self.momentum).add_scaled(&grad, 1.0 - self.dampening) };
            grad = if self.nesterov { grad.add_scaled(&s[0], self.momentum) } else { s[0].clone() };
        }
        param.add_scaled(&grad, -self.lr)
    }

    fn state_tensors(&self, state: &SGDState) -> Vec<(&'static str, Tensor)> {
        state.momentum_buffer.iter().map(|b| ("momentum_buffer", b.clone())).collect()
    }

    fn load_state(&self, saved: &mut StateTensors<'_>) -> Result<SGDState> {
        Ok(SGDState { momentum_buffer: saved.optional("momentum_buffer")? })
    }
}
