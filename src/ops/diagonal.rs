//! Diagonals: `diagonal` (a view), `diag` (a diagonal of a matrix, or a matrix from a vector)
//! and `trace`. The view's gradient is written into zeros with a `scatter` over the two dims
//! flattened, so it is differentiable again and captured by `kiln::compile` like any op.

use crate::error::{bail, OrPanic, Result};
use crate::tensor::normalize_dim;
use crate::Tensor;
use kiln_runtime::{Layout, Shape};

/// Where a diagonal with `offset` starts in an `rows × cols` matrix, and its length.
fn diagonal_extent(rows: usize, cols: usize, offset: i64) -> (usize, usize, usize) {
    let (r0, c0) = if offset >= 0 { (0, offset as usize) } else { (offset.unsigned_abs() as usize, 0) };
    let len = rows.saturating_sub(r0).min(cols.saturating_sub(c0));
    (r0.min(rows), c0.min(cols), len)
}

/// `g` (the gradient of a diagonal: the diagonal's dim last) written into zeros of `shape` at
/// the diagonal of dims `d1`, `d2` with `offset`.
fn diagonal_backward(g: &Tensor, shape: &[usize], offset: i64, d1: usize, d2: usize) -> Tensor {
    let (rows, cols) = (shape[d1], shape[d2]);
    let (r0, c0, len) = diagonal_extent(rows, cols, offset);
    // The input's other dims in order, then d1 and d2 merged into one.
    let others: Vec<usize> = (0..shape.len()).filter(|&d| d != d1 && d != d2).collect();
    let mut flat: Vec<i64> = others.iter().map(|&d| shape[d] as i64).collect();
    flat.push((rows * cols) as i64);
    let positions: Vec<i64> = (0..len).map(|k| ((k + r0) * cols + k + c0) as i64).collect();
    let mut index_shape = vec![1i64; others.len()];
    index_shape.push(len as i64);
    let mut g_shape: Vec<i64> = g.shape().iter().map(|&n| n as i64).collect();
    let index = Tensor::from_vec(positions, [len]).to(&g.device()).reshape(&index_shape).expand(&g_shape);
    let zeros = Tensor::zeros_opts(flat.iter().map(|&n| n as usize).collect::<Vec<_>>(), g.dtype(), g.device());
    let written = zeros.scatter(-1, &index, g);
    // Back to the input's shape: the others, d1, d2 split again, then permuted into place.
    g_shape.pop();
    g_shape.extend([rows as i64, cols as i64]);
    let order: Vec<usize> = others.iter().copied().chain([d1, d2]).collect();
    let mut inverse = vec![0i64; order.len()];
    for (i, &d) in order.iter().enumerate() {
        inverse[d] = i as i64;
    }
    written.reshape(&g_shape).permute(&inverse)
}

impl Tensor {
    /// The diagonal of the matrices over dims `dim1` and `dim2`, offset above (`offset > 0`) or
    /// below the main one, as a view whose last dim is the diagonal (`x.diagonal(offset, dim1,
    /// dim2)`; PyTorch's defaults are 0, 0, 1).
    #[track_caller]
    pub fn diagonal(&self, offset: i64, dim1: i64, dim2: i64) -> Tensor {
        self.try_diagonal(offset, dim1, dim2).or_panic()
    }

    /// [`Tensor::diagonal`] returning an error for dims out of range or equal.
    #[track_caller]
    pub fn try_diagonal(&self, offset: i64, dim1: i64, dim2: i64) -> Result<Tensor> {
        if self.dim() < 2 {
            bail!("diagonal", Shape, "expected a tensor of at least 2 dimensions, but got shape {:?}", self.shape());
        }
        let (d1, d2) = (normalize_dim("diagonal", dim1, self.dim())?, normalize_dim("diagonal", dim2, self.dim())?);
        if d1 == d2 {
            bail!("diagonal", Index, "diagonal dimensions cannot be identical {dim1}, {dim2}");
        }
        let l = self.layout();
        let (r0, c0, len) = diagonal_extent(l.shape()[d1], l.shape()[d2], offset);
        let keep = (0..self.dim()).filter(|&d| d != d1 && d != d2);
        let shape: Shape = keep.clone().map(|d| l.shape()[d]).chain([len]).collect();
        let strides = keep.map(|d| l.strides()[d]).chain([l.strides()[d1] + l.strides()[d2]]).collect();
        let offset_elems = if len == 0 { l.offset() } else { l.offset() + r0 * l.strides()[d1] + c0 * l.strides()[d2] };
        let view = self.with_layout(Layout::new(shape, strides, offset_elems));
        let input_shape = self.shape().to_vec();
        Ok(self.tracked_view(view, "DiagonalBackward0", move |g| diagonal_backward(g, &input_shape, offset, d1, d2)))
    }

    /// For a matrix, a copy of its diagonal with `diagonal` offset; for a vector, the square
    /// matrix with the vector on that diagonal and zeros elsewhere (`torch.diag(x, diagonal)`).
    #[track_caller]
    pub fn diag(&self, diagonal: i64) -> Tensor {
        self.try_diag(diagonal).or_panic()
    }

    /// [`Tensor::diag`] returning an error unless the tensor has one or two dims.
    #[track_caller]
    pub fn try_diag(&self, diagonal: i64) -> Result<Tensor> {
        match self.dim() {
            1 => {
                let n = self.shape()[0] + diagonal.unsigned_abs() as usize;
                // Written into n × n zeros as a diagonal's gradient would be.
                Ok(diagonal_backward(self, &[n, n], diagonal, 0, 1))
            }
            2 => Ok(self.try_diagonal(diagonal, 0, 1)?.deep_clone()),
            _ => bail!("diag", Shape, "expected a 1-D or 2-D tensor, but got shape {:?}", self.shape()),
        }
    }

    /// The sum of the main diagonal of a matrix (`torch.trace`); integer inputs sum to i64.
    #[track_caller]
    pub fn trace(&self) -> Tensor {
        self.try_trace().or_panic()
    }

    /// [`Tensor::trace`] returning an error unless the tensor is a matrix.
    #[track_caller]
    pub fn try_trace(&self) -> Result<Tensor> {
        if let Some(c) = crate::amp::autocast::operands("trace", &[Some(self)])? {
            return c.arg(0).try_trace();
        }
        if self.dim() != 2 {
            bail!("trace", Shape, "expected a matrix, but got shape {:?}", self.shape());
        }
        self.try_diagonal(0, 0, 1)?.try_sum()
    }
}
