//! What a process group is set up with: the [`Backend`], the [`InitOptions`], and the
//! [`ReduceOp`] of a reducing collective.

use std::time::Duration;

/// The communication library a process group runs on (`backend=` of
/// `torch.distributed.init_process_group`): kiln brings no transport of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// MPI between CPU processes (the system's Open MPI or MPICH through the `mpi` crate;
    /// cargo feature `mpi`), launched by `mpirun`.
    Mpi,
    /// NCCL between GPUs, one process per GPU (libnccl loaded at run time; launched with
    /// `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`, `MASTER_PORT`). Without libnccl or a
    /// CUDA device, initializing it returns an error naming what is missing.
    Nccl,
}

impl Backend {
    /// The backend's name as PyTorch spells it (`"mpi"`, `"nccl"`).
    pub fn name(self) -> &'static str {
        match self {
            Backend::Mpi => "mpi",
            Backend::Nccl => "nccl",
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// PyTorch's default collective timeout (`datetime.timedelta(minutes=30)`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// Options of [`init_process_group`](super::init_process_group) (PyTorch's keyword arguments).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitOptions {
    /// How long one collective may wait for the other ranks before it fails with
    /// [`ErrorKind::Timeout`](crate::ErrorKind::Timeout) (`timeout=`, default 30 minutes).
    pub timeout: Duration,
    /// This process's rank, when the launcher's environment does not say (`rank=`); checked
    /// against the backend's own when both are known.
    pub rank: Option<usize>,
    /// The number of processes, when the environment does not say (`world_size=`); checked
    /// against the backend's own when both are known.
    pub world_size: Option<usize>,
}

impl Default for InitOptions {
    fn default() -> Self {
        InitOptions { timeout: DEFAULT_TIMEOUT, rank: None, world_size: None }
    }
}

impl InitOptions {
    /// The default options with `timeout` instead of 30 minutes.
    pub fn with_timeout(timeout: Duration) -> Self {
        InitOptions { timeout, ..Default::default() }
    }
}

/// How a reducing collective combines the ranks' values (`torch.distributed.ReduceOp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Element-wise sum (logical or on Bool tensors, as PyTorch).
    Sum,
    /// Element-wise mean over the ranks: the sum divided by the world size (floating-point
    /// tensors only).
    Avg,
    /// Element-wise maximum (logical or on Bool tensors).
    Max,
    /// Element-wise minimum (logical and on Bool tensors).
    Min,
    /// Element-wise product (logical and on Bool tensors).
    Product,
}

impl ReduceOp {
    /// A small code for the cross-rank agreement check.
    pub(crate) fn code(self) -> i64 {
        self as i64 + 1
    }
}
