//! Adadelta (`torch.optim.Adadelta`).

use super::optimizer::{Optim, OptimizerConfig};
use super::state::{
    add_scaled_, addcmul_, check, effective_grad, hyperparameters, lr_and_momentum, non_negative, step_tensor,
    StateTensors,
};
use crate::{Result, Tensor};

/// Adadelta's hyperparameters (`torch.optim.Adadelta`'s arguments and defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct AdadeltaConfig {
    /// Scales the delta before it is applied (default 1.0).
    pub lr: f64,
    /// Decay rate of the running averages (default 0.9).
    pub rho: f64,
    /// Added inside the square roots for numerical stability (default 1e-6).
    pub eps: f64,
    /// L2 penalty added to the gradient (default 0).
    pub weight_decay: f64,
    /// Maximize the objective instead of minimizing it.
    pub maximize: bool,
}

impl Default for AdadeltaConfig {
    fn default() -> Self {
        AdadeltaConfig { lr: 1.0, rho: 0.9, eps: 1e-6, weight_decay: 0.0, maximize: false }
    }
}

/// Adadelta's per-parameter state.
#[derive(Clone, Debug)]
pub struct AdadeltaState {
    /// Number of updates so far.
    pub step: f64,
    /// Running average of squared gradients.
    pub square_avg: Tensor,
    /// Running average of squared updates.
    pub acc_delta: Tensor,
}

/// Adadelta (`torch.optim.Adadelta`).
pub type Adadelta = Optim<AdadeltaConfig>;

impl OptimizerConfig for AdadeltaConfig {
    type State = AdadeltaState;
    const NAME: &'static str = "Adadelta";

    fn validate(&self) -> Result<()> {
        non_negative(Self::NAME, &[("learning rate", self.lr)])?;
        check(Self::NAME, (0.0..=1.0).contains(&self.rho), || format!("Invalid rho value: {}", self.rho))?;
        non_negative(Self::NAME, &[("epsilon value", self.eps), ("weight_decay value", self.weight_decay)])
    }

    lr_and_momentum!();

    hyperparameters!(lr, rho, eps, weight_decay, maximize);

    fn init_state(&self, param: &Tensor) -> AdadeltaState {
        AdadeltaState { step: 0.0, square_avg: param.zeros_like(), acc_delta: param.zeros_like() }
    }

    /// PyTorch's `_single_tensor_adadelta`.
    fn update(&self, param: &Tensor, grad: &Tensor, s: &mut AdadeltaState) {
        s.step += 1.0;
        let grad = effective_grad(param, grad, self.maximize, self.weight_decay);
        s.square_avg.mul_(self.rho);
        addcmul_(&s.square_avg, &grad, &grad, 1.0 - self.rho);
        let std = s.square_avg.add(self.eps).sqrt_().clone();
        let delta = s.acc_delta.add(self.eps).sqrt_().clone();
        delta.div_(&std).mul_(&grad);
        s.acc_delta.mul_(self.rho);
        addcmul_(&s.acc_delta, &delta, &delta, 1.0 - self.rho);
        add_scaled_(param, &delta, -self.lr);
    }

    fn state_tensors(&self, s: &AdadeltaState) -> Vec<(&'static str, Tensor)> {
        vec![("step", step_tensor(s.step)), ("square_avg", s.square_avg.clone()), ("acc_delta", s.acc_delta.clone())]
    }

    fn load_state(&self, saved: &mut StateTensors<'_>) -> Result<AdadeltaState> {
        Ok(AdadeltaState {
            step: saved.step()?,
            square_avg: saved.required("square_avg")?,
            acc_delta: saved.required("acc_delta")?,
        })
    }
}
