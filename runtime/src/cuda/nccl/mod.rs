//! NCCL, opened at run time by kiln (cudarc's `nccl::sys` gives the types).
//!
//! - [`library`]: finding libnccl (never a panic when it is missing) and its version.
//! - [`api`]: the functions kiln calls, read from the opened file.
//! - [`types`]: the unique id as bytes, reductions, element types.
//! - [`comm`]: a communicator on one device, collectives queued on the device's stream, events
//!   to poll them.
//! - `nonblocking`: the non-blocking communicator config and the bounded wait on NCCL.

pub mod api;
pub mod comm;
pub mod library;
mod nonblocking;
pub mod types;

pub use comm::{Collective, NcclComm, NcclEvent};
pub use library::{nccl_available, nccl_library_path, nccl_version, version_text, NCCL_LIBRARY_VAR};
pub use types::{NcclReduce, UniqueId, UNIQUE_ID_BYTES};
