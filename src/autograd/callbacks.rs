//! Callbacks queued during backward that run when it ends
//! (`Variable._execution_engine.queue_callback`): where data-parallel training waits for the
//! last gradient buckets before `backward()` returns.

use crate::error::{Error, Result};
use std::cell::RefCell;
use std::panic::Location;

/// A queued callback.
type Callback = Box<dyn FnOnce() -> Result<()>>;

thread_local! {
    /// Callbacks of the backward running on this thread (the engine runs on the caller's thread).
    static QUEUE: RefCell<Vec<Callback>> = const { RefCell::new(Vec::new()) };
}

/// Queues `f` to run once the backward pass running on this thread has finished every node,
/// before `backward()` returns; call it from a hook. An error it returns becomes the error of
/// the backward (`try_backward_with_opts` returns it; `backward` panics with it), located at
/// the user's line that called backward. Callbacks run in queue order, and
/// one queued outside any backward runs at the end of the next one on this thread.
pub fn queue_callback(f: impl FnOnce() -> Result<()> + 'static) {
    QUEUE.with(|q| q.borrow_mut().push(Box::new(f)));
}

/// Runs (and empties) the queue, including callbacks the callbacks queue; stops at the first
/// error, dropping the rest. The error is relocated to `backward_at`, the line that called
/// backward: a callback runs inside the engine, so the line it would name is library code.
pub(crate) fn run_queued(backward_at: &'static Location<'static>) -> Result<()> {
    loop {
        let batch = QUEUE.with(|q| std::mem::take(&mut *q.borrow_mut()));
        if batch.is_empty() {
            return Ok(());
        }
        for f in batch {
            if let Err(e) = f() {
                clear();
                return Err(Error { location: backward_at, ..e });
            }
        }
    }
}

/// Drops the queued callbacks (a backward that failed half-way: they must not run at the end of
/// the next one).
pub(crate) fn clear() {
    QUEUE.with(|q| q.borrow_mut().clear());
}
