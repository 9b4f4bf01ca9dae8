//! `autocast` (`torch.autocast`): inside a region, the ops that run well in a lower-precision
//! float type (matrix products, convolutions, attention) cast their float operands to it, the
//! ops that need the range or precision of f32 (losses, `trace`, reflection pads, …) cast theirs
//! to f32; every other op runs on what it is given (ops that combine tensors, `cat` or `add`,
//! promote to the widest of them, as outside a region). The op lists are PyTorch's
//! (`aten/src/ATen/autocast_mode.{h,cpp}`), one per device type ([`policy`]); the CPU choices
//! are checked against `torch.autocast("cpu")`'s in `tests/autocast.rs`.
//!
//! ```
//! use kiln::prelude::*;
//! let net = nn::Linear::new(4, 2);
//! let x = Tensor::randn([8, 4]);
//! let (y, loss) = kiln::autocast("cpu", DType::BF16, || {
//!     let y = net.forward(&x); // bf16: x, the weight and the bias cast, the product in bf16
//!     let loss = F::mse_loss(&y, &Tensor::zeros([8, 2])); // f32: losses run in f32
//!     (y, loss)
//! });
//! assert_eq!((y.dtype(), loss.dtype()), (DType::BF16, DType::F32));
//! loss.backward(); // the weight's gradient is f32, through the recorded casts
//! assert_eq!(net.weight.grad().unwrap().dtype(), DType::F32);
//! ```
//!
//! What PyTorch does and kiln does too: f64 tensors are never cast; a cast is an ordinary op,
//! so autograd differentiates through it (backward runs in the dtypes forward chose) and
//! `kiln::compile` captures it as a node that fusion absorbs; the lower-precision casts of f32
//! leaves that require grad (a model's weights) are cached until the outermost region ends; an
//! op on the lists runs its own body with autocast off (a loss's inner products stay f32).
//! What differs: PyTorch's `cat`/`stack` of a bf16 tensor inside an f16 region is an error
//! ("Unexpected floating ScalarType in at::autocast::prioritize"); kiln promotes as outside a
//! region (kiln's own layers call `cat` inside, where that error would be no help).
//! What kiln adds: a cached cast is made again when its source was written in place since
//! (its version moved), so a region around a whole training step cannot read stale weights;
//! and the autograd engine runs backward rules with autocast off, wherever `backward` is called.

use crate::error::{Error, ErrorKind, OrPanic, Result};
use crate::tensor::Tensor;
use crate::Device;
use kiln_runtime::DType;
use std::cell::{Cell, RefCell};

/// How an op listed for autocast treats its float operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Cast to the region's dtype (bf16 or f16): products, convolutions, attention.
    LowerPrecision,
    /// Cast to f32: losses, `trace`, `quantile`, pads that reflect or replicate, …
    F32,
}

/// The ops of each policy on the CPU: `torch.autocast("cpu")`'s lists (`KERNEL_CPU` in
/// `aten/src/ATen/autocast_mode.cpp`) for the ops kiln has. PyTorch's "promote" list (`cat`,
/// `stack`) needs no entry: kiln's own type promotion gives those ops the widest input type.
const CPU: &[(&str, Policy)] = &[
    ("conv1d", Policy::LowerPrecision),
    ("conv2d", Policy::LowerPrecision),
    ("conv3d", Policy::LowerPrecision),
    ("conv_transpose1d", Policy::LowerPrecision),
    ("conv_transpose2d", Policy::LowerPrecision),
    ("bmm", Policy::LowerPrecision),
    ("mm", Policy::LowerPrecision),
    ("baddbmm", Policy::LowerPrecision),
    ("addmm", Policy::LowerPrecision),
    ("linear", Policy::LowerPrecision),
    ("matmul", Policy::LowerPrecision),
    ("prelu", Policy::LowerPrecision),
    ("scaled_dot_product_attention", Policy::LowerPrecision),
    ("prod", Policy::F32),
    ("quantile", Policy::F32),
    ("trace", Policy::F32),
    ("max_pool3d", Policy::F32),
    ("pad_reflect", Policy::F32),
    ("pad_replicate", Policy::F32),
    ("mse_loss", Policy::F32),
    ("nll_loss", Policy::F32),
    ("smooth_l1_loss", Policy::F32),
    ("cross_entropy", Policy::F32),
    ("l1_loss", Policy::F32),
    ("kl_div", Policy::F32),
    ("binary_cross_entropy", Policy::F32),
    ("binary_cross_entropy_with_logits", Policy::F32),
];

/// The ops of each policy on CUDA: `torch.autocast("cuda")`'s lists
/// (`AT_FORALL_LOWER_PRECISION_FP` and `AT_FORALL_FP32` in `aten/src/ATen/autocast_mode.h`) for
/// the ops kiln hooks. PyTorch's "set opt dtype" ops (`sum`, `prod`, `softmax`,
/// `log_softmax`, `cumsum`, `cumprod`, the vector norm, which it runs with `dtype=f32` when an
/// operand is of the region's dtype) are F32 here: the same numbers. Not hooked yet:
/// `cosine_similarity` and the upsampling ops (`F::interpolate`); the listed ops kiln lacks
/// (`erfinv`, `log10`, the distance ops, `renorm`) have no row.
/// `einsum` is lowered to `bmm`, which is on the list; the promote list (`addcmul`, `atan2`,
/// `dot`, …) is kiln's own type promotion.
const CUDA: &[(&str, Policy)] = &[
    ("conv1d", Policy::LowerPrecision),
    ("conv2d", Policy::LowerPrecision),
    ("conv3d", Policy::LowerPrecision),
    ("conv_transpose1d", Policy::LowerPrecision),
    ("conv_transpose2d", Policy::LowerPrecision),
    ("prelu", Policy::LowerPrecision),
    ("addmm", Policy::LowerPrecision),
    ("matmul", Policy::LowerPrecision),
    ("mm", Policy::LowerPrecision),
    ("linear", Policy::LowerPrecision),
    ("baddbmm", Policy::LowerPrecision),
    ("bmm", Policy::LowerPrecision),
    ("scaled_dot_product_attention", Policy::LowerPrecision),
    ("mse_loss", Policy::F32),
    ("nll_loss", Policy::F32),
    ("kl_div", Policy::F32),
    ("l1_loss", Policy::F32),
    ("smooth_l1_loss", Policy::F32),
    ("binary_cross_entropy_with_logits", Policy::F32),
    ("cross_entropy", Policy::F32),
    ("sum", Policy::F32),
    ("prod", Policy::F32),
    ("softmax", Policy::F32),
    ("log_softmax", Policy::F32),
    ("layer_norm", Policy::F32),
    ("acos", Policy::F32),
    ("asin", Policy::F32),
    ("cosh", Policy::F32),
    ("exp", Policy::F32),
    ("expm1", Policy::F32),
    ("log", Policy::F32),
    ("log2", Policy::F32),
    ("log1p", Policy::F32),
    ("reciprocal", Policy::F32),
    ("rsqrt", Policy::F32),
    ("sinh", Policy::F32),
    ("tan", Policy::F32),
    ("pow", Policy::F32),
    ("softplus", Policy::F32),
    ("group_norm", Policy::F32),
    ("norm", Policy::F32),
    ("cumsum", Policy::F32),
    ("cumprod", Policy::F32),
    ("logsumexp", Policy::F32),
];

/// How op `op` is treated on `device`'s autocast (`None`: not listed, it runs as given).
pub fn policy(op: &str, device: Device) -> Option<Policy> {
    let table = if device.is_cuda() { CUDA } else { CPU };
    table.iter().find(|(name, _)| *name == op).map(|&(_, p)| p)
}

/// One device type's autocast setting.
#[derive(Clone, Copy, Debug)]
struct Setting {
    enabled: bool,
    dtype: DType,
}

/// This thread's autocast state.
struct State {
    cpu: Setting,
    cuda: Setting,
    cache_enabled: bool,
    /// How many regions are open (the cache is cleared when the outermost one ends).
    nesting: usize,
    /// Nonzero while an op of the lists runs its body, or autograd runs backward rules.
    suspended: u32,
    /// Cached lower-precision casts: (source, its version when cast, the cast).
    cache: Vec<(Tensor, u64, Tensor)>,
}

thread_local! {
    static STATE: RefCell<State> = const {
        RefCell::new(State {
            cpu: Setting { enabled: false, dtype: DType::BF16 },
            cuda: Setting { enabled: false, dtype: DType::F16 },
            cache_enabled: true,
            nesting: 0,
            suspended: 0,
            cache: Vec::new(),
        })
    };
    /// Whether any device's autocast is on and not suspended: the one read an op pays when
    /// autocast is off.
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
}

/// This thread's autocast setting for `device`'s type.
fn setting(device: Device) -> Setting {
    STATE.with(|s| {
        let s = s.borrow();
        if device.is_cuda() {
            s.cuda
        } else {
            s.cpu
        }
    })
}

/// Recomputes [`ACTIVE`] from the state.
fn refresh(s: &State) {
    ACTIVE.with(|a| a.set((s.cpu.enabled || s.cuda.enabled) && s.suspended == 0));
}

/// The device type a `device_type` string names ("cpu" or "cuda", PyTorch's spellings).
#[track_caller]
fn device_of(device_type: &str) -> Result<Device> {
    match device_type {
        "cpu" => Ok(Device::Cpu),
        "cuda" => Ok(Device::Cuda(0)),
        other => Err(Error::new(
            "autocast",
            ErrorKind::Value,
            format!("device_type must be \"cpu\" or \"cuda\", got {other:?}"),
        )),
    }
}

/// The options of an autocast region beyond its device type (`torch.autocast(device_type,
/// dtype=None, enabled=True, cache_enabled=None)`).
#[derive(Clone, Copy, Debug)]
pub struct AutocastOptions {
    /// The lower-precision dtype (bf16 or f16); `None`: the device type's default (bf16 on
    /// the CPU, f16 on CUDA).
    pub dtype: Option<DType>,
    /// Whether autocast is on inside the region (`false` turns it off for a sub-region).
    pub enabled: bool,
    /// Whether casts of weights are cached within the region; `None` keeps the enclosing
    /// setting (on by default).
    pub cache_enabled: Option<bool>,
}

impl Default for AutocastOptions {
    fn default() -> Self {
        AutocastOptions { dtype: None, enabled: true, cache_enabled: None }
    }
}

/// Restores the autocast setting it was made with when dropped (and clears the cast cache
/// when it closes the outermost region).
#[must_use = "autocast ends when the guard is dropped"]
pub struct AutocastGuard {
    device: Device,
    previous: Setting,
    previous_cache: bool,
    // Autocast is per thread: the guard must be dropped on the thread that made it.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for AutocastGuard {
    fn drop(&mut self) {
        STATE.with(|s| {
            let mut s = s.borrow_mut();
            if self.device.is_cuda() {
                s.cuda = self.previous;
            } else {
                s.cpu = self.previous;
            }
            s.cache_enabled = self.previous_cache;
            s.nesting -= 1;
            if s.nesting == 0 {
                s.cache.clear();
            }
            refresh(&s);
        });
    }
}

/// Opens an autocast region for `device_type` ("cpu" or "cuda") with `opts` until the guard is
/// dropped (the guard form of [`autocast_with`]). Errors for an unknown device type or a dtype
/// other than bf16/f16, naming the caller's line.
#[track_caller]
pub fn try_autocast_guard(device_type: &str, opts: AutocastOptions) -> Result<AutocastGuard> {
    let device = device_of(device_type)?;
    let dtype = opts.dtype.unwrap_or(if device.is_cuda() { DType::F16 } else { DType::BF16 });
    if !matches!(dtype, DType::BF16 | DType::F16) {
        return Err(Error::new(
            "autocast",
            ErrorKind::DType,
            format!("autocast's dtype must be bf16 or f16, got {dtype} (device_type {device_type:?})"),
        ));
    }
    Ok(STATE.with(|s| {
        let mut s = s.borrow_mut();
        let slot = if device.is_cuda() { &mut s.cuda } else { &mut s.cpu };
        let previous = std::mem::replace(slot, Setting { enabled: opts.enabled, dtype });
        let previous_cache = s.cache_enabled;
        if let Some(c) = opts.cache_enabled {
            s.cache_enabled = c;
        }
        s.nesting += 1;
        refresh(&s);
        AutocastGuard { device, previous, previous_cache, _not_send: std::marker::PhantomData }
    }))
}

/// Opens an autocast region for `device_type` casting to `dtype` until the guard is dropped
/// (the guard form of [`autocast`]); panics where [`try_autocast_guard`] errs.
#[track_caller]
pub fn autocast_guard(device_type: &str, dtype: DType) -> AutocastGuard {
    try_autocast_guard(device_type, AutocastOptions { dtype: Some(dtype), ..Default::default() }).or_panic()
}

/// Runs `f` in an autocast region for `device_type` ("cpu" or "cuda") casting to `dtype` (bf16
/// or f16), as `with torch.autocast(device_type, dtype):`; the region ends when `f` returns or
/// panics. See the [module docs](self) for what it does.
#[track_caller]
pub fn autocast<R>(device_type: &str, dtype: DType, f: impl FnOnce() -> R) -> R {
    let _guard = autocast_guard(device_type, dtype);
    f()
}

/// [`autocast`] with all of `torch.autocast`'s options (`enabled: false` turns autocast off
/// inside an enclosing region).
#[track_caller]
pub fn autocast_with<R>(device_type: &str, opts: AutocastOptions, f: impl FnOnce() -> R) -> R {
    let _guard = try_autocast_guard(device_type, opts).or_panic();
    f()
}

/// Whether autocast is on for `device_type` on this thread (`torch.is_autocast_enabled`).
#[track_caller]
pub fn is_autocast_enabled(device_type: &str) -> bool {
    setting(device_of(device_type).or_panic()).enabled
}

/// The dtype autocast casts to for `device_type` (`torch.get_autocast_dtype`).
#[track_caller]
pub fn get_autocast_dtype(device_type: &str) -> DType {
    setting(device_of(device_type).or_panic()).dtype
}

/// Turns autocast off on this thread until dropped (an op of the lists running its body; the
/// autograd engine running backward rules).
pub(crate) struct Suspended(std::marker::PhantomData<*const ()>);

impl Drop for Suspended {
    fn drop(&mut self) {
        STATE.with(|s| {
            let mut s = s.borrow_mut();
            s.suspended -= 1;
            refresh(&s);
        });
    }
}

/// Turns autocast off on this thread until the returned value is dropped.
pub(crate) fn suspend() -> Suspended {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        s.suspended += 1;
        refresh(&s);
    });
    Suspended(std::marker::PhantomData)
}

/// An op's operands as autocast gave them, with autocast off until it is dropped: the op runs
/// its body on them (`ops` call themselves again with [`Cast::arg`]s).
pub(crate) struct Cast {
    args: Vec<Option<Tensor>>,
    _off: Suspended,
}

impl Cast {
    /// Operand `i` (present: it was given).
    pub(crate) fn arg(&self, i: usize) -> &Tensor {
        self.args[i].as_ref().expect("the operand was given")
    }

    /// Operand `i` if it was given.
    pub(crate) fn opt(&self, i: usize) -> Option<&Tensor> {
        self.args[i].as_ref()
    }
}

/// Whether autocast may cast `t`: a float tensor other than f64 (PyTorch's `is_eligible` and
/// its `!= kDouble` rule).
fn eligible(t: &Tensor) -> bool {
    t.dtype().is_float() && t.dtype() != DType::F64
}

/// Autocast's operands for op `op` (`None` for an absent optional operand): `None` when
/// autocast leaves the op alone on this thread (off, suspended, or `op` not on the list of the
/// first operand's device); otherwise the operands cast by the op's [`Policy`] and autocast off
/// while the returned value lives. Errors (a cast that fails) name the caller's line.
#[track_caller]
pub(crate) fn operands(op: &'static str, args: &[Option<&Tensor>]) -> Result<Option<Cast>> {
    if !ACTIVE.with(Cell::get) {
        return Ok(None);
    }
    let Some(first) = args.iter().flatten().next() else { return Ok(None) };
    let device = first.device();
    let setting = setting(device);
    if !setting.enabled {
        return Ok(None);
    }
    let Some(policy) = policy(op, device) else { return Ok(None) };
    let target = match policy {
        Policy::LowerPrecision => setting.dtype,
        Policy::F32 => DType::F32,
    };
    let off = suspend();
    let cast = |t: &Tensor| -> Result<Tensor> {
        if !eligible(t) || t.dtype() == target {
            return Ok(t.clone());
        }
        if policy == Policy::LowerPrecision {
            return cached_cast(t, target);
        }
        t.try_to_dtype(target)
    };
    let args = args.iter().map(|a| a.map(cast).transpose()).collect::<Result<Vec<_>>>()?;
    Ok(Some(Cast { args, _off: off }))
}

/// `t` cast to `dtype`, from the region's cache when `t` is an f32 leaf that requires grad (a
/// weight), made again when `t` was written in place since it was cached.
fn cached_cast(t: &Tensor, dtype: DType) -> Result<Tensor> {
    let cacheable = t.dtype() == DType::F32 && t.requires_grad() && t.is_leaf();
    let use_cache = cacheable && STATE.with(|s| s.borrow().cache_enabled);
    if !use_cache {
        return t.try_to_dtype(dtype);
    }
    let version = t.version();
    let hit = STATE.with(|s| {
        s.borrow()
            .cache
            .iter()
            .find(|(src, v, c)| src.is_same(t) && *v == version && c.dtype() == dtype)
            .map(|(_, _, c)| c.clone())
    });
    if let Some(c) = hit {
        return Ok(c);
    }
    let c = t.try_to_dtype(dtype)?;
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        s.cache.retain(|(src, _, cast)| !(src.is_same(t) && cast.dtype() == dtype));
        s.cache.push((t.clone(), version, c.clone()));
    });
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_nest_restore_and_clear_the_cache() {
        assert!(!is_autocast_enabled("cpu"));
        autocast("cpu", DType::BF16, || {
            assert!(is_autocast_enabled("cpu") && !is_autocast_enabled("cuda"));
            autocast_with("cpu", AutocastOptions { enabled: false, ..Default::default() }, || {
                assert!(!is_autocast_enabled("cpu"));
            });
            autocast("cpu", DType::F16, || assert_eq!(get_autocast_dtype("cpu"), DType::F16));
            assert_eq!(get_autocast_dtype("cpu"), DType::BF16);
            let w = Tensor::ones([2, 2]).requires_grad_(true);
            let (a, b) = (cached_cast(&w, DType::BF16).unwrap(), cached_cast(&w, DType::BF16).unwrap());
            assert!(a.is_same(&b), "one cast per weight per region");
            crate::no_grad(|| w.fill_(2.0));
            let c = cached_cast(&w, DType::BF16).unwrap();
            assert!(!c.is_same(&a), "a weight written in place is cast again");
            assert_eq!(c.to_dtype(DType::F32).to_vec::<f32>(), vec![2.0; 4]);
        });
        assert!(!is_autocast_enabled("cpu"));
        assert!(STATE.with(|s| s.borrow().cache.is_empty()), "the outermost region cleared the cache");
        let unwound = std::panic::catch_unwind(|| autocast("cpu", DType::BF16, || panic!("inside")));
        assert!(unwound.is_err() && !is_autocast_enabled("cpu"), "a panic ends the region");
    }

    /// Samples of PyTorch's lists: the CPU's and CUDA's differ (elementwise ops, softmax and
    /// layer norm run as given on the CPU and in f32 on CUDA).
    #[test]
    fn each_device_has_pytorchs_lists() {
        let cuda = Device::Cuda(0);
        for op in ["matmul", "linear", "conv2d", "scaled_dot_product_attention"] {
            assert_eq!(
                (policy(op, Device::Cpu), policy(op, cuda)),
                (Some(Policy::LowerPrecision), Some(Policy::LowerPrecision)),
                "{op}"
            );
        }
        for op in ["mse_loss", "cross_entropy", "nll_loss", "prod"] {
            assert_eq!((policy(op, Device::Cpu), policy(op, cuda)), (Some(Policy::F32), Some(Policy::F32)), "{op}");
        }
        for op in ["exp", "log", "softmax", "log_softmax", "layer_norm", "sum", "pow", "group_norm", "cumsum", "norm"] {
            assert_eq!((policy(op, Device::Cpu), policy(op, cuda)), (None, Some(Policy::F32)), "{op}");
        }
        for op in ["trace", "quantile", "max_pool3d", "pad_reflect"] {
            assert_eq!((policy(op, Device::Cpu), policy(op, cuda)), (Some(Policy::F32), None), "{op}");
        }
        assert_eq!((policy("relu", Device::Cpu), policy("relu", cuda)), (None, None));
    }

    #[test]
    fn bad_arguments_are_errors() {
        let e = try_autocast_guard("tpu", AutocastOptions::default()).err().expect("an error");
        assert!(e.to_string().contains("device_type must be \"cpu\" or \"cuda\""), "{e}");
        let e = try_autocast_guard("cpu", AutocastOptions { dtype: Some(DType::F64), ..Default::default() })
            .err()
            .expect("an error");
        assert!(e.to_string().contains("must be bf16 or f16, got float64"), "{e}");
    }
}
