//! Checked launches of fused kernels ([`super::fused`]).

use super::emit::ELEMENTWISE_BLOCK;
use super::fused::FusedKernel;
use super::fused_vector::{fused_vector_launch, FusedVectorKernel};
use super::launch::{launch_as, load_on};
use kiln_runtime::cuda::{CudaBuffer, CudaError, CudaErrorKind, CudaKernel, KernelArg, Param};
use kiln_runtime::DType;
use std::sync::OnceLock;

/// Where a fused kernel's input elements are in its buffer: coordinate `c` of the index space
/// is element `offset + Σ c_m · strides_m` (strides may be negative or 0).
#[derive(Clone, Copy, Debug)]
pub struct FusedOperand<'a> {
    /// Element offset of coordinate 0.
    pub offset: usize,
    /// Stride of each dim, in elements.
    pub strides: &'a [isize],
}

impl FusedOperand<'_> {
    /// The lowest and one past the highest element the operand reaches over `shape` (`None`
    /// when it reaches below element 0; `(0, 0)` when `shape` is empty).
    pub(super) fn range(&self, shape: &[usize]) -> Option<(usize, usize)> {
        if shape.contains(&0) {
            return Some((0, 0));
        }
        let (mut lo, mut hi) = (self.offset as i128, self.offset as i128);
        for (&n, &s) in shape.iter().zip(self.strides) {
            let reach = (n as i128 - 1) * s as i128;
            if reach < 0 {
                lo += reach;
            } else {
                hi += reach;
            }
        }
        (lo >= 0).then_some((lo as usize, hi as usize + 1))
    }
}

/// A fused kernel's signature, as its launches are checked against it.
pub(super) struct Signature<'a> {
    /// The kernel's name (for the messages).
    pub name: &'a str,
    /// Each input's dtype.
    pub inputs: &'a [DType],
    /// Each output's dtype.
    pub outputs: &'a [DType],
    /// Run-time scalars it takes.
    pub scalars: usize,
    /// Dims of its iteration space.
    pub rank: usize,
}

/// Checks a launch of `sig` (op `cuda_fused`, `InvalidArgument`): the counts of inputs,
/// outputs and scalars, `shape` of the kernel's rank, each input with one stride per dim and
/// its view inside its buffer, and each output `o` holding `out_elems(o)` elements (called
/// only once `shape` has the kernel's rank).
pub(super) fn check_launch(
    sig: &Signature<'_>,
    inputs: &[(&CudaBuffer, FusedOperand<'_>)],
    outputs: &[&mut CudaBuffer],
    scalars: &[f64],
    shape: &[usize],
    out_elems: impl Fn(usize) -> usize,
) -> Result<(), CudaError> {
    let bad =
        |m: String| Err(CudaError::new("cuda_fused", CudaErrorKind::InvalidArgument, format!("{}: {m}", sig.name)));
    let (takes, given) =
        ([sig.inputs.len(), sig.outputs.len(), sig.scalars], [inputs.len(), outputs.len(), scalars.len()]);
    if takes != given {
        return bad(format!(
            "takes {} input(s), {} output(s) and {} scalar(s); {}, {} and {} given",
            takes[0], takes[1], takes[2], given[0], given[1], given[2]
        ));
    }
    if shape.len() != sig.rank {
        return bad(format!("indexes {} dim(s), shape {shape:?} given", sig.rank));
    }
    for (j, ((b, v), &d)) in inputs.iter().zip(sig.inputs).enumerate() {
        if v.strides.len() != shape.len() {
            return bad(format!("input {j} has {} strides for {} dim(s)", v.strides.len(), shape.len()));
        }
        let held = b.len_bytes() / d.size_in_bytes();
        match v.range(shape) {
            Some((_, end)) if end <= held => {}
            _ => {
                return bad(format!(
                "input {j} (offset {}, strides {:?}) reaches outside its buffer of {held} {d} elements over {shape:?}",
                v.offset, v.strides
            ))
            }
        }
    }
    for (o, (b, &d)) in outputs.iter().zip(sig.outputs).enumerate() {
        let n = out_elems(o);
        if b.len_bytes() < n * d.size_in_bytes() {
            return bad(format!(
                "output {o} holds {} bytes, {n} {d} elements need {}",
                b.len_bytes(),
                n * d.size_in_bytes()
            ));
        }
    }
    Ok(())
}

/// The launch words after a fused kernel's leading counts: the sizes of `shape`, each input's
/// offset and strides, then the scalars' bits.
pub(super) fn operand_words(inputs: &[(&CudaBuffer, FusedOperand<'_>)], shape: &[usize], scalars: &[f64]) -> Vec<u64> {
    let mut words: Vec<u64> = shape.iter().map(|&s| s as u64).collect();
    for (_, v) in inputs {
        words.push(v.offset as u64);
        // Two's complement: the kernel's wrapping unsigned arithmetic adds a negative stride.
        words.extend(v.strides.iter().map(|&s| s as i64 as u64));
    }
    words.extend(scalars.iter().map(|s| s.to_bits()));
    words
}

/// A [`FusedKernel`] compiled for, and loaded on, one device; its vector variant is compiled
/// and loaded on the first launch that takes it.
#[derive(Clone, Debug)]
pub struct LoadedFused {
    kernel: CudaKernel,
    vector: FusedVectorKernel,
    vector_kernel: OnceLock<CudaKernel>,
    ordinal: usize,
    inputs: Vec<DType>,
    outputs: Vec<DType>,
    rank: usize,
    scalars: usize,
    max_grid: u32,
}

impl LoadedFused {
    /// Compiles `k` for `cuda:ordinal`'s arch (through the runtime's NVRTC cache) and loads it
    /// there.
    pub fn load(k: &FusedKernel, ordinal: usize) -> Result<LoadedFused, CudaError> {
        let mut params = vec![Param::In; k.inputs.len()];
        params.extend(std::iter::repeat_n(Param::Out, k.outputs.len()));
        params.extend(std::iter::repeat_n(Param::U64, k.words()));
        let (kernel, max_grid) = load_on("cuda_fused", &k.source, &k.name, ordinal, params)?;
        Ok(LoadedFused {
            kernel,
            vector: k.vector.clone(),
            vector_kernel: OnceLock::new(),
            ordinal,
            inputs: k.inputs.clone(),
            outputs: k.outputs.clone(),
            rank: k.rank,
            scalars: k.scalars,
            max_grid,
        })
    }

    /// The vector variant, compiled and loaded on first use.
    fn vector_kernel(&self) -> Result<&CudaKernel, CudaError> {
        if let Some(k) = self.vector_kernel.get() {
            return Ok(k);
        }
        let mut params = vec![Param::In; self.inputs.len()];
        params.extend(std::iter::repeat_n(Param::Out, self.outputs.len()));
        params.extend(std::iter::repeat_n(Param::U64, FusedVectorKernel::words(self.inputs.len(), self.scalars)));
        let (kernel, _) = load_on("cuda_fused", &self.vector.source, &self.vector.name, self.ordinal, params)?;
        // A racing thread may have loaded it too: both are the same kernel.
        Ok(self.vector_kernel.get_or_init(|| kernel))
    }

    /// The loaded kernel (name, device, signature).
    pub fn kernel(&self) -> &CudaKernel {
        &self.kernel
    }

    /// What its launches are checked against.
    fn signature(&self) -> Signature<'_> {
        Signature {
            name: self.kernel.name(),
            inputs: &self.inputs,
            outputs: &self.outputs,
            scalars: self.scalars,
            rank: self.rank,
        }
    }

    /// Computes every element of `shape` into the contiguous `outputs`, reading each input
    /// through its view, with the run-time `scalars`: by the vector variant when
    /// [`fused_vector_launch`] accepts the operands, else by the strided kernel. Errors (op
    /// `cuda_fused`, nothing launched) when the counts of inputs, outputs, dims, strides or scalars differ from the
    /// kernel's, a view reaches outside its buffer, an output holds fewer elements than
    /// `shape`, or a buffer is on another device.
    pub fn run(
        &self,
        inputs: &[(&CudaBuffer, FusedOperand<'_>)],
        outputs: &mut [&mut CudaBuffer],
        shape: &[usize],
        scalars: &[f64],
    ) -> Result<(), CudaError> {
        let n = kiln_runtime::layout::numel(shape);
        check_launch(&self.signature(), inputs, outputs, scalars, shape, |_| n)?;
        if n == 0 {
            return Ok(());
        }
        let vector_inputs: Vec<(DType, u64, FusedOperand<'_>)> =
            inputs.iter().zip(&self.inputs).map(|((b, v), &d)| (d, b.device_ptr(), *v)).collect();
        let vector_outputs: Vec<(DType, u64)> =
            outputs.iter().zip(&self.outputs).map(|(b, &d)| (d, b.device_ptr())).collect();
        if let Some(broadcast) = fused_vector_launch(shape, &vector_inputs, &vector_outputs) {
            return self.run_vector(inputs, outputs, n, &broadcast, scalars);
        }
        let mut words: Vec<u64> = vec![n as u64];
        words.extend(operand_words(inputs, shape, scalars));
        let grid = n.div_ceil(ELEMENTWISE_BLOCK as usize).min(self.max_grid as usize) as u32;
        let mut args: Vec<KernelArg<'_>> = inputs.iter().map(|(b, _)| KernelArg::In(b)).collect();
        args.extend(outputs.iter_mut().map(|b| KernelArg::Out(b)));
        args.extend(words.into_iter().map(KernelArg::U64));
        launch_as("cuda_fused", &self.kernel, grid, ELEMENTWISE_BLOCK, &mut args)
    }

    /// Launches the vector variant over `n` elements (checked by `run`), `broadcast` saying
    /// which inputs are one value.
    fn run_vector(
        &self,
        inputs: &[(&CudaBuffer, FusedOperand<'_>)],
        outputs: &mut [&mut CudaBuffer],
        n: usize,
        broadcast: &[bool],
        scalars: &[f64],
    ) -> Result<(), CudaError> {
        let kernel = self.vector_kernel()?;
        let width = self.vector.width;
        let work = (n / width).max(n % width).max(1);
        let grid = work.div_ceil(ELEMENTWISE_BLOCK as usize).min(self.max_grid as usize) as u32;
        let mut words: Vec<u64> = vec![n as u64];
        for ((_, v), &b) in inputs.iter().zip(broadcast) {
            words.extend([v.offset as u64, b as u64]);
        }
        words.extend(scalars.iter().map(|s| s.to_bits()));
        let mut args: Vec<KernelArg<'_>> = inputs.iter().map(|(b, _)| KernelArg::In(b)).collect();
        args.extend(outputs.iter_mut().map(|b| KernelArg::Out(b)));
        args.extend(words.into_iter().map(KernelArg::U64));
        launch_as("cuda_fused", kernel, grid, ELEMENTWISE_BLOCK, &mut args)
    }
}

#[cfg(test)]
mod tests {
    use super::FusedOperand;

    #[test]
    fn operand_ranges_follow_signed_strides() {
        let v = FusedOperand { offset: 5, strides: &[-2, 1] };
        assert_eq!(v.range(&[3, 4]), Some((1, 9)));
        assert_eq!(FusedOperand { offset: 3, strides: &[-2, 1] }.range(&[3, 4]), None);
        assert_eq!(FusedOperand { offset: 0, strides: &[0, 0] }.range(&[7, 9]), Some((0, 1)));
        assert_eq!(FusedOperand { offset: 9, strides: &[4, 1] }.range(&[0, 4]), Some((0, 0)));
    }
}
