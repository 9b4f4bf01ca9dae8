//! `kiln::data`: DataLoader batching, shuffling, workers, collation, splits.

use kiln::data::{random_split, randperm, with_item_generator, Collate, DataLoader, Dataset, Subset, TensorDataset};
use kiln::random::Generator;
use kiln::{DType, Tensor};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Items `(index as f32 row [2], index as i64)`.
fn pairs(n: usize) -> TensorDataset<(Tensor, Tensor)> {
    let x = Tensor::from_vec((0..2 * n).map(|v| (v / 2) as f32).collect::<Vec<f32>>(), [n, 2]);
    let y = Tensor::from_vec((0..n as i64).collect::<Vec<i64>>(), [n]);
    TensorDataset::new((x, y)).unwrap()
}

/// The label batches of one epoch, as vectors.
fn epoch(loader: &DataLoader<TensorDataset<(Tensor, Tensor)>>) -> Vec<Vec<i64>> {
    loader
        .iter()
        .map(|(x, y)| {
            let labels = y.to_vec::<i64>();
            let firsts: Vec<i64> = x.to_vec::<f32>().chunks(2).map(|r| r[0] as i64).collect();
            assert_eq!(firsts, labels, "rows of x and y stay paired");
            labels
        })
        .collect()
}

#[test]
fn batches_in_order_with_and_without_drop_last() {
    let loader = DataLoader::new(pairs(10)).batch_size(3);
    assert_eq!(loader.len(), 4);
    let mut shapes = vec![];
    for (x, y) in &loader {
        shapes.push((x.shape().to_vec(), y.shape().to_vec(), y.dtype()));
    }
    assert_eq!(shapes[0], (vec![3, 2], vec![3], DType::I64));
    assert_eq!(shapes[3], (vec![1, 2], vec![1], DType::I64));
    assert_eq!(epoch(&loader), vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8], vec![9]]);

    let dropped = DataLoader::new(pairs(10)).batch_size(3).drop_last(true);
    assert_eq!(dropped.len(), 3);
    assert_eq!(epoch(&dropped), vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8]]);
    assert_eq!(dropped.iter().len(), 3);

    let empty = DataLoader::new(pairs(0)).batch_size(4).num_workers(2);
    assert_eq!((empty.len(), empty.iter().count()), (0, 0));
    let exact = DataLoader::new(pairs(8)).batch_size(4).drop_last(true).pin_memory(true);
    assert_eq!(exact.len(), 2);
}

#[test]
fn workers_deliver_in_order() {
    for workers in [1, 2, 3, 5] {
        let loader = DataLoader::new(pairs(23)).batch_size(2).num_workers(workers).prefetch_factor(1);
        let flat: Vec<i64> = epoch(&loader).concat();
        assert_eq!(flat, (0..23).collect::<Vec<i64>>(), "num_workers = {workers}");
    }
}

#[test]
fn shuffle_is_seeded_fresh_per_epoch_and_independent_of_workers() {
    let make = |workers| DataLoader::new(pairs(50)).batch_size(8).shuffle(true).seed(7).num_workers(workers);
    let serial = make(0);
    let epochs: Vec<Vec<Vec<i64>>> = (0..3).map(|_| epoch(&serial)).collect();
    for e in &epochs {
        let mut all: Vec<i64> = e.concat();
        all.sort_unstable();
        assert_eq!(all, (0..50).collect::<Vec<i64>>(), "every item exactly once per epoch");
        assert_eq!(e.len(), 7);
    }
    assert_ne!(epochs[0], epochs[1], "a fresh permutation each epoch");
    assert_ne!(epochs[1], epochs[2]);
    assert_ne!(epochs[0].concat(), (0..50).collect::<Vec<i64>>(), "shuffled");

    let threaded = make(3);
    let threaded_epochs: Vec<Vec<Vec<i64>>> = (0..3).map(|_| epoch(&threaded)).collect();
    assert_eq!(threaded_epochs, epochs, "same seed, same batches, whatever num_workers");

    let other = DataLoader::new(pairs(50)).batch_size(8).shuffle(true).seed(8);
    assert_ne!(epoch(&other), epochs[0]);
    let generator = DataLoader::new(pairs(50)).batch_size(8).shuffle(true).generator(Generator::with_seed(7));
    assert_eq!(epoch(&generator), epochs[0]);
}

#[test]
fn unseeded_shuffle_draws_from_the_global_generator() {
    // Without a seed each epoch's generator is seeded from the global one (other tests in this
    // binary draw from it concurrently, so only the form of the result is checked here).
    let loader = DataLoader::new(pairs(40)).batch_size(40).shuffle(true);
    let (a, b) = (epoch(&loader).concat(), epoch(&loader).concat());
    let mut sorted = a.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..40).collect::<Vec<i64>>());
    assert_ne!(a, b);
}

#[test]
fn randperm_matches_for_equal_generators() {
    let a = randperm(1000, &mut Generator::with_seed(1));
    let b = randperm(1000, &mut Generator::with_seed(1));
    assert_eq!(a, b);
    let mut seen = vec![false; 1000];
    for &i in &a {
        assert!(!seen[i]);
        seen[i] = true;
    }
    // A uniform permutation has ~1 fixed point on average; the identity has 1000.
    assert!(a.iter().enumerate().filter(|(i, &v)| *i == v).count() < 10);
}

/// A dataset that counts calls to `get`, optionally sleeps, and panics at one index.
struct Probe {
    n: usize,
    calls: AtomicUsize,
    sleep: Duration,
    panic_at: Option<usize>,
}

impl Probe {
    fn new(n: usize) -> Probe {
        Probe { n, calls: AtomicUsize::new(0), sleep: Duration::ZERO, panic_at: None }
    }
}

impl Dataset for Probe {
    type Item = (Tensor, i64);
    fn len(&self) -> usize {
        self.n
    }
    fn get(&self, index: usize) -> (Tensor, i64) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.panic_at == Some(index) {
            panic!("boom at {index}");
        }
        if !self.sleep.is_zero() {
            std::thread::sleep(self.sleep);
        }
        (Tensor::full([2], index as f32), index as i64)
    }
}

#[test]
fn dropping_an_iterator_early_stops_and_joins_the_workers() {
    let probe = Arc::new(Probe { sleep: Duration::from_millis(2), ..Probe::new(2000) });
    let loader = DataLoader::from_arc(probe.clone()).batch_size(4).num_workers(3);
    let start = Instant::now();
    {
        let mut it = loader.iter();
        for b in 0..3 {
            let (_, y) = it.next().unwrap();
            assert_eq!(y.to_vec::<i64>(), vec![4 * b, 4 * b + 1, 4 * b + 2, 4 * b + 3]);
        }
    }
    assert!(start.elapsed() < Duration::from_secs(5), "dropping the iterator must not wait for the epoch");
    // The workers held the dataset through the epoch plan; once they are joined only the test
    // and the loader hold it.
    assert_eq!(Arc::strong_count(&probe), 2, "worker threads were joined and released the dataset");
    let calls = probe.calls.load(Ordering::SeqCst);
    // 3 consumed + at most prefetch_factor (2) * 3 workers requested ahead, + 3 in hand.
    assert!(calls <= 4 * (3 + 2 * 3 + 3), "prefetch is bounded, but {calls} items were fetched");
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(probe.calls.load(Ordering::SeqCst), calls, "nothing runs after the drop");
}

#[test]
fn a_worker_panic_reaches_the_consumer_with_its_message() {
    for workers in [0, 2] {
        let probe = Probe { panic_at: Some(13), ..Probe::new(40) };
        let loader = DataLoader::new(probe).batch_size(4).num_workers(workers);
        let mut delivered = 0;
        let result = catch_unwind(AssertUnwindSafe(|| {
            for _ in &loader {
                delivered += 1;
            }
        }));
        let payload = result.expect_err("the panic must propagate");
        let message = payload.downcast_ref::<String>().cloned().unwrap_or_default();
        if workers > 0 {
            assert!(message.contains("boom at 13") && message.contains("batch 3"), "{message}");
        } else {
            assert!(message.contains("boom at 13"), "{message}");
        }
        assert_eq!(delivered, 3, "batches before the failing one arrive");
    }
}

#[test]
fn collation_errors_panic_with_the_reason() {
    struct Ragged;
    impl Dataset for Ragged {
        type Item = Tensor;
        fn len(&self) -> usize {
            4
        }
        fn get(&self, index: usize) -> Tensor {
            Tensor::zeros([1 + index % 2])
        }
    }
    for workers in [0, 1] {
        let loader = DataLoader::new(Ragged).batch_size(2).num_workers(workers);
        let payload = catch_unwind(AssertUnwindSafe(|| loader.iter().count())).unwrap_err();
        let message = payload.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(message.contains("stack") && message.contains("batch 0"), "{message}");
    }
}

#[test]
fn collate_forms() {
    let (x, y) = <(Tensor, i64)>::collate(vec![(Tensor::ones([2, 3]), 4), (Tensor::zeros([2, 3]), 7)]).unwrap();
    assert_eq!((x.shape(), y.dtype(), y.to_vec::<i64>()), (&[2usize, 2, 3][..], DType::I64, vec![4, 7]));
    assert_eq!(x.to_vec::<f32>()[..6], [1.0; 6]);
    let cols = Vec::<Tensor>::collate(vec![
        vec![Tensor::scalar(1.0f32), Tensor::from_slice(&[1i64, 2])],
        vec![Tensor::scalar(2.0f32), Tensor::from_slice(&[3i64, 4])],
    ])
    .unwrap();
    assert_eq!(cols[0].to_vec::<f32>(), vec![1.0, 2.0]);
    assert_eq!((cols[1].shape(), cols[1].to_vec::<i64>()), (&[2usize, 2][..], vec![1, 2, 3, 4]));
    assert!(Vec::<Tensor>::collate(vec![vec![Tensor::scalar(1.0)], vec![]]).is_err());
    let t = Tensor::collate(vec![Tensor::from_slice(&[1.0f64]), Tensor::from_slice(&[2.0f64])]).unwrap();
    assert_eq!((t.shape(), t.dtype()), (&[2usize, 1][..], DType::F64));
    let f = f32::collate(vec![0.5, 1.5]).unwrap();
    assert_eq!((f.dtype(), f.to_vec::<f32>()), (DType::F32, vec![0.5, 1.5]));

    // TensorDataset with a single tensor, a Vec and a triple.
    let single = DataLoader::new(TensorDataset::new(Tensor::arange(5)).unwrap()).batch_size(5);
    assert_eq!(single.iter().next().unwrap().to_vec::<i64>(), vec![0, 1, 2, 3, 4]);
    let v = DataLoader::new(TensorDataset::new(vec![Tensor::arange(4), Tensor::ones([4, 2])]).unwrap()).batch_size(3);
    let first = v.iter().next().unwrap();
    assert_eq!((first.len(), first[1].shape()), (2, &[3usize, 2][..]));
    let triple = TensorDataset::new((Tensor::arange(3), Tensor::arange(3), Tensor::zeros([3, 1]))).unwrap();
    assert_eq!(triple.get(2).1.item::<i64>(), 2);
}

#[test]
fn datasets_check_their_inputs() {
    let e = TensorDataset::new((Tensor::zeros([3, 2]), Tensor::zeros([4]))).err().unwrap();
    assert!(e.to_string().contains("size mismatch") && e.to_string().contains("[3, 2]"), "{e}");
    assert!(TensorDataset::new(Tensor::scalar(1.0)).is_err());
    assert!(TensorDataset::new(Vec::<Tensor>::new()).is_err());
    let e = Subset::new(pairs(3), vec![0, 3]).err().unwrap();
    assert!(e.to_string().contains("index 3"), "{e}");
    let s = Subset::new(pairs(5), vec![4, 1]).unwrap();
    assert_eq!((s.len(), s.get(0).1.item::<i64>(), s.get(1).1.item::<i64>()), (2, 4, 1));
}

#[test]
fn random_split_partitions_reproducibly() {
    let labels = |s: &Subset<TensorDataset<(Tensor, Tensor)>>| {
        (0..s.len()).map(|i| s.get(i).1.item::<i64>()).collect::<Vec<i64>>()
    };
    let parts = random_split(pairs(10), &[7, 3], 42).unwrap();
    let (a, b) = (labels(&parts[0]), labels(&parts[1]));
    assert_eq!((a.len(), b.len()), (7, 3));
    let mut all = [a.clone(), b.clone()].concat();
    all.sort_unstable();
    assert_eq!(all, (0..10).collect::<Vec<i64>>());
    assert!(Arc::ptr_eq(parts[0].dataset(), parts[1].dataset()), "subsets share the dataset");
    let again = random_split(pairs(10), &[7, 3], 42).unwrap();
    assert_eq!(labels(&again[0]), a);
    let other = random_split(pairs(10), &[7, 3], 43).unwrap();
    assert_ne!(labels(&other[0]), a);

    let fr = random_split(pairs(11), &[0.5, 0.5], 0).unwrap();
    assert_eq!((fr[0].len(), fr[1].len()), (6, 5), "the remainder goes to the first subsets");
    let three = random_split(pairs(10), &[0.34, 0.33, 0.33], 0).unwrap();
    assert_eq!(three.iter().map(Dataset::len).collect::<Vec<_>>(), vec![4, 3, 3]);
    assert!(random_split(pairs(10), &[5, 4], 0).is_err());
    assert!(random_split(pairs(10), &[0.5, 0.6], 0).is_err());
    assert!(random_split(pairs(10), &[-1, 11], 0).is_err());
}

/// A dataset whose items are random numbers from the item generator.
struct Noisy;

impl Dataset for Noisy {
    type Item = i64;
    fn len(&self) -> usize {
        30
    }
    fn get(&self, _: usize) -> i64 {
        with_item_generator(|g| (g.draw(1).words32(0)[0] >> 1) as i64)
    }
}

#[test]
fn item_randomness_depends_on_the_seed_not_the_workers() {
    let run = |workers| {
        let loader = DataLoader::new(Noisy).batch_size(4).shuffle(true).seed(3).num_workers(workers);
        (0..2).map(|_| loader.iter().map(|b| b.to_vec::<i64>()).collect::<Vec<_>>()).collect::<Vec<_>>()
    };
    let serial = run(0);
    assert_eq!(run(2), serial);
    assert_eq!(run(4), serial);
    assert_ne!(serial[0], serial[1], "each epoch draws new numbers");
    let flat = serial[0].concat();
    let distinct: std::collections::HashSet<i64> = flat.iter().copied().collect();
    assert_eq!(distinct.len(), flat.len(), "items within an epoch draw different numbers");
}
