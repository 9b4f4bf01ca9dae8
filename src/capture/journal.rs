//! A compiled call is a transaction: its undo journal, and the outcome other state reads.
//!
//! A call's trace writes nothing until it is realized (results are installed when the plan
//! has run), so most of a failed call needs no undo: its lazy storages are rolled back
//! ([`super::cell::CellCapture::roll_back`]). What a call changes before it ends is journaled
//! here, the first time the call changes it:
//! - storages replaced by a graph break's realization, or written by an eager op inside the
//!   call (their data as the call found it);
//! - `.grad` fields (zero_grad, accumulation, `set_grad`): the gradient the call found.
//!
//! State owned by Rust values the journal cannot reach (an optimizer's step counts and
//! moment buffers) holds a [`Transaction`] and its own copy, and reads the outcome later.
//!
//! At the end of a successful call the journal is dropped (committed); when the call
//! unwinds, every entry is restored, newest first, and the outcome becomes `Aborted`.

use crate::tensor::{StorageCell, Tensor};
use ahash::AHashSet;
use kiln_runtime::Storage;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// How a compiled call ended, as state that saved a copy at its first change reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The call is still running.
    Open,
    /// The call finished: its changes stand.
    Committed,
    /// The call failed: its changes are undone; state must go back to its saved copy.
    Aborted,
}

/// A handle on one compiled call's outcome.
#[derive(Clone, Debug)]
pub(crate) struct Transaction(Arc<AtomicU8>);

impl Transaction {
    fn new() -> Transaction {
        Transaction(Arc::new(AtomicU8::new(Outcome::Open as u8)))
    }

    /// How the call ended so far.
    pub(crate) fn outcome(&self) -> Outcome {
        match self.0.load(Ordering::Acquire) {
            0 => Outcome::Open,
            1 => Outcome::Committed,
            _ => Outcome::Aborted,
        }
    }

    /// Whether two handles are of the same call.
    pub(crate) fn is_same(&self, other: &Transaction) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    fn end(&self, outcome: Outcome) {
        self.0.store(outcome as u8, Ordering::Release);
    }
}

/// One change to undo.
enum Entry {
    /// A storage's data before the call replaced or wrote it.
    Storage(Arc<StorageCell>, Storage),
    /// A tensor's `.grad` before the call changed it.
    Grad(Tensor, Option<Tensor>),
}

/// The undo journal of the compiled call running on this thread.
pub(crate) struct Journal {
    transaction: Transaction,
    /// The serial number of the first storage made during the call: younger storages are the
    /// call's own and need no undo.
    first_new: u64,
    entries: Vec<Entry>,
    /// Storages and tensors journaled already (by address): only the first change counts.
    seen: AHashSet<usize>,
}

impl Journal {
    /// The journal of a new call.
    pub(crate) fn new() -> Journal {
        Journal {
            transaction: Transaction::new(),
            first_new: crate::tensor::next_storage_serial(),
            entries: Vec::new(),
            seen: AHashSet::new(),
        }
    }

    /// Whether `cell` was made before the call (its data is state the call must not lose).
    pub(crate) fn predates(&self, cell: &StorageCell) -> bool {
        cell.serial() < self.first_new
    }

    /// The call's outcome handle.
    pub(crate) fn transaction(&self) -> &Transaction {
        &self.transaction
    }

    /// Whether a change to `cell`'s data must be journaled: it predates the call and is not
    /// saved yet.
    pub(crate) fn wants_storage(&self, cell: &Arc<StorageCell>) -> bool {
        self.predates(cell) && !self.seen.contains(&(Arc::as_ptr(cell) as usize))
    }

    /// Saves `old`, the data `cell` held when the call found it (ignored unless
    /// [`Journal::wants_storage`]).
    pub(crate) fn save_storage(&mut self, cell: &Arc<StorageCell>, old: Storage) {
        if self.predates(cell) && self.seen.insert(Arc::as_ptr(cell) as usize) {
            self.entries.push(Entry::Storage(cell.clone(), old));
        }
    }

    /// Saves `old`, the `.grad` of `tensor` when the call found it (ignored when saved already).
    pub(crate) fn save_grad(&mut self, tensor: &Tensor, old: Option<Tensor>) {
        if self.seen.insert(tensor.impl_address()) {
            self.entries.push(Entry::Grad(tensor.clone(), old));
        }
    }

    /// The call succeeded: its changes stand.
    pub(crate) fn commit(self) {
        self.transaction.end(Outcome::Committed);
    }

    /// The call failed: every change goes back, newest first.
    pub(crate) fn abort(self) {
        for entry in self.entries.into_iter().rev() {
            match entry {
                Entry::Storage(cell, old) => {
                    cell.capture.clear();
                    drop(cell.install(old));
                    cell.bump_version();
                }
                Entry::Grad(tensor, old) => tensor.restore_grad(old),
            }
        }
        self.transaction.end(Outcome::Aborted);
    }
}
