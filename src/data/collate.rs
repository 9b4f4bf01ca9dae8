//! [`Collate`]: how a list of items becomes one batch (PyTorch's `default_collate`).

use crate::error::{bail, Result};
use crate::Tensor;

/// An item type a [`DataLoader`](super::DataLoader) can batch.
///
/// - `Tensor` items are stacked along a new dim 0 (`[B, ...]`);
/// - numbers (`i64`, `i32`, `u8`, `f32`, `f64`, `bool`) become a 1-d tensor `[B]` of that dtype
///   (so `(Tensor, i64)` items give `(Tensor [B, ...], Tensor [B] i64)`);
/// - tuples collate field by field; a `Vec<T>` collates position by position (every item must
///   have the same length).
///
/// Implement it for your own item types (collate each field, then build the batch).
pub trait Collate: Sized + Send {
    /// The batched form.
    type Batch: Send + 'static;

    /// Combines `items` (at least one) into a batch; an error for items that do not fit together
    /// (tensors of different shapes, `Vec`s of different lengths), at the caller's line
    /// (`#[track_caller]` in every implementation).
    #[track_caller]
    fn collate(items: Vec<Self>) -> Result<Self::Batch>;

    /// The batch with its tensors in page-locked host memory, for a loader with
    /// [`pin_memory(true)`](super::DataLoader::pin_memory) on a machine with a CUDA device.
    /// The default leaves a batch of your own type as it is; override it to pin its tensors
    /// (with [`Tensor::try_pin_memory`]).
    #[track_caller]
    fn pin_batch(batch: Self::Batch) -> Result<Self::Batch> {
        Ok(batch)
    }
}

impl Collate for Tensor {
    type Batch = Tensor;
    #[track_caller]
    fn collate(items: Vec<Tensor>) -> Result<Tensor> {
        Tensor::try_stack(&items, 0)
    }
    #[track_caller]
    fn pin_batch(batch: Tensor) -> Result<Tensor> {
        batch.try_pin_memory()
    }
}

macro_rules! collate_numbers {
    ($($t:ty),*) => {$(
        impl Collate for $t {
            type Batch = Tensor;
            #[track_caller]
            fn collate(items: Vec<$t>) -> Result<Tensor> {
                let n = items.len();
                Tensor::try_from_vec(items, &[n])
            }
            #[track_caller]
            fn pin_batch(batch: Tensor) -> Result<Tensor> {
                batch.try_pin_memory()
            }
        }
    )*};
}

collate_numbers!(i64, i32, u8, f32, f64, bool);

impl<T: Collate> Collate for Vec<T> {
    type Batch = Vec<T::Batch>;
    #[track_caller]
    fn collate(items: Vec<Vec<T>>) -> Result<Vec<T::Batch>> {
        let width = items.first().map_or(0, Vec::len);
        if let Some((i, item)) = items.iter().enumerate().find(|(_, v)| v.len() != width) {
            bail!(
                "collate",
                Shape,
                "each item in the batch must have the same length, but item 0 has {width} elements and item {i} has {}",
                item.len()
            );
        }
        let mut columns: Vec<Vec<T>> = (0..width).map(|_| Vec::with_capacity(items.len())).collect();
        for item in items {
            for (column, value) in columns.iter_mut().zip(item) {
                column.push(value);
            }
        }
        columns.into_iter().map(T::collate).collect()
    }
    #[track_caller]
    fn pin_batch(batch: Vec<T::Batch>) -> Result<Vec<T::Batch>> {
        batch.into_iter().map(T::pin_batch).collect()
    }
}

macro_rules! collate_tuples {
    ($(($($t:ident $v:ident $i:tt),+))*) => {$(
        impl<$($t: Collate),+> Collate for ($($t,)+) {
            type Batch = ($($t::Batch,)+);
            #[track_caller]
            fn collate(items: Vec<Self>) -> Result<Self::Batch> {
                $(let mut $v = Vec::with_capacity(items.len());)+
                for item in items {
                    $($v.push(item.$i);)+
                }
                Ok(($($t::collate($v)?,)+))
            }
            #[track_caller]
            fn pin_batch(batch: Self::Batch) -> Result<Self::Batch> {
                Ok(($($t::pin_batch(batch.$i)?,)+))
            }
        }
    )*};
}

collate_tuples! {
    (A a 0)
    (A a 0, B b 1)
    (A a 0, B b 1, C c 2)
    (A a 0, B b 1, C c 2, D d 3)
}
