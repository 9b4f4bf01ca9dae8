//! Checked launches of the indexing kernels ([`super::index`]) on device buffers.

use super::emit::ELEMENTWISE_BLOCK;
use super::index::{IndexKernel, IndexKind};
use super::launch::{index_space_words, launch_as, load_on, StridedOperand};
use kiln_runtime::cuda::{CudaBuffer, CudaError, CudaErrorKind, KernelArg, Param};
use kiln_runtime::DType;

/// The indexed dim of a target: its size (index values must lie in `0..size`) and its stride in
/// elements.
#[derive(Clone, Copy, Debug)]
pub struct IndexedDim {
    /// The dim's size.
    pub size: usize,
    /// The dim's stride, in elements.
    pub stride: usize,
}

/// An [`IndexKernel`] compiled for, and loaded on, one device.
#[derive(Clone, Debug)]
pub struct LoadedIndex {
    kernel: kiln_runtime::cuda::CudaKernel,
    kind: IndexKind,
    dtype: DType,
    ndim: usize,
    max_grid: u32,
}

impl LoadedIndex {
    /// Compiles `k` for `cuda:ordinal`'s arch (through the kernel cache) and loads it there.
    pub fn load(k: &IndexKernel, ordinal: usize) -> Result<LoadedIndex, CudaError> {
        let (t, v) = if k.kind.writes_target() { (Param::Out, Param::In) } else { (Param::In, Param::Out) };
        let mut params = vec![t, Param::In, v];
        params.extend(std::iter::repeat_n(Param::U64, 1 + k.ndim + 3 * (k.ndim + 1) + 2));
        let (kernel, max_grid) = load_on("cuda_index", &k.source, &k.name, ordinal, params)?;
        Ok(LoadedIndex { kernel, kind: k.kind, dtype: k.dtype, ndim: k.ndim, max_grid })
    }

    /// The loaded kernel (name, device, signature).
    pub fn kernel(&self) -> &kiln_runtime::cuda::CudaKernel {
        &self.kernel
    }

    /// A gather over `shape`: `out[view] = target[view + idx[view] · dim.stride]`. Errors (op
    /// `cuda_index`, nothing launched) as [`LoadedIndex::scatter`]'s.
    pub fn gather(&self, target: (&CudaBuffer, StridedOperand<'_>), idx: (&CudaBuffer, StridedOperand<'_>), out: (&mut CudaBuffer, StridedOperand<'_>), shape: &[usize], dim: IndexedDim) -> Result<(), CudaError> {
        self.check(false, [(target.0, target.1), (idx.0, idx.1), (&*out.0, out.1)], shape, dim)?;
        let [t, i, v] = [target.1, idx.1, out.1];
        let mut args = vec![KernelArg::In(target.0), KernelArg::In(idx.0), KernelArg::Out(out.0)];
        self.launch(&mut args, [&t, &i, &v], shape, dim)
    }

    /// A scatter (or scatter_add, as the kernel's kind) over `shape`: `target[view +
    /// idx[view] · dim.stride] = src[view]` (or `+=`). Errors (op `cuda_index`, nothing
    /// launched) when the kind, the number of dims or of strides differs from the kernel's, or
    /// a view (the target's over the whole indexed dim) reaches past its buffer.
    pub fn scatter(&self, target: (&mut CudaBuffer, StridedOperand<'_>), idx: (&CudaBuffer, StridedOperand<'_>), src: (&CudaBuffer, StridedOperand<'_>), shape: &[usize], dim: IndexedDim) -> Result<(), CudaError> {
        self.check(true, [(&*target.0, target.1), (idx.0, idx.1), (src.0, src.1)], shape, dim)?;
        let [t, i, v] = [target.1, idx.1, src.1];
        let mut args = vec![KernelArg::Out(target.0), KernelArg::In(idx.0), KernelArg::In(src.0)];
        self.launch(&mut args, [&t, &i, &v], shape, dim)
    }

    /// Checks the kind, dims and every view against its buffer (target, index, values).
    fn check(&self, scatter: bool, views: [(&CudaBuffer, StridedOperand<'_>); 3], shape: &[usize], dim: IndexedDim) -> Result<(), CudaError> {
        let bad = |m: String| Err(CudaError::new("cuda_index", CudaErrorKind::InvalidArgument, format!("{}: {m}", self.kernel.name())));
        if scatter != self.kind.writes_target() {
            return bad(format!("is a {} kernel", self.kind.name()));
        }
        if shape.len() != self.ndim {
            return bad(format!("indexes {} dim(s), shape {shape:?} given", self.ndim));
        }
        for (j, (b, v)) in views.iter().enumerate() {
            let dtype = if j == 1 { DType::I64 } else { self.dtype };
            v.check(j, dtype, b, shape).or_else(bad)?;
        }
        // The target's view has stride 0 along the indexed dim: the index adds up to
        // (size - 1) · stride.
        let (b, v) = &views[0];
        let end = v.end(shape);
        let held = b.len_bytes() / self.dtype.size_in_bytes();
        if end > 0 && dim.size > 0 && end + (dim.size - 1) * dim.stride > held {
            return bad(format!("the target reaches element {} of a buffer of {held} elements", end - 1 + (dim.size - 1) * dim.stride));
        }
        Ok(())
    }

    /// Launches with the index space's words and the indexed dim after the three buffers.
    fn launch(&self, args: &mut Vec<KernelArg<'_>>, views: [&StridedOperand<'_>; 3], shape: &[usize], dim: IndexedDim) -> Result<(), CudaError> {
        let n = kiln_runtime::layout::numel(shape);
        if n == 0 {
            return Ok(());
        }
        let grid = n.div_ceil(ELEMENTWISE_BLOCK as usize).min(self.max_grid as usize) as u32;
        let words = index_space_words(shape, &views);
        args.extend(words.into_iter().chain([dim.size as u64, dim.stride as u64]).map(KernelArg::U64));
        launch_as("cuda_index", &self.kernel, grid, ELEMENTWISE_BLOCK, args)
    }
}
