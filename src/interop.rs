//! ndarray interop (cargo feature `ndarray`): the counterpart of PyTorch's NumPy bridge.
//!
//! PyTorch's `torch.from_numpy(a)` and `t.numpy()` share memory. kiln's CPU storage lives in
//! kiln's caching allocator (reused, 64-byte aligned, huge-page advised blocks), which cannot
//! adopt an ndarray's `Vec` nor hand its block to one, so:
//! - [`Tensor::from_ndarray`] **copies** (one `memcpy` when the array is in standard layout, an
//!   element-by-element gather otherwise, e.g. for a transposed or reversed view);
//! - [`Tensor::to_ndarray`] **copies** into a new standard-layout `ArrayD`;
//! - [`Tensor::as_ndarray_view`] does **not** copy: it borrows the tensor's storage (holding its
//!   read lock, so in-place ops on tensors sharing it wait until the view is dropped) and gives
//!   an `ArrayViewD` with the tensor's shape and strides — transposed, narrowed and expanded
//!   (stride-0) views included.

use crate::error::{bail, OrPanic, Result};
use crate::Tensor;
use kiln_runtime::cpu::CpuBuf;
use kiln_runtime::storage::StorageElement;
use kiln_runtime::{Layout, Storage};
use ndarray::{ArrayBase, ArrayD, ArrayViewD, Data, Dimension, IxDyn, ShapeBuilder};
use std::marker::PhantomData;
use std::sync::RwLockReadGuard;

/// A zero-copy borrow of a CPU tensor's elements as an ndarray view; holds the storage's read
/// lock until dropped.
pub struct NdarrayView<'a, T> {
    guard: RwLockReadGuard<'a, Storage>,
    layout: &'a Layout,
    _elem: PhantomData<T>,
}

impl<T: StorageElement> NdarrayView<'_, T> {
    /// The elements as an `ArrayViewD` with the tensor's shape and strides.
    pub fn view(&self) -> ArrayViewD<'_, T> {
        let dims = IxDyn(self.layout.shape());
        if self.layout.numel() == 0 {
            // ndarray wants an empty array's strides to stay inside the slice; any strides do.
            return ArrayViewD::from_shape(dims, &[]).expect("an empty shape fits an empty slice");
        }
        let s = self.guard.as_cpu().expect("the device was checked when the view was made");
        let buf = s.as_buf::<T>().expect("dtype checked when the view was made");
        // A tensor's layout always lies inside its storage, and read-only ndarray views accept
        // overlapping (stride-0) layouts, so this cannot fail.
        let shape = dims.strides(IxDyn(self.layout.strides()));
        ArrayViewD::from_shape(shape, &buf[self.layout.offset()..]).expect("a tensor layout lies inside its storage")
    }
}

impl<T: StorageElement> std::fmt::Debug for NdarrayView<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.view().fmt(f)
    }
}

impl Tensor {
    /// A tensor holding a copy of `array`'s elements with its shape (`torch.tensor(np_array)`);
    /// accepts owned arrays and views of any dimension and layout.
    pub fn from_ndarray<T, S, D>(array: &ArrayBase<S, D>) -> Tensor
    where
        T: StorageElement,
        S: Data<Elem = T>,
        D: Dimension,
    {
        let buf = match array.as_slice() {
            Some(standard) => CpuBuf::from_slice(standard),
            None => {
                let mut buf = CpuBuf::<T>::uninit(array.len());
                buf.iter_mut().zip(array.iter()).for_each(|(o, &x)| *o = x);
                buf
            }
        };
        Tensor::from_buf(buf, array.shape())
    }

    /// A standard-layout copy of the elements as an `ArrayD` (`t.numpy()`, but copied), as `T`
    /// (cast when it is not the tensor's element type, as [`Tensor::to_vec`] does).
    #[track_caller]
    pub fn to_ndarray<T: StorageElement>(&self) -> ArrayD<T> {
        self.try_to_ndarray().or_panic()
    }

    /// [`Tensor::to_ndarray`] returning an error for an unusable device.
    #[track_caller]
    pub fn try_to_ndarray<T: StorageElement>(&self) -> Result<ArrayD<T>> {
        let data = self.try_to_vec::<T>()?;
        match ArrayD::from_shape_vec(IxDyn(self.shape()), data) {
            Ok(a) => Ok(a),
            Err(e) => bail!("to_ndarray", Shape, "cannot shape the elements as {:?}: {e}", self.shape()),
        }
    }

    /// A zero-copy ndarray view of a CPU tensor (see [`NdarrayView`]); `T` must be the tensor's
    /// element type.
    #[track_caller]
    pub fn as_ndarray_view<T: StorageElement>(&self) -> NdarrayView<'_, T> {
        self.try_as_ndarray_view().or_panic()
    }

    /// [`Tensor::as_ndarray_view`] returning an error on a dtype mismatch or an unusable device.
    #[track_caller]
    pub fn try_as_ndarray_view<T: StorageElement>(&self) -> Result<NdarrayView<'_, T>> {
        if T::DTYPE != self.dtype() {
            bail!("as_ndarray_view", DType, "the tensor has dtype {}, but {} was asked for", self.dtype(), T::DTYPE);
        }
        self.check_device_supported("as_ndarray_view")?;
        Ok(NdarrayView { guard: self.read_storage(), layout: self.layout(), _elem: PhantomData })
    }
}
