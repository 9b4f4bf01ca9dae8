//! Ops that move or repeat elements: `flip`, `roll`, `repeat`, `tile`, `repeat_interleave`.
//! Each is a decomposition: an `index_select` with an index computed from the shape alone
//! (`flip`, `roll`), or a view expanded over new dims and reshaped (`repeat`, `tile`,
//! `repeat_interleave` by a number). Autograd, `kiln::compile` and every device therefore work
//! through those ops, and no kernel or backward rule is written here. Like PyTorch's, the
//! results are new tensors, never views of the input.
//!
//! `repeat_interleave` by a tensor of repeats is an `index_select` too, but its index (and the
//! result's shape) comes from the repeats' values: it reads them at once (`data_dependent`),
//! which inside `kiln::compile` is a graph break when the repeats are computed in the step.

use super::data_dependent;
use super::reduce::Dims;
use crate::error::{bail, OrPanic, Result};
use crate::tensor::{normalize_dim, IntoShape};
use crate::{DType, Tensor};

/// `x` with its elements along `d` taken in the order `positions` (an index built from the
/// shape, on `x`'s device).
#[track_caller]
fn reorder_along(x: &Tensor, d: usize, positions: Vec<i64>) -> Result<Tensor> {
    let index = Tensor::from_vec(positions, [x.shape()[d]]).to(&x.device());
    x.try_index_select(d as i64, &index)
}

/// The counts of a tensor of repeats (`repeat_interleave`'s; an integer dtype, 0-dim or 1-D, no
/// count negative), read from its device at once.
#[track_caller]
fn repeat_counts(repeats: &Tensor) -> Result<Vec<usize>> {
    const OP: &str = "repeat_interleave";
    if repeats.dtype().is_float() || repeats.dtype() == DType::Bool {
        bail!(OP, DType, "repeats must be an integer tensor, got {} (shape {:?})", repeats.dtype(), repeats.shape());
    }
    if repeats.dim() > 1 {
        bail!(OP, Shape, "repeats must be 0-dim or 1-dim tensor, got shape {:?}", repeats.shape());
    }
    let read = |ins: &[Tensor]| ins[0].try_to_vec::<i64>();
    let counts = data_dependent(OP, &[repeats], read, read)?;
    if let Some(n) = counts.iter().find(|&&n| n < 0) {
        bail!(OP, Value, "repeats can not be negative, got {n}");
    }
    Ok(counts.into_iter().map(|n| n as usize).collect())
}

/// `i` repeated `counts[i]` times for each `i`, in order, as i64 on `device`: the index
/// `repeat_interleave` selects with.
#[track_caller]
fn repeated_positions(counts: &[usize], device: crate::Device) -> Result<Tensor> {
    let total = counts.iter().try_fold(0usize, |a, &n| a.checked_add(n)).unwrap_or(usize::MAX);
    crate::tensor::check_shape("repeat_interleave", &[total])?;
    let positions: Vec<i64> = counts.iter().enumerate().flat_map(|(i, &n)| std::iter::repeat_n(i as i64, n)).collect();
    Tensor::from_vec(positions, [total]).try_to(&device)
}

/// The distinct dims of `dims`, normalized against a tensor of `ndim` dims; an error naming
/// `op` for a dim out of range or given twice.
#[track_caller]
fn distinct_dims(op: &'static str, dims: &[i64], ndim: usize) -> Result<Vec<usize>> {
    let mut seen = Vec::with_capacity(dims.len());
    for &d in dims {
        let n = normalize_dim(op, d, ndim)?;
        if seen.contains(&n) {
            bail!(op, Index, "dim {n} appears multiple times in the list of dims {dims:?}");
        }
        seen.push(n);
    }
    Ok(seen)
}

impl Tensor {
    /// The elements in reverse order along each of `dims` (`torch.flip(x, dims)`): a copy.
    #[track_caller]
    pub fn flip(&self, dims: impl Into<Dims>) -> Tensor {
        self.try_flip(dims).or_panic()
    }

    /// [`Tensor::flip`] returning an error for a dim out of range or repeated.
    #[track_caller]
    pub fn try_flip(&self, dims: impl Into<Dims>) -> Result<Tensor> {
        let dims = distinct_dims("flip", &dims.into().0, self.dim())?;
        let mut out = self.clone();
        for d in dims.into_iter().filter(|&d| d < self.dim()) {
            let n = self.shape()[d] as i64;
            out = reorder_along(&out, d, (0..n).rev().collect())?;
        }
        Ok(if out.shares_storage_with(self) { self.deep_clone() } else { out })
    }

    /// The elements shifted by `shifts[i]` places along `dims[i]`, those pushed past the end
    /// coming back at the start (`torch.roll(x, shifts, dims)`); with no dims, the flattened
    /// tensor is rolled by `shifts[0]` and given its shape back. A copy.
    #[track_caller]
    pub fn roll(&self, shifts: &[i64], dims: &[i64]) -> Tensor {
        self.try_roll(shifts, dims).or_panic()
    }

    /// [`Tensor::roll`] returning an error when shifts and dims differ in number, or for a dim
    /// out of range.
    #[track_caller]
    pub fn try_roll(&self, shifts: &[i64], dims: &[i64]) -> Result<Tensor> {
        if dims.is_empty() {
            if shifts.len() != 1 {
                bail!("roll", Value, "with no dims, shifts must have one element, but got {shifts:?}");
            }
            let flat = self.try_reshape([-1])?.try_roll(shifts, &[0])?;
            return flat.try_reshape(self.shape().iter().map(|&n| n as i64).collect::<Vec<_>>());
        }
        if shifts.len() != dims.len() {
            bail!("roll", Value, "shifts and dimensions must align. shifts: {}, dims: {}", shifts.len(), dims.len());
        }
        let mut out = self.clone();
        for (&shift, &dim) in shifts.iter().zip(dims) {
            let d = normalize_dim("roll", dim, self.dim())?;
            if d >= self.dim() {
                continue; // a 0-dim tensor: nothing to roll
            }
            let n = self.shape()[d] as i64;
            if n > 0 {
                out = reorder_along(&out, d, (0..n).map(|i| (i - shift).rem_euclid(n)).collect())?;
            }
        }
        Ok(if out.shares_storage_with(self) { self.deep_clone() } else { out })
    }

    /// The tensor repeated `sizes[i]` times along dim `i` (`x.repeat(sizes)`): `sizes` has at
    /// least as many entries as the tensor has dims; extra leading entries add new dims.
    #[track_caller]
    pub fn repeat(&self, sizes: impl IntoShape) -> Tensor {
        self.try_repeat(sizes).or_panic()
    }

    /// [`Tensor::repeat`] returning an error when `sizes` is shorter than the tensor's dims or
    /// the result too large.
    #[track_caller]
    pub fn try_repeat(&self, sizes: impl IntoShape) -> Result<Tensor> {
        self.repeat_sizes(&crate::tensor::sizes("repeat", sizes)?)
    }

    #[track_caller]
    fn repeat_sizes(&self, sizes: &[usize]) -> Result<Tensor> {
        if sizes.len() < self.dim() {
            bail!(
                "repeat",
                Shape,
                "number of dimensions of repeat dims ({}) can not be smaller than number of dimensions of tensor (shape {:?})",
                sizes.len(),
                self.shape()
            );
        }
        let lead = sizes.len() - self.dim();
        let shape: Vec<usize> = std::iter::repeat_n(1, lead).chain(self.shape().iter().copied()).collect();
        // [1, s0, 1, s1, …] expanded to [r0, s0, r1, s1, …], then merged pairwise.
        let pairs = |first: &dyn Fn(usize) -> usize| -> Vec<i64> {
            shape.iter().zip(sizes).flat_map(|(&s, &r)| [first(r) as i64, s as i64]).collect()
        };
        let merged: Vec<i64> = shape.iter().zip(sizes).map(|(&s, &r)| s.saturating_mul(r) as i64).collect();
        crate::tensor::check_shape("repeat", &merged.iter().map(|&n| n as usize).collect::<Vec<_>>())?;
        self.try_reshape(pairs(&|_| 1))?.try_expand(pairs(&|r| r))?.try_reshape(&merged)
    }

    /// [`Tensor::repeat`] with `dims` completed by leading ones when it is shorter than the
    /// tensor's dims (`torch.tile(x, dims)`).
    #[track_caller]
    pub fn tile(&self, dims: impl IntoShape) -> Tensor {
        self.try_tile(dims).or_panic()
    }

    /// [`Tensor::tile`] returning an error for a result too large.
    #[track_caller]
    pub fn try_tile(&self, dims: impl IntoShape) -> Result<Tensor> {
        let dims = crate::tensor::sizes("tile", dims)?;
        let lead = self.dim().saturating_sub(dims.len());
        let sizes: Vec<usize> = std::iter::repeat_n(1, lead).chain(dims.iter().copied()).collect();
        self.repeat_sizes(&sizes)
    }

    /// Each element repeated `repeats` times in place along `dim`
    /// (`x.repeat_interleave(repeats, dim)`); with no dim, of the flattened tensor.
    #[track_caller]
    pub fn repeat_interleave(&self, repeats: usize, dim: Option<i64>) -> Tensor {
        self.try_repeat_interleave(repeats, dim).or_panic()
    }

    /// [`Tensor::repeat_interleave`] returning an error for a dim out of range or a result
    /// too large.
    #[track_caller]
    pub fn try_repeat_interleave(&self, repeats: usize, dim: Option<i64>) -> Result<Tensor> {
        let Some(dim) = dim else {
            return self.try_reshape([-1])?.try_repeat_interleave(repeats, Some(0));
        };
        let d = normalize_dim("repeat_interleave", dim, self.dim())?;
        if self.dim() == 0 {
            return self.try_reshape([1])?.try_repeat_interleave(repeats, Some(0));
        }
        let shape: Vec<i64> = self.shape().iter().map(|&n| n as i64).collect();
        let mut expanded = shape.clone();
        expanded.insert(d + 1, repeats as i64);
        let mut merged = shape;
        merged[d] = (self.shape()[d].saturating_mul(repeats)) as i64;
        crate::tensor::check_shape("repeat_interleave", &merged.iter().map(|&n| n as usize).collect::<Vec<_>>())?;
        self.unsqueeze(d as i64 + 1).try_expand(&expanded)?.try_reshape(&merged)
    }

    /// Element `i` along `dim` repeated `repeats[i]` times in place
    /// (`x.repeat_interleave(repeats, dim)` with a tensor of repeats: integer, 0-dim or 1-D, one
    /// count per element along `dim` or a single count for all); with no dim, of the flattened
    /// tensor. The result's size depends on the counts, so they are read at once: inside
    /// `kiln::compile` a graph break when the step computes them.
    #[track_caller]
    pub fn repeat_interleave_tensor(&self, repeats: &Tensor, dim: Option<i64>) -> Tensor {
        self.try_repeat_interleave_tensor(repeats, dim).or_panic()
    }

    /// [`Tensor::repeat_interleave_tensor`] returning an error for a dim out of range, repeats
    /// that are not integers, not 0-dim or 1-D, negative, or not one per element along `dim`.
    #[track_caller]
    pub fn try_repeat_interleave_tensor(&self, repeats: &Tensor, dim: Option<i64>) -> Result<Tensor> {
        let flat;
        let (x, d) = match dim {
            Some(dim) if self.dim() > 0 => (self, normalize_dim("repeat_interleave", dim, self.dim())?),
            _ => {
                if let Some(dim) = dim {
                    normalize_dim("repeat_interleave", dim, 0)?;
                }
                flat = self.try_reshape([-1])?;
                (&flat, 0)
            }
        };
        let mut counts = repeat_counts(repeats)?;
        let n = x.shape()[d];
        if counts.len() == 1 {
            counts = vec![counts[0]; n];
        }
        if counts.len() != n {
            bail!(
                "repeat_interleave",
                Shape,
                "repeats must have the same size as input along dim, but got repeats.size(0) = {} and input.size({d}) = {n}",
                counts.len()
            );
        }
        x.try_index_select(d as i64, &repeated_positions(&counts, x.device())?)
    }

    /// The positions `0, 1, …` each repeated as many times as `repeats` says
    /// (`torch.repeat_interleave(repeats)`, the one-argument form): an i64 tensor on the
    /// repeats' device, the index [`Tensor::repeat_interleave_tensor`] selects with.
    #[track_caller]
    pub fn repeat_interleave_indices(repeats: &Tensor) -> Tensor {
        Tensor::try_repeat_interleave_indices(repeats).or_panic()
    }

    /// [`Tensor::repeat_interleave_indices`] returning an error for repeats that are not a 1-D
    /// integer tensor or hold a negative count.
    #[track_caller]
    pub fn try_repeat_interleave_indices(repeats: &Tensor) -> Result<Tensor> {
        if repeats.dim() != 1 {
            bail!(
                "repeat_interleave",
                Shape,
                "repeat_interleave only accept 1D vector as repeat, got shape {:?}",
                repeats.shape()
            );
        }
        repeated_positions(&repeat_counts(repeats)?, repeats.device())
    }
}
