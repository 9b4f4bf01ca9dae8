//! Checked launches of the bounds check ([`super::bounds`]) on device buffers.

use super::bounds::BoundsKernel;
use super::emit::ELEMENTWISE_BLOCK;
use super::launch::{index_space_words, launch_as, load_on, StridedOperand};
use kiln_runtime::cuda::{CudaBuffer, CudaError, CudaErrorKind, CudaKernel, KernelArg, Param};
use kiln_runtime::DType;

/// A [`BoundsKernel`] compiled for, and loaded on, one device.
#[derive(Clone, Debug)]
pub struct LoadedBounds {
    kernel: CudaKernel,
    ndim: usize,
    max_grid: u32,
}

impl LoadedBounds {
    /// Compiles `k` for `cuda:ordinal`'s arch (through the kernel cache) and loads it there.
    pub fn load(k: &BoundsKernel, ordinal: usize) -> Result<LoadedBounds, CudaError> {
        let mut params = vec![Param::In, Param::Out];
        params.extend(std::iter::repeat_n(Param::U64, 1 + k.ndim + (k.ndim + 1) + 2));
        let (kernel, max_grid) = load_on("cuda_bounds", &k.source, &k.name, ordinal, params)?;
        Ok(LoadedBounds { kernel, ndim: k.ndim, max_grid })
    }

    /// The loaded kernel (name, device, signature).
    pub fn kernel(&self) -> &CudaKernel {
        &self.kernel
    }

    /// True when every int64 value of the view `idx` over `shape` lies in `lo..hi`: one launch
    /// into a zeroed 4-byte flag on the index's device, then the flag read back (which waits
    /// for the device's queued work). Errors (op `cuda_bounds`, nothing launched) when the
    /// number of dims differs from the kernel's, or the view reaches past its buffer.
    pub fn all_within(
        &self,
        idx: (&CudaBuffer, StridedOperand<'_>),
        shape: &[usize],
        lo: i64,
        hi: i64,
    ) -> Result<bool, CudaError> {
        let bad = |m: String| {
            CudaError::new("cuda_bounds", CudaErrorKind::InvalidArgument, format!("{}: {m}", self.kernel.name()))
        };
        if shape.len() != self.ndim {
            return Err(bad(format!("checks {} dim(s), shape {shape:?} given", self.ndim)));
        }
        idx.1.check(0, DType::I64, idx.0, shape).map_err(bad)?;
        let n = kiln_runtime::layout::numel(shape);
        if n == 0 {
            return Ok(true);
        }
        let mut flag = CudaBuffer::zeros(idx.0.ordinal(), 4)?;
        let grid = n.div_ceil(ELEMENTWISE_BLOCK as usize).min(self.max_grid as usize) as u32;
        let words = index_space_words(shape, &[&idx.1]);
        let mut args = vec![KernelArg::In(idx.0), KernelArg::Out(&mut flag)];
        args.extend(words.into_iter().chain([lo as u64, hi as u64]).map(KernelArg::U64));
        launch_as("cuda_bounds", &self.kernel, grid, ELEMENTWISE_BLOCK, &mut args)?;
        Ok(flag.to_vec::<u32>()? == [0])
    }
}
