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

/// The line a thread of a [`IndexKind::ScatterLines`] or [`IndexKind::ScatterAddLines`]
/// kernel walks along the scatter dim:
/// the index's size along that dim and the index's and the source's strides along it, in
/// elements.
#[derive(Clone, Copy, Debug)]
pub struct ScatterLine {
    /// The number of positions along the scatter dim (the index's size there).
    pub len: usize,
    /// The index's stride along the scatter dim.
    pub idx_stride: usize,
    /// The source's stride along the scatter dim.
    pub src_stride: usize,
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
        params.extend(std::iter::repeat_n(Param::U64, 1 + k.ndim + 3 * (k.ndim + 1) + 2 + k.kind.line_words()));
        let (kernel, max_grid) = load_on("cuda_index", &k.source, &k.name, ordinal, params)?;
        Ok(LoadedIndex { kernel, kind: k.kind, dtype: k.dtype, ndim: k.ndim, max_grid })
    }

    /// The loaded kernel (name, device, signature).
    pub fn kernel(&self) -> &kiln_runtime::cuda::CudaKernel {
        &self.kernel
    }

    /// A gather over `shape`: `out[view] = target[view + idx[view] · dim.stride]`. Errors (op
    /// `cuda_index`, nothing launched) as [`LoadedIndex::scatter`]'s.
    pub fn gather(
        &self,
        target: (&CudaBuffer, StridedOperand<'_>),
        idx: (&CudaBuffer, StridedOperand<'_>),
        out: (&mut CudaBuffer, StridedOperand<'_>),
        shape: &[usize],
        dim: IndexedDim,
    ) -> Result<(), CudaError> {
        self.check(IndexKind::Gather, [(target.0, target.1), (idx.0, idx.1), (&*out.0, out.1)], shape, dim)?;
        let [t, i, v] = [target.1, idx.1, out.1];
        let mut args = vec![KernelArg::In(target.0), KernelArg::In(idx.0), KernelArg::Out(out.0)];
        self.launch(&mut args, [&t, &i, &v], shape, dim, &[])
    }

    /// A scatter (or scatter_add, as the kernel's kind) over `shape`: `target[view +
    /// idx[view] · dim.stride] = src[view]` (or `+=`). Errors (op `cuda_index`, nothing
    /// launched) when the kernel is a gather or one that [walks lines](IndexKind::walks_lines), the
    /// number of dims or of strides differs from the kernel's, or a view (the target's over the
    /// whole indexed dim) reaches past its buffer.
    pub fn scatter(
        &self,
        target: (&mut CudaBuffer, StridedOperand<'_>),
        idx: (&CudaBuffer, StridedOperand<'_>),
        src: (&CudaBuffer, StridedOperand<'_>),
        shape: &[usize],
        dim: IndexedDim,
    ) -> Result<(), CudaError> {
        // The kinds launched here: a plain scatter, or the atomic scatter_add.
        let kind = if self.kind == IndexKind::ScatterAdd { IndexKind::ScatterAdd } else { IndexKind::Scatter };
        self.check(kind, [(&*target.0, target.1), (idx.0, idx.1), (src.0, src.1)], shape, dim)?;
        let [t, i, v] = [target.1, idx.1, src.1];
        let mut args = vec![KernelArg::Out(target.0), KernelArg::In(idx.0), KernelArg::In(src.0)];
        self.launch(&mut args, [&t, &i, &v], shape, dim, &[])
    }

    /// The deterministic scatter (or scatter_add) of an [`IndexKind::ScatterLines`] (or
    /// [`IndexKind::ScatterAddLines`]) kernel: one thread per position of `shape` (the index
    /// space without the scatter dim) walks its `line` in order, `target[view + idx[view +
    /// j·line.idx_stride] · dim.stride] = src[view + j·line.src_stride]` (or `+=`). The views
    /// are checked over `shape` with the line as one more dim (the target's stride 0 along
    /// it). Errors (op `cuda_index`, nothing launched) as [`LoadedIndex::scatter`]'s, and when
    /// the kernel is of another kind.
    pub fn scatter_lines(
        &self,
        target: (&mut CudaBuffer, StridedOperand<'_>),
        idx: (&CudaBuffer, StridedOperand<'_>),
        src: (&CudaBuffer, StridedOperand<'_>),
        shape: &[usize],
        dim: IndexedDim,
        line: ScatterLine,
    ) -> Result<(), CudaError> {
        let along = |v: &StridedOperand<'_>, s: usize| v.strides.iter().copied().chain([s]).collect::<Vec<_>>();
        let (st, si, sv) = (along(&target.1, 0), along(&idx.1, line.idx_stride), along(&src.1, line.src_stride));
        let full: Vec<usize> = shape.iter().copied().chain([line.len]).collect();
        let views = [
            (&*target.0, StridedOperand { offset: target.1.offset, strides: &st }),
            (idx.0, StridedOperand { offset: idx.1.offset, strides: &si }),
            (src.0, StridedOperand { offset: src.1.offset, strides: &sv }),
        ];
        // The kinds launched here: the line kernels, storing or adding.
        let kind =
            if self.kind == IndexKind::ScatterLines { IndexKind::ScatterLines } else { IndexKind::ScatterAddLines };
        self.check_kind(kind, shape)?;
        self.check_views(views, &full, dim)?;
        if line.len == 0 {
            return Ok(());
        }
        let [t, i, v] = [target.1, idx.1, src.1];
        let mut args = vec![KernelArg::Out(target.0), KernelArg::In(idx.0), KernelArg::In(src.0)];
        self.launch(
            &mut args,
            [&t, &i, &v],
            shape,
            dim,
            &[line.len as u64, line.idx_stride as u64, line.src_stride as u64],
        )
    }

    /// The error of op `cuda_index` naming this kernel.
    fn bad<T>(&self, m: String) -> Result<T, CudaError> {
        Err(CudaError::new("cuda_index", CudaErrorKind::InvalidArgument, format!("{}: {m}", self.kernel.name())))
    }

    /// Checks the kind and the number of dims of `shape` against the kernel's.
    fn check_kind(&self, kind: IndexKind, shape: &[usize]) -> Result<(), CudaError> {
        if kind != self.kind {
            return self.bad(format!("is a {} kernel, not a {} one", self.kind.name(), kind.name()));
        }
        if shape.len() != self.ndim {
            return self.bad(format!("indexes {} dim(s), shape {shape:?} given", self.ndim));
        }
        Ok(())
    }

    /// Checks the kind, dims and every view against its buffer (target, index, values).
    fn check(
        &self,
        kind: IndexKind,
        views: [(&CudaBuffer, StridedOperand<'_>); 3],
        shape: &[usize],
        dim: IndexedDim,
    ) -> Result<(), CudaError> {
        self.check_kind(kind, shape)?;
        self.check_views(views, shape, dim)
    }

    /// Checks every view (target, index, values) over `shape` against its buffer, the
    /// target's over the whole indexed dim.
    fn check_views(
        &self,
        views: [(&CudaBuffer, StridedOperand<'_>); 3],
        shape: &[usize],
        dim: IndexedDim,
    ) -> Result<(), CudaError> {
        let bad = |m: String| self.bad(m);
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
            return bad(format!(
                "the target reaches element {} of a buffer of {held} elements",
                end - 1 + (dim.size - 1) * dim.stride
            ));
        }
        Ok(())
    }

    /// Launches with the index space's words, the indexed dim and the `line` words (see
    /// [`IndexKind::line_words`]) after the three buffers.
    fn launch(
        &self,
        args: &mut Vec<KernelArg<'_>>,
        views: [&StridedOperand<'_>; 3],
        shape: &[usize],
        dim: IndexedDim,
        line: &[u64],
    ) -> Result<(), CudaError> {
        let n = kiln_runtime::layout::numel(shape);
        if n == 0 {
            return Ok(());
        }
        let grid = n.div_ceil(ELEMENTWISE_BLOCK as usize).min(self.max_grid as usize) as u32;
        let words = index_space_words(shape, &views);
        args.extend(
            words
                .into_iter()
                .chain([dim.size as u64, dim.stride as u64])
                .chain(line.iter().copied())
                .map(KernelArg::U64),
        );
        launch_as("cuda_index", &self.kernel, grid, ELEMENTWISE_BLOCK, args)
    }
}
