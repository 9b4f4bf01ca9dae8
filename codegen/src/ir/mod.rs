//! The captured step's graph IR and its structural hash ("graph shape").

mod graph;
mod hash;

pub use graph::{Graph, Node, NodeId, NodeKind, Phase, Use};
pub use hash::structural_hash;
