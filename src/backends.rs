//! Process-wide backend switches (PyTorch's `torch.backends`).
//!
//! - [`cuda::matmul::set_allow_tf32`]: let f32 matrix products on CUDA use TF32 tensor cores
//!   (`torch.backends.cuda.matmul.allow_tf32 = True`); off by default, as in PyTorch.

/// CUDA switches (`torch.backends.cuda`).
pub mod cuda {
    /// Matrix-product switches (`torch.backends.cuda.matmul`).
    pub mod matmul {
        /// Lets f32 `matmul`/`mm`/`bmm`/`linear` on CUDA use TF32 tensor cores: faster, with
        /// products rounded to a 10-bit mantissa (about 1e-3 relative error). Off by default;
        /// process-wide, read at each product. PyTorch's
        /// `torch.backends.cuda.matmul.allow_tf32 = allow`.
        pub fn set_allow_tf32(allow: bool) {
            kiln_runtime::cuda::set_allow_tf32(allow)
        }

        /// Whether f32 products on CUDA may use TF32 tensor cores (see [`set_allow_tf32`]).
        pub fn allow_tf32() -> bool {
            kiln_runtime::cuda::allow_tf32()
        }
    }
}
