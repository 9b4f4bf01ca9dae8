//! `KILN_DUMP_DIR=dir`: each new plan's graph as `step-N.dot` (written by petgraph's `Dot`;
//! each fused node labelled with the kernel that computes it, forward/backward/update in
//! labelled clusters, a legend), and `step-N.svg` beside it when Graphviz's `dot` is on `PATH`;
//! each new kernel's listing as `NAME.txt` and its code: CLIF as `NAME.clif` (CPU), CUDA C as
//! `NAME.cu`. `NAME` is the kernel's name everywhere (logs, `step.kernels()`, the `.dot`).

use kiln_codegen::ir::{Graph, NodeId, NodeKind, Phase};
use kiln_codegen::passes::Fusion;
use petgraph::dot::{Config, Dot};
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::NodeFiltered;
use std::fmt::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The dump folder, when `KILN_DUMP_DIR` names one (created on first use).
fn dir() -> Option<&'static PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = PathBuf::from(std::env::var_os("KILN_DUMP_DIR")?);
        std::fs::create_dir_all(&d).ok()?;
        Some(d)
    })
    .as_ref()
}

/// Writes `graph` with its fusion groups (`kernels[g]`: the name of group `g`'s kernel, if it
/// got one) as the next `step-N.dot`, and as `step-N.svg` when Graphviz's `dot` runs.
pub(crate) fn graph(graph: &Graph, live: &[bool], fusion: &Fusion, kernels: &[Option<String>]) {
    let Some(d) = dir() else { return };
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let dot = d.join(format!("step-{n}.dot"));
    if std::fs::write(&dot, to_dot(graph, live, fusion, kernels)).is_ok() {
        // Graphviz is optional: without it (or if it fails) the .dot alone stays.
        let _ = std::process::Command::new("dot")
            .arg("-Tsvg")
            .arg(&dot)
            .arg("-o")
            .arg(dot.with_extension("svg"))
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// Writes a kernel's `listing` as `NAME.txt` and its code as `NAME.EXT` (`clif` for the
/// CPU's, `cu` for CUDA C).
pub(crate) fn kernel(name: &str, listing: &str, summary: &str, source: &str, ext: &str) {
    let Some(d) = dir() else { return };
    let comment = if ext == "cu" { "//" } else { ";" };
    let _ = std::fs::write(d.join(format!("{name}.txt")), listing);
    let _ = std::fs::write(d.join(format!("{name}.{ext}")), format!("{comment} {summary}\n{source}"));
}

/// The graph in Graphviz's language, written by petgraph's `Dot` from a petgraph graph of the
/// live nodes' reads (Graphviz id `i` is node `i`): each node labelled `%i kind [shape] dtype`,
/// fused nodes filled with one colour per group and labelled with the kernels that compute
/// them (`kernels[g]`: group `g`'s; a node other kernels recompute names those too), members
/// of a group without a kernel dashed, inputs and scalars as ellipses, other unfused nodes
/// bold, outputs doubly outlined; then the nodes of each phase in a labelled cluster, and a
/// legend.
pub(crate) fn to_dot(graph: &Graph, live: &[bool], fusion: &Fusion, kernels: &[Option<String>]) -> String {
    const COLOURS: [&str; 8] = ["#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5"];
    let mut reads: DiGraph<(), (), u32> = DiGraph::with_capacity(graph.nodes.len(), graph.nodes.len() * 2);
    for _ in &graph.nodes {
        reads.add_node(());
    }
    for (i, n) in graph.nodes.iter().enumerate().filter(|(i, _)| live[*i]) {
        for u in &n.reads {
            reads.add_edge(NodeIndex::new(u.node as usize), NodeIndex::new(i), ());
        }
    }
    let with_kernels = fusion.groups.iter().zip(kernels).filter_map(|(m, k)| Some((m.as_slice(), k.as_deref()?)));
    let computed_by = computed_by(graph.nodes.len(), with_kernels);
    let shown = NodeFiltered::from_fn(&reads, |v: NodeIndex| live[v.index()]);
    let node_attributes = |_, (v, _): (NodeIndex, &())| {
        let i = v.index();
        let n = &graph.nodes[i];
        let mut label = format!("%{i} {} {:?} {}", n.kind.name(), n.shape.as_slice(), n.dtype);
        let style = match (fusion.group_of[i], &n.kind) {
            (Some(g), _) => {
                let colour = COLOURS[g as usize % COLOURS.len()];
                if computed_by[i].is_empty() {
                    label += "\\n(no kernel: runs eagerly)";
                    format!("style=\"filled,dashed\", fillcolor=\"{colour}\"")
                } else {
                    label += &format!("\\n{}", computed_by[i].join(", "));
                    format!("style=filled, fillcolor=\"{colour}\"")
                }
            }
            (None, NodeKind::Input { .. } | NodeKind::Scalar { .. }) => "shape=ellipse".to_string(),
            (None, _) => "style=bold".to_string(),
        };
        let output = if graph.outputs.contains(&(i as u32)) { ", peripheries=2" } else { "" };
        format!("label=\"{label}\", {style}{output}")
    };
    let dot = Dot::with_attr_getters(
        &shown,
        &[Config::NodeNoLabel, Config::EdgeNoLabel, Config::GraphContentOnly],
        &|_, _| String::new(),
        &node_attributes,
    );
    let mut s =
        format!("digraph step {{\n  rankdir=TB;\n  node [shape=box, fontname=monospace, fontsize=10];\n{dot:?}");
    for (phase, label) in [(Phase::Forward, "forward"), (Phase::Backward, "backward"), (Phase::Update, "update")] {
        let _ = writeln!(s, "  subgraph cluster_{label} {{\n    label=\"{label}\";");
        for i in (0..graph.nodes.len()).filter(|&i| live[i] && graph.phases[i] == phase) {
            let _ = writeln!(s, "    {i};");
        }
        s.push_str("  }\n");
    }
    s.push_str(LEGEND);
    s.push_str("}\n");
    s
}

/// The names of the kernels computing each of a graph's `nodes` nodes, from its fusion groups
/// that got a kernel (`(members, kernel name)`): a node's own group's kernel, and those of
/// the groups recomputing it, in the order of `groups`.
pub(crate) fn computed_by<'a>(
    nodes: usize,
    groups: impl IntoIterator<Item = (&'a [NodeId], &'a str)>,
) -> Vec<Vec<&'a str>> {
    let mut by: Vec<Vec<&str>> = vec![Vec::new(); nodes];
    for (members, name) in groups {
        for &m in members {
            by[m as usize].push(name);
        }
    }
    by
}

/// The `.dot`'s legend: one sample node per style.
const LEGEND: &str = r##"  subgraph cluster_legend {
    label="legend";
    legend_fused [label="%N op [shape] dtype\nthe kernel(s) computing it", style=filled, fillcolor="#8dd3c7"];
    legend_unfused [label="run by its eager kernel (matmul, conv, ...)", style=bold];
    legend_input [label="input tensor or run-time number", shape=ellipse];
    legend_output [label="leaves the step (a live tensor or an update)", peripheries=2];
    legend_nokernel [label="fusion group without a kernel: runs eagerly", style="filled,dashed", fillcolor="#eeeeee"];
  }
"##;

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_codegen::ir::{Node, Use};
    use kiln_codegen::passes;
    use kiln_runtime::op_kind::UnaryOp;
    use kiln_runtime::{DType, Layout};

    /// Every live node once, with its label, style and phase cluster, and every read of a live
    /// node as an edge; dead nodes nowhere.
    #[test]
    fn dot_lists_live_nodes_their_reads_and_phases() {
        let mut g = Graph::default();
        let c = Layout::contiguous(&[4]);
        let node = |kind, reads: &[NodeId]| Node {
            kind,
            shape: [4].as_slice().into(),
            dtype: DType::F32,
            reads: reads.iter().map(|&n| Use { node: n, layout: c.clone() }).collect(),
        };
        let x = g.push(node(NodeKind::Input { slot: 0, len: 4 }, &[]), Phase::Forward);
        let a = g.push(node(NodeKind::Unary(UnaryOp::Exp), &[x]), Phase::Forward);
        let dead = g.push(node(NodeKind::Unary(UnaryOp::Neg), &[x]), Phase::Forward);
        let b = g.push(node(NodeKind::Unary(UnaryOp::Neg), &[a]), Phase::Backward);
        g.outputs.push(b);
        let live = passes::live_nodes(&g);
        let fusion = passes::fuse(&g, &live);
        assert_eq!(fusion.groups.len(), 1);
        let dot = to_dot(&g, &live, &fusion, &[Some("kabc".into())]);
        assert!(dot.starts_with("digraph step {\n") && dot.ends_with("}\n"), "{dot}");
        assert!(dot.contains(&format!("{x} [ label=\"%{x} input0 [4] float32\", shape=ellipse]")), "{dot}");
        let kernel = "style=filled, fillcolor=\"#8dd3c7\"";
        assert!(dot.contains(&format!("{a} [ label=\"%{a} exp [4] float32\\nkabc\", {kernel}]")), "{dot}");
        assert!(
            dot.contains(&format!("{b} [ label=\"%{b} neg [4] float32\\nkabc\", {kernel}, peripheries=2]")),
            "{dot}"
        );
        assert!(dot.contains("subgraph cluster_legend {"), "{dot}");
        let eager = to_dot(&g, &live, &fusion, &[None]);
        assert!(
            eager.contains(&format!(
                "{a} [ label=\"%{a} exp [4] float32\\n(no kernel: runs eagerly)\", style=\"filled,dashed\""
            )),
            "{eager}"
        );
        assert!(dot.contains(&format!("{x} -> {a} [ ]")) && dot.contains(&format!("{a} -> {b} [ ]")), "{dot}");
        assert!(!dot.contains(&format!("%{dead} ")) && !dot.contains(&format!("-> {dead} ")), "{dot}");
        let forward = format!("subgraph cluster_forward {{\n    label=\"forward\";\n    {x};\n    {a};\n  }}");
        assert!(dot.contains(&forward), "{dot}");
        assert!(
            dot.contains(&format!("subgraph cluster_backward {{\n    label=\"backward\";\n    {b};\n  }}")),
            "{dot}"
        );
    }
}
