//! `KILN_DUMP_DIR=dir`: each new plan's graph as `step-N.dot` (fusion groups coloured,
//! forward/backward/update in labelled clusters) and each new kernel's source: CLIF as
//! `NAME.clif` (CPU), CUDA C as `NAME.cu`.

use kiln_codegen::ir::{Graph, NodeKind, Phase};
use kiln_codegen::passes::Fusion;
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

/// Writes `graph` with its fusion groups as the next `step-N.dot`.
pub(crate) fn graph(graph: &Graph, live: &[bool], fusion: &Fusion) {
    let Some(d) = dir() else { return };
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let _ = std::fs::write(d.join(format!("step-{n}.dot")), to_dot(graph, live, fusion));
}

/// Writes a kernel's source as `NAME.EXT` (`clif` for the CPU's, `cu` for CUDA C).
pub(crate) fn kernel(name: &str, summary: &str, source: &str, ext: &str) {
    let Some(d) = dir() else { return };
    let comment = if ext == "cu" { "//" } else { ";" };
    let _ = std::fs::write(d.join(format!("{name}.{ext}")), format!("{comment} {summary}\n{source}"));
}

/// The graph in Graphviz's language.
pub(crate) fn to_dot(graph: &Graph, live: &[bool], fusion: &Fusion) -> String {
    const COLOURS: [&str; 8] = ["#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5"];
    let mut s = String::from("digraph step {\n  rankdir=TB;\n  node [shape=box, fontname=monospace, fontsize=10];\n");
    for (phase, label) in [(Phase::Forward, "forward"), (Phase::Backward, "backward"), (Phase::Update, "update")] {
        let _ = writeln!(s, "  subgraph cluster_{label} {{\n    label=\"{label}\";");
        for (i, n) in graph.nodes.iter().enumerate() {
            if graph.phases[i] != phase || !live[i] {
                continue;
            }
            let style = match (fusion.group_of[i], &n.kind) {
                (Some(g), _) => format!(
                    "style=filled, fillcolor=\"{}\", tooltip=\"kernel {g}\"",
                    COLOURS[g as usize % COLOURS.len()]
                ),
                (None, NodeKind::Input { .. } | NodeKind::Scalar { .. }) => "shape=ellipse".to_string(),
                (None, _) => "style=bold".to_string(),
            };
            let output = if graph.outputs.contains(&(i as u32)) { ", peripheries=2" } else { "" };
            let _ = writeln!(
                s,
                "    n{i} [label=\"%{i} {} {:?} {}\", {style}{output}];",
                n.kind.name(),
                n.shape.as_slice(),
                n.dtype
            );
        }
        s.push_str("  }\n");
    }
    for (i, n) in graph.nodes.iter().enumerate() {
        if live[i] {
            for u in &n.reads {
                let _ = writeln!(s, "  n{} -> n{i};", u.node);
            }
        }
    }
    s.push_str("}\n");
    s
}
