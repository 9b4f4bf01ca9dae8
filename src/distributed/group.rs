//! The default process group: one per process, behind a mutex that also serializes every call
//! into the communication library. `init_process_group`, `destroy_process_group` and the
//! queries on it.

use super::options::{Backend, InitOptions};
use super::transport::Transport;
use crate::error::{Error, ErrorKind, Result};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// The initialized process group.
pub(crate) struct Group {
    pub backend: Backend,
    pub timeout: Duration,
    pub transport: Box<dyn Transport>,
    /// Why the group was aborted (a collective timed out or failed): every later collective
    /// fails with this, and destroying the group aborts the job instead of finalizing.
    pub aborted: Option<String>,
}

static GROUP: Mutex<Option<Group>> = Mutex::new(None);

/// The group's lock (a panic while it was held does not poison it for others).
pub(crate) fn lock() -> MutexGuard<'static, Option<Group>> {
    GROUP.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` on the live group; errors when none is initialized or it was aborted.
#[track_caller]
pub(crate) fn with_group<R>(op: &'static str, f: impl FnOnce(&mut Group) -> Result<R>) -> Result<R> {
    let mut guard = lock();
    let Some(group) = guard.as_mut() else { return Err(not_initialized(op)) };
    if let Some(reason) = &group.aborted {
        return Err(Error::new(op, ErrorKind::Distributed, format!("the process group was aborted earlier: {reason}")));
    }
    f(group)
}

/// "Default process group has not been initialized", as PyTorch says it.
#[track_caller]
pub(crate) fn not_initialized(op: &'static str) -> Error {
    Error::new(
        op,
        ErrorKind::Distributed,
        "Default process group has not been initialized, please make sure to call init_process_group",
    )
}

/// Sets up the default process group (`torch.distributed.init_process_group`): starts the
/// backend, which learns this process's rank and the world size from the launcher (`mpirun`'s
/// environment for [`Backend::Mpi`]); `RANK`/`WORLD_SIZE` or `opts.rank`/`opts.world_size`,
/// when given, must agree with it.
///
/// [`Backend::Nccl`] meets the other ranks at `MASTER_ADDR:MASTER_PORT` (rank 0 hands out
/// NCCL's unique id) and joins the communicator on GPU `LOCAL_RANK` (see `docs/distributed.md`).
///
/// Errors: a group already initialized, a backend this build or machine lacks (the `mpi`
/// feature; libnccl or a CUDA device for NCCL), a launcher environment that disagrees with the
/// backend, a rendezvous that fails or times out.
#[track_caller]
pub fn init_process_group(backend: Backend, opts: InitOptions) -> Result<()> {
    const OP: &str = "init_process_group";
    let mut guard = lock();
    if guard.is_some() {
        return Err(Error::new(OP, ErrorKind::Distributed, "trying to initialize the default process group twice"));
    }
    if opts.timeout.is_zero() {
        return Err(Error::new(OP, ErrorKind::Value, "timeout must be positive"));
    }
    let env = super::env::from_process()?;
    let transport = start_backend(backend, &opts)?;
    let (rank, world_size) = (transport.rank(), transport.world_size());
    let expected = [
        env.as_ref().map(|e| (e.rank, e.world_size, e.source)),
        opts.rank.zip(opts.world_size).map(|(r, w)| (r, w, "the options")),
        opts.rank.map(|r| (r, world_size, "the options")),
        opts.world_size.map(|w| (rank, w, "the options")),
    ];
    for (r, w, source) in expected.into_iter().flatten() {
        if (r, w) != (rank, world_size) {
            return Err(Error::new(
                OP,
                ErrorKind::Distributed,
                format!("{source} say rank {r} of {w}, but the {backend} backend started rank {rank} of {world_size} (launch with `mpirun -np {w} …`)"),
            ));
        }
    }
    *guard = Some(Group { backend, timeout: opts.timeout, transport, aborted: None });
    Ok(())
}

/// The transport of `backend`, or why this build or machine cannot have it.
#[track_caller]
fn start_backend(backend: Backend, opts: &InitOptions) -> Result<Box<dyn Transport>> {
    match backend {
        #[cfg(feature = "mpi")]
        Backend::Mpi => Ok(Box::new(super::mpi_backend::MpiTransport::init()?)),
        #[cfg(not(feature = "mpi"))]
        Backend::Mpi => Err(Error::new("init_process_group", ErrorKind::Unsupported, "the MPI backend needs kiln built with the `mpi` cargo feature (and an MPI library: apt-get install openmpi-bin libopenmpi-dev)")),
        Backend::Nccl => Ok(Box::new(super::nccl::NcclTransport::init(opts)?)),
    }
}

/// Whether the default process group is initialized (`dist.is_initialized()`).
pub fn is_initialized() -> bool {
    lock().is_some()
}

/// This process's rank in the default group (`dist.get_rank()`).
#[track_caller]
pub fn rank() -> Result<usize> {
    match lock().as_ref() {
        Some(g) => Ok(g.transport.rank()),
        None => Err(not_initialized("get_rank")),
    }
}

/// The number of processes in the default group (`dist.get_world_size()`).
#[track_caller]
pub fn world_size() -> Result<usize> {
    match lock().as_ref() {
        Some(g) => Ok(g.transport.world_size()),
        None => Err(not_initialized("get_world_size")),
    }
}

/// The default group's backend (`dist.get_backend()`).
#[track_caller]
pub fn get_backend() -> Result<Backend> {
    match lock().as_ref() {
        Some(g) => Ok(g.backend),
        None => Err(not_initialized("get_backend")),
    }
}

/// Tears the default group down (`dist.destroy_process_group()`): finalizes the library. After
/// a collective timed out this *aborts the job* instead (`MPI_Abort`, which ends every rank
/// with exit code 1): finalizing would wait for the peer that never came. MPI cannot be
/// initialized again in the same process.
#[track_caller]
pub fn destroy_process_group() -> Result<()> {
    let Some(group) = lock().take() else { return Err(not_initialized("destroy_process_group")) };
    let Group { mut transport, aborted, .. } = group;
    if let Some(reason) = aborted {
        eprintln!("kiln::distributed: aborting the job: {reason}");
        transport.abort(1);
    }
    transport.finalize();
    Ok(())
}

/// Marks the live group aborted with `reason` (a timed-out or failed collective).
pub(crate) fn mark_aborted(reason: &str) {
    if let Some(g) = lock().as_mut() {
        g.aborted.get_or_insert_with(|| reason.to_string());
    }
}
