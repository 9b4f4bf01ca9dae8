//! [`random_split`]: a dataset cut into non-overlapping random subsets.

use super::dataset::{Dataset, Subset};
use super::sampler::randperm;
use crate::error::{bail, Result};
use crate::random::Generator;
use std::sync::Arc;

/// The sizes given to [`random_split`]: lengths (integers summing to the dataset's length) or
/// fractions (floats summing to 1; each subset gets `floor(n * f)` items and the remainder is
/// handed out one item at a time, round-robin from the first subset, as PyTorch does).
pub trait SplitLengths {
    /// The length of each subset of a dataset of `n` items, or an error at the caller's line
    /// (`#[track_caller]` in every implementation).
    #[track_caller]
    fn resolve(&self, n: usize) -> Result<Vec<usize>>;
}

macro_rules! integer_lengths {
    ($($t:ty),*) => {$(
        impl SplitLengths for [$t] {
            #[track_caller]
            fn resolve(&self, n: usize) -> Result<Vec<usize>> {
                let mut out = Vec::with_capacity(self.len());
                for &l in self {
                    #[allow(irrefutable_let_patterns)]
                    let Ok(l) = usize::try_from(l) else {
                        bail!("random_split", Value, "lengths must be non-negative, but got {:?}", self);
                    };
                    out.push(l);
                }
                let total: usize = out.iter().sum();
                if total != n {
                    bail!("random_split", Value, "sum of input lengths {total} ({:?}) does not equal the length of the input dataset ({n})", self);
                }
                Ok(out)
            }
        }
    )*};
}

integer_lengths!(usize, u64, u32, i64, i32);

macro_rules! fraction_lengths {
    ($($t:ty),*) => {$(
        impl SplitLengths for [$t] {
            #[track_caller]
            fn resolve(&self, n: usize) -> Result<Vec<usize>> {
                let fractions: Vec<f64> = self.iter().map(|&f| f as f64).collect();
                if let Some(f) = fractions.iter().find(|f| !(0.0..=1.0).contains(*f)) {
                    bail!("random_split", Value, "fractions must lie in [0, 1], but got {f} in {fractions:?}");
                }
                let sum: f64 = fractions.iter().sum();
                if (sum - 1.0).abs() > 1e-6 {
                    bail!("random_split", Value, "fractions must sum to 1, but {fractions:?} sum to {sum}");
                }
                let mut out: Vec<usize> = fractions.iter().map(|f| (n as f64 * f).floor() as usize).collect();
                let remainder = n - out.iter().sum::<usize>().min(n);
                let k = out.len();
                for i in 0..remainder {
                    out[i % k] += 1;
                }
                Ok(out)
            }
        }
    )*};
}

fraction_lengths!(f64, f32);

impl<T, const N: usize> SplitLengths for [T; N]
where
    [T]: SplitLengths,
{
    #[track_caller]
    fn resolve(&self, n: usize) -> Result<Vec<usize>> {
        self[..].resolve(n)
    }
}

impl<T> SplitLengths for Vec<T>
where
    [T]: SplitLengths,
{
    #[track_caller]
    fn resolve(&self, n: usize) -> Result<Vec<usize>> {
        self[..].resolve(n)
    }
}

/// Splits `dataset` into non-overlapping random subsets of the given `lengths` (or fractions),
/// shuffled by a generator seeded with `seed`
/// (`torch.utils.data.random_split(ds, lengths, generator=torch.Generator().manual_seed(seed))`).
/// The subsets share the dataset through an `Arc`.
///
/// ```
/// # use kiln::data::{random_split, Dataset, TensorDataset};
/// let ds = TensorDataset::new(kiln::Tensor::arange(10)).unwrap();
/// let parts = random_split(ds, &[0.8, 0.2], 42).unwrap();
/// assert_eq!((parts[0].len(), parts[1].len()), (8, 2));
/// ```
#[track_caller]
pub fn random_split<D: Dataset, L: SplitLengths + ?Sized>(
    dataset: D,
    lengths: &L,
    seed: u64,
) -> Result<Vec<Subset<D>>> {
    random_split_with(dataset, lengths, &mut Generator::with_seed(seed))
}

/// [`random_split`] drawing the permutation from `generator` (which advances).
#[track_caller]
pub fn random_split_with<D: Dataset, L: SplitLengths + ?Sized>(
    dataset: D,
    lengths: &L,
    generator: &mut Generator,
) -> Result<Vec<Subset<D>>> {
    let n = dataset.len();
    let lengths = lengths.resolve(n)?;
    let dataset = Arc::new(dataset);
    let perm = randperm(n, generator);
    let mut start = 0;
    let mut out = Vec::with_capacity(lengths.len());
    for l in lengths {
        out.push(Subset::new(dataset.clone(), perm[start..start + l].to_vec())?);
        start += l;
    }
    Ok(out)
}
