//! Finding the driver and the devices; one context and one stream per device.
//!
//! Nothing here links libcuda: cudarc opens it at run time, and cudarc *panics* when it is
//! missing, so every entry point first asks [`cudarc::driver::sys::is_culib_present`] and turns
//! absence into `false` / `0` / an error. The answers are computed once and cached.

use super::alloc::DeviceAllocator;
use super::error::{driver_message, CudaError, CudaErrorKind, Result};
use cudarc::driver::{CudaContext, CudaStream};
use std::sync::{Arc, Mutex, OnceLock};

/// What this process found when it looked for CUDA, once.
struct Availability {
    count: usize,
    /// Why there are no devices (driver missing, `cuInit` failed), for error messages.
    reason: Option<String>,
}

fn availability() -> &'static Availability {
    static AVAIL: OnceLock<Availability> = OnceLock::new();
    AVAIL.get_or_init(|| {
        // SAFETY: `is_culib_present` only tries to dlopen the driver library by its usual names.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Availability { count: 0, reason: Some("the CUDA driver library (libcuda) was not found".into()) };
        }
        // A driver too old for a symbol cudarc wants panics inside cudarc: contain it.
        match std::panic::catch_unwind(CudaContext::device_count) {
            Ok(Ok(n)) if n > 0 => Availability { count: n as usize, reason: None },
            Ok(Ok(_)) => Availability { count: 0, reason: Some("the CUDA driver reports no devices".into()) },
            Ok(Err(e)) => Availability { count: 0, reason: Some(format!("cuInit failed: {}", driver_message(e))) },
            Err(_) => Availability { count: 0, reason: Some("the CUDA driver library could not be used".into()) },
        }
    })
}

/// Whether at least one CUDA device can be used (driver found, `cuInit` succeeded).
pub fn is_available() -> bool {
    availability().count > 0
}

/// The number of usable CUDA devices (0 without a driver).
pub fn device_count() -> usize {
    availability().count
}

/// One CUDA device as kiln uses it: its primary context, the one stream every kiln operation on
/// the device is queued on, its caching allocator and its loaded kernels.
///
/// Created on first use by [`device`] and kept for the life of the process.
pub struct CudaDevice {
    ordinal: usize,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    name: String,
    arch: u32,
    sm_count: u32,
    pub(crate) alloc: Mutex<DeviceAllocator>,
    pub(crate) functions: Mutex<ahash::AHashMap<String, cudarc::driver::CudaFunction>>,
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaDevice(cuda:{}, {}, sm_{})", self.ordinal, self.name, self.arch)
    }
}

impl CudaDevice {
    /// The device's ordinal (`i` in `cuda:i`).
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// The device's name as the driver reports it (e.g. "NVIDIA H200").
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The compute capability as one number: 90 for sm_90, 86 for sm_86.
    pub fn arch(&self) -> u32 {
        self.arch
    }

    /// The number of streaming multiprocessors (used to size grid-stride launches).
    pub fn sm_count(&self) -> u32 {
        self.sm_count
    }

    /// cudarc's context (for calls kiln does not wrap yet, such as cuBLAS handles).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The device's stream: every kiln copy and launch on this device is queued on it, in order.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Makes this device's context current on the calling thread (cheap when it already is).
    pub(crate) fn bind(&self, op: &'static str) -> Result<()> {
        self.ctx.bind_to_thread().map_err(|e| CudaError::driver(op, "binding the CUDA context", e))
    }

    /// Waits until all work queued on this device's stream has finished, reporting any
    /// asynchronous error (a kernel fault) it raised.
    pub fn synchronize(&self) -> Result<()> {
        self.bind("synchronize")?;
        self.stream.synchronize().map_err(|e| CudaError::driver("synchronize", &format!("cuda:{}", self.ordinal), e))
    }

    fn open(ordinal: usize) -> Result<CudaDevice> {
        let op = "cuda_device";
        let ctx = std::panic::catch_unwind(|| CudaContext::new(ordinal))
            .map_err(|_| {
                CudaError::new(
                    op,
                    CudaErrorKind::NoDevice,
                    format!("cuda:{ordinal}: the driver library could not be used"),
                )
            })?
            .map_err(|e| CudaError::driver(op, &format!("creating the context of cuda:{ordinal}"), e))?;
        let stream = ctx.new_stream().map_err(|e| CudaError::driver(op, "creating a stream", e))?;
        let name = ctx.name().unwrap_or_else(|_| "unknown".into());
        let (major, minor) =
            ctx.compute_capability().map_err(|e| CudaError::driver(op, "reading the compute capability", e))?;
        let sm_count = ctx
            .attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(|e| CudaError::driver(op, "reading the SM count", e))?;
        Ok(CudaDevice {
            ordinal,
            ctx,
            stream,
            name,
            arch: (major * 10 + minor) as u32,
            sm_count: sm_count.max(1) as u32,
            alloc: Mutex::new(DeviceAllocator::default()),
            functions: Mutex::new(ahash::AHashMap::new()),
        })
    }
}

/// The error every CUDA entry point returns without a usable device: names `op`, the device
/// asked for, and why none is available.
pub fn no_device(op: &'static str, ordinal: usize) -> CudaError {
    let avail = availability();
    let why = match &avail.reason {
        Some(r) => r.clone(),
        None => format!("only {} device(s) present", avail.count),
    };
    CudaError::new(op, CudaErrorKind::NoDevice, format!("no CUDA device available (cuda:{ordinal} requested; {why})"))
}

/// The device `cuda:ordinal`, created on first use (context, stream), or an error naming `op`
/// when there is no such device.
pub fn device(op: &'static str, ordinal: usize) -> Result<Arc<CudaDevice>> {
    static DEVICES: OnceLock<Vec<OnceLock<Result<Arc<CudaDevice>>>>> = OnceLock::new();
    let count = device_count();
    if ordinal >= count {
        return Err(no_device(op, ordinal));
    }
    let slots = DEVICES.get_or_init(|| (0..count).map(|_| OnceLock::new()).collect());
    slots[ordinal].get_or_init(|| CudaDevice::open(ordinal).map(Arc::new)).clone().map_err(|mut e| {
        e.op = op;
        e
    })
}

/// Waits for all queued work on `cuda:ordinal` (PyTorch's `torch.cuda.synchronize`).
pub fn synchronize(ordinal: usize) -> Result<()> {
    device("synchronize", ordinal)?.synchronize()
}
