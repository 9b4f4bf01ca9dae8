//! RMSprop (`torch.optim.RMSprop`), optionally centered and with momentum.

use super::optimizer::{step_compiled_in_kiln, Optim, OptimizerConfig};
use super::rule::{effective_grad, Values};
use super::state::{hyperparameters, lr_and_momentum, non_negative, step_tensor, StateTensors};
use crate::{Result, Tensor};
use smallvec::SmallVec;

/// RMSprop's hyperparameters (`torch.optim.RMSprop`'s arguments and defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct RMSpropConfig {
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
    /// PyTorch's multi-tensor option; see [`crate::optim`] for what kiln runs.
    pub foreach: Option<bool>,
    /// PyTorch's one-pass kernel option; see [`crate::optim`] for what kiln runs.
    pub fused: Option<bool>,
}

impl Default for RMSpropConfig {
    fn default() -> Self {
        RMSpropConfig {
            lr: 1e-2,
            alpha: 0.99,
            eps: 1e-8,
            weight_decay: 0.0,
            momentum: 0.0,
            centered: false,
            maximize: false,
            foreach: None,
            fused: None,
        }
    }
}

/// RMSprop's per-parameter state.
#[derive(Clone, Debug)]
pub struct RMSpropState {
    /// Number of updates so far.
    pub step: f64,
    /// Running average of squared gradients.
    pub square_avg: Tensor,
    /// Momentum buffer (`momentum > 0` only).
    pub momentum_buffer: Option<Tensor>,
    /// Running average of gradients (`centered` only).
    pub grad_avg: Option<Tensor>,
}

/// What one RMSprop update needs beyond the hyperparameters: nothing (its step count only counts).
#[derive(Clone, Copy, Debug)]
pub struct RMSpropConsts {}

/// RMSprop (`torch.optim.RMSprop`).
pub type RMSprop = Optim<RMSpropConfig>;

impl OptimizerConfig for RMSpropConfig {
    type State = RMSpropState;
    type Consts = RMSpropConsts;
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

    step_compiled_in_kiln!();

    hyperparameters!(lr, alpha, eps, weight_decay, momentum, centered, maximize, foreach, fused);

    fn init_state(&self, param: &Tensor) -> RMSpropState {
        RMSpropState {
            step: 0.0,
            square_avg: param.zeros_like(),
            momentum_buffer: (self.momentum > 0.0).then(|| param.zeros_like()),
            grad_avg: self.centered.then(|| param.zeros_like()),
        }
    }

    /// PyTorch's `_single_tensor_rmsprop`.
    fn fused_and_foreach(&self) -> (Option<bool>, Option<bool>) {
        (self.fused, self.foreach)
    }

    fn prepare(&self, param: &Tensor, s: &mut RMSpropState) -> (RMSpropConsts, SmallVec<[Tensor; 3]>) {
        s.step += 1.0;
        let mut slots = SmallVec::from_iter([s.square_avg.clone()]);
        if self.centered {
            slots.push(s.grad_avg.get_or_insert_with(|| param.zeros_like()).clone());
        }
        if self.momentum > 0.0 {
            // A momentum turned on after the first step (a scheduler cycling it) starts from zero.
            slots.push(s.momentum_buffer.get_or_insert_with(|| param.zeros_like()).clone());
        }
        (RMSpropConsts {}, slots)
    }

    /// PyTorch's `_single_tensor_rmsprop`; `s` is `[square_avg]`, then `grad_avg` when
    /// centered, then `momentum_buffer` with momentum.
    #[inline(always)]
    fn rule<V: Values>(&self, _k: &RMSpropConsts, param: &V, grad: &V, s: &mut [V]) -> V {
        let grad = effective_grad(param, grad, self.maximize, self.weight_decay);
        s[0] = s[0].mul_s(self.alpha).addcmul(&grad, &grad, 1.0 - self.alpha);
        let avg = if self.centered {
            s[1] = s[1].lerp(&grad, 1.0 - self.alpha);
            s[0].addcmul(&s[1], &s[1], -1.0).sqrt()
        } else {
            s[0].sqrt()
        };
        let avg = avg.add_s(self.eps);
        if self.momentum > 0.0 {
            let b = s.len() - 1;
            s[b] = s[b].mul_s(self.momentum).addcdiv(&grad, &avg, 1.0);
            param.add_scaled(&s[b], -self.lr)
        } else {
            param.addcdiv(&grad, &avg, -self.lr)
        }
    }

    fn state_tensors(&self, s: &RMSpropState) -> Vec<(&'static str, Tensor)> {
        let mut v = vec![("step", step_tensor(s.step)), ("square_avg", s.square_avg.clone())];
        if let Some(b) = &s.momentum_buffer {
            v.push(("momentum_buffer", b.clone()));
        }
        if let Some(g) = &s.grad_avg {
            v.push(("grad_avg", g.clone()));
        }
        v
    }

    fn load_state(&self, saved: &mut StateTensors<'_>) -> Result<RMSpropState> {
        Ok(RMSpropState {
            step: saved.step()?,
            square_avg: saved.required("square_avg")?,
            momentum_buffer: saved.optional("momentum_buffer")?,
            grad_avg: if self.centered { Some(saved.required("grad_avg")?) } else { saved.optional("grad_avg")? },
        })
    }
}
