//! Adadelta (`torch.optim.Adadelta`).

use super::optimizer::{step_compiled_in_kiln, Optim, OptimizerConfig};
use super::rule::{effective_grad, Values};
use super::state::{check, hyperparameters, lr_and_momentum, non_negative, step_tensor, StateTensors};
use crate::{Result, Tensor};
use smallvec::SmallVec;

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
    /// PyTorch's multi-tensor option; see [`crate::optim`] for what kiln runs.
    pub foreach: Option<bool>,
    /// PyTorch's one-pass kernel option; see [`crate::optim`] for what kiln runs.
    pub fused: Option<bool>,
}

impl Default for AdadeltaConfig {
    fn default() -> Self {
        AdadeltaConfig { lr: 1.0, rho: 0.9, eps: 1e-6, weight_decay: 0.0, maximize: false, foreach: None, fused: None }
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

/// What one Adadelta update needs beyond the hyperparameters: nothing (its step count only counts).
#[derive(Clone, Copy, Debug)]
pub struct AdadeltaConsts {}

/// Adadelta (`torch.optim.Adadelta`).
pub type Adadelta = Optim<AdadeltaConfig>;

impl OptimizerConfig for AdadeltaConfig {
    type State = AdadeltaState;
    type Consts = AdadeltaConsts;
    const NAME: &'static str = "Adadelta";

    fn validate(&self) -> Result<()> {
        non_negative(Self::NAME, &[("learning rate", self.lr)])?;
        check(Self::NAME, (0.0..=1.0).contains(&self.rho), || format!("Invalid rho value: {}", self.rho))?;
        non_negative(Self::NAME, &[("epsilon value", self.eps), ("weight_decay value", self.weight_decay)])
    }

    lr_and_momentum!();

    step_compiled_in_kiln!();

    hyperparameters!(lr, rho, eps, weight_decay, maximize, foreach, fused);

    fn init_state(&self, param: &Tensor) -> AdadeltaState {
        AdadeltaState { step: 0.0, square_avg: param.zeros_like(), acc_delta: param.zeros_like() }
    }

    /// PyTorch's `_single_tensor_adadelta`.
    fn fused_and_foreach(&self) -> (Option<bool>, Option<bool>) {
        (self.fused, self.foreach)
    }

    fn prepare(&self, _param: &Tensor, s: &mut AdadeltaState) -> (AdadeltaConsts, SmallVec<[Tensor; 3]>) {
        s.step += 1.0;
        (AdadeltaConsts {}, SmallVec::from_iter([s.square_avg.clone(), s.acc_delta.clone()]))
    }

    /// PyTorch's `_single_tensor_adadelta`; `s` is `[square_avg, acc_delta]`.
    #[inline(always)]
    fn rule<V: Values>(&self, _k: &AdadeltaConsts, param: &V, grad: &V, s: &mut [V]) -> V {
        let grad = effective_grad(param, grad, self.maximize, self.weight_decay);
        s[0] = s[0].mul_s(self.rho).addcmul(&grad, &grad, 1.0 - self.rho);
        let std = s[0].add_s(self.eps).sqrt();
        let delta = s[1].add_s(self.eps).sqrt().div(&std).mul(&grad);
        s[1] = s[1].mul_s(self.rho).addcmul(&delta, &delta, 1.0 - self.rho);
        param.add_scaled(&delta, -self.lr)
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
