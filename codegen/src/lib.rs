//! kiln-codegen: from a captured graph to kernels.
//!
//! In the order data passes through it: the graph IR of a captured step ([`ir`]: nodes, reads
//! through views, the structural hash that keys the plan cache); the passes ([`passes`]: dead
//! nodes and common subexpressions, fusion with the reason of every refusal, lowering a group
//! to a kernel, ordering and liveness); the fused-kernel IR ([`kernel`]: elementwise and
//! reduction kernels and their C ABI); the Cranelift CPU back end ([`cpu`]); and the CUDA C
//! emitter ([`cuda`]) for expressions ([`expr`], with the f64 interpreter that defines their
//! meaning in tests).

pub mod cpu;
pub mod cuda;
pub mod expr;
pub mod ir;
pub mod kernel;
pub mod listing;
pub mod passes;

pub use expr::Expr;
