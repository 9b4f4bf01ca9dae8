//! `F.embedding`: rows of a weight matrix looked up by index.

use super::loss::{check_float, err, named};
use crate::error::{ErrorKind, OrPanic, Result};
use crate::tensor::Tensor;
use kiln_runtime::DType;

/// The rows of `weight` `(num_embeddings, embedding_dim)` at `indices` (int64 or int32, any
/// shape): the result has shape `indices.shape() + [embedding_dim]` (`F.embedding`).
///
/// With `padding_idx` (negative counts from the end) the output still holds that row's values,
/// but the row gets no gradient, as in PyTorch.
#[track_caller]
pub fn embedding(indices: &Tensor, weight: &Tensor, padding_idx: Option<i64>) -> Tensor {
    try_embedding(indices, weight, padding_idx).or_panic()
}

/// [`embedding`] returning an error (an index out of range, a non-integer index tensor, a
/// weight that is not a 2-D float matrix, a `padding_idx` out of range).
#[track_caller]
pub fn try_embedding(indices: &Tensor, weight: &Tensor, padding_idx: Option<i64>) -> Result<Tensor> {
    const OP: &str = "embedding";
    check_float(OP, "weight", weight)?;
    if weight.dim() != 2 {
        return Err(err(
            OP,
            ErrorKind::Shape,
            format!("expected a 2-D weight (num_embeddings, embedding_dim), got shape {:?}", weight.shape()),
        ));
    }
    if !matches!(indices.dtype(), DType::I64 | DType::I32) {
        return Err(err(
            OP,
            ErrorKind::DType,
            format!("expected indices of dtype int64 or int32, got {} (shape {:?})", indices.dtype(), indices.shape()),
        ));
    }
    let (rows, dim) = (weight.shape()[0], weight.shape()[1]);
    let flat = named(OP, indices.try_to_dtype(DType::I64))?.flatten(0, -1);
    if let Some(bad) = flat.contiguous().to_vec::<i64>().into_iter().find(|&i| i < 0 || i >= rows as i64) {
        return Err(err(
            OP,
            ErrorKind::Index,
            format!(
                "index {bad} is out of range for {rows} embeddings (weight shape {:?}, indices shape {:?})",
                weight.shape(),
                indices.shape()
            ),
        ));
    }
    let padding = match padding_idx {
        None => None,
        Some(p) if p >= -(rows as i64) && p < rows as i64 => Some(if p < 0 { p + rows as i64 } else { p }),
        Some(p) => {
            return Err(err(OP, ErrorKind::Index, format!("padding_idx {p} must be within num_embeddings ({rows})")))
        }
    };
    let rows_out = named(OP, weight.try_index_select(0, &flat))?;
    let rows_out = match padding {
        // Looked-up padding rows are taken from a detached copy of the selected rows: same
        // values, no gradient (only the looked-up rows are touched, never the whole table).
        Some(p) if crate::is_grad_enabled() && weight.requires_grad() => {
            named(OP, Tensor::try_where(&flat.eq(p).unsqueeze(1), rows_out.detach(), &rows_out))?
        }
        _ => rows_out,
    };
    let mut shape: Vec<i64> = indices.shape().iter().map(|&s| s as i64).collect();
    shape.push(dim as i64);
    named(OP, rows_out.try_reshape(&shape))
}
