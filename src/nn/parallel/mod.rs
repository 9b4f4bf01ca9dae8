//! Training one model on several processes (`torch.nn.parallel`):
//! [`DistributedDataParallel`] wraps a module and keeps its replicas equal by averaging
//! gradients over the default process group ([`crate::distributed`]).

mod bucket;
mod ddp;
mod graph;
mod reducer;

pub use ddp::{DdpOptions, DistributedDataParallel, NoSync};
