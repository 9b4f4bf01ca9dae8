//! The f32 SIMD math of the CPU kernels, in one place: branch-free transcendentals and the
//! routines that run them over slices and rows with the widest vector unit this CPU has.
//!
//! The split, by who calls what and how exact it must be:
//! - [`vecmath`]: `exp`, `tanh`, `sigmoid` (and `silu`, `gelu_tanh` on them) without fused
//!   multiply-adds, bit for bit the scalar formulas of the eager ops (`UnaryOp::eval`), so
//!   eager results do not depend on the CPU; [`vecmath::map_f32`] compiles a loop over them for
//!   AVX-512, AVX2+FMA or the SSE2 baseline, picked at run time.
//! - [`slice_math`]: the same functions with fused multiply-adds, and the C-ABI slice routines
//!   (`dst[i] = f(src[i])` over raw pointers) that the JIT's tiled kernels call; within the
//!   stated ulp bounds of the eager forms, not bit-identical.
//! - `slice_avx512` (x86-64): explicit 16-lane AVX-512F forms of `slice_math`'s exp and
//!   sigmoid routines, bit for bit the FMA forms.
//! - `row_avx512` (x86-64): explicit AVX-512F forms of `super::row_reduce`'s row routines
//!   (sums, max, exp-sum, normalization), which the fused reductions call.

#[cfg(target_arch = "x86_64")]
pub(crate) mod row_avx512;
#[cfg(target_arch = "x86_64")]
mod slice_avx512;
pub mod slice_math;
#[cfg(test)]
mod ulp;
pub mod vecmath;
