//! The passes from a captured graph to a plan: dead nodes and common subexpressions
//! ([`cse`]), fusion ([`fusion`]), lowering groups to kernels ([`lower`]), and ordering with
//! memory planning ([`schedule`](mod@schedule), with the products that run two at once: [`concurrent`]).

pub mod concurrent;
pub mod cse;
mod epilogue;
pub mod fusion;
mod groups;
pub mod lower;
pub mod schedule;
mod stages;

pub use cse::{eliminate_common_subexpressions, live_nodes};
pub use fusion::fuse;
pub use groups::{Fusion, ReduceParts, StageParts};
pub use lower::{lower_group, GroupKernel, LoweredGroup, ScalarArg};
pub use schedule::{schedule, Schedule, StepKind};
