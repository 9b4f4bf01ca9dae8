//! `gather` of one element per row along the last dim (cross-entropy's pick of each target's
//! log-probability) inside a compiled step.
//!
//! Eagerly, `gather` is an index kernel and its gradient a `scatter_add` into zeros. Inside
//! `kiln::compile` both would be opaque: the pick would force its input to be materialized and
//! the gradient would write a whole zero tensor before scattering. So a pick — an index of
//! the input's shape except size 1 along the last dim, over a float input — is captured as
//! `where(arange(C) == index, x, 0)` summed over the last dim: a reduction whose prologue is
//! `x`'s own producer (log_softmax's `x - max - log Σ`), and whose gradient, by the ordinary
//! rules of `where` and `sum`, is the elementwise `where(arange(C) == index, g, 0)`, fused
//! with its neighbours. The value is the same element: the sum adds it to zeros only (the one
//! difference: a picked `-0.0` comes out `+0.0`), and the other elements, even NaN or
//! infinite, are never read into it.
//!
//! The index values are checked when the pick is captured, as the eager kernel checks them,
//! so only a realized index (an input of the step) is captured this way: a lazy one could not
//! be checked without a graph break, and its gather stays the index kernel. Callers that have
//! checked their index already (cross-entropy's targets) call [`masked_pick`] directly.

use crate::error::{bail, Result};
use crate::tensor::Tensor;
use kiln_runtime::DType;

/// The captured form of `x.gather(d, index)` when capture is on and the gather is a pick along
/// the last dim by a realized index (see the module docs); `None` when it is not one (the
/// caller runs the index kernel). `index` is int64.
#[track_caller]
pub(super) fn captured_pick(op: &'static str, x: &Tensor, d: usize, index: &Tensor) -> Option<Result<Tensor>> {
    let last = x.dim().checked_sub(1)?;
    let is_pick = crate::capture::is_active()
        && matches!(x.dtype(), DType::F32 | DType::F64)
        && d == last
        && index.dim() == x.dim()
        && index.shape()[last] == 1
        && index.shape()[..last] == x.shape()[..last]
        && !index.cell().capture.is_lazy();
    // Not `then(|| …)`: a closure would end the #[track_caller] chain.
    if is_pick {
        Some(checked_pick(op, x, last, index))
    } else {
        None
    }
}

#[track_caller]
fn checked_pick(op: &'static str, x: &Tensor, d: usize, index: &Tensor) -> Result<Tensor> {
    let classes = x.shape()[d];
    let values = index.try_to_vec::<i64>()?;
    if let Some(&bad) = values.iter().find(|&&i| i < 0 || i >= classes as i64) {
        bail!(op, Index, "index {bad} is out of bounds for dimension {d} with size {classes}");
    }
    masked_pick_known(x, d, index.shape(), &values)
}

/// [`masked_pick`] by an index whose values are known on the host (`values`, row-major over
/// `index_shape`, checked by the caller): the index enters the step as an input already in
/// the comparison's dtype, so no kernel casts it.
#[track_caller]
pub(crate) fn masked_pick_known(x: &Tensor, d: usize, index_shape: &[usize], values: &[i64]) -> Result<Tensor> {
    let index = class_indices(x, d, values.iter().copied(), index_shape)?;
    masked_pick(x, d, &index)
}

/// Class indices `values` (row-major over `shape`) as a tensor in the comparison's dtype for
/// `x` along `d`, where `x` lives (a CUDA step reads them as a device input).
fn class_indices(x: &Tensor, d: usize, values: impl Iterator<Item = i64>, shape: &[usize]) -> Result<Tensor> {
    let t = match compare_dtype(x, d) {
        DType::F32 => Tensor::from_vec(values.map(|i| i as f32).collect(), shape),
        DType::F64 => Tensor::from_vec(values.map(|i| i as f64).collect(), shape),
        _ => Tensor::from_vec(values.collect(), shape),
    };
    if x.device() == t.device() {
        Ok(t)
    } else {
        t.try_to(&x.device())
    }
}

/// The dtype `masked_pick` compares class indices in for `x` along `d`: `x`'s float dtype
/// when every class index is exact in it, else int64.
fn compare_dtype(x: &Tensor, d: usize) -> DType {
    match x.dtype() {
        DType::F32 if x.shape()[d] <= 1 << 24 => DType::F32,
        DType::F64 => DType::F64,
        _ => DType::I64,
    }
}

/// `where(arange(C) == index, x, 0)` summed over dim `d` (kept, size 1), `C` being `x`'s size
/// there: `x.gather(d, index)` for an int64 `index` (or one already in the comparison's dtype,
/// see [`masked_pick_known`]) of `x`'s shape but size 1 along `d`, whose values are in
/// `[0, C)`; a row whose index is outside that range gives 0 (unchecked).
///
/// The comparison is made in `x`'s float dtype when that is exact (fewer than 2^24 classes for
/// f32: every integer up to there is a float, and no other integer rounds into `[0, C)`), so
/// the fused kernels read only floats and stay on the vector plan; otherwise in int64.
#[track_caller]
pub(crate) fn masked_pick(x: &Tensor, d: usize, index: &Tensor) -> Result<Tensor> {
    let classes = x.shape()[d];
    let mut iota_shape = vec![1usize; x.dim() - d];
    iota_shape[0] = classes;
    let iota = class_indices(x, d, 0..classes as i64, &iota_shape)?;
    let index = if index.dtype() == iota.dtype() { index.clone() } else { index.try_to_dtype(iota.dtype())? };
    let hit = iota.try_eq(&index)?;
    Tensor::try_where(&hit, x, 0.0)?.try_sum_dim_keepdim(d as i64)
}
