//! Advanced indexing on CUDA tensors (`index`, `index_put_`), as the indexing kernels of
//! `kiln_codegen::cuda::index` along one dim of the storage.
//!
//! Every element `x[indices]` reads (or `index_put_` writes) is at one storage offset:
//! `offset + Σ idx_k · stride(d_k) + Σ c_r · stride(walk r)` over the index tensors (each
//! checked in `-size..size` on the device first, then wrapped with one `remainder` kernel) and
//! the result dims that walk a dim of `x`. That offset is computed by broadcasting elementwise
//! kernels into one int64 tensor of the result's shape; then a gather from (or a scatter or
//! scatter_add into) the whole storage seen as a vector does the rest. A bool mask index
//! arrives here as its `nonzero` columns (on the device).

use super::{dense, ordinal_of};
use crate::error::{bail, Result};
use crate::tensor::Tensor;
use kiln_runtime::{DType, Device, Layout};

/// An advanced index resolved by the op layer: the result shape, the dim of `x` each result
/// dim walks (`None` for the broadcast index dims), and each index tensor (int64, on `x`'s
/// device) with its result-shaped layout over a contiguous copy and the dim of `x` it indexes.
pub(crate) struct Resolved<'a> {
    /// The indexing result's shape.
    pub shape: &'a [usize],
    /// For each result dim, the dim of `x` it walks, or `None`.
    pub walk: &'a [Option<usize>],
    /// The index tensors: values, result-shaped layout over their contiguous copy, indexed dim.
    pub indices: &'a [(Tensor, Layout, usize)],
}

/// The storage offset of every element of `x[indices]`: a contiguous int64 vector on `x`'s
/// device, in the result's row-major order. Errors name `op` and the first out-of-range index
/// value, as the CPU's.
#[track_caller]
fn offsets(op: &'static str, x: &Tensor, adv: &Resolved<'_>) -> Result<Tensor> {
    let device = Device::Cuda(ordinal_of(x));
    let mut acc = Tensor::full_opts(&[], x.layout().offset() as i64, DType::I64, device);
    for (t, layout, d) in adv.indices {
        let size = x.shape()[*d];
        let t = dense(t);
        super::index::check_range(op, &t, *d, size, true)?;
        // In -size..size now: the divisor-signed remainder counts negative values from the end.
        let wrapped = if t.numel() == 0 { t } else { t.try_remainder(size as i64)? }.with_layout(layout.clone());
        acc = acc.try_add(&wrapped.try_mul(x.stride()[*d] as i64)?)?;
    }
    for (r, walked) in adv.walk.iter().enumerate() {
        let Some(d) = *walked else { continue };
        let steps: Vec<i64> = (0..x.shape()[d]).map(|c| (c * x.stride()[d]) as i64).collect();
        let mut strides = vec![0; adv.shape.len()];
        strides[r] = 1;
        let steps = super::to_device(op, &Tensor::from_vec(steps, &[x.shape()[d]]), device)?;
        acc = acc.try_add(&steps.with_layout(Layout::new(adv.shape.into(), strides.into(), 0)))?;
    }
    Ok(dense(&acc.try_broadcast_to(adv.shape)?).reshape(&[-1]))
}

/// The whole storage of `x` as a vector (a view sharing it).
fn storage_vector(x: &Tensor) -> Tensor {
    x.with_layout(Layout::contiguous(&[x.storage_len()]))
}

/// `x[indices]` of the CUDA tensor `x`: a new contiguous tensor of the result's shape (no
/// autograd: the op layer records it).
#[track_caller]
pub(crate) fn index(op: &'static str, x: &Tensor, adv: &Resolved<'_>) -> Result<Tensor> {
    let _off = crate::autograd::no_grad();
    let at = offsets(op, x, adv)?;
    let m = at.numel();
    super::index::gather(op, &storage_vector(x), 0, &at, at.layout(), &[m], adv.shape)
}

/// `dst[indices] = values` (or `+=` when `accumulate`) on the CUDA tensor `dst`, `values`
/// (of `dst`'s dtype and device, not sharing its storage) broadcast to the result's shape. A
/// plain write where positions repeat keeps one of the values (not necessarily the last, as on
/// the CPU); an accumulating one adds in a scheduling-dependent order. Under
/// `use_deterministic_algorithms(true)` both are refused unless `values` is 0-dim and the write
/// is plain (one value everywhere): the positions form one flat line, which the deterministic
/// scatter_add would walk on a single thread.
#[track_caller]
pub(crate) fn put(op: &'static str, dst: &Tensor, adv: &Resolved<'_>, values: &Tensor, accumulate: bool) -> Result<()> {
    if accumulate && crate::are_deterministic_algorithms_enabled() {
        bail!(op, Unsupported, "{op} on CUDA adds into repeated positions with atomics (the deterministic scatter_add would walk its one flat line of positions on a single thread), and use_deterministic_algorithms(true) is set (values shape {:?}, self shape {:?}); run it on the CPU or turn the mode off", values.shape(), dst.shape());
    }
    let _off = crate::autograd::no_grad();
    let at = offsets(op, dst, adv)?;
    let m = at.numel();
    let (src, ls) = if values.dim() == 0 {
        (values.clone(), Layout::new([m].as_slice().into(), [0].as_slice().into(), values.layout().offset()))
    } else {
        let flat = dense(&values.try_broadcast_to(adv.shape)?).reshape(&[-1]);
        let ls = flat.layout().clone();
        (flat, ls)
    };
    super::index::scatter(op, &storage_vector(dst), 0, &at, &src, &ls, accumulate)
}
