//! The kernels of eager CUDA ops: each op is a fused group of one op, emitted by
//! [`emit_strided`] (ARCHITECTURE: no hand-written `.cu`). The tensor layer asks for kernels
//! here only, so [`every_eager_kernel`] is exactly the set the NVRTC test compiles.

use super::strided::{emit_strided, StridedKernel};
use super::vector::{emit_vector, VectorKernel};
use crate::expr::Expr;
use kiln_runtime::cuda::CudaError;
use kiln_runtime::op_kind::{BinaryOp, CmpOp, LogicalOp, UnaryOp};
use kiln_runtime::DType;

/// An eager elementwise op on CUDA tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EagerOp {
    /// `op(x)`: one input of the operand dtype, output of the same dtype.
    Unary(UnaryOp),
    /// `op(a, b)`: two inputs of the operand dtype, output of the same dtype.
    Binary(BinaryOp),
    /// `op(a, b)`: two inputs of the operand dtype, a Bool output.
    Cmp(CmpOp),
    /// `op(a, b)` on the operands' truth (non-zero is true, NaN too): two inputs of the
    /// operand dtype, a Bool output.
    Logical(LogicalOp),
    /// Logical not (`x == 0`): one input of the operand dtype, a Bool output.
    Not,
    /// `where(cond, a, b)`: a Bool condition and two inputs of the operand dtype.
    Where,
    /// A strided copy converting the operand dtype to the output dtype (casts, `contiguous`,
    /// `clone`, `copy_`, `fill_` from a broadcast scalar).
    Copy,
}

impl EagerOp {
    /// The expression of one output element.
    pub fn expr(self) -> Expr {
        let x = |i| Box::new(Expr::Input(i));
        match self {
            EagerOp::Unary(op) => Expr::Unary(op, x(0)),
            EagerOp::Binary(op) => Expr::Binary(op, x(0), x(1)),
            EagerOp::Cmp(op) => Expr::Cmp(op, x(0), x(1)),
            EagerOp::Logical(op) => logical(op),
            EagerOp::Not => Expr::Cmp(CmpOp::Eq, x(0), Box::new(Expr::Const(0.0))),
            EagerOp::Where => Expr::Where(x(0), x(1), x(2)),
            EagerOp::Copy => Expr::Input(0),
        }
    }

    /// The dtypes of the inputs for an operand dtype.
    pub fn inputs(self, dtype: DType) -> Vec<DType> {
        match self {
            EagerOp::Unary(_) | EagerOp::Not | EagerOp::Copy => vec![dtype],
            EagerOp::Binary(_) | EagerOp::Cmp(_) | EagerOp::Logical(_) => vec![dtype, dtype],
            EagerOp::Where => vec![DType::Bool, dtype, dtype],
        }
    }
}

/// `op` of inputs 0 and 1 on their truth, with comparisons and `where` only, so it computes in
/// any compute type (a NaN is true: `NaN != 0`, and `where` tests `cond != 0`).
fn logical(op: LogicalOp) -> Expr {
    let x = |i| Box::new(Expr::Input(i));
    let c = |v| Box::new(Expr::Const(v));
    let truth = |i| Box::new(Expr::Cmp(CmpOp::Ne, x(i), c(0.0)));
    match op {
        LogicalOp::And => Expr::Where(x(0), truth(1), c(0.0)),
        LogicalOp::Or => Expr::Where(x(0), c(1.0), truth(1)),
        LogicalOp::Xor => Expr::Cmp(CmpOp::Ne, truth(0), truth(1)),
    }
}

/// The kernel of `op` over operands of `dtype` into an output of `out`, strided over `ndim`
/// dims, computing in `dtype`'s compute type.
pub fn eager_kernel(op: EagerOp, dtype: DType, out: DType, ndim: usize) -> Result<StridedKernel, CudaError> {
    emit_strided(&op.expr(), &op.inputs(dtype), dtype, out, ndim)
}

/// The contiguous fast path of [`eager_kernel`] (see [`super::vector`]): inputs contiguous,
/// or one value where `broadcast`.
pub fn eager_vector_kernel(
    op: EagerOp,
    dtype: DType,
    out: DType,
    broadcast: &[bool],
) -> Result<VectorKernel, CudaError> {
    emit_vector(&op.expr(), &op.inputs(dtype), dtype, out, broadcast)
}

/// Every (op, operand dtype, output dtype) the tensor layer can ask for: float ops on float
/// dtypes, integer ops (those that keep integer dtypes) on integer and bool dtypes,
/// comparisons, logical not and `where` on every dtype, the logical ops of two operands on Bool
/// (the op layer converts their operands to Bool first, as on the CPU), copies between every
/// pair of dtypes.
pub fn eager_ops() -> Vec<(EagerOp, DType, DType)> {
    let mut v = Vec::new();
    for d in DType::ALL {
        for &op in UnaryOp::ALL {
            if (d.is_float() && !op.is_int_only()) || (!d.is_float() && op.keeps_int_dtype()) {
                v.push((EagerOp::Unary(op), d, d));
            }
        }
        for &op in BinaryOp::ALL {
            if (d.is_float() && !op.is_bitwise()) || (!d.is_float() && op.keeps_int_dtype()) {
                v.push((EagerOp::Binary(op), d, d));
            }
        }
        v.extend(CmpOp::ALL.iter().map(|&op| (EagerOp::Cmp(op), d, DType::Bool)));
        if d == DType::Bool {
            v.extend(LogicalOp::ALL.iter().map(|&op| (EagerOp::Logical(op), d, DType::Bool)));
        }
        v.push((EagerOp::Not, d, DType::Bool));
        v.push((EagerOp::Where, d, d));
        v.extend(DType::ALL.iter().map(|&out| (EagerOp::Copy, d, out)));
    }
    v
}

/// The kernels of [`eager_ops`] over `ndim` dims.
pub fn every_eager_kernel(ndim: usize) -> Result<Vec<StridedKernel>, CudaError> {
    eager_ops().into_iter().map(|(op, d, out)| eager_kernel(op, d, out, ndim)).collect()
}
