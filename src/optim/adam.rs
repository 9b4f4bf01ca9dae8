//! Adam and AdamW (`torch.optim.Adam`, `torch.optim.AdamW`): one update rule, with the weight
//! decay added to the gradient (Adam) or applied to the parameter directly (AdamW).

use super::optimizer::{step_compiled_in_kiln, Optim, OptimizerConfig};
use super::rule::{effective_grad, Values};
use super::state::{check, hyperparameters, lr_and_momentum, non_negative, step_tensor, StateTensors};
use crate::{Result, Tensor};
use smallvec::SmallVec;

/// Declares an Adam-style hyperparameter struct: the fields both Adam and AdamW have, with
/// `weight_decay` documented by the attributes given before it.
macro_rules! adam_config_struct {
    ($(#[$doc:meta])* $Config:ident; $(#[$wd_doc:meta])* weight_decay) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq)]
        pub struct $Config {
            /// Learning rate (default 1e-3).
            pub lr: f64,
            /// Decay rates of the first and second moment estimates (default (0.9, 0.999)).
            pub betas: (f64, f64),
            /// Added to the denominator for numerical stability (default 1e-8).
            pub eps: f64,
            $(#[$wd_doc])*
            pub weight_decay: f64,
            /// Use the maximum of past second moments (AMSGrad).
            pub amsgrad: bool,
            /// Maximize the objective instead of minimizing it.
            pub maximize: bool,
            /// PyTorch's multi-tensor option; see [`crate::optim`] for what kiln runs.
            pub foreach: Option<bool>,
            /// PyTorch's one-pass kernel option; see [`crate::optim`] for what kiln runs.
            pub fused: Option<bool>,
        }
    };
}

adam_config_struct! {
    /// Adam's hyperparameters (`torch.optim.Adam`'s arguments and defaults).
    AdamConfig;
    /// L2 penalty added to the gradient (default 0).
    weight_decay
}

impl Default for AdamConfig {
    fn default() -> Self {
        AdamConfig {
            lr: 1e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            amsgrad: false,
            maximize: false,
            foreach: None,
            fused: None,
        }
    }
}

adam_config_struct! {
    /// AdamW's hyperparameters (`torch.optim.AdamW`'s arguments and defaults: as Adam's, but the
    /// weight decay, default 1e-2, shrinks the parameter directly).
    AdamWConfig;
    /// Decoupled weight decay: `p *= 1 - lr * weight_decay` each step (default 1e-2).
    weight_decay
}

impl Default for AdamWConfig {
    fn default() -> Self {
        AdamWConfig {
            lr: 1e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 1e-2,
            amsgrad: false,
            maximize: false,
            foreach: None,
            fused: None,
        }
    }
}

/// Adam's and AdamW's per-parameter state.
#[derive(Clone, Debug)]
pub struct AdamState {
    /// Number of updates so far.
    pub step: f64,
    /// First moment estimate.
    pub exp_avg: Tensor,
    /// Second moment estimate.
    pub exp_avg_sq: Tensor,
    /// The running maximum of `exp_avg_sq` (AMSGrad only).
    pub max_exp_avg_sq: Option<Tensor>,
}

/// Adam (`torch.optim.Adam`).
pub type Adam = Optim<AdamConfig>;
/// AdamW: Adam with decoupled weight decay (`torch.optim.AdamW`).
pub type AdamW = Optim<AdamWConfig>;

/// The hyperparameters both configurations share, and whether decay is decoupled.
struct Hyper {
    lr: f64,
    betas: (f64, f64),
    eps: f64,
    weight_decay: f64,
    amsgrad: bool,
    maximize: bool,
    decoupled: bool,
}

#[track_caller]
fn validate(name: &'static str, h: &Hyper) -> Result<()> {
    non_negative(name, &[("learning rate", h.lr), ("epsilon value", h.eps)])?;
    check(name, (0.0..1.0).contains(&h.betas.0), || format!("Invalid beta parameter at index 0: {}", h.betas.0))?;
    check(name, (0.0..1.0).contains(&h.betas.1), || format!("Invalid beta parameter at index 1: {}", h.betas.1))?;
    non_negative(name, &[("weight_decay value", h.weight_decay)])
}

fn init_state(h: &Hyper, param: &Tensor) -> AdamState {
    AdamState {
        step: 0.0,
        exp_avg: param.zeros_like(),
        exp_avg_sq: param.zeros_like(),
        max_exp_avg_sq: h.amsgrad.then(|| param.zeros_like()),
    }
}

/// What one Adam update computes from the step count.
#[derive(Clone, Copy, Debug)]
pub struct AdamConsts {
    /// `lr / (1 - beta1^step)`.
    step_size: f64,
    /// `sqrt(1 - beta2^step)`.
    bias_correction2_sqrt: f64,
}

fn prepare(h: &Hyper, param: &Tensor, s: &mut AdamState) -> (AdamConsts, SmallVec<[Tensor; 3]>) {
    let (beta1, beta2) = h.betas;
    s.step += 1.0;
    let k = AdamConsts {
        step_size: h.lr / (1.0 - beta1.powf(s.step)),
        bias_correction2_sqrt: (1.0 - beta2.powf(s.step)).powf(0.5),
    };
    let mut slots = SmallVec::from_iter([s.exp_avg.clone(), s.exp_avg_sq.clone()]);
    if h.amsgrad {
        slots.push(s.max_exp_avg_sq.get_or_insert_with(|| param.zeros_like()).clone());
    }
    (k, slots)
}

/// PyTorch's `_single_tensor_adam` (the non-capturable branch); `s` is `[exp_avg, exp_avg_sq]`
/// and `max_exp_avg_sq` with AMSGrad.
#[inline(always)]
fn rule<V: Values>(h: &Hyper, k: &AdamConsts, param: &V, grad: &V, s: &mut [V]) -> V {
    let (beta1, beta2) = h.betas;
    let (param, grad) = if h.decoupled {
        let p = if h.weight_decay != 0.0 { param.mul_s(1.0 - h.lr * h.weight_decay) } else { param.clone() };
        let g = effective_grad(&p, grad, h.maximize, 0.0);
        (p, g)
    } else {
        (param.clone(), effective_grad(param, grad, h.maximize, h.weight_decay))
    };
    s[0] = s[0].lerp(&grad, 1.0 - beta1);
    s[1] = s[1].mul_s(beta2).addcmul(&grad, &grad, 1.0 - beta2);
    let denom = if h.amsgrad {
        s[2] = s[2].maximum(&s[1]);
        s[2].sqrt()
    } else {
        s[1].sqrt()
    };
    let denom = denom.div_s(k.bias_correction2_sqrt).add_s(h.eps);
    param.addcdiv(&s[0], &denom, -k.step_size)
}

fn state_tensors(s: &AdamState) -> Vec<(&'static str, Tensor)> {
    let mut v =
        vec![("step", step_tensor(s.step)), ("exp_avg", s.exp_avg.clone()), ("exp_avg_sq", s.exp_avg_sq.clone())];
    if let Some(m) = &s.max_exp_avg_sq {
        v.push(("max_exp_avg_sq", m.clone()));
    }
    v
}

#[track_caller]
fn load_state(h: &Hyper, saved: &mut StateTensors<'_>) -> Result<AdamState> {
    Ok(AdamState {
        step: saved.step()?,
        exp_avg: saved.required("exp_avg")?,
        exp_avg_sq: saved.required("exp_avg_sq")?,
        max_exp_avg_sq: if h.amsgrad { Some(saved.required("max_exp_avg_sq")?) } else { None },
    })
}

macro_rules! adam_config {
    ($Config:ident, $name:literal, $decoupled:literal) => {
        impl $Config {
            fn hyper(&self) -> Hyper {
                Hyper { lr: self.lr, betas: self.betas, eps: self.eps, weight_decay: self.weight_decay, amsgrad: self.amsgrad, maximize: self.maximize, decoupled: $decoupled }
            }
        }

        impl OptimizerConfig for $Config {
            type State = AdamState;
            type Consts = AdamConsts;
            const NAME: &'static str = $name;

            fn validate(&self) -> Result<()> {
                validate(Self::NAME, &self.hyper())
            }

            lr_and_momentum!(momentum: betas.0);

            step_compiled_in_kiln!();

            hyperparameters!(lr, betas, eps, weight_decay, amsgrad, maximize, foreach, fused);

            fn init_state(&self, param: &Tensor) -> AdamState {
                init_state(&self.hyper(), param)
            }

            fn fused_and_foreach(&self) -> (Option<bool>, Option<bool>) {
                (self.fused, self.foreach)
            }

            fn prepare(&self, param: &Tensor, state: &mut AdamState) -> (AdamConsts, SmallVec<[Tensor; 3]>) {
                prepare(&self.hyper(), param, state)
            }

            #[inline(always)]
            fn rule<V: Values>(&self, k: &AdamConsts, p: &V, g: &V, s: &mut [V]) -> V {
                rule(&self.hyper(), k, p, g, s)
            }

            fn state_tensors(&self, state: &AdamState) -> Vec<(&'static str, Tensor)> {
                state_tensors(state)
            }

            fn load_state(&self, saved: &mut StateTensors<'_>) -> Result<AdamState> {
                load_state(&self.hyper(), saved)
            }
        }
    };
}

adam_config!(AdamConfig, "Adam", false);
adam_config!(AdamWConfig, "AdamW", true);
