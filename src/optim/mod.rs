//! `kiln::optim`: optimizers and learning-rate schedulers (PyTorch's `torch.optim`).
//!
//! Every optimizer computes PyTorch 2.x's single-tensor (`foreach=False`) update, op for op, so
//! an f64 trajectory matches PyTorch's to rounding (PyTorch's CPU kernels fuse some multiply-adds;
//! kiln rounds each op, so the two differ by an ulp or so per step). On f16 and bf16 parameters
//! each op computes in f32 and rounds once, with PyTorch's scalar conversions and fused
//! multiply-adds ([`rule`] lists them), so the parameters equal those of PyTorch's vectorized
//! CPU loops bit for bit, eagerly and inside `kiln::compile` (`tests/optim_half.rs`). The scalar
//! tail of those loops (a tensor's last elements past a multiple of the vector width) rounds
//! `add(..., alpha=)` differently.
//!
//! ```
//! use kiln::optim::{lr_scheduler::LRScheduler, Optimizer};
//! use kiln::prelude::*;
//! let net = nn::Linear::new(4, 2);
//! let mut opt = optim::SGD::new(net.parameters(), optim::SGDConfig { lr: 0.01, momentum: 0.9, ..Default::default() });
//! let mut sched = optim::lr_scheduler::StepLR::new(&mut opt, 30, 0.1);
//! let loss = net.forward(&Tensor::randn(&[3, 4])).sum();
//! opt.zero_grad(); loss.backward(); opt.step(); sched.step(&mut opt);
//! assert_eq!(opt.lr(0), 0.01);
//! ```
//!
//! The optimizers ([`SGD`], [`Adam`], [`AdamW`], [`Adadelta`], [`Adagrad`], [`RMSprop`]) are one
//! generic type, [`Optim<C>`], specialised by its configuration `C` (which carries the update
//! rule, see [`OptimizerConfig`]). Parameters are tensor handles: they share storage with the
//! module's parameters and are updated in place under [`crate::no_grad`]. Parameters whose
//! `.grad()` is `None` are skipped, as in PyTorch.
//!
//! # State dict format
//!
//! [`Optimizer::state_dict`] returns a [`crate::StateDict`] laid out like PyTorch's
//! `{"state": {...}, "param_groups": [...]}`:
//!
//! - tensors `state.{index}.{name}`: the per-parameter state, with PyTorch's names
//!   (`momentum_buffer`, `step`, `exp_avg`, `exp_avg_sq`, `max_exp_avg_sq`, `square_avg`,
//!   `acc_delta`, `sum`, `grad_avg`). `index` counts the parameters of all groups in order
//!   (group 0's first parameter is 0). `step` is a 0-dim f32 tensor, as in PyTorch. A parameter
//!   that has never been stepped has no entries.
//! - metadata `param_groups.{g}.{hyperparameter}` for each group `g`: `lr`, `momentum`,
//!   `betas` (`"0.9,0.999"`), `nesterov` (`"true"`/`"false"`), …, floats written so they parse
//!   back to the same bits, and `param_groups.{g}.params` = `"0,1,2"`: the indices of the group's
//!   parameters.
//!
//! [`Optimizer::load_state_dict`] maps saved indices to the optimizer's parameters by position
//! (as PyTorch does), checks the number of groups, each group's size, every state tensor's shape
//! and name and every hyperparameter, and changes nothing unless all of it is valid.
//!
//! # Deliberate differences from PyTorch
//! - `state_dict()` returns copies of the state tensors (PyTorch's dict holds references that
//!   later steps keep updating); a saved state is a snapshot.
//! - `foreach` and `fused` select how an eager step runs, not what it computes. Unless one is
//!   `Some(false)` (and the other not `Some(true)`), an eager step runs the one-pass kernel:
//!   all parameters of one dtype in one parallel launch that reads each element of a parameter,
//!   its gradient and its state once and updates them in place. Its arithmetic is the
//!   single-tensor formula's, op for op (each rule is written once, generic over tensors and
//!   numbers: [`rule`]), so its results equal the op-by-op path's bit for bit (PyTorch's
//!   `fused=True` kernels reorder some arithmetic, and on f16/bf16 keep the whole update in f32,
//!   rounding only what they store: after five steps of SGD, Adam, AdamW or Adagrad they differ
//!   from PyTorch's default in 15–66% of the elements; kiln follows the default). Tensors it
//!   cannot take (not contiguous, not on the CPU, sharing a storage) are updated op by op. Both
//!   `Some(true)` is an error, as in PyTorch. Inside `kiln::compile` the update is captured op
//!   by op and fused by the compiler, whatever the options.
//! - `capturable` and `differentiable` are not options. Sparse gradients and complex parameters
//!   are not supported.
//! - `Adam` has no `decoupled_weight_decay` flag: use [`AdamW`].
//! - Adagrad fills each parameter's `sum` with its own group's `initial_accumulator_value`
//!   (PyTorch uses the constructor's value for every group).
//! - Schedulers have no `last_epoch` argument (they always start fresh; resume with
//!   `load_state_dict`), and `step` takes the optimizer (`sched.step(&mut opt)`): Rust's borrow
//!   rules keep the scheduler from holding `&mut opt` while the training loop uses it too.

pub mod adadelta;
pub mod adagrad;
pub mod adam;
mod fused;
pub mod lr_scheduler;
pub mod optimizer;
pub mod param_group;
pub mod rmsprop;
pub mod rule;
pub mod sgd;
pub(crate) mod state;

pub use adadelta::{Adadelta, AdadeltaConfig, AdadeltaConsts, AdadeltaState};
pub use adagrad::{Adagrad, AdagradConfig, AdagradConsts, AdagradState};
pub use adam::{Adam, AdamConfig, AdamConsts, AdamState, AdamW, AdamWConfig};
pub use optimizer::{Optim, Optimizer, OptimizerConfig};
pub use param_group::ParamGroup;
pub use rmsprop::{RMSprop, RMSpropConfig, RMSpropConsts, RMSpropState};
pub use sgd::{SGDConfig, SGDConsts, SGDState, SGD};
pub use state::{HyperValue, StateTensors};
