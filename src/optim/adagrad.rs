//! Adagrad (`torch.optim.Adagrad`).

use super::optimizer::{Optim, OptimizerConfig};
use super::state::{
    addcdiv_, addcmul_, effective_grad, hyperparameters, lr_and_momentum, non_negative, step_tensor, StateTensors,
};
use crate::{Result, Tensor};

/// Adagrad's hyperparameters (`torch.optim.Adagrad`'s arguments and defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct AdagradConfig {
    /// Learning rate (default 1e-2).
    pub lr: f64,
    /// Learning-rate decay: step `t` uses `lr / (1 + (t - 1) * lr_decay)` (default 0).
    pub lr_decay: f64,
    /// L2 penalty added to the gradient (default 0).
    pub weight_decay: f64,
    /// The starting value of the sum of squared gradients (default 0).
    pub initial_accumulator_value: f64,
    /// Added to the denominator for numerical stability (default 1e-10).
    pub eps: f64,
    /// Maximize the objective instead of minimizing it.
    pub maximize: bool,
}

impl Default for AdagradConfig {
    fn default() -> Self {
        AdagradConfig {
            lr: 1e-2,
            lr_decay: 0.0,
            weight_decay: 0.0,
            initial_accumulator_value: 0.0,
            eps: 1e-10,
            maximize: false,
        }
    }
}

/// Adagrad's per-parameter state (created when the parameter is added, as in PyTorch).
#[derive(Clone, Debug)]
pub struct AdagradState {
    /// Number of updates so far.
    pub step: f64,
    /// Sum of squared gradients.
    pub sum: Tensor,
}

/// Adagrad (`torch.optim.Adagrad`).
pub type Adagrad = Optim<AdagradConfig>;

impl OptimizerConfig for AdagradConfig {
    type State = AdagradState;
    const NAME: &'static str = "Adagrad";
    const EAGER_STATE: bool = true;

    fn validate(&self) -> Result<()> {
        let values = [
            ("learning rate", self.lr),
            ("lr_decay value", self.lr_decay),
            ("weight_decay value", self.weight_decay),
            ("initial_accumulator_value value", self.initial_accumulator_value),
            ("epsilon value", self.eps),
        ];
        non_negative(Self::NAME, &values)
    }

    lr_and_momentum!();

    hyperparameters!(lr, lr_decay, weight_decay, initial_accumulator_value, eps, maximize);

    fn init_state(&self, param: &Tensor) -> AdagradState {
        AdagradState { step: 0.0, sum: param.full_like(self.initial_accumulator_value) }
    }

    /// PyTorch's `_single_tensor_adagrad` (dense gradients).
    fn update(&self, param: &Tensor, grad: &Tensor, s: &mut AdagradState) {
        s.step += 1.0;
        let grad = effective_grad(param, grad, self.maximize, self.weight_decay);
        let clr = self.lr / (1.0 + (s.step - 1.0) * self.lr_decay);
        addcmul_(&s.sum, &grad, &grad, 1.0);
        let std = s.sum.sqrt();
        std.add_(self.eps);
        addcdiv_(param, &grad, &std, -clr);
    }

    fn state_tensors(&self, s: &AdagradState) -> Vec<(&'static str, Tensor)> {
        vec![("step", step_tensor(s.step)), ("sum", s.sum.clone())]
    }

    fn load_state(&self, saved: &mut StateTensors<'_>) -> Result<AdagradState> {
        Ok(AdagradState { step: saved.step()?, sum: saved.required("sum")? })
    }
}
