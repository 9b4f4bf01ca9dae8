//! The last compiled call's graphs as plain data ([`CompiledStep::graph_nodes`]): each live node
//! with its op, phase, reads, shape, dtype, device and the kernels computing it — what the
//! `.dot` dump draws (`dump.rs`), for programs that draw it elsewhere (TensorBoard's Graphs
//! tab, [`crate::tensorboard::SummaryWriter::add_graph`]).
//!
//! [`CompiledStep::graph_nodes`]: super::CompiledStep::graph_nodes

use super::dump::computed_by;
use super::plan::{Plan, PlanStep};
use kiln_codegen::passes;
use kiln_runtime::{DType, Device};

pub use kiln_codegen::ir::Phase;

/// One node of a compiled call's graph, as the plan that ran it holds it (after common
/// subexpressions were merged; nodes nothing reads are left out).
#[derive(Clone, Debug, PartialEq)]
pub struct GraphNode {
    /// Which of the call's graphs holds it: 0, plus one per graph break before it.
    pub graph: usize,
    /// Its number in that graph: `%N` in `KILN_DEBUG=graph`, kernel listings and the `.dot`
    /// dump.
    pub id: usize,
    /// The op, as the dumps name it: `matmul`, `exp`, `sum`, `assign`, `input3` (a tensor the
    /// step reads, slot 3), `scalar0` (a number given at run time), …
    pub op: String,
    /// The part of the step that recorded it.
    pub phase: Phase,
    /// The ids of the nodes it reads, in operand order.
    pub inputs: Vec<usize>,
    /// The value's shape (an input's or assignment's: its flat storage).
    pub shape: Vec<usize>,
    /// The value's dtype.
    pub dtype: DType,
    /// Where the value lives.
    pub device: Device,
    /// The generated kernel of its fusion group ([`super::KernelInfo::name`]); `None` for a node
    /// run by its eager implementation (matmul, conv, inputs, a group the back end refused).
    pub kernel: Option<String>,
    /// Other kernels that recompute it from their own loads rather than read it.
    pub recomputed_by: Vec<String>,
    /// Whether its value leaves the graph (a live tensor, an updated parameter).
    pub output: bool,
    /// The source line that recorded it (for a backward node, `backward of MulBackward0
    /// (file:line:col)`), when known.
    pub origin: Option<String>,
}

/// The live nodes of `plans` (a call's plans, in the order its graphs ran).
pub(crate) fn graph_nodes(plans: &[&Plan]) -> Vec<GraphNode> {
    let mut out = Vec::new();
    for (g, plan) in plans.iter().enumerate() {
        let graph = &plan.graph;
        let groups = plan.steps.iter().filter_map(|s| match s {
            PlanStep::Group { members, kernel: Some(k), .. } => Some((members.as_slice(), k.name.as_str())),
            _ => None,
        });
        let by = computed_by(graph.nodes.len(), groups);
        let live = passes::live_nodes(graph);
        for (i, n) in graph.nodes.iter().enumerate().filter(|(i, _)| live[*i]) {
            let kernel = plan.group_of[i].and_then(|gid| plan.kernel_names[gid as usize].clone());
            let recomputed_by =
                by[i].iter().filter(|k| Some(**k) != kernel.as_deref()).map(|k| k.to_string()).collect();
            out.push(GraphNode {
                graph: g,
                id: i,
                op: n.kind.name(),
                phase: graph.phases[i],
                inputs: n.reads.iter().map(|u| u.node as usize).collect(),
                shape: n.shape.as_slice().to_vec(),
                dtype: n.dtype,
                device: graph.devices[i],
                kernel,
                recomputed_by,
                output: graph.outputs.contains(&(i as u32)),
                origin: graph.origins[i].is_known().then(|| graph.origins[i].to_string()),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::Phase;
    use crate::prelude::*;

    /// A training step's graph: forward, backward and update nodes, reads naming earlier live
    /// nodes, and every kernel named as `kernels()` names it.
    #[test]
    fn graph_nodes_describe_the_last_call() {
        let w = Tensor::randn([4, 3]).requires_grad_(true);
        let x = Tensor::randn([5, 4]);
        let mut step = kiln::compile(|x: &Tensor| {
            w.set_grad(None);
            let loss = x.matmul(&w).tanh().square().mean();
            loss.backward();
            kiln::no_grad(|| w.sub_(&(w.grad().expect("a gradient") * 0.1)));
            loss
        });
        let mut fresh = kiln::compile(|x: &Tensor| x.exp());
        assert!(fresh.graph_nodes().is_empty(), "no call yet");
        fresh.call(&x);
        assert!(!fresh.graph_nodes().is_empty());
        step.call(&x);
        let nodes = step.graph_nodes();
        for phase in [Phase::Forward, Phase::Backward, Phase::Update] {
            assert!(nodes.iter().any(|n| n.phase == phase), "no {phase:?} node in {nodes:#?}");
        }
        let ids: Vec<usize> = nodes.iter().map(|n| n.id).collect();
        for n in &nodes {
            assert_eq!(n.graph, 0);
            assert!(n.inputs.iter().all(|i| *i < n.id && ids.contains(i)), "{n:?}");
        }
        let matmul = nodes.iter().find(|n| n.op == "matmul").expect("a matmul");
        assert_eq!((matmul.shape.as_slice(), matmul.dtype, matmul.kernel.as_ref()), (&[5, 3][..], DType::F32, None));
        assert!(matmul.origin.as_deref().is_some_and(|o| o.contains("graph_nodes.rs")), "{matmul:?}");
        let tanh = nodes.iter().find(|n| n.op == "tanh").expect("a tanh");
        let kernels: Vec<String> = step.kernels().into_iter().map(|k| k.name).collect();
        assert!(tanh.kernel.as_ref().is_some_and(|k| kernels.contains(k)), "{tanh:?} {kernels:?}");
        assert!(nodes.iter().flat_map(|n| &n.recomputed_by).all(|k| kernels.contains(k)));
        assert!(nodes.iter().any(|n| n.phase == Phase::Update && n.output), "{nodes:#?}");
    }
}
