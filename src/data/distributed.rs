//! [`Sampler`]: the order a [`DataLoader`](super::DataLoader) visits items in, when the loader
//! should not pick it; [`DistributedSampler`]: each rank's shard of a dataset.

use super::sampler::randperm;
use crate::error::{Error, ErrorKind, Result};
use crate::random::Generator;
use std::sync::atomic::{AtomicU64, Ordering};

/// The indices one epoch visits (`torch.utils.data.Sampler`), given to a loader with
/// [`DataLoader::sampler`](super::DataLoader::sampler).
pub trait Sampler: Send + Sync {
    /// Indices per epoch (`len(sampler)`).
    fn len(&self) -> usize;
    /// Whether an epoch visits nothing.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The indices of the current epoch, in visiting order (`iter(sampler)`).
    fn indices(&self) -> Vec<usize>;
}

/// One rank's shard of a dataset (`torch.utils.data.distributed.DistributedSampler`): every
/// epoch, the `len` indices are shuffled (with `seed + epoch`, the same on every rank, when
/// `shuffle`), padded by repeating the first ones until they split evenly (or cut, with
/// `drop_last`), and rank `r` takes every `num_replicas`-th index starting at `r`. Call
/// [`set_epoch`](Self::set_epoch) before each epoch, or every epoch has the same order.
///
/// ```
/// use kiln::data::{DistributedSampler, Sampler};
/// let s = DistributedSampler::new(10, 4, 1).unwrap().shuffle(false);
/// assert_eq!(s.indices(), vec![1, 5, 9]);   // 10 padded to 12: [0..10, 0, 1]
/// ```
#[derive(Debug)]
pub struct DistributedSampler {
    dataset_len: usize,
    num_replicas: usize,
    rank: usize,
    shuffle: bool,
    seed: u64,
    drop_last: bool,
    epoch: AtomicU64,
}

impl DistributedSampler {
    /// The shard of rank `rank` of `num_replicas` over a dataset of `dataset_len` items, with
    /// PyTorch's defaults (`shuffle=True, seed=0, drop_last=False`).
    #[track_caller]
    pub fn new(dataset_len: usize, num_replicas: usize, rank: usize) -> Result<DistributedSampler> {
        if rank >= num_replicas {
            return Err(Error::new(
                "DistributedSampler",
                ErrorKind::Value,
                format!("Invalid rank {rank}, rank should be in the interval [0, {}]", num_replicas as i64 - 1),
            ));
        }
        Ok(DistributedSampler {
            dataset_len,
            num_replicas,
            rank,
            shuffle: true,
            seed: 0,
            drop_last: false,
            epoch: AtomicU64::new(0),
        })
    }

    /// This process's shard: rank and replicas from the default process group
    /// ([`crate::distributed`]), as PyTorch's `num_replicas=None, rank=None`.
    #[track_caller]
    pub fn for_process_group(dataset_len: usize) -> Result<DistributedSampler> {
        Self::new(dataset_len, crate::distributed::world_size()?, crate::distributed::rank()?)
    }

    /// Shuffle each epoch (`shuffle=`, default true).
    pub fn shuffle(mut self, shuffle: bool) -> Self {
        self.shuffle = shuffle;
        self
    }

    /// The seed shared by all ranks (`seed=`, default 0).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Cut the tail that does not split evenly instead of padding (`drop_last=`).
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }

    /// Sets the epoch, which with the seed picks the shuffle (`sampler.set_epoch(epoch)`).
    pub fn set_epoch(&self, epoch: u64) {
        self.epoch.store(epoch, Ordering::Relaxed);
    }

    /// The current epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Relaxed)
    }

    /// Indices per rank and epoch (PyTorch's `num_samples`).
    pub fn num_samples(&self) -> usize {
        let (n, r) = (self.dataset_len, self.num_replicas);
        if self.drop_last && n % r != 0 {
            (n - n % r) / r
        } else {
            n.div_ceil(r)
        }
    }
}

impl Sampler for DistributedSampler {
    fn len(&self) -> usize {
        self.num_samples()
    }

    fn indices(&self) -> Vec<usize> {
        let n = self.dataset_len;
        let mut all: Vec<usize> = if self.shuffle {
            randperm(n, &mut Generator::with_seed(self.seed.wrapping_add(self.epoch())))
        } else {
            (0..n).collect()
        };
        let total = self.num_samples() * self.num_replicas;
        if all.len() < total && !all.is_empty() {
            let head = all.clone();
            all.extend(head.iter().cycle().take(total - n));
        }
        all.truncate(total);
        all.into_iter().skip(self.rank).step_by(self.num_replicas).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_the_dataset_and_pad_like_pytorch() {
        let shards: Vec<Vec<usize>> =
            (0..3).map(|r| DistributedSampler::new(7, 3, r).unwrap().shuffle(false).indices()).collect();
        assert_eq!(shards, vec![vec![0, 3, 6], vec![1, 4, 0], vec![2, 5, 1]]);
        let cut: Vec<Vec<usize>> = (0..3)
            .map(|r| DistributedSampler::new(7, 3, r).unwrap().shuffle(false).drop_last(true).indices())
            .collect();
        assert_eq!(cut, vec![vec![0, 3], vec![1, 4], vec![2, 5]]);
        // Padding longer than the dataset repeats it.
        assert_eq!(DistributedSampler::new(1, 3, 2).unwrap().indices(), vec![0]);
    }

    #[test]
    fn shuffles_per_epoch_consistently_across_ranks() {
        let a = DistributedSampler::new(100, 2, 0).unwrap().seed(5);
        let b = DistributedSampler::new(100, 2, 1).unwrap().seed(5);
        let e0 = a.indices();
        let mut union: Vec<usize> = e0.iter().chain(b.indices().iter()).copied().collect();
        union.sort();
        assert_eq!(union, (0..100).collect::<Vec<_>>());
        a.set_epoch(1);
        assert_ne!(a.indices(), e0);
        assert!(DistributedSampler::new(4, 2, 2).is_err());
    }
}
