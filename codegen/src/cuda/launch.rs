//! Running a generated elementwise kernel on device buffers.

use super::emit::{ExprKernel, ELEMENTWISE_BLOCK};
use super::strided::StridedKernel;
use kiln_runtime::cuda::{self, CudaBuffer, CudaError, CudaErrorKind, CudaKernel, KernelArg, LaunchDims, Param};
use kiln_runtime::DType;

/// An [`ExprKernel`] compiled for, and loaded on, one device: launch it many times
/// without looking anything up again.
#[derive(Clone, Debug)]
pub struct LoadedElementwise {
    kernel: CudaKernel,
    num_inputs: usize,
    elem_bytes: usize,
    vector_width: usize,
    max_grid: u32,
}

impl LoadedElementwise {
    /// Compiles `k` for `cuda:ordinal`'s arch (through the kernel cache) and loads it there.
    pub fn load(k: &ExprKernel, ordinal: usize) -> Result<LoadedElementwise, CudaError> {
        let mut params = vec![Param::In; k.num_inputs];
        params.extend([Param::Out, Param::U64]);
        let (kernel, max_grid) = load_on("cuda_elementwise", &k.source, &k.name, ordinal, params)?;
        Ok(LoadedElementwise {
            kernel,
            num_inputs: k.num_inputs,
            elem_bytes: k.dtype.size_in_bytes(),
            vector_width: k.vector_width,
            max_grid,
        })
    }

    /// The loaded kernel (name, device, signature).
    pub fn kernel(&self) -> &CudaKernel {
        &self.kernel
    }

    /// Computes `n` elements: `out[i] = expr(inputs[0][i], …)`. Errors (op `cuda_elementwise`)
    /// when the number of inputs differs from the kernel's, a buffer holds fewer than `n`
    /// elements, or a buffer is on another device.
    pub fn run(&self, inputs: &[&CudaBuffer], out: &mut CudaBuffer, n: usize) -> Result<(), CudaError> {
        let op = "cuda_elementwise";
        let bad =
            |m: String| Err(CudaError::new(op, CudaErrorKind::InvalidArgument, format!("{}: {m}", self.kernel.name())));
        if inputs.len() != self.num_inputs {
            return bad(format!("takes {} input(s), {} given", self.num_inputs, inputs.len()));
        }
        let need = n * self.elem_bytes;
        for (i, b) in inputs.iter().enumerate() {
            if b.len_bytes() < need {
                return bad(format!("input {i} holds {} bytes, {n} elements need {need}", b.len_bytes()));
            }
        }
        if out.len_bytes() < need {
            return bad(format!("the output holds {} bytes, {n} elements need {need}", out.len_bytes()));
        }
        // The vector loop reads 16 bytes at a time from each buffer's start.
        if self.vector_width > 1 && inputs.iter().map(|b| b.device_ptr()).chain([out.device_ptr()]).any(|p| p % 16 != 0)
        {
            return bad("a buffer does not start on a 16-byte boundary".into());
        }
        if n == 0 {
            return Ok(());
        }
        let work = (n / self.vector_width).max(n % self.vector_width).max(1) as u64;
        let grid = work.div_ceil(ELEMENTWISE_BLOCK as u64).min(self.max_grid as u64) as u32;
        let mut args: Vec<KernelArg<'_>> = inputs.iter().map(|b| KernelArg::In(b)).collect();
        args.push(KernelArg::Out(out));
        args.push(KernelArg::U64(n as u64));
        launch_as(op, &self.kernel, grid, ELEMENTWISE_BLOCK, &mut args)
    }
}

/// Compiles (cached), loads and runs `k` once on the device of `out`: see
/// [`LoadedElementwise::run`].
pub fn run_elementwise(
    k: &ExprKernel,
    inputs: &[&CudaBuffer],
    out: &mut CudaBuffer,
    n: usize,
) -> Result<(), CudaError> {
    LoadedElementwise::load(k, out.ordinal())?.run(inputs, out, n)
}

/// Where a strided operand's elements are in its buffer: element `c` (a coordinate of the
/// kernel's index space) is at `offset + Σ c_m · strides_m`, in elements.
#[derive(Clone, Copy, Debug)]
pub struct StridedOperand<'a> {
    /// Element offset of coordinate 0.
    pub offset: usize,
    /// Stride of each dim, in elements (0 for a broadcast dim).
    pub strides: &'a [usize],
}

impl StridedOperand<'_> {
    /// One past the largest element index the operand reaches over `shape` (0 when empty).
    pub(super) fn end(&self, shape: &[usize]) -> usize {
        if shape.contains(&0) {
            return 0;
        }
        self.offset + shape.iter().zip(self.strides).map(|(&n, &s)| (n - 1) * s).sum::<usize>() + 1
    }

    /// An error message unless operand `j`, of `dtype` in `buf`, has one stride per dim of
    /// `shape` and stays inside the buffer over `shape`.
    pub(super) fn check(&self, j: usize, dtype: DType, buf: &CudaBuffer, shape: &[usize]) -> Result<(), String> {
        if self.strides.len() != shape.len() {
            return Err(format!("operand {j} has {} strides for {} dim(s)", self.strides.len(), shape.len()));
        }
        let (end, held) = (self.end(shape), buf.len_bytes() / dtype.size_in_bytes());
        if end > held {
            return Err(format!("operand {j} reaches element {} of a buffer of {held} {dtype} elements", end - 1));
        }
        Ok(())
    }
}

/// The argument words of an index space (see `strided::index_space_params`): the element
/// count, the sizes, then each view's offset and strides.
pub(super) fn index_space_words(shape: &[usize], views: &[&StridedOperand<'_>]) -> Vec<u64> {
    let mut words: Vec<u64> = vec![kiln_runtime::layout::numel(shape) as u64];
    words.extend(shape.iter().map(|&s| s as u64));
    for v in views {
        words.push(v.offset as u64);
        words.extend(v.strides.iter().map(|&s| s as u64));
    }
    words
}

/// A [`StridedKernel`] compiled for, and loaded on, one device.
#[derive(Clone, Debug)]
pub struct LoadedStrided {
    kernel: CudaKernel,
    inputs: Vec<DType>,
    out: DType,
    ndim: usize,
    max_grid: u32,
}

impl LoadedStrided {
    /// Compiles `k` for `cuda:ordinal`'s arch (through the kernel cache) and loads it there.
    pub fn load(k: &StridedKernel, ordinal: usize) -> Result<LoadedStrided, CudaError> {
        let mut params = vec![Param::In; k.inputs.len()];
        params.push(Param::Out);
        params.extend(std::iter::repeat_n(Param::U64, 1 + k.ndim + (k.inputs.len() + 1) * (k.ndim + 1)));
        let (kernel, max_grid) = load_on("cuda_elementwise", &k.source, &k.name, ordinal, params)?;
        Ok(LoadedStrided { kernel, inputs: k.inputs.clone(), out: k.out, ndim: k.ndim, max_grid })
    }

    /// The loaded kernel (name, device, signature).
    pub fn kernel(&self) -> &CudaKernel {
        &self.kernel
    }

    /// Computes every element of `shape`: `out[view] = expr(inputs[0][view], …)`. Errors (op
    /// `cuda_elementwise`, nothing launched) when the number of inputs, of dims or of strides
    /// differs from the kernel's, a view reaches past its buffer, or a buffer is on another
    /// device.
    pub fn run(
        &self,
        inputs: &[(&CudaBuffer, StridedOperand<'_>)],
        out: &mut CudaBuffer,
        out_view: StridedOperand<'_>,
        shape: &[usize],
    ) -> Result<(), CudaError> {
        let op = "cuda_elementwise";
        let bad =
            |m: String| Err(CudaError::new(op, CudaErrorKind::InvalidArgument, format!("{}: {m}", self.kernel.name())));
        if inputs.len() != self.inputs.len() {
            return bad(format!("takes {} input(s), {} given", self.inputs.len(), inputs.len()));
        }
        if shape.len() != self.ndim {
            return bad(format!("indexes {} dim(s), shape {shape:?} given", self.ndim));
        }
        let dtypes = self.inputs.iter().chain([&self.out]);
        let views = inputs.iter().map(|(b, v)| (&**b, v)).chain([(&*out, &out_view)]);
        for (j, (&d, (b, v))) in dtypes.zip(views).enumerate() {
            if let Err(m) = v.check(j, d, b, shape) {
                return bad(m);
            }
        }
        let n = kiln_runtime::layout::numel(shape);
        if n == 0 {
            return Ok(());
        }
        let grid = n.div_ceil(ELEMENTWISE_BLOCK as usize).min(self.max_grid as usize) as u32;
        let views: Vec<&StridedOperand<'_>> = inputs.iter().map(|(_, v)| v).chain([&out_view]).collect();
        let words = index_space_words(shape, &views);
        let mut args: Vec<KernelArg<'_>> = inputs.iter().map(|(b, _)| KernelArg::In(b)).collect();
        args.push(KernelArg::Out(out));
        args.extend(words.into_iter().map(KernelArg::U64));
        launch_as(op, &self.kernel, grid, ELEMENTWISE_BLOCK, &mut args)
    }
}

/// Compiles `source` (the kernel `name`) for `cuda:ordinal`'s arch through the kernel cache
/// and loads it there with the signature `params`; also the grid cap of its launches (16
/// blocks per SM; grid-stride loops cover the rest). Errors are `op`'s.
pub(super) fn load_on(
    op: &'static str,
    source: &str,
    name: &str,
    ordinal: usize,
    params: Vec<Param>,
) -> Result<(CudaKernel, u32), CudaError> {
    let dev = cuda::device(op, ordinal)?;
    let compiled = cuda::compile(source, name, dev.arch())?;
    Ok((CudaKernel::load(ordinal, &compiled, params)?, dev.sm_count() * 16))
}

/// Launches `kernel` on `grid` blocks of `block` threads; a signature mismatch is reported as
/// `op`'s.
pub(super) fn launch_as(
    op: &'static str,
    kernel: &CudaKernel,
    grid: u32,
    block: u32,
    args: &mut [KernelArg<'_>],
) -> Result<(), CudaError> {
    kernel.launch(LaunchDims { grid, block, shared_bytes: 0 }, args).map_err(|mut e| {
        if e.kind == CudaErrorKind::InvalidArgument {
            e.op = op;
        }
        e
    })
}
