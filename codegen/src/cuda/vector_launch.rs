//! Checked launches of the vector elementwise kernels ([`super::vector`]).

use super::emit::ELEMENTWISE_BLOCK;
use super::launch::{launch_as, load_on};
use super::vector::VectorKernel;
use kiln_runtime::cuda::{CudaBuffer, CudaError, CudaErrorKind, CudaKernel, KernelArg, Param};
use kiln_runtime::DType;

/// A [`VectorKernel`] compiled for, and loaded on, one device.
#[derive(Clone, Debug)]
pub struct LoadedVector {
    kernel: CudaKernel,
    inputs: Vec<DType>,
    out: DType,
    broadcast: Vec<bool>,
    width: usize,
    max_grid: u32,
}

impl LoadedVector {
    /// Compiles `k` for `cuda:ordinal`'s arch (through the kernel cache) and loads it there.
    pub fn load(k: &VectorKernel, ordinal: usize) -> Result<LoadedVector, CudaError> {
        let mut params = vec![Param::In; k.inputs.len()];
        params.push(Param::Out);
        params.extend(std::iter::repeat_n(Param::U64, 2 + k.inputs.len()));
        let (kernel, max_grid) = load_on("cuda_elementwise", &k.source, &k.name, ordinal, params)?;
        Ok(LoadedVector {
            kernel,
            inputs: k.inputs.clone(),
            out: k.out,
            broadcast: k.broadcast.clone(),
            width: k.width,
            max_grid,
        })
    }

    /// The loaded kernel (name, device, signature).
    pub fn kernel(&self) -> &CudaKernel {
        &self.kernel
    }

    /// Computes `n` elements: `out[out_offset + i] = expr(inputs…)`, each input read from its
    /// element offset (contiguous, or one broadcast value). Errors (op `cuda_elementwise`,
    /// nothing launched) when the number of inputs differs from the kernel's, a view reaches
    /// past its buffer, a contiguous operand is not aligned to its vector access (see
    /// `vector_launch`, which decides first), or a buffer is on another device.
    pub fn run(
        &self,
        inputs: &[(&CudaBuffer, usize)],
        out: &mut CudaBuffer,
        out_offset: usize,
        n: usize,
    ) -> Result<(), CudaError> {
        let bad = |m: String| {
            Err(CudaError::new(
                "cuda_elementwise",
                CudaErrorKind::InvalidArgument,
                format!("{}: {m}", self.kernel.name()),
            ))
        };
        if inputs.len() != self.inputs.len() {
            return bad(format!("takes {} input(s), {} given", self.inputs.len(), inputs.len()));
        }
        let views = inputs.iter().map(|&(b, o)| (b, o)).chain([(&*out, out_offset)]);
        let kinds = self.inputs.iter().zip(&self.broadcast).map(|(&d, &b)| (d, b)).chain([(self.out, false)]);
        for (j, ((b, offset), (d, broadcast))) in views.zip(kinds).enumerate() {
            let (size, held) = (d.size_in_bytes(), b.len_bytes() / d.size_in_bytes());
            let end = offset + if broadcast { 1 } else { n };
            if end > held {
                return bad(format!("operand {j} reaches element {} of a buffer of {held} {d} elements", end - 1));
            }
            let access = (self.width * size) as u64;
            if !broadcast && !(b.device_ptr() + (offset * size) as u64).is_multiple_of(access) {
                return bad(format!("operand {j} does not start on a {access}-byte boundary"));
            }
        }
        if n == 0 {
            return Ok(());
        }
        let work = (n / self.width).max(n % self.width).max(1);
        let grid = work.div_ceil(ELEMENTWISE_BLOCK as usize).min(self.max_grid as usize) as u32;
        let mut args: Vec<KernelArg<'_>> = inputs.iter().map(|&(b, _)| KernelArg::In(b)).collect();
        let offsets: Vec<u64> = inputs.iter().map(|&(_, o)| o as u64).chain([out_offset as u64]).collect();
        args.push(KernelArg::Out(out));
        args.push(KernelArg::U64(n as u64));
        args.extend(offsets.into_iter().map(KernelArg::U64));
        launch_as("cuda_elementwise", &self.kernel, grid, ELEMENTWISE_BLOCK, &mut args)
    }
}
