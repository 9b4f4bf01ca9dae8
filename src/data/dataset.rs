//! The [`Dataset`] trait and the generic datasets: [`TensorDataset`] and [`Subset`].

use crate::error::{bail, fail, ErrorKind, Result};
use crate::Tensor;
use std::sync::Arc;

/// A map-style dataset (`torch.utils.data.Dataset`): `len` items, each produced by `get`.
///
/// `get` is infallible: check the data when the dataset is built. It may be called from
/// several threads at once (loader workers), hence `Send + Sync`.
pub trait Dataset: Send + Sync {
    /// One sample, e.g. `(Tensor, i64)` for an image and its class.
    type Item: Send;

    /// The number of items (`len(dataset)`).
    fn len(&self) -> usize;

    /// Item `index`, for `index < len()` (may panic otherwise). `#[track_caller]` in every
    /// implementation, so a panic names the line that asked for the item.
    #[track_caller]
    fn get(&self, index: usize) -> Self::Item;

    /// Whether the dataset has no items.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<D: Dataset + ?Sized> Dataset for Arc<D> {
    type Item = D::Item;
    fn len(&self) -> usize {
        (**self).len()
    }
    fn get(&self, index: usize) -> D::Item {
        (**self).get(index)
    }
}

impl<D: Dataset + ?Sized> Dataset for Box<D> {
    type Item = D::Item;
    fn len(&self) -> usize {
        (**self).len()
    }
    fn get(&self, index: usize) -> D::Item {
        (**self).get(index)
    }
}

/// The tensor groups a [`TensorDataset`] can hold: a `Tensor`, tuples of 1 to 4 tensors, or a
/// `Vec<Tensor>`. A row of the group is the same form with each tensor indexed along dim 0.
pub trait TensorTuple: Send + Sync + Sized {
    /// The tensors, in order.
    fn tensors(&self) -> Vec<&Tensor>;
    /// Row `i` of every tensor (views, no copy).
    fn row(&self, i: usize) -> Self;
}

impl TensorTuple for Tensor {
    fn tensors(&self) -> Vec<&Tensor> {
        vec![self]
    }
    fn row(&self, i: usize) -> Self {
        self.select(0, i as i64)
    }
}

impl TensorTuple for Vec<Tensor> {
    fn tensors(&self) -> Vec<&Tensor> {
        self.iter().collect()
    }
    fn row(&self, i: usize) -> Self {
        self.iter().map(|t| t.select(0, i as i64)).collect()
    }
}

macro_rules! tuple_rows {
    ($(($($t:ident $i:tt),+))*) => {$(
        impl TensorTuple for ($($t,)+) {
            fn tensors(&self) -> Vec<&Tensor> {
                vec![$(&self.$i),+]
            }
            fn row(&self, i: usize) -> Self {
                ($(self.$i.select(0, i as i64),)+)
            }
        }
    )*};
}

tuple_rows! {
    (Tensor 0)
    (Tensor 0, Tensor 1)
    (Tensor 0, Tensor 1, Tensor 2)
    (Tensor 0, Tensor 1, Tensor 2, Tensor 3)
}

/// Tensors that share their first dim, item `i` being row `i` of each
/// (`torch.utils.data.TensorDataset`). `TensorDataset::new((x, y))` yields `(Tensor, Tensor)`
/// items, which a [`DataLoader`](super::DataLoader) stacks into `(Tensor, Tensor)` batches.
#[derive(Clone)]
pub struct TensorDataset<T: TensorTuple> {
    tensors: T,
    len: usize,
}

impl<T: TensorTuple> TensorDataset<T> {
    /// A dataset over `tensors`; an error unless there is at least one tensor, none is 0-d,
    /// and all have the same size of dim 0.
    #[track_caller]
    pub fn new(tensors: T) -> Result<TensorDataset<T>> {
        let all = tensors.tensors();
        let Some(first) = all.first() else {
            bail!("TensorDataset", Value, "expected at least one tensor");
        };
        if let Some(t) = all.iter().find(|t| t.dim() == 0) {
            bail!(
                "TensorDataset",
                Shape,
                "expected tensors with a first dim to index, but got a 0-d tensor (shape {:?})",
                t.shape()
            );
        }
        let len = first.shape()[0];
        if all.iter().any(|t| t.shape()[0] != len) {
            let shapes: Vec<&[usize]> = all.iter().map(|t| t.shape()).collect();
            bail!(
                "TensorDataset",
                Shape,
                "size mismatch between tensors: every tensor needs the same size of dim 0, but the shapes are {shapes:?}"
            );
        }
        Ok(TensorDataset { tensors, len })
    }

    /// The tensors (`dataset.tensors`).
    pub fn tensors(&self) -> &T {
        &self.tensors
    }
}

impl<T: TensorTuple> Dataset for TensorDataset<T> {
    type Item = T;
    fn len(&self) -> usize {
        self.len
    }
    fn get(&self, index: usize) -> T {
        check_index("TensorDataset", index, self.len);
        self.tensors.row(index)
    }
}

/// The items of a dataset at chosen indices (`torch.utils.data.Subset`); the dataset is shared
/// through an `Arc`, so subsets of one dataset (from [`random_split`](super::random_split))
/// hold one copy of the data.
pub struct Subset<D: Dataset + ?Sized> {
    dataset: Arc<D>,
    indices: Vec<usize>,
}

impl<D: Dataset + ?Sized> Clone for Subset<D> {
    fn clone(&self) -> Self {
        Subset { dataset: self.dataset.clone(), indices: self.indices.clone() }
    }
}

impl<D: Dataset + ?Sized> Subset<D> {
    /// The items of `dataset` at `indices` (which may repeat); an error for an index
    /// `>= dataset.len()`.
    #[track_caller]
    pub fn new(dataset: impl Into<Arc<D>>, indices: Vec<usize>) -> Result<Subset<D>> {
        let dataset = dataset.into();
        let n = dataset.len();
        if let Some((pos, &i)) = indices.iter().enumerate().find(|(_, &i)| i >= n) {
            bail!("Subset", Index, "index {i} (at position {pos}) is out of range for a dataset of {n} items");
        }
        Ok(Subset { dataset, indices })
    }

    /// The underlying dataset.
    pub fn dataset(&self) -> &Arc<D> {
        &self.dataset
    }

    /// The indices into the underlying dataset, in item order.
    pub fn indices(&self) -> &[usize] {
        &self.indices
    }
}

impl<D: Dataset + ?Sized> Dataset for Subset<D> {
    type Item = D::Item;
    fn len(&self) -> usize {
        self.indices.len()
    }
    fn get(&self, index: usize) -> D::Item {
        check_index("Subset", index, self.indices.len());
        self.dataset.get(self.indices[index])
    }
}

/// Panics, at the caller's line, unless `index` is below `len`, the number of items of the
/// dataset `op` (PyTorch's `IndexError`).
#[track_caller]
pub(crate) fn check_index(op: &'static str, index: usize, len: usize) {
    if index >= len {
        fail(op, ErrorKind::Index, format!("index {index} is out of range for {len} items"));
    }
}
