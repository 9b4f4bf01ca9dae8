//! Running a plan: kernels on freshly allocated buffers (CPU kernels here, CUDA kernels
//! through `crate::cuda::fused`), opaque nodes by their eager implementations (which run on
//! any device), values freed after their last use.

use super::kernels::{self, KernelCode};
use super::plan::{Plan, PlanStep};
use super::profile::{self, StepInfo};
use super::trace::{as_realizing, Trace};
use crate::debug::{self, Topic};
use crate::error::Result;
use crate::ops::Operand;
use crate::tensor::Tensor;
use kiln_codegen::ir::{draw_of_scalars, Graph, Node, NodeId, NodeKind, Use};
use kiln_codegen::passes::concurrent::cpu_product_work;
use kiln_codegen::passes::{LoweredGroup, ScalarArg};
use kiln_runtime::cpu::product_split;
use kiln_runtime::{match_cpu, CpuStorage, Layout};
use smallvec::SmallVec;
use std::time::Instant;

/// What running a plan counted.
#[derive(Clone, Debug, Default)]
pub(crate) struct RunCounts {
    /// Compiled kernels launched.
    pub(crate) kernels: usize,
    /// Nodes run by their eager implementations.
    pub(crate) eager: usize,
    /// Pairs of nodes run at once.
    pub(crate) concurrent: usize,
    /// Matrix product shapes whose spread over threads was measured.
    pub(crate) tuned: usize,
    /// Bytes the kernels read and wrote.
    pub(crate) bytes: usize,
    /// Kernel outputs written over the storage of the input they replace.
    pub(crate) in_place: usize,
}

/// The input whose storage output `o` is written over, among this run's `donated` pairs.
fn donor_of(donated: &[(NodeId, NodeId)], o: NodeId) -> Option<NodeId> {
    donated.binary_search_by_key(&o, |d| d.0).ok().map(|i| donated[i].1)
}

/// The values of a plan's nodes while it runs.
struct Values(Vec<Option<Tensor>>);

impl Values {
    fn get(&self, n: NodeId) -> &Tensor {
        self.0[n as usize].as_ref().expect("the schedule computes every value before it is read")
    }

    /// The read `u` as a tensor (a view of the value; no copy).
    fn view(&self, u: &Use) -> Tensor {
        self.get(u.node).with_layout(u.layout.clone())
    }
}

/// Runs `plan` on the trace's inputs, scalars and closures; returns the value of every node
/// (kept only for the plan's outputs) and what it counted. Large CPU matrix products run with
/// the spread over threads measured for their shape (`kiln_runtime::cpu::product_split`).
/// `donated` (sorted `(output, input)` pairs of [`Plan::donatable`]) are the outputs to write
/// over their input's storage.
pub(crate) fn run(
    plan: &Plan,
    trace: &mut Trace,
    donated: &[(NodeId, NodeId)],
) -> Result<(Vec<Option<Tensor>>, RunCounts)> {
    if runs_on_pool(plan) {
        let grad = crate::autograd::is_grad_enabled();
        kiln_runtime::cpu::parallel::pool().install(|| {
            let _grad = crate::autograd::grad_mode(grad);
            as_realizing(|| run_measured(plan, trace, donated))
        })
    } else {
        run_measured(plan, trace, donated)
    }
}

/// Whether `plan` runs on one of kiln's CPU threads rather than the caller's: when the pool
/// has more than one thread, every node is on the CPU (a CUDA plan stays on the thread that
/// holds its context) and the plan is large enough for its work to split (`Plan::splits`: a
/// small step, such as a tiny model's, would only pay the hand-over). A plan's kernels and
/// products split their work over the pool, and handing each of them to the pool from outside
/// costs a wake-up of a worker and then of the caller (tens of µs on a busy machine); from a
/// worker they start at once and only the helping thread is woken. Measured on the MLP step (2 threads, 2026-12-03): 1.14-1.19x eager
/// against 1.07-1.09x run from the caller.
fn runs_on_pool(plan: &Plan) -> bool {
    plan.splits
        && kiln_runtime::cpu::parallel::num_threads() > 1
        && plan.graph.devices.iter().all(|d| *d == kiln_runtime::Device::Cpu)
}

/// [`run_steps`] with large products spreading as measured for their shape; the shapes chosen
/// meanwhile (on this thread) are counted and printed under `KILN_DEBUG=tuning`.
fn run_measured(
    plan: &Plan,
    trace: &mut Trace,
    donated: &[(NodeId, NodeId)],
) -> Result<(Vec<Option<Tensor>>, RunCounts)> {
    product_split::take_new_tunings();
    let (values, mut counts) = product_split::with_tuned_products(|| run_steps(plan, trace, donated))?;
    let tunings = product_split::take_new_tunings();
    counts.tuned = tunings.len();
    for tuned in tunings {
        debug::log(Topic::Tuning, tuned.to_string());
    }
    Ok((values, counts))
}

/// [`run`]'s steps.
fn run_steps(plan: &Plan, trace: &mut Trace, donated: &[(NodeId, NodeId)]) -> Result<(Vec<Option<Tensor>>, RunCounts)> {
    let g = &plan.graph;
    let mut values = Values(vec![None; g.nodes.len()]);
    let mut counts = RunCounts::default();
    for (id, n) in g.nodes.iter().enumerate() {
        if let NodeKind::Input { slot, len } = n.kind {
            let cell = trace.inputs[slot as usize].clone();
            let device = Tensor::cell_device(&cell);
            values.0[id] = Some(Tensor::over_cell(cell, Layout::contiguous(&[len]), n.dtype, device));
        }
    }
    for &id in &plan.scalar_tensors {
        let NodeKind::Scalar { slot } = g.node(id).kind else { unreachable!("only Scalar nodes are listed") };
        values.0[id as usize] = Some(Tensor::scalar_wrapping(trace.scalars[slot as usize], g.node(id).dtype));
    }
    let profiling = profile::enabled() && g.devices.iter().all(|d| *d == kiln_runtime::Device::Cpu);
    for (i, (step, frees)) in plan.steps.iter().zip(&plan.frees).enumerate() {
        if i > 0 && plan.concurrent[i - 1] {
            // The second of a pair: it ran with the first.
            free_after(&mut values, frees);
            continue;
        }
        let started = profiling.then(Instant::now);
        match step {
            PlanStep::Node(id) if plan.concurrent[i] => {
                let PlanStep::Node(next) = plan.steps[i + 1] else { unreachable!("a concurrent pair is two nodes") };
                let outs = run_pair(g.node(*id), g.node(next), &values, trace)?;
                counts.concurrent += 1;
                for (n, v) in [*id, next].into_iter().zip(outs) {
                    check_value(g.node(n), &v);
                    values.0[n as usize] = Some(v);
                    counts.eager += 1;
                }
            }
            PlanStep::Node(id) => {
                let node = g.node(*id);
                let v = run_node(node, g.device(*id), &values, trace)?;
                check_value(node, &v);
                values.0[*id as usize] = Some(v);
                counts.eager += 1;
            }
            PlanStep::Group { lowered, kernel: Some(kernel), members } => {
                let scalars = kernel_scalars(lowered, g, trace);
                if let KernelCode::Cuda { kernel: cuda, .. } = &kernel.code {
                    let inputs: Vec<Tensor> = lowered.loads.iter().map(|u| values.get(u.node).clone()).collect();
                    let outs = crate::cuda::fused::run(cuda, g.device(members[0]), &inputs, lowered, &scalars, |o| {
                        (g.node(o).shape.as_slice(), g.node(o).dtype)
                    })?;
                    counts.kernels += 1;
                    counts.bytes += group_bytes(lowered, g);
                    for (o, v) in lowered.outputs.iter().zip(outs) {
                        values.0[*o as usize] = Some(v);
                    }
                    free_after(&mut values, frees);
                    continue;
                }
                // Outputs written over an input's storage (see `plan::donations`), else new buffers.
                let donors: SmallVec<[Option<NodeId>; 4]> =
                    lowered.outputs.iter().map(|o| donor_of(donated, *o)).collect();
                let mut outs: Vec<Option<CpuStorage>> = lowered
                    .outputs
                    .iter()
                    .zip(&donors)
                    .map(|(&o, d)| d.is_none().then(|| CpuStorage::uninit(g.node(o).dtype, g.node(o).numel())))
                    .collect();
                // A donor's storage is locked for writing (once), every other input for reading.
                let donor_tensors: SmallVec<[(NodeId, Tensor); 2]> =
                    donors.iter().flatten().map(|&d| (d, values.get(d).clone())).collect();
                let mut written: SmallVec<[_; 2]> =
                    donor_tensors.iter().map(|(d, t)| (*d, t.write_storage())).collect();
                // The cast is a no-op only for the u8 arm of the match.
                #[allow(clippy::unnecessary_cast)]
                let donor_ptrs: SmallVec<[(NodeId, *mut u8); 2]> = written
                    .iter_mut()
                    .map(|(d, s)| {
                        let s = s.as_cpu_mut().expect("donated inputs are CPU storages (plan::donations)");
                        (*d, match_cpu!(s, |b: T| b.as_mut_ptr() as *mut u8))
                    })
                    .collect();
                let donor_ptr = |n: NodeId| donor_ptrs.iter().find(|(d, _)| *d == n).map(|(_, p)| *p);
                let inputs: Vec<Tensor> = lowered.loads.iter().map(|u| values.get(u.node).clone()).collect();
                let guards: Vec<_> = inputs
                    .iter()
                    .zip(&lowered.loads)
                    .map(|(t, u)| donor_ptr(u.node).is_none().then(|| t.read_storage()))
                    .collect();
                let in_ptrs: Vec<*const u8> = guards
                    .iter()
                    .zip(&lowered.loads)
                    .map(|(s, u)| {
                        let Some(s) = s else {
                            // Donated inputs are read from offset 0 (plan::donations).
                            return donor_ptr(u.node).expect("a donor without a read guard") as *const u8;
                        };
                        let s =
                            s.as_cpu().expect("kiln::compile runs on CPU tensors only (CUDA capture is not built yet)");
                        // The cast is a no-op only for the u8 arm of the match.
                        #[allow(clippy::unnecessary_cast)]
                        let base = match_cpu!(s, |b: T| b.as_ptr() as *const u8);
                        base.wrapping_add(u.layout.offset() * s.dtype().size_in_bytes())
                    })
                    .collect();
                // The cast is a no-op only for the u8 arm of the match.
                #[allow(clippy::unnecessary_cast)]
                let out_ptrs: Vec<*mut u8> = outs
                    .iter_mut()
                    .zip(&donors)
                    .map(|(s, d)| match (s, d) {
                        (Some(s), _) => match_cpu!(s, |b: T| b.as_mut_ptr() as *mut u8),
                        (None, d) => donor_ptr(d.expect("an output without a buffer is donated")).expect("locked"),
                    })
                    .collect();
                // SAFETY: every input view lies inside its (locked, alive) storage: capture
                // checked it against the storage when the op was recorded; the outputs are new
                // buffers of the group's numel, disjoint from everything else, or a donated
                // input's storage (locked for writing, of the output's dtype and length), which
                // the kernel reads only element for element before writing each element, and no
                // other input or output of the kernel uses (plan::donations).
                unsafe { kernels::launch(kernel, lowered, &in_ptrs, &out_ptrs, &scalars, g) };
                drop(guards);
                drop(written);
                counts.kernels += 1;
                counts.bytes += group_bytes(lowered, g);
                for ((o, s), d) in lowered.outputs.iter().zip(outs).zip(&donors) {
                    let shape = &g.node(*o).shape;
                    values.0[*o as usize] = Some(match (s, d) {
                        (Some(s), _) => Tensor::from_cpu_storage(s, shape),
                        (None, Some(d)) => {
                            counts.in_place += 1;
                            let input = values.get(*d);
                            Tensor::over_cell(
                                input.cell().clone(),
                                Layout::contiguous(shape),
                                input.dtype(),
                                input.device(),
                            )
                        }
                        (None, None) => unreachable!("an output without a buffer is donated"),
                    });
                }
            }
            PlanStep::Group { members, kernel: None, .. } => {
                for &m in members {
                    let node = g.node(m);
                    let v = run_node(node, g.device(m), &values, trace)?;
                    check_value(node, &v);
                    values.0[m as usize] = Some(v);
                    counts.eager += 1;
                }
            }
        }
        if let Some(started) = started {
            profile::record(plan.hash, i, started.elapsed(), || step_info(plan, i));
        }
        free_after(&mut values, frees);
    }
    Ok((values.0, counts))
}

/// What step `i` of `plan` runs, for `KILN_DEBUG=profile`.
fn step_info(plan: &Plan, i: usize) -> StepInfo {
    let g = &plan.graph;
    let flop = |id: NodeId| cpu_product_work(g, id).map_or(0.0, |w| 2.0 * w as f64);
    match &plan.steps[i] {
        PlanStep::Node(id) if plan.concurrent[i] => {
            let PlanStep::Node(next) = plan.steps[i + 1] else { unreachable!("a concurrent pair is two nodes") };
            let label = format!("side by side: {} | {}", node_label(g, *id), node_label(g, next));
            StepInfo { label, bytes: 0, flop: flop(*id) + flop(next) }
        }
        PlanStep::Node(id) => StepInfo { label: node_label(g, *id), bytes: 0, flop: flop(*id) },
        PlanStep::Group { lowered, kernel: Some(kernel), .. } => StepInfo {
            label: format!("kernel {} ({}) over {:?}", kernel.name, kernel.summary, lowered.shape.as_slice()),
            bytes: group_bytes(lowered, g),
            flop: 0.0,
        },
        PlanStep::Group { members, kernel: None, .. } => {
            let names: Vec<String> = members.iter().map(|&m| g.node(m).kind.name()).collect();
            StepInfo { label: format!("unfused group ({})", names.join(" ")), bytes: 0, flop: 0.0 }
        }
    }
}

/// A node in words: its op, the shapes it reads and the shape it makes.
fn node_label(g: &Graph, id: NodeId) -> String {
    let n = g.node(id);
    let reads: Vec<String> = n.reads.iter().map(|u| format!("{:?}", u.layout.shape())).collect();
    format!("{} {} -> {:?}", n.kind.name(), reads.join(", "), n.shape.as_slice())
}

/// Frees the values a step read last.
fn free_after(values: &mut Values, frees: &[NodeId]) {
    for &f in frees {
        values.0[f as usize] = None;
    }
}

/// The run-time scalars of a group's kernel, in its order.
fn kernel_scalars(lowered: &LoweredGroup, g: &Graph, trace: &Trace) -> Vec<f64> {
    lowered
        .scalars
        .iter()
        .map(|&a| match a {
            ScalarArg::Value(v) => v,
            ScalarArg::Node(n) => match g.node(n).kind {
                NodeKind::Scalar { slot } => trace.scalars[slot as usize].to_f64(),
                _ => unreachable!("kernel scalars are Scalar nodes"),
            },
        })
        .collect()
}

/// The bytes a group's kernel reads (each load once per element of the iteration space) and
/// writes.
fn group_bytes(lowered: &LoweredGroup, g: &Graph) -> usize {
    let numel: usize = lowered.shape.iter().product();
    let read = lowered.loads.iter().map(|u| g.node(u.node).dtype.size_in_bytes()).sum::<usize>() * numel;
    read + lowered.outputs.iter().map(|&o| g.node(o).numel() * g.node(o).dtype.size_in_bytes()).sum::<usize>()
}

/// A node's value must be a contiguous tensor of its shape and dtype at offset 0 that owns
/// exactly its elements (uses address it as a flat storage).
fn check_value(node: &Node, v: &Tensor) {
    assert!(
        v.shape() == node.shape.as_slice() && v.dtype() == node.dtype,
        "kiln::compile: {} produced {:?} {} where the trace expected {:?} {} (a bug in its capture)",
        node.kind.name(),
        v.shape(),
        v.dtype(),
        node.shape.as_slice(),
        node.dtype
    );
}

/// A tensor that owns exactly its elements, contiguous from offset 0.
fn flat(t: Tensor) -> Tensor {
    if t.is_contiguous() && t.storage_offset() == 0 && t.storage_len() == t.numel() {
        t
    } else {
        t.deep_clone()
    }
}

/// An eager implementation's `result`, copied when it shares a storage with one of its
/// `inputs` (an op that returns its input as it is): a value owns its storage, which a later
/// kernel may write over (see `plan::donations`).
fn apart(result: Tensor, inputs: &[Tensor]) -> Tensor {
    if inputs.iter().any(|i| i.shares_storage_with(&result)) {
        result.deep_clone()
    } else {
        result
    }
}

/// Runs two independent opaque nodes (a concurrent pair of the schedule) at once, one thread
/// each.
fn run_pair(a: &Node, b: &Node, values: &Values, trace: &mut Trace) -> Result<[Tensor; 2]> {
    let mut take = |node: &Node| match node.kind {
        NodeKind::Opaque { index, .. } => trace.closures[index as usize]
            .take()
            .unwrap_or_else(|| panic!("kiln::compile: the eager implementation of {} ran twice", node.kind.name())),
        _ => unreachable!("the schedule pairs matrix products, which are opaque nodes"),
    };
    let (fa, fb) = (take(a), take(b));
    let inputs = |n: &Node| -> Vec<Tensor> { n.reads.iter().map(|u| values.view(u)).collect() };
    let (ia, ib) = (inputs(a), inputs(b));
    let (ra, rb) = kiln_runtime::cpu::parallel::join_serial(
        move || as_realizing(|| fa(&ia).map(|r| apart(r, &ia))),
        move || as_realizing(|| fb(&ib).map(|r| apart(r, &ib))),
    );
    Ok([flat(ra?), flat(rb?)])
}

/// Runs one node eagerly (a source of values, such as a draw, on `device`).
fn run_node(node: &Node, device: kiln_runtime::Device, values: &Values, trace: &mut Trace) -> Result<Tensor> {
    let r = |i: usize| values.view(&node.reads[i]);
    let operand = |i: usize| Operand::Tensor(r(i));
    Ok(flat(match node.kind {
        NodeKind::Unary(op) => crate::ops::unary(op, &r(0))?,
        NodeKind::Binary(op) => crate::ops::binary(op, &operand(0), &operand(1))?,
        NodeKind::Cmp(op) => crate::ops::compare(op, &r(0), &operand(1))?,
        NodeKind::Logical(op) => crate::ops::logical(op, &r(0), &operand(1))?,
        NodeKind::Not => r(0).logical_not(),
        NodeKind::Where => Tensor::try_where(&r(0), r(1), r(2))?,
        NodeKind::Cast if node.dtype == node_dtype(values, &node.reads[0]) => r(0).deep_clone(),
        NodeKind::Cast => r(0).try_to_dtype(node.dtype)?,
        NodeKind::Assign { len, ref region } => {
            let whole = region.is_contiguous() && region.offset() == 0 && region.numel() == len;
            if whole {
                // The value (broadcast to the region) in one copy: a buffer of its own, never
                // the value node's (two installed outputs must not share memory).
                r(1).deep_clone().try_reshape([len as i64])?
            } else {
                let out = r(0).deep_clone();
                out.with_layout(region.clone()).try_copy_(&r(1))?;
                out
            }
        }
        NodeKind::Rand(dist) => {
            let scalars: [f64; 4] = std::array::from_fn(|i| r(i).item::<f64>());
            crate::random::rand_value(dist, &node.shape, node.dtype, &draw_of_scalars(scalars), device)?
        }
        NodeKind::Opaque { index, .. } | NodeKind::Reduce { index, .. } => {
            let inputs: Vec<Tensor> = (0..node.reads.len()).map(r).collect();
            let f = trace.closures[index as usize]
                .take()
                .unwrap_or_else(|| panic!("kiln::compile: the eager implementation of {} ran twice", node.kind.name()));
            apart(f(&inputs)?, &inputs)
        }
        NodeKind::Input { .. } | NodeKind::Scalar { .. } => unreachable!("sources are values from the start"),
    }))
}

/// The dtype of the value a read reads.
fn node_dtype(values: &Values, u: &Use) -> kiln_runtime::DType {
    values.get(u.node).dtype()
}
