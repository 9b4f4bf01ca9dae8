//! The ops, one file per family.
//!
//! Every op is defined once, in one function per op family that does, in order:
//! 1. **checks and inference**: dims normalized, shapes broadcast, the result dtype chosen by
//!    PyTorch's promotion rules; a failure is an [`crate::Error`] naming the op, the shapes or
//!    dtypes involved and the caller's line (`#[track_caller]` all the way down);
//! 2. **the eager call**: the runtime kernel for the tensor's device (only CPU is built yet);
//! 3. **the backward rule** (added by the autograd work, next to the forward, written with
//!    tensor ops so it also runs under `create_graph` and capture);
//! 4. **the codegen expression**: elementwise and reduction families are parameterised by the
//!    `kiln_runtime::op_kind` enums, which the code generator emits from.
//!
//! The public methods on [`crate::Tensor`] are thin: a `try_x` returning `Result`, and `x`
//! panicking with the error's message.

mod attention;
mod binary;
mod bitwise;
mod cat;
mod clamp;
mod combine;
mod compare;
mod composite;
pub(crate) mod conv;
mod diagonal;
mod dispatch;
mod einsum;
mod index;
mod keepdim;
mod masked_scatter;
mod matmul;
mod norm;
mod order_stats;
mod overloads;
pub(crate) mod pick;
pub(crate) mod pool;
mod quantile;
pub(crate) mod reduce;
mod reorder;
mod scan;
mod search;
mod softmax;
mod sort;
mod split;
mod unary;
mod unfold;

pub(crate) use attention::{fused_attention, ScoreMask};
pub(crate) use binary::binary;
pub use binary::Operand;
#[doc(hidden)]
pub use binary::BINARY_METHODS;
pub(crate) use binary::{can_cast, check_scalar_fits};
pub(crate) use compare::{compare, logical};
#[doc(hidden)]
pub use compare::{COMPARE_METHODS, LOGICAL_METHODS};
pub(crate) use composite::composite_unary_table;
#[doc(hidden)]
pub use composite::{composite_fast, COMPOSITE_UNARY};
pub(crate) use dispatch::{
    data_dependent, elementwise, kernel_op, kernel_op2, kernel_ops, write_op, written_copy, Backend,
};
pub(crate) use index::out_of_bounds;
pub use quantile::QuantileInterpolation;
pub use search::Unique;
pub use split::Indexing;
pub(crate) use unary::unary;
#[doc(hidden)]
pub use unary::UNARY_METHODS;
