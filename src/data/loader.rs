//! [`DataLoader`]: batches of a dataset, shuffled per epoch, optionally assembled by
//! background workers.

use super::collate::Collate;
use super::dataset::Dataset;
use super::distributed::Sampler;
use super::sampler::{batch_seed, next_seed, randperm, ItemSeedGuard};
use super::worker::WorkerPool;
use crate::error::{AtCaller, Result};
use crate::random::{default_generator, Generator};
use std::sync::{Arc, Mutex};

/// Batches of a [`Dataset`] (`torch.utils.data.DataLoader`), configured by builder methods:
///
/// ```no_run
/// # use kiln::data::{DataLoader, TensorDataset};
/// # let dataset = TensorDataset::new((kiln::Tensor::zeros(&[8, 2]), kiln::Tensor::zeros(&[8]))).unwrap();
/// let loader = DataLoader::new(dataset).batch_size(64).shuffle(true).drop_last(false).num_workers(2).seed(0);
/// for (x, y) in &loader { /* stacked tensors */ }
/// assert_eq!(loader.len(), 1); // batches per epoch
/// ```
///
/// Each call to [`iter`](DataLoader::iter) (each `for` loop) is one epoch. With `shuffle`, the
/// epoch's order is a fresh permutation drawn from the loader's generator ([`seed`](Self::seed)
/// or [`generator`](Self::generator)), or, if it has none, from a generator seeded by the global
/// one (so [`crate::manual_seed`] makes it reproducible). The batches, and the random draws of
/// item transforms (see [`with_item_generator`](super::with_item_generator)), depend only on the
/// seed and the epoch, never on `num_workers`.
///
/// With `num_workers > 0`, that many threads assemble batches (fetch the items and collate them)
/// and keep up to `prefetch_factor * num_workers` batches ready ahead of the consumer; batches
/// are still delivered in order. Dropping the iterator stops and joins the workers. A panic while
/// a worker assembles a batch becomes a panic in the consuming thread carrying its message, and
/// so does a collation error (items of different shapes).
pub struct DataLoader<D: Dataset> {
    dataset: Arc<D>,
    batch_size: usize,
    shuffle: bool,
    drop_last: bool,
    num_workers: usize,
    prefetch_factor: usize,
    pin_memory: bool,
    generator: Mutex<Option<Generator>>,
    sampler: Option<Arc<dyn Sampler>>,
}

impl<D: Dataset + 'static> DataLoader<D> {
    /// A loader over `dataset` with PyTorch's defaults: batches of 1, no shuffling, no workers.
    pub fn new(dataset: D) -> DataLoader<D> {
        Self::from_arc(Arc::new(dataset))
    }

    /// A loader over a dataset shared with other owners.
    pub fn from_arc(dataset: Arc<D>) -> DataLoader<D> {
        DataLoader {
            dataset,
            batch_size: 1,
            shuffle: false,
            drop_last: false,
            num_workers: 0,
            prefetch_factor: 2,
            pin_memory: false,
            generator: Mutex::new(None),
            sampler: None,
        }
    }

    /// Items per batch (`batch_size=`). Panics for 0 (a programming error).
    #[track_caller]
    pub fn batch_size(mut self, batch_size: usize) -> Self {
        if batch_size == 0 {
            crate::error::fail(
                "DataLoader",
                crate::ErrorKind::Value,
                "batch_size should be a positive integer, but got 0",
            );
        }
        self.batch_size = batch_size;
        self
    }

    /// Visit the items in a new random order every epoch (`shuffle=`). Panics together with
    /// a [`sampler`](Self::sampler), as PyTorch refuses both.
    #[track_caller]
    pub fn shuffle(mut self, shuffle: bool) -> Self {
        assert!(!(shuffle && self.sampler.is_some()), "DataLoader: sampler option is mutually exclusive with shuffle");
        self.shuffle = shuffle;
        self
    }

    /// Visit the indices `sampler` gives each epoch (`sampler=`), e.g. a
    /// [`DistributedSampler`](super::DistributedSampler) shared with the caller, who calls its
    /// `set_epoch`. Panics together with `shuffle(true)`, as PyTorch refuses both.
    #[track_caller]
    pub fn sampler<S: Sampler + 'static>(mut self, sampler: Arc<S>) -> Self {
        assert!(!self.shuffle, "DataLoader: sampler option is mutually exclusive with shuffle");
        self.sampler = Some(sampler);
        self
    }

    /// Leave out the last batch when it would be smaller than `batch_size` (`drop_last=`).
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }

    /// Threads that assemble batches in the background; 0 assembles them in the consuming
    /// thread (`num_workers=`).
    pub fn num_workers(mut self, num_workers: usize) -> Self {
        self.num_workers = num_workers;
        self
    }

    /// Batches each worker keeps ready ahead of the consumer (`prefetch_factor=`, default 2).
    /// Panics for 0 (a programming error).
    #[track_caller]
    pub fn prefetch_factor(mut self, prefetch_factor: usize) -> Self {
        assert!(prefetch_factor > 0, "DataLoader: prefetch_factor should be a positive integer, but got 0");
        self.prefetch_factor = prefetch_factor;
        self
    }

    /// Yield batches whose tensors are in page-locked host memory (`pin_memory=`), so that
    /// [`Tensor::to_non_blocking`](crate::Tensor::to_non_blocking) copies them to a CUDA device
    /// without waiting; the workers (or the consuming thread) pin each batch after collating it
    /// ([`Collate::pin_batch`]). Without a CUDA device, as in PyTorch, batches stay unpinned and
    /// `KILN_DEBUG=data` prints one line saying so.
    pub fn pin_memory(mut self, pin_memory: bool) -> Self {
        if pin_memory && !crate::Device::cuda_is_available() {
            crate::debug::log(
                crate::debug::Topic::Data,
                "DataLoader: pin_memory(true) but no CUDA device is available; batches stay unpinned",
            );
        }
        self.pin_memory = pin_memory;
        self
    }

    /// Draw the epochs' orders and seeds from a generator seeded with `seed`.
    pub fn seed(self, seed: u64) -> Self {
        self.generator(Generator::with_seed(seed))
    }

    /// Draw the epochs' orders and seeds from `generator` (`generator=`); it advances by one
    /// epoch's draws per [`iter`](Self::iter).
    pub fn generator(self, generator: Generator) -> Self {
        *self.generator.lock().unwrap_or_else(|e| e.into_inner()) = Some(generator);
        self
    }

    /// The dataset.
    pub fn dataset(&self) -> &Arc<D> {
        &self.dataset
    }

    /// The batch size.
    pub fn get_batch_size(&self) -> usize {
        self.batch_size
    }

    /// The number of worker threads.
    pub fn get_num_workers(&self) -> usize {
        self.num_workers
    }

    /// Whether `pin_memory` was requested.
    pub fn get_pin_memory(&self) -> bool {
        self.pin_memory
    }

    /// The number of batches per epoch (`len(loader)`).
    pub fn len(&self) -> usize {
        let items = self.sampler.as_ref().map_or(self.dataset.len(), |s| s.len());
        num_batches(items, self.batch_size, self.drop_last)
    }

    /// Whether an epoch has no batches.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The order of the next epoch and its seed, advancing the generator.
    fn next_epoch(&self) -> (Vec<usize>, u64) {
        let n = self.dataset.len();
        let mut own = self.generator.lock().unwrap_or_else(|e| e.into_inner());
        let mut fallback;
        let g = match own.as_mut() {
            Some(g) => g,
            None => {
                fallback = Generator::with_seed(next_seed(&mut default_generator()));
                &mut fallback
            }
        };
        let order = match &self.sampler {
            Some(s) => s.indices(),
            None if self.shuffle => randperm(n, g),
            None => (0..n).collect(),
        };
        (order, next_seed(g))
    }
}

impl<D: Dataset + 'static> DataLoader<D>
where
    D::Item: Collate,
{
    /// One epoch: an iterator over its batches.
    pub fn iter(&self) -> DataLoaderIter<D> {
        let (order, epoch_seed) = self.next_epoch();
        let plan = Arc::new(EpochPlan {
            dataset: self.dataset.clone(),
            order,
            batch_size: self.batch_size,
            num_batches: self.len(),
            epoch_seed,
            pin: self.pin_memory && crate::Device::cuda_is_available(),
        });
        let inner = if self.num_workers == 0 || plan.num_batches == 0 {
            Inner::Serial { plan, next: 0 }
        } else {
            let pool_plan = plan.clone();
            let pool = WorkerPool::start(self.num_workers, self.prefetch_factor, plan.num_batches, move |b| {
                pool_plan.assemble(b)
            });
            Inner::Workers(pool)
        };
        DataLoaderIter { inner }
    }
}

impl<D: Dataset + 'static> IntoIterator for &DataLoader<D>
where
    D::Item: Collate,
{
    type Item = <D::Item as Collate>::Batch;
    type IntoIter = DataLoaderIter<D>;
    fn into_iter(self) -> DataLoaderIter<D> {
        self.iter()
    }
}

/// Batches per epoch for `n` items.
fn num_batches(n: usize, batch_size: usize, drop_last: bool) -> usize {
    if drop_last {
        n / batch_size
    } else {
        n.div_ceil(batch_size)
    }
}

/// What one epoch visits: the order and the seed its batches derive their item seeds from.
struct EpochPlan<D: Dataset> {
    dataset: Arc<D>,
    order: Vec<usize>,
    batch_size: usize,
    num_batches: usize,
    epoch_seed: u64,
    /// Pin each batch (`pin_memory(true)` with a CUDA device present).
    pin: bool,
}

impl<D: Dataset> EpochPlan<D>
where
    D::Item: Collate,
{
    /// Fetches and collates batch `b`, with the item generator seeded for it, and pins it when
    /// the loader asks for pinned batches. Errors and the panics of `Dataset::get` (a failing
    /// transform) name the caller's line: the user's `for` line when the consuming thread
    /// assembles.
    #[track_caller]
    fn assemble(&self, b: usize) -> Result<<D::Item as Collate>::Batch> {
        let _seed = ItemSeedGuard::new(batch_seed(self.epoch_seed, b));
        let start = b * self.batch_size;
        let end = (start + self.batch_size).min(self.order.len());
        let mut items: Vec<D::Item> = Vec::with_capacity(end - start);
        // A loop, not a closure, so that `get` sees the caller's line.
        for &i in &self.order[start..end] {
            items.push(self.dataset.get(i));
        }
        let batch = <D::Item as Collate>::collate(items)?;
        if self.pin {
            return <D::Item as Collate>::pin_batch(batch);
        }
        Ok(batch)
    }
}

/// How an epoch's batches are produced.
enum Inner<D: Dataset>
where
    D::Item: Collate,
{
    Serial { plan: Arc<EpochPlan<D>>, next: usize },
    Workers(WorkerPool<<D::Item as Collate>::Batch>),
}

/// The batches of one epoch of a [`DataLoader`], in order.
pub struct DataLoaderIter<D: Dataset>
where
    D::Item: Collate,
{
    inner: Inner<D>,
}

impl<D: Dataset> Iterator for DataLoaderIter<D>
where
    D::Item: Collate,
{
    type Item = <D::Item as Collate>::Batch;

    /// The next batch. A batch that cannot be assembled (items that cannot be collated, a
    /// failing transform) panics with the error at the caller's line (the `for` loop's).
    #[track_caller]
    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.inner {
            Inner::Serial { plan, next } => {
                if *next >= plan.num_batches {
                    return None;
                }
                let b = *next;
                *next += 1;
                match plan.assemble(b).at_caller() {
                    Ok(batch) => Some(batch),
                    Err(e) => panic!("DataLoader: batch {b} could not be assembled: {e}"),
                }
            }
            Inner::Workers(pool) => pool.next_batch(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = match &self.inner {
            Inner::Serial { plan, next } => plan.num_batches - *next,
            Inner::Workers(pool) => pool.remaining(),
        };
        (left, Some(left))
    }
}

impl<D: Dataset> ExactSizeIterator for DataLoaderIter<D> where D::Item: Collate {}
