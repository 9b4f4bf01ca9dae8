//! Plans: what a realized graph runs, built once per graph shape and cached.

use super::kernels::{self, CompiledKernel};
use crate::debug::{self, Topic};
use kiln_codegen::ir::{structural_hash, Graph, Node, NodeId, NodeKind};
use kiln_codegen::passes::{self, LoweredGroup, StepKind};
use kiln_runtime::cpu::parallel::GRAIN;
use kiln_runtime::Device;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One step of a plan.
// Built once per plan and read at every run: boxing the large variant would add a hop per step.
#[allow(clippy::large_enum_variant)]
pub(crate) enum PlanStep {
    /// A fused elementwise group: a kernel of its device's back end (Cranelift on the CPU,
    /// CUDA C on CUDA), or (when the back end refuses it, e.g. f16 on the CPU, reductions on
    /// CUDA) its members run one by one eagerly.
    Group {
        /// The kernel's bindings and iteration space.
        lowered: LoweredGroup,
        /// The members, in order (for the eager fallback).
        members: Vec<NodeId>,
        /// The compiled kernel, if the JIT took it.
        kernel: Option<Arc<CompiledKernel>>,
    },
    /// One node run by its eager implementation (opaque ops, assignments).
    Node(NodeId),
}

/// A compiled plan for one graph shape.
pub(crate) struct Plan {
    /// The graph as captured, outputs set: a trace that records these nodes again runs this
    /// plan (see `Trace::expected`).
    pub(crate) captured: Graph,
    /// Its structural hash (the plan cache's key).
    pub(crate) hash: u64,
    /// Whether the plan's values and inputs hold at least [`GRAIN`] elements in all: only then
    /// can its kernels and products split over threads, and is it worth running on kiln's
    /// pool (see `exec::run`).
    pub(crate) splits: bool,
    /// The graph after common-subexpression elimination, with its outputs.
    pub(crate) graph: Graph,
    /// Per node of the captured graph, the node that computes its value in [`Plan::graph`].
    pub(crate) canonical: Vec<NodeId>,
    /// The steps in order.
    pub(crate) steps: Vec<PlanStep>,
    /// The `Scalar` nodes read as tensors (by eager steps, or leaving the step); kernels take
    /// the other scalars as plain arguments, so no tensor is made for them.
    pub(crate) scalar_tensors: Vec<NodeId>,
    /// Per step, the values to free after it.
    pub(crate) frees: Vec<Vec<NodeId>>,
    /// Per step, true when it runs at once with the next (see `kiln_codegen::passes::concurrent`).
    pub(crate) concurrent: Vec<bool>,
    /// Peak bytes of intermediates (the memory plan).
    pub(crate) peak_bytes: usize,
    /// `(output, input)` pairs, sorted: the kernel computing the output may write it over the
    /// input's storage, when a run installs the output into that same storage (see
    /// [`donations`]).
    pub(crate) donatable: Vec<(NodeId, NodeId)>,
    /// The inputs of [`Plan::donatable`], each once.
    pub(crate) donors: Vec<NodeId>,
    /// The kernels this plan uses, as listed by `CompiledStep::kernels`.
    pub(crate) kernels: Vec<KernelRecord>,
    /// Per node of [`Plan::graph`], its fusion group (`Fusion::group_of`: a node other kernels
    /// recompute keeps its own group), and per group the name of the kernel it got, if any:
    /// what `CompiledStep::graph_nodes` reports besides the steps.
    pub(crate) group_of: Vec<Option<u32>>,
    /// See [`Plan::group_of`].
    pub(crate) kernel_names: Vec<Option<String>>,
    /// Time spent building it (passes + JIT).
    pub(crate) build_time: Duration,
}

/// What a plan says about one of its kernels.
#[derive(Clone)]
pub(crate) struct KernelRecord {
    /// The kernel.
    pub(crate) kernel: Arc<CompiledKernel>,
    /// True when the kernel cache already had it when the plan was built.
    pub(crate) cache_hit: bool,
    /// What it computes, in this plan's node numbers (`kiln_codegen::listing`).
    pub(crate) listing: String,
}

/// Builds the plan for `graph` (outputs set), whose structural hash is `hash`.
pub(crate) fn build(mut graph: Graph, hash: u64) -> Plan {
    let started = Instant::now();
    let captured = graph.clone();
    let splits = graph.nodes.iter().map(Node::numel).sum::<usize>() >= GRAIN;
    let canonical = passes::eliminate_common_subexpressions(&mut graph);
    let merged = canonical.iter().enumerate().filter(|(i, &c)| *i as NodeId != c).count();
    let live = passes::live_nodes(&graph);
    let fusion = passes::fuse(&graph, &live);
    let schedule = passes::schedule(&graph, &live, &fusion);
    if debug::enabled(Topic::Graph) {
        debug::log(Topic::Graph, describe(&graph, &live));
    }
    if debug::enabled(Topic::Fusion) {
        for (node, reason) in &fusion.refusals {
            debug::log(Topic::Fusion, format!("node {node} ({}): {reason}", graph.node(*node).kind.name()));
        }
        if merged > 0 {
            debug::log(Topic::Fusion, format!("{merged} common subexpressions merged"));
        }
    }
    let mut steps = Vec::with_capacity(schedule.steps.len());
    let mut records: Vec<KernelRecord> = Vec::new();
    // Per fusion group, the name of the kernel it got (for the `.dot` dump).
    let mut kernel_names: Vec<Option<String>> = vec![None; fusion.groups.len()];
    for s in &schedule.steps {
        match *s {
            StepKind::Node(n) => steps.push(PlanStep::Node(n)),
            StepKind::Group(gid) => {
                let members = fusion.groups[gid as usize].clone();
                let lowered = passes::lower_group(&graph, &members, fusion.parts[gid as usize].as_ref(), |m| {
                    fusion.materialized[m as usize]
                });
                let kernel = match group_device(&graph, &members)
                    .and_then(|device| kernels::get_or_compile(&lowered.kernel, &graph, &members, device))
                {
                    Ok((k, hit)) => {
                        let listing =
                            kiln_codegen::listing::listing(&k.name, k.backend(), &k.summary, &lowered, &graph);
                        if !hit {
                            kernels::announce(&k, &listing);
                        }
                        records.push(KernelRecord { kernel: k.clone(), cache_hit: hit, listing });
                        kernel_names[gid as usize] = Some(k.name.clone());
                        Some(k)
                    }
                    Err(reason) => {
                        debug::log(Topic::Fusion, format!("kernel of nodes {members:?} runs eagerly: {reason}"));
                        None
                    }
                };
                steps.push(PlanStep::Group { lowered, members, kernel });
            }
        }
    }
    let mut scalar_tensors: Vec<NodeId> = graph.outputs.clone();
    for step in &steps {
        let eager: &[NodeId] = match step {
            PlanStep::Node(n) => std::slice::from_ref(n),
            PlanStep::Group { members, kernel: None, .. } => members,
            PlanStep::Group { kernel: Some(_), .. } => &[],
        };
        scalar_tensors.extend(eager.iter().flat_map(|&n| graph.node(n).reads.iter().map(|u| u.node)));
    }
    scalar_tensors.retain(|&n| matches!(graph.node(n).kind, NodeKind::Scalar { .. }));
    scalar_tensors.sort_unstable();
    scalar_tensors.dedup();
    super::dump::graph(&graph, &live, &fusion, &kernel_names);
    let donatable = donations(&graph, &steps);
    let mut donors: Vec<NodeId> = donatable.iter().map(|d| d.1).collect();
    donors.sort_unstable();
    donors.dedup();
    Plan {
        captured,
        hash,
        splits,
        graph,
        canonical,
        scalar_tensors,
        steps,
        frees: schedule.frees,
        concurrent: schedule.concurrent,
        peak_bytes: schedule.peak_bytes,
        donatable,
        donors,
        kernels: records,
        group_of: fusion.group_of,
        kernel_names,
        build_time: started.elapsed(),
    }
}

impl Plan {
    /// How many nodes running the plan runs by their eager implementations (what
    /// `RunCounts::eager` counts when it runs).
    pub(crate) fn eager_nodes(&self) -> usize {
        self.steps
            .iter()
            .map(|s| match s {
                PlanStep::Node(_) => 1,
                PlanStep::Group { members, kernel: None, .. } => members.len(),
                PlanStep::Group { kernel: Some(_), .. } => 0,
            })
            .sum()
    }
}

/// The `(output, input)` pairs whose output a CPU kernel may write over the input's storage,
/// in place (an optimizer's update, a momentum buffer): the output is a graph output, the input
/// an `Input` node of its dtype and length that the kernel reads only element for element
/// (contiguous, from offset 0, over an elementwise iteration space) and that no later step
/// reads, and only compiled kernels follow. Kernels cannot fail, so once one has written over an
/// input nothing can stop the run before its outputs are installed: a failed run still leaves
/// every storage as it found it.
fn donations(graph: &Graph, steps: &[PlanStep]) -> Vec<(NodeId, NodeId)> {
    let fallible = |n: NodeId| matches!(graph.node(n).kind, NodeKind::Opaque { .. } | NodeKind::Reduce { .. });
    let first_infallible = steps
        .iter()
        .rposition(|s| match s {
            PlanStep::Node(n) => fallible(*n),
            PlanStep::Group { members, kernel: None, .. } => members.iter().any(|&m| fallible(m)),
            PlanStep::Group { kernel: Some(_), .. } => false,
        })
        .map_or(0, |i| i + 1);
    // The inputs each step reads last (the schedule's `frees` list intermediates only).
    let mut last_read: Vec<Option<usize>> = vec![None; graph.nodes.len()];
    for (i, step) in steps.iter().enumerate() {
        let mut read = |n: NodeId| last_read[n as usize] = Some(i);
        match step {
            PlanStep::Node(n) => graph.node(*n).reads.iter().for_each(|u| read(u.node)),
            PlanStep::Group { lowered, kernel: Some(_), .. } => lowered.loads.iter().for_each(|u| read(u.node)),
            PlanStep::Group { members, kernel: None, .. } => {
                members.iter().flat_map(|&m| &graph.node(m).reads).for_each(|u| read(u.node))
            }
        }
    }
    let mut read_last_by: Vec<Vec<NodeId>> = vec![Vec::new(); steps.len()];
    for (n, at) in last_read.iter().enumerate() {
        let n = n as NodeId;
        if let (Some(at), NodeKind::Input { .. }) = (at, &graph.node(n).kind) {
            if !graph.outputs.contains(&n) {
                read_last_by[*at].push(n);
            }
        }
    }
    let mut pairs = Vec::new();
    for (i, step) in steps.iter().enumerate().skip(first_infallible) {
        let PlanStep::Group { lowered, kernel: Some(_), members } = step else { continue };
        if lowered.reduce_rank != 0 || graph.device(members[0]) != Device::Cpu {
            continue;
        }
        let numel: usize = lowered.shape.iter().product();
        let rank = lowered.shape.len();
        let identity = kiln_runtime::layout::contiguous_strides(&lowered.shape);
        let reads_in_order = |k: usize| {
            lowered.loads[k].layout.offset() == 0
                && lowered.strides[k * rank..(k + 1) * rank].iter().zip(identity.iter()).all(|(&a, &b)| a == b as isize)
        };
        for &input in &read_last_by[i] {
            let NodeKind::Input { len, .. } = graph.node(input).kind else { unreachable!("listed above") };
            let mut loads = lowered.loads.iter().enumerate().filter(|(_, u)| u.node == input);
            if len != numel || !loads.all(|(k, _)| reads_in_order(k)) {
                continue;
            }
            // Which output replaces the input's storage is known only when a run installs
            // them: every output that could is a candidate.
            let dtype = graph.node(input).dtype;
            let outputs = lowered.outputs.iter().copied().filter(|&o| {
                graph.outputs.contains(&o) && graph.node(o).dtype == dtype && graph.node(o).numel() == numel
            });
            pairs.extend(outputs.map(|o| (o, input)));
        }
    }
    pairs.sort_unstable();
    pairs
}

/// The device of a group's members (the device its kernel runs on), or why they have none.
fn group_device(graph: &Graph, members: &[NodeId]) -> Result<Device, String> {
    let device = graph.device(members[0]);
    match members.iter().find(|&&m| graph.device(m) != device) {
        None => Ok(device),
        Some(&m) => Err(format!("its members are on {device} and {} (node {m})", graph.device(m))),
    }
}

/// A listing of the live nodes, one per line.
pub(crate) fn describe(g: &Graph, live: &[bool]) -> String {
    let mut s = format!("graph: {} nodes, outputs {:?}\n", g.nodes.len(), g.outputs);
    for (i, n) in g.nodes.iter().enumerate().filter(|(i, _)| live[*i]) {
        let reads: Vec<String> = n
            .reads
            .iter()
            .map(|u| {
                format!(
                    "%{}{}",
                    u.node,
                    if u.layout.is_contiguous() && u.layout.offset() == 0 {
                        String::new()
                    } else {
                        format!("{:?}/{:?}+{}", u.layout.shape(), u.layout.strides(), u.layout.offset())
                    }
                )
            })
            .collect();
        let origin = if g.origins[i].is_known() { format!("  {}", g.origins[i]) } else { String::new() };
        s += &format!(
            "  %{i} = {}({}) : {:?} {} {} [{:?}]{origin}\n",
            n.kind.name(),
            reads.join(", "),
            n.shape.as_slice(),
            n.dtype,
            g.device(i as NodeId),
            g.phases[i]
        );
    }
    s
}

/// The plan cache: least recently used plans first out, at most [`PLAN_CACHE_CAP`].
static PLANS: Mutex<VecDeque<(u64, usize, Arc<Plan>)>> = Mutex::new(VecDeque::new());

/// How many plans the process keeps.
pub(crate) const PLAN_CACHE_CAP: usize = 64;

/// The plan for `graph` from the cache (true) or newly built (false).
pub(crate) fn lookup_or_build(graph: Graph) -> (Arc<Plan>, bool) {
    let hash = structural_hash(&graph);
    let nodes = graph.nodes.len();
    {
        let mut plans = PLANS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(pos) = plans.iter().position(|(h, n, _)| *h == hash && *n == nodes) {
            let entry = plans.remove(pos).expect("found");
            let plan = entry.2.clone();
            plans.push_back(entry);
            return (plan, true);
        }
    }
    let plan = Arc::new(build(graph, hash));
    let mut plans = PLANS.lock().unwrap_or_else(|e| e.into_inner());
    if plans.len() >= PLAN_CACHE_CAP {
        plans.pop_front();
    }
    plans.push_back((hash, nodes, plan.clone()));
    (plan, false)
}
