//! The `Tensor` handle: a cheap-to-clone reference to a strided view of shared storage.
//!
//! Views (transpose, narrow, expand, …) are new handles over the same [`StorageCell`]: a write
//! through one view is seen through every other, as in PyTorch. Each storage carries a version
//! counter that in-place writes bump (autograd checks it against the versions its saved tensors
//! had).

mod convert;
mod create;
mod display;
mod pin;
mod shape_arg;
mod size;
mod view;

pub use convert::SliceGuard;
pub use create::{IntoScalar, NestedArray};
pub use shape_arg::{IntoShape, ShapeDims};
pub use view::{IndexArgs, TensorIndexer};

pub(crate) use convert::{cast, cast_storage};
pub(crate) use create::scalar_as;
pub(crate) use shape_arg::sizes;
pub(crate) use size::{check_shape, reserve};

use crate::autograd::AutogradMeta;
use crate::error::{bail, Result};
use kiln_runtime::cpu::CpuBuf;
use kiln_runtime::storage::StorageElement;
use kiln_runtime::{CpuStorage, DType, Device, Layout, Storage};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};

/// Storage shared by all views of it, with the version counter of in-place writes.
pub struct StorageCell {
    data: RwLock<Storage>,
    version: AtomicU64,
    /// Storages are numbered in the order they are made: a compiled call journals only the
    /// storages older than the call ([`crate::capture`]'s journal).
    serial: u64,
    /// Some view of this storage was made by a view op that recorded autograd history: an
    /// in-place write to the storage under grad mode would leave that view's history stale, so
    /// autograd refuses it.
    tracked_views: AtomicBool,
    /// Capture state (see [`crate::capture`]): which trace refers to this storage and which of
    /// its nodes holds the current value.
    pub(crate) capture: crate::capture::CellCapture,
}

/// The serial number the next storage gets.
static NEXT_STORAGE: AtomicU64 = AtomicU64::new(0);

/// The serial number the next storage will get: every storage made before this call has a
/// smaller one.
pub(crate) fn next_storage_serial() -> u64 {
    NEXT_STORAGE.load(Ordering::Relaxed)
}

impl StorageCell {
    fn new(storage: Storage) -> Arc<StorageCell> {
        Arc::new(StorageCell {
            data: RwLock::new(storage),
            version: AtomicU64::new(0),
            serial: NEXT_STORAGE.fetch_add(1, Ordering::Relaxed),
            tracked_views: AtomicBool::new(false),
            capture: crate::capture::CellCapture::default(),
        })
    }

    /// A storage whose values a trace will compute: `len` elements of `dtype`, not yet
    /// allocated.
    pub(crate) fn lazy(dtype: DType, capture: crate::capture::CellCapture) -> Arc<StorageCell> {
        Arc::new(StorageCell {
            data: RwLock::new(Storage::Cpu(CpuStorage::uninit(dtype, 0))),
            version: AtomicU64::new(0),
            serial: NEXT_STORAGE.fetch_add(1, Ordering::Relaxed),
            tracked_views: AtomicBool::new(false),
            capture,
        })
    }

    /// Replaces the data (a trace's realized result); not an in-place write of the user's.
    /// Returns the data it held.
    pub(crate) fn install(&self, storage: Storage) -> Storage {
        std::mem::replace(&mut *self.data.write().unwrap_or_else(|e| e.into_inner()), storage)
    }

    /// A copy of the data, on its device (for a compiled call's undo journal: the caller runs
    /// it eagerly, outside any capture).
    pub(crate) fn copy_data(self: &Arc<Self>) -> Storage {
        let (dtype, device, len) = {
            let data = self.data.read().unwrap_or_else(|e| e.into_inner());
            (data.dtype(), data.device(), data.len())
        };
        let whole = Tensor::over_cell(self.clone(), Layout::contiguous(&[len]), dtype, device);
        whole.deep_clone().cell().take()
    }

    /// This storage's serial number (see [`next_storage_serial`]).
    pub(crate) fn serial(&self) -> u64 {
        self.serial
    }

    /// Counts a change of the data (autograd's saved tensors compare versions).
    pub(crate) fn bump_version(&self) {
        self.version.fetch_add(1, Ordering::Relaxed);
    }

    /// Takes the data out, leaving an empty storage of the same dtype.
    pub(crate) fn take(&self) -> Storage {
        let mut g = self.data.write().unwrap_or_else(|e| e.into_inner());
        let empty = Storage::Cpu(CpuStorage::uninit(g.dtype(), 0));
        std::mem::replace(&mut *g, empty)
    }

    /// Elements in the storage (the planned length of a lazy one).
    pub(crate) fn len(&self) -> usize {
        if let Some(len) = self.capture.lazy_len() {
            return len;
        }
        self.data.read().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// A multi-dimensional array with a dtype and a device: PyTorch's `torch.Tensor`.
///
/// Cloning a `Tensor` clones the handle (an `Arc`), not the data; use [`Tensor::deep_clone`]
/// for PyTorch's `clone()` (a copy with its own storage).
#[derive(Clone)]
pub struct Tensor(Arc<TensorImpl>);

struct TensorImpl {
    storage: Arc<StorageCell>,
    layout: Layout,
    dtype: DType,
    device: Device,
    autograd: AutogradMeta,
}

/// The number of live tensor handles' shared parts (`TensorImpl`s), for leak tests.
static LIVE_TENSORS: AtomicUsize = AtomicUsize::new(0);

impl TensorImpl {
    fn new(storage: Arc<StorageCell>, layout: Layout, dtype: DType, device: Device) -> Arc<TensorImpl> {
        LIVE_TENSORS.fetch_add(1, Ordering::Relaxed);
        Arc::new(TensorImpl { storage, layout, dtype, device, autograd: AutogradMeta::default() })
    }
}

impl Drop for TensorImpl {
    fn drop(&mut self) {
        LIVE_TENSORS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How many tensors (distinct `TensorImpl`s: each view and each op result counts, clones of a
/// handle don't) are alive in the process.
pub(crate) fn live_tensors() -> usize {
    LIVE_TENSORS.load(Ordering::Relaxed)
}

/// A weak handle to a tensor: does not keep it alive (used by hooks and `retain_grad`).
#[derive(Clone)]
pub(crate) struct WeakTensor(Weak<TensorImpl>);

impl WeakTensor {
    /// The tensor, if it is still alive.
    pub(crate) fn upgrade(&self) -> Option<Tensor> {
        self.0.upgrade().map(Tensor)
    }
}

impl Tensor {
    /// A contiguous tensor over new CPU storage; `shape` must have `storage.len()` elements.
    pub(crate) fn from_cpu_storage(storage: CpuStorage, shape: &[usize]) -> Tensor {
        Self::from_storage(Storage::Cpu(storage), shape)
    }

    /// A contiguous tensor over new storage on its device; `shape` must have `storage.len()`
    /// elements.
    pub(crate) fn from_storage(storage: Storage, shape: &[usize]) -> Tensor {
        debug_assert_eq!(storage.len(), kiln_runtime::layout::numel(shape));
        let (dtype, device) = (storage.dtype(), storage.device());
        Tensor(TensorImpl::new(StorageCell::new(storage), Layout::contiguous(shape), dtype, device))
    }

    /// A contiguous tensor over a new typed CPU buffer.
    pub(crate) fn from_buf<T: StorageElement>(buf: CpuBuf<T>, shape: &[usize]) -> Tensor {
        Self::from_cpu_storage(T::wrap(buf), shape)
    }

    /// A tensor on `device` over an existing storage (no copy), without autograd history.
    pub(crate) fn over_cell(cell: Arc<StorageCell>, layout: Layout, dtype: DType, device: Device) -> Tensor {
        Tensor(TensorImpl::new(cell, layout, dtype, device))
    }

    /// The device of a storage's data (of a lazy one: the CPU placeholder's).
    pub(crate) fn cell_device(cell: &StorageCell) -> Device {
        cell.data.read().unwrap_or_else(|e| e.into_inner()).device()
    }

    /// The storage this tensor views.
    pub(crate) fn cell(&self) -> &Arc<StorageCell> {
        &self.0.storage
    }

    /// A view of this tensor's storage with another layout (no copy), without autograd history.
    pub(crate) fn with_layout(&self, layout: Layout) -> Tensor {
        debug_assert!(layout.numel() == 0 || layout.storage_end() <= self.storage_len());
        Tensor(TensorImpl::new(self.0.storage.clone(), layout, self.0.dtype, self.0.device))
    }

    /// The autograd state of this tensor.
    #[inline]
    pub(crate) fn autograd(&self) -> &AutogradMeta {
        &self.0.autograd
    }

    /// Notes that a view of this storage recorded autograd history.
    pub(crate) fn mark_tracked_views(&self) {
        self.0.storage.tracked_views.store(true, Ordering::Relaxed);
    }

    /// Whether a view of this storage recorded autograd history.
    pub(crate) fn has_tracked_views(&self) -> bool {
        self.0.storage.tracked_views.load(Ordering::Relaxed)
    }

    /// This tensor's `grad_fn`, taken out when this is the last handle to the tensor (so that
    /// dropping a deep graph can unlink it without recursion).
    pub(crate) fn take_grad_fn_if_last(self) -> Option<Arc<crate::autograd::Node>> {
        if Arc::strong_count(&self.0) != 1 {
            return None;
        }
        self.autograd().lock().grad_fn.take()
    }

    /// A weak handle to this tensor.
    pub(crate) fn downgrade(&self) -> WeakTensor {
        WeakTensor(Arc::downgrade(&self.0))
    }

    /// True when both are handles of the same tensor (not merely the same storage).
    pub(crate) fn is_same(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// A detached, contiguous tensor with these values that no one else can reach: this storage
    /// when this handle is its only user, else a copy (for storing a gradient in `.grad`).
    pub(crate) fn detached_owned(self) -> Tensor {
        let alone = Arc::strong_count(&self.0) == 1 && Arc::strong_count(&self.0.storage) == 1;
        if alone && self.is_contiguous() && self.storage_offset() == 0 && self.numel() == self.storage_len() {
            return self.detach();
        }
        let _off = crate::autograd::no_grad_guard();
        self.deep_clone()
    }

    /// Sizes of each dimension (`x.shape` / `x.size()`).
    pub fn shape(&self) -> &[usize] {
        self.0.layout.shape()
    }

    /// Strides of each dimension in elements (`x.stride()`).
    pub fn stride(&self) -> &[usize] {
        self.0.layout.strides()
    }

    /// Offset of element 0 in the storage, in elements (`x.storage_offset()`).
    pub fn storage_offset(&self) -> usize {
        self.0.layout.offset()
    }

    /// The strided layout: shape, strides and offset.
    pub fn layout(&self) -> &Layout {
        &self.0.layout
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }

    /// The device the data lives on.
    pub fn device(&self) -> Device {
        self.0.device
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.0.layout.numel()
    }

    /// Number of dimensions (`x.dim()`, `x.ndim`).
    pub fn dim(&self) -> usize {
        self.0.layout.ndim()
    }

    /// Size of one dimension; negative dims count from the end (`x.size(-1)`).
    #[track_caller]
    pub fn size(&self, dim: i64) -> usize {
        let d = self.normalize_dim("size", dim).unwrap_or_else(|e| panic!("{e}"));
        self.shape()[d]
    }

    /// Whether the elements are laid out row-major without gaps.
    pub fn is_contiguous(&self) -> bool {
        self.0.layout.is_contiguous()
    }

    /// Bytes per element.
    pub fn element_size(&self) -> usize {
        self.dtype().size_in_bytes()
    }

    /// True when both handles view the same storage (possibly different elements of it).
    pub fn shares_storage_with(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.0.storage, &other.0.storage)
    }

    /// The number of in-place writes made to this tensor's storage (`x._version`).
    pub fn version(&self) -> u64 {
        self.0.storage.version.load(Ordering::Relaxed)
    }

    /// Number of elements in the underlying storage.
    pub(crate) fn storage_len(&self) -> usize {
        self.0.storage.len()
    }

    /// True when the tensor's elements are its whole storage in order (contiguous, from the
    /// first element, nothing left over), so the storage can be copied as it is.
    pub(crate) fn covers_storage(&self) -> bool {
        self.is_contiguous() && self.storage_offset() == 0 && self.numel() == self.storage_len()
    }

    /// Read access to the storage. A storage that a capture has yet to compute is realized
    /// first (a graph break, named with the caller's line under `KILN_DEBUG=breaks`).
    #[track_caller]
    pub(crate) fn read_storage(&self) -> RwLockReadGuard<'_, Storage> {
        crate::capture::before_eager_access(&self.0.storage, false);
        self.0.storage.data.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Read access to the storages of `tensors`: one lock per distinct storage (two views of
    /// one storage share it), and for each tensor the index of its guard.
    #[track_caller]
    pub(crate) fn read_storages(tensors: &[Tensor]) -> (Vec<RwLockReadGuard<'_, Storage>>, Vec<usize>) {
        let mut guards: Vec<RwLockReadGuard<'_, Storage>> = Vec::new();
        let mut guard_of: Vec<usize> = Vec::with_capacity(tensors.len());
        for (i, t) in tensors.iter().enumerate() {
            match tensors[..i].iter().position(|u| u.shares_storage_with(t)) {
                Some(j) => guard_of.push(guard_of[j]),
                None => {
                    guard_of.push(guards.len());
                    guards.push(t.read_storage());
                }
            }
        }
        (guards, guard_of)
    }

    /// Counts an in-place write (bumps the version) without touching the data.
    pub(crate) fn bump_version(&self) {
        self.0.storage.bump_version();
    }

    /// The address of this tensor's shared part: equal for handles of one tensor (clones),
    /// distinct for distinct tensors alive at once.
    pub(crate) fn impl_address(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// Write access to the storage; counts as an in-place write (bumps the version). A
    /// storage that a pending capture reads or computes is realized first.
    #[track_caller]
    pub(crate) fn write_storage(&self) -> RwLockWriteGuard<'_, Storage> {
        crate::capture::before_eager_access(&self.0.storage, true);
        self.0.storage.version.fetch_add(1, Ordering::Relaxed);
        self.0.storage.data.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Exclusive access to the storage *without* counting a write (the version stays): for a
    /// collective that only sends from it but must keep writers out while the transport reads.
    #[track_caller]
    pub(crate) fn lock_storage_exclusive(&self) -> RwLockWriteGuard<'_, Storage> {
        crate::capture::before_eager_access(&self.0.storage, false);
        self.0.storage.data.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on this tensor's CPU storage and layout; a clear error for other devices.
    #[track_caller]
    pub(crate) fn with_cpu<R>(&self, op: &'static str, f: impl FnOnce(&CpuStorage, &Layout) -> R) -> Result<R> {
        self.check_device_supported(op)?;
        let guard = self.read_storage();
        Ok(f(cpu_part(op, &guard)?, self.layout()))
    }

    /// Runs `f` with the CPU storage of two tensors, taking one lock when they share storage.
    #[track_caller]
    pub(crate) fn with_cpu2<R>(
        &self,
        other: &Tensor,
        op: &'static str,
        f: impl FnOnce(&CpuStorage, &CpuStorage) -> R,
    ) -> Result<R> {
        self.check_same_device(op, other)?;
        self.check_device_supported(op)?;
        crate::capture::before_eager_access(&other.0.storage, false);
        let ga = self.read_storage();
        let a = cpu_part(op, &ga)?;
        if self.shares_storage_with(other) {
            return Ok(f(a, a));
        }
        let gb = other.read_storage();
        Ok(f(a, cpu_part(op, &gb)?))
    }

    /// Runs `f` with this tensor's CPU storage writable and `src`'s readable, for in-place ops.
    /// `src` must not share storage with `self` (copy it first).
    #[track_caller]
    pub(crate) fn with_cpu_write<R>(
        &self,
        op: &'static str,
        src: &Tensor,
        f: impl FnOnce(&mut CpuStorage, &CpuStorage) -> R,
    ) -> Result<R> {
        self.check_same_device(op, src)?;
        self.check_device_supported(op)?;
        self.with_storage_write(src, |w, r| {
            let w = w.as_cpu_mut().ok_or_else(|| not_on_cuda(op))?;
            Ok(f(w, cpu_part(op, r)?))
        })
    }

    /// Runs `f` with this tensor's storage (any device) writable and `src`'s readable. `src`
    /// must not share storage with `self`; locks are taken in address order so that two
    /// threads writing into each other's sources cannot deadlock.
    #[track_caller]
    pub(crate) fn with_storage_write<R>(&self, src: &Tensor, f: impl FnOnce(&mut Storage, &Storage) -> R) -> R {
        debug_assert!(!self.shares_storage_with(src));
        // Realize a pending capture before taking either lock (realizing writes storages).
        crate::capture::before_eager_access(&src.0.storage, false);
        crate::capture::before_eager_access(&self.0.storage, true);
        let self_first = Arc::as_ptr(&self.0.storage) < Arc::as_ptr(&src.0.storage);
        let (mut gw, gr);
        if self_first {
            gw = self.write_storage();
            gr = src.read_storage();
        } else {
            gr = src.read_storage();
            gw = self.write_storage();
        }
        f(&mut gw, &gr)
    }

    /// Runs `f` with this tensor's CPU storage writable (an in-place write with no other input).
    #[track_caller]
    pub(crate) fn with_cpu_mut<R>(&self, op: &'static str, f: impl FnOnce(&mut CpuStorage, &Layout) -> R) -> Result<R> {
        self.check_device_supported(op)?;
        let mut g = self.write_storage();
        let w = g.as_cpu_mut().ok_or_else(|| not_on_cuda(op))?;
        Ok(f(w, self.layout()))
    }

    /// An error unless this build can run ops on the tensor's device.
    #[track_caller]
    pub(crate) fn check_device_supported(&self, op: &'static str) -> Result<()> {
        check_device_supported(op, self.device())
    }

    /// An error naming both devices unless `other` is on this tensor's device.
    #[track_caller]
    pub(crate) fn check_same_device(&self, op: &'static str, other: &Tensor) -> Result<()> {
        if self.device() != other.device() {
            bail!(
                op,
                Device,
                "expected all tensors to be on the same device, but found {} and {}",
                self.device(),
                other.device()
            );
        }
        Ok(())
    }

    /// A dim in `-dim()..dim()` as an index, or an error naming the op.
    #[track_caller]
    pub(crate) fn normalize_dim(&self, op: &'static str, dim: i64) -> Result<usize> {
        normalize_dim(op, dim, self.dim())
    }
}

/// A dim in `-ndim..ndim` as an index (a 0-dim tensor accepts -1 and 0, as PyTorch does).
#[track_caller]
pub(crate) fn normalize_dim(op: &'static str, dim: i64, ndim: usize) -> Result<usize> {
    let n = ndim.max(1) as i64;
    if dim < -n || dim >= n {
        bail!(op, Index, "dimension out of range (expected to be in range of [{}, {}], but got {dim})", -n, n - 1);
    }
    Ok(if dim < 0 { (dim + n) as usize } else { dim as usize })
}

/// An error unless `op` has a kernel for tensors on `device` (every op runs on the CPU; on CUDA
/// only the ops ported so far, which take their CUDA branch before reaching a CPU kernel).
#[track_caller]
pub(crate) fn check_device_supported(op: &'static str, device: Device) -> Result<()> {
    if device.is_cuda() {
        return Err(not_on_cuda(op));
    }
    Ok(())
}

/// The error of an op that has no CUDA kernel yet.
#[track_caller]
pub(crate) fn not_on_cuda(op: &'static str) -> crate::Error {
    crate::Error::new(
        op,
        crate::ErrorKind::Unsupported,
        format!(
            "`{op}` is not implemented for CUDA tensors yet; move the tensor to the CPU with .to(&Device::Cpu) first"
        ),
    )
}

/// The CPU part of a storage, or the "not implemented for CUDA" error of `op`.
#[track_caller]
pub(crate) fn cpu_part<'a>(op: &'static str, s: &'a Storage) -> Result<&'a CpuStorage> {
    s.as_cpu().ok_or_else(|| not_on_cuda(op))
}
