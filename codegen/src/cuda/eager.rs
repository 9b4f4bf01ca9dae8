//! The kernels of eager CUDA ops: each op is a fused group of one op, emitted by
//! [`emit_strided`] (ARCHITECTURE: no hand-written `.cu`). The tensor layer asks for kernels
//! here only, so [`every_eager_kernel`] is exactly the set the NVRTC test compiles.

use super::strided::{emit_strided, StridedKernel};
use crate::expr::Expr;
use kiln_runtime::cuda::CudaError;
use kiln_runtime::op_kind::{BinaryOp, CmpOp, UnaryOp};
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
            EagerOp::Where => Expr::Where(x(0), x(1), x(2)),
            EagerOp::Copy => Expr::Input(0),
        }
    }

    /// The dtypes of the inputs for an operand dtype.
    pub fn inputs(self, dtype: DType) -> Vec<DType> {
        match self {
            EagerOp::Unary(_) | EagerOp::Copy => vec![dtype],
            EagerOp::Binary(_) | EagerOp::Cmp(_) => vec![dtype, dtype],
            EagerOp::Where => vec![DType::Bool, dtype, dtype],
        }
    }
}

/// The kernel of `op` over operands of `dtype` into an output of `out`, strided over `ndim`
/// dims, computing in `dtype`'s compute type.
pub fn eager_kernel(op: EagerOp, dtype: DType, out: DType, ndim: usize) -> Result<StridedKernel, CudaError> {
    emit_strided(&op.expr(), &op.inputs(dtype), dtype, out, ndim)
}

/// Every (op, operand dtype, output dtype) the tensor layer can ask for: float ops on float
/// dtypes, integer ops (those that keep integer dtypes) on integer and bool dtypes,
/// comparisons and `where` on every dtype, copies between every pair of dtypes.
pub fn eager_ops() -> Vec<(EagerOp, DType, DType)> {
    let mut v = Vec::new();
    for d in DType::ALL {
        for op in UnaryOp::ALL {
            if (d.is_float() && !op.is_int_only()) || (!d.is_float() && op.keeps_int_dtype()) {
                v.push((EagerOp::Unary(op), d, d));
            }
        }
        for op in BinaryOp::ALL {
            if (d.is_float() && !op.is_bitwise()) || (!d.is_float() && op.keeps_int_dtype()) {
                v.push((EagerOp::Binary(op), d, d));
            }
        }
        v.extend(CmpOp::ALL.iter().map(|&op| (EagerOp::Cmp(op), d, DType::Bool)));
        v.push((EagerOp::Where, d, d));
        v.extend(DType::ALL.iter().map(|&out| (EagerOp::Copy, d, out)));
    }
    v
}

/// The kernels of [`eager_ops`] over `ndim` dims.
pub fn every_eager_kernel(ndim: usize) -> Result<Vec<StridedKernel>, CudaError> {
    eager_ops().into_iter().map(|(op, d, out)| eager_kernel(op, d, out, ndim)).collect()
}
