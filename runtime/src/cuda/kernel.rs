//! Loading compiled kernels onto a device and launching them on its stream.
//!
//! [`CudaKernel::launch`] checks the arguments against the kernel's declared signature (count,
//! kind, device) before anything reaches the driver, so a mismatched launch is an `Err`, not a
//! fault. With `KILN_CUDA_SYNC=1` (or [`set_launch_blocking`]) every launch waits for the kernel
//! and reports its fault at once, naming it (PyTorch's `CUDA_LAUNCH_BLOCKING=1`).

use super::buffer::CudaBuffer;
use super::compile::Compiled;
use super::context::{device, CudaDevice};
use super::error::{driver_message, CudaError, CudaErrorKind, Result};
use cudarc::driver::{LaunchConfig, PushKernelArg};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// 0: not read yet, 1: asynchronous, 2: blocking.
static BLOCKING: AtomicU8 = AtomicU8::new(0);

/// Whether launches are synchronous: `KILN_CUDA_SYNC=1` at the first launch, unless
/// [`set_launch_blocking`] said otherwise.
pub fn launch_blocking() -> bool {
    match BLOCKING.load(Ordering::Relaxed) {
        0 => {
            let on = sync_env_value(std::env::var("KILN_CUDA_SYNC").ok().as_deref());
            BLOCKING.store(if on { 2 } else { 1 }, Ordering::Relaxed);
            on
        }
        v => v == 2,
    }
}

/// Whether a value of `KILN_CUDA_SYNC` turns blocking launches on: `1` or `true` (any case).
pub fn sync_env_value(v: Option<&str>) -> bool {
    matches!(v.map(str::trim), Some(v) if v == "1" || v.eq_ignore_ascii_case("true"))
}

/// Makes every launch synchronous (`true`) or asynchronous (`false`), overriding `KILN_CUDA_SYNC`.
pub fn set_launch_blocking(on: bool) {
    BLOCKING.store(if on { 2 } else { 1 }, Ordering::Relaxed);
}

/// One parameter of a kernel's signature, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param {
    /// A device pointer the kernel reads.
    In,
    /// A device pointer the kernel writes.
    Out,
    /// A 64-bit unsigned integer (`unsigned long long`).
    U64,
}

/// An argument of a launch, matching a [`Param`].
#[derive(Debug)]
pub enum KernelArg<'a> {
    /// A buffer read by the kernel.
    In(&'a CudaBuffer),
    /// A buffer written by the kernel.
    Out(&'a mut CudaBuffer),
    /// A 64-bit unsigned integer.
    U64(u64),
}

/// Grid and block sizes of a launch (one-dimensional).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchDims {
    /// Blocks in the grid.
    pub grid: u32,
    /// Threads per block.
    pub block: u32,
    /// Dynamic shared memory per block, in bytes.
    pub shared_bytes: u32,
}

/// A kernel loaded on one device, with its signature.
#[derive(Clone, Debug)]
pub struct CudaKernel {
    dev: Arc<CudaDevice>,
    func: cudarc::driver::CudaFunction,
    name: String,
    params: Vec<Param>,
}

impl CudaKernel {
    /// Loads `compiled` (its CUBIN) on `cuda:ordinal`; a kernel already loaded there is reused.
    /// `params` is the kernel's signature, checked at every [`launch`](Self::launch).
    pub fn load(ordinal: usize, compiled: &Compiled, params: Vec<Param>) -> Result<CudaKernel> {
        let op = "cuda_load_kernel";
        let dev = device(op, ordinal)?;
        if compiled.arch != dev.arch() {
            return Err(CudaError::new(
                op,
                CudaErrorKind::InvalidArgument,
                format!(
                    "{} was compiled for sm_{}, cuda:{ordinal} is sm_{}",
                    compiled.kernel_name,
                    compiled.arch,
                    dev.arch()
                ),
            ));
        }
        let cached = dev.functions.lock().unwrap_or_else(|e| e.into_inner()).get(&compiled.key).cloned();
        let func = match cached {
            Some(f) => f,
            None => {
                dev.bind(op)?;
                let module = dev
                    .context()
                    .load_module(cudarc::nvrtc::Ptx::from_binary(compiled.cubin.clone()))
                    .map_err(|e| CudaError::driver(op, &format!("loading {}", compiled.kernel_name), e))?;
                let f = module
                    .load_function(&compiled.kernel_name)
                    .map_err(|e| CudaError::driver(op, &format!("finding {}", compiled.kernel_name), e))?;
                dev.functions.lock().unwrap_or_else(|e| e.into_inner()).insert(compiled.key.clone(), f.clone());
                f
            }
        };
        Ok(CudaKernel { dev, func, name: compiled.kernel_name.clone(), params })
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The device the kernel is loaded on.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.dev
    }

    /// The kernel's signature.
    pub fn params(&self) -> &[Param] {
        &self.params
    }

    /// Queues the kernel on its device's stream with `args`, after checking them against the
    /// signature: the count, each kind, and that every buffer lives on the kernel's device.
    /// Buffer sizes are the caller's to check (it knows what the kernel indexes).
    pub fn launch(&self, dims: LaunchDims, args: &mut [KernelArg<'_>]) -> Result<()> {
        let op = "cuda_launch";
        if args.len() != self.params.len() {
            return Err(CudaError::new(
                op,
                CudaErrorKind::InvalidArgument,
                format!(
                    "{} takes {} arguments ({:?}), {} given",
                    self.name,
                    self.params.len(),
                    self.params,
                    args.len()
                ),
            ));
        }
        let mut words = Vec::with_capacity(args.len());
        for (i, (arg, param)) in args.iter().zip(&self.params).enumerate() {
            let word = match (arg, param) {
                (KernelArg::In(b), Param::In) => self.check_device(b, i)?,
                (KernelArg::Out(b), Param::Out) => self.check_device(b, i)?,
                (KernelArg::U64(v), Param::U64) => *v,
                (a, p) => {
                    let kind = match a {
                        KernelArg::In(_) => "In",
                        KernelArg::Out(_) => "Out",
                        KernelArg::U64(_) => "U64",
                    };
                    return Err(CudaError::new(
                        op,
                        CudaErrorKind::InvalidArgument,
                        format!("{}: argument {i} is {kind}, the kernel's parameter is {p:?}", self.name),
                    ));
                }
            };
            words.push(word);
        }
        // SAFETY: the arguments match the declared signature in number and kind, and every
        // buffer is live on this device for the duration of the call (the caller holds it; a
        // dropped buffer's block is only reused by work queued after this launch).
        unsafe { self.launch_raw(dims, &words) }
    }

    fn check_device(&self, b: &CudaBuffer, i: usize) -> Result<u64> {
        if b.ordinal() != self.dev.ordinal() {
            return Err(CudaError::new(
                "cuda_launch",
                CudaErrorKind::InvalidArgument,
                format!(
                    "{}: argument {i} is on cuda:{}, the kernel on cuda:{}",
                    self.name,
                    b.ordinal(),
                    self.dev.ordinal()
                ),
            ));
        }
        Ok(b.device_ptr())
    }

    /// Queues the kernel with raw 64-bit argument words (device addresses or integers), without
    /// any check. Under [`launch_blocking`] it waits and reports a fault naming the kernel.
    ///
    /// # Safety
    /// The words must match the kernel's parameters (each 8 bytes), and every address must
    /// point to device memory the kernel may access for as long as it runs.
    pub unsafe fn launch_raw(&self, dims: LaunchDims, words: &[u64]) -> Result<()> {
        let op = "cuda_launch";
        if dims.grid == 0 || dims.block == 0 {
            return Err(CudaError::new(
                op,
                CudaErrorKind::InvalidArgument,
                format!("{}: empty launch (grid {}, block {})", self.name, dims.grid, dims.block),
            ));
        }
        self.dev.bind(op)?;
        let stream = self.dev.stream();
        let mut builder = stream.launch_builder(&self.func);
        for w in words {
            builder.arg(w);
        }
        let cfg = LaunchConfig {
            grid_dim: (dims.grid, 1, 1),
            block_dim: (dims.block, 1, 1),
            shared_mem_bytes: dims.shared_bytes,
        };
        // SAFETY: the caller guarantees the words match the kernel's parameters and that every
        // address stays valid device memory while the kernel runs (this function's contract).
        unsafe { builder.launch(cfg) }.map_err(|e| {
            CudaError::new(
                op,
                CudaErrorKind::Launch,
                format!("launching {} on cuda:{}: {}", self.name, self.dev.ordinal(), driver_message(e)),
            )
        })?;
        if launch_blocking() {
            stream.synchronize().map_err(|e| {
                CudaError::new(
                    op,
                    CudaErrorKind::Launch,
                    format!(
                        "{} on cuda:{} failed: {} (seen at once because KILN_CUDA_SYNC=1)",
                        self.name,
                        self.dev.ordinal(),
                        driver_message(e)
                    ),
                )
            })?;
        }
        Ok(())
    }
}
