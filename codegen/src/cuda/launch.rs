//! Running a generated elementwise kernel on device buffers.

use super::emit::{ElementwiseKernel, ELEMENTWISE_BLOCK};
use kiln_runtime::cuda::{self, CudaBuffer, CudaError, CudaErrorKind, CudaKernel, KernelArg, LaunchDims, Param};

/// An [`ElementwiseKernel`] compiled for, and loaded on, one device: launch it many times
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
    pub fn load(k: &ElementwiseKernel, ordinal: usize) -> Result<LoadedElementwise, CudaError> {
        let dev = cuda::device("cuda_elementwise", ordinal)?;
        let compiled = cuda::compile(&k.source, &k.name, dev.arch())?;
        let mut params = vec![Param::In; k.num_inputs];
        params.push(Param::Out);
        params.push(Param::U64);
        let kernel = CudaKernel::load(ordinal, &compiled, params)?;
        Ok(LoadedElementwise {
            kernel,
            num_inputs: k.num_inputs,
            elem_bytes: k.dtype.size_in_bytes(),
            vector_width: k.vector_width,
            max_grid: dev.sm_count() * 16,
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
        let bad = |m: String| Err(CudaError::new(op, CudaErrorKind::InvalidArgument, format!("{}: {m}", self.kernel.name())));
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
        if self.vector_width > 1 && inputs.iter().map(|b| b.device_ptr()).chain([out.device_ptr()]).any(|p| p % 16 != 0) {
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
        self.kernel
            .launch(LaunchDims { grid, block: ELEMENTWISE_BLOCK, shared_bytes: 0 }, &mut args)
            .map_err(|mut e| {
                if e.kind == CudaErrorKind::InvalidArgument {
                    e.op = op;
                }
                e
            })
    }
}

/// Compiles (cached), loads and runs `k` once on the device of `out`: see
/// [`LoadedElementwise::run`].
pub fn run_elementwise(k: &ElementwiseKernel, inputs: &[&CudaBuffer], out: &mut CudaBuffer, n: usize) -> Result<(), CudaError> {
    LoadedElementwise::load(k, out.ordinal())?.run(inputs, out, n)
}
