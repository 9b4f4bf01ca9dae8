//! Checked launches of the pooling kernels ([`super::pool`]) on device buffers.

use super::emit::ELEMENTWISE_BLOCK;
use super::launch::{launch_as, load_on};
use super::pool::{PoolKernel, PoolKind, POOL_GEOMETRY_WORDS};
use kiln_runtime::cpu::pool::{AvgMode, PoolGeom};
use kiln_runtime::cuda::{CudaBuffer, CudaError, CudaErrorKind, KernelArg, Param};
use kiln_runtime::DType;

/// A [`PoolKernel`] compiled for, and loaded on, one device.
#[derive(Clone, Debug)]
pub struct LoadedPool {
    kernel: kiln_runtime::cuda::CudaKernel,
    kind: PoolKind,
    dtype: DType,
    max_grid: u32,
}

/// The geometry words of a launch, in [`POOL_GEOMETRY_WORDS`]'s order.
fn geometry_words(g: &PoolGeom, mode: AvgMode) -> [u64; POOL_GEOMETRY_WORDS.len()] {
    let w = |v: usize| v as u64;
    [
        w(g.h),
        w(g.w),
        w(g.oh),
        w(g.ow),
        w(g.kernel[0]),
        w(g.kernel[1]),
        w(g.stride[0]),
        w(g.stride[1]),
        w(g.pad[0]),
        w(g.pad[1]),
        w(g.dilation[0]),
        w(g.dilation[1]),
        u64::from(mode.count_include_pad),
        w(mode.divisor_override.unwrap_or(0)),
    ]
}

impl LoadedPool {
    /// Compiles `k` for `cuda:ordinal`'s arch (through the kernel cache) and loads it there.
    pub fn load(k: &PoolKernel, ordinal: usize) -> Result<LoadedPool, CudaError> {
        let mut params: Vec<Param> =
            k.kind.buffers().iter().map(|&(_, _, written)| if written { Param::Out } else { Param::In }).collect();
        params.extend(std::iter::repeat_n(Param::U64, 1 + POOL_GEOMETRY_WORDS.len()));
        let (kernel, max_grid) = load_on("cuda_pool", &k.source, &k.name, ordinal, params)?;
        Ok(LoadedPool { kernel, kind: k.kind, dtype: k.dtype, max_grid })
    }

    /// The loaded kernel (name, device, signature).
    pub fn kernel(&self) -> &kiln_runtime::cuda::CudaKernel {
        &self.kernel
    }

    /// Runs the kernel over contiguous planes of geometry `g` (`mode` is read by the average
    /// kernels): `inputs` and `outputs` are the kernel's buffers in [`PoolKind::buffers`]'s
    /// order, split into those it reads and those it writes. Errors (op `cuda_pool`, nothing
    /// launched) when the buffer counts differ from the kernel's, a buffer holds fewer elements
    /// than the geometry needs, or the window has a zero size, stride or dilation.
    pub fn run(
        &self,
        g: &PoolGeom,
        mode: AvgMode,
        inputs: &[&CudaBuffer],
        outputs: &mut [&mut CudaBuffer],
    ) -> Result<(), CudaError> {
        let bad = |m: String| {
            Err(CudaError::new("cuda_pool", CudaErrorKind::InvalidArgument, format!("{}: {m}", self.kernel.name())))
        };
        let spec = self.kind.buffers();
        let reads: Vec<_> = spec.iter().filter(|b| !b.2).collect();
        let writes: Vec<_> = spec.iter().filter(|b| b.2).collect();
        if inputs.len() != reads.len() || outputs.len() != writes.len() {
            return bad(format!(
                "takes {} input and {} output buffer(s), {} and {} given",
                reads.len(),
                writes.len(),
                inputs.len(),
                outputs.len()
            ));
        }
        if [g.kernel, g.stride, g.dilation].iter().any(|p| p.contains(&0)) {
            return bad(format!("a zero window, stride or dilation in {g:?}"));
        }
        let (in_len, out_len) = (g.planes * g.h * g.w, g.planes * g.oh * g.ow);
        // Buffers of the input's shape are `x` and `gx`; the rest (`y`, `idx`, `gy`) have the
        // output's.
        let needs = |name: &str, is_index: bool| {
            let elems = if matches!(name, "x" | "gx") { in_len } else { out_len };
            elems * if is_index { 8 } else { self.dtype.size_in_bytes() }
        };
        let sized =
            reads.iter().zip(inputs.iter().map(|b| &**b)).chain(writes.iter().zip(outputs.iter().map(|b| &**b)));
        for (&&(name, is_index, _), buf) in sized {
            if buf.len_bytes() < needs(name, is_index) {
                return bad(format!("{name} holds {} bytes, {g:?} needs {}", buf.len_bytes(), needs(name, is_index)));
            }
        }
        let n = if self.kind.writes_input_shape() { in_len } else { out_len };
        if n == 0 {
            return Ok(());
        }
        // Arguments in the kernel's order: each buffer where its spec puts it.
        let (mut ins, mut outs) = (inputs.iter(), outputs.iter_mut());
        let mut args: Vec<KernelArg<'_>> = spec
            .iter()
            .map(|&(_, _, written)| {
                if written {
                    KernelArg::Out(outs.next().expect("counted"))
                } else {
                    KernelArg::In(ins.next().expect("counted"))
                }
            })
            .collect();
        args.push(KernelArg::U64(n as u64));
        args.extend(geometry_words(g, mode).map(KernelArg::U64));
        let grid = n.div_ceil(ELEMENTWISE_BLOCK as usize).min(self.max_grid as usize) as u32;
        launch_as("cuda_pool", &self.kernel, grid, ELEMENTWISE_BLOCK, &mut args)
    }
}
