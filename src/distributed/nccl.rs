//! The NCCL backend's place: the API accepts [`Backend::Nccl`](super::Backend::Nccl) and says
//! plainly that it is not available yet (NCCL through cudarc's dynamically loaded bindings is
//! the next slice of issue 7).

use crate::error::{Error, ErrorKind};

/// The error every NCCL entry point returns today.
#[track_caller]
pub(crate) fn unavailable() -> Error {
    Error::new("init_process_group", ErrorKind::Unsupported, "NCCL backend needs a CUDA build with a GPU; not available in this version of kiln (use Backend::Mpi for CPU processes)")
}
