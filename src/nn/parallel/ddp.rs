//! [`DistributedDataParallel`]: the wrapper, its options and the `no_sync` guard.

use super::bucket;
use super::reducer::{self, Reducer, Shared};
use crate::autograd::HookHandle;
use crate::distributed::{self as dist, ReduceOp};
use crate::error::{Error, ErrorKind, OrPanic, Result};
use crate::nn::{FieldVisitor, FieldVisitorMut, Module, Visit};
use crate::tensor::Tensor;
use std::panic::Location;
use std::sync::{Arc, Mutex};

/// Options of [`DistributedDataParallel::new`] (PyTorch's keyword arguments).
#[derive(Clone, Debug, PartialEq)]
pub struct DdpOptions {
    /// Largest gradient bucket in MiB (`bucket_cap_mb=`, default 25).
    pub bucket_cap_mb: f64,
    /// Broadcast the module's buffers from rank 0 before each forward (`broadcast_buffers=`,
    /// default true).
    pub broadcast_buffers: bool,
    /// Allow parameters that take no part in computing the loss (`find_unused_parameters=`,
    /// default false): after each forward, the parameters the output's autograd graph does
    /// not reach are marked ready at once, and a parameter no rank used keeps its `.grad`.
    /// Off, a parameter that gets no gradient makes backward fail with an error naming it.
    pub find_unused_parameters: bool,
}

impl Default for DdpOptions {
    fn default() -> Self {
        DdpOptions { bucket_cap_mb: 25.0, broadcast_buffers: true, find_unused_parameters: false }
    }
}

/// Data-parallel training of `module` over the default process group
/// (`torch.nn.parallel.DistributedDataParallel`): each process runs its own replica on its own
/// share of the data (see [`DistributedSampler`](crate::data::DistributedSampler)), and DDP keeps
/// the replicas equal.
///
/// - **Construction** checks that every rank has parameters of the same shapes, then broadcasts
///   the parameters and buffers from rank 0.
/// - **Backward** averages gradients over the ranks while it runs: a post-accumulate-grad hook
///   on each parameter reports its gradient ready; parameters are grouped in buckets (reverse
///   order, [`DdpOptions::bucket_cap_mb`]) and a bucket's all-reduce starts, non-blocking, as
///   soon as its last gradient arrives (buckets start in order on every rank, as MPI requires),
///   so communication overlaps the rest of backward. Every bucket is finished, and each
///   `.grad` holds the average, **before `backward()` returns** (a callback queued on the
///   engine, as PyTorch's). A bucket that does not complete within the group's timeout makes
///   `backward()` panic with the timeout error (`try_backward_with_opts` returns it).
/// - **Unused parameters.** By default every parameter must get a gradient in every averaging
///   backward; one that does not makes that backward fail (after averaging it as zeros, so the
///   ranks stay in step) with PyTorch's advice and the names of the parameters this rank got no
///   gradient for. With [`DdpOptions::find_unused_parameters`], forward walks the autograd
///   graph of its output and marks the parameters it does not reach ready at once; the ranks
///   then share which parameters any of them used: a parameter used on some ranks is averaged
///   with zeros from the others and gets its `.grad` on every rank, and one no rank used keeps
///   its `.grad` untouched (`None` after `zero_grad`), as in PyTorch.
/// - Inside [`kiln::compile`](crate::compile) the averaging runs right after backward, at one
///   graph break (the gradients are realized there); the optimizer's update is captured after
///   it. Communication then does not overlap backward.
/// - [`no_sync`](Self::no_sync) skips the averaging, for gradient accumulation: the first
///   backward after the guard drops averages the accumulated gradients.
/// - As a [`Module`] it forwards to the wrapped module, which is its child named `module`:
///   parameter names and `state_dict` keys carry PyTorch's `module.` prefix (load a plain
///   model's checkpoint through [`module`](Self::module)).
///
/// Gradients come back as views of the bucket's averaged buffer, as PyTorch's
/// `gradient_as_bucket_view=True`. With two ranks the averages are bit-identical on both (a
/// sum of two is commutative); MPI does not promise that for more ranks.
pub struct DistributedDataParallel<M: Module> {
    module: M,
    reducer: Shared,
    hooks: Vec<HookHandle>,
    opts: DdpOptions,
}

impl<M: Module> DistributedDataParallel<M> {
    /// Wraps `module`: verifies parameter shapes across ranks, broadcasts parameters and
    /// buffers from rank 0, and registers the gradient hooks.
    ///
    /// Errors: no process group, ranks whose modules differ, a failed broadcast.
    #[track_caller]
    pub fn new(module: M, opts: DdpOptions) -> Result<Self> {
        const OP: &str = "DistributedDataParallel";
        let world_size = dist::world_size()?;
        let (names, params): (Vec<String>, Vec<Tensor>) =
            module.named_parameters().into_iter().filter(|(_, p)| p.requires_grad()).unzip();
        verify_shapes(OP, &params)?;
        {
            let _off = crate::no_grad_guard();
            for t in module.parameters().iter().chain(module.buffers().iter()) {
                dist::broadcast(t, 0)?;
            }
        }
        let buckets = bucket::assign(&params, (opts.bucket_cap_mb * (1 << 20) as f64).max(1.0) as usize);
        let reducer: Shared =
            Arc::new(Mutex::new(Reducer::new(params.clone(), names, buckets, world_size, opts.find_unused_parameters)));
        let hooks = params
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let me = Arc::downgrade(&reducer);
                p.register_post_accumulate_grad_hook(move |_| {
                    if let Some(r) = me.upgrade() {
                        reducer::lock(&r).mark_ready(i, &me);
                    }
                })
            })
            .collect();
        Ok(DistributedDataParallel { module, reducer, hooks, opts })
    }

    /// The wrapped module (`ddp.module`).
    pub fn module(&self) -> &M {
        &self.module
    }

    /// The wrapped module, mutably.
    pub fn module_mut(&mut self) -> &mut M {
        &mut self.module
    }

    /// The number of gradient buckets.
    pub fn num_buckets(&self) -> usize {
        reducer::lock(&self.reducer).num_buckets()
    }

    /// Skips gradient averaging while the guard lives (`with ddp.no_sync():`): backward passes
    /// accumulate local gradients, and the first backward after the guard drops averages the
    /// accumulated sum.
    pub fn no_sync(&self) -> NoSync<'_> {
        reducer::lock(&self.reducer).sync = false;
        NoSync { reducer: &self.reducer }
    }
}

/// Averaging is off while this lives (see [`DistributedDataParallel::no_sync`]).
pub struct NoSync<'a> {
    reducer: &'a Mutex<Reducer>,
}

impl Drop for NoSync<'_> {
    fn drop(&mut self) {
        reducer::lock(self.reducer).sync = true;
    }
}

impl<M: Module> Drop for DistributedDataParallel<M> {
    fn drop(&mut self) {
        self.hooks.drain(..).for_each(HookHandle::remove);
    }
}

/// Fails on every rank unless all ranks have parameters of the same shapes (an all-reduce of a
/// shape signature with Max and with Min, which all ranks see alike).
#[track_caller]
fn verify_shapes(op: &'static str, params: &[Tensor]) -> Result<()> {
    let mut sig: Vec<i64> = vec![params.len() as i64];
    for p in params {
        sig.push(p.dim() as i64);
        sig.extend(p.shape().iter().map(|&d| d as i64));
    }
    let at = Location::caller();
    let disagree = || {
        Error::at(op, ErrorKind::Shape, "the ranks' modules have different parameters (number, order or shapes): DDP needs the same model on every rank", at)
    };
    let local = dist::on_group_device(op, Tensor::from_vec(sig.clone(), [sig.len()]))?;
    let (hi, lo) = (local.deep_clone(), local.deep_clone());
    dist::all_reduce(&hi, ReduceOp::Max).map_err(|e| if e.kind == ErrorKind::Distributed { disagree() } else { e })?;
    dist::all_reduce(&lo, ReduceOp::Min)?;
    if hi.to_vec::<i64>() != sig || lo.to_vec::<i64>() != sig {
        return Err(disagree());
    }
    Ok(())
}

impl<M: Module> Visit for DistributedDataParallel<M> {
    fn type_name(&self) -> String {
        "DistributedDataParallel".into()
    }
    fn visit_fields<'a>(&'a self, visitor: &mut dyn FieldVisitor<'a>) {
        visitor.child("module", self.module.as_dyn());
    }
    fn visit_fields_mut(&mut self, visitor: &mut dyn FieldVisitorMut) {
        visitor.child("module", self.module.as_dyn_mut());
    }
    fn as_dyn(&self) -> &dyn Module {
        self
    }
    fn as_dyn_mut(&mut self) -> &mut dyn Module {
        self
    }
}

impl<M: Module> Module for DistributedDataParallel<M> {
    /// Broadcasts the buffers from rank 0 (with `broadcast_buffers`), then runs the wrapped
    /// module; with `find_unused_parameters` (and grad mode on, outside `no_sync`) marks the
    /// parameters the output does not depend on as ready. Panics when the broadcast fails (a
    /// peer gone, the timeout).
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        if self.opts.broadcast_buffers {
            let _off = crate::no_grad_guard();
            for b in self.module.buffers() {
                dist::broadcast(&b, 0).or_panic();
            }
        }
        let output = self.module.forward(input);
        if self.opts.find_unused_parameters && crate::autograd::is_grad_enabled() {
            reducer::lock(&self.reducer).mark_unused(&output);
        }
        output
    }
}
