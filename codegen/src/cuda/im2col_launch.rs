//! Checked launches of the column kernels ([`super::im2col`]) on device buffers.

use super::emit::ELEMENTWISE_BLOCK;
use super::im2col::{ColKernel, ColKind, COL_GEOMETRY_WORDS};
use super::launch::{launch_as, load_on};
use kiln_runtime::cpu::conv::ConvGeom;
use kiln_runtime::cuda::{CudaBuffer, CudaError, CudaErrorKind, CudaKernel, KernelArg, Param};
use kiln_runtime::DType;

/// A [`ColKernel`] compiled for, and loaded on, one device.
#[derive(Clone, Debug)]
pub struct LoadedCol {
    kernel: CudaKernel,
    kind: ColKind,
    dtype: DType,
    max_grid: u32,
}

/// The geometry words of a launch, in [`COL_GEOMETRY_WORDS`]'s order.
fn geometry_words(g: &ConvGeom) -> [u64; COL_GEOMETRY_WORDS.len()] {
    [g.h, g.w, g.oh, g.ow, g.kh, g.kw, g.stride[0], g.stride[1], g.pad[0], g.pad[1], g.dilation[0], g.dilation[1]]
        .map(|v| v as u64)
}

impl LoadedCol {
    /// Compiles `k` for `cuda:ordinal`'s arch (through the kernel cache) and loads it there.
    pub fn load(k: &ColKernel, ordinal: usize) -> Result<LoadedCol, CudaError> {
        let mut params = vec![Param::In, Param::Out];
        params.extend(std::iter::repeat_n(Param::U64, 1 + COL_GEOMETRY_WORDS.len()));
        let (kernel, max_grid) = load_on("cuda_col", &k.source, &k.name, ordinal, params)?;
        Ok(LoadedCol { kernel, kind: k.kind, dtype: k.dtype, max_grid })
    }

    /// The loaded kernel (name, device, signature).
    pub fn kernel(&self) -> &CudaKernel {
        &self.kernel
    }

    /// Runs the kernel over every image and channel of `g` (`g.n * g.c_in` planes; groups
    /// play no part): `input` is the buffer it reads (the planes for `im2col`, the columns for
    /// `col2im`), `output` the one it writes, both contiguous from their first element.
    /// Errors (op `cuda_col`, nothing launched) when a buffer holds fewer elements than the
    /// geometry needs, or the kernel, stride or dilation has a zero size.
    pub fn run(&self, g: &ConvGeom, input: &CudaBuffer, output: &mut CudaBuffer) -> Result<(), CudaError> {
        let bad = |m: String| {
            Err(CudaError::new("cuda_col", CudaErrorKind::InvalidArgument, format!("{}: {m}", self.kernel.name())))
        };
        if g.kh == 0 || g.kw == 0 || [g.stride, g.dilation].iter().any(|p| p.contains(&0)) {
            return bad(format!("a zero kernel, stride or dilation in {g:?}"));
        }
        let (read, written) = self.kind.lengths(g);
        let [read_name, written_name] = self.kind.buffers();
        let size = self.dtype.size_in_bytes();
        for (name, buf, elems) in [(read_name, input, read), (written_name, &*output, written)] {
            if buf.len_bytes() < elems * size {
                return bad(format!("{name} holds {} bytes, {g:?} needs {}", buf.len_bytes(), elems * size));
            }
        }
        if written == 0 {
            return Ok(());
        }
        let mut args = vec![KernelArg::In(input), KernelArg::Out(output), KernelArg::U64(written as u64)];
        args.extend(geometry_words(g).map(KernelArg::U64));
        let grid = written.div_ceil(ELEMENTWISE_BLOCK as usize).min(self.max_grid as usize) as u32;
        launch_as("cuda_col", &self.kernel, grid, ELEMENTWISE_BLOCK, &mut args)
    }
}
