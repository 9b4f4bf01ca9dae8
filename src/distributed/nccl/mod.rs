//! The NCCL backend: one process per GPU, NCCL (libnccl, loaded at run time through cudarc)
//! between them. Rank 0 makes NCCL's unique id and hands it to the others over the `env://`
//! [`TcpStore`](crate::distributed::TcpStore) ([`setup`]); every rank then joins the
//! communicator on its GPU (`LOCAL_RANK`, else `rank % devices`). Collectives are queued on the
//! device's stream, in order with every other kiln op on it, and polled through an event
//! recorded after them, so the group's timeout holds as for MPI.

mod ops;
mod setup;

use super::options::InitOptions;
use super::transport::{Call, Request, Transport, Wire};
use crate::cuda::OrOp;
use crate::error::Result;
use kiln_runtime::cuda::nccl::{NcclComm, NcclEvent};
use kiln_runtime::cuda::CudaBuffer;
use kiln_runtime::Device;
use std::ffi::c_void;

/// This rank's communicator, the byte a barrier all-reduces, and the collectives in flight.
pub(crate) struct NcclTransport {
    /// `None` once aborted.
    comm: Option<NcclComm>,
    scratch: CudaBuffer,
    /// In-flight collectives by slot (an event after each); `None` slots are free.
    requests: Vec<Option<NcclEvent>>,
}

impl NcclTransport {
    /// Checks the machine (libnccl, a GPU), meets the other ranks, and joins the communicator.
    #[track_caller]
    pub(crate) fn init(opts: &InitOptions) -> Result<NcclTransport> {
        setup::check_available()?;
        let (rank, world_size, id) = setup::rendezvous(opts)?;
        let ordinal = setup::local_device(|k| std::env::var(k).ok(), rank, kiln_runtime::cuda::device_count())?;
        let comm = NcclComm::init(setup::OP, ordinal, world_size, rank, &id, opts.timeout).or_op(setup::OP)?;
        let scratch = CudaBuffer::zeros(ordinal, 1).or_op(setup::OP)?;
        Ok(NcclTransport { comm: Some(comm), scratch, requests: Vec::new() })
    }

    /// The live communicator (a transport is never used after `abort`, which ends the process).
    fn comm(&self) -> &NcclComm {
        self.comm.as_ref().expect("the NCCL communicator is used after abort")
    }
}

impl Transport for NcclTransport {
    fn rank(&self) -> usize {
        self.comm().rank()
    }

    fn world_size(&self) -> usize {
        self.comm().world_size()
    }

    fn device(&self) -> Device {
        Device::Cuda(self.comm().ordinal())
    }

    unsafe fn start(
        &mut self,
        call: Call,
        wire: Wire,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
    ) -> Result<Request> {
        const OP: &str = "distributed (NCCL)";
        let l = ops::launch(call, wire, self.rank(), send as u64, recv as u64, count, self.scratch.device_ptr());
        let comm = self.comm();
        // SAFETY: the caller guarantees `send`/`recv` for the sizes `Call` gives, as device
        // addresses on this rank's GPU (the collectives check the tensors' device); the scratch
        // byte is this transport's own. Buffers outlive the queued collective: kiln's allocator
        // reuses a block only for work queued later on the same stream.
        unsafe { comm.enqueue(OP, l.call, wire.dtype(), l.send, l.recv, l.count) }.or_op(OP)?;
        let event = comm.record(OP).or_op(OP)?;
        Ok(Request::store(&mut self.requests, event))
    }

    fn test(&mut self, request: &Request) -> Result<bool> {
        let Some(event) = self.requests.get(request.0).and_then(Option::as_ref) else { return Ok(true) };
        let done = self.comm().poll("distributed (NCCL)", event).or_op("distributed (NCCL)")?;
        if done {
            self.requests[request.0] = None;
        }
        Ok(done)
    }

    fn abort(&mut self, code: i32) -> ! {
        if let Some(comm) = self.comm.take() {
            comm.abort();
        }
        std::process::exit(code)
    }

    fn finalize(self: Box<Self>) {
        // Dropping the communicator destroys it (after the queued work).
        drop(self);
    }
}
