//! `unfold`: the sliding windows of one dim as a new last dim, a strided view of the same
//! storage (as PyTorch's `Tensor.unfold`). Its gradient adds each window's gradient back into
//! the positions it covers (a `scatter_add` into zeros), so overlapping windows sum and the
//! rule is differentiable again.

use crate::error::{bail, OrPanic, Result};
use crate::Tensor;
use kiln_runtime::{Layout, Shape};

/// The gradient of `unfold(d, size, step)` (giving `windows` windows) of a tensor of `shape`
/// for `g` (the view's shape: windows along `d`, the window's elements last).
fn unfold_backward(g: &Tensor, shape: &[usize], d: usize, (windows, size, step): (usize, usize, usize)) -> Tensor {
    let input: Vec<usize> = if shape.is_empty() { vec![1] } else { shape.to_vec() };
    let nd = input.len();
    // The window elements moved next to their window, then both dims merged into one.
    let order: Vec<i64> = (0..=d).chain([nd]).chain(d + 1..nd).map(|k| k as i64).collect();
    let mut merged: Vec<i64> = input.iter().map(|&n| n as i64).collect();
    merged[d] = (windows * size) as i64;
    let g = g.reshape(with_window(&input, d, windows, size)).permute(&order).reshape(&merged);
    let positions: Vec<i64> = (0..windows).flat_map(|w| (0..size).map(move |k| (w * step + k) as i64)).collect();
    let mut along = vec![1i64; nd];
    along[d] = positions.len() as i64;
    let index = Tensor::from_vec(positions, [windows * size]).to(&g.device()).reshape(&along).expand(&merged);
    let grad = Tensor::zeros_opts(&input, g.dtype(), g.device()).scatter_add(d as i64, &index, &g);
    let shape: Vec<i64> = shape.iter().map(|&n| n as i64).collect();
    grad.reshape(&shape)
}

/// `shape` with dim `d` holding `windows` and a last dim of `size`: the view's shape.
fn with_window(shape: &[usize], d: usize, windows: usize, size: usize) -> Vec<i64> {
    let mut out: Vec<i64> = shape.iter().map(|&n| n as i64).collect();
    out[d] = windows as i64;
    out.push(size as i64);
    out
}

impl Tensor {
    /// The windows of `size` elements along `dimension`, `step` apart, as a view with one more
    /// dim (`x.unfold(dimension, size, step)`): `dimension` holds the `(len − size) / step + 1`
    /// windows and the new last dim each window's elements. A 0-dim tensor counts as one
    /// element. Differentiable; overlapping windows add up in the gradient.
    #[track_caller]
    pub fn unfold(&self, dimension: i64, size: usize, step: usize) -> Tensor {
        self.try_unfold(dimension, size, step).or_panic()
    }

    /// [`Tensor::unfold`] returning an error for a bad dim, a window longer than the dim or a
    /// zero step.
    #[track_caller]
    pub fn try_unfold(&self, dimension: i64, size: usize, step: usize) -> Result<Tensor> {
        const OP: &str = "unfold";
        let d = self.normalize_dim(OP, dimension)?;
        let l = self.layout();
        let (len, stride) = if self.dim() == 0 { (1, 1) } else { (l.shape()[d], l.strides()[d]) };
        if size > len {
            bail!(
                OP,
                Shape,
                "maximum size for tensor at dimension {d} is {len} but size is {size} (shape {:?})",
                self.shape()
            );
        }
        if step == 0 {
            bail!(OP, Value, "step is 0 but must be > 0");
        }
        let windows = (len - size) / step + 1;
        let mut shape = Shape::from_slice(l.shape());
        let mut strides = l.strides().to_vec();
        if let (Some(n), Some(s)) = (shape.get_mut(d), strides.get_mut(d)) {
            (*n, *s) = (windows, stride * step);
        }
        shape.push(size);
        strides.push(stride);
        let view = self.with_layout(Layout::new(shape, strides.into_iter().collect(), l.offset()));
        let input = self.shape().to_vec();
        Ok(self.tracked_view(view, "UnfoldBackward0", move |g| unfold_backward(g, &input, d, (windows, size, step))))
    }
}
