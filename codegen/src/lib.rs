//! kiln-codegen: from a captured graph to kernels.
//!
//! Today it holds the op expressions ([`expr::Expr`]) that a fused elementwise kernel computes,
//! built from the same op kinds the eager kernels use (`kiln_runtime::op_kind`), with a scalar
//! interpreter that defines their meaning for tests. The graph IR, passes, the Cranelift CPU
//! emitter and the CUDA C emitter come with the compile() and CUDA work.

pub mod expr;

pub use expr::Expr;
