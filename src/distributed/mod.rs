//! Data-parallel training across processes (`torch.distributed`): a process group on an existing
//! communication library, and collectives on tensors.
//!
//! ```no_run
//! use kiln::distributed::{self as dist, Backend, InitOptions, ReduceOp};
//! # fn main() -> kiln::Result<()> {
//! // launched as `mpirun -np 2 target/release/examples/NAME`
//! dist::init_process_group(Backend::Mpi, InitOptions::default())?;
//! let t = kiln::Tensor::full(&[4], dist::rank()? as f64);
//! dist::all_reduce(&t, ReduceOp::Sum)?;          // every rank: [1, 1, 1, 1] with 2 ranks
//! dist::destroy_process_group()?;
//! # Ok(()) }
//! ```
//!
//! **Backends.** [`Backend::Mpi`] (cargo feature `mpi`) runs on the system's MPI library (Open
//! MPI or MPICH, through the `mpi` crate) between CPU processes started by `mpirun`; rank and
//! world size come from MPI, and `RANK`/`WORLD_SIZE` (or the options), when set, must agree.
//! [`Backend::Nccl`] runs NCCL (libnccl, loaded at run time through cudarc) between GPUs, one
//! process per GPU: rank and world size from the launcher (`RANK`/`WORLD_SIZE`, or `mpirun`'s),
//! the GPU from `LOCAL_RANK`, and NCCL's unique id handed out by rank 0 through the
//! [`EnvRendezvous`] (`env://`: `MASTER_ADDR`, `MASTER_PORT`) over a [`TcpStore`] it serves.
//! Without libnccl or a GPU, initializing it is an error naming what is missing. It has not
//! yet run on a GPU (see `docs/distributed.md`).
//! [`nn::parallel::DistributedDataParallel`](crate::nn::parallel::DistributedDataParallel)
//! builds on these collectives; `docs/distributed.md` shows the launch.
//!
//! **Tensors.** Collectives take tensors of every dtype on the backend's device: the CPU for
//! MPI, the rank's GPU for NCCL (queued on the device's stream; the description below is MPI's,
//! NCCL's buffers being device memory). Contiguous tensors of a dtype MPI
//! reduces natively (F32, F64, I64, I32, U8, Bool) are sent straight from their storage, and the
//! result is received into a fresh buffer that becomes the tensor's storage when the tensor is
//! all of it (no copy), else is copied in. Other tensors (views with gaps, F16/BF16 which
//! travel as F32) go through a contiguous copy. MPI has no in-place flag in the `mpi` crate's
//! bindings, hence the separate receive buffer. Writes are not recorded by autograd.
//!
//! **Agreement check.** Before each collective the ranks compare what they are about to do
//! (one small max-reduction of `[collective, dtype, element count]` and its negation), so a rank
//! that calls a different collective, or passes a tensor of another size or dtype, makes every
//! rank fail with an error that says so instead of corrupting data or hanging.
//!
//! **Timeouts: never a hang without end.** Every collective is started non-blocking
//! (`MPI_Iallreduce`, `MPI_Ibcast`, `MPI_Iallgather`, `MPI_Ireduce_scatter_block`,
//! `MPI_Ibarrier`) and waited for by polling `MPI_Test` (which also drives MPI's progress) until
//! the group's timeout ([`InitOptions::timeout`], 30 minutes by default as in PyTorch) has passed
//! since it started. Then the collective returns [`ErrorKind::Timeout`](crate::ErrorKind::Timeout)
//! ("all_reduce timed out after 5s on rank 0 of 2: the other ranks did not take part …") and
//! the group is marked *aborted*: MPI cannot cancel a collective, so
//! - the buffers MPI may still touch are leaked, never freed (a tensor it was sending from gets
//!   a copy of its values as new storage, so the tensor stays usable);
//! - every later collective fails at once with "the process group was aborted earlier: …";
//! - [`destroy_process_group`] aborts the job (`MPI_Abort`, exit code 1 on every rank, as
//!   PyTorch's NCCL watchdog tears the process down) instead of finalizing, which would wait for
//!   the missing peer. A program that returns the error from `main` without destroying the group
//!   exits without finalizing, and `mpirun` then stops the other ranks.
//!
//! A peer that dies is seen in one of two ways: MPI reports the broken connection (the
//! communicator's errors are returned, not fatal, so this becomes an
//! [`ErrorKind::Distributed`](crate::ErrorKind::Distributed) error naming the collective), or
//! nothing is heard from it and the timeout fires. Separately, `mpirun` itself stops the whole job
//! when one rank is killed or exits without finalizing; whichever comes first ends the run, and
//! none of them waits longer than the timeout.
//!
//! **Threads.** MPI is initialized with `MPI_THREAD_SERIALIZED`; every call into it goes through
//! the process group's mutex, so collectives may be called from any thread (one at a time).

#[cfg(feature = "mpi")]
mod chunks;
mod collectives;
mod env;
mod exchange;
mod group;
#[cfg(feature = "mpi")]
mod mpi_backend;
mod nccl;
mod options;
mod rendezvous;
mod store;
mod transport;
mod work;

pub(crate) use collectives::on_group_device;
pub use collectives::{all_gather, all_reduce, barrier, broadcast, reduce_scatter};
pub(crate) use exchange::{finish_average, fresh};
pub use group::{destroy_process_group, get_backend, init_process_group, is_initialized, rank, world_size};
pub use options::{Backend, InitOptions, ReduceOp, DEFAULT_TIMEOUT};
pub use rendezvous::EnvRendezvous;
pub use store::TcpStore;
pub(crate) use transport::{Call, Wire};
pub(crate) use work::{SendBuf, Work};

/// The MPI library's version line (`MPI_Get_library_version`); `None` in a build without the
/// `mpi` feature.
pub fn mpi_library_version() -> Option<String> {
    #[cfg(feature = "mpi")]
    return Some(mpi_backend::MpiTransport::library_version());
    #[cfg(not(feature = "mpi"))]
    None
}
