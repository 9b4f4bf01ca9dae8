//! [`NcclComm`]: one rank's NCCL communicator on one device, collectives queued on the device's
//! stream, and [`NcclEvent`]s to poll them without blocking.

use super::super::context::{device, CudaDevice};
use super::super::error::{CudaError, CudaErrorKind, Result};
use super::api::NcclApi;
use super::library::api;
use super::nonblocking::{non_blocking_config, wait_ready};
use super::types::{data_type, red_op, NcclReduce, UniqueId};
use crate::dtype::DType;
use cudarc::driver::result::event;
use cudarc::nccl::sys;
use std::ffi::{c_int, c_void};
use std::sync::Arc;
use std::time::Duration;

/// A collective as NCCL runs it (buffer sizes as [`NcclComm::enqueue`] says).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Collective {
    /// `count` elements from every rank reduced into `count` elements on every rank.
    AllReduce(NcclReduce),
    /// `count` elements of `root`'s `send` copied into every rank's `recv`.
    Broadcast {
        /// The rank whose elements every rank receives.
        root: usize,
    },
    /// `count` elements from every rank concatenated, in rank order, into `count * world_size`.
    AllGather,
    /// `count * world_size` elements from every rank reduced; block `r` of `count` lands on
    /// rank `r`.
    ReduceScatter(NcclReduce),
}

/// One rank's communicator (`ncclComm_t`) on `cuda:ordinal`, destroyed on drop.
pub struct NcclComm {
    comm: sys::ncclComm_t,
    nccl: &'static NcclApi,
    dev: Arc<CudaDevice>,
    rank: usize,
    world_size: usize,
    /// The longest wait on NCCL (the process group's timeout).
    timeout: Duration,
}

// SAFETY: an NCCL communicator may be used from any thread as long as calls on it do not
// overlap; NcclComm's methods take `&self`/`self` and kiln calls them under the process group's
// mutex only, so no two run at once.
unsafe impl Send for NcclComm {}

/// NCCL's name and text for a result code (the name alone when no libnccl is loaded).
pub(crate) fn result_name(r: sys::ncclResult_t) -> String {
    let Ok(nccl) = api("result_name") else { return format!("{r:?}") };
    // SAFETY: a loaded libnccl's function; the returned string is static and NUL-terminated
    // (or null, checked).
    let text = unsafe { (nccl.get_error_string)(r) };
    if text.is_null() {
        return format!("{r:?}");
    }
    // SAFETY: non-null, NUL-terminated static string owned by NCCL.
    format!("{r:?}: {}", unsafe { std::ffi::CStr::from_ptr(text) }.to_string_lossy())
}

/// `what` failed with NCCL's result `r`, as `op`'s error.
fn failed(op: &'static str, what: &str, r: sys::ncclResult_t) -> CudaError {
    CudaError::new(op, CudaErrorKind::Driver, format!("{what} failed: {}", result_name(r)))
}

impl NcclComm {
    /// Joins the communicator of `world_size` ranks named by `id` as `rank`, on `cuda:ordinal`
    /// (a non-blocking `ncclCommInitRankConfig`, done once every rank has joined; see
    /// [`super::nonblocking`]). Every later wait on NCCL is bounded by `timeout` too.
    ///
    /// Errors: no libnccl, no such device, NCCL's own failure (ranks that disagree on
    /// `world_size`, a network error), or kind `Timeout` when the other ranks have not all
    /// joined within `timeout` (the half-made communicator is aborted).
    pub fn init(
        op: &'static str,
        ordinal: usize,
        world_size: usize,
        rank: usize,
        id: &UniqueId,
        timeout: Duration,
    ) -> Result<NcclComm> {
        let (nccl, version) = (api(op)?, super::nccl_version(op)?);
        let dev = device(op, ordinal)?;
        let (n, r) = (int(op, "world size", world_size)?, int(op, "rank", rank)?);
        dev.bind(op)?;
        let mut comm: sys::ncclComm_t = std::ptr::null_mut();
        let mut config = non_blocking_config(version);
        // SAFETY: `comm` is a valid out-parameter, the id is a full ncclUniqueId, `config` is a
        // filled ncclConfig_t that outlives the call (NCCL copies it), and the device's context
        // is current, so NCCL picks that device.
        let init = unsafe { (nccl.comm_init_rank_config)(&mut comm, n, id.0, r, &mut config) };
        if !in_flight(init) {
            return Err(failed(op, "ncclCommInitRankConfig", init));
        }
        let what = format!("NCCL communicator setup (rank {rank} of {world_size} on cuda:{ordinal})");
        // SAFETY: `comm` is the communicator NCCL just began to make; it is polled or
        // aborted, never used after the abort.
        if let Err(e) = wait_ready(op, &what, timeout, || unsafe { async_state(nccl, comm) }) {
            // SAFETY: as above; this is the abort, and `comm` is not used after it.
            let _ = unsafe { (nccl.comm_abort)(comm) };
            return Err(e);
        }
        Ok(NcclComm { comm, nccl, dev, rank, world_size, timeout })
    }

    /// The ordinal of the communicator's device.
    pub fn ordinal(&self) -> usize {
        self.dev.ordinal()
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// Queues `call` on the device's stream: `count` elements of `dtype` per rank from the
    /// device address `send` into `recv` (see [`Collective`] for the sizes; `send == recv` is
    /// NCCL's in-place form for all-reduce and broadcast).
    ///
    /// # Safety
    /// `send` must be readable and `recv` writable device memory of this device for the sizes
    /// [`Collective`] gives, and both must stay allocated until work queued after this call on
    /// the stream has run (kiln's allocator reuses blocks only for later work on the same stream,
    /// which is enough).
    pub unsafe fn enqueue(
        &self,
        op: &'static str,
        call: Collective,
        dtype: DType,
        send: u64,
        recv: u64,
        count: usize,
    ) -> Result<()> {
        self.dev.bind(op)?;
        let stream = self.dev.stream().cu_stream() as sys::cudaStream_t;
        let (dt, s, r) = (data_type(dtype), send as *const c_void, recv as *mut c_void);
        let (nccl, comm) = (self.nccl, self.comm);
        // SAFETY: the caller vouches for the buffers; the communicator is live and its device's
        // context is current; `stream` belongs to that context.
        let res = unsafe {
            match call {
                Collective::AllReduce(o) => (nccl.all_reduce)(s, r, count, dt, red_op(o), comm, stream),
                Collective::Broadcast { root } => {
                    (nccl.broadcast)(s, r, count, dt, int(op, "root", root)?, comm, stream)
                }
                Collective::AllGather => (nccl.all_gather)(s, r, count, dt, comm, stream),
                Collective::ReduceScatter(o) => (nccl.reduce_scatter)(s, r, count, dt, red_op(o), comm, stream),
            }
        };
        let what = format!("NCCL {call:?} of {count} {dtype} elements");
        match res {
            sys::ncclResult_t::ncclSuccess => Ok(()),
            // A non-blocking communicator may still be queueing the call (connecting to a peer
            // the first time): wait until it is on the stream, so an event recorded next
            // follows it.
            sys::ncclResult_t::ncclInProgress => {
                // SAFETY: a live communicator.
                wait_ready(op, &what, self.timeout, || unsafe { async_state(nccl, comm) })
            }
            code => Err(failed(op, &what, code)),
        }
    }

    /// An event recorded on the device's stream now: it completes when everything queued so far
    /// (the last collective) has run.
    pub fn record(&self, op: &'static str) -> Result<NcclEvent> {
        self.dev.bind(op)?;
        let ev = event::create(cudarc::driver::sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
            .map_err(|e| CudaError::driver(op, "cuEventCreate", e))?;
        let ev = NcclEvent(ev);
        // SAFETY: a live event and the device's live stream, in the current context.
        unsafe { event::record(ev.0, self.dev.stream().cu_stream()) }
            .map_err(|e| CudaError::driver(op, "cuEventRecord", e))?;
        Ok(ev)
    }

    /// Whether `ev` has completed; an error when the device or NCCL reported one (a peer gone:
    /// `ncclCommGetAsyncError`). Never blocks.
    pub fn poll(&self, op: &'static str, ev: &NcclEvent) -> Result<bool> {
        self.dev.bind(op)?;
        // SAFETY: a live event created by `record`.
        match unsafe { event::query(ev.0) } {
            Ok(()) => return Ok(true),
            Err(e) if e.0 == cudarc::driver::sys::cudaError_enum::CUDA_ERROR_NOT_READY => {}
            Err(e) => return Err(CudaError::driver(op, "waiting for an NCCL collective", e)),
        }
        // SAFETY: a live communicator.
        match unsafe { async_state(self.nccl, self.comm) } {
            sys::ncclResult_t::ncclSuccess | sys::ncclResult_t::ncclInProgress => Ok(false),
            code => Err(failed(op, "the communicator", code)),
        }
    }

    /// Aborts the communicator (`ncclCommAbort`): collectives in flight stop, so the process can
    /// exit without waiting for a peer that never comes.
    pub fn abort(self) {
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: a live communicator, never used again (no Drop runs).
        let _ = unsafe { (me.nccl.comm_abort)(me.comm) };
        // SAFETY: `dev` is read out once and dropped; `me` is never used again.
        drop(unsafe { std::ptr::read(&me.dev) });
    }
}

impl Drop for NcclComm {
    fn drop(&mut self) {
        // SAFETY: a live communicator, destroyed once (ncclCommDestroy waits for queued work).
        let _ = unsafe { (self.nccl.comm_destroy)(self.comm) };
    }
}

/// A point on a device's stream to poll ([`NcclComm::record`], [`NcclComm::poll`]).
pub struct NcclEvent(cudarc::driver::sys::CUevent);

// SAFETY: a CUevent handle may be queried and destroyed from any thread.
unsafe impl Send for NcclEvent {}

impl Drop for NcclEvent {
    fn drop(&mut self) {
        // SAFETY: a live event, destroyed once; the driver releases it when it completes.
        let _ = unsafe { event::destroy(self.0) };
    }
}

/// The communicator's state (`ncclCommGetAsyncError`): `ncclSuccess`, `ncclInProgress` while
/// a non-blocking call is still running, or the error it met (also when the query fails).
///
/// # Safety
/// `comm` must be a live communicator (or one being made) of the library `nccl`.
unsafe fn async_state(nccl: &NcclApi, comm: sys::ncclComm_t) -> sys::ncclResult_t {
    let mut state = sys::ncclResult_t::ncclSuccess;
    // SAFETY: the caller vouches for `comm`; `state` is a valid out-parameter.
    match unsafe { (nccl.comm_get_async_error)(comm, &mut state) } {
        sys::ncclResult_t::ncclSuccess => state,
        failed_query => failed_query,
    }
}

/// Whether a call's result lets the (non-blocking) operation go on: success or in progress.
fn in_flight(r: sys::ncclResult_t) -> bool {
    matches!(r, sys::ncclResult_t::ncclSuccess | sys::ncclResult_t::ncclInProgress)
}

/// A size as NCCL's `int`, or an error naming it.
fn int(op: &'static str, what: &str, v: usize) -> Result<c_int> {
    c_int::try_from(v).map_err(|_| {
        CudaError::new(op, CudaErrorKind::InvalidArgument, format!("{what} = {v} does not fit NCCL's int"))
    })
}
