//! The captured step's graph IR and its structural hash ("graph shape").

mod graph;
mod hash;

pub use graph::{draw_of_scalars, draw_words, Graph, Node, NodeId, NodeKind, Origin, Phase, RandDist, Use};
pub use hash::structural_hash;
