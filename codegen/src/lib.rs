//! kiln-codegen: from a captured graph to kernels.
//!
//! Today it holds the op expressions ([`expr::Expr`]) that a fused elementwise kernel computes,
//! built from the same op kinds the eager kernels use (`kiln_runtime::op_kind`), with a scalar
//! interpreter that defines their meaning for tests, and the CUDA C emitter ([`cuda`]) that turns
//! an expression into an NVRTC-compiled elementwise kernel. The graph IR, passes and the
//! Cranelift CPU emitter come with the compile() work.

pub mod cpu;
pub mod cuda;
pub mod expr;
pub mod ir;
pub mod kernel;
pub mod passes;

pub use expr::Expr;
