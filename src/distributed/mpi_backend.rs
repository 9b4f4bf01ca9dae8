//! The MPI transport (cargo feature `mpi`): the system's MPI through the `mpi` crate, every
//! collective started non-blocking (`MPI_Iallreduce`, `MPI_Ibcast`, …) on a duplicate of
//! `MPI_COMM_WORLD` whose errors are returned, not fatal. A collective of more elements than an
//! MPI count holds (`INT_MAX`) runs as several calls on pieces of it ([`super::chunks`]).

use super::chunks::{self, Piece};
use super::options::ReduceOp;
use super::transport::{Call, Request, Transport, Wire};
use crate::error::{Error, ErrorKind, Result};
use mpi::ffi;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::AsRaw;
use std::ffi::{c_int, c_void};

/// A communicator of its own (so kiln's traffic never matches a user's MPI calls) and the
/// requests in flight.
pub(crate) struct MpiTransport {
    /// Owns MPI's lifetime when kiln initialized it (`None` when the program had already).
    universe: Option<mpi::environment::Universe>,
    comm: SimpleCommunicator,
    rank: usize,
    world_size: usize,
    /// The most elements one MPI call moves (`INT_MAX`, or `KILN_DIST_MAX_CHUNK`).
    max_chunk: usize,
    /// In-flight collectives by slot; `None` slots are free.
    requests: Vec<Option<InFlight>>,
}

/// A collective in flight: its MPI requests (one, or one per piece of a split collective).
struct InFlight {
    requests: Vec<ffi::MPI_Request>,
    /// A piece that failed to start after others had started: reported by `test`, which
    /// never reports completion then (the started pieces may still use the buffers).
    failed: Option<Error>,
}

// SAFETY: MPI handles are plain values the library owns; MPI is initialized with
// MPI_THREAD_SERIALIZED (or better) and every call on this transport runs under the process
// group's mutex, so calls from different threads never overlap, which is what that level allows.
unsafe impl Send for MpiTransport {}

impl MpiTransport {
    /// Initializes MPI (or joins a program that did) and duplicates the world communicator.
    #[track_caller]
    pub(crate) fn init() -> Result<MpiTransport> {
        let max_chunk = match chunks::max_chunk(std::env::var(chunks::MAX_CHUNK_VAR).ok()) {
            Ok(n) => n,
            Err(e) => return Err(Error::new("init_process_group", ErrorKind::Value, e)),
        };
        let universe = if mpi::environment::is_initialized() {
            None
        } else {
            if mpi::environment::is_finalized() {
                return Err(Error::new("init_process_group", ErrorKind::Distributed, "MPI was finalized earlier in this process (by destroy_process_group) and cannot be initialized twice"));
            }
            let Some((universe, level)) = mpi::initialize_with_threading(mpi::Threading::Serialized) else {
                return Err(Error::new("init_process_group", ErrorKind::Distributed, "MPI_Init_thread failed"));
            };
            if level < mpi::Threading::Serialized {
                return Err(Error::new(
                    "init_process_group",
                    ErrorKind::Distributed,
                    format!("the MPI library provides thread level {level:?}; kiln needs Serialized or better"),
                ));
            }
            Some(universe)
        };
        let comm = SimpleCommunicator::world().duplicate();
        // SAFETY: `comm` is a valid communicator and MPI_ERRORS_RETURN a predefined handler.
        let rc = unsafe { ffi::MPI_Comm_set_errhandler(comm.as_raw(), ffi::RSMPI_ERRORS_RETURN) };
        check("init_process_group", rc)?;
        let (rank, world_size) = (comm.rank() as usize, comm.size() as usize);
        Ok(MpiTransport { universe, comm, rank, world_size, max_chunk, requests: Vec::new() })
    }

    /// The library's version line (`MPI_Get_library_version`).
    pub(crate) fn library_version() -> String {
        mpi::environment::library_version().unwrap_or_else(|_| "unknown MPI".into())
    }

    /// Starts `call` as one MPI call (`count` is within the limit).
    ///
    /// # Safety
    /// As [`Transport::start`].
    unsafe fn start_one(
        &self,
        call: Call,
        wire: Wire,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
    ) -> Result<ffi::MPI_Request> {
        let (n, dt, comm) = (count as c_int, datatype(wire), self.comm.as_raw());
        // SAFETY: reading MPI's null-request constant; MPI overwrites it before returning success.
        let mut req: ffi::MPI_Request = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: the caller guarantees the buffers' sizes and lifetimes (see the trait).
        let rc = unsafe {
            match call {
                Call::AllReduce(op) => ffi::MPI_Iallreduce(send, recv, n, dt, reduction(op, wire), comm, &mut req),
                Call::Broadcast { root } => {
                    // The root sends from `send`; the others receive into `recv`.
                    let buf = if root == self.rank { send as *mut c_void } else { recv };
                    ffi::MPI_Ibcast(buf, n, dt, root as c_int, comm, &mut req)
                }
                Call::AllGather => ffi::MPI_Iallgather(send, n, dt, recv, n, dt, comm, &mut req),
                Call::ReduceScatter(op) => {
                    ffi::MPI_Ireduce_scatter_block(send, recv, n, dt, reduction(op, wire), comm, &mut req)
                }
                Call::Barrier => ffi::MPI_Ibarrier(comm, &mut req),
            }
        };
        check("distributed", rc)?;
        Ok(req)
    }

    /// Starts a collective over the limit as its pieces (`MPI_Iallreduce`, `MPI_Ibcast`,
    /// `MPI_Ireduce` on element ranges, see [`chunks::split`]). Stops at the first piece MPI
    /// refuses and says so in `failed`, keeping the requests already started.
    ///
    /// # Safety
    /// As [`Transport::start`].
    unsafe fn start_pieces(
        &self,
        call: Call,
        wire: Wire,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
    ) -> InFlight {
        let (size, dt, comm) = (wire.bytes(), datatype(wire), self.comm.as_raw());
        // Only the reductions' pieces (AllReduce, Reduce) use it.
        let op = match call {
            Call::AllReduce(op) | Call::ReduceScatter(op) => Some(reduction(op, wire)),
            _ => None,
        };
        let op = move || op.expect("a reduction's pieces come from a reduction");
        let at = |buf: *const c_void, elements: usize| buf.cast::<u8>().wrapping_add(elements * size) as *mut c_void;
        if call == Call::AllGather {
            // SAFETY: `send` holds `count` elements and `recv` `count * world_size`; this rank's
            // block of `recv` is fresh memory, disjoint from `send`.
            unsafe {
                std::ptr::copy_nonoverlapping(send.cast::<u8>(), at(recv, self.rank * count).cast::<u8>(), count * size)
            };
        }
        let mut flight = InFlight { requests: Vec::new(), failed: None };
        let pieces = chunks::split(call, count, self.world_size, self.max_chunk);
        if pieces.len() > chunks::MPI_MAX_COUNT {
            let why = format!(
                "{count} elements in pieces of {} make {} MPI requests, more than MPI_Testall takes",
                self.max_chunk,
                pieces.len()
            );
            flight.failed = Some(Error::new("distributed", ErrorKind::Value, why));
            return flight;
        }
        for piece in pieces {
            // SAFETY: reading MPI's null-request constant; MPI overwrites it before returning success.
            let mut req: ffi::MPI_Request = unsafe { ffi::RSMPI_REQUEST_NULL };
            // SAFETY: every piece lies within the buffers the caller guarantees (chunks::split
            // stays within `count` elements per rank block), and pieces never overlap.
            let rc = unsafe {
                match piece {
                    Piece::AllReduce { at: a, len } => {
                        ffi::MPI_Iallreduce(at(send, a), at(recv, a), len as c_int, dt, op(), comm, &mut req)
                    }
                    Piece::Broadcast { root, at: a, len } => {
                        // All-gather pieces live in `recv`; a broadcast's root sends from `send`.
                        let buf = if call != Call::AllGather && root == self.rank { at(send, a) } else { at(recv, a) };
                        ffi::MPI_Ibcast(buf, len as c_int, dt, root as c_int, comm, &mut req)
                    }
                    Piece::Reduce { root, send_at, recv_at, len } => {
                        let into = if root == self.rank { at(recv, recv_at) } else { std::ptr::null_mut() };
                        ffi::MPI_Ireduce(at(send, send_at), into, len as c_int, dt, op(), root as c_int, comm, &mut req)
                    }
                }
            };
            if let Err(e) = check("distributed", rc) {
                flight.failed = Some(e);
                return flight;
            }
            flight.requests.push(req);
        }
        flight
    }
}

/// The MPI datatype of `wire`.
fn datatype(wire: Wire) -> ffi::MPI_Datatype {
    // SAFETY: reading the predefined datatype handles mpi-sys exports as statics.
    unsafe {
        match wire {
            Wire::F32 => ffi::RSMPI_FLOAT,
            Wire::F64 => ffi::RSMPI_DOUBLE,
            Wire::I64 => ffi::RSMPI_INT64_T,
            Wire::I32 => ffi::RSMPI_INT32_T,
            Wire::U8 => ffi::RSMPI_UINT8_T,
            Wire::Bool => ffi::RSMPI_C_BOOL,
            // `Wire::native` never gives a half type for the CPU tensors MPI moves.
            Wire::F16 | Wire::BF16 => unreachable!("MPI moves half-precision tensors as F32"),
        }
    }
}

/// The MPI reduction of `op` on `wire` elements (Bool: or for Sum/Max, and for Product/Min).
fn reduction(op: ReduceOp, wire: Wire) -> ffi::MPI_Op {
    // SAFETY: reading the predefined operation handles mpi-sys exports as statics.
    unsafe {
        match (op, wire == Wire::Bool) {
            (ReduceOp::Sum | ReduceOp::Max, true) => ffi::RSMPI_LOR,
            (ReduceOp::Product | ReduceOp::Min, true) => ffi::RSMPI_LAND,
            (ReduceOp::Sum | ReduceOp::Avg, false) => ffi::RSMPI_SUM,
            (ReduceOp::Max, false) => ffi::RSMPI_MAX,
            (ReduceOp::Min, false) => ffi::RSMPI_MIN,
            (ReduceOp::Product, false) => ffi::RSMPI_PROD,
            (ReduceOp::Avg, true) => unreachable!("Avg on Bool is refused before the transport"),
        }
    }
}

/// An error carrying MPI's text for a failed return code.
#[track_caller]
fn check(op: &'static str, rc: c_int) -> Result<()> {
    if rc == 0 {
        return Ok(());
    }
    let mut text = vec![0u8; 512];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_ERROR_STRING (256 in Open MPI and MPICH) bytes and more.
    unsafe { ffi::MPI_Error_string(rc, text.as_mut_ptr().cast(), &mut len) };
    text.truncate(len.max(0) as usize);
    Err(Error::new(op, ErrorKind::Distributed, format!("MPI error {rc}: {}", String::from_utf8_lossy(&text))))
}

impl Transport for MpiTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.world_size
    }

    fn device(&self) -> kiln_runtime::Device {
        kiln_runtime::Device::Cpu
    }

    unsafe fn start(
        &mut self,
        call: Call,
        wire: Wire,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
    ) -> Result<Request> {
        let flight = if count <= self.max_chunk {
            // SAFETY: the caller guarantees the buffers (see the trait).
            let request = unsafe { self.start_one(call, wire, send, recv, count) }?;
            InFlight { requests: vec![request], failed: None }
        } else {
            // SAFETY: as above.
            let flight = unsafe { self.start_pieces(call, wire, send, recv, count) };
            match flight {
                InFlight { requests, failed: Some(e) } if requests.is_empty() => return Err(e),
                flight => flight,
            }
        };
        Ok(Request::store(&mut self.requests, flight))
    }

    fn test(&mut self, request: &Request) -> Result<bool> {
        let Some(flight) = self.requests.get_mut(request.0).and_then(Option::as_mut) else {
            return Ok(true);
        };
        if let Some(e) = &flight.failed {
            return Err(e.clone());
        }
        let mut flag: c_int = 0;
        // SAFETY: the requests are live ones this transport started (or MPI_REQUEST_NULL once
        // complete), at most INT_MAX of them (`start_pieces` checks); MPI_STATUSES_IGNORE is
        // allowed.
        let rc = unsafe {
            ffi::MPI_Testall(
                flight.requests.len() as c_int,
                flight.requests.as_mut_ptr(),
                &mut flag,
                ffi::RSMPI_STATUSES_IGNORE,
            )
        };
        check("distributed", rc)?;
        if flag != 0 {
            self.requests[request.0] = None;
        }
        Ok(flag != 0)
    }

    fn abort(&mut self, code: i32) -> ! {
        self.comm.abort(code)
    }

    fn finalize(self: Box<Self>) {
        let MpiTransport { universe, comm, .. } = *self;
        drop(comm);
        // Dropping the universe calls MPI_Finalize (when kiln initialized MPI).
        drop(universe);
    }
}
