//! Conversions: dtype casts, device moves, contiguous copies, and reading values out.

use super::Tensor;
use crate::autograd::{self, grads};
use crate::error::{bail, OrPanic, Result};
use kiln_codegen::cuda::EagerOp;
use kiln_runtime::cpu::elementwise::map1;
use kiln_runtime::storage::StorageElement;
use kiln_runtime::{match_cpu, match_dtype, CpuStorage, DType, Device, Element, Storage};
use std::ops::Deref;
use std::sync::RwLockReadGuard;

/// Converts one element between types with PyTorch's cast rules: floats to integers truncate
/// toward zero, anything to bool is `!= 0`, integers wrap into narrower integers.
#[inline(always)]
pub(crate) fn cast<S: Element, D: Element>(x: S) -> D {
    if D::DTYPE == DType::Bool {
        D::from_i64((x.to_f64() != 0.0) as i64)
    } else if D::DTYPE == DType::F32 && S::DTYPE == DType::I64 {
        // One rounding (i64 -> f32), not two through f64.
        D::from_f64((x.to_i64() as f32) as f64)
    } else if D::DTYPE.is_float() || S::DTYPE.is_float() {
        D::from_f64(x.to_f64())
    } else {
        D::from_i64(x.to_i64())
    }
}

/// A contiguous copy of a CPU storage viewed through `layout`, converted to `dtype`.
pub(crate) fn cast_storage(src: &CpuStorage, layout: &kiln_runtime::Layout, dtype: DType) -> CpuStorage {
    match_cpu!(src, |buf: S| match_dtype!(dtype, |D| D::wrap(map1(buf, layout, cast::<S, D>))))
}

/// A borrow of a contiguous CPU tensor's elements; holds the storage's read lock (CUDA
/// tensors have no host slice: `as_slice` refuses them).
pub struct SliceGuard<'a, T> {
    guard: RwLockReadGuard<'a, Storage>,
    start: usize,
    len: usize,
    _elem: std::marker::PhantomData<T>,
}

impl<T: StorageElement> Deref for SliceGuard<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        if self.len == 0 {
            return &[]; // an empty view may sit past the end of its storage
        }
        let s = self.guard.as_cpu().expect("the device was checked when the guard was made");
        &s.as_buf::<T>().expect("dtype checked when the guard was made")[self.start..self.start + self.len]
    }
}

impl Tensor {
    /// A tensor of another dtype (`x.to(torch.float64)`); the same handle when the dtype is
    /// already `dtype`, as in PyTorch.
    #[track_caller]
    pub fn to_dtype(&self, dtype: DType) -> Tensor {
        self.try_to_dtype(dtype).or_panic()
    }

    /// [`Tensor::to_dtype`] returning an error for an unsupported device.
    #[track_caller]
    pub fn try_to_dtype(&self, dtype: DType) -> Result<Tensor> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        let out = if crate::capture::is_active() {
            crate::capture::elementwise(
                kiln_codegen::ir::NodeKind::Cast,
                &[(self, self.layout().clone())],
                self.shape(),
                dtype,
            )
        } else if self.device().is_cuda() {
            crate::cuda::map("to", EagerOp::Copy, &[(self, self.layout().clone())], self.shape(), self.dtype(), dtype)?
        } else {
            super::reserve("to", self.shape(), dtype)?;
            Tensor::from_cpu_storage(self.with_cpu("to", |s, l| cast_storage(s, l, dtype))?, self.shape())
        };
        if dtype.is_float() && autograd::is_recording(&[self]) {
            // The engine casts the gradient back to the input's dtype.
            return Ok(autograd::record(out, "ToCopyBackward0", &[self], [], |_, g, _| grads![Some(g.clone())]));
        }
        Ok(out)
    }

    /// The tensor on another device (`x.to(device)`); the same handle when already there.
    #[track_caller]
    pub fn to(&self, device: &Device) -> Tensor {
        self.try_to(device).or_panic()
    }

    /// [`Tensor::to`] returning an error when the device cannot be used (no CUDA device
    /// available, or a failed copy). The copy is contiguous; between two CUDA devices it goes
    /// through the host. The gradient moves back to this tensor's device.
    #[track_caller]
    pub fn try_to(&self, device: &Device) -> Result<Tensor> {
        self.moved_to(device, false)
    }

    /// The tensor on another device without waiting for the copy (`x.to(device,
    /// non_blocking=True)`).
    ///
    /// - From a [pinned](Tensor::pin_memory) CPU tensor that is its whole storage to a CUDA
    ///   device, the copy is queued on the device's stream and this returns at once; ops on the
    ///   result queue behind it on that stream, so they see the copied values. The pinned block
    ///   stays out of reuse until the copy ran, even if this tensor is dropped; writing to it in
    ///   place before then races with the copy, as in PyTorch.
    /// - From a CUDA tensor to the CPU, the result is a contiguous tensor in pinned memory
    ///   ([`Tensor::is_pinned`]) that a copy queued on the device's stream (behind the work
    ///   computing the tensor) fills while the host goes on; later work on the device, writes
    ///   to the source included, does not change it. Unlike PyTorch, whose result holds
    ///   undefined values until the stream is synchronized, kiln is safe here: the first host
    ///   access of the result's storage (`to_vec`, `item`, printing, a CPU op, an in-place
    ///   write, a copy back to a device) waits for the copy, so it is never seen half-done;
    ///   `Device::synchronize` completes it too. Dropping it unread waits for nothing: its block
    ///   is reused only once the copy has run. Bool tensors are read back waiting (each byte is
    ///   checked), then pinned.
    /// - Every other move is [`Tensor::to`]'s (pageable memory is staged before the call
    ///   returns); to the CPU from the CPU it is the same handle.
    #[track_caller]
    pub fn to_non_blocking(&self, device: &Device) -> Tensor {
        self.try_to_non_blocking(device).or_panic()
    }

    /// [`Tensor::to_non_blocking`] returning an error when the device cannot be used.
    #[track_caller]
    pub fn try_to_non_blocking(&self, device: &Device) -> Result<Tensor> {
        self.moved_to(device, true)
    }

    /// The move behind `to` and `to_non_blocking`, recording the gradient's way back.
    #[track_caller]
    fn moved_to(&self, device: &Device, non_blocking: bool) -> Result<Tensor> {
        if *device == self.device() {
            return Ok(self.clone());
        }
        let out = if non_blocking {
            crate::cuda::to_device_non_blocking("to", self, *device)?
        } else {
            crate::cuda::to_device("to", self, *device)?
        };
        if autograd::is_recording(&[self]) {
            let back = self.device();
            return Ok(autograd::record(out, "ToCopyBackward0", &[self], [], move |_, g, _| grads![Some(g.to(&back))]));
        }
        Ok(out)
    }

    /// A contiguous tensor with the same values: the same handle when already contiguous.
    #[track_caller]
    pub fn contiguous(&self) -> Tensor {
        if self.is_contiguous() {
            self.clone()
        } else {
            self.deep_clone()
        }
    }

    /// A copy with its own contiguous storage: PyTorch's `x.clone()`.
    ///
    /// Rust's `Clone` on a `Tensor` copies the handle (both share storage, as assignment does in
    /// Python); this is the data copy.
    #[track_caller]
    pub fn deep_clone(&self) -> Tensor {
        let out = if crate::capture::is_active() {
            crate::capture::elementwise(
                kiln_codegen::ir::NodeKind::Cast,
                &[(self, self.layout().clone())],
                self.shape(),
                self.dtype(),
            )
        } else if self.device().is_cuda() {
            crate::cuda::map(
                "clone",
                EagerOp::Copy,
                &[(self, self.layout().clone())],
                self.shape(),
                self.dtype(),
                self.dtype(),
            )
            .or_panic()
        } else {
            super::reserve("clone", self.shape(), self.dtype()).or_panic();
            Tensor::from_cpu_storage(
                self.with_cpu("clone", |s, l| cast_storage(s, l, self.dtype())).or_panic(),
                self.shape(),
            )
        };
        if autograd::is_recording(&[self]) {
            return autograd::record(out, "CloneBackward0", &[self], [], |_, g, _| grads![Some(g.clone())]);
        }
        out
    }

    #[track_caller]
    fn check_elem<T: Element>(&self, op: &'static str) -> Result<()> {
        if T::DTYPE != self.dtype() {
            bail!(op, DType, "the tensor has dtype {}, but {} was asked for", self.dtype(), T::DTYPE);
        }
        Ok(())
    }

    /// This tensor, or for a CUDA tensor a copy on the host (for reading values out).
    #[track_caller]
    fn on_host(&self, op: &'static str) -> Result<Tensor> {
        crate::cuda::to_device(op, self, Device::Cpu)
    }

    /// The elements in row-major order (`x.flatten().tolist()`), as `T`: when `T` is not the
    /// tensor's element type the values are cast as [`Tensor::to_dtype`] casts them (as `item`
    /// does, and as PyTorch's `tolist()` gives numbers whatever the dtype).
    #[track_caller]
    pub fn to_vec<T: StorageElement>(&self) -> Vec<T> {
        self.try_to_vec().or_panic()
    }

    /// [`Tensor::to_vec`] returning an error (a device the values cannot be read from).
    #[track_caller]
    pub fn try_to_vec<T: StorageElement>(&self) -> Result<Vec<T>> {
        let host = self.on_host("to_vec")?;
        let typed = if T::DTYPE == self.dtype() { host } else { host.try_to_dtype(T::DTYPE)? };
        typed.with_cpu("to_vec", |s, l| map1(s.as_buf::<T>().expect("the dtype is T's"), l, |x| x).to_vec())
    }

    /// The rows of a 2-D tensor.
    #[track_caller]
    pub fn to_vec2<T: StorageElement>(&self) -> Vec<Vec<T>> {
        if self.dim() != 2 {
            panic!(
                "{}",
                crate::Error::new(
                    "to_vec2",
                    crate::ErrorKind::Shape,
                    format!("expected a 2-D tensor, got shape {:?}", self.shape())
                )
            );
        }
        let cols = self.shape()[1];
        let flat = self.to_vec::<T>();
        (0..self.shape()[0]).map(|r| flat[r * cols..(r + 1) * cols].to_vec()).collect()
    }

    /// The nested rows of a 3-D tensor.
    #[track_caller]
    pub fn to_vec3<T: StorageElement>(&self) -> Vec<Vec<Vec<T>>> {
        if self.dim() != 3 {
            panic!(
                "{}",
                crate::Error::new(
                    "to_vec3",
                    crate::ErrorKind::Shape,
                    format!("expected a 3-D tensor, got shape {:?}", self.shape())
                )
            );
        }
        let (a, b, c) = (self.shape()[0], self.shape()[1], self.shape()[2]);
        let flat = self.to_vec::<T>();
        (0..a).map(|i| (0..b).map(|j| flat[(i * b + j) * c..(i * b + j + 1) * c].to_vec()).collect()).collect()
    }

    /// The value of a one-element tensor (`x.item()`), as `T` (which may differ from the
    /// tensor's dtype: the value is cast).
    #[track_caller]
    pub fn item<T: Element>(&self) -> T {
        self.try_item().or_panic()
    }

    /// [`Tensor::item`] returning an error unless the tensor has exactly one element.
    #[track_caller]
    pub fn try_item<T: Element>(&self) -> Result<T> {
        if self.numel() != 1 {
            bail!(
                "item",
                Shape,
                "a Tensor with {} elements cannot be converted to Scalar (shape {:?})",
                self.numel(),
                self.shape()
            );
        }
        self.on_host("item")?.with_cpu("item", |s, l| match_cpu!(s, |b: S| cast::<S, T>(b[l.offset()])))
    }

    /// A borrow of the elements of a contiguous CPU tensor, without copying.
    #[track_caller]
    pub fn as_slice<T: StorageElement>(&self) -> SliceGuard<'_, T> {
        self.try_as_slice().or_panic()
    }

    /// [`Tensor::as_slice`] returning an error for a non-contiguous tensor or a dtype mismatch.
    #[track_caller]
    pub fn try_as_slice<T: StorageElement>(&self) -> Result<SliceGuard<'_, T>> {
        self.check_elem::<T>("as_slice")?;
        self.check_device_supported("as_slice")?;
        if !self.is_contiguous() {
            bail!(
                "as_slice",
                Shape,
                "the tensor is not contiguous (shape {:?}, strides {:?}); call contiguous() first",
                self.shape(),
                self.stride()
            );
        }
        Ok(SliceGuard {
            guard: self.read_storage(),
            start: self.storage_offset(),
            len: self.numel(),
            _elem: std::marker::PhantomData,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn casts_follow_pytorch() {
        let x = Tensor::new(&[-1.7f32, 0.0, 2.9, 300.0]);
        assert_eq!(x.to_dtype(DType::I64).to_vec::<i64>(), vec![-1, 0, 2, 300]);
        assert_eq!(x.to_dtype(DType::Bool).to_vec::<bool>(), vec![true, false, true, true]);
        assert_eq!(Tensor::new(&[300i64, -1]).to_dtype(DType::U8).to_vec::<u8>(), vec![44, 255]);
        assert_eq!(Tensor::new(&[true, false]).to_dtype(DType::F64).to_vec::<f64>(), vec![1.0, 0.0]);
        let h = x.to_dtype(DType::F16).to_dtype(DType::F32).to_vec::<f32>();
        assert_eq!(h, vec![-1.7001953, 0.0, 2.9003906, 300.0]);
    }

    #[test]
    fn reading_values() {
        let m = Tensor::new(&[[1i32, 2, 3], [4, 5, 6]]);
        assert_eq!(m.to_vec2::<i32>(), vec![vec![1, 2, 3], vec![4, 5, 6]]);
        assert_eq!(Tensor::new(&2.5f64).item::<f32>(), 2.5);
        assert_eq!(&*m.as_slice::<i32>(), &[1, 2, 3, 4, 5, 6]);
        let e = m.try_as_slice::<f32>().err().expect("a borrow must have the tensor's type").to_string();
        assert!(e.starts_with("as_slice: the tensor has dtype int32, but float32 was asked for"), "{e}");
        assert!(m.try_item::<f32>().is_err());
    }

    #[test]
    fn to_vec_casts_to_the_element_type_asked_for() {
        let x = Tensor::new(&[[1.5f32, -2.0], [3.0, 0.25]]);
        assert_eq!(x.to_vec::<f64>(), [1.5, -2.0, 3.0, 0.25]);
        assert_eq!(x.t().to_vec::<i64>(), [1, 3, -2, 0]);
        assert_eq!(x.to_vec2::<f64>(), [[1.5, -2.0], [3.0, 0.25]]);
        assert_eq!(Tensor::new(&[true, false]).to_vec::<f32>(), [1.0, 0.0]);
    }

    #[test]
    fn deep_clone_owns_its_storage() {
        let a = Tensor::new(&[1.0f32, 2.0]);
        let b = a.deep_clone();
        assert!(!a.shares_storage_with(&b));
        assert!(a.clone().shares_storage_with(&a));
    }
}
