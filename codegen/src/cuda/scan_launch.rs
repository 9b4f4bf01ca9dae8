//! Checked launches of the scan kernels ([`super::scan`]) on device buffers.

use super::emit::ELEMENTWISE_BLOCK;
use super::launch::{launch_as, load_on};
use super::scan::{ScanKernel, ScanKind, SCAN_WORDS};
use kiln_runtime::cuda::{CudaBuffer, CudaError, CudaErrorKind, CudaKernel, KernelArg, Param};
use kiln_runtime::DType;

/// A contiguous tensor seen around its scanned dim: `(outer, len, inner)`.
pub type ScanLines = (usize, usize, usize);

/// A [`ScanKernel`] compiled for, and loaded on, one device.
#[derive(Clone, Debug)]
pub struct LoadedScan {
    kernel: CudaKernel,
    kind: ScanKind,
    dtype: DType,
    out: DType,
    max_grid: u32,
}

impl LoadedScan {
    /// Compiles `k` for `cuda:ordinal`'s arch (through the kernel cache) and loads it there.
    pub fn load(k: &ScanKernel, ordinal: usize) -> Result<LoadedScan, CudaError> {
        let mut params = vec![Param::In, Param::Out];
        if k.kind.has_indices() {
            params.push(Param::Out);
        }
        params.extend(std::iter::repeat_n(Param::U64, 1 + SCAN_WORDS.len()));
        let (kernel, max_grid) = load_on("cuda_scan", &k.source, &k.name, ordinal, params)?;
        Ok(LoadedScan { kernel, kind: k.kind, dtype: k.dtype, out: k.out, max_grid })
    }

    /// The loaded kernel (name, device, signature).
    pub fn kernel(&self) -> &CudaKernel {
        &self.kernel
    }

    /// Scans the contiguous `x` (from element 0, `outer · len · inner` elements) along its
    /// middle dim into `out` (and `idx` for `cummax`/`cummin`), laid out as `x`. Errors (op
    /// `cuda_scan`, nothing launched): an index buffer given to a kernel without one or
    /// missing, a buffer holding fewer elements than the lines need, or a buffer on another
    /// device.
    pub fn run(
        &self,
        x: &CudaBuffer,
        (outer, len, inner): ScanLines,
        out: &mut CudaBuffer,
        idx: Option<&mut CudaBuffer>,
    ) -> Result<(), CudaError> {
        let bad = |m: String| {
            Err(CudaError::new("cuda_scan", CudaErrorKind::InvalidArgument, format!("{}: {m}", self.kernel.name())))
        };
        if idx.is_some() != self.kind.has_indices() {
            return bad(format!("{} an index output", if self.kind.has_indices() { "needs" } else { "has no" }));
        }
        let n = outer * len * inner;
        let buffers = [("x", x, self.dtype), ("out", &*out, self.out)];
        let sized = buffers.into_iter().chain(idx.as_deref().map(|b| ("idx", b, DType::I64)));
        for (name, buf, dtype) in sized {
            let held = buf.len_bytes() / dtype.size_in_bytes();
            if held < n {
                return bad(format!("{name} holds {held} {dtype} elements, {outer}x{len}x{inner} needs {n}"));
            }
        }
        if n == 0 {
            return Ok(());
        }
        let lines = outer * inner;
        let mut args: Vec<KernelArg<'_>> = vec![KernelArg::In(x), KernelArg::Out(out)];
        if let Some(i) = idx {
            args.push(KernelArg::Out(i));
        }
        args.extend([lines, len, inner].map(|w| KernelArg::U64(w as u64)));
        let grid = lines.div_ceil(ELEMENTWISE_BLOCK as usize).min(self.max_grid as usize) as u32;
        launch_as("cuda_scan", &self.kernel, grid, ELEMENTWISE_BLOCK, &mut args)
    }
}
