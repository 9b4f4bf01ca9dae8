//! Native CPU kernels (the reference every generated kernel is tested against) and the memory
//! and threads they run on.

pub mod alloc;
pub mod attention;
pub mod buffer;
pub mod conv;
pub mod elementwise;
pub mod fast_unary;
pub mod host_block;
pub mod index;
pub mod matmul;
pub mod parallel;
pub mod philox;
pub mod pool;
pub mod product_split;
pub mod reduce;
pub mod row_kernels;
pub mod row_reduce;
pub mod simd;
pub mod sort;
pub mod special;
pub mod strided;

pub use buffer::CpuBuf;
