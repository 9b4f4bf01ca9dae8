//! Checked launches of the compaction kernels ([`super::compact`]) on device buffers.

use super::compact::{compact_chunks, emit_compact, CompactStage, COMPACT_BLOCK};
use super::launch::load_on;
use kiln_runtime::cuda::{CudaBuffer, CudaError, CudaErrorKind, CudaKernel, KernelArg, LaunchDims, Param};

/// The three compaction kernels, compiled for and loaded on one device.
#[derive(Clone, Debug)]
pub struct LoadedCompact {
    count: CudaKernel,
    scan: CudaKernel,
    write: CudaKernel,
    max_grid: u32,
}

/// An error of op `cuda_compact` unless `buf` holds `want` bytes for `what`.
fn holds(buf: &CudaBuffer, want: usize, what: &str) -> Result<(), CudaError> {
    if buf.len_bytes() < want {
        let m = format!("{what} holds {} bytes, {want} needed", buf.len_bytes());
        return Err(CudaError::new("cuda_compact", CudaErrorKind::InvalidArgument, m));
    }
    Ok(())
}

impl LoadedCompact {
    /// Compiles the kernels for `cuda:ordinal`'s arch (through the kernel cache) and loads
    /// them there.
    pub fn load(ordinal: usize) -> Result<LoadedCompact, CudaError> {
        use Param::{In, Out, U64};
        let load = |stage: CompactStage, params: Vec<Param>| {
            let k = emit_compact(stage);
            load_on("cuda_compact", &k.source, &k.name, ordinal, params)
        };
        let (count, max_grid) = load(CompactStage::Count, vec![In, Out, U64, U64])?;
        let (scan, _) = load(CompactStage::Scan, vec![Out, U64])?;
        let (write, _) = load(CompactStage::Write, vec![In, In, In, Out, U64, U64, U64])?;
        Ok(LoadedCompact { count, scan, write, max_grid })
    }

    /// The grid over `chunks` chunks (at least one block).
    fn grid(&self, chunks: usize) -> LaunchDims {
        LaunchDims { grid: chunks.clamp(1, self.max_grid as usize) as u32, block: COMPACT_BLOCK, shared_bytes: 0 }
    }

    /// Counts the set flags among the first `n` bytes of `flags` into `counts` (int64,
    /// [`compact_chunks`]`(n) + 1` entries): each chunk's first output row, then the total in
    /// the last entry, which the caller reads back. Errors (op `cuda_compact`, nothing
    /// launched): a buffer too small.
    pub fn offsets(&self, flags: &CudaBuffer, counts: &mut CudaBuffer, n: usize) -> Result<(), CudaError> {
        let chunks = compact_chunks(n);
        holds(flags, n, "the flags")?;
        holds(counts, (chunks + 1) * 8, "the counts")?;
        if chunks > 0 {
            let mut args = [
                KernelArg::In(flags),
                KernelArg::Out(&mut *counts),
                KernelArg::U64(n as u64),
                KernelArg::U64(chunks as u64),
            ];
            self.count.launch(self.grid(chunks), &mut args)?;
        }
        let one = LaunchDims { grid: 1, block: COMPACT_BLOCK, shared_bytes: 0 };
        self.scan.launch(one, &mut [KernelArg::Out(counts), KernelArg::U64(chunks as u64)])
    }

    /// Writes the coordinates over `sizes` (int64, `ndim` entries whose product is `n`) of
    /// every set flag, in order, as the `total` rows of `out` (int64, `[total, ndim]`), with the
    /// offsets [`LoadedCompact::offsets`] left in `counts`. Errors (op `cuda_compact`, nothing
    /// launched): a buffer too small.
    pub fn write(
        &self,
        flags: &CudaBuffer,
        counts: &CudaBuffer,
        (sizes, ndim): (&CudaBuffer, usize),
        out: &mut CudaBuffer,
        n: usize,
        total: usize,
    ) -> Result<(), CudaError> {
        let chunks = compact_chunks(n);
        holds(flags, n, "the flags")?;
        holds(counts, (chunks + 1) * 8, "the counts")?;
        holds(sizes, ndim * 8, "the sizes")?;
        holds(out, total * ndim * 8, "the output")?;
        if total == 0 || ndim == 0 {
            return Ok(());
        }
        let mut args = [
            KernelArg::In(flags),
            KernelArg::In(counts),
            KernelArg::In(sizes),
            KernelArg::Out(out),
            KernelArg::U64(n as u64),
            KernelArg::U64(chunks as u64),
            KernelArg::U64(ndim as u64),
        ];
        self.write.launch(self.grid(chunks), &mut args)
    }
}
