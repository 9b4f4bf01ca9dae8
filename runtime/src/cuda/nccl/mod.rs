//! NCCL, through cudarc's dynamically loaded bindings (`cudarc::nccl::result` / `sys`).
//!
//! - [`library`]: finding libnccl (never a panic when it is missing) and its version.
//! - [`types`]: the unique id as bytes, reductions, element types.
//! - [`comm`]: a communicator on one device, collectives queued on the device's stream, events
//!   to poll them.
//! - `nonblocking`: the non-blocking communicator config and the bounded wait on NCCL.

pub mod comm;
pub mod library;
mod nonblocking;
pub mod types;

pub use comm::{Collective, NcclComm, NcclEvent};
pub use library::{nccl_available, nccl_version, version_text};
pub use types::{NcclReduce, UniqueId, UNIQUE_ID_BYTES};
