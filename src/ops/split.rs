//! Splitting into views and building grids: `tensor_split` (by a number of parts or at
//! indices) and `meshgrid`. Every result is a view (`narrow`, `expand`) of an input, so
//! autograd and `kiln::compile` need nothing of their own.

use crate::error::{bail, OrPanic, Result};
use crate::Tensor;

/// How `meshgrid` orders its outputs' dims (PyTorch's `indexing=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Indexing {
    /// Matrix indexing (`'ij'`): output dim `i` follows input `i`.
    Ij,
    /// Cartesian indexing (`'xy'`): the first two dims swapped, as NumPy's default.
    Xy,
}

impl Tensor {
    /// `sections` views along `dim` of nearly equal size, the first `size % sections` one
    /// element longer (`torch.tensor_split(x, sections, dim)`).
    #[track_caller]
    pub fn tensor_split(&self, sections: usize, dim: i64) -> Vec<Tensor> {
        self.try_tensor_split(sections, dim).or_panic()
    }

    /// [`Tensor::tensor_split`] returning an error for zero sections or a bad dim.
    #[track_caller]
    pub fn try_tensor_split(&self, sections: usize, dim: i64) -> Result<Vec<Tensor>> {
        if sections == 0 {
            bail!("tensor_split", Value, "number of sections must be larger than 0, got {sections}");
        }
        let d = self.dim_for_split(dim)?;
        let n = self.shape()[d];
        let (base, extra) = (n / sections, n % sections);
        let mut bounds = Vec::with_capacity(sections - 1);
        let mut at = 0;
        for i in 0..sections - 1 {
            at += base + usize::from(i < extra);
            bounds.push(at as i64);
        }
        self.try_tensor_split_at(&bounds, dim)
    }

    /// Views along `dim` cut before each of `indices` (`torch.tensor_split(x, indices, dim)`):
    /// `[..i0], [i0..i1], …, [ik..]`, indices past the end giving empty parts, as Python slices.
    #[track_caller]
    pub fn tensor_split_at(&self, indices: &[i64], dim: i64) -> Vec<Tensor> {
        self.try_tensor_split_at(indices, dim).or_panic()
    }

    /// [`Tensor::tensor_split_at`] returning an error for a bad dim.
    #[track_caller]
    pub fn try_tensor_split_at(&self, indices: &[i64], dim: i64) -> Result<Vec<Tensor>> {
        let d = self.dim_for_split(dim)?;
        let n = self.shape()[d] as i64;
        // Python slice bounds: negative from the end, clamped to the dim.
        let clamp = |i: i64| (if i < 0 { i + n } else { i }).clamp(0, n);
        let mut parts = Vec::with_capacity(indices.len() + 1);
        let mut start = 0;
        for end in indices.iter().map(|&i| clamp(i)).chain([n]) {
            let end_at = end.max(start);
            parts.push(self.try_narrow(d as i64, start, (end_at - start) as usize)?);
            start = end_at;
        }
        Ok(parts)
    }

    /// The dim `tensor_split` cuts: an error for a 0-dim tensor or a dim out of range.
    #[track_caller]
    fn dim_for_split(&self, dim: i64) -> Result<usize> {
        if self.dim() == 0 {
            bail!("tensor_split", Shape, "expected at least a 1-dimensional tensor, but got a 0-dim one");
        }
        self.normalize_dim("tensor_split", dim)
    }

    /// Coordinate grids of 1-D (or 0-dim) tensors: output `i` holds `tensors[i]` along dim `i`
    /// (dims 0 and 1 swapped for [`Indexing::Xy`]), expanded over the others
    /// (`torch.meshgrid(*tensors, indexing=)`). Each output is a view of its input.
    #[track_caller]
    pub fn meshgrid(tensors: &[&Tensor], indexing: Indexing) -> Vec<Tensor> {
        Tensor::try_meshgrid(tensors, indexing).or_panic()
    }

    /// [`Tensor::meshgrid`] returning an error for an input of more than one dim.
    #[track_caller]
    pub fn try_meshgrid(tensors: &[&Tensor], indexing: Indexing) -> Result<Vec<Tensor>> {
        if let Some((i, t)) = tensors.iter().enumerate().find(|(_, t)| t.dim() > 1) {
            bail!("meshgrid", Shape, "expects 0D or 1D tensors, but tensor {i} has shape {:?}", t.shape());
        }
        let swap = indexing == Indexing::Xy && tensors.len() >= 2;
        // The position of input i among the output dims.
        let place = |i: usize| match (swap, i) {
            (true, 0) => 1,
            (true, 1) => 0,
            _ => i,
        };
        let mut shape = vec![0i64; tensors.len()];
        for (i, t) in tensors.iter().enumerate() {
            shape[place(i)] = t.numel() as i64;
        }
        tensors
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut along = vec![1i64; tensors.len()];
                along[place(i)] = -1;
                t.try_reshape(&along)?.try_expand(&shape)
            })
            .collect()
    }
}
