//! A compiled step's graph as TensorBoard's `GraphDef`: one `NodeDef` per live node of the last
//! call ([`CompiledStep::graph_nodes`](crate::CompiledStep::graph_nodes)), named
//! `{phase}/{kernel}/{op}_{id}` (`forward/k1a2b…/tanh_7`; nodes without a generated kernel
//! are `{phase}/{op}_{id}`, and a call with graph breaks puts `graph{i}/` before each), so the
//! Graphs tab draws forward, backward and update as boxes and each fused kernel as a box
//! inside them (a kernel whose nodes span phases is a box in each). Edges are the reads.
//! Attributes: `_output_shapes` (the shape the tab labels edges with), `dtype`,
//! `_XlaCluster` (the kernel, so "color by XLA cluster" colours nodes by kernel),
//! `recomputed_by` (other kernels that recompute the node), `origin` (the source line) and
//! `output` (the value leaves the step); the device is `/device:CPU:0` or `/device:CUDA:i`.

use super::proto::{Attr, AttrValue, DataType, Dim, GraphDef, ListValue, NodeDef, TensorShapeProto, VersionDef};
use crate::capture::{GraphNode, Phase};
use crate::{DType, Device};
use std::collections::BTreeMap;

/// TensorFlow's number for `dtype`.
fn data_type(dtype: DType) -> DataType {
    match dtype {
        DType::F32 => DataType::DtFloat,
        DType::F64 => DataType::DtDouble,
        DType::F16 => DataType::DtHalf,
        DType::BF16 => DataType::DtBfloat16,
        DType::I64 => DataType::DtInt64,
        DType::I32 => DataType::DtInt32,
        DType::U8 => DataType::DtUint8,
        DType::Bool => DataType::DtBool,
    }
}

/// The `GraphDef` of `nodes` (one call's, as `graph_nodes` lists them).
pub(crate) fn graph_def(nodes: &[GraphNode]) -> GraphDef {
    let several = nodes.iter().any(|n| n.graph > 0);
    let name = |n: &GraphNode| {
        let graph = if several { format!("graph{}/", n.graph) } else { String::new() };
        let phase = match n.phase {
            Phase::Forward => "forward",
            Phase::Backward => "backward",
            Phase::Update => "update",
        };
        let kernel = n.kernel.as_ref().map(|k| format!("{k}/")).unwrap_or_default();
        format!("{graph}{phase}/{kernel}{}_{}", n.op, n.id)
    };
    let names: BTreeMap<(usize, usize), String> = nodes.iter().map(|n| ((n.graph, n.id), name(n))).collect();
    let node = nodes
        .iter()
        .map(|n| {
            let mut attr = BTreeMap::new();
            let shape = TensorShapeProto { dim: n.shape.iter().map(|&s| Dim { size: s as i64 }).collect() };
            attr.insert("_output_shapes".into(), list(ListValue { shape: vec![shape], ..Default::default() }));
            attr.insert("dtype".into(), AttrValue { value: Some(Attr::Type(data_type(n.dtype) as i32)) });
            if let Some(k) = &n.kernel {
                attr.insert("_XlaCluster".into(), string(k));
            }
            if !n.recomputed_by.is_empty() {
                let s = n.recomputed_by.iter().map(|k| k.as_bytes().to_vec()).collect();
                attr.insert("recomputed_by".into(), list(ListValue { s, ..Default::default() }));
            }
            if let Some(origin) = &n.origin {
                attr.insert("origin".into(), string(origin));
            }
            if n.output {
                attr.insert("output".into(), AttrValue { value: Some(Attr::B(true)) });
            }
            NodeDef {
                name: names[&(n.graph, n.id)].clone(),
                op: n.op.clone(),
                input: n.inputs.iter().map(|&i| names[&(n.graph, i)].clone()).collect(),
                device: match n.device {
                    Device::Cpu => "/device:CPU:0".into(),
                    Device::Cuda(i) => format!("/device:CUDA:{i}"),
                },
                attr,
            }
        })
        .collect();
    // torch's `add_graph` writes producer 22.
    GraphDef { node, versions: Some(VersionDef { producer: 22 }) }
}

/// A list attribute.
fn list(l: ListValue) -> AttrValue {
    AttrValue { value: Some(Attr::List(l)) }
}

/// A string attribute.
fn string(s: &str) -> AttrValue {
    AttrValue { value: Some(Attr::S(s.as_bytes().to_vec())) }
}
