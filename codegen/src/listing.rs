//! A fused kernel as a person reads it: the kernel IR of a lowered group as pseudo-code over its
//! iteration space, with each line tied to the graph node it computes (`%N`, the numbering of
//! `KILN_DEBUG=graph` and the `.dot` dump) and to the source line that recorded that node.
//! `KILN_DEBUG=kernels` prints it, the dump folder keeps it as `NAME.txt`, and
//! `KernelInfo::listing` returns it; the back end's own code (CLIF, CUDA C) is shown apart.

use crate::ir::{Graph, NodeId, Phase};
use crate::kernel::{InnerStride, Inst, InstOp, KernelInput};
use crate::passes::{GroupKernel, LoweredGroup, ScalarArg};
use kiln_runtime::op_kind::BinaryOp;
use kiln_runtime::DType;
use std::fmt::Write;

/// The listing of kernel `name` (from `backend`: `cranelift` or `cuda`), which computes
/// `lowered`, a fusion group of `graph` whose member ops are `ops` (in order, space-separated).
pub fn listing(name: &str, backend: &str, ops: &str, lowered: &LoweredGroup, graph: &Graph) -> String {
    let mut s = format!("kernel {name} ({backend}): {ops}\n");
    let (inputs, scalars): (&[KernelInput], usize) = match &lowered.kernel {
        GroupKernel::Elementwise(k) => (&k.inputs, k.scalars),
        GroupKernel::Reduce(k) => (&k.inputs, k.scalars),
    };
    let rank = lowered.shape.len();
    let (kept, reduced) = lowered.shape.split_at(rank - lowered.reduce_rank);
    let index = if lowered.reduce_rank == 0 { "i" } else { "i, j" };
    match lowered.reduce_rank {
        0 => {
            let _ = writeln!(s, "  for i in {:?} (dims merged where every input allows):", lowered.shape.as_slice());
        }
        _ => {
            let _ = writeln!(s, "  for i in {kept:?}, reducing j over {reduced:?}:");
        }
    }
    for (k, (input, u)) in inputs.iter().zip(&lowered.loads).enumerate() {
        let inner = match input.inner {
            InnerStride::Unit => "contiguous",
            InnerStride::Broadcast => "broadcast",
            InnerStride::Strided => "strided",
        };
        let _ = writeln!(
            s,
            "    in{k}: {} {inner}, {} read as {:?}",
            short(input.dtype),
            node_name(graph, u.node),
            u.layout.shape()
        );
    }
    for (j, arg) in lowered.scalars.iter().enumerate().take(scalars) {
        let _ = match arg {
            ScalarArg::Node(n) => writeln!(s, "    s{j}: {}, a run-time number", node_name(graph, *n)),
            ScalarArg::Value(v) => writeln!(s, "    s{j}: {v} (fixed by the plan)"),
        };
    }
    let mut origins = lowered.origins.iter().copied();
    let mut lines = |s: &mut String, insts: &[Inst], indent: &str| {
        for (v, inst) in insts.iter().enumerate() {
            let node = origins.next().expect("one origin per instruction");
            let code = format!("{indent}v{v} = {}", expr(&inst.op, inst, index));
            match inst.op {
                InstOp::Load(_) | InstOp::Scalar(_) | InstOp::Reduced(_) => {
                    let _ = writeln!(s, "{code}");
                }
                _ => {
                    let _ = writeln!(s, "{code:<34} {:<5} {}", short(inst.dtype), where_from(graph, node));
                }
            }
        }
    };
    match &lowered.kernel {
        GroupKernel::Elementwise(k) => {
            lines(&mut s, &k.insts, "    ");
            for (o, (&v, &node)) in k.outputs.iter().zip(&lowered.outputs).enumerate() {
                let _ = writeln!(s, "    out{o}[i] = v{v}  ({})", node_name(graph, node));
            }
        }
        GroupKernel::Reduce(k) => {
            for (t, stage) in k.stages.iter().enumerate() {
                let scale = stage.scale.map_or(String::new(), |j| format!(" × s{j}"));
                let _ = writeln!(s, "    stage {t}, for each j:");
                lines(&mut s, &stage.insts, "      ");
                let _ = writeln!(
                    s,
                    "    r{t} = {} over j of v{}{scale}, as {}  ({})",
                    stage.op.name(),
                    stage.reduced,
                    short(stage.output),
                    node_name(graph, lowered.outputs[t])
                );
                let _ = writeln!(s, "    out{t}[i] = r{t}");
            }
            if let Some(e) = &k.epilogue {
                let _ = writeln!(s, "    epilogue, for each j:");
                lines(&mut s, &e.insts, "      ");
                let n = k.stages.len();
                for (o, (&v, &node)) in e.outputs.iter().zip(&lowered.outputs[n..]).enumerate() {
                    let _ = writeln!(s, "      out{}[i, j] = v{v}  ({})", n + o, node_name(graph, node));
                }
            }
        }
    }
    s
}

/// A dtype as Rust spells its element type (`f32`, `bf16`, `i64`, `bool`).
fn short(dtype: DType) -> String {
    format!("{dtype:?}").to_lowercase()
}

/// `%N kind [shape]`, the graph dump's name of node `n`.
fn node_name(graph: &Graph, n: NodeId) -> String {
    let node = graph.node(n);
    format!("%{n} {} {:?}", node.kind.name(), node.shape.as_slice())
}

/// Node `n` and where it came from: `%N kind  file:line:col` (`backward of …`, `update at …`).
fn where_from(graph: &Graph, n: NodeId) -> String {
    let node = format!("%{n} {}", graph.node(n).kind.name());
    let origin = &graph.origins[n as usize];
    match graph.phases[n as usize] {
        Phase::Update if origin.is_known() => format!("{node:<16} update at {origin}"),
        _ => format!("{node:<16} {origin}"),
    }
}

/// The instruction's right-hand side (`index`: how loads are indexed).
fn expr(op: &InstOp, inst: &Inst, index: &str) -> String {
    use InstOp::*;
    match *op {
        Load(k) => format!("in{k}[{index}]"),
        Scalar(j) => format!("s{j}"),
        Const(c) => format!("{c:?}"),
        Unary(u, a) => format!("{}(v{a})", u.name()),
        Binary(b, a, c) => match b {
            BinaryOp::Add => format!("v{a} + v{c}"),
            BinaryOp::Sub => format!("v{a} - v{c}"),
            BinaryOp::Mul => format!("v{a} * v{c}"),
            BinaryOp::Div => format!("v{a} / v{c}"),
            _ => format!("{}(v{a}, v{c})", b.name()),
        },
        Cmp(c, a, b) => format!("{}(v{a}, v{b})", c.name()),
        Logical(l, a, b) => format!("{}(v{a}, v{b})", l.name()),
        Not(a) => format!("!v{a}"),
        Where(c, a, b) => format!("v{c} ? v{a} : v{b}"),
        Cast(a) => format!("{}(v{a})", short(inst.dtype)),
        Reduced(t) => format!("r{t}"),
        Rand { dist, params } => format!("{}(seed s{params}..s{}, element {index})", dist.name(), params + 3),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Node, NodeKind, Origin, Use};
    use crate::passes::lower_group;
    use kiln_runtime::op_kind::{ReduceOp, UnaryOp};
    use kiln_runtime::Layout;

    fn node(kind: NodeKind, shape: &[usize], reads: &[(NodeId, &[usize])]) -> Node {
        let reads = reads.iter().map(|&(n, s)| Use { node: n, layout: Layout::contiguous(s) }).collect();
        Node { kind, shape: shape.into(), dtype: DType::F32, reads }
    }

    #[test]
    fn an_elementwise_listing_names_inputs_nodes_lines_and_outputs() {
        let mut g = Graph::default();
        let x = g.push(node(NodeKind::Input { slot: 0, len: 6 }, &[6], &[]), Phase::Forward);
        let s = g.push(node(NodeKind::Scalar { slot: 0 }, &[], &[]), Phase::Forward);
        let m = g.push(node(NodeKind::Binary(BinaryOp::Mul), &[2, 3], &[(x, &[2, 3]), (s, &[])]), Phase::Forward);
        let t = g.push(node(NodeKind::Unary(UnaryOp::Tanh), &[2, 3], &[(m, &[2, 3])]), Phase::Backward);
        let here = std::panic::Location::caller();
        g.origins[m as usize] = Origin { at: Some(here), grad_of: None };
        g.origins[t as usize] = Origin { at: Some(here), grad_of: Some("MulBackward0".into()) };
        let lowered = lower_group(&g, &[m, t], None, |n| n == t);
        let text = listing("k1", "cpu", "mul tanh", &lowered, &g);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "kernel k1 (cpu): mul tanh");
        assert_eq!(lines[1], "  for i in [6] (dims merged where every input allows):");
        assert_eq!(lines[2], "    in0: f32 contiguous, %0 input0 [6] read as [2, 3]");
        assert_eq!(lines[3], "    s0: %1 scalar0 [], a run-time number");
        assert_eq!(lines[4], "    v0 = in0[i]");
        assert_eq!(lines[5], "    v1 = s0");
        assert!(lines[6].starts_with("    v2 = v0 * v1 ") && lines[6].contains(" f32   %2 mul "), "{text}");
        assert!(lines[6].ends_with(&format!(" {here}")), "{text}");
        assert!(lines[7].starts_with("    v3 = tanh(v2) "), "{text}");
        assert!(lines[7].ends_with(&format!("{:<16} backward of MulBackward0 ({here})", "%3 tanh")), "{text}");
        assert_eq!(lines[8], "    out0[i] = v3  (%3 tanh [2, 3])");
        assert_eq!(lines.len(), 9, "{text}");
    }

    #[test]
    fn a_reduction_listing_shows_each_stage_and_its_output() {
        let mut g = Graph::default();
        let x = g.push(node(NodeKind::Input { slot: 0, len: 12 }, &[12], &[]), Phase::Forward);
        let e = g.push(node(NodeKind::Unary(UnaryOp::Exp), &[3, 4], &[(x, &[3, 4])]), Phase::Forward);
        let r = g.push(
            node(NodeKind::Reduce { op: ReduceOp::Sum, dims: 0b10, divide: None, index: 0 }, &[3], &[(e, &[3, 4])]),
            Phase::Forward,
        );
        g.outputs = vec![r];
        let fusion = crate::passes::fuse(&g, &[true; 3]);
        let gid = fusion.group_of[r as usize].expect("fused");
        let members = &fusion.groups[gid as usize];
        let lowered = lower_group(&g, members, fusion.parts[gid as usize].as_ref(), |n| n == r);
        let text = listing("k2", "cpu", "exp sum", &lowered, &g);
        assert!(text.contains("  for i in [3], reducing j over [4]:\n"), "{text}");
        assert!(text.contains("    stage 0, for each j:\n      v0 = in0[i, j]\n      v1 = exp(v0)"), "{text}");
        assert!(text.contains("    r0 = sum over j of v1, as f32  (%2 sum [3])\n    out0[i] = r0\n"), "{text}");
    }
}
