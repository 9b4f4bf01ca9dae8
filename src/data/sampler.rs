//! The orders a loader visits items in, and the per-item random generator transforms draw from.

use crate::random::{default_generator, Generator};
use std::cell::RefCell;

/// A random permutation of `0..n` drawn from `generator` (`torch.randperm(n, generator=g)`):
/// a Fisher–Yates shuffle whose `i`-th swap partner is element `i` of one Philox draw of `n`
/// elements, mapped to `0..=i` by a 64-bit multiply–shift. The same generator state gives the
/// same permutation on every machine and thread count (the numbers differ from PyTorch's).
pub fn randperm(n: usize, generator: &mut Generator) -> Vec<usize> {
    let draw = generator.draw(n);
    let mut perm: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let w = draw.words64((i / 4) as u64)[i % 4];
        let j = ((w as u128 * (i as u128 + 1)) >> 64) as usize;
        perm.swap(i, j);
    }
    perm
}

/// One 64-bit random word from `generator` (a seed for something else).
pub(crate) fn next_seed(generator: &mut Generator) -> u64 {
    generator.draw(1).words64(0)[0]
}

/// SplitMix64's finalizer: a bijective mix of `x`, used to derive per-batch seeds.
pub(crate) fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seed of batch `batch` of an epoch whose seed is `epoch_seed`.
pub(crate) fn batch_seed(epoch_seed: u64, batch: usize) -> u64 {
    mix(epoch_seed ^ mix(batch as u64))
}

thread_local! {
    static ITEM_GENERATOR: RefCell<Option<Generator>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's item generator: the generator random transforms
/// ([`RandomCrop`](crate::vision::transforms::RandomCrop), …) draw from while a dataset
/// produces an item.
///
/// A [`DataLoader`](super::DataLoader) reseeds it before each batch from its own seed, the
/// epoch and the batch number, on whichever thread assembles the batch, so augmented batches
/// are the same for any `num_workers`. Outside a loader, a thread's first use seeds it from the
/// global generator (so [`crate::manual_seed`] makes it reproducible too).
pub fn with_item_generator<R>(f: impl FnOnce(&mut Generator) -> R) -> R {
    ITEM_GENERATOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        let g = slot.get_or_insert_with(|| Generator::with_seed(next_seed(&mut default_generator())));
        f(g)
    })
}

/// Reseeds this thread's item generator (see [`with_item_generator`]); `None` forgets it, so the
/// next use seeds it from the global generator again. Returns the previous generator.
pub fn seed_item_generator(seed: Option<u64>) -> Option<Generator> {
    ITEM_GENERATOR.with(|cell| std::mem::replace(&mut *cell.borrow_mut(), seed.map(Generator::with_seed)))
}

/// Restores the item generator a loader replaced when the batch is done (also on panic).
pub(crate) struct ItemSeedGuard {
    previous: Option<Option<Generator>>,
}

impl ItemSeedGuard {
    /// Seeds this thread's item generator with `seed` until the guard drops.
    pub(crate) fn new(seed: u64) -> ItemSeedGuard {
        ItemSeedGuard { previous: Some(seed_item_generator(Some(seed))) }
    }
}

impl Drop for ItemSeedGuard {
    fn drop(&mut self) {
        if let Some(previous) = self.previous.take() {
            ITEM_GENERATOR.with(|cell| {
                if let Ok(mut slot) = cell.try_borrow_mut() {
                    *slot = previous;
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn randperm_is_a_permutation_and_reproducible() {
        for n in [0, 1, 2, 5, 100] {
            let p = randperm(n, &mut Generator::with_seed(3));
            let mut sorted = p.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..n).collect::<Vec<_>>());
            assert_eq!(p, randperm(n, &mut Generator::with_seed(3)));
        }
        let mut g = Generator::with_seed(3);
        assert_ne!(randperm(100, &mut g), randperm(100, &mut g));
    }

    #[test]
    fn guard_restores_the_previous_generator() {
        seed_item_generator(Some(11));
        let before = with_item_generator(|g| g.get_state());
        {
            let _g = ItemSeedGuard::new(5);
            assert_eq!(with_item_generator(|g| g.initial_seed()), 5);
        }
        assert_eq!(with_item_generator(|g| g.get_state()), before);
    }
}
