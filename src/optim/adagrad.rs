//! Adagrad (`torch.optim.Adagrad`).

use super::optimizer::{step_compiled_in_kiln, Optim, OptimizerConfig};
use super::rule::{effective_grad, Values};
use super::state::{hyperparameters, lr_and_momentum, non_negative, step_tensor, StateTensors};
use crate::{Result, Tensor};
use smallvec::SmallVec;

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
    /// PyTorch's multi-tensor option; see [`crate::optim`] for what kiln runs.
    pub foreach: Option<bool>,
    /// PyTorch's one-pass kernel option; see [`crate::optim`] for what kiln runs.
    pub fused: Option<bool>,
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
            foreach: None,
            fused: None,
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

/// What one Adagrad update computes from the step count.
#[derive(Clone, Copy, Debug)]
pub struct AdagradConsts {
    /// The decayed learning rate, `lr / (1 + (step - 1) * lr_decay)`.
    clr: f64,
}

/// Adagrad (`torch.optim.Adagrad`).
pub type Adagrad = Optim<AdagradConfig>;

impl OptimizerConfig for AdagradConfig {
    type State = AdagradState;
    type Consts = AdagradConsts;
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

    step_compiled_in_kiln!();

    hyperparameters!(lr, lr_decay, weight_decay, initial_accumulator_value, eps, maximize, foreach, fused);

    fn init_state(&self, param: &Tensor) -> AdagradState {
        AdagradState { step: 0.0, sum: param.full_like(self.initial_accumulator_value) }
    }

    /// PyTorch's `_single_tensor_adagrad` (dense gradients).
    fn fused_and_foreach(&self) -> (Option<bool>, Option<bool>) {
        (self.fused, self.foreach)
    }

    fn prepare(&self, _param: &Tensor, s: &mut AdagradState) -> (AdagradConsts, SmallVec<[Tensor; 3]>) {
        s.step += 1.0;
        let clr = self.lr / (1.0 + (s.step - 1.0) * self.lr_decay);
        (AdagradConsts { clr }, SmallVec::from_iter([s.sum.clone()]))
    }

    /// PyTorch's `_single_tensor_adagrad`; `s` is `[sum]`.
    #[inline(always)]
    fn rule<V: Values>(&self, k: &AdagradConsts, param: &V, grad: &V, s: &mut [V]) -> V {
        let grad = effective_grad(param, grad, self.maximize, self.weight_decay);
        s[0] = s[0].addcmul(&grad, &grad, 1.0);
        let std = s[0].sqrt().add_s(self.eps);
        param.addcdiv(&grad, &std, -k.clr)
    }

    fn state_tensors(&self, s: &AdagradState) -> Vec<(&'static str, Tensor)> {
        vec![("step", step_tensor(s.step)), ("sum", s.sum.clone())]
    }

    fn load_state(&self, saved: &mut StateTensors<'_>) -> Result<AdagradState> {
        Ok(AdagradState { step: saved.step()?, sum: saved.required("sum")? })
    }
}
