//! Composite elementwise ops (activations, `isnan`, …) defined as **decompositions** into primitive ops
//! (the rows of `kiln_runtime::unary_op_table!`, `where_cond`, `clamp`, arithmetic). One row here
//! gives the `Tensor` method, the `F::` function (`nn::functional`), the `nn::` module and the
//! test lists; autograd, capture inside `kiln::compile` and the CUDA and CPU code generators
//! all work through the primitives, so none of them knows these ops by name. Eager mode does
//! too, except where a row names a one-pass CPU kernel and its backward rule (silu,
//! gelu_tanh: `fast[…]` below).
//! docs/adding-an-op.md says how to add one.
//!
//! Choices: f16 and bf16 inputs are computed as PyTorch computes them (in f32, rounded once, for
//! the ops PyTorch has a kernel for; step by step for the ones it decomposes too); where PyTorch has no integer kernel
//! (`mish` on `int64`), the decomposition computes in the default float dtype, as the primitives
//! it calls do; the backward graph is the primitives' (grad_fn names are theirs, not
//! `MishBackward0`), but for the ops whose one-pass kernel ran (`SiluBackward0`).

/// The table of composite elementwise ops, handed to the macro `$then`, one row per op:
///
/// `name(param = default, …) [Module] Compute "doc" |x| decomposition;` or, for an op with a
/// one-pass eager kernel, `… |x| decomposition, fast[kernel, "GradFnName", |x, g| gradient];`
///
/// - `name`: PyTorch's `F.name`; also the `Tensor` method;
/// - `params`: `f64` parameters with PyTorch's defaults (the method and the `F::` function
///   take them in this order; the module holds them as fields);
/// - `[Module]`: PyTorch's `nn.Module` name, or `[]` for an op that is not an activation
///   (no `nn::` module and no `F::` function: `isnan`);
/// - `Compute`: `InF32` computes f16 and bf16 inputs in f32 and rounds once (PyTorch's kernel
///   for the op does); `AsInput` computes in the input's dtype (PyTorch decomposes the op too,
///   rounding after each step);
/// - the decomposition: a `Tensor` expression of `x: &Tensor` and the parameters, written so
///   that its gradient equals PyTorch's everywhere: finite wherever PyTorch's is (no `where_cond`
///   whose unused branch overflows: clamp that branch's argument) and equal at the kinks
///   (a clamp's gradient is zero at its bounds, so a bound must not sit on a point where the
///   op is smooth);
/// - `fast[…]` (optional, for the ops PyTorch runs as one kernel, whose decomposition would
///   take several passes in eager mode): a [`FastUnary`] that eager mode runs instead of the
///   decomposition on CPU f32 and f64 tensors, the grad_fn name it records, and its backward
///   rule (the gradient for `x` given the output gradient `g`, written with tensor ops so that
///   it is differentiable again). Inside `kiln::compile`, on CUDA and on other dtypes the
///   decomposition runs. `tests/composite_ops.rs` checks kernel and rule against the
///   decomposition's values and autograd gradients.
macro_rules! composite_unary_table {
    ($then:ident) => {
        $then! {
            silu() [SiLU] InF32 "SiLU (swish) `x·sigmoid(x)`"
                |x| x * x.sigmoid(),
                fast[FastUnary::Silu, "SiluBackward0", |x, g| {
                    let s = x.sigmoid();
                    g * &s * (x * (1.0 - &s) + 1.0)
                }];
            gelu_tanh() [] InF32 "GELU, tanh approximation (`F.gelu(x, approximate='tanh')`)"
                |x| x * 0.5 * (gelu_inner(x).tanh() + 1.0),
                fast[FastUnary::GeluTanh, "GeluBackward0", |x, g| {
                    let t = gelu_inner(x).tanh();
                    let inner = (x.square() * (3.0 * GELU_KAPPA) + 1.0) * (0.5 * GELU_BETA);
                    g * ((&t + 1.0) * 0.5 + x * (1.0 - t.square()) * inner)
                }];
            softplus(beta = 1.0, threshold = 20.0) [Softplus] InF32 "softplus `ln(1 + e^(βx))/β`, `x` itself where `βx > threshold`"
                |x| {
                    let z = x * beta;
                    let linear = z.gt(threshold);
                    crate::Tensor::where_cond(&linear, x, crate::Tensor::where_cond(&linear, 0.0, &z).exp().log1p() / beta)
                };
            mish() [Mish] InF32 "Mish `x·tanh(softplus(x))`"
                |x| x * x.softplus(1.0, 20.0).tanh();
            softsign() [Softsign] AsInput "softsign `x / (1 + |x|)`"
                |x| x / (x.abs() + 1);
            tanhshrink() [Tanhshrink] AsInput "tanhshrink `x − tanh(x)`"
                |x| x - x.tanh();
            logsigmoid() [LogSigmoid] InF32 "log-sigmoid `ln(1/(1+e^−x))`"
                |x| crate::Tensor::where_cond(&x.lt(0.0), x - x.clamp_max(1.0).exp().log1p(), -(-x.clamp_min(-1.0)).exp().log1p());
            hardtanh(min_val = -1.0, max_val = 1.0) [Hardtanh] AsInput "hard tanh: `x` clamped to `[min_val, max_val]`"
                |x| x.clamp(bound(x, min_val), bound(x, max_val));
            relu6() [ReLU6] AsInput "ReLU6 `min(max(x, 0), 6)`"
                |x| x.hardtanh(0.0, 6.0);
            hardsigmoid() [Hardsigmoid] InF32 "hard sigmoid `relu6(x + 3) / 6`"
                |x| (x + 3.0).relu6() / 6.0;
            hardswish() [Hardswish] InF32 "hard swish `x·relu6(x + 3) / 6`"
                |x| x * (x + 3.0).relu6() / 6.0;
            leaky_relu(negative_slope = 0.01) [LeakyReLU] InF32 "leaky ReLU: `x` where `x > 0`, `negative_slope·x` otherwise"
                |x| crate::Tensor::where_cond(&x.gt(0.0), x, x * negative_slope);
            elu(alpha = 1.0) [ELU] InF32 "ELU: `x` where `x > 0`, `alpha·(e^x − 1)` otherwise"
                |x| crate::Tensor::where_cond(&x.gt(0.0), x, x.clamp_max(1.0).expm1() * alpha);
            celu(alpha = 1.0) [CELU] InF32 "CELU: `max(0, x) + min(0, alpha·(e^(x/alpha) − 1))`"
                |x| crate::Tensor::where_cond(&x.gt(0.0), x, (x / alpha).clamp_max(1.0).expm1() * alpha);
            selu() [SELU] InF32 "SELU: `scale·elu(x, alpha)` with PyTorch's fixed `alpha` and `scale`"
                |x| x.elu(1.673_263_242_354_377_2) * 1.050_700_987_355_480_5;
            isnan() [] AsInput "NaN test: true where `x != x`"
                |x| x.ne(x);
            isinf() [] AsInput "infinity test: true where `|x|` is infinite"
                |x| x.abs().eq(f64::INFINITY);
            isfinite() [] AsInput "finiteness test: true where `x` is neither infinite nor NaN"
                |x| x.eq(x) & x.abs().ne(f64::INFINITY);
        }
    };
}

pub(crate) use composite_unary_table;

use super::Backend;
use crate::autograd::{self, grads, Saved};
use crate::error::OrPanic;
use crate::tensor::reserve;
use crate::{DType, Tensor};
use kiln_runtime::cpu::elementwise::map1;
use kiln_runtime::cpu::fast_unary::FastUnary;
use kiln_runtime::cpu::CpuBuf;
use kiln_runtime::storage::StorageElement;

macro_rules! composite_methods {
    ($($name:ident ($($p:ident = $default:literal),*) [$($module:ident)?] $compute:ident $doc:literal |$x:ident| $body:expr $(, fast $fast:tt)?;)*) => {
        impl crate::Tensor {$(
            #[doc = concat!("Elementwise ", $doc, " (`F.", stringify!($name), "`), a decomposition into primitive ops.")]
            #[track_caller]
            pub fn $name(&self, $($p: f64),*) -> crate::Tensor {
                // Autocast lists `softplus` (in f32 on CUDA); the others run as given.
                if let Some(c) = crate::amp::autocast::operands(stringify!($name), &[Some(self)]).or_panic() {
                    return c.arg(0).$name($($p),*);
                }
                let low = rounds_from_f32(self, Compute::$compute);
                let upcast;
                let $x = match low {
                    Some(_) => {
                        upcast = self.to_dtype(crate::DType::F32);
                        &upcast
                    }
                    None => self,
                };
                let out = fast_or_decomposed!($name [$($fast)?] $x, $body);
                match low {
                    Some(dtype) => out.to_dtype(dtype),
                    None => out,
                }
            }
        )*}

        /// Every composite op with its parameters at PyTorch's defaults (for tests that go
        /// through each op's public name): `(name, op)`.
        #[doc(hidden)]
        pub const COMPOSITE_UNARY: &[(&str, fn(&crate::Tensor) -> crate::Tensor)] =
            &[$((stringify!($name), |x| x.$name($($default),*)),)*];

        /// Every composite op with a one-pass eager kernel, with its parameters at PyTorch's
        /// defaults: `(name, op, its decomposition)`, for the tests that check the one against
        /// the other.
        #[doc(hidden)]
        pub fn composite_fast() -> Vec<(&'static str, fn(&crate::Tensor) -> crate::Tensor, fn(&crate::Tensor) -> crate::Tensor)> {
            let mut rows = Vec::new();
            $(fast_entry!(rows [$($fast)?] $name ($($p = $default),*) |$x| $body);)*
            rows
        }
    };
}

/// A composite method's result: its [`FastUnary`] kernel where [`fast_eager`] runs it, else
/// the decomposition.
macro_rules! fast_or_decomposed {
    ($name:ident [] $x:ident, $body:expr) => {
        $body
    };
    ($name:ident [[$kernel:expr, $grad_fn:literal, |$gx:ident, $gg:ident| $grad:expr]] $x:ident, $body:expr) => {
        match fast_eager(stringify!($name), $x, $kernel, $grad_fn, move |$gx: &crate::Tensor, $gg: &crate::Tensor| {
            $grad
        }) {
            Some(out) => out,
            None => $body,
        }
    };
}

/// Pushes the [`composite_fast`] entry of one row onto `$rows` (none without a kernel).
macro_rules! fast_entry {
    ($rows:ident [] $($rest:tt)*) => {};
    ($rows:ident [$fast:tt] $name:ident ($($p:ident = $default:literal),*) |$x:ident| $body:expr) => {
        let op: fn(&crate::Tensor) -> crate::Tensor = |x| x.$name($($default),*);
        let decomposition: fn(&crate::Tensor) -> crate::Tensor = |$x: &crate::Tensor| {
            $(let $p: f64 = $default;)*
            $body
        };
        $rows.push((stringify!($name), op, decomposition));
    };
}

composite_unary_table!(composite_methods);

/// `√(2/π)` and `0.044715`, gelu_tanh's constants.
const GELU_BETA: f64 = 0.797_884_560_802_865_4;
const GELU_KAPPA: f64 = 0.044715;

/// `√(2/π)·(x + 0.044715·x³)`, the argument of gelu_tanh's tanh (its decomposition and its
/// backward rule share it).
fn gelu_inner(x: &Tensor) -> Tensor {
    (x + x * x * x * GELU_KAPPA) * GELU_BETA
}

/// `kernel(x)` by its one-pass eager kernel, recording `grad_fn` with the backward rule `grad`
/// (input gradient from the saved input and the output gradient) when autograd records; `None`
/// where the kernel does not run: inside `kiln::compile` (which captures the decomposition),
/// on CUDA, and on dtypes other than f32 and f64.
#[track_caller]
fn fast_eager(
    op: &'static str,
    x: &Tensor,
    kernel: FastUnary,
    grad_fn: &'static str,
    grad: impl Fn(&Tensor, &Tensor) -> Tensor + Send + Sync + 'static,
) -> Option<Tensor> {
    let on_cpu = Backend::of(op, &[x]).is_ok_and(|b| b == Backend::Cpu);
    if !on_cpu || !matches!(x.dtype(), DType::F32 | DType::F64) {
        return None;
    }
    reserve(op, x.shape(), x.dtype()).or_panic();
    let out = x
        .with_cpu(op, |s, l| match s.as_buf::<f32>() {
            Some(a) if l.is_contiguous() && l.numel() > 0 => {
                let mut o = CpuBuf::<f32>::uninit(l.numel());
                kernel.apply_f32(&a[l.offset()..l.offset() + l.numel()], &mut o);
                f32::wrap(o)
            }
            Some(a) => f32::wrap(map1(a, l, |v: f32| kernel.eval(v))),
            None => {
                f64::wrap(map1(s.as_buf::<f64>().expect("an f64 tensor (checked above)"), l, |v: f64| kernel.eval(v)))
            }
        })
        .or_panic();
    let out = Tensor::from_cpu_storage(out, x.shape());
    if !autograd::is_recording(&[x]) {
        return Some(out);
    }
    Some(autograd::record(out, grad_fn, &[x], [Saved::of(x)], move |_, g, s| grads![Some(grad(&s[0], g))]))
}

/// A clamp bound for `x`: truncated to an integer on integer inputs, so that the result keeps
/// the integer dtype, as PyTorch's `hardtanh` does.
fn bound(x: &crate::Tensor, v: f64) -> crate::Scalar {
    if x.dtype().is_float() {
        v.into()
    } else {
        (v as i64).into()
    }
}

/// The dtype a composite op computes in (the table's `Compute` column).
#[derive(Clone, Copy, PartialEq)]
enum Compute {
    /// f16 and bf16 inputs in f32, rounded back once.
    InF32,
    /// The input's dtype.
    AsInput,
}

/// The dtype to round an op's f32 result back to when it computes `x` in f32 (an f16 or bf16
/// input of an `InF32` op); `None` when it computes in `x`'s own dtype.
fn rounds_from_f32(x: &crate::Tensor, compute: Compute) -> Option<crate::DType> {
    let low = matches!(x.dtype(), crate::DType::F16 | crate::DType::BF16);
    (low && compute == Compute::InF32).then(|| x.dtype())
}

#[cfg(test)]
mod tests {
    use crate::Tensor;

    #[test]
    fn decompositions_match_pytorch_on_a_few_points() {
        // torch.nn.functional.<op>(torch.tensor([-2., 0., 3.], dtype=torch.float64))
        let x = Tensor::new(&[-2.0f64, 0.0, 3.0]);
        let cases: [(&str, Tensor, [f64; 3]); 3] = [
            ("hardswish", x.hardswish(), [-0.333_333_333_333_333_3, 0.0, 3.0]),
            ("selu", x.selu(), [-1.520_166_468_595_694_8, 0.0, 3.152_102_962_066_441_4]),
            ("hardtanh", x.hardtanh(-1.0, 2.0), [-1.0, 0.0, 2.0]),
        ];
        for (name, got, want) in cases {
            for (g, w) in got.to_vec::<f64>().iter().zip(want) {
                assert!((g - w).abs() < 1e-14, "{name}: {g} != {w}");
            }
        }
    }
}
