//! Training one model on several processes (`torch.nn.parallel`):
//! [`DistributedDataParallel`] wraps a module and keeps its replicas equal by averaging
//! gradients over the default process group ([`crate::distributed`]); [`DataParallel`] runs
//! replicas on several devices of one process.

mod bucket;
mod data_parallel;
mod ddp;
mod graph;
mod reducer;

pub use data_parallel::{DataParallel, DataParallelOpts};
pub use ddp::{DdpOptions, DistributedDataParallel, NoSync};
