//! Native CPU kernels (the reference every generated kernel is tested against) and the memory
//! and threads they run on.

pub mod alloc;
pub mod buffer;
pub mod conv;
pub mod elementwise;
pub mod host_block;
pub mod index;
pub mod matmul;
pub mod parallel;
pub mod philox;
pub mod pool;
pub mod product_split;
pub mod reduce;
#[cfg(target_arch = "x86_64")]
mod row_avx512;
pub mod row_reduce;
#[cfg(target_arch = "x86_64")]
mod slice_avx512;
pub mod slice_math;
pub mod sort;
pub mod special;
pub mod strided;
pub mod vecmath;

pub use buffer::CpuBuf;
