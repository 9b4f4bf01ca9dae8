//! Background threads that assemble a loader's batches ahead of the consumer, delivered in order.

use crate::error::Result;
use std::any::Any;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

/// What a worker reports for one batch: the batch, or the text of its error or panic.
type Outcome<B> = (usize, std::result::Result<B, String>);

/// Worker threads for one epoch. Batch `b` goes to worker `b % n`; at most `ahead` batches are
/// requested beyond the last one delivered, so memory stays bounded.
pub(crate) struct WorkerPool<B: Send + 'static> {
    tasks: Vec<Sender<usize>>,
    results: Receiver<Outcome<B>>,
    handles: Vec<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    ready: HashMap<usize, std::result::Result<B, String>>,
    next_to_send: usize,
    next_to_yield: usize,
    num_batches: usize,
}

/// The message of a panic payload.
fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_string()
    }
}

impl<B: Send + 'static> WorkerPool<B> {
    /// Starts `workers` threads running `assemble(b)` for the batches they are sent, and
    /// requests the first `prefetch * workers` batches.
    pub(crate) fn start<F>(workers: usize, prefetch: usize, num_batches: usize, assemble: F) -> WorkerPool<B>
    where
        F: Fn(usize) -> Result<B> + Send + Sync + 'static,
    {
        let assemble = Arc::new(assemble);
        let stop = Arc::new(AtomicBool::new(false));
        let (result_tx, results) = channel::<Outcome<B>>();
        let mut tasks = Vec::with_capacity(workers);
        let mut handles = Vec::with_capacity(workers);
        for w in 0..workers {
            let (task_tx, task_rx) = channel::<usize>();
            let (assemble, stop, result_tx) = (assemble.clone(), stop.clone(), result_tx.clone());
            let handle = std::thread::Builder::new()
                .name(format!("kiln-dataloader-{w}"))
                .spawn(move || {
                    while let Ok(b) = task_rx.recv() {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let outcome = match catch_unwind(AssertUnwindSafe(|| assemble(b))) {
                            Ok(Ok(batch)) => Ok(batch),
                            Ok(Err(e)) => Err(format!("batch {b} could not be assembled: {}: {}", e.op, e.message)),
                            Err(payload) => Err(format!(
                                "worker {w} panicked while assembling batch {b}: {}",
                                panic_message(&*payload)
                            )),
                        };
                        if result_tx.send((b, outcome)).is_err() {
                            break;
                        }
                    }
                })
                .expect("DataLoader: could not spawn a worker thread");
            tasks.push(task_tx);
            handles.push(handle);
        }
        let mut pool = WorkerPool {
            tasks,
            results,
            handles,
            stop,
            ready: HashMap::new(),
            next_to_send: 0,
            next_to_yield: 0,
            num_batches,
        };
        for _ in 0..prefetch.saturating_mul(workers) {
            pool.request_next();
        }
        pool
    }

    /// Sends the next unrequested batch to its worker, if any is left.
    fn request_next(&mut self) {
        if self.next_to_send < self.num_batches {
            let b = self.next_to_send;
            // A worker only stops receiving when the pool stops it, so this send cannot fail
            // while the pool is alive; if it did, `next_batch` reports the missing batch.
            let _ = self.tasks[b % self.tasks.len()].send(b);
            self.next_to_send += 1;
        }
    }

    /// Batches not yet delivered.
    pub(crate) fn remaining(&self) -> usize {
        self.num_batches - self.next_to_yield
    }

    /// The next batch in order, waiting for it; `None` after the last. Panics with the worker's
    /// message, at the caller's line, if assembling it failed.
    #[track_caller]
    pub(crate) fn next_batch(&mut self) -> Option<B> {
        let at = std::panic::Location::caller();
        if self.next_to_yield >= self.num_batches {
            return None;
        }
        let want = self.next_to_yield;
        let outcome = loop {
            if let Some(outcome) = self.ready.remove(&want) {
                break outcome;
            }
            match self.results.recv() {
                Ok((b, outcome)) => {
                    self.ready.insert(b, outcome);
                }
                Err(_) => panic!("DataLoader: the worker threads exited before delivering batch {want} (at {at})"),
            }
        };
        self.next_to_yield += 1;
        self.request_next();
        match outcome {
            Ok(batch) => Some(batch),
            Err(message) => {
                self.shutdown();
                panic!("DataLoader: {message} (at {at})")
            }
        }
    }

    /// Stops the workers (each finishes at most the batch in hand) and joins them.
    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.tasks.clear();
        for handle in self.handles.drain(..) {
            // Workers catch panics from the dataset, so a join error is impossible in practice;
            // there is nothing useful to do with one while dropping.
            let _ = handle.join();
        }
    }
}

impl<B: Send + 'static> Drop for WorkerPool<B> {
    fn drop(&mut self) {
        self.shutdown();
    }
}
