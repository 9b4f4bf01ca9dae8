//! # kiln
//!
//! A deep-learning framework in Rust with PyTorch's define-by-run API: tensors with
//! shared-storage views, autograd, `nn`, `optim`, data loading and checkpoints, a graph
//! compiler underneath ([`compile`]: each call of a step is captured, fused and run as
//! Cranelift-generated CPU kernels from a plan cached by graph shape), and data-parallel
//! training across CPU processes ([`distributed`] over MPI with the `mpi` feature,
//! `DistributedDataParallel` eager or inside [`compile`]).
//!
//! CUDA tensors ([`cuda`], and [`compile`] on CUDA) and the NCCL backend are written but have
//! not yet run on a GPU: their kernels are compiled with NVRTC in the tests (compile-tested
//! only), and the GPU tests are ignored unless run with `--include-ignored` on a GPU machine.
//!
//! ```
//! use kiln::prelude::*;
//! let w = Tensor::randn(&[8, 4]).requires_grad_(true);
//! let x = Tensor::randn(&[16, 8]);
//! let mut step = kiln::compile(|x: &Tensor| {
//!     w.set_grad(None);
//!     let loss = x.matmul(&w).tanh().square().mean();
//!     loss.backward();
//!     loss
//! });
//! let loss = step.call(&x).item::<f32>();
//! assert!(loss > 0.0 && w.grad().is_some());
//! assert_eq!(step.stats().graph_breaks, 0);
//! ```
//!
//! ## Deliberate differences from PyTorch
//! - `Tensor: Clone` copies the *handle* (both share storage, like Python assignment);
//!   PyTorch's data-copying `x.clone()` is [`Tensor::deep_clone`].
//! - Dims are `i64` (negative counts from the end); shapes given to constructors are `&[usize]`,
//!   shapes given to `view`/`reshape`/`expand` are `&[i64]` so that -1 can be used.
//! - Python's `x[1, :, 2:4]` is `x.i((1, .., 2..4))`.
//! - `Tensor::as_slice` borrows the storage: an in-place write to the same tensor from the same
//!   thread while the borrow lives blocks (drop the guard first).
//! - f16/bf16 `matmul` computes in f32 over the whole reduction and rounds once.
//! - `Tensor::cat`/`stack` take `&[impl Borrow<Tensor>]` (`&[&Tensor]` or `&[Tensor]`).
//! - Errors panic with `op: message (at file:line)`; the `try_` forms return [`Result`].
//! - Modules: `#[derive(Module)]` + `impl Module { fn forward }`; `train`/`eval`/`to` take
//!   `&mut self`; losses are structs with `forward(input, target)`, not modules (see [`nn`]).
//! - Optimizers take `Vec<Tensor>` parameter handles; schedulers take the optimizer in `step`
//!   (`sched.step(&mut opt)`), and resume through `load_state_dict` instead of `last_epoch`.
//! - Optimizer `state_dict()` returns copies of the state tensors (see [`optim`]).
//! - `DataLoader` seeds each batch's randomness from (epoch seed, batch index), so results do
//!   not depend on `num_workers` (see [`data`]).
//! - Checkpoints are safetensors files ([`save`], [`load`]), not pickles; [`load`] (and
//!   [`load_pth`]) also reads `torch.save` checkpoints, running none of their pickled code.
//! - PyTorch's keyword arguments that change an op's dtype become methods with a suffix:
//!   `x.softmax(dim, dtype=torch.float64)` is `x.softmax_dtype(dim, DType::F64)` (also
//!   `log_softmax_dtype`, `F::softmax_dtype`, `F::log_softmax_dtype`).
//! - `torch.clamp` with tensor bounds is `x.clamp_tensor(Some(&lo), Some(&hi))` (`None` for an
//!   absent bound; Rust has no overloading, and `x.clamp(lo, hi)` takes numbers).
//! - `kiln::compile(f)` returns a [`CompiledStep`]; call it with `step.call(args)` (one
//!   argument: pass a tuple for several; pass the model and optimizer that way too, see
//!   [`compile_guide`]). Inside a compiled call an index error of an op whose
//!   kernel runs later (gather, scatter, …) panics when the step's graph runs, not at the op's
//!   line. `KILN_DEBUG` and `KILN_DUMP_DIR` play the role of `TORCH_LOGS` (see [`debug`]).
//! - [`distributed`]: `rank()`, `world_size()` and every collective return [`Result`]; there is
//!   no `async_op=True` (collectives wait, bounded by the group's timeout), no process subgroups,
//!   and `ReduceOp::Avg` is computed as a sum divided by the world size (NCCL's `ncclAvg` on
//!   CUDA tensors). `DistributedDataParallel` finishes its gradient all-reduces before
//!   `backward()` returns, so a parameter without a gradient fails that `backward()` at once
//!   (PyTorch notices at the next forward) unless `find_unused_parameters` is set; inside
//!   [`compile`] its all-reduces run at one graph break right after backward.

// Lets `#[derive(Module)]` (which names `::kiln`) work inside this crate too.
extern crate self as kiln;

pub mod amp;
pub mod autograd;
pub mod backends;
pub mod capture;
#[doc = include_str!("../docs/compile.md")]
pub mod compile_guide {}
mod checkpoint;
pub mod cuda;
pub mod data;
pub mod debug;
pub mod distributed;
pub mod error;
#[cfg(feature = "ndarray")]
pub mod interop;
pub mod memory;
pub mod nn;
pub mod ops;
pub mod optim;
pub mod random;
pub mod scalar;
mod serialize;
pub mod state_dict;
pub mod tensor;
pub mod tensorboard;
pub mod vision;

pub use amp::autocast::{autocast, autocast_guard, autocast_with, AutocastOptions};
pub use autograd::{
    enable_grad, enable_grad_guard, is_grad_enabled, no_grad, no_grad_guard, set_grad_enabled, BackwardOpts,
};
pub use capture::{compile, CompiledStep};
pub use checkpoint::{load_checkpoint, save_checkpoint, Checkpoint};
pub use error::{Error, ErrorKind, Result};
pub use kiln_runtime::{DType, Device};
pub use random::manual_seed;
pub use scalar::Scalar;
pub use serialize::{load, load_pth, save};
pub use state_dict::StateDict;
pub use tensor::{IntoShape, Tensor};

/// Sets the number of CPU worker threads kernels use (`torch.set_num_threads`). The default
/// comes from `KILN_NUM_THREADS`, else `OMP_NUM_THREADS`, else the number of cores.
pub fn set_num_threads(n: usize) {
    kiln_runtime::cpu::parallel::set_num_threads(n)
}

/// Flushes denormal floats to zero on the CPU, or stops (`torch.set_flush_denormal`); returns
/// whether the CPU supports it. Off by default, as in PyTorch. Denormal arithmetic is many times
/// slower on x86: the MNIST example turns this on because Adadelta's accumulators decay into
/// the denormal range late in training (epochs took 1.5× longer without it).
pub fn set_flush_denormal(on: bool) -> bool {
    kiln_runtime::cpu::parallel::set_flush_denormal(on)
}

/// Refuses or replaces every kernel whose result depends on scheduling
/// (`torch.use_deterministic_algorithms`). Off by default, as in PyTorch.
///
/// On the CPU every kernel is deterministic already: reductions, `scatter_add`, `index_put`
/// with accumulation and the generated kernels combine partial results in a fixed order (no
/// atomics, no racing accumulation), and random numbers come from counter-based Philox
/// streams, so for a given thread count results are the same run after run with or without
/// this mode. On CUDA, `scatter_add` accumulates with atomics by default; with this mode on
/// it runs a kernel adding in the CPU's order instead (one thread per line of the scatter
/// dim: the CPU's result bit for bit), so the gradients built on it (`gather`,
/// `index_select`, `embedding`, `cross_entropy`/`nll_loss`) run too. A `scatter` of a tensor
/// (which keeps any one value where indices repeat) and an accumulating `index_put_` are
/// refused with an error. Kernels with a scheduling-dependent path check the mode
/// ([`are_deterministic_algorithms_enabled`]).
pub fn use_deterministic_algorithms(mode: bool) {
    kiln_runtime::set_deterministic_algorithms(mode)
}

/// Whether [`use_deterministic_algorithms`] is on (`torch.are_deterministic_algorithms_enabled`).
pub fn are_deterministic_algorithms_enabled() -> bool {
    kiln_runtime::deterministic_algorithms()
}

/// The number of CPU worker threads (`torch.get_num_threads`).
pub fn get_num_threads() -> usize {
    kiln_runtime::cpu::parallel::num_threads()
}

/// What most programs need: `use kiln::prelude::*;` — everything the program in `docs/api.md`
/// (the blitz, MNIST and CIFAR-10 tutorials) names without a path: [`Tensor`], [`DType`],
/// [`Device`], [`Scalar`], [`StateDict`], [`BackwardOpts`], `nn` with `F` (its functional
/// module) and the [`Module`](nn::Module) trait and derive, `optim` with the
/// [`Optimizer`](optim::Optimizer) and [`LRScheduler`](optim::lr_scheduler::LRScheduler)
/// traits (so `opt.step()`, `opt.zero_grad()` and `sched.step(&mut opt)` resolve), the datasets'
/// [`Split`](vision::datasets::Split), and [`compile`], [`manual_seed`], [`no_grad`].
pub mod prelude {
    pub use crate::nn::{self, functional as F, Module};
    pub use crate::optim::{self, lr_scheduler::LRScheduler, Optimizer};
    pub use crate::vision::datasets::Split;
    pub use crate::{compile, manual_seed, no_grad, BackwardOpts, DType, Device, Scalar, StateDict, Tensor};
}
