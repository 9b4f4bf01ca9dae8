//! RMSprop (`torch.optim.RMSprop`), optionally centered and with momentum.

use super::optimizer::{Optim, OptimizerConfig};
use super::state::{
    add_scaled_, addcdiv_, addcmul_, effective_grad, hyperparameters, lerp_, lr_and_momentum, non_negative,
    step_tensor, StateTensors,
};
use crate::{Result, Tensor};

/// RMSprop's hyperparameters (`torch.optim.RMSprop`'s arguments and defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct RmsPropConfig {
    /// Learning rate (default 1e-2).
    pub lr: f64,
    /// Smoothing constant of the squared-gradient average (default 0.99).
    pub alpha: f64,
    /// Added to the denominator for numerical stability (default 1e-8).
    pub eps: f64,
    /// L2 penalty added to the gradient (default 0).
    pub weight_decay: f64,
    /// Momentum factor (default 0).
    pub momentum: f64,
    /// Normalize by an estimate of the gradient's variance instead of its second moment.
    pub centered: bool,
    /// Maximize the objective instead of minimizing it.
    pub maximize: bool,
}

impl Default for RmsPropConfig {
    fn default() -> Self {
        RmsPropConfig {
            lr: 1e-2,
            alpha: 0.99,
            eps: 1e-8,
            weight_decay: 0.0,
            momentum: 0.0,
            centered: false,
            maximize: false,
        }
    }
}

/// RMSprop's per-parameter state.
#[derive(Clone, Debug)]
pub struct RmsPropState {
    /// Number of updates so far.
    pub step: f64,
    /// Running average of squared gradients.
    pub square_avg: Tensor,
    /// Momentum buffer (`momentum > 0` only).
    pub momentum_buffer: Option<Tensor>,
    /// Running average of gradients (`centered` only).
    pub grad_avg: Option<Tensor>,
}

/// RMSprop (`torch.optim.RMSprop`).
pub type RmsProp = Optim<RmsPropConfig>;

impl OptimizerConfig for RmsPropConfig {
    type State = RmsPropState;
    const NAME: &'static str = "RMSprop";

    fn validate(&self) -> Result<()> {
        let values = [
            ("learning rate", self.lr),
            ("epsilon value", self.eps),
            ("momentum value", self.momentum),
            ("weight_decay value", self.weight_decay),
            ("alpha value", self.alpha),
        ];
        non_negative(Self::NAME, &values)
    }

    lr_and_momentum!(momentum: momentum);

    hyperparameters!(lr, alpha, eps, weight_decay, momentum, centered, maximize);

    fn init_state(&self, param: &Tensor) -> RmsPropState {
        RmsPropState {
            step: 0.0,
            square_avg: param.zeros_like(),
            momentum_buffer: (self.momentum > 0.0).then(|| param.zeros_like()),
            grad_avg: self.centered.then(|| param.zeros_like()),
        }
    }

    /// PyTorch's `_single_tensor_rmsprop`.
    fn update(&self, param: &Tensor, grad: &Tensor, s: &mut RmsPropState) {
        s.step += 1.0;
        let grad = effective_grad(param, grad, self.maximize, self.weight_decay);
        s.square_avg.mul_(self.alpha);
        addcmul_(&s.square_avg, &grad, &grad, 1.0 - self.alpha);
        let avg = if self.centered {
            let grad_avg = s.grad_avg.get_or_insert_with(|| param.zeros_like());
            lerp_(grad_avg, &grad, 1.0 - self.alpha);
            let v = s.square_avg.deep_clone();
            addcmul_(&v, grad_avg, grad_avg, -1.0);
            v.sqrt_();
            v
        } else {
            s.square_avg.sqrt()
        };
        avg.add_(self.eps);
        if self.momentum > 0.0 {
            // A momentum turned on after the first step (a scheduler cycling it) starts from zero.
            let buf = s.momentum_buffer.get_or_insert_with(|| param.zeros_like());
            buf.mul_(self.momentum);
            addcdiv_(buf, &grad, &avg, 1.0);
            add_scaled_(param, buf, -self.lr);
        } else {
            addcdiv_(param, &grad, &avg, -self.lr);
        }
    }

    fn state_tensors(&self, s: &RmsPropState) -> Vec<(&'static str, Tensor)> {
        let mut v = vec![("step", step_tensor(s.step)), ("square_avg", s.square_avg.clone())];
        if let Some(b) = &s.momentum_buffer {
            v.push(("momentum_buffer", b.clone()));
        }
        if let Some(g) = &s.grad_avg {
            v.push(("grad_avg", g.clone()));
        }
        v
    }

    fn load_state(&self, saved: &mut StateTensors<'_>) -> Result<RmsPropState> {
        Ok(RmsPropState {
            step: saved.step()?,
            square_avg: saved.required("square_avg")?,
            momentum_buffer: saved.optional("momentum_buffer")?,
            grad_avg: if self.centered { Some(saved.required("grad_avg")?) } else { saved.optional("grad_avg")? },
        })
    }
}
