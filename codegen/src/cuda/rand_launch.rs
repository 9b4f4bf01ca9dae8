//! Checked launches of the eager random kernels ([`super::philox`]).

use super::emit::ELEMENTWISE_BLOCK;
use super::launch::{launch_as, load_on};
use super::philox::{RandKernel, RandKind, RAND_WORDS};
use kiln_runtime::cuda::{CudaBuffer, CudaError, CudaErrorKind, CudaKernel, KernelArg, Param};
use kiln_runtime::DType;

/// A [`RandKernel`] compiled for, and loaded on, one device.
#[derive(Clone, Debug)]
pub struct LoadedRand {
    kernel: CudaKernel,
    kind: RandKind,
    dtype: DType,
    max_grid: u32,
}

impl LoadedRand {
    /// Compiles `k` for `cuda:ordinal`'s arch (through the runtime's NVRTC cache) and loads it
    /// there.
    pub fn load(k: &RandKernel, ordinal: usize) -> Result<LoadedRand, CudaError> {
        let mut params = vec![Param::Out];
        params.extend(std::iter::repeat_n(Param::U64, RAND_WORDS));
        let (kernel, max_grid) = load_on("cuda_rand", &k.source, &k.name, ordinal, params)?;
        Ok(LoadedRand { kernel, kind: k.kind, dtype: k.dtype, max_grid })
    }

    /// The loaded kernel (name, device, signature).
    pub fn kernel(&self) -> &CudaKernel {
        &self.kernel
    }

    /// Writes elements `0..n` of the draw `(seed, offset)` into `out` (contiguous), with the
    /// kind's four parameter words as [`RandKind`] lists them (a float parameter as its f64's
    /// bits: `kiln_runtime::cpu::philox::uniform_params`, `normal_params`,
    /// `bernoulli_threshold`; the unused words 0). Errors (op `cuda_rand`, nothing launched)
    /// when `out` holds fewer than `n` elements, or is on another device.
    pub fn run(
        &self,
        out: &mut CudaBuffer,
        n: usize,
        seed: u64,
        offset: u64,
        words: [u64; 4],
    ) -> Result<(), CudaError> {
        let need = n * self.dtype.size_in_bytes();
        if out.len_bytes() < need {
            let m = format!(
                "{}: the output holds {} bytes, {n} {} {} values need {need}",
                self.kernel.name(),
                out.len_bytes(),
                self.dtype,
                self.kind.name()
            );
            return Err(CudaError::new("cuda_rand", CudaErrorKind::InvalidArgument, m));
        }
        if n == 0 {
            return Ok(());
        }
        let grid = (n.div_ceil(4)).div_ceil(ELEMENTWISE_BLOCK as usize).min(self.max_grid as usize) as u32;
        let mut args =
            vec![KernelArg::Out(out), KernelArg::U64(n as u64), KernelArg::U64(seed), KernelArg::U64(offset)];
        args.extend(words.into_iter().map(KernelArg::U64));
        launch_as("cuda_rand", &self.kernel, grid, ELEMENTWISE_BLOCK, &mut args)
    }
}
