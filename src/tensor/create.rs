//! Creating tensors: from data, filled, ranges, identity, and the `*_like`/`new_*` forms.

use super::shape_arg::{sizes, IntoShape};
use super::size::reserve;
use super::Tensor;
use crate::cuda::OrOp;
use crate::error::{bail, OrPanic, Result};
use crate::scalar::Scalar;
use kiln_runtime::cpu::CpuBuf;
use kiln_runtime::cuda::CudaStorage;
use kiln_runtime::storage::StorageElement;
use kiln_runtime::{match_dtype, CpuStorage, DType, Device, Element, Shape, Storage};

/// Rust values that are (nested) arrays of one element type: `[[1.0f32, 2.0], [3.0, 4.0]]`,
/// `vec![vec![1i64, 2], vec![3, 4]]`, or a single element (a 0-dim tensor).
pub trait NestedArray {
    /// The element type at the bottom.
    type Elem: StorageElement;
    /// The shape, or an error message when nested `Vec`s are ragged.
    fn nested_shape(&self) -> std::result::Result<Shape, String>;
    /// Appends the elements in row-major order.
    fn flatten_into(&self, out: &mut Vec<Self::Elem>);
}

macro_rules! nested_leaf {
    ($($t:ty),*) => {$(
        impl NestedArray for $t {
            type Elem = $t;
            fn nested_shape(&self) -> std::result::Result<Shape, String> {
                Ok(Shape::new())
            }
            fn flatten_into(&self, out: &mut Vec<$t>) {
                out.push(*self);
            }
        }
    )*};
}
nested_leaf!(f32, f64, half::f16, half::bf16, i64, i32, u8, bool);

fn nested_rows_shape<A: NestedArray>(rows: &[A]) -> std::result::Result<Shape, String> {
    let inner = match rows.first() {
        Some(first) => first.nested_shape()?,
        None => Shape::new(),
    };
    for (i, r) in rows.iter().enumerate().skip(1) {
        let s = r.nested_shape()?;
        if s != inner {
            return Err(format!("expected sequence of shape {inner:?} at index {i}, got {s:?}"));
        }
    }
    let mut shape = Shape::new();
    shape.push(rows.len());
    shape.extend_from_slice(&inner);
    Ok(shape)
}

impl<A: NestedArray, const N: usize> NestedArray for [A; N] {
    type Elem = A::Elem;
    fn nested_shape(&self) -> std::result::Result<Shape, String> {
        nested_rows_shape(self)
    }
    fn flatten_into(&self, out: &mut Vec<A::Elem>) {
        self.iter().for_each(|r| r.flatten_into(out));
    }
}

impl<A: NestedArray> NestedArray for Vec<A> {
    type Elem = A::Elem;
    fn nested_shape(&self) -> std::result::Result<Shape, String> {
        nested_rows_shape(self)
    }
    fn flatten_into(&self, out: &mut Vec<A::Elem>) {
        self.iter().for_each(|r| r.flatten_into(out));
    }
}

impl<A: NestedArray> NestedArray for &[A] {
    type Elem = A::Elem;
    fn nested_shape(&self) -> std::result::Result<Shape, String> {
        nested_rows_shape(self)
    }
    fn flatten_into(&self, out: &mut Vec<A::Elem>) {
        self.iter().for_each(|r| r.flatten_into(out));
    }
}

/// Values accepted where PyTorch takes a Python number (fill values, scalar operands).
pub trait IntoScalar: Into<Scalar> + Copy {}
impl<T: Into<Scalar> + Copy> IntoScalar for T {}

/// A CPU storage of `len` copies of a scalar converted to `dtype`.
pub(crate) fn filled_storage(dtype: DType, len: usize, value: Scalar) -> CpuStorage {
    match_dtype!(dtype, |T| T::wrap(CpuBuf::<T>::filled(len, scalar_as::<T>(value))))
}

/// A scalar converted to an element type (floats through f64, integers exactly).
pub(crate) fn scalar_as<T: Element>(value: Scalar) -> T {
    match value {
        Scalar::Float(f) => T::from_f64(f),
        Scalar::Int(i) => T::from_i64(i),
        Scalar::Bool(b) => T::from_i64(b as i64),
    }
}

impl Tensor {
    /// A tensor from nested arrays or a single value (`torch.tensor`):
    /// `Tensor::new(&[[1.0f32, 2.0], [3.0, 4.0]])`.
    #[track_caller]
    pub fn new<A: NestedArray>(data: &A) -> Tensor {
        Self::try_new(data).or_panic()
    }

    /// [`Tensor::new`] returning an error for ragged nested `Vec`s.
    #[track_caller]
    pub fn try_new<A: NestedArray>(data: &A) -> Result<Tensor> {
        let shape = match data.nested_shape() {
            Ok(s) => s,
            Err(msg) => bail!("tensor", Shape, "{msg}"),
        };
        // Rows of zero-length arrays take no memory, so a shape like [usize::MAX, 0] can come in.
        let n = reserve("tensor", &shape, <A::Elem as Element>::DTYPE)?;
        let mut flat = Vec::with_capacity(n);
        data.flatten_into(&mut flat);
        Ok(Tensor::from_buf(CpuBuf::from_slice(&flat), &shape))
    }

    /// A 1-D tensor holding a copy of `data` (`torch.tensor(list)`); memory the system refuses
    /// panics, naming the bytes.
    #[track_caller]
    pub fn from_slice<T: StorageElement>(data: &[T]) -> Tensor {
        reserve("tensor", &[data.len()], T::DTYPE).or_panic();
        Tensor::from_buf(CpuBuf::from_slice(data), &[data.len()])
    }

    /// A tensor of the given shape from row-major data.
    #[track_caller]
    pub fn from_vec<T: StorageElement>(data: Vec<T>, shape: impl IntoShape) -> Tensor {
        Self::try_from_vec(data, shape).or_panic()
    }

    /// [`Tensor::from_vec`] returning an error when `data.len()` is not the shape's size (a
    /// shape whose count overflows is an error, never a count that wraps to `data.len()`).
    #[track_caller]
    pub fn try_from_vec<T: StorageElement>(data: Vec<T>, shape: impl IntoShape) -> Result<Tensor> {
        let shape = &*sizes("from_vec", shape)?;
        let n = super::check_shape("from_vec", shape)?;
        if data.len() != n {
            bail!("from_vec", Shape, "{} elements cannot fill shape {shape:?} ({n} elements)", data.len());
        }
        reserve("from_vec", shape, T::DTYPE)?;
        Ok(Tensor::from_buf(CpuBuf::from_slice(&data), shape))
    }

    /// A 0-dim tensor holding one scalar, with the scalar's default dtype.
    pub fn scalar(value: impl IntoScalar) -> Tensor {
        let v: Scalar = value.into();
        Tensor::from_cpu_storage(filled_storage(v.default_dtype(), 1, v), &[])
    }

    /// A 0-dim tensor holding one scalar as `dtype` (`torch.tensor(v, dtype=d)`); a value the
    /// dtype cannot hold panics, as PyTorch raises (`2^40` into `I32`, see
    /// [`Tensor::try_scalar_opts`]).
    #[track_caller]
    pub fn scalar_opts(value: impl IntoScalar, dtype: DType) -> Tensor {
        Self::try_scalar_opts(value, dtype).or_panic()
    }

    /// [`Tensor::scalar_opts`] returning an error for a value `dtype` cannot hold without
    /// overflow.
    #[track_caller]
    pub fn try_scalar_opts(value: impl IntoScalar, dtype: DType) -> Result<Tensor> {
        let v: Scalar = value.into();
        crate::ops::check_scalar_fits("tensor", v, dtype)?;
        Ok(Self::scalar_wrapping(v, dtype))
    }

    /// A 0-dim tensor of `value` converted to `dtype` as an arithmetic operand is (integers
    /// wrap into narrow types: `u8_tensor + 300` adds 44, as PyTorch), without the overflow
    /// check of [`Tensor::scalar_opts`].
    pub(crate) fn scalar_wrapping(value: Scalar, dtype: DType) -> Tensor {
        Tensor::from_cpu_storage(filled_storage(dtype, 1, value), &[])
    }

    /// A tensor of `shape` filled with `value`, of `dtype` on `device`. A value the dtype
    /// cannot hold panics, as PyTorch raises (`1e20` or NaN into `I32`, `256` or `-1.0` into
    /// `U8`, `1e300` into `F32`; see [`Tensor::try_full_opts`]).
    #[track_caller]
    pub fn full_opts(shape: impl IntoShape, value: impl IntoScalar, dtype: DType, device: Device) -> Tensor {
        Self::try_full_opts(shape, value, dtype, device).or_panic()
    }

    /// [`Tensor::full_opts`] returning an error for a value `dtype` cannot hold without
    /// overflow, a shape too large for a tensor (see [`kiln_runtime::layout::MAX_NUMEL`]),
    /// memory the system refuses (`ErrorKind::OutOfMemory`, naming the bytes), or a device that
    /// cannot be used (no CUDA device available). On CUDA the values are made on the host and
    /// copied over (one upload; a fill kernel would save the host buffer).
    #[track_caller]
    pub fn try_full_opts(
        shape: impl IntoShape,
        value: impl IntoScalar,
        dtype: DType,
        device: Device,
    ) -> Result<Tensor> {
        filled("full", &sizes("full", shape)?, value.into(), dtype, device)
    }

    /// A tensor of `shape` filled with `value`; the dtype follows the value (`F32` for floats,
    /// `I64` for integers, `Bool` for bools), as `torch.full` does (a float past f32's range
    /// panics, as there).
    #[track_caller]
    pub fn full(shape: impl IntoShape, value: impl IntoScalar) -> Tensor {
        Self::try_full(shape, value).or_panic()
    }

    /// [`Tensor::full`] returning an error (see [`Tensor::try_full_opts`]).
    #[track_caller]
    pub fn try_full(shape: impl IntoShape, value: impl IntoScalar) -> Result<Tensor> {
        let v: Scalar = value.into();
        Self::try_full_opts(shape, v, v.default_dtype(), Device::Cpu)
    }

    /// Zeros of `dtype` on `device`.
    #[track_caller]
    pub fn zeros_opts(shape: impl IntoShape, dtype: DType, device: Device) -> Tensor {
        Self::try_zeros_opts(shape, dtype, device).or_panic()
    }

    /// [`Tensor::zeros_opts`] returning an error for a shape too large for a tensor, memory the
    /// system refuses (`ErrorKind::OutOfMemory`), or a device that cannot be used.
    #[track_caller]
    pub fn try_zeros_opts(shape: impl IntoShape, dtype: DType, device: Device) -> Result<Tensor> {
        filled("zeros", &sizes("zeros", shape)?, Scalar::Int(0), dtype, device)
    }

    /// Ones of `dtype` on `device`.
    #[track_caller]
    pub fn ones_opts(shape: impl IntoShape, dtype: DType, device: Device) -> Tensor {
        Self::try_ones_opts(shape, dtype, device).or_panic()
    }

    /// [`Tensor::ones_opts`] returning an error (see [`Tensor::try_zeros_opts`]).
    #[track_caller]
    pub fn try_ones_opts(shape: impl IntoShape, dtype: DType, device: Device) -> Result<Tensor> {
        filled("ones", &sizes("ones", shape)?, Scalar::Int(1), dtype, device)
    }

    /// An uninitialized tensor of `dtype` on `device`: its values are whatever the reused memory
    /// held (always valid numbers of the dtype, never undefined behaviour).
    #[track_caller]
    pub fn empty_opts(shape: impl IntoShape, dtype: DType, device: Device) -> Tensor {
        Self::try_empty_opts(shape, dtype, device).or_panic()
    }

    /// [`Tensor::empty_opts`] returning an error (see [`Tensor::try_zeros_opts`]).
    #[track_caller]
    pub fn try_empty_opts(shape: impl IntoShape, dtype: DType, device: Device) -> Result<Tensor> {
        uninit(&sizes("empty", shape)?, dtype, device)
    }

    /// f32 zeros.
    #[track_caller]
    pub fn zeros(shape: impl IntoShape) -> Tensor {
        Self::zeros_opts(shape, DType::F32, Device::Cpu)
    }

    /// [`Tensor::zeros`] returning an error (see [`Tensor::try_zeros_opts`]).
    #[track_caller]
    pub fn try_zeros(shape: impl IntoShape) -> Result<Tensor> {
        Self::try_zeros_opts(shape, DType::F32, Device::Cpu)
    }

    /// f32 ones.
    #[track_caller]
    pub fn ones(shape: impl IntoShape) -> Tensor {
        Self::ones_opts(shape, DType::F32, Device::Cpu)
    }

    /// [`Tensor::ones`] returning an error (see [`Tensor::try_zeros_opts`]).
    #[track_caller]
    pub fn try_ones(shape: impl IntoShape) -> Result<Tensor> {
        Self::try_ones_opts(shape, DType::F32, Device::Cpu)
    }

    /// An uninitialized f32 tensor (see [`Tensor::empty_opts`]).
    #[track_caller]
    pub fn empty(shape: impl IntoShape) -> Tensor {
        Self::empty_opts(shape, DType::F32, Device::Cpu)
    }

    /// [`Tensor::empty`] returning an error (see [`Tensor::try_zeros_opts`]).
    #[track_caller]
    pub fn try_empty(shape: impl IntoShape) -> Result<Tensor> {
        Self::try_empty_opts(shape, DType::F32, Device::Cpu)
    }

    /// Zeros with this tensor's shape, dtype and device.
    #[track_caller]
    pub fn zeros_like(&self) -> Tensor {
        Self::zeros_opts(self.shape(), self.dtype(), self.device())
    }

    /// Ones with this tensor's shape, dtype and device.
    #[track_caller]
    pub fn ones_like(&self) -> Tensor {
        Self::ones_opts(self.shape(), self.dtype(), self.device())
    }

    /// `value` everywhere, with this tensor's shape, dtype and device.
    #[track_caller]
    pub fn full_like(&self, value: impl IntoScalar) -> Tensor {
        Self::full_opts(self.shape(), value, self.dtype(), self.device())
    }

    /// Uninitialized, with this tensor's shape, dtype and device.
    #[track_caller]
    pub fn empty_like(&self) -> Tensor {
        Self::empty_opts(self.shape(), self.dtype(), self.device())
    }

    /// Zeros of a new shape with this tensor's dtype and device.
    #[track_caller]
    pub fn new_zeros(&self, shape: impl IntoShape) -> Tensor {
        Self::zeros_opts(shape, self.dtype(), self.device())
    }

    /// Ones of a new shape with this tensor's dtype and device.
    #[track_caller]
    pub fn new_ones(&self, shape: impl IntoShape) -> Tensor {
        Self::ones_opts(shape, self.dtype(), self.device())
    }

    /// `value` in a new shape with this tensor's dtype and device.
    #[track_caller]
    pub fn new_full(&self, shape: impl IntoShape, value: impl IntoScalar) -> Tensor {
        Self::full_opts(shape, value, self.dtype(), self.device())
    }

    /// Uninitialized, in a new shape with this tensor's dtype and device.
    #[track_caller]
    pub fn new_empty(&self, shape: impl IntoShape) -> Tensor {
        Self::empty_opts(shape, self.dtype(), self.device())
    }

    /// `data` as a tensor with this tensor's dtype and device (`x.new_tensor(data)`).
    #[track_caller]
    pub fn new_tensor<A: NestedArray>(&self, data: &A) -> Tensor {
        Tensor::new(data).to_dtype(self.dtype())
    }

    /// `0, 1, …, end-1` as int64 (`torch.arange(end)`).
    #[track_caller]
    pub fn arange(end: i64) -> Tensor {
        Self::arange_step(0, end, 1)
    }

    /// `start, start+step, …` up to but excluding `end` (`torch.arange(start, end, step)`): int64
    /// when all three are integers, f32 otherwise.
    #[track_caller]
    pub fn arange_step(start: impl IntoScalar, end: impl IntoScalar, step: impl IntoScalar) -> Tensor {
        Self::try_arange_step(start, end, step).or_panic()
    }

    /// [`Tensor::arange_step`] returning an error for a zero step, a range that runs the wrong
    /// way, a bound that is not finite, or more elements than a tensor can hold (the count is
    /// computed without overflow: `arange_step(i64::MIN, i64::MAX, 1)` is an error).
    #[track_caller]
    pub fn try_arange_step(start: impl IntoScalar, end: impl IntoScalar, step: impl IntoScalar) -> Result<Tensor> {
        let (start, end, step): (Scalar, Scalar, Scalar) = (start.into(), end.into(), step.into());
        let all_int = [start, end, step].iter().all(|s| !matches!(s, Scalar::Float(_)));
        let (s, e, st) = (start.to_f64(), end.to_f64(), step.to_f64());
        if !(s.is_finite() && e.is_finite() && st.is_finite()) {
            bail!("arange", Value, "unsupported range: {s} -> {e} (step {st})");
        }
        if st == 0.0 {
            bail!("arange", Value, "step must be nonzero");
        }
        if (e - s) * st < 0.0 {
            bail!(
                "arange",
                Value,
                "upper bound and larger bound inconsistent with step sign (start {s}, end {e}, step {st})"
            );
        }
        if all_int {
            let (s, e, st) = (start.to_i64(), end.to_i64(), step.to_i64());
            let n = (e as i128 - s as i128 + st as i128 - st.signum() as i128) / st as i128;
            let n = usize::try_from(n.max(0)).unwrap_or(usize::MAX);
            reserve("arange", &[n], DType::I64)?;
            return Ok(Tensor::from_buf(CpuBuf::from_fn(n, |i| s + i as i64 * st), &[n]));
        }
        // Saturates past usize::MAX, which the shape check refuses.
        let n = ((e - s) / st).ceil().max(0.0) as usize;
        reserve("arange", &[n], DType::F32)?;
        Ok(Tensor::from_buf(CpuBuf::from_fn(n, |i| (s + i as f64 * st) as f32), &[n]))
    }

    /// `steps` evenly spaced f32 values from `start` to `end` inclusive (`torch.linspace`).
    #[track_caller]
    pub fn linspace(start: f64, end: f64, steps: usize) -> Tensor {
        Self::try_linspace(start, end, steps).or_panic()
    }

    /// [`Tensor::linspace`] returning an error for more steps than a tensor can hold, or memory
    /// the system refuses.
    #[track_caller]
    pub fn try_linspace(start: f64, end: f64, steps: usize) -> Result<Tensor> {
        reserve("linspace", &[steps], DType::F32)?;
        let step = if steps > 1 { (end - start) / (steps - 1) as f64 } else { 0.0 };
        // Like PyTorch, fill the second half from the end so that the last value is exactly `end`.
        let half = steps / 2;
        let buf = CpuBuf::from_fn(steps, |i| {
            if i < half {
                (start + step * i as f64) as f32
            } else {
                (end - step * (steps - 1 - i) as f64) as f32
            }
        });
        Ok(Tensor::from_buf(buf, &[steps]))
    }

    /// The n×n f32 identity matrix (`torch.eye(n)`).
    #[track_caller]
    pub fn eye(n: usize) -> Tensor {
        Self::eye_rect(n, n)
    }

    /// An n×m f32 matrix with ones on the diagonal (`torch.eye(n, m)`).
    #[track_caller]
    pub fn eye_rect(n: usize, m: usize) -> Tensor {
        Self::try_eye_rect(n, m).or_panic()
    }

    /// [`Tensor::eye_rect`] returning an error for a shape too large for a tensor (`n * m` is
    /// never computed with overflow), or memory the system refuses.
    #[track_caller]
    pub fn try_eye_rect(n: usize, m: usize) -> Result<Tensor> {
        let len = reserve("eye", &[n, m], DType::F32)?;
        let buf = CpuBuf::from_fn(len, |i| if i / m.max(1) == i % m.max(1) { 1.0f32 } else { 0.0 });
        Ok(Tensor::from_buf(buf, &[n, m]))
    }
}

/// A new uninitialized tensor of `shape` and `dtype` on `device` (`empty`).
#[track_caller]
fn uninit(shape: &[usize], dtype: DType, device: Device) -> Result<Tensor> {
    match device {
        Device::Cpu => Ok(Tensor::from_cpu_storage(CpuStorage::uninit(dtype, reserve("empty", shape, dtype)?), shape)),
        Device::Cuda(i) => {
            let s = CudaStorage::uninit("empty", i, dtype, super::check_shape("empty", shape)?).or_op("empty")?;
            Ok(Tensor::from_storage(Storage::Cuda(s), shape))
        }
    }
}

/// A new tensor of `shape` filled with `value` as `dtype` on `device`, for `op` (`full`,
/// `zeros`, `ones`): the value must fit the dtype and the shape a tensor. On CUDA the values are
/// made on the host (whose bytes are reserved there) and copied over.
#[track_caller]
fn filled(op: &'static str, shape: &[usize], value: Scalar, dtype: DType, device: Device) -> Result<Tensor> {
    crate::ops::check_scalar_fits(op, value, dtype)?;
    let n = reserve(op, shape, dtype)?;
    let host = filled_storage(dtype, n, value);
    match device {
        Device::Cpu => Ok(Tensor::from_cpu_storage(host, shape)),
        Device::Cuda(i) => crate::cuda::upload(op, &host, shape, i),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_arrays_any_rank() {
        let t = Tensor::new(&[[[1i64, 2], [3, 4]], [[5, 6], [7, 8]]]);
        assert_eq!(t.shape(), &[2, 2, 2]);
        assert_eq!(t.dtype(), DType::I64);
        assert_eq!(Tensor::new(&3.5f64).shape(), &[] as &[usize]);
        let ragged = vec![vec![1.0f32, 2.0], vec![3.0]];
        let err = Tensor::try_new(&ragged).unwrap_err();
        assert!(err.to_string().starts_with("tensor: expected sequence of shape [2] at index 1, got [1]"), "{err}");
    }

    #[test]
    fn ranges() {
        assert_eq!(Tensor::arange(5).to_vec::<i64>(), vec![0, 1, 2, 3, 4]);
        assert_eq!(Tensor::arange_step(1, 10, 3).to_vec::<i64>(), vec![1, 4, 7]);
        assert_eq!(Tensor::arange_step(5, 0, -2).to_vec::<i64>(), vec![5, 3, 1]);
        let f = Tensor::arange_step(0.0, 1.0, 0.25);
        assert_eq!(f.dtype(), DType::F32);
        assert_eq!(f.to_vec::<f32>(), vec![0.0, 0.25, 0.5, 0.75]);
        assert!(Tensor::try_arange_step(0, 5, 0).is_err());
        assert!(Tensor::try_arange_step(0, 5, -1).is_err());
        assert_eq!(Tensor::linspace(-10.0, 10.0, 5).to_vec::<f32>(), vec![-10.0, -5.0, 0.0, 5.0, 10.0]);
        assert_eq!(Tensor::eye_rect(2, 3).to_vec::<f32>(), vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0]);
    }

    #[test]
    fn full_follows_value_dtype() {
        assert_eq!(Tensor::full([2], 7).dtype(), DType::I64);
        assert_eq!(Tensor::full([2], 1.5).dtype(), DType::F32);
        assert_eq!(Tensor::full([2], true).dtype(), DType::Bool);
        let x = Tensor::zeros([2, 3]).to_dtype(DType::F64);
        let y = x.new_ones([4]);
        assert_eq!((y.dtype(), y.shape()), (DType::F64, &[4usize][..]));
    }
}
