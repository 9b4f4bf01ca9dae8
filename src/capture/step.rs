//! `kiln::compile`: a closure whose every call is captured, planned and run as a graph.

use super::graph_nodes::{self, GraphNode};
use super::plan::Plan;
use super::report::{self, what_changed};
use super::{realize, trace};
use crate::debug::{self, Topic};
use std::panic::Location;
use std::sync::Arc;
use std::time::Duration;

/// Wraps `f` (a training step, a forward pass, any closure of tensor ops) so that each call is
/// captured into a graph, fused, compiled and run; the result equals running `f` eagerly,
/// within the tolerance of the generated kernels' math (see [`crate::capture`]).
///
/// To train, pass the model and the optimizer as arguments of each call rather than capturing
/// them in the closure, so that they stay free between calls (for `model.eval()`,
/// `scheduler.step(&mut opt)`, …): [`crate::compile_guide`] shows the pattern, what
/// recompiles, what breaks a graph and how to read `KILN_DEBUG`'s output.
///
/// ```
/// use kiln::prelude::*;
/// let x = Tensor::randn(&[64, 32]);
/// let mut step = kiln::compile(|x: &Tensor| (x * 2.0 + 1.0).tanh().sum());
/// let compiled = step.call(&x);
/// let eager = (&x * 2.0 + 1.0).tanh().sum();
/// assert!((compiled.item::<f32>() - eager.item::<f32>()).abs() < 1e-3);
/// ```
pub fn compile<F>(f: F) -> CompiledStep<F> {
    CompiledStep { f, last: CallStats::default(), plans: Vec::new(), previous: Vec::new(), planned: Vec::new() }
}

/// A compiled closure: [`CompiledStep::call`] runs it; [`CompiledStep::kernels`] and
/// [`CompiledStep::stats`] describe the last call.
pub struct CompiledStep<F> {
    f: F,
    last: CallStats,
    /// The last call's plans, and whether each came from the plan cache.
    plans: Vec<(Arc<Plan>, bool)>,
    /// The previous call's graphs (hash and signature), to say what changed on a recompile.
    previous: Vec<(u64, bool, Vec<String>)>,
    /// The plans the last call built for a target device ([`CompiledStep::call_planning_for`]).
    planned: Vec<Arc<Plan>>,
}

/// The kernels of `plans` (each with whether it came from the plan cache), in order.
fn kernel_infos(plans: &[(Arc<Plan>, bool)]) -> Vec<KernelInfo> {
    let mut out = Vec::new();
    for (plan, plan_hit) in plans {
        for k in &plan.kernels {
            out.push(KernelInfo {
                name: k.kernel.name.clone(),
                backend: k.kernel.backend(),
                ops: k.kernel.summary.clone(),
                listing: k.listing.clone(),
                source: k.kernel.source().to_string(),
                native_calls: k.kernel.native_calls().to_vec(),
                vector_variant: k
                    .kernel
                    .vector_variant()
                    .map(|(name, source)| KernelVariant { name: name.to_string(), source: source.to_string() }),
                compile_time: k.kernel.compile_time(),
                cache_hit: k.cache_hit || *plan_hit,
            });
        }
    }
    out
}

/// One generated kernel of the last call.
#[derive(Clone, Debug)]
pub struct KernelInfo {
    /// Its name: `k` + the hash of its content (CPU), `kiln_fused_` + its source's hash
    /// (CUDA).
    pub name: String,
    /// The back end that generated it: `"cranelift"` (CPU) or `"cuda"` (CUDA C).
    pub backend: &'static str,
    /// The ops fused into it, in order.
    pub ops: String,
    /// What it computes, as pseudo-code a person reads: inputs (the graph nodes they read),
    /// one line per operation with its node (`%N`, as in `KILN_DEBUG=graph` and the `.dot`
    /// dump) and the source line that recorded it, outputs (what `KILN_DEBUG=kernels` prints).
    pub listing: String,
    /// Its source text (CLIF for the CPU, CUDA C for CUDA).
    pub source: String,
    /// The native routines its code calls, by symbol, sorted: a layer norm's
    /// `kiln_row_norm_affine_f32`, a softmax's `kiln_row_exp_sum_f32`, an f32 `tanh` tile's
    /// `kiln_vm_tanh_f32`, a scalar helper such as `kiln_f64_Erf` (empty for CUDA kernels,
    /// whose helpers are part of their source).
    pub native_calls: Vec<String>,
    /// A CUDA elementwise kernel's variant with 16-byte loads and stores, which a launch runs
    /// instead when its inputs are contiguous runs or broadcast values, suitably aligned
    /// (`None` for CPU kernels and reductions).
    pub vector_variant: Option<KernelVariant>,
    /// How long generating and compiling it took (for CUDA, generating the C source: NVRTC
    /// compiles it when it is first loaded on the device).
    pub compile_time: Duration,
    /// True when the kernel cache already held it when its plan was built.
    pub cache_hit: bool,
}

/// A second form of a generated kernel that launches pick between ([`KernelInfo::vector_variant`]).
#[derive(Clone, Debug)]
pub struct KernelVariant {
    /// Its `extern "C"` name.
    pub name: String,
    /// Its CUDA C source.
    pub source: String,
}

/// What the last call did and where its time went.
#[derive(Clone, Debug, Default)]
pub struct CallStats {
    /// Graphs realized (1, plus one per graph break).
    pub graphs: usize,
    /// Graph breaks: reads of values computed inside the step.
    pub graph_breaks: usize,
    /// Nodes captured.
    pub nodes: usize,
    /// Generated kernels launched.
    pub kernels_launched: usize,
    /// Nodes run by their eager implementations (matmul, reductions, conv, …).
    pub eager_ops: usize,
    /// Pairs of independent matrix products that ran at once, one thread each (CPU plans).
    pub concurrent_pairs: usize,
    /// Matrix product shapes whose spread over threads this call measured (a large CPU
    /// product's first run in any compiled plan of the process; `KILN_DEBUG=tuning` prints
    /// each choice). 0 once every shape of the step was measured.
    pub products_tuned: usize,
    /// After [`CompiledStep::call_planning_for`]: the nodes the plans built for the target
    /// would run by their eager implementations there (opaque ops, assignments, nodes of
    /// groups its back end refused); with [`KernelInfo`]s of those plans, what a call on the
    /// target launches. 0 after [`CompiledStep::call`].
    pub planned_eager_ops: usize,
    /// Bytes the generated kernels read and wrote.
    pub bytes_moved: usize,
    /// Kernel outputs written in place, over the storage of the tensor they update (an
    /// optimizer's parameters and state at the end of a step), instead of into a new buffer.
    pub updated_in_place: usize,
    /// The largest peak of intermediate buffers among the graphs (the memory plan).
    pub peak_bytes: usize,
    /// Graphs whose plan came from the cache.
    pub plan_cache_hits: usize,
    /// Of those, the graphs that repeated the step's previous call's graph at that point node
    /// for node (and its outputs): their plan ran with no hashing and no lookup. A steady
    /// training step has every graph so.
    pub plans_expected: usize,
    /// Time spent capturing (running the closure's Rust code, recording nodes).
    pub trace_time: Duration,
    /// Time spent hashing graphs and looking plans up.
    pub hash_time: Duration,
    /// Time spent building plans (passes and JIT).
    pub compile_time: Duration,
    /// Time spent running plans.
    pub run_time: Duration,
}

impl<F> CompiledStep<F> {
    /// Calls the step: captures it, realizes its graph (from the plan cache when this graph
    /// shape ran before) and returns its result, realized. `KILN_DEBUG=recompiles` names the
    /// caller's line.
    #[track_caller]
    pub fn call<A, R>(&mut self, args: A) -> R
    where
        F: FnMut(A) -> R,
    {
        if !trace::begin(self.plans.iter().map(|(p, _)| p.clone())) {
            return (self.f)(args); // nested inside another compiled call: part of its graph
        }
        /// Undoes the call when it unwinds (a panic in the closure, or an op failing while a
        /// graph runs): the trace being captured is rolled back and the journal restored.
        struct End;
        impl Drop for End {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    if let Some(t) = trace::take_for_realize(false) {
                        t.roll_back();
                    }
                    trace::finish_realize();
                    trace::end_call(false);
                    drop(report::take());
                }
            }
        }
        let guard = End;
        let out = (self.f)(args);
        realize::realize(None);
        drop(guard);
        trace::end_call(true);
        self.finish_call(Location::caller());
        out
    }

    /// Calls the closure eagerly, without capturing (to compare, or to switch compilation off
    /// with a flag); the stats keep describing the last compiled call.
    pub fn call_eager<A, R>(&mut self, args: A) -> R
    where
        F: FnMut(A) -> R,
    {
        (self.f)(args)
    }

    /// Calls the step as [`CompiledStep::call`] does, on its (CPU) tensors, and also plans
    /// each of the call's graphs for `target` as a step whose tensors live there would
    /// (the same capture decisions, passes, memory plan and kernels), without running that
    /// plan: returns the result and the kernels of those plans, in the order they would run
    /// (`backend` `"cuda"` for a CUDA target). A machine without the device can so list,
    /// read or NVRTC-compile what a step generates for it. The stats and
    /// [`CompiledStep::kernels`] describe the CPU run.
    pub fn call_planning_for<A, R>(&mut self, args: A, target: kiln_runtime::Device) -> (R, Vec<KernelInfo>)
    where
        F: FnMut(A) -> R,
    {
        struct Reset;
        impl Drop for Reset {
            fn drop(&mut self) {
                trace::set_target(None);
            }
        }
        trace::set_target(Some(target));
        let reset = Reset;
        let out = self.call(args);
        drop(reset);
        let planned: Vec<(Arc<Plan>, bool)> =
            std::mem::take(&mut self.planned).into_iter().map(|p| (p, false)).collect();
        self.last.planned_eager_ops = planned.iter().map(|(p, _)| p.eager_nodes()).sum();
        (out, kernel_infos(&planned))
    }

    /// The generated kernels of the last call's plans, in the order they run.
    pub fn kernels(&self) -> Vec<KernelInfo> {
        kernel_infos(&self.plans)
    }

    /// The graphs of the last call, node by node: op, phase (forward, backward, update), reads,
    /// shape, dtype and the kernel computing each node (empty before the first call). What
    /// `KILN_DUMP_DIR`'s `.dot` files draw, and what
    /// [`SummaryWriter::add_graph`](crate::tensorboard::SummaryWriter::add_graph) writes.
    pub fn graph_nodes(&self) -> Vec<GraphNode> {
        graph_nodes::graph_nodes(&self.plans.iter().map(|(p, _)| &**p).collect::<Vec<_>>())
    }

    /// What the last call did and where its time went.
    pub fn stats(&self) -> &CallStats {
        &self.last
    }

    /// Gathers the call's report into [`CallStats`] and prints what `KILN_DEBUG` asks for
    /// (`caller`: the user's line that called the step).
    fn finish_call(&mut self, caller: &'static Location<'static>) {
        let rep = report::take();
        if debug::enabled(Topic::Recompiles) {
            for (i, (hash, hit, sig)) in rep.graphs.iter().enumerate() {
                if *hit {
                    continue;
                }
                match self.previous.get(i) {
                    Some((old, _, old_sig)) if old != hash => {
                        debug::log(
                            Topic::Recompiles,
                            format!("graph {i} of the step called at {caller} recompiles: {}", what_changed(old_sig, sig)),
                        );
                    }
                    None if !self.previous.is_empty() => debug::log(
                        Topic::Recompiles,
                        format!("graph {i} of the step called at {caller} is new (the step has more graph breaks than before)"),
                    ),
                    _ => {}
                }
            }
        }
        let mut s = CallStats { graphs: rep.realizations.len(), graph_breaks: rep.breaks.len(), ..Default::default() };
        for r in &rep.realizations {
            s.nodes += r.plan.graph.nodes.len();
            s.kernels_launched += r.counts.kernels;
            s.eager_ops += r.counts.eager;
            s.concurrent_pairs += r.counts.concurrent;
            s.products_tuned += r.counts.tuned;
            s.bytes_moved += r.counts.bytes;
            s.updated_in_place += r.counts.in_place;
            s.peak_bytes = s.peak_bytes.max(r.plan.peak_bytes);
            s.plan_cache_hits += r.plan_hit as usize;
            s.plans_expected += r.plan_expected as usize;
            s.trace_time += r.trace_time;
            s.hash_time += r.hash_time;
            s.compile_time += r.build_time;
            s.run_time += r.run_time;
        }
        self.plans = rep.realizations.iter().map(|r| (r.plan.clone(), r.plan_hit)).collect();
        self.planned = rep.planned;
        self.previous = rep.graphs;
        self.last = s;
    }
}

impl<F> Drop for CompiledStep<F> {
    /// Prints the step timings gathered under `KILN_DEBUG=profile`.
    fn drop(&mut self) {
        if super::profile::enabled() {
            super::profile::print_and_clear();
        }
    }
}
