//! `clamp`, `clamp_min`, `clamp_max` with number bounds (one pass, PyTorch's integer-bound
//! rules) and `clamp_tensor` with tensor bounds, with their in-place forms and backward rules.

use super::binary::{binary_forward, broadcast_all, can_cast, check_scalar_fits, check_writable, copy_into, Operand};
use super::Backend;
use crate::autograd::{self, grads, Saved};
use crate::error::{bail, OrPanic, Result};
use crate::scalar::Scalar;
use crate::tensor::{reserve, Tensor};
use kiln_runtime::cpu::elementwise::{map1, map1_inplace, map3};
use kiln_runtime::cpu::CpuBuf;
use kiln_runtime::dtype::{result_type, OperandKind};
use kiln_runtime::op_kind::BinaryOp;
use kiln_runtime::storage::StorageElement;
use kiln_runtime::{match_cpu, DType, Element, FloatElement, Layout};
use smallvec::SmallVec;

/// Which clamp: `clamp(min, max)`, `clamp_min` or `clamp_max` (the same kernel; PyTorch names
/// their backward nodes apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClampKind {
    Both,
    Min,
    Max,
}

impl ClampKind {
    fn name(self, inplace: bool) -> &'static str {
        match (self, inplace) {
            (ClampKind::Both, false) => "clamp",
            (ClampKind::Min, false) => "clamp_min",
            (ClampKind::Max, false) => "clamp_max",
            (ClampKind::Both, true) => "clamp_",
            (ClampKind::Min, true) => "clamp_min_",
            (ClampKind::Max, true) => "clamp_max_",
        }
    }

    /// PyTorch's CPU kernel, which its dtype errors name.
    fn kernel_name(self) -> &'static str {
        match self {
            ClampKind::Both => "clamp_scalar_cpu",
            ClampKind::Min => "clamp_min_scalar_cpu",
            ClampKind::Max => "clamp_max_scalar_cpu",
        }
    }

    fn grad_name(self) -> &'static str {
        match self {
            ClampKind::Both => "ClampBackward1",
            ClampKind::Min => "ClampMinBackward0",
            ClampKind::Max => "ClampMaxBackward0",
        }
    }
}

/// The dtype a clamp of `x` computes in (PyTorch promotes with the bounds: an integer tensor
/// with a float bound gives f32) and the bounds as that dtype will hold them. A float bound must
/// fit a float dtype (`f32.clamp(1e300)` is an error; NaN and infinities are fine). Integer
/// bounds follow PyTorch's integer clamp: a bound past the side of the range that leaves every
/// value alone is saturated (`u8.clamp(-1, 3)` clamps below at 0), while a lower bound above
/// the dtype's largest value, or an upper bound below its smallest, is an error (no value of the
/// dtype could be the result). A Bool result is refused, as PyTorch has no Bool clamp kernel
/// (`bool_tensor.clamp(false, true)`; integer bounds promote a Bool tensor to i64 and work).
#[track_caller]
fn clamp_bounds(
    kind: ClampKind,
    inplace: bool,
    x: &Tensor,
    min: Option<Scalar>,
    max: Option<Scalar>,
) -> Result<(DType, Option<Scalar>, Option<Scalar>)> {
    let op = kind.name(inplace);
    let mut operands: SmallVec<[(DType, OperandKind); 3]> = SmallVec::new();
    operands.push(Operand::Tensor(x.clone()).promotion());
    operands.extend([min, max].into_iter().flatten().map(|b| Operand::Scalar(b).promotion()));
    let dt = result_type(&operands);
    if dt.is_float() {
        for b in [min, max].into_iter().flatten() {
            check_scalar_fits(op, b, dt)?;
        }
        return Ok((dt, min, max));
    }
    check_clamp_dtype(op, kind.kernel_name(), dt)?;
    let (lo, hi) = match dt {
        DType::U8 => (0, u8::MAX as i64),
        DType::I32 => (i32::MIN as i64, i32::MAX as i64),
        _ => (i64::MIN, i64::MAX),
    };
    let name = super::reduce::scalar_type_name(dt);
    let min = match min.map(Scalar::to_i64) {
        Some(v) if v > hi => bail!(op, Value, "clamp min value {v} is outside the representable range of {name}"),
        v => v.map(|v| Scalar::Int(v.max(lo))),
    };
    let max = match max.map(Scalar::to_i64) {
        Some(v) if v < lo => bail!(op, Value, "clamp max value {v} is outside the representable range of {name}"),
        v => v.map(|v| Scalar::Int(v.min(hi))),
    };
    Ok((dt, min, max))
}

/// An error naming `op` when a clamp would compute in Bool: PyTorch's clamp kernels (`kernel`)
/// take numbers only (`"clamp_scalar_cpu" not implemented for 'Bool'`).
#[track_caller]
fn check_clamp_dtype(op: &'static str, kernel: &str, dt: DType) -> Result<()> {
    if dt == DType::Bool {
        bail!(
            op,
            DType,
            "\"{kernel}\" not implemented for 'Bool' (clamp takes numeric tensors; cast with to_dtype first)"
        );
    }
    Ok(())
}

/// Element types with a one-pass clamp kernel: `minimum(maximum(x, lo), hi)` per element with
/// NaN-propagating `maximum`/`minimum` (so a NaN input stays NaN, a NaN bound gives NaN
/// there, and `lo > hi` gives `hi`, as PyTorch), floats in their compute type, integers
/// and bools in i64.
pub(crate) trait ClampElement: StorageElement {
    /// The clamp of `a`'s elements into a new contiguous buffer.
    fn clamp_buf(a: &[Self], la: &Layout, lo: Option<Self>, hi: Option<Self>) -> CpuBuf<Self>;
    /// The clamp of `dst`'s elements through `ld`, in place.
    fn clamp_buf_inplace(dst: &mut [Self], ld: &Layout, lo: Option<Self>, hi: Option<Self>);
    /// The clamp of `a`'s elements between the elements of `lo` and `hi` (tensor bounds; all
    /// three layouts have the output's shape) into a new contiguous buffer.
    fn clamp_tensors_buf(a: &[Self], la: &Layout, lo: &[Self], llo: &Layout, hi: &[Self], lhi: &Layout)
        -> CpuBuf<Self>;
}

/// Runs `$map` (map1 or map1_inplace) over `$a`, `$l`: each element converted with `$to`,
/// clamped with `$max`/`$min` (NaN-propagating maximum/minimum on the converted values), and
/// converted back with `$from`; the bound combination is chosen outside the loop.
macro_rules! clamp_dispatch {
    ($map:ident, $a:expr, $l:expr, $lo:expr, $hi:expr, $to:expr, $from:expr, $max:expr, $min:expr) => {{
        let (lo, hi) = ($lo.map($to), $hi.map($to));
        match (lo, hi) {
            (Some(lo), Some(hi)) => $map($a, $l, |x: Self| $from($min($max($to(x), lo), hi))),
            (Some(lo), None) => $map($a, $l, |x: Self| $from($max($to(x), lo))),
            (None, Some(hi)) => $map($a, $l, |x: Self| $from($min($to(x), hi))),
            (None, None) => unreachable!("a clamp has at least one bound"),
        }
    }};
}

/// [`ClampElement`] for `$t`: values converted with `$to`, clamped with `$max`/`$min`,
/// converted back with `$from`.
macro_rules! clamp_element {
    ($to:expr, $from:expr, $max:expr, $min:expr; $($t:ty),*) => {$(
        impl ClampElement for $t {
            fn clamp_buf(a: &[Self], la: &Layout, lo: Option<Self>, hi: Option<Self>) -> CpuBuf<Self> {
                clamp_dispatch!(map1, a, la, lo, hi, $to, $from, $max, $min)
            }
            fn clamp_buf_inplace(dst: &mut [Self], ld: &Layout, lo: Option<Self>, hi: Option<Self>) {
                clamp_dispatch!(map1_inplace, dst, ld, lo, hi, $to, $from, $max, $min)
            }
            fn clamp_tensors_buf(a: &[Self], la: &Layout, lo: &[Self], llo: &Layout, hi: &[Self], lhi: &Layout) -> CpuBuf<Self> {
                map3(a, la, lo, llo, hi, lhi, |x: $t, l: $t, h: $t| $from($min($max($to(x), $to(l)), $to(h))))
            }
        }
    )*};
}
clamp_element!(|v: Self| v.to_compute(), Self::from_compute,
    |a, b| BinaryOp::Maximum.eval(a, b), |a, b| BinaryOp::Minimum.eval(a, b); f32, f64, half::f16, half::bf16);
clamp_element!(|v: Self| v.to_i64(), Self::from_i64, i64::max, i64::min; i64, i32, u8, bool);

/// `clamp(x, min, max)` out of place, recorded for autograd (`ClampBackward1`, …): the gradient
/// flows where `min < x < max` strictly, and is zero at the bounds, outside them and at NaN (as
/// PyTorch 2.15 computes it).
#[track_caller]
fn clamp_out(kind: ClampKind, x: &Tensor, min: Option<Scalar>, max: Option<Scalar>) -> Result<Tensor> {
    let op = kind.name(false);
    let (dt, lo, hi) = clamp_bounds(kind, false, x, min, max)?;
    let out = match Backend::of(op, &[x])? {
        // Captured as maximum/minimum nodes with run-time scalar bounds: the compiler fuses
        // them into one kernel (and a new bound reuses the plan). On CUDA, the same two
        // elementwise kernels.
        Backend::Capture | Backend::Cuda => {
            let mut r = Operand::Tensor(x.try_to_dtype(dt)?);
            for (op, bound) in [(BinaryOp::Maximum, lo), (BinaryOp::Minimum, hi)] {
                if let Some(b) = bound {
                    r = Operand::Tensor(binary_forward(op, &r, &Operand::Scalar(b))?);
                }
            }
            match r {
                Operand::Tensor(t) => t,
                Operand::Scalar(_) => unreachable!("starts as a tensor"),
            }
        }
        Backend::Cpu => {
            let xt = x.try_to_dtype(dt)?;
            reserve(op, x.shape(), dt)?;
            let storage = xt.with_cpu(op, |s, l| {
                match_cpu!(s, |a: T| T::wrap(T::clamp_buf(
                    a,
                    l,
                    lo.map(crate::tensor::scalar_as::<T>),
                    hi.map(crate::tensor::scalar_as::<T>)
                )))
            })?;
            Tensor::from_cpu_storage(storage, x.shape())
        }
    };
    if !(out.dtype().is_float() && autograd::is_recording(&[x])) {
        return Ok(out);
    }
    Ok(autograd::record(out, kind.grad_name(), &[x], [Saved::of(x)], move |_, g, s| {
        let x = &s[0];
        let inside = match (lo, hi) {
            (Some(lo), Some(hi)) => x.gt(lo).logical_and(x.lt(hi)),
            (Some(lo), None) => x.gt(lo),
            (None, Some(hi)) => x.lt(hi),
            (None, None) => unreachable!("a clamp has at least one bound"),
        };
        grads![Some(Tensor::where_cond(&inside, g, 0.0))]
    }))
}

/// `clamp` in place: the promoted dtype must be `x`'s own (`i32.clamp_(0.5, 3)` is an error).
#[track_caller]
fn clamp_inplace(kind: ClampKind, x: &Tensor, min: Option<Scalar>, max: Option<Scalar>) -> Result<()> {
    let op = kind.name(true);
    let (dt, lo, hi) = clamp_bounds(kind, true, x, min, max)?;
    if dt != x.dtype() {
        let names = (super::reduce::scalar_type_name(dt), super::reduce::scalar_type_name(x.dtype()));
        bail!(op, DType, "result type {} can't be cast to the desired output type {}", names.0, names.1);
    }
    if autograd::is_recording(&[x]) {
        return autograd::inplace(op, x, |old| clamp_out(kind, old, min, max));
    }
    check_writable(op, x)?;
    match Backend::of(op, &[x])? {
        Backend::Capture => {
            crate::capture::assign(x, &clamp_out(kind, x, min, max)?);
            Ok(())
        }
        // Out of place, then copied into the view.
        Backend::Cuda => x.try_copy_(&clamp_out(kind, x, min, max)?).map(|_| ()),
        Backend::Cpu => x.with_cpu_mut(op, |s, l| {
            match_cpu!(s, |d: T| T::clamp_buf_inplace(
                d,
                l,
                lo.map(crate::tensor::scalar_as::<T>),
                hi.map(crate::tensor::scalar_as::<T>)
            ))
        }),
    }
}

/// The dtype and shape of `clamp(x, min, max)` with tensor bounds: PyTorch's `result_type` of
/// the three (a 0-dim bound takes part as a 0-dim tensor), all broadcast together. At least one
/// bound is needed, and two bounds must not make a Bool clamp (PyTorch's `clamp_cpu` kernel
/// takes numbers; one bound is a `maximum`/`minimum`, which takes Bool).
#[track_caller]
fn clamp_tensor_meta(
    op: &'static str,
    x: &Tensor,
    min: Option<&Tensor>,
    max: Option<&Tensor>,
) -> Result<(DType, kiln_runtime::Shape)> {
    if min.is_none() && max.is_none() {
        bail!(op, Value, "torch.clamp: At least one of 'min' or 'max' must not be None");
    }
    let operands: SmallVec<[&Tensor; 3]> = [Some(x), min, max].into_iter().flatten().collect();
    let promotions: SmallVec<[(DType, OperandKind); 3]> =
        operands.iter().map(|t| Operand::Tensor((*t).clone()).promotion()).collect();
    let dt = result_type(&promotions);
    if min.is_some() && max.is_some() {
        check_clamp_dtype(op, "clamp_cpu", dt)?;
    }
    let shapes: SmallVec<[&[usize]; 3]> = operands.iter().map(|t| t.shape()).collect();
    Ok((dt, broadcast_all(op, &shapes)?))
}

/// `clamp(x, min, max)` with tensor bounds, out of place, recorded for autograd
/// (`ClampBackward0`). The gradients are PyTorch 2.15's, read off its results over every
/// order of `x`, `min` and `max` with infinities and NaN (the fixtures
/// `clamp_tensor_*grad/f64/grid`), which differ from the C++ source's `clamp_backward_min_max`
/// at ties: away from ties `x` gets the gradient inside `[min, max]`, `min` below it and `max`
/// above it or wherever `max < min`; a tie of `x` with one bound of an ordered pair
/// (`min < max`) splits the gradient in half between them, while `x == min == max` gives it all to
/// `x`. NaN anywhere gives the bounds nothing (but a `max` below `min`) and `x` the gradient
/// unless a non-NaN bound excludes it. With one bound the rule is `maximum`'s (`minimum`'s):
/// the larger (smaller) operand takes the gradient, a tie splits it, NaN gives it to both.
#[track_caller]
fn clamp_tensor_out(x: &Tensor, min: Option<&Tensor>, max: Option<&Tensor>) -> Result<Tensor> {
    let op = "clamp";
    let (dt, shape) = clamp_tensor_meta(op, x, min, max)?;
    let cast = |t: Option<&Tensor>| t.map(|t| t.try_to_dtype(dt)).transpose();
    let (tx, tmin, tmax) = (x.try_to_dtype(dt)?, cast(min)?, cast(max)?);
    let backend = {
        let operands: SmallVec<[&Tensor; 3]> =
            [Some(&tx), tmin.as_ref(), tmax.as_ref()].into_iter().flatten().collect();
        Backend::of(op, &operands)?
    };
    let out = match (&tmin, &tmax) {
        (Some(lo), Some(hi)) if backend == Backend::Cpu => {
            // One pass: minimum(maximum(x, lo), hi) per element.
            // A bound sharing `x`'s storage is read through a copy: one lock per storage.
            let own = |t: &Tensor| if t.shares_storage_with(&tx) { t.deep_clone() } else { t.clone() };
            let (lo, hi) = (own(lo), own(hi));
            let at = |t: &Tensor| t.layout().broadcast_to(&shape).expect("shape was broadcast");
            let (lx, llo, lhi) = (at(&tx), at(&lo), at(&hi));
            reserve(op, &shape, dt)?;
            let storage = tx.with_cpu(op, |sx, _| {
                lo.with_cpu2(&hi, op, |slo, shi| {
                    match_cpu!(sx, |a: T| T::wrap(T::clamp_tensors_buf(
                        a,
                        &lx,
                        slo.as_buf::<T>().expect("same dtype"),
                        &llo,
                        shi.as_buf::<T>().expect("same dtype"),
                        &lhi
                    )))
                })
            })??;
            Tensor::from_cpu_storage(storage, &shape)
        }
        // One bound, captured (maximum/minimum nodes, which fusion puts in one kernel) or on
        // CUDA (two elementwise kernels).
        _ => {
            let mut r = Operand::Tensor(tx);
            for (op, bound) in [(BinaryOp::Maximum, &tmin), (BinaryOp::Minimum, &tmax)] {
                if let Some(b) = bound {
                    r = Operand::Tensor(binary_forward(op, &r, &Operand::Tensor(b.clone()))?);
                }
            }
            match r {
                Operand::Tensor(t) => t,
                Operand::Scalar(_) => unreachable!("starts as a tensor"),
            }
        }
    };
    let inputs: SmallVec<[&Tensor; 3]> = [Some(x), min, max].into_iter().flatten().collect();
    if !(dt.is_float() && autograd::is_recording(&inputs)) {
        return Ok(out);
    }
    let saved = [Some(x), min, max].into_iter().flatten().map(Saved::of);
    let (has_min, has_max) = (min.is_some(), max.is_some());
    Ok(autograd::record(out, "ClampBackward0", &inputs, saved, move |ctx, g, s| {
        let x = &s[0];
        let (lo, hi) = (has_min.then(|| &s[1]), has_max.then(|| &s[1 + has_min as usize]));
        // The gradient where `full`, half of it where `half` (never both), 0 elsewhere.
        let share = |full: Tensor, half: &Tensor| Tensor::where_cond(&full, g, Tensor::where_cond(half, g * 0.5, 0.0));
        let needs = |i| ctx.needs_input_grad(i);
        match (lo, hi) {
            (Some(lo), Some(hi)) => {
                let ordered = lo.lt(hi);
                let ties_lo = x.eq(lo).logical_and(&ordered);
                let ties_hi = x.eq(hi).logical_and(&ordered);
                grads![
                    needs(0).then(|| {
                        let split = ties_lo.logical_or(&ties_hi);
                        share(x.lt(lo).logical_or(x.gt(hi)).logical_or(&split).logical_not(), &split)
                    }),
                    needs(1).then(|| share(x.lt(lo).logical_and(lo.le(hi)), &ties_lo)),
                    needs(2).then(|| share(hi.lt(lo).logical_or(x.gt(hi).logical_and(lo.le(hi))), &ties_hi)),
                ]
            }
            // `maximum(x, min)`'s rule: `x.le(min).logical_not()` is "x > min or NaN".
            (Some(lo), None) => grads![
                needs(0).then(|| share(x.le(lo).logical_not(), &x.eq(lo))),
                needs(1).then(|| share(x.ge(lo).logical_not(), &x.eq(lo))),
            ],
            (None, Some(hi)) => grads![
                needs(0).then(|| share(x.ge(hi).logical_not(), &x.eq(hi))),
                needs(1).then(|| share(x.le(hi).logical_not(), &x.eq(hi))),
            ],
            (None, None) => unreachable!("a clamp has at least one bound"),
        }
    }))
}

/// `clamp_` with tensor bounds: the broadcast shape must be `x`'s and the promoted dtype must
/// cast to `x`'s (`i32.clamp_(f32 bound)` is an error; an i64 bound into i32 is computed in i64
/// and written back). The clamp is computed out of place, then copied in (two passes).
#[track_caller]
fn clamp_tensor_inplace(x: &Tensor, min: Option<&Tensor>, max: Option<&Tensor>) -> Result<()> {
    let op = "clamp_";
    let (dt, shape) = clamp_tensor_meta(op, x, min, max)?;
    if !can_cast(dt, x.dtype()) {
        let names = (super::reduce::scalar_type_name(dt), super::reduce::scalar_type_name(x.dtype()));
        bail!(op, DType, "result type {} can't be cast to the desired output type {}", names.0, names.1);
    }
    if shape.as_slice() != x.shape() {
        bail!(op, Shape, "output with shape {:?} doesn't match the broadcast shape {:?}", x.shape(), shape);
    }
    let inputs: SmallVec<[&Tensor; 3]> = [Some(x), min, max].into_iter().flatten().collect();
    if autograd::is_recording(&inputs) {
        return autograd::inplace(op, x, |old| clamp_tensor_out(old, min, max));
    }
    check_writable(op, x)?;
    copy_into(x, &clamp_tensor_out(x, min, max)?)
}

impl Tensor {
    /// Limits values to `[min, max]` in one pass (`x.clamp(min, max)`). The dtype is promoted
    /// with the bounds (an integer tensor with a float bound gives f32); NaN stays NaN, a NaN
    /// bound gives NaN everywhere, and `min > max` gives `max` everywhere, as PyTorch. Panics
    /// for a bound the dtype cannot hold (see [`Tensor::try_clamp`]).
    #[track_caller]
    pub fn clamp(&self, min: impl Into<Scalar>, max: impl Into<Scalar>) -> Tensor {
        clamp_out(ClampKind::Both, self, Some(min.into()), Some(max.into())).or_panic()
    }

    /// [`Tensor::clamp`] returning an error: a float bound past a float dtype's range
    /// (`f32.clamp(-1e300, 1e300)`), an integer lower bound above the dtype's largest value
    /// (or upper bound below its smallest), or a clamp computing in Bool (a Bool tensor with
    /// Bool bounds: `"clamp_scalar_cpu" not implemented for 'Bool'`), as PyTorch.
    #[track_caller]
    pub fn try_clamp(&self, min: impl Into<Scalar>, max: impl Into<Scalar>) -> Result<Tensor> {
        clamp_out(ClampKind::Both, self, Some(min.into()), Some(max.into()))
    }

    /// Limits values from below (`x.clamp_min(v)`, `x.clamp(min=v)`).
    #[track_caller]
    pub fn clamp_min(&self, min: impl Into<Scalar>) -> Tensor {
        clamp_out(ClampKind::Min, self, Some(min.into()), None).or_panic()
    }

    /// [`Tensor::clamp_min`] returning an error.
    #[track_caller]
    pub fn try_clamp_min(&self, min: impl Into<Scalar>) -> Result<Tensor> {
        clamp_out(ClampKind::Min, self, Some(min.into()), None)
    }

    /// Limits values from above (`x.clamp_max(v)`, `x.clamp(max=v)`).
    #[track_caller]
    pub fn clamp_max(&self, max: impl Into<Scalar>) -> Tensor {
        clamp_out(ClampKind::Max, self, None, Some(max.into())).or_panic()
    }

    /// [`Tensor::clamp_max`] returning an error.
    #[track_caller]
    pub fn try_clamp_max(&self, max: impl Into<Scalar>) -> Result<Tensor> {
        clamp_out(ClampKind::Max, self, None, Some(max.into()))
    }

    /// In-place [`Tensor::clamp`]; the result must keep this tensor's dtype.
    #[track_caller]
    pub fn clamp_(&self, min: impl Into<Scalar>, max: impl Into<Scalar>) -> &Tensor {
        clamp_inplace(ClampKind::Both, self, Some(min.into()), Some(max.into())).or_panic();
        self
    }

    /// [`Tensor::clamp_`] returning an error (nothing is written then).
    #[track_caller]
    pub fn try_clamp_(&self, min: impl Into<Scalar>, max: impl Into<Scalar>) -> Result<&Tensor> {
        clamp_inplace(ClampKind::Both, self, Some(min.into()), Some(max.into()))?;
        Ok(self)
    }

    /// In-place [`Tensor::clamp_min`].
    #[track_caller]
    pub fn clamp_min_(&self, min: impl Into<Scalar>) -> &Tensor {
        clamp_inplace(ClampKind::Min, self, Some(min.into()), None).or_panic();
        self
    }

    /// [`Tensor::clamp_min_`] returning an error (nothing is written then).
    #[track_caller]
    pub fn try_clamp_min_(&self, min: impl Into<Scalar>) -> Result<&Tensor> {
        clamp_inplace(ClampKind::Min, self, Some(min.into()), None)?;
        Ok(self)
    }

    /// In-place [`Tensor::clamp_max`].
    #[track_caller]
    pub fn clamp_max_(&self, max: impl Into<Scalar>) -> &Tensor {
        clamp_inplace(ClampKind::Max, self, None, Some(max.into())).or_panic();
        self
    }

    /// [`Tensor::clamp_max_`] returning an error (nothing is written then).
    #[track_caller]
    pub fn try_clamp_max_(&self, max: impl Into<Scalar>) -> Result<&Tensor> {
        clamp_inplace(ClampKind::Max, self, None, Some(max.into()))?;
        Ok(self)
    }

    /// Limits values between tensors of bounds, elementwise (`torch.clamp(x, min=t, max=u)`
    /// with tensor bounds): `min`, `max` and `self` broadcast together, the dtype is their
    /// `result_type` (an f32 tensor with f64 bounds gives f64), and either bound may be `None`
    /// (not both). NaN propagates from `self` and from the bounds, and where `min > max` the
    /// result is `max`, as PyTorch. Gradients follow PyTorch's `clamp_backward_min_max`: `self`
    /// gets it where `min <= self <= max` (the bounds included, unlike the scalar
    /// [`Tensor::clamp`]), a bound where it was chosen.
    ///
    /// PyTorch overloads one `clamp` for numbers and tensors; Rust has no overloading, so tensor
    /// bounds have their own name (and `Option`s for PyTorch's `None`). Panics where
    /// [`Tensor::try_clamp_tensor`] returns an error.
    #[track_caller]
    pub fn clamp_tensor(&self, min: Option<&Tensor>, max: Option<&Tensor>) -> Tensor {
        clamp_tensor_out(self, min, max).or_panic()
    }

    /// [`Tensor::clamp_tensor`] returning an error: no bound, shapes that cannot broadcast, or
    /// two bounds with a Bool result (`"clamp_cpu" not implemented for 'Bool'`, as PyTorch).
    #[track_caller]
    pub fn try_clamp_tensor(&self, min: Option<&Tensor>, max: Option<&Tensor>) -> Result<Tensor> {
        clamp_tensor_out(self, min, max)
    }

    /// In-place [`Tensor::clamp_tensor`]: the bounds broadcast to this tensor's shape, and the
    /// promoted dtype must cast to this tensor's (an i32 tensor refuses f32 bounds).
    #[track_caller]
    pub fn clamp_tensor_(&self, min: Option<&Tensor>, max: Option<&Tensor>) -> &Tensor {
        clamp_tensor_inplace(self, min, max).or_panic();
        self
    }

    /// [`Tensor::clamp_tensor_`] returning an error (nothing is written then).
    #[track_caller]
    pub fn try_clamp_tensor_(&self, min: Option<&Tensor>, max: Option<&Tensor>) -> Result<&Tensor> {
        clamp_tensor_inplace(self, min, max)?;
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One pass over any layout; NaN propagates; integer bounds saturate or are refused as
    /// PyTorch does.
    #[test]
    fn one_pass_clamp() {
        let c = Tensor::new(&[-2.0f32, 0.5, f32::NAN, 9.0]).clamp(0.0, 1.0).to_vec::<f32>();
        assert_eq!((c[0], c[1], c[3]), (0.0, 0.5, 1.0));
        assert!(c[2].is_nan());
        let t = Tensor::new(&[[1i32, -5], [7, 3]]).t();
        assert_eq!(t.clamp(0, 4).to_vec::<i32>(), vec![1, 4, 0, 3]);
        assert_eq!(t.clamp(-(1i64 << 40), 1i64 << 40).to_vec::<i32>(), vec![1, 7, -5, 3]);
        let e = t.try_clamp_min(1i64 << 40).unwrap_err().to_string();
        assert!(
            e.starts_with("clamp_min: clamp min value 1099511627776 is outside the representable range of Int"),
            "{e}"
        );
        assert_eq!(t.clamp(0.5, 2).dtype(), DType::F32);
        assert!(t.try_clamp_(0.5, 2).is_err(), "a float result cannot be written into i32");
        assert!(Tensor::new(&[1.0f32]).try_clamp(-1e300, 1e300).is_err());
        let n = Tensor::new(&[1.0f64, -3.0]).clamp_max(f64::NAN).to_vec::<f64>();
        assert!(n.iter().all(|v| v.is_nan()));
        let x = Tensor::new(&[-1.0f32, 0.25, 3.0]);
        x.t().clamp_(0.0, 1.0);
        assert_eq!(x.to_vec::<f32>(), vec![0.0, 0.25, 1.0]);
    }

    /// PyTorch has no Bool clamp kernel: a clamp computing in Bool is refused, naming the op,
    /// the dtype and the caller (integer bounds promote a Bool tensor to i64 and work).
    #[test]
    fn clamp_refuses_bool() {
        let b = Tensor::new(&[true, false]);
        let e = b.try_clamp(false, true).unwrap_err().to_string();
        assert!(e.starts_with("clamp: \"clamp_scalar_cpu\" not implemented for 'Bool'"), "{e}");
        assert!(e.contains("(at src/ops/clamp.rs:"), "{e}");
        assert!(b
            .try_clamp_min(false)
            .unwrap_err()
            .to_string()
            .starts_with("clamp_min: \"clamp_min_scalar_cpu\" not implemented for 'Bool'"));
        assert!(b
            .try_clamp_max_(true)
            .unwrap_err()
            .to_string()
            .starts_with("clamp_max_: \"clamp_max_scalar_cpu\" not implemented for 'Bool'"));
        let e = b.try_clamp_tensor(Some(&b), Some(&b)).unwrap_err().to_string();
        assert!(e.starts_with("clamp: \"clamp_cpu\" not implemented for 'Bool'"), "{e}");
        assert!(std::panic::catch_unwind(|| b.clamp(false, true)).is_err());
        assert_eq!(b.to_vec::<bool>(), vec![true, false], "nothing written");
        // What PyTorch computes: Bool with integer bounds is an i64 clamp; one Bool tensor bound
        // is a maximum/minimum, which Bool has.
        assert_eq!(b.clamp(0, 1).dtype(), DType::I64);
        assert_eq!(b.clamp_tensor(Some(&Tensor::new(&[true])), None).to_vec::<bool>(), vec![true, true]);
        assert_eq!(b.clamp_tensor(None, Some(&Tensor::new(&[false]))).to_vec::<bool>(), vec![false, false]);
    }

    #[test]
    fn clamp_with_tensor_bounds() {
        let x = Tensor::new(&[[-2.0f32, 0.5, 3.0], [f32::NAN, 1.0, -1.0]]);
        let lo = Tensor::new(&[[0.0f32], [-0.5]]);
        let hi = Tensor::new(&[1.0f32, f32::NAN, 2.0]);
        // Broadcast [2, 3] x [2, 1] x [3]; NaN from x and from a bound; contiguous or not.
        let c = x.clamp_tensor(Some(&lo), Some(&hi)).to_vec::<f32>();
        let want = [0.0, f32::NAN, 2.0, f32::NAN, f32::NAN, -0.5];
        assert!(c.iter().zip(&want).all(|(a, b)| a == b || (a.is_nan() && b.is_nan())), "{c:?}");
        let xt = x.t().contiguous().t();
        let ct = xt.clamp_tensor(Some(&lo), Some(&hi)).to_vec::<f32>();
        assert!(ct.iter().zip(&c).all(|(a, b)| a == b || (a.is_nan() && b.is_nan())), "{ct:?}");
        assert_eq!(x.clamp_tensor(Some(&lo), None).to_vec::<f32>()[..3], [0.0, 0.5, 3.0]);
        let c = x.clamp_tensor(None, Some(&hi)).to_vec::<f32>();
        assert!(
            c[0] == -2.0 && c[1].is_nan() && c[2] == 2.0 && c[3].is_nan() && c[4].is_nan() && c[5] == -1.0,
            "{c:?}"
        );
        // Bounds that are views of the clamped tensor itself.
        let v = Tensor::new(&[3.0f32, 1.0, 2.0]);
        assert_eq!(
            v.clamp_tensor(Some(&v.narrow(0, 1, 1)), Some(&v.narrow(0, 2, 1))).to_vec::<f32>(),
            vec![2.0, 1.0, 2.0]
        );
        // min > max gives max.
        let m = Tensor::new(&[5.0f32, -5.0]).clamp_tensor(Some(&Tensor::new(&[2.0f32])), Some(&Tensor::new(&[1.0f32])));
        assert_eq!(m.to_vec::<f32>(), vec![1.0, 1.0]);
        // result_type of the three: i32 with i64 bounds gives i64; a 0-dim f64 bound does not
        // widen an f32 tensor, a 1-dim one does; an integer tensor with float bounds is float.
        let i = Tensor::new(&[-3i32, 4, 9]);
        let r = i.clamp_tensor(Some(&Tensor::new(&[0i64])), Some(&Tensor::new(&[5i64])));
        assert_eq!((r.dtype(), r.to_vec::<i64>()), (DType::I64, vec![0, 4, 5]));
        let f = Tensor::new(&[0.5f32, 2.0]);
        assert_eq!(f.clamp_tensor(None, Some(&Tensor::scalar_opts(1.0, DType::F64))).dtype(), DType::F32);
        assert_eq!(f.clamp_tensor(None, Some(&Tensor::new(&[1.0f64]))).dtype(), DType::F64);
        assert_eq!(i.clamp_tensor(Some(&Tensor::new(&[0.5f32])), None).to_vec::<f32>(), vec![0.5, 4.0, 9.0]);
        // Errors: no bound, shapes that cannot broadcast.
        let e = f.try_clamp_tensor(None, None).unwrap_err().to_string();
        assert!(e.starts_with("clamp: torch.clamp: At least one of 'min' or 'max' must not be None"), "{e}");
        let e = f.try_clamp_tensor(Some(&Tensor::zeros([3])), None).unwrap_err().to_string();
        assert!(e.starts_with("clamp: shapes [2] and [3] cannot broadcast (at src/ops/clamp.rs:"), "{e}");
    }

    #[test]
    fn clamp_tensor_in_place() {
        let x = Tensor::new(&[[-2.0f32, 0.5], [3.0, 1.5]]);
        x.t().clamp_tensor_(Some(&Tensor::new(&[0.0f32, 1.0])), Some(&Tensor::new(&[[1.0f32], [2.0]])));
        assert_eq!(x.to_vec::<f32>(), vec![0.0, 0.5, 1.0, 1.5]);
        // A bound that is the tensor itself (aliasing) and an i64 bound into i32 (computed in
        // i64, written back); a float bound into i32 and a bound that would grow the shape
        // are refused, and nothing is written.
        let i = Tensor::new(&[-3i32, 4, 9]);
        i.clamp_tensor_(None, Some(&Tensor::new(&[5i64])));
        assert_eq!(i.to_vec::<i32>(), vec![-3, 4, 5]);
        i.clamp_tensor_(Some(&i.narrow(0, 1, 1)), None);
        assert_eq!(i.to_vec::<i32>(), vec![4, 4, 5]);
        let e = i.try_clamp_tensor_(Some(&Tensor::new(&[0.5f32])), None).unwrap_err().to_string();
        assert!(e.starts_with("clamp_: result type Float can't be cast to the desired output type Int"), "{e}");
        let e = i.try_clamp_tensor_(Some(&Tensor::zeros([2, 3]).to_dtype(DType::I32)), None).unwrap_err().to_string();
        assert!(e.starts_with("clamp_: output with shape [3] doesn't match the broadcast shape [2, 3]"), "{e}");
        assert_eq!(i.to_vec::<i32>(), vec![4, 4, 5]);
    }
}
