//! Reductions over all elements or over dims: `sum mean prod max min amax amin argmax argmin
//! all any var std logsumexp`, `max_dim`/`min_dim` (values and indices), and `cumsum`.
//!
//! Dims are `i64` (negative counts from the end) given as [`Dims`]: one dim (`x.sum_dim(1)`)
//! or several (`x.sum_dim_keepdim([0, 2])`, see [`super::keepdim`] for the two forms); an empty
//! list reduces every dim, as
//! PyTorch's `dim=[]` does for `sum`, `mean`, `amax`, `var`, … — except `all_dim`/`any_dim`,
//! where an empty list reduces no dim (each element's truth, the input's shape), as PyTorch's
//! `torch.all(x, dim=())` does (it allows empty dims there, numpy's way). A 0-dim tensor accepts
//! dim 0 and -1.
//!
//! Result dtypes follow PyTorch: `sum`, `prod` and `cumsum` of integer or bool input give i64;
//! `mean`, `var` and `std` need a floating-point input; `logsumexp` of integer or bool input
//! gives f32; `max`/`min`/`amax`/`amin` keep the dtype; `argmax`/`argmin` and the indices of
//! `max_dim`/`min_dim` are i64; `all`/`any` give bool (uint8 for uint8 input, as PyTorch).
//! Floating-point sums, means, variances and cumulative sums accumulate in f64 (see
//! `kiln_runtime::cpu::reduce`), so they are at least as accurate as PyTorch's.
//!
//! Autograd: every floating-point result records its backward rule (`SumBackward0`, …), written
//! with tensor ops so it is differentiable again. A rule first puts the reduced dims back as size
//! 1 ([`GradShapes::keep`]) and then broadcasts over the input. `max`/`min`/`amax`/`amin` share
//! the gradient evenly among tied extremes (as PyTorch), `max_dim`/`min_dim` send it to the index
//! they returned, `prod` is exact with zeros in the input. `argmax`, `argmin`, `all`, `any` and
//! indices never record.

use super::keepdim::keepdim_forms;
use super::{kernel_op, kernel_op2};
use crate::autograd::{self, grads, Saved};
use crate::error::{bail, OrPanic, Result};
use crate::tensor::{normalize_dim, Tensor};
use kiln_codegen::cuda::CudaReduce;
use kiln_runtime::cpu::reduce::{self as kernel, OrdElement, ReducePlan, SumElement};
use kiln_runtime::cpu::CpuBuf;
use kiln_runtime::dtype::num_like::Float;
use kiln_runtime::op_kind::ReduceOp;
use kiln_runtime::storage::StorageElement;
use kiln_runtime::{match_cpu, CpuStorage, DType, Element, FloatElement, Layout, Shape};
use smallvec::SmallVec;

/// The dims a reduction runs over: one dim (`1`, `-1`) or a list (`[0, 2]`, a `&[i64]`,
/// `vec![0, 2]`). Negative dims count from the end; an empty list means every dim (no dim for
/// `all_dim`/`any_dim`, as PyTorch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dims(pub(crate) SmallVec<[i64; 6]>);

impl From<i64> for Dims {
    fn from(dim: i64) -> Dims {
        Dims(SmallVec::from_slice(&[dim]))
    }
}

impl From<&[i64]> for Dims {
    fn from(dims: &[i64]) -> Dims {
        Dims(SmallVec::from_slice(dims))
    }
}

impl<const N: usize> From<[i64; N]> for Dims {
    fn from(dims: [i64; N]) -> Dims {
        Dims(SmallVec::from_slice(&dims))
    }
}

impl<const N: usize> From<&[i64; N]> for Dims {
    fn from(dims: &[i64; N]) -> Dims {
        Dims(SmallVec::from_slice(dims))
    }
}

impl From<Vec<i64>> for Dims {
    fn from(dims: Vec<i64>) -> Dims {
        Dims(SmallVec::from_vec(dims))
    }
}

impl From<&Vec<i64>> for Dims {
    fn from(dims: &Vec<i64>) -> Dims {
        Dims(SmallVec::from_slice(dims))
    }
}

/// Runs `$body` with `$buf` bound to the typed buffer of a floating-point `CpuStorage` and `$T`
/// naming its element type. Callers check the dtype first (with the op's error); other dtypes
/// never get here.
macro_rules! match_float {
    ($s:expr, |$buf:ident : $T:ident| $body:expr) => {
        match $s {
            CpuStorage::F32($buf) => {
                type $T = f32;
                $body
            }
            CpuStorage::F64($buf) => {
                type $T = f64;
                $body
            }
            CpuStorage::F16($buf) => {
                type $T = half::f16;
                $body
            }
            CpuStorage::BF16($buf) => {
                type $T = half::bf16;
                $body
            }
            other => unreachable!("a {} input reached a floating-point kernel", other.dtype()),
        }
    };
}
pub(crate) use match_float;

/// A typed buffer as a `CpuStorage`.
pub(crate) fn wrap<T: StorageElement>(buf: CpuBuf<T>) -> CpuStorage {
    T::wrap(buf)
}

/// The elements of a contiguous view; empty for an empty view (which may sit past the end of its
/// storage).
pub(crate) fn contiguous_elems<'a, T>(buf: &'a [T], layout: &Layout) -> &'a [T] {
    if layout.numel() == 0 {
        return &[];
    }
    &buf[layout.offset()..layout.offset() + layout.numel()]
}

/// `(outer, n, inner)`: the sizes before `dim`, of `dim`, and after it (all 1 for a 0-dim
/// shape), for ops along one dim of a contiguous tensor.
pub(crate) fn split_at_dim(shape: &[usize], dim: usize) -> (usize, usize, usize) {
    if shape.is_empty() {
        return (1, 1, 1);
    }
    (shape[..dim].iter().product(), shape[dim], shape[dim + 1..].iter().product())
}

/// PyTorch's C++ name of a dtype, as its "not implemented for 'Long'" messages print it.
pub(crate) fn scalar_type_name(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool => "Bool",
        DType::U8 => "Byte",
        DType::I32 => "Int",
        DType::I64 => "Long",
        DType::F16 => "Half",
        DType::BF16 => "BFloat16",
        DType::F32 => "Float",
        DType::F64 => "Double",
    }
}

/// The dims a reduction covers and the shape of its result.
struct Reduction {
    mask: SmallVec<[bool; 6]>,
    shape: Shape,
    /// True when the caller gave no dims (every dim is reduced).
    all: bool,
}

impl Reduction {
    /// Resolves `dims` (empty: every dim) against `t`.
    #[track_caller]
    fn new(op: &'static str, t: &Tensor, dims: &[i64], keepdim: bool) -> Result<Reduction> {
        let nd = t.dim();
        let mut seen: SmallVec<[bool; 6]> = SmallVec::from_elem(false, nd.max(1));
        for &d in dims {
            let i = normalize_dim(op, d, nd)?;
            if seen[i] {
                bail!(op, Index, "dim {i} appears multiple times in the list of dims {dims:?}");
            }
            seen[i] = true;
        }
        let mask: SmallVec<[bool; 6]> = (0..nd).map(|d| dims.is_empty() || seen[d]).collect();
        let shape = t
            .shape()
            .iter()
            .zip(&mask)
            .filter_map(|(&n, &r)| match (r, keepdim) {
                (false, _) => Some(n),
                (true, true) => Some(1),
                (true, false) => None,
            })
            .collect();
        Ok(Reduction { mask, shape, all: dims.is_empty() })
    }

    /// An error when an output would reduce zero elements (max, min, argmax, … have no value
    /// there), worded as PyTorch words it.
    #[track_caller]
    fn check_nonempty(&self, op: &'static str, t: &Tensor) -> Result<()> {
        if self.all && t.numel() == 0 {
            bail!(
                op,
                Index,
                "expected reduction dim to be specified for input.numel() == 0 (input shape {:?}); give the reduction dim",
                t.shape()
            );
        }
        if let Some(d) = (0..t.dim()).find(|&d| self.mask[d] && t.shape()[d] == 0) {
            bail!(op, Index, "expected reduction dim {d} to have non-zero size (input shape {:?})", t.shape());
        }
        Ok(())
    }

    /// What the backward rule of this reduction of `t` needs to know about its shapes.
    fn grad_shapes(&self, t: &Tensor) -> GradShapes {
        let reduced = |d: usize| self.mask[d];
        let input: Vec<i64> = t.shape().iter().map(|&n| n as i64).collect();
        GradShapes {
            kept: (0..t.dim()).map(|d| if reduced(d) { 1 } else { input[d] }).collect(),
            dims: (0..t.dim()).filter(|&d| reduced(d)).map(|d| d as i64).collect(),
            count: (0..t.dim()).filter(|&d| reduced(d)).map(|d| t.shape()[d]).product(),
            input,
        }
    }

    /// [`Reduction::run`] for a reduction the compiler can generate (`op`, a sum divided by the
    /// count less `c` for `divide: Some(c)`; integer and Bool sums and products give i64, as eager): inside a compiled step it becomes a `Reduce` node, fused with the
    /// elementwise work it reduces; `kernel` stays its eager fallback.
    #[track_caller]
    fn run_fusable(
        &self,
        name: &'static str,
        t: &Tensor,
        (op, divide): (ReduceOp, Option<i64>),
        cuda: Option<(CudaReduce, i64)>,
        kernel: impl FnOnce(&CpuStorage, &ReducePlan) -> CpuStorage + Send + 'static,
    ) -> Result<Tensor> {
        // f16/bf16 too: the CPU JIT accumulates them in f64 as the eager kernels do (CUDA's
        // emitter in f32).
        let generated = t.dtype().is_float() || matches!(t.dtype(), DType::I64 | DType::I32);
        let dtype = match op {
            ReduceOp::Sum | ReduceOp::Prod if !t.dtype().is_float() => DType::I64,
            _ => t.dtype(),
        };
        if !crate::capture::is_active() || !generated || t.dim() > 64 {
            return self.run(name, t, dtype, cuda, kernel);
        }
        let (mask, shape) = (self.mask.clone(), self.shape.clone());
        // The node's eager fallback (a reduction fusion leaves alone, such as a sum over
        // leading dims) runs on the value's device.
        Ok(crate::capture::reduce(op, divide, t, &self.mask, &self.shape, dtype, move |ins| {
            if ins[0].device().is_cuda() {
                return cuda_fallback(name, &ins[0], &mask, &shape, cuda, divide);
            }
            let storage = ins[0].with_cpu(name, |s, l| kernel(s, &ReducePlan::new(l, &mask)))?;
            Ok(Tensor::from_cpu_storage(storage, &shape))
        }))
    }

    /// Runs `kernel` on `t`'s storage with this reduction's plan; the result gets this shape.
    /// A CUDA `t` runs the `cuda` reduction (with its parameter) instead; `None`: the op has
    /// no CUDA kernel. Inside a compiled step, an opaque node running the same kernel.
    #[track_caller]
    fn run(
        &self,
        op: &'static str,
        t: &Tensor,
        dtype: DType,
        cuda: Option<(CudaReduce, i64)>,
        kernel: impl FnOnce(&CpuStorage, &ReducePlan) -> CpuStorage + Send + 'static,
    ) -> Result<Tensor> {
        debug_assert!(cuda.is_none_or(|(kind, _)| kind.out_dtype(t.dtype()) == dtype));
        let (mask, shape) = (self.mask.clone(), self.shape.clone());
        let cpu = move |ins: &[Tensor]| {
            let storage = ins[0].with_cpu(op, |s, l| kernel(s, &ReducePlan::new(l, &mask)))?;
            Ok(Tensor::from_cpu_storage(storage, &shape))
        };
        let (mask, shape) = (self.mask.clone(), self.shape.clone());
        let on_cuda = move |ins: &[Tensor]| match cuda {
            Some((kind, param)) => Ok(crate::cuda::reduce(op, kind, &ins[0], &mask, &shape, param)?.0),
            None => Err(crate::tensor::not_on_cuda(op)),
        };
        kernel_op(op, &[t], (&self.shape, dtype), cpu, on_cuda)
    }
}

/// What a reduction's backward rule needs: the input's shape, the result's shape with the reduced
/// dims kept as size 1, the reduced dims (in increasing order; empty for a 0-dim input, which
/// reduction ops read as "every dim") and how many elements each result reduces.
#[derive(Clone, Debug)]
struct GradShapes {
    input: Vec<i64>,
    kept: Vec<i64>,
    dims: Vec<i64>,
    count: usize,
}

impl GradShapes {
    /// `t`, shaped like the result, with the reduced dims put back as size 1 (a view; the same
    /// tensor when the result kept them).
    fn keep(&self, t: &Tensor) -> Tensor {
        if t.dim() == self.kept.len() {
            t.clone()
        } else {
            t.reshape(&self.kept)
        }
    }

    /// `g`, shaped like the result, broadcast back over the input (a view).
    fn expand(&self, g: &Tensor) -> Tensor {
        self.keep(g).expand(&self.input)
    }

    /// The gradient of a max/min over these dims: `g` shared evenly among the elements of `x`
    /// equal to their result `out` (among the NaNs when the result is NaN), zero elsewhere.
    fn evenly_distribute(&self, x: &Tensor, out: &Tensor, g: &Tensor) -> Tensor {
        let out = self.keep(out);
        let both_nan = x.ne(x).logical_and(out.ne(&out));
        let hit = x.eq(&out).logical_or(&both_nan).to_dtype(x.dtype());
        let ties = hit.sum_dim_keepdim(self.dims.clone());
        self.keep(g) / ties * hit
    }

    /// The gradient of a product over these dims, `g · Π_{j≠i} x_j` for each `x_i`: `g·out/x`
    /// when `x` has no zero, else split into the product of the non-zero others and of the zero
    /// others, so that one zero gives the product of the rest and two or more give zero. Exact
    /// to second order too: the product of the zero others is written as 1 (none), their sum
    /// (one: value 0, derivative 1) or 0 (more).
    fn prod_backward(&self, x: &Tensor, out: &Tensor, g: &Tensor) -> Tensor {
        let is_zero = x.eq(0.0);
        if !is_zero.any().item::<bool>() {
            return self.keep(g) * self.keep(out) / x;
        }
        let dt = x.dtype();
        let z = is_zero.to_dtype(dt);
        let nonzero = x + &z; // the zeros replaced by ones
        let nonzero_others = nonzero.prod_dim_keepdim(self.dims.clone()) / &nonzero;
        let x_at_zeros = x * &z; // zero-valued, derivative 1 at the zeros
        let zero_others = z.sum_dim_keepdim(self.dims.clone()) - &z;
        let zero_others_sum = x_at_zeros.sum_dim_keepdim(self.dims.clone()) - &x_at_zeros;
        let none = zero_others.eq(0.0).to_dtype(dt);
        let one = zero_others.eq(1.0).to_dtype(dt);
        self.keep(g) * nonzero_others * (none + one * zero_others_sum)
    }

    /// The gradient of a variance with `correction` over these dims:
    /// `g · 2 (x - mean) / (n - correction)`.
    fn var_backward(&self, x: &Tensor, correction: f64, g: &Tensor) -> Tensor {
        let centered = x - x.mean_dim_keepdim(self.dims.clone());
        self.keep(g) * centered * (2.0 / (self.count as f64 - correction))
    }
}

/// True when a reduction of `t` that gave `out` must record history.
fn recording(t: &Tensor, out: &Tensor) -> bool {
    out.dtype().is_float() && autograd::is_recording(&[t])
}

/// sum, prod, amax, amin (and max/min over all elements): one function per op family, the
/// op kind matched outside the kernels so each loop is monomorphized;
/// `grad_name` names the node recorded when the result is differentiated.
#[track_caller]
fn reduce_values(
    t: &Tensor,
    name: &'static str,
    grad_name: &'static str,
    op: ReduceOp,
    dims: &[i64],
    keepdim: bool,
) -> Result<Tensor> {
    if let Some(c) = crate::amp::autocast::operands(name, &[Some(t)])? {
        return reduce_values(c.arg(0), name, grad_name, op, dims, keepdim);
    }
    let red = Reduction::new(name, t, dims, keepdim)?;
    if op.needs_elements() {
        red.check_nonempty(name, t)?;
    }
    let cuda = match op {
        ReduceOp::Sum => CudaReduce::Sum,
        ReduceOp::Prod => CudaReduce::Prod,
        ReduceOp::Max => CudaReduce::Max,
        ReduceOp::Min => CudaReduce::Min,
    };
    let out = red.run_fusable(name, t, (op, None), Some((cuda, 0)), move |s, plan| match op {
        ReduceOp::Sum => match_cpu!(s, |b: T| wrap(kernel::reduce(b, plan, &kernel::Sum, |a, _| T::from_acc(a)))),
        ReduceOp::Prod => match_cpu!(s, |b: T| wrap(kernel::reduce(b, plan, &kernel::Prod, |a, _| T::from_acc(a)))),
        ReduceOp::Max => {
            match_cpu!(s, |b: T| wrap(kernel::reduce(b, plan, &kernel::MinMax::<true>, |a, _| T::from_ord(a))))
        }
        ReduceOp::Min => {
            match_cpu!(s, |b: T| wrap(kernel::reduce(b, plan, &kernel::MinMax::<false>, |a, _| T::from_ord(a))))
        }
    })?;
    if !recording(t, &out) {
        return Ok(out);
    }
    let sh = red.grad_shapes(t);
    Ok(match op {
        ReduceOp::Sum => autograd::record(out, grad_name, &[t], [], move |_, g, _| grads![Some(sh.expand(g))]),
        ReduceOp::Prod => autograd::record(out, grad_name, &[t], [Saved::of(t), Saved::Output], move |_, g, s| {
            grads![Some(sh.prod_backward(&s[0], &s[1], g))]
        }),
        ReduceOp::Max | ReduceOp::Min => {
            autograd::record(out, grad_name, &[t], [Saved::of(t), Saved::Output], move |_, g, s| {
                grads![Some(sh.evenly_distribute(&s[0], &s[1], g))]
            })
        }
    })
}

/// An error unless `t` is floating point, with the words PyTorch uses for `mean`.
#[track_caller]
fn check_mean_dtype(op: &'static str, t: &Tensor) -> Result<()> {
    if !t.dtype().is_float() {
        bail!(
            op,
            DType,
            "could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: {}",
            scalar_type_name(t.dtype())
        );
    }
    Ok(())
}

/// mean over `dims`; the node recorded is named `grad_name`.
#[track_caller]
fn mean_impl(t: &Tensor, grad_name: &'static str, dims: &[i64], keepdim: bool) -> Result<Tensor> {
    let red = Reduction::new("mean", t, dims, keepdim)?;
    check_mean_dtype("mean", t)?;
    let out = red.run_fusable("mean", t, (ReduceOp::Sum, Some(0)), Some((CudaReduce::Mean, 0)), divided_sum(0.0))?;
    if !recording(t, &out) {
        return Ok(out);
    }
    let sh = red.grad_shapes(t);
    Ok(autograd::record(out, grad_name, &[t], [], move |_, g, _| grads![Some(sh.expand(g) / sh.count as f64)]))
}

/// Variance (or its square root with `sqrt`) with Bessel's `correction`, by two passes in f64:
/// the mean, then the sum of squared deviations, divided by `max(n - correction, 0)` (so too
/// few elements give inf or NaN, as in PyTorch).
#[track_caller]
fn var_impl(t: &Tensor, op: &'static str, dims: &[i64], correction: i64, keepdim: bool, sqrt: bool) -> Result<Tensor> {
    let red = Reduction::new(op, t, dims, keepdim)?;
    if !t.dtype().is_float() {
        bail!(op, DType, "std and var only support floating point dtypes (got {})", t.dtype());
    }
    if crate::capture::is_active() && matches!(t.dtype(), DType::F32 | DType::F64) {
        let out = {
            let _no_grad = crate::no_grad_guard();
            let var = captured_var(&red, op, t, correction)?;
            if sqrt {
                var.sqrt()
            } else {
                var
            }
        };
        return finish_var(&red, t, out, correction as f64, sqrt);
    }
    let cuda = Some((CudaReduce::Var { sqrt }, correction));
    let correction = correction as f64;
    let out = red.run(op, t, t.dtype(), cuda, move |s, plan| {
        match_float!(s, |b: T| {
            let means = kernel::reduce(b, plan, &kernel::Sum, |a, n| a / n as f64);
            wrap(kernel::reduce(b, plan, &kernel::SqDev(&means), |(m2, _), n| {
                let var = m2 / (n as f64 - correction).max(0.0);
                <T as Element>::from_f64(if sqrt { var.sqrt() } else { var })
            }))
        })
    })?;
    finish_var(&red, t, out, correction, sqrt)
}

/// A variance inside a compiled step: the mean, then the squared deviations' sum divided by
/// `max(n - correction, 0)`, as two reductions the compiler generates (the second recomputes
/// the deviations in its prologue). f32 input computes its mean and deviations in f32, so it
/// differs from the eager f64 passes by a few f32 ulp.
#[track_caller]
fn captured_var(red: &Reduction, op: &'static str, t: &Tensor, correction: i64) -> Result<Tensor> {
    let dims: Vec<i64> = red.mask.iter().enumerate().filter(|(_, &r)| r).map(|(d, _)| d as i64).collect();
    let mean = t.try_mean_dim_keepdim(dims)?;
    let dev = t.try_sub(&mean)?;
    let squares = dev.try_mul(&dev)?;
    red.run_fusable(op, &squares, (ReduceOp::Sum, Some(correction)), None, divided_sum(correction as f64))
}

/// The eager CUDA kernel of a captured reduction of the CUDA tensor `t` (`mask`: the reduced
/// dims; the result shaped `shape`): `cuda`'s kind and parameter, or, for a sum divided by
/// `max(n - correction, 0)` with no kind of its own (a variance's), the sum, then the division.
#[track_caller]
fn cuda_fallback(
    name: &'static str,
    t: &Tensor,
    mask: &[bool],
    shape: &[usize],
    cuda: Option<(CudaReduce, i64)>,
    divide: Option<i64>,
) -> Result<Tensor> {
    match (cuda, divide) {
        (Some((kind, param)), _) => Ok(crate::cuda::reduce(name, kind, t, mask, shape, param)?.0),
        (None, Some(correction)) => {
            let n: usize = t.shape().iter().zip(mask).filter(|(_, &r)| r).map(|(&s, _)| s).product();
            let sum = crate::cuda::reduce(name, CudaReduce::Sum, t, mask, shape, 0)?.0;
            sum.try_div((n as f64 - correction as f64).max(0.0))
        }
        (None, None) => Err(crate::tensor::not_on_cuda(name)),
    }
}

/// The eager kernel of a float sum divided by `max(n - correction, 0)` (a mean for 0).
fn divided_sum(correction: f64) -> impl FnOnce(&CpuStorage, &ReducePlan) -> CpuStorage + 'static {
    move |s, plan| {
        match_float!(s, |b: T| wrap(kernel::reduce(b, plan, &kernel::Sum, |a, n| <T as Element>::from_f64(
            a / (n as f64 - correction).max(0.0)
        ))))
    }
}

/// Records the backward of a variance (`sqrt`: a standard deviation) `out` of `t`.
#[track_caller]
fn finish_var(red: &Reduction, t: &Tensor, out: Tensor, correction: f64, sqrt: bool) -> Result<Tensor> {
    if !recording(t, &out) {
        return Ok(out);
    }
    let sh = red.grad_shapes(t);
    if !sqrt {
        return Ok(autograd::record(out, "VarBackward0", &[t], [Saved::of(t)], move |_, g, s| {
            grads![Some(sh.var_backward(&s[0], correction, g))]
        }));
    }
    // d std = d var / (2 std), zero where std is zero (as PyTorch).
    Ok(autograd::record(out, "StdBackward0", &[t], [Saved::of(t), Saved::Output], move |_, g, s| {
        let std = sh.keep(&s[1]);
        let is_zero = std.eq(0.0).to_dtype(std.dtype());
        let g_var = sh.keep(g) * (1.0 - &is_zero) / ((std + &is_zero) * 2.0);
        grads![Some(sh.var_backward(&s[0], correction, &g_var))]
    }))
}

/// log Σ exp(x), as PyTorch computes it: shifted by the max (0 where the max is infinite).
#[track_caller]
fn logsumexp_impl(t: &Tensor, dims: &[i64], keepdim: bool) -> Result<Tensor> {
    if let Some(c) = crate::amp::autocast::operands("logsumexp", &[Some(t)])? {
        return logsumexp_impl(c.arg(0), dims, keepdim);
    }
    let red = Reduction::new("logsumexp", t, dims, keepdim)?;
    let x = if t.dtype().is_float() { t.clone() } else { t.try_to_dtype(DType::F32)? };
    let out = red.run("logsumexp", &x, x.dtype(), Some((CudaReduce::LogSumExp, 0)), |s, plan| {
        match_float!(s, |b: T| {
            let inf = <T as FloatElement>::Compute::c(f64::INFINITY);
            let shifts = kernel::reduce(b, plan, &kernel::MinMax::<true>, |m, _| {
                let m = T::from_ord(m).to_compute();
                if m.abs() == inf {
                    <T as FloatElement>::Compute::zero()
                } else {
                    m
                }
            });
            wrap(kernel::reduce(b, plan, &kernel::SumExp(&shifts), |(sum, shift), _| {
                <T as Element>::from_f64(sum.ln() + shift.to_f64())
            }))
        })
    })?;
    if !recording(t, &out) {
        return Ok(out);
    }
    let sh = red.grad_shapes(t);
    Ok(autograd::record(out, "LogsumexpBackward0", &[t], [Saved::of(t), Saved::Output], move |_, g, s| {
        grads![Some(sh.keep(g) * (&s[0] - sh.keep(&s[1])).exp())]
    }))
}

/// argmax (`MAX`) or argmin over one dim, or over all elements when `dim` is `None`.
#[track_caller]
fn arg_impl<const MAX: bool>(t: &Tensor, op: &'static str, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
    let dims = dim.map(|d| [d]);
    let red = Reduction::new(op, t, dims.as_ref().map_or(&[][..], |d| &d[..]), keepdim)?;
    if t.dtype() == DType::Bool {
        bail!(op, DType, "does not support bool input");
    }
    red.check_nonempty(op, t)?;
    red.run(op, t, DType::I64, Some((CudaReduce::Arg { max: MAX, values: false }, 0)), |s, plan| {
        match_cpu!(s, |b: T| wrap(kernel::reduce(b, plan, &kernel::ArgMinMax::<MAX>, |(_, i), _| i as i64)))
    })
}

/// max_dim (`MAX`) or min_dim: values and the index of the first occurrence along `dim`.
#[track_caller]
fn minmax_dim_impl<const MAX: bool>(t: &Tensor, op: &'static str, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
    let red = Reduction::new(op, t, &[dim], keepdim)?;
    red.check_nonempty(op, t)?;
    let (mask, shape) = (red.mask.clone(), red.shape.clone());
    let cpu = move |ins: &[Tensor]| {
        let (values, indices) = ins[0].with_cpu(op, |s, l| {
            let plan = ReducePlan::new(l, &mask);
            match_cpu!(s, |b: T| {
                let (v, i) = kernel::min_max_with_indices::<T, MAX>(b, &plan);
                (wrap(v), i)
            })
        })?;
        Ok((Tensor::from_cpu_storage(values, &shape), Tensor::from_buf(indices, &shape)))
    };
    let (mask, shape) = (red.mask.clone(), red.shape.clone());
    let cuda = move |ins: &[Tensor]| {
        let (v, i) = crate::cuda::reduce(op, CudaReduce::Arg { max: MAX, values: true }, &ins[0], &mask, &shape, 0)?;
        Ok((v, i.expect("max_dim/min_dim kernels write indices")))
    };
    let outs = [(&red.shape[..], t.dtype()), (&red.shape[..], DType::I64)];
    let (values, indices) = kernel_op2(op, &[t], outs, cpu, cuda)?;
    if !recording(t, &values) {
        return Ok((values, indices));
    }
    // The gradient goes to the returned index: a one-hot mask along the dim, as tensor ops.
    let sh = red.grad_shapes(t);
    let grad_name = if MAX { "MaxBackward0" } else { "MinBackward0" };
    let values = autograd::record(values, grad_name, &[t], [Saved::of(&indices)], move |_, g, s| {
        let mut along = vec![1; sh.input.len()];
        for &d in &sh.dims {
            along[d as usize] = sh.input[d as usize];
        }
        let positions = Tensor::arange(sh.count as i64).reshape(&along).to(&s[0].device());
        let onehot = positions.eq(sh.keep(&s[0])).to_dtype(g.dtype());
        grads![Some(sh.keep(g) * onehot)]
    });
    Ok((values, indices))
}

/// all (`ALL`) or any: bool results, uint8 for uint8 input (as PyTorch). `dims: None` reduces
/// every dim; an empty list reduces none (PyTorch's `all(x, dim=())`: each element's truth).
#[track_caller]
fn all_any_impl<const ALL: bool>(t: &Tensor, op: &'static str, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
    let dims = match dims {
        None => &[][..],
        Some([]) => {
            let truth = t.try_ne(0)?;
            return if t.dtype() == DType::U8 { truth.try_to_dtype(DType::U8) } else { Ok(truth) };
        }
        Some(d) => d,
    };
    let red = Reduction::new(op, t, dims, keepdim)?;
    let dtype = if t.dtype() == DType::U8 { DType::U8 } else { DType::Bool };
    let cuda = if ALL { CudaReduce::All } else { CudaReduce::Any };
    red.run(op, t, dtype, Some((cuda, 0)), |s, plan| match s {
        CpuStorage::U8(b) => wrap(kernel::reduce(b, plan, &kernel::AllAny::<ALL>, |a, _| a as u8)),
        _ => match_cpu!(s, |b: T| wrap(kernel::reduce(b, plan, &kernel::AllAny::<ALL>, |a, _| a))),
    })
}

#[track_caller]
fn cumsum_impl(t: &Tensor, dim: i64) -> Result<Tensor> {
    if let Some(c) = crate::amp::autocast::operands("cumsum", &[Some(t)])? {
        return cumsum_impl(c.arg(0), dim);
    }
    let d = t.normalize_dim("cumsum", dim)?;
    let (outer, n, inner) = split_at_dim(t.shape(), d);
    let dtype = CudaReduce::CumSum.out_dtype(t.dtype());
    let cpu = move |ins: &[Tensor]| {
        let x = ins[0].contiguous();
        let storage = x.with_cpu("cumsum", |s, l| {
            match_cpu!(s, |b: T| wrap(kernel::cumsum(contiguous_elems(b, l), outer, n, inner)))
        })?;
        Ok(Tensor::from_cpu_storage(storage, x.shape()))
    };
    let cuda = move |ins: &[Tensor]| crate::cuda::along("cumsum", CudaReduce::CumSum, &ins[0], d);
    let out = kernel_op("cumsum", &[t], (t.shape(), dtype), cpu, cuda)?;
    if !(out.dtype().is_float() && autograd::is_recording(&[t])) {
        return Ok(out);
    }
    // The reversed cumulative sum of g: out_j = Σ_{i<=j} x_i, so dx_i = Σ_{j>=i} g_j.
    let d = d as i64;
    Ok(autograd::record(out, "CumsumBackward0", &[t], [], move |_, g, _| {
        grads![Some(g.sum_dim_keepdim(d) - g.cumsum(d) + g)]
    }))
}

/// The `Tensor` methods of every row of `kiln_runtime::reduce_op_table!`: the reduction over
/// every element (`x.sum()`) and over dims (`x.sum_dim(dims)`, `x.sum_dim_keepdim(dims)`), each
/// with its `try_` form.
macro_rules! reduce_methods {
    ($($v:ident $name:literal [$all:ident $try_all:ident $grad_all:literal]
        [$dims:ident $try_dims:ident $keep:ident $try_keep:ident $dims_name:literal $grad_dims:literal]
        $what:literal $note:literal;)*) => {
        impl Tensor {
            $(
                #[doc = concat!("The ", $what, " of all elements, as a 0-dim tensor (`x.", $name, "()`); ", $note, ".")]
                #[track_caller]
                pub fn $all(&self) -> Tensor {
                    self.$try_all().or_panic()
                }

                #[doc = concat!("[`Tensor::", stringify!($all), "`] returning an error instead of panicking.")]
                #[track_caller]
                pub fn $try_all(&self) -> Result<Tensor> {
                    reduce_values(self, $name, $grad_all, ReduceOp::$v, &[], false)
                }
            )*
        }

        keepdim_forms! {$(
            #[doc = concat!("The ", $what, " over `dims` (`x.", $dims_name, "(dim)`; one dim or a list, negative from ",
                "the end); ", $note, ".")]
            #[errors = "a dim out of range or repeated (and for an empty reduction where the op has no value)"]
            $dims $try_dims $keep $try_keep (dims: impl Into<Dims>) -> Tensor
                = |x, keepdim| reduce_values(x, $dims_name, $grad_dims, ReduceOp::$v, &dims.into().0, keepdim);
        )*}
    };
}

kiln_runtime::reduce_op_table!(reduce_methods);

impl Tensor {
    /// The mean of all elements (`x.mean()`); floating-point input only, as in PyTorch (NaN
    /// for an empty tensor).
    #[track_caller]
    pub fn mean(&self) -> Tensor {
        self.try_mean().or_panic()
    }

    /// [`Tensor::mean`] returning an error for a non-floating-point input.
    #[track_caller]
    pub fn try_mean(&self) -> Result<Tensor> {
        mean_impl(self, "MeanBackward0", &[], false)
    }

    /// The index of the largest element in row-major order, as a 0-dim i64 tensor
    /// (`x.argmax()`): the first occurrence on ties, the first NaN if there is one. Bool input
    /// is rejected, as in PyTorch.
    #[track_caller]
    pub fn argmax(&self) -> Tensor {
        self.try_argmax().or_panic()
    }

    /// [`Tensor::argmax`] returning an error for an empty or bool tensor.
    #[track_caller]
    pub fn try_argmax(&self) -> Result<Tensor> {
        arg_impl::<true>(self, "argmax", None, false)
    }

    /// The index of the smallest element in row-major order (`x.argmin()`).
    #[track_caller]
    pub fn argmin(&self) -> Tensor {
        self.try_argmin().or_panic()
    }

    /// [`Tensor::argmin`] returning an error for an empty or bool tensor.
    #[track_caller]
    pub fn try_argmin(&self) -> Result<Tensor> {
        arg_impl::<false>(self, "argmin", None, false)
    }

    /// Whether every element is non-zero (`x.all()`); true for an empty tensor.
    #[track_caller]
    pub fn all(&self) -> Tensor {
        self.try_all().or_panic()
    }

    /// [`Tensor::all`] returning an error (for a device this build cannot use).
    #[track_caller]
    pub fn try_all(&self) -> Result<Tensor> {
        all_any_impl::<true>(self, "all", None, false)
    }

    /// Whether any element is non-zero (`x.any()`); false for an empty tensor.
    #[track_caller]
    pub fn any(&self) -> Tensor {
        self.try_any().or_panic()
    }

    /// [`Tensor::any`] returning an error (for a device this build cannot use).
    #[track_caller]
    pub fn try_any(&self) -> Result<Tensor> {
        all_any_impl::<false>(self, "any", None, false)
    }

    /// The variance of all elements divided by n - 1 (`x.var()`, PyTorch's default
    /// `correction=1`); [`Tensor::var_correction`] takes another correction. Floating-point
    /// input only.
    #[track_caller]
    pub fn var(&self) -> Tensor {
        self.try_var().or_panic()
    }

    /// [`Tensor::var`] returning an error for a non-floating-point input.
    #[track_caller]
    pub fn try_var(&self) -> Result<Tensor> {
        var_impl(self, "var", &[], 1, false, false)
    }

    /// The variance over `dims` (every dim for an empty list) divided by `n - correction`
    /// (`x.var(dim, correction=c, keepdim=k)`; `correction` 0 is PyTorch's `unbiased=False`);
    /// NaN or inf when `n <= correction`, as in PyTorch.
    #[track_caller]
    pub fn var_correction(&self, dims: impl Into<Dims>, correction: i64, keepdim: bool) -> Tensor {
        self.try_var_correction(dims, correction, keepdim).or_panic()
    }

    /// [`Tensor::var_correction`] returning an error for a bad dim or a non-floating-point input.
    #[track_caller]
    pub fn try_var_correction(&self, dims: impl Into<Dims>, correction: i64, keepdim: bool) -> Result<Tensor> {
        var_impl(self, "var", &dims.into().0, correction, keepdim, false)
    }

    /// The standard deviation of all elements with `correction=1` (`x.std()`); see
    /// [`Tensor::std_correction`].
    #[track_caller]
    pub fn std(&self) -> Tensor {
        self.try_std().or_panic()
    }

    /// [`Tensor::std`] returning an error for a non-floating-point input.
    #[track_caller]
    pub fn try_std(&self) -> Result<Tensor> {
        var_impl(self, "std", &[], 1, false, true)
    }

    /// The standard deviation over `dims` with `correction` (`x.std(dim, correction=c,
    /// keepdim=k)`), as [`Tensor::var_correction`].
    #[track_caller]
    pub fn std_correction(&self, dims: impl Into<Dims>, correction: i64, keepdim: bool) -> Tensor {
        self.try_std_correction(dims, correction, keepdim).or_panic()
    }

    /// [`Tensor::std_correction`] returning an error for a bad dim or a non-floating-point input.
    #[track_caller]
    pub fn try_std_correction(&self, dims: impl Into<Dims>, correction: i64, keepdim: bool) -> Result<Tensor> {
        var_impl(self, "std", &dims.into().0, correction, keepdim, true)
    }

    /// Cumulative sums along `dim` (`x.cumsum(dim)`); integer and bool inputs give i64.
    #[track_caller]
    pub fn cumsum(&self, dim: i64) -> Tensor {
        self.try_cumsum(dim).or_panic()
    }

    /// [`Tensor::cumsum`] returning an error for a dim out of range.
    #[track_caller]
    pub fn try_cumsum(&self, dim: i64) -> Result<Tensor> {
        cumsum_impl(self, dim)
    }
}

keepdim_forms! {
    #[doc = "Means over `dims` (`x.mean(dim)`); floating-point input only."]
    #[errors = "a bad dim or a non-floating-point input"]
    mean_dim try_mean_dim mean_dim_keepdim try_mean_dim_keepdim (dims: impl Into<Dims>) -> Tensor
        = |x, keepdim| mean_impl(x, "MeanBackward1", &dims.into().0, keepdim);

    #[doc = "The largest values along `dim` and their indices (i64), as PyTorch's `x.max(dim)`: the first \
        occurrence on ties, the first NaN if there is one."]
    #[errors = "a bad dim or a dim of size 0"]
    max_dim try_max_dim max_dim_keepdim try_max_dim_keepdim (dim: i64) -> (Tensor, Tensor)
        = |x, keepdim| minmax_dim_impl::<true>(x, "max", dim, keepdim);

    #[doc = "The smallest values along `dim` and their indices (`x.min(dim)`)."]
    #[errors = "a bad dim or a dim of size 0"]
    min_dim try_min_dim min_dim_keepdim try_min_dim_keepdim (dim: i64) -> (Tensor, Tensor)
        = |x, keepdim| minmax_dim_impl::<false>(x, "min", dim, keepdim);

    #[doc = "The indices of the largest values along `dim` (`x.argmax(dim)`)."]
    #[errors = "a bad dim, a dim of size 0 or bool input"]
    argmax_dim try_argmax_dim argmax_dim_keepdim try_argmax_dim_keepdim (dim: i64) -> Tensor
        = |x, keepdim| arg_impl::<true>(x, "argmax", Some(dim), keepdim);

    #[doc = "The indices of the smallest values along `dim` (`x.argmin(dim)`)."]
    #[errors = "a bad dim, a dim of size 0 or bool input"]
    argmin_dim try_argmin_dim argmin_dim_keepdim try_argmin_dim_keepdim (dim: i64) -> Tensor
        = |x, keepdim| arg_impl::<false>(x, "argmin", Some(dim), keepdim);

    #[doc = "Whether every element over `dims` is non-zero (`x.all(dim)`). An empty list reduces no dim: \
        the result is each element's truth (`torch.all(x, dim=())`)."]
    #[errors = "a dim out of range or repeated"]
    all_dim try_all_dim all_dim_keepdim try_all_dim_keepdim (dims: impl Into<Dims>) -> Tensor
        = |x, keepdim| all_any_impl::<true>(x, "all", Some(&dims.into().0), keepdim);

    #[doc = "Whether any element over `dims` is non-zero (`x.any(dim)`). An empty list reduces no dim: \
        the result is each element's truth (`torch.any(x, dim=())`)."]
    #[errors = "a dim out of range or repeated"]
    any_dim try_any_dim any_dim_keepdim try_any_dim_keepdim (dims: impl Into<Dims>) -> Tensor
        = |x, keepdim| all_any_impl::<false>(x, "any", Some(&dims.into().0), keepdim);

    #[doc = "The variance over `dims` divided by n - 1 (`x.var(dim)`, PyTorch's default `correction=1`; \
        see [`Tensor::var_correction`]). Floating-point input only."]
    #[errors = "a bad dim or a non-floating-point input"]
    var_dim try_var_dim var_dim_keepdim try_var_dim_keepdim (dims: impl Into<Dims>) -> Tensor
        = |x, keepdim| var_impl(x, "var", &dims.into().0, 1, keepdim, false);

    #[doc = "The standard deviation over `dims` with `correction=1` (`x.std(dim)`; see \
        [`Tensor::std_correction`])."]
    #[errors = "a bad dim or a non-floating-point input"]
    std_dim try_std_dim std_dim_keepdim try_std_dim_keepdim (dims: impl Into<Dims>) -> Tensor
        = |x, keepdim| var_impl(x, "std", &dims.into().0, 1, keepdim, true);

    #[doc = "log Σ exp(x) over `dims` (`torch.logsumexp(x, dim)`), computed stably; integer and bool inputs \
        give f32, and an empty reduction gives -inf."]
    #[errors = "a dim out of range or repeated"]
    logsumexp try_logsumexp logsumexp_keepdim try_logsumexp_keepdim (dims: impl Into<Dims>) -> Tensor
        = |x, keepdim| logsumexp_impl(x, &dims.into().0, keepdim);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_convert_from_one_dim_or_lists() {
        assert_eq!(Dims::from(-1).0.as_slice(), &[-1]);
        assert_eq!(Dims::from(&[0, 2]).0.as_slice(), &[0, 2]);
        assert_eq!(Dims::from([1]).0.as_slice(), &[1]);
        assert_eq!(Dims::from(vec![2, 0]).0.as_slice(), &[2, 0]);
        assert_eq!(Dims::from(&[3i64][..]).0.as_slice(), &[3]);
    }

    #[test]
    fn reduction_shapes_follow_keepdim() {
        let t = Tensor::zeros([2, 3, 4]);
        let r = Reduction::new("sum", &t, &[0, -1], false).unwrap();
        assert_eq!((r.mask.as_slice(), r.shape.as_slice()), (&[true, false, true][..], &[3][..]));
        assert_eq!(Reduction::new("sum", &t, &[1], true).unwrap().shape.as_slice(), &[2, 1, 4]);
        let all = Reduction::new("sum", &t, &[], true).unwrap();
        assert!(all.all && all.shape.as_slice() == [1, 1, 1]);
        let s = Tensor::new(&1.0f32);
        assert!(Reduction::new("sum", &s, &[-1], true).unwrap().shape.is_empty());
        assert!(Reduction::new("sum", &s, &[0, -1], false).is_err(), "0 and -1 are the same dim");
    }

    #[test]
    fn dim_splits_and_dtype_names() {
        assert_eq!(split_at_dim(&[2, 3, 4], 1), (2, 3, 4));
        assert_eq!(split_at_dim(&[2, 3, 4], 0), (1, 2, 12));
        assert_eq!(split_at_dim(&[], 0), (1, 1, 1));
        assert_eq!(scalar_type_name(DType::I64), "Long");
        assert_eq!(scalar_type_name(DType::U8), "Byte");
    }

    #[test]
    fn result_dtypes_follow_pytorch() {
        let i = Tensor::new(&[1i32, 2]);
        assert_eq!(i.sum().dtype(), DType::I64);
        assert_eq!(i.prod().dtype(), DType::I64);
        assert_eq!(i.max().dtype(), DType::I32);
        assert_eq!(i.cumsum(0).dtype(), DType::I64);
        assert_eq!(i.logsumexp(0).dtype(), DType::F32);
        assert_eq!(i.all().dtype(), DType::Bool);
        assert_eq!(Tensor::new(&[1u8]).any().dtype(), DType::U8);
        // An empty dim list: no reduction for all/any, every dim for the others (PyTorch).
        let m = Tensor::new(&[[1.0f32, 0.0], [f32::NAN, 2.0]]);
        let a = m.all_dim_keepdim(Vec::<i64>::new());
        assert_eq!((a.shape(), a.to_vec::<bool>()), (&[2usize, 2][..], vec![true, false, true, true]));
        assert_eq!(m.any_dim(Vec::<i64>::new()).shape(), &[2, 2]);
        assert_eq!(Tensor::new(&[0u8, 7]).all_dim(Vec::<i64>::new()).to_vec::<u8>(), vec![0, 1]);
        assert_eq!(m.sum_dim(Vec::<i64>::new()).shape(), &[] as &[usize]);
        let h = Tensor::new(&[1.0f32]).to_dtype(DType::BF16);
        assert_eq!(h.mean().dtype(), DType::BF16);
        assert_eq!(h.std_correction([], 0, false).dtype(), DType::BF16);
        assert!(i.try_mean().is_err() && i.try_var().is_err());
    }
}
