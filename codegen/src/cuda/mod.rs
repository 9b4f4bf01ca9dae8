//! The CUDA C emitter: elementwise expressions become NVRTC-compiled kernels.
//!
//! - [`ops`]: the CUDA C formula of every op kind (PyTorch's semantics).
//! - [`emit`]: [`emit_elementwise`], one kernel per expression and dtype.
//! - [`strided`]: [`emit_strided`], a kernel over strided operands of any dtypes (shapes and
//!   strides as arguments): the eager CUDA ops.
//! - [`eager`]: the kernel of each eager CUDA op ([`eager_kernel`]) and the list of them all.
//! - [`index`]: [`emit_index`], gather/index_select, scatter and scatter_add along one dim
//!   over strided operands (the index adds `k · stride` to the target's offset).
//! - [`index_launch`]: checked launches of those ([`LoadedIndex`]; the deterministic
//!   scatter_add walks one line of the scatter dim per thread, [`ScatterLine`]).
//! - [`bounds`]: [`emit_bounds`], the device-side bounds check of an int64 index (a flag word
//!   raised by any value outside a range) that the indexing ops run before their kernels.
//! - [`bounds_launch`]: the checked launch and flag read-back ([`LoadedBounds`]).
//! - [`pool`]: [`emit_pool`], max pooling (with argmax indices), average and adaptive average
//!   pooling over contiguous planes, and their gradients as gathers (deterministic, no
//!   atomics).
//! - [`pool_launch`]: checked launches of those ([`LoadedPool`]).
//! - [`im2col`]: [`emit_col`], a convolution's `im2col` columns and `col2im`, its adjoint, as
//!   a gather (deterministic, no atomics).
//! - [`im2col_launch`]: checked launches of those ([`LoadedCol`]).
//! - [`grid`]: the skeleton pooling and column kernels share (one thread per element written,
//!   the geometry as arguments).
//! - [`reduce`]: [`emit_reduce`], reductions (sum, mean, prod, max/min, arg-reductions, all/any,
//!   var/std, logsumexp) and softmax over strided input, shapes and strides as arguments.
//! - [`reduce_launch`]: kept/reduced dims, launch geometry and checked launches of those.
//! - [`scan`]: [`emit_scan`], the cumulative scans `cumprod`, `cummax`/`cummin` (values and
//!   indices) and `logcumsumexp` along one dim of a contiguous input, one thread per line in
//!   the CPU's order.
//! - [`scan_launch`]: checked launches of those ([`LoadedScan`]).
//! - [`sort`]: [`emit_sort`], a stable bitonic sort of contiguous rows ((key, position)
//!   pairs in shared memory, global steps for rows longer than a tile): sort, argsort, topk.
//! - [`sort_launch`]: the launch plan ([`SortPlan`]) and checked launches ([`LoadedSort`]).
//! - [`compact`]: [`emit_compact`], count / scan / write kernels turning a bool buffer into the
//!   coordinates of its set flags (nonzero, masked_select).
//! - [`compact_launch`]: checked launches of those ([`LoadedCompact`]).
//! - [`fused`]: [`emit_fused`], a fused elementwise group of `kiln::compile` (an IR
//!   `ElementwiseKernel`) as one kernel: views as strided loads, sizes, strides and scalars
//!   as arguments.
//! - [`fused_launch`]: checked launches of those ([`LoadedFused`]), through the vector variant
//!   when the operands allow it.
//! - [`fused_vector`]: each fused kernel's vector variant ([`FusedVectorKernel`]: 16-byte
//!   accesses, a scalar tail) and its launch decision ([`fused_vector_launch`], the eager
//!   [`vector_launch_outputs`] over inputs read as flat runs).
//! - [`fused_reduce`]: [`emit_fused_reduce`], a fused reduction group of `kiln::compile` (an
//!   IR `ReduceKernel`: prologues, reduction stages over the trailing dims, the epilogue) as
//!   one kernel, a warp or a block per row: softmax, layer norm, cross-entropy in one launch.
//! - [`fused_reduce_launch`]: checked launches of those ([`LoadedFusedReduce`]).
//! - [`philox`]: [`emit_rand`], the CPU generator's Philox numbers as device functions (a C
//!   subset that is host C too, so a test compares them with the CPU's) and the eager
//!   `rand`/`randn`/`randint`/`bernoulli_` kernels; fused kernels call the same functions for
//!   `InstOp::Rand`.
//! - [`rand_launch`]: checked launches of those ([`LoadedRand`]).
//! - [`vector`]: [`emit_vector`], the eager kernels' contiguous fast path (16-byte accesses
//!   when every operand is contiguous or broadcast and aligned) and its launch decision
//!   ([`vector_launch`](mod@vector_launch)).
//! - [`vector_launch`](mod@vector_launch): checked launches of those ([`LoadedVector`]).
//! - [`launch`]: compiling (through the runtime's cached NVRTC), loading and running it on
//!   [`kiln_runtime::cuda::CudaBuffer`]s.
//!
//! `KILN_DEBUG=kernels` prints each kernel's source the first time the process compiles it.

pub mod bounds;
pub mod bounds_launch;
pub mod compact;
pub mod compact_launch;
pub mod eager;
pub mod emit;
pub mod fused;
pub mod fused_launch;
pub mod fused_reduce;
pub mod fused_reduce_launch;
pub mod fused_vector;
mod grid;
pub mod im2col;
pub mod im2col_launch;
pub mod index;
pub mod index_launch;
pub mod launch;
pub mod ops;
pub mod philox;
pub mod pool;
pub mod pool_launch;
pub mod rand_launch;
pub mod reduce;
pub mod reduce_launch;
pub mod scan;
pub mod scan_launch;
pub mod sort;
pub mod sort_launch;
pub mod strided;
pub mod vector;
pub mod vector_launch;

pub use bounds::{emit_bounds, BoundsKernel};
pub use bounds_launch::LoadedBounds;
pub use compact::{
    compact_chunks, emit_compact, CompactKernel, CompactStage, COMPACT_BLOCK, COMPACT_CHUNK, COMPACT_ITEMS,
};
pub use compact_launch::LoadedCompact;
pub use eager::{eager_kernel, eager_ops, eager_vector_kernel, every_eager_kernel, EagerOp};
pub use emit::{emit_elementwise, ExprKernel, CUDA_CODEGEN_VERSION, ELEMENTWISE_BLOCK};
pub use fused::{emit_fused, FusedKernel};
pub use fused_launch::{FusedOperand, LoadedFused};
pub use fused_reduce::{emit_fused_reduce, FusedReduceKernel};
pub use fused_reduce_launch::LoadedFusedReduce;
pub use fused_vector::{fused_vector_launch, FusedVectorKernel};
pub use im2col::{col_ops, emit_col, ColKernel, ColKind, COL_GEOMETRY_WORDS};
pub use im2col_launch::LoadedCol;
pub use index::{emit_index, index_ops, IndexKernel, IndexKind};
pub use index_launch::{IndexedDim, LoadedIndex, ScatterLine};
pub use launch::{run_elementwise, LoadedElementwise, LoadedStrided, StridedOperand};
pub use philox::{emit_rand, philox_functions, rand_kernels, RandKernel, RandKind, HOST_PRELUDE, RAND_WORDS};
pub use pool::{emit_pool, pool_ops, PoolKernel, PoolKind, POOL_GEOMETRY_WORDS};
pub use pool_launch::LoadedPool;
pub use rand_launch::LoadedRand;
pub use reduce::{emit_reduce, reduce_ops, reduce_program, CudaReduce, CudaReduceKernel, REDUCE_BLOCK};
pub use reduce_launch::{reduce_geometry, LoadedReduce, ReduceDims, ReduceGeometry, WARP_ROW_MAX};
pub use scan::{emit_scan, scan_ops, ScanKernel, ScanKind, SCAN_WORDS};
pub use scan_launch::{LoadedScan, ScanLines};
pub use sort::{emit_sort, sort_kernels, SortKernel, SortStage, SORT_TILE, SORT_TILE_BLOCK};
pub use sort_launch::{LoadedSort, SortLaunch, SortPlan, SortScratch, SORT_MAX_LEN};
pub use strided::{emit_strided, StridedKernel, MAX_DIMS};
pub use vector::{
    emit_vector, vector_launch, vector_launch_outputs, vector_width, VectorKernel, VectorOperand, VECTOR_BYTES,
};
pub use vector_launch::LoadedVector;
