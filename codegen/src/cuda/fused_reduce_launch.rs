//! Checked launches of fused reduction kernels ([`super::fused_reduce`]).

use super::fused_launch::{check_launch, operand_words, FusedOperand, Signature};
use super::fused_reduce::FusedReduceKernel;
use super::launch::{launch_as, load_on};
use super::reduce::{CudaReduce, REDUCE_BLOCK};
use super::reduce_launch::reduce_geometry;
use kiln_runtime::cuda::{CudaBuffer, CudaError, CudaKernel, KernelArg, Param};
use kiln_runtime::DType;

/// A [`FusedReduceKernel`] compiled for, and loaded on, one device.
#[derive(Clone, Debug)]
pub struct LoadedFusedReduce {
    kernel: CudaKernel,
    inputs: Vec<DType>,
    outputs: Vec<DType>,
    stages: usize,
    rank: usize,
    reduce_rank: usize,
    scalars: usize,
    max_grid: u32,
}

impl LoadedFusedReduce {
    /// Compiles `k` for `cuda:ordinal`'s arch (through the runtime's NVRTC cache) and loads it
    /// there.
    pub fn load(k: &FusedReduceKernel, ordinal: usize) -> Result<LoadedFusedReduce, CudaError> {
        let mut params = vec![Param::In; k.inputs.len()];
        params.extend(std::iter::repeat_n(Param::Out, k.outputs.len()));
        params.extend(std::iter::repeat_n(Param::U64, k.words()));
        let (kernel, max_grid) = load_on("cuda_fused", &k.source, &k.name, ordinal, params)?;
        Ok(LoadedFusedReduce {
            kernel,
            inputs: k.inputs.clone(),
            outputs: k.outputs.clone(),
            stages: k.stages,
            rank: k.rank,
            reduce_rank: k.reduce_rank,
            scalars: k.scalars,
            max_grid,
        })
    }

    /// The loaded kernel (name, device, signature).
    pub fn kernel(&self) -> &CudaKernel {
        &self.kernel
    }

    /// Reduces the iteration space `shape` (kept dims, then the kernel's reduced dims): each
    /// stage's values into its output (one element per row, row-major over the kept dims),
    /// each epilogue output over the whole of `shape` (row-major), reading each input through
    /// its view, with the run-time `scalars`. A warp reduces a row of up to
    /// [`super::WARP_ROW_MAX`] elements, a block a longer one. Errors (op `cuda_fused`, nothing
    /// launched) when the counts of inputs, outputs, dims, strides or scalars differ from the
    /// kernel's, a view reaches outside its buffer, an output is too small, or a buffer is on
    /// another device.
    pub fn run(
        &self,
        inputs: &[(&CudaBuffer, FusedOperand<'_>)],
        outputs: &mut [&mut CudaBuffer],
        shape: &[usize],
        scalars: &[f64],
    ) -> Result<(), CudaError> {
        let sig = Signature {
            name: self.kernel.name(),
            inputs: &self.inputs,
            outputs: &self.outputs,
            scalars: self.scalars,
            rank: self.rank,
        };
        let kept = self.rank - self.reduce_rank;
        // Each stage's output holds one element per row, each epilogue output the whole space.
        let rows =
            |shape: &[usize]| -> (usize, usize) { (shape[..kept].iter().product(), shape[kept..].iter().product()) };
        check_launch(&sig, inputs, outputs, scalars, shape, |o| {
            let (n_out, n_red) = rows(shape);
            if o < self.stages {
                n_out
            } else {
                n_out * n_red
            }
        })?;
        let (n_out, n_red) = rows(shape);
        if n_out == 0 {
            return Ok(());
        }
        // The eager reductions' geometry (any non-scan kind chooses the same).
        let geometry = reduce_geometry(CudaReduce::Sum, n_out, n_red, self.max_grid);
        let mut words: Vec<u64> = vec![n_out as u64, n_red as u64, geometry.group as u64];
        words.extend(operand_words(inputs, shape, scalars));
        let mut args: Vec<KernelArg<'_>> = inputs.iter().map(|(b, _)| KernelArg::In(b)).collect();
        args.extend(outputs.iter_mut().map(|b| KernelArg::Out(b)));
        args.extend(words.into_iter().map(KernelArg::U64));
        launch_as("cuda_fused", &self.kernel, geometry.grid, REDUCE_BLOCK, &mut args)
    }
}
