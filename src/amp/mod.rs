//! Automatic mixed precision (PyTorch's `torch.amp`): [`autocast()`] regions, which run each op
//! in the dtype PyTorch's op lists give it (see the [`autocast`](mod@autocast) module), and
//! [`GradScaler`], dynamic loss scaling.
//!
//! Gradients of a loss computed in a narrow float type (f16, bf16) can underflow to zero. A
//! [`GradScaler`] multiplies the loss by a large factor before backward, so the gradients are
//! large too, then divides them by the same factor before the optimizer uses them. When a
//! scaled gradient overflowed (inf or NaN), the optimizer's step is skipped and the factor is
//! halved; after `growth_interval` clean steps in a row it is doubled. The typical loop:
//!
//! ```
//! use kiln::amp::GradScaler;
//! use kiln::prelude::*;
//! let net = nn::Linear::new(4, 2);
//! let mut opt = optim::SGD::new(net.parameters(), optim::SGDConfig { lr: 0.01, ..Default::default() });
//! let mut scaler = GradScaler::new();
//! for _ in 0..3 {
//!     opt.zero_grad();
//!     let loss = net.forward(&Tensor::randn(&[8, 4])).square().mean();
//!     scaler.scale(&loss).backward(); // gradients of loss × scale
//!     scaler.step(&mut opt); // unscales them; skips opt.step() if any is inf/NaN
//!     scaler.update(); // backs the scale off after a skip, grows it after clean steps
//! }
//! assert_eq!(scaler.get_scale(), 65536.0);
//! ```
//!
//! To clip or inspect the real gradients, unscale them first:
//! `scaler.unscale_(&mut opt); nn::utils::clip_grad_norm_(&params, 1.0, 2.0); scaler.step(&mut opt);`
//! (`step` then does not unscale again). With several optimizers, call `step` for each, then
//! `update` once.
//!
//! # How kiln's `GradScaler` differs from PyTorch's
//!
//! The arithmetic is PyTorch's (`torch._amp_foreach_non_finite_check_and_unscale_` and
//! `torch._amp_update_scale_`): the scale is an f32; `1/scale` is computed in f64 and rounded
//! to f32; f32 and f64 gradients are multiplied by that f32 inverse in their own dtype, bf16
//! gradients in f32 and rounded back; a backoff or growth multiplies the f32 scale by the f64
//! factor and rounds to f32, and a growth that would overflow f32 leaves the scale as it is.
//! The errors are PyTorch's, with its messages. What differs:
//!
//! - **Which optimizer a state belongs to.** PyTorch keys the per-optimizer state (unscaled or
//!   stepped since the last `update`, and the inf/NaN flags) by `id(optimizer)`. Rust has no
//!   object identity that survives a move, so kiln keys it by the optimizer's first parameter
//!   (the tensor handle itself, not its values): an optimizer may be moved between `unscale_`
//!   and `step`, and two optimizers over different parameters never share a state. Two
//!   optimizers whose first parameter is the same tensor share one (the second `unscale_` of
//!   those gradients is then refused, as a double unscale, rather than applied twice);
//!   optimizers without parameters share one. `update` forgets every state, as PyTorch's does.
//! - **No `device` argument.** The scale lives on the host and gradients on any device are
//!   unscaled on their device (PyTorch's `GradScaler("cpu")` and `GradScaler("cuda")` in one;
//!   PyTorch's default `"cuda"` scaler disables itself, with a warning, where CUDA is not
//!   available, kiln's never does). `step` and `update` read the inf/NaN flags on the host
//!   (PyTorch's `step` does too); inside [`crate::compile`] that read is a graph break.
//! - **An `init_scale` that f32 cannot hold** (finite and beyond `f32::MAX`) is an error when
//!   the scaler is made, not at the first `scale`; the same check applies to
//!   [`GradScaler::update_with`] and [`GradScaler::load_state_dict`].
//! - **`step` returns whether the optimizer stepped** (`bool`); PyTorch returns what
//!   `optimizer.step()` returned (`None` without a closure; closures are unsupported there too).
//! - **`scale` takes one tensor**; PyTorch also takes lists and tuples (map over them in Rust).
//! - A disabled scaler's getters return the configured factors and interval (PyTorch's raise
//!   `AttributeError`); `get_scale` is 1.0 and `state_dict` empty, as in PyTorch.
//! - Optimizers that unscale inside their own step (PyTorch's `_step_supports_amp_scaling`,
//!   its fused Adam) do not exist in kiln: every optimizer steps the unscaled gradients.
//!
//! # State dict
//!
//! [`GradScaler::state_dict`] holds PyTorch's five entries as metadata (no tensors): `scale`
//! (f64 text that parses back to the same bits), `growth_factor`, `backoff_factor`,
//! `growth_interval` and `_growth_tracker` (integers). A disabled scaler's is empty.

pub mod autocast;
pub mod grad_scaler;

pub use autocast::{autocast, autocast_guard, autocast_with, AutocastGuard, AutocastOptions, Policy};
pub use grad_scaler::{GradScaler, GradScalerConfig};
