//! Capture: `kiln::compile` records each call of a step into a DAG, and realizes it through a
//! cached plan of fused, JIT-compiled kernels.
//!
//! Inside a compiled call, every captured op appends a node to this thread's trace and returns
//! a *lazy* tensor: its storage carries the node that will compute it ([`cell`]). Realized
//! tensors the step reads (parameters, the batch, tensors made eagerly) enter as `Input` nodes;
//! Rust numbers as `Scalar` nodes (run-time arguments, so a new learning rate reuses the plan);
//! `rand`/`randn` as `Rand` nodes, whose draw (seed and offset, reserved from the generator
//! as eager code reserves it) is four `Scalar` nodes, so the numbers are generated inside the
//! fused kernel that consumes them and a cached plan draws fresh ones on every call;
//! in-place writes (`add_`, `copy_`, `fill_`, the optimizer's updates, gradient accumulation)
//! become `Assign` nodes, so the storage's next reads see the new value. `loss.backward()` runs
//! the ordinary backward rules, which are tensor ops: they append to the same trace.
//!
//! The trace is realized at the end of the call, and whenever code reads a lazy tensor's
//! values (`item`, `to_vec`, printing, or an op that has no capture yet): a *graph break*,
//! which realizes what was captured so far and carries on capturing, so data-dependent control
//! flow is always correct (`KILN_DEBUG=breaks` names each break's `file:line`). Realizing
//! finds the outputs (storages still alive), hashes the graph's structure, and runs the cached
//! plan for that hash or builds one ([`plan`]: common subexpressions, fusion, lowering,
//! ordering with liveness, Cranelift kernels from the kernel cache), then installs each
//! output's buffer into its storage. On CUDA the same graph gets its own plan (nodes carry
//! their devices): fused elementwise and reduction groups become CUDA C kernels, everything
//! else runs its eager CUDA kernel (see `ARCHITECTURE.md`). Reductions (sum, mean, prod, amax/amin) are `Reduce` nodes,
//! fused with the elementwise work they reduce. Ops without an expression (matmul, conv, …)
//! are *opaque* nodes: their eager implementation runs inside the plan on realized inputs.
//! `CompiledStep::graph_nodes` describes the last call's plans node by node ([`graph_nodes`]:
//! phase, reads, the kernel computing each node), as the `.dot` dump ([`dump`]) draws them.
//!
//! Tolerance: a compiled step equals the eager one exactly for arithmetic, comparisons, casts
//! and random numbers (the same generator state gives the same numbers, and leaves the
//! generator at the same offset); the generated kernels' inline `exp`/`log`/`tanh`/… differ from the eager kernels'
//! within a few ulp (stated in `kiln_codegen::cpu`).

mod break_site;
mod cell;
mod dump;
mod exec;
mod graph_nodes;
mod journal;
mod kernels;
mod plan;
mod profile;
mod realize;
mod report;
mod step;
mod trace;

pub(crate) use cell::CellCapture;
pub use graph_nodes::{GraphNode, Phase};
pub(crate) use journal::{Outcome, Transaction};
pub(crate) use kernels::CudaCode;
pub use step::{compile, CallStats, CompiledStep, KernelInfo, KernelVariant};
pub(crate) use trace::{
    as_realizing, assign, backward_of, before_eager_access, captures_as_cuda, check_devices, elementwise, is_active,
    journal_grad, opaque, optimizer_step_at, rand, reduce, scalar, set_phase, transaction,
};
