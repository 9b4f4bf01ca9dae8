//! Comparisons and logical ops (returning Bool tensors), `where_cond`, `masked_fill`, and the
//! whole-tensor tests `equal` and `allclose`.
//!
//! Autograd: comparisons and logical ops return Bool tensors and never record. `where_cond` sends
//! the gradient to its tensor value operands (`where(cond, g, 0)` and `where(cond, 0, g)`, summed
//! down to each operand's shape by the engine); `masked_fill` to its input where the mask is false.

use super::binary::{broadcast_all, check_writable, Operand};
use super::{elementwise, Backend};
use crate::autograd::{self, grads, Grads, Saved};
use crate::capture;
use crate::error::{bail, OrPanic, Result};
use crate::scalar::Scalar;
use crate::tensor::{reserve, scalar_as, Tensor};
use kiln_codegen::cuda::EagerOp;
use kiln_codegen::ir::NodeKind;
use kiln_runtime::cpu::elementwise::{map1, map2, map2_inplace, map3};
use kiln_runtime::dtype::result_type;
use kiln_runtime::op_kind::{CmpOp, LogicalOp};
use kiln_runtime::storage::StorageElement;
use kiln_runtime::{match_cpu, DType};

/// `match op { Enum::V => go!(Enum::V), … }` over every row of the comparison or logical op
/// table, so each kernel loop is compiled for one op (no per-element dispatch):
/// `kiln_runtime::cmp_op_table!(dispatch_bool_op, CmpOp, op, go)`.
macro_rules! dispatch_bool_op {
    (($enum:ident, $op:expr, $go:ident) $($v:ident $name:literal ($sym:tt) [$($m:ident)*] $doc:literal;)*) => {
        match $op {
            $($enum::$v => $go!($enum::$v),)*
        }
    };
}

/// `op(a, b)` with broadcasting; both operands are compared in their promoted dtype.
#[track_caller]
pub(crate) fn compare(op: CmpOp, a: &Tensor, b: &Operand) -> Result<Tensor> {
    let a = Operand::Tensor(a.clone());
    let dt = result_type(&[a.promotion(), b.promotion()]);
    let shape = broadcast_all(op.name(), &[a.shape(), b.shape()])?;
    let (ta, tb) = (a.to_tensor(dt), b.to_tensor(dt));
    let la = ta.layout().broadcast_to(&shape).expect("shape was broadcast");
    let lb = tb.layout().broadcast_to(&shape).expect("shape was broadcast");
    let inputs = [(&ta, la), (&tb, lb)];
    elementwise(op.name(), NodeKind::Cmp(op), EagerOp::Cmp(op), &inputs, &shape, (dt, DType::Bool), || {
        let [(_, la), (_, lb)] = &inputs;
        let out = ta.with_cpu2(&tb, op.name(), |sa, sb| {
            match_cpu!(sa, |x: T| {
                let y = sb.as_buf::<T>().expect("same dtype");
                macro_rules! go {
                    ($o:expr) => {
                        map2(x, la, y, lb, |p: T, q: T| $o.eval(p, q))
                    };
                }
                kiln_runtime::cmp_op_table!(dispatch_bool_op, CmpOp, op, go)
            })
        })?;
        Ok(Tensor::from_buf(out, &shape))
    })
}

/// `op(truth(a), truth(b))` with broadcasting.
#[track_caller]
pub(crate) fn logical(op: LogicalOp, a: &Tensor, b: &Operand) -> Result<Tensor> {
    let shape = broadcast_all(op.name(), &[a.shape(), b.shape()])?;
    let (ta, tb) = (a.try_to_dtype(DType::Bool)?, b.to_tensor(DType::Bool));
    let la = ta.layout().broadcast_to(&shape).expect("shape was broadcast");
    let lb = tb.layout().broadcast_to(&shape).expect("shape was broadcast");
    let inputs = [(&ta, la), (&tb, lb)];
    let dtypes = (DType::Bool, DType::Bool);
    elementwise(op.name(), NodeKind::Logical(op), EagerOp::Logical(op), &inputs, &shape, dtypes, || {
        let [(_, la), (_, lb)] = &inputs;
        let out = ta.with_cpu2(&tb, op.name(), |sa, sb| {
            let (x, y) = (sa.as_buf::<bool>().expect("bool"), sb.as_buf::<bool>().expect("bool"));
            macro_rules! go {
                ($o:expr) => {
                    map2(x, la, y, lb, |p: bool, q: bool| $o.eval(p, q))
                };
            }
            kiln_runtime::logical_op_table!(dispatch_bool_op, LogicalOp, op, go)
        })?;
        Ok(Tensor::from_buf(out, &shape))
    })
}

macro_rules! compare_methods {
    ($($op:ident $torch:literal ($sym:tt) [$name:ident $try_name:ident] $doc:literal;)*) => {
        impl Tensor {$(
            #[doc = concat!("Elementwise `self ", stringify!($sym), " other` as a Bool tensor, broadcasting (`torch.", $torch, "`).")]
            #[track_caller]
            pub fn $name(&self, other: impl Into<Operand>) -> Tensor {
                compare(CmpOp::$op, self, &other.into()).or_panic()
            }

            #[doc = concat!("[`Tensor::", stringify!($name), "`] returning an error for shapes that cannot broadcast.")]
            #[track_caller]
            pub fn $try_name(&self, other: impl Into<Operand>) -> Result<Tensor> {
                compare(CmpOp::$op, self, &other.into())
            }
        )*}

        /// Every comparison with its methods (for tests that go through each op's public name):
        /// `(op, method, try_method)`.
        #[doc(hidden)]
        pub const COMPARE_METHODS: &[(CmpOp, fn(&Tensor, Operand) -> Tensor, fn(&Tensor, Operand) -> Result<Tensor>)] =
            &[$((CmpOp::$op, |a, b| a.$name(b), |a, b| a.$try_name(b)),)*];
    };
}

kiln_runtime::cmp_op_table!(compare_methods);

macro_rules! logical_methods {
    ($($op:ident $torch:literal ($sym:tt) [$name:ident] $what:literal;)*) => {
        impl Tensor {$(
            #[doc = concat!("Elementwise logical ", $what, " of the operands' truth (non-zero is true), as a Bool tensor (`torch.", $torch, "`).")]
            #[track_caller]
            pub fn $name(&self, other: impl Into<Operand>) -> Tensor {
                logical(LogicalOp::$op, self, &other.into()).or_panic()
            }
        )*}

        /// Every logical op with its method (for tests that go through each op's public name).
        #[doc(hidden)]
        pub const LOGICAL_METHODS: &[(LogicalOp, fn(&Tensor, Operand) -> Tensor)] = &[$((LogicalOp::$op, |a, b| a.$name(b)),)*];
    };
}

kiln_runtime::logical_op_table!(logical_methods);

/// `cond ? x : y` elementwise, `x` and `y` promoted to one dtype, all three broadcast.
#[track_caller]
fn select_where(cond: &Tensor, x: &Operand, y: &Operand) -> Result<Tensor> {
    if cond.dtype() != DType::Bool {
        bail!(
            "where",
            DType,
            "where expected condition to be a boolean tensor, but got a tensor with dtype {}",
            cond.dtype()
        );
    }
    let dt = result_type(&[x.promotion(), y.promotion()]);
    // A Rust number must fit an integer result dtype (PyTorch converts it with an overflow
    // check: `where(c, i32_tensor, 2**40)` raises); into a float dtype it is rounded as a cast.
    if !dt.is_float() {
        for o in [x, y] {
            if let Operand::Scalar(s) = o {
                super::binary::check_scalar_fits("where", *s, dt)?;
            }
        }
    }
    let shape = broadcast_all("where", &[cond.shape(), x.shape(), y.shape()])?;
    let (tx, ty) = (x.to_tensor(dt), y.to_tensor(dt));
    let lc = cond.layout().broadcast_to(&shape).expect("shape was broadcast");
    let lx = tx.layout().broadcast_to(&shape).expect("shape was broadcast");
    let ly = ty.layout().broadcast_to(&shape).expect("shape was broadcast");
    let inputs = [(cond, lc), (&tx, lx), (&ty, ly)];
    elementwise("where", NodeKind::Where, EagerOp::Where, &inputs, &shape, (dt, dt), || {
        let [(_, lc), (_, lx), (_, ly)] = &inputs;
        let out = cond.with_cpu("where", |sc, _| {
            let c = sc.as_buf::<bool>().expect("bool");
            tx.with_cpu2(&ty, "where", |sx, sy| {
                match_cpu!(sx, |a: T| T::wrap(map3(
                    c,
                    lc,
                    a,
                    lx,
                    sy.as_buf::<T>().expect("same dtype"),
                    ly,
                    |k, p, q| if k { p } else { q }
                )))
            })
        })??;
        Ok(Tensor::from_cpu_storage(out, &shape))
    })
}

/// [`select_where`], recorded for autograd (`WhereBackward0`) when a tensor value operand
/// requires grad.
#[track_caller]
fn where_recorded(cond: &Tensor, x: &Operand, y: &Operand) -> Result<Tensor> {
    let out = select_where(cond, x, y)?;
    // The tensor operands, each with whether it is the `x` side.
    let (mut inputs, mut is_x) = (Vec::with_capacity(2), Vec::with_capacity(2));
    for (o, side) in [(x, true), (y, false)] {
        if let Operand::Tensor(t) = o {
            inputs.push(t);
            is_x.push(side);
        }
    }
    if !out.dtype().is_float() || !autograd::is_recording(&inputs) {
        return Ok(out);
    }
    Ok(autograd::record(out, "WhereBackward0", &inputs, [Saved::of(cond)], move |ctx, g, s| {
        let cond = &s[0];
        let each = |(i, &side): (usize, &bool)| {
            ctx.needs_input_grad(i).then(|| {
                if side {
                    Tensor::where_cond(cond, g, 0.0)
                } else {
                    Tensor::where_cond(cond, 0.0, g)
                }
            })
        };
        is_x.iter().enumerate().map(each).collect::<Grads>()
    }))
}

#[track_caller]
fn masked_fill_check(op: &'static str, x: &Tensor, mask: &Tensor) -> Result<()> {
    if mask.dtype() != DType::Bool {
        bail!(op, DType, "expected a mask of dtype bool, got {}", mask.dtype());
    }
    let shape = broadcast_all(op, &[x.shape(), mask.shape()])?;
    if shape.as_slice() != x.shape() {
        bail!(
            op,
            Shape,
            "the mask of shape {:?} cannot be broadcast to the tensor's shape {:?}",
            mask.shape(),
            x.shape()
        );
    }
    Ok(())
}

impl Tensor {
    /// `x` where `cond` is true, `y` elsewhere, broadcasting all three (`torch.where`; Rust
    /// reserves the word `where`).
    #[track_caller]
    pub fn where_cond(cond: &Tensor, x: impl Into<Operand>, y: impl Into<Operand>) -> Tensor {
        where_recorded(cond, &x.into(), &y.into()).or_panic()
    }

    /// [`Tensor::where_cond`] returning an error.
    #[track_caller]
    pub fn try_where(cond: &Tensor, x: impl Into<Operand>, y: impl Into<Operand>) -> Result<Tensor> {
        where_recorded(cond, &x.into(), &y.into())
    }

    /// Logical not of each element's truth, as a Bool tensor.
    #[track_caller]
    pub fn logical_not(&self) -> Tensor {
        match Backend::of("logical_not", &[self]).or_panic() {
            // One kernel, `x == 0` in the input's dtype (no cast to Bool first).
            Backend::Cuda => crate::cuda::map(
                "logical_not",
                EagerOp::Not,
                &[(self, self.layout().clone())],
                self.shape(),
                self.dtype(),
                DType::Bool,
            )
            .or_panic(),
            Backend::Capture => {
                let t = self.to_dtype(DType::Bool);
                capture::elementwise(NodeKind::Not, &[(&t, t.layout().clone())], t.shape(), DType::Bool)
            }
            Backend::Cpu => {
                let t = self.to_dtype(DType::Bool);
                reserve("logical_not", self.shape(), DType::Bool).or_panic();
                let out =
                    t.with_cpu("logical_not", |s, l| map1(s.as_buf::<bool>().expect("bool"), l, |v| !v)).or_panic();
                Tensor::from_buf(out, self.shape())
            }
        }
    }

    /// A copy with `value` where `mask` is true (`x.masked_fill(mask, v)`); keeps the dtype,
    /// and broadcasts against the mask as PyTorch's out-of-place form does. A value the dtype
    /// cannot hold panics, as PyTorch raises (`i32.masked_fill(m, 1e20)`, `u8.masked_fill(m,
    /// 256)`, `f16.masked_fill(m, -1e9)`; -1 wraps into u8 as 255).
    #[track_caller]
    pub fn masked_fill(&self, mask: &Tensor, value: impl Into<Scalar>) -> Tensor {
        let v: Scalar = value.into();
        if mask.dtype() != DType::Bool {
            masked_fill_check("masked_fill", self, mask).or_panic();
        }
        super::binary::check_scalar_fits("masked_fill", v, self.dtype()).or_panic();
        let fill = Operand::Tensor(Tensor::scalar_wrapping(v, self.dtype()));
        let out = select_where(mask, &fill, &Operand::Tensor(self.clone())).or_panic();
        if !autograd::is_recording(&[self]) {
            return out;
        }
        autograd::record(out, "MaskedFillBackward0", &[self], [Saved::of(mask)], |_, g, s| {
            grads![Some(Tensor::where_cond(&s[0], 0.0, g))]
        })
    }

    /// A copy with the 0-dim tensor `value` (converted to this tensor's dtype) where `mask` is
    /// true (`x.masked_fill(mask, value_tensor)`), broadcasting as [`Tensor::masked_fill`]
    /// does: the value stays on its device (or is a CPU scalar), so a CUDA
    /// value needs no copy to the host. Gradients reach this tensor where the mask is false and
    /// `value` as the sum over the filled positions (`where`'s rule).
    #[track_caller]
    pub fn masked_fill_tensor(&self, mask: &Tensor, value: &Tensor) -> Tensor {
        self.try_masked_fill_tensor(mask, value).or_panic()
    }

    /// [`Tensor::masked_fill_tensor`] returning an error: a value that is not 0-dim, a mask
    /// that is not Bool, shapes that do not broadcast, mixed devices.
    #[track_caller]
    pub fn try_masked_fill_tensor(&self, mask: &Tensor, value: &Tensor) -> Result<Tensor> {
        const OP: &str = "masked_fill";
        if value.dim() != 0 {
            bail!(OP, Shape, "masked_fill only supports a 0-dimensional value tensor, but got tensor with {} dimension(s) (shape {:?})", value.dim(), value.shape());
        }
        if mask.dtype() != DType::Bool {
            masked_fill_check(OP, self, mask)?;
        }
        let value = value.try_to_dtype(self.dtype())?;
        where_recorded(mask, &Operand::Tensor(value), &Operand::Tensor(self.clone()))
    }

    /// Writes `value` where `mask` (broadcast to this tensor's shape) is true, in place.
    #[track_caller]
    pub fn masked_fill_(&self, mask: &Tensor, value: impl Into<Scalar>) -> &Tensor {
        let v: Scalar = value.into();
        masked_fill_check("masked_fill_", self, mask).or_panic();
        super::binary::check_scalar_fits("masked_fill_", v, self.dtype()).or_panic();
        check_writable("masked_fill_", self).or_panic();
        if autograd::is_recording(&[self]) {
            autograd::inplace("masked_fill_", self, |old| Ok(old.masked_fill(mask, v))).or_panic();
            return self;
        }
        // Out of place (the where reads the old values first, so a mask sharing storage with
        // this tensor is read before the write), for the backends that then write it back.
        let filled = || {
            let fill = Operand::Tensor(Tensor::scalar_wrapping(v, self.dtype()));
            select_where(mask, &fill, &Operand::Tensor(self.clone())).or_panic()
        };
        match Backend::of("masked_fill_", &[self, mask]).or_panic() {
            Backend::Capture => capture::assign(self, &filled()),
            Backend::Cuda => {
                let filled = filled();
                crate::cuda::copy_into("masked_fill_", self, &filled, filled.layout().clone()).or_panic()
            }
            Backend::Cpu => {
                let mask = if mask.shares_storage_with(self) { mask.deep_clone() } else { mask.clone() };
                let lm = mask.layout().broadcast_to(self.shape()).expect("checked");
                self.with_cpu_write("masked_fill_", &mask, |sd, sm| {
                    let m = sm.as_buf::<bool>().expect("bool");
                    match_cpu!(sd, |d: T| {
                        let fill = scalar_as::<T>(v);
                        map2_inplace(d, self.layout(), m, &lm, |x: T, k: bool| if k { fill } else { x })
                    })
                })
                .or_panic()
            }
        }
        self
    }

    /// True when both tensors have the same shape and equal elements (`torch.equal`).
    #[track_caller]
    pub fn equal(&self, other: &Tensor) -> bool {
        self.shape() == other.shape() && self.eq(other).to_vec::<bool>().iter().all(|&v| v)
    }

    /// True when `|self - other| <= atol + rtol·|other|` everywhere, broadcasting
    /// (`torch.allclose`): equal infinities are close, NaNs never are.
    #[track_caller]
    pub fn allclose(&self, other: &Tensor, rtol: f64, atol: f64) -> bool {
        let (a, b) = (self.to_dtype(DType::F64), other.to_dtype(DType::F64));
        let finite = a.sub(&a).eq(0.0).logical_and(b.sub(&b).eq(0.0));
        let within = a.sub(&b).abs().le(b.abs().mul(rtol).add(atol)).logical_and(&finite);
        a.eq(&b).logical_or(&within).to_vec::<bool>().iter().all(|&v| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons_promote_and_broadcast() {
        let a = Tensor::new(&[1i64, 2, 3]);
        assert_eq!(a.gt(1.5).to_vec::<bool>(), vec![false, true, true]);
        assert_eq!(a.eq(Tensor::new(&[[1i32], [3]])).to_vec::<bool>(), vec![true, false, false, false, false, true]);
        let n = Tensor::new(&[f32::NAN, 1.0]);
        assert_eq!(n.ne(&n).to_vec::<bool>(), vec![true, false]);
        assert!(a.try_lt(Tensor::new(&[1i64, 2])).is_err());
    }

    #[test]
    fn logical_and_where() {
        let a = Tensor::new(&[true, false, true]);
        let b = Tensor::new(&[0.0f32, 0.0, 2.0]);
        assert_eq!(a.logical_and(&b).to_vec::<bool>(), vec![false, false, true]);
        assert_eq!((&a ^ &Tensor::new(&[true, true, false])).to_vec::<bool>(), vec![false, true, true]);
        assert_eq!((!&a).to_vec::<bool>(), vec![false, true, false]);
        let w = Tensor::where_cond(&a, &b, -1);
        assert_eq!(w.dtype(), DType::F32);
        assert_eq!(w.to_vec::<f32>(), vec![0.0, -1.0, 2.0]);
        let cond = Tensor::new(&[[true], [false]]);
        assert_eq!(Tensor::where_cond(&cond, 1i64, Tensor::new(&[5i64, 6])).to_vec::<i64>(), vec![1, 1, 5, 6]);
        assert!(Tensor::try_where(&b, 1, 2).is_err());
    }

    #[test]
    fn masked_fill_in_place_through_view() {
        let x = Tensor::zeros([2, 3]);
        let mask = Tensor::new(&[true, false]);
        x.t().masked_fill_(&mask.unsqueeze(0), 4.5);
        assert_eq!(x.to_vec::<f32>(), vec![4.5, 4.5, 4.5, 0.0, 0.0, 0.0]);
        let y = Tensor::new(&[1i64, 2]).masked_fill(&Tensor::new(&[false, true]), 9.7);
        assert_eq!(y.to_vec::<i64>(), vec![1, 9]);
        assert!(x.allclose(&(&x + 1e-7), 1e-5, 1e-6));
        assert!(!x.allclose(&(&x + 1e-3), 1e-5, 1e-6));
        assert!(x.equal(&x.deep_clone()));
    }
}
