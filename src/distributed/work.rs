//! A collective in flight ([`Work`]) and the deadline every wait on it keeps.
//!
//! Waiting polls the transport (`MPI_Test`, which also drives MPI's progress; an event query
//! for NCCL) until the request completes or the group's timeout passes. A request that never
//! completes keeps its buffers: the library may still read or write them, so they are leaked,
//! never freed or handed back. Buffers are host memory for MPI and device memory of the rank's
//! GPU for NCCL.

use super::group::{self, mark_aborted};
use super::transport::{Call, Request, Wire};
use crate::error::{Error, ErrorKind, Result};
use kiln_runtime::{CpuStorage, Storage};
use std::ffi::c_void;
use std::panic::Location;
use std::time::{Duration, Instant};

/// What a collective sends from.
pub(crate) enum SendBuf {
    /// Nothing (a barrier, or a broadcast's receivers).
    None,
    /// A buffer the work owns (and leaks if the request never completes).
    Owned(Storage),
    /// A buffer the caller keeps alive and unwritten until [`Work::wait`] returns, and leaks if
    /// it returns a timeout or transport error.
    Borrowed(*const c_void),
}

/// A started collective.
pub(crate) struct Work {
    op: &'static str,
    request: Option<Request>,
    started: Instant,
    timeout: Duration,
    rank: usize,
    world_size: usize,
    send: Option<Storage>,
    recv: Option<Storage>,
}

/// The address of a CPU storage's first element.
pub(crate) fn storage_ptr(s: &CpuStorage) -> *const c_void {
    kiln_runtime::match_cpu!(s, |b: T| b.as_ptr() as *const c_void)
}

/// The writable address of a CPU storage's first element.
pub(crate) fn storage_ptr_mut(s: &mut CpuStorage) -> *mut c_void {
    kiln_runtime::match_cpu!(s, |b: T| b.as_mut_ptr() as *mut c_void)
}

/// The address of a storage's first element: a host address on the CPU, a device address
/// (as a pointer) on CUDA, which is what the NCCL transport takes.
pub(crate) fn any_storage_ptr(s: &mut Storage) -> *mut c_void {
    match s {
        Storage::Cpu(c) => storage_ptr_mut(c),
        Storage::Cuda(c) => c.buffer().device_ptr() as *mut c_void,
    }
}

impl Work {
    /// Starts `call` on `count` elements of `wire` from `send` into `recv` (sizes as
    /// [`Call`] says; `recv` must be a fresh storage nothing else references).
    ///
    /// # Safety
    /// A [`SendBuf::Borrowed`] pointer must be valid for the call's reads until [`Work::wait`]
    /// returns, and forever when it returns an error (the caller leaks it then).
    #[track_caller]
    pub(crate) unsafe fn start(
        op: &'static str,
        call: Call,
        wire: Wire,
        count: usize,
        send: SendBuf,
        mut recv: Option<Storage>,
    ) -> Result<Work> {
        let at = Location::caller();
        group::with_group(op, |g| {
            let (send_ptr, send) = match send {
                SendBuf::None => (std::ptr::null(), None),
                SendBuf::Borrowed(p) => (p, None),
                SendBuf::Owned(mut s) => (any_storage_ptr(&mut s) as *const c_void, Some(s)),
            };
            let recv_ptr = recv.as_mut().map_or(std::ptr::null_mut(), any_storage_ptr);
            // SAFETY: owned buffers live in the Work until completion (or are leaked), recv is
            // fresh and unaliased, and the caller vouches for a borrowed send buffer.
            let request = unsafe { g.transport.start(call, wire, send_ptr, recv_ptr, count) }.map_err(|e| Error {
                op,
                location: at,
                ..e
            })?;
            let (rank, world_size) = (g.transport.rank(), g.transport.world_size());
            Ok(Work {
                op,
                request: Some(request),
                started: Instant::now(),
                timeout: g.timeout,
                rank,
                world_size,
                send,
                recv,
            })
        })
    }

    /// Whether the collective has completed; drives the library's progress (call it while
    /// doing other work to overlap communication).
    #[track_caller]
    pub(crate) fn test(&mut self) -> Result<bool> {
        let Some(request) = &self.request else { return Ok(true) };
        let done = {
            let mut guard = group::lock();
            let Some(g) = guard.as_mut() else { return Err(group::not_initialized(self.op)) };
            g.transport.test(request)
        };
        match done {
            Ok(true) => {
                self.request = None;
                Ok(true)
            }
            Ok(false) => Ok(false),
            Err(e) => {
                let reason = format!(
                    "{} failed on rank {} of {}: {} (a peer may have died)",
                    self.op, self.rank, self.world_size, e.message
                );
                mark_aborted(&reason);
                Err(Error::new(self.op, ErrorKind::Distributed, reason))
            }
        }
    }

    /// Waits until the collective completes and returns the receive buffer; fails once the
    /// group's timeout has passed since the start (and aborts the group: see the module docs).
    #[track_caller]
    pub(crate) fn wait(mut self) -> Result<Option<Storage>> {
        let deadline = self.started + self.timeout;
        let mut polls = 0u32;
        loop {
            if self.test()? {
                return Ok(self.recv.take());
            }
            if Instant::now() >= deadline {
                let reason = format!(
                    "{} timed out after {:?} on rank {} of {}: the other ranks did not take part (one may have died, hung, or called a different collective)",
                    self.op, self.timeout, self.rank, self.world_size
                );
                mark_aborted(&reason);
                return Err(Error::new(self.op, ErrorKind::Timeout, reason));
            }
            polls = polls.saturating_add(1);
            if polls < 1024 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        if self.request.is_some() {
            // Still in flight: the library may read or write these, so they must never be freed.
            std::mem::forget(self.send.take());
            std::mem::forget(self.recv.take());
        }
    }
}
