//! `kiln::data`: datasets and the [`DataLoader`] (PyTorch's `torch.utils.data`).
//!
//! ```no_run
//! use kiln::data::{DataLoader, TensorDataset};
//! use kiln::Tensor;
//! # fn main() -> kiln::Result<()> {
//! let x = Tensor::randn(&[100, 3]);
//! let y = Tensor::randint(0, 2, &[100]);
//! let loader = DataLoader::new(TensorDataset::new((x, y))?).batch_size(16).shuffle(true).seed(0);
//! for (xb, yb) in &loader {
//!     assert_eq!(xb.shape()[1], 3);
//!     assert_eq!(yb.shape()[0], xb.shape()[0]);
//! }
//! # Ok(()) }
//! ```
//!
//! Differences from PyTorch:
//! - [`Dataset::get`] is infallible: datasets check their data when constructed (constructors
//!   that read files return [`crate::Result`]). A panic inside `get` (or a failed collation) in
//!   a loader worker is re-raised as a panic in the consuming thread, with the message.
//! - Batches are assembled by the [`Collate`] trait of the item type (PyTorch's
//!   `default_collate`); implement it for your own item types instead of passing `collate_fn`.
//! - [`TensorDataset`] takes a tuple of tensors (`(x, y)`) and yields tuples of rows, so
//!   `for (x, y) in &loader` works; a `Vec<Tensor>` gives `Vec` rows.
//! - Randomness in item transforms (random crops, flips) draws from a per-item generator that
//!   the loader seeds from its own seed, the epoch and the batch: results do not depend on
//!   `num_workers` (PyTorch's depend on the worker a batch lands on). See [`with_item_generator`].
//! - `random_split` takes a seed (or a [`Generator`](crate::random::Generator) in
//!   [`random_split_with`]).

mod collate;
mod dataset;
mod distributed;
mod loader;
mod sampler;
mod split;
mod worker;

pub use collate::Collate;
pub(crate) use dataset::check_index;
pub use dataset::{Dataset, Subset, TensorDataset, TensorTuple};
pub use distributed::{DistributedSampler, Sampler};
pub use loader::{DataLoader, DataLoaderIter};
pub use sampler::{randperm, seed_item_generator, with_item_generator};
pub use split::{random_split, random_split_with, SplitLengths};
