//! Binary elementwise ops: arithmetic with broadcasting and PyTorch's type promotion, their
//! in-place forms, and `copy_`/`fill_` (clamps are in `clamp.rs`, the operator overloads in
//! `overloads.rs`). Rust numbers written into a tensor (`fill_`'s value, `pow`'s exponent,
//! clamp's bounds) are checked by PyTorch's overflow rule (`scalar_fits`); arithmetic operands
//! wrap as PyTorch's do.

use super::{elementwise, Backend};
use crate::autograd::{self, grads, Saved};
use crate::error::{bail, OrPanic, Result};
use crate::scalar::Scalar;
use crate::tensor::{reserve, Tensor};
use kiln_codegen::cuda::EagerOp;
use kiln_codegen::ir::NodeKind;
use kiln_runtime::cpu::elementwise::{map1, map1_inplace, map2, map2_inplace};
use kiln_runtime::cpu::CpuBuf;
use kiln_runtime::dtype::{result_type, OperandKind};
use kiln_runtime::layout::{broadcast_shapes, checked_numel};
use kiln_runtime::op_kind::{BinaryOp, UnaryOp};
use kiln_runtime::storage::StorageElement;
use kiln_runtime::{match_cpu, match_cpu_float, DType, Element, FloatElement, Layout};
use smallvec::SmallVec;

/// An operand of an elementwise op: a tensor or a Rust number.
#[derive(Clone, Debug)]
pub enum Operand {
    /// A tensor (broadcast against the other operands).
    Tensor(Tensor),
    /// A Rust number: its category takes part in type promotion, its width does not.
    Scalar(Scalar),
}

impl From<&Tensor> for Operand {
    fn from(t: &Tensor) -> Operand {
        Operand::Tensor(t.clone())
    }
}

impl From<Tensor> for Operand {
    fn from(t: Tensor) -> Operand {
        Operand::Tensor(t)
    }
}

impl From<Scalar> for Operand {
    fn from(s: Scalar) -> Operand {
        Operand::Scalar(s)
    }
}

macro_rules! operand_from_number {
    ($($t:ty),*) => {$(
        impl From<$t> for Operand {
            fn from(v: $t) -> Operand {
                Operand::Scalar(v.into())
            }
        }
    )*};
}
operand_from_number!(f32, f64, i32, i64, u8, usize, bool, half::f16, half::bf16);

impl Operand {
    /// The (dtype, tier) this operand brings to `result_type`.
    pub(crate) fn promotion(&self) -> (DType, OperandKind) {
        match self {
            Operand::Tensor(t) => (t.dtype(), if t.dim() == 0 { OperandKind::ZeroDim } else { OperandKind::Tensor }),
            Operand::Scalar(s) => (s.promotion_dtype(), OperandKind::Scalar),
        }
    }

    /// The tensor, when this operand is one.
    pub(crate) fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            Operand::Tensor(t) => Some(t),
            Operand::Scalar(_) => None,
        }
    }

    /// The operand's shape (a scalar is 0-dim).
    pub(crate) fn shape(&self) -> &[usize] {
        match self {
            Operand::Tensor(t) => t.shape(),
            Operand::Scalar(_) => &[],
        }
    }

    /// The operand as a tensor of `dtype` (a scalar becomes a 0-dim tensor, converted once,
    /// wrapping into narrow integer types as PyTorch's `u8_tensor + 300` does).
    pub(crate) fn to_tensor(&self, dtype: DType) -> Tensor {
        match self {
            Operand::Tensor(t) => t.to_dtype(dtype),
            Operand::Scalar(s) if crate::capture::is_active() => crate::capture::scalar(*s, dtype),
            Operand::Scalar(s) => Tensor::scalar_wrapping(*s, dtype),
        }
    }
}

/// True when `value` converts to `dtype` without overflow, by PyTorch's rule for a Python number
/// written into a tensor (`c10::checked_convert`, used by `fill_`, `full`, `masked_fill`,
/// `index_fill`, `scatter`'s value, `pow`'s exponent, …):
/// - into an integer dtype, a float must be a number in `[min, max + 1)` (truncated toward zero
///   afterwards: 3.7 gives 3, 255.9 gives 255 in u8, while -0.5 is refused for u8 and NaN and
///   infinities always); an integer must be in `[min, max]`, except that a negative one may
///   wrap into u8 down to -255 (-1 gives 255, as PyTorch's unsigned rule);
/// - into a float dtype, a finite value must not exceed the type's largest finite value
///   (infinities and NaN are kept; 1e300 is refused for f32, 70000 for f16);
/// - anything converts to Bool (its truth), and a bool to anything.
pub(crate) fn scalar_fits(value: Scalar, dtype: DType) -> bool {
    if dtype == DType::Bool {
        return true;
    }
    if let Some(max) = dtype.finite_max() {
        let v = value.to_f64();
        return !v.is_finite() || v.abs() <= max;
    }
    let (lo, hi): (i64, i64) = match dtype {
        DType::U8 => (0, u8::MAX as i64),
        DType::I32 => (i32::MIN as i64, i32::MAX as i64),
        _ => (i64::MIN, i64::MAX),
    };
    match value {
        Scalar::Bool(_) => true,
        // `hi + 1` is exact in f64 for every integer dtype (256, 2^31, 2^63).
        Scalar::Float(f) => f >= lo as f64 && f < hi as f64 + 1.0,
        Scalar::Int(i) if dtype == DType::U8 => i <= hi && i >= -hi,
        Scalar::Int(i) => i >= lo && i <= hi,
    }
}

/// An error naming `op` when `value` cannot be converted to `dtype` without overflow (see
/// [`scalar_fits`]): PyTorch's "value cannot be converted to type int without overflow".
#[track_caller]
pub(crate) fn check_scalar_fits(op: &'static str, value: Scalar, dtype: DType) -> Result<()> {
    if !scalar_fits(value, dtype) {
        let shown = match value {
            Scalar::Float(f) => format!("{f:e}"),
            Scalar::Int(i) => i.to_string(),
            Scalar::Bool(b) => b.to_string(),
        };
        bail!(op, Value, "value {shown} cannot be converted to type {dtype} without overflow");
    }
    Ok(())
}

/// True when a value of `from` may be written into a tensor of `to` (PyTorch's `can_cast`):
/// never down a category (float into int, int into bool).
pub(crate) fn can_cast(from: DType, to: DType) -> bool {
    from.category() <= to.category()
}

/// The shape operands broadcast to, or an error naming the op and the shapes (also when the
/// result is too large for a tensor: `[2^33, 1]` and `[1, 2^33]` broadcast to 2^66 elements).
#[track_caller]
pub(crate) fn broadcast_all(op: &'static str, shapes: &[&[usize]]) -> Result<kiln_runtime::Shape> {
    let list = || shapes.iter().map(|s| format!("{s:?}")).collect::<Vec<String>>().join(" and ");
    let Some((first, rest)) = shapes.split_first() else { return Ok(kiln_runtime::Shape::new()) };
    let mut out = kiln_runtime::Shape::from_slice(first);
    for s in rest {
        match broadcast_shapes(&out, s) {
            Some(b) => out = b,
            None => bail!(op, Shape, "shapes {} cannot broadcast", list()),
        }
    }
    if let Err(e) = checked_numel(&out) {
        bail!(op, Shape, "shapes {} broadcast to {out:?}, which {e}", list());
    }
    Ok(out)
}

/// The dtype a binary op computes in and returns.
#[track_caller]
fn binary_dtype(op: BinaryOp, a: &Operand, b: &Operand) -> Result<DType> {
    let dt = result_type(&[a.promotion(), b.promotion()]);
    if op.is_bitwise() {
        // PyTorch's message names its CPU kernel: `"bitwise_and_cpu" not implemented for 'Float'`.
        if dt.is_float() || (op.is_shift() && dt == DType::Bool) {
            bail!(
                op.name(),
                DType,
                "\"{}\" not implemented for '{}' (bitwise ops take integer or bool tensors)",
                op.kernel_name(),
                super::reduce::scalar_type_name(dt)
            );
        }
        return Ok(dt);
    }
    if !op.keeps_int_dtype() {
        return Ok(dt.to_float());
    }
    if op == BinaryOp::Sub && (a.promotion().0 == DType::Bool || b.promotion().0 == DType::Bool) {
        bail!("sub", DType, "subtraction, the `-` operator, with two bool tensors is not supported; use the `^` or `logical_xor()` operator instead");
    }
    Ok(dt)
}

/// Integer-only preconditions: no zero divisor for `remainder`; no negative *scalar* exponent
/// for `pow` (a negative exponent tensor is allowed, as in PyTorch).
#[track_caller]
fn check_int_operands(op: BinaryOp, dtype: DType, b: &Operand) -> Result<()> {
    if dtype.is_float() {
        return Ok(());
    }
    match (op, b) {
        (BinaryOp::Pow, Operand::Scalar(s)) if s.to_f64() < 0.0 => {
            bail!("pow", Value, "integers to negative integer powers are not allowed (dtype {dtype})")
        }
        (BinaryOp::Pow, Operand::Scalar(s)) => check_scalar_fits("pow", *s, dtype),
        (BinaryOp::Rem, _) => {
            let values = b.to_tensor(DType::I64).contiguous().to_vec::<i64>();
            if values.contains(&0) {
                bail!("remainder", Value, "ZeroDivisionError: integer remainder by zero (dtype {dtype})");
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// `match op { BinaryOp::X => go!(BinaryOp::X), … }` over every row of the binary op table
/// (each op's kernel monomorphized): `kiln_runtime::binary_op_table!(dispatch_binary, op, go)`.
macro_rules! dispatch_binary {
    (($op:expr, $go:ident) $($v:ident $name:literal $int:ident [$($m:ident)*] $doc:literal;)*) => {
        match $op {
            $(BinaryOp::$v => $go!(BinaryOp::$v),)*
        }
    };
}

/// Element types with a binary kernel: floats compute in their compute type, integers and
/// bools in i64 with wrapping.
pub(crate) trait BinaryElement: StorageElement {
    /// `op` elementwise over two operands already broadcast to the output shape.
    fn binary(op: BinaryOp, a: &[Self], la: &Layout, b: &[Self], lb: &Layout) -> CpuBuf<Self>;
    /// `dst = op(dst, src)` through `ld`.
    fn binary_inplace(op: BinaryOp, dst: &mut [Self], ld: &Layout, src: &[Self], ls: &Layout);
}

macro_rules! float_binary_element {
    ($($t:ty),*) => {$(
        impl BinaryElement for $t {
            fn binary(op: BinaryOp, a: &[Self], la: &Layout, b: &[Self], lb: &Layout) -> CpuBuf<Self> {
                macro_rules! go {
                    ($o:expr) => {
                        map2(a, la, b, lb, |x: $t, y: $t| <$t>::from_compute($o.eval(x.to_compute(), y.to_compute())))
                    };
                }
                kiln_runtime::binary_op_table!(dispatch_binary, op, go)
            }
            fn binary_inplace(op: BinaryOp, dst: &mut [Self], ld: &Layout, src: &[Self], ls: &Layout) {
                macro_rules! go {
                    ($o:expr) => {
                        map2_inplace(dst, ld, src, ls, |x: $t, y: $t| <$t>::from_compute($o.eval(x.to_compute(), y.to_compute())))
                    };
                }
                kiln_runtime::binary_op_table!(dispatch_binary, op, go)
            }
        }
    )*};
}
float_binary_element!(f32, f64, half::f16, half::bf16);

macro_rules! int_binary_element {
    ($($t:ty),*) => {$(
        impl BinaryElement for $t {
            fn binary(op: BinaryOp, a: &[Self], la: &Layout, b: &[Self], lb: &Layout) -> CpuBuf<Self> {
                macro_rules! go {
                    ($o:expr) => {
                        map2(a, la, b, lb, |x: $t, y: $t| <$t>::from_i64($o.eval_int(x.to_i64(), y.to_i64())))
                    };
                }
                kiln_runtime::binary_op_table!(dispatch_binary, op, go)
            }
            fn binary_inplace(op: BinaryOp, dst: &mut [Self], ld: &Layout, src: &[Self], ls: &Layout) {
                macro_rules! go {
                    ($o:expr) => {
                        map2_inplace(dst, ld, src, ls, |x: $t, y: $t| <$t>::from_i64($o.eval_int(x.to_i64(), y.to_i64())))
                    };
                }
                kiln_runtime::binary_op_table!(dispatch_binary, op, go)
            }
        }
    )*};
}
int_binary_element!(i64, i32, u8, bool);

/// `x ^ e` for a float tensor and the scalar exponents PyTorch computes without `powf`
/// (2, 3, 0.5, -0.5, -1, -2: products, square roots and reciprocals), as its CPU kernel does.
/// Captured, the same formulas become elementwise nodes; on CUDA the generic kernel runs.
#[track_caller]
fn pow_scalar_special(x: &Tensor, e: f64) -> Option<Result<Tensor>> {
    if !x.dtype().is_float() || ![2.0, 3.0, 0.5, -0.5, -1.0, -2.0].contains(&e) {
        return None;
    }
    match Backend::of("pow", &[x]) {
        Err(err) => Some(Err(err)),
        Ok(Backend::Capture) => Some(Ok(pow_scalar_special_captured(x, e))),
        Ok(Backend::Cuda) => None,
        Ok(Backend::Cpu) => Some(pow_scalar_special_cpu(x, e)),
    }
}

/// [`pow_scalar_special`] on the CPU.
#[track_caller]
fn pow_scalar_special_cpu(x: &Tensor, e: f64) -> Result<Tensor> {
    reserve("pow", x.shape(), x.dtype())?;
    let out = x.with_cpu("pow", |s, l| {
        match_cpu_float!(s, |a: T| {
            macro_rules! go {
                ($f:expr) => {
                    T::wrap(map1(a, l, |v: T| T::from_compute($f(v.to_compute()))))
                };
            }
            match e {
                2.0 => go!(|v| v * v),
                3.0 => go!(|v| v * v * v),
                0.5 => go!(|v: <T as FloatElement>::Compute| v.sqrt()),
                -0.5 => go!(|v: <T as FloatElement>::Compute| <T as FloatElement>::Compute::one() / v.sqrt()),
                -1.0 => go!(|v: <T as FloatElement>::Compute| <T as FloatElement>::Compute::one() / v),
                _ => go!(|v: <T as FloatElement>::Compute| <T as FloatElement>::Compute::one() / (v * v)),
            }
        }, _ => unreachable!("checked to be a float dtype"))
    });
    out.map(|s| Tensor::from_cpu_storage(s, x.shape()))
}

/// [`pow_scalar_special`] under capture: the same formulas as elementwise nodes.
fn pow_scalar_special_captured(x: &Tensor, e: f64) -> Tensor {
    use crate::capture::elementwise;
    let (shape, dt) = (x.shape(), x.dtype());
    let un = |op: UnaryOp, t: &Tensor| elementwise(NodeKind::Unary(op), &[(t, t.layout().clone())], shape, dt);
    match e {
        2.0 => un(UnaryOp::Square, x),
        3.0 => {
            let sq = un(UnaryOp::Square, x);
            elementwise(
                NodeKind::Binary(BinaryOp::Mul),
                &[(&sq, sq.layout().clone()), (x, x.layout().clone())],
                shape,
                dt,
            )
        }
        0.5 => un(UnaryOp::Sqrt, x),
        -0.5 => un(UnaryOp::Rsqrt, x),
        -1.0 => un(UnaryOp::Reciprocal, x),
        _ => un(UnaryOp::Reciprocal, &un(UnaryOp::Square, x)),
    }
}

/// `op(a, b)` with broadcasting and type promotion; at least one operand is a tensor. Records
/// the op for autograd when a tensor operand requires grad.
#[track_caller]
pub(crate) fn binary(op: BinaryOp, a: &Operand, b: &Operand) -> Result<Tensor> {
    if op == BinaryOp::Pow {
        if let Some(c) = crate::amp::autocast::operands("pow", &[a.as_tensor(), b.as_tensor()])? {
            let cast = |i: usize, o: &Operand| c.opt(i).map_or_else(|| o.clone(), |t| Operand::Tensor(t.clone()));
            return binary(op, &cast(0, a), &cast(1, b));
        }
    }
    let out = binary_forward(op, a, b)?;
    let inputs: SmallVec<[&Tensor; 2]> = [a, b].into_iter().filter_map(Operand::as_tensor).collect();
    if out.dtype().is_float() && autograd::is_recording(&inputs) {
        return Ok(record_binary(op, a, b, &inputs, out));
    }
    Ok(out)
}

/// Records `out = op(a, b)` with its backward rule; the rule sees both operands as tensors of
/// the output's dtype (a scalar operand as a 0-dim tensor) and the output.
#[track_caller]
fn record_binary(op: BinaryOp, a: &Operand, b: &Operand, inputs: &[&Tensor], out: Tensor) -> Tensor {
    use BinaryOp::*;
    let name = match op {
        Add => "AddBackward0",
        Sub => "SubBackward0",
        Mul => "MulBackward0",
        Div => "DivBackward0",
        Rem => "RemainderBackward0",
        Pow if matches!(b, Operand::Scalar(_)) => "PowBackward0",
        Pow => "PowBackward1",
        Maximum => "MaximumBackward0",
        Minimum => "MinimumBackward0",
        Atan2 => "Atan2Backward0",
        BitAnd | BitOr | BitXor | BitShl | BitShr => {
            unreachable!("bitwise ops give integer results, which never record")
        }
    };
    let dt = out.dtype();
    let is_tensor = [matches!(a, Operand::Tensor(_)), matches!(b, Operand::Tensor(_))];
    let requires = [a, b].map(|o| o.as_tensor().is_some_and(Tensor::requires_grad));
    // Save only what the needed gradients read (as PyTorch: `x * 2` saves nothing of `x`).
    let [save_a, save_b] = match op {
        Add | Sub => [false, false],
        Mul => [requires[1], requires[0]],
        Div => [requires[1], true],
        Rem => [requires[1], requires[1]],
        Pow if matches!(b, Operand::Scalar(_)) => [true, false],
        Pow | Maximum | Minimum | Atan2 => [true, true],
        BitAnd | BitOr | BitXor | BitShl | BitShr => unreachable!("bitwise ops never record"),
    };
    let scalar_exponent = match (op, b) {
        (Pow, Operand::Scalar(e)) => Some(e.to_f64()),
        _ => None,
    };
    let mut saved: SmallVec<[Saved; 3]> = SmallVec::new();
    for (keep, operand) in [(save_a, a), (save_b, b)] {
        if keep {
            saved.push(Saved::Tensor(operand.to_tensor(dt)));
        }
    }
    if op == Pow && scalar_exponent.is_none() {
        saved.push(Saved::Output);
    }
    autograd::record(out, name, inputs, saved, move |ctx, g, s| {
        // Input k of the node is operand `slot` (a scalar operand has no input).
        let mut needs = [false; 2];
        let mut k = 0;
        for slot in 0..2 {
            if is_tensor[slot] {
                needs[slot] = ctx.needs_input_grad(k);
                k += 1;
            }
        }
        let mut rest = s.iter();
        let a = if save_a { rest.next() } else { None };
        let b = if save_b { rest.next() } else { None };
        let [ga, gb] = match scalar_exponent {
            // d/dx x^p = p·x^(p-1) (0 for p = 0), with the exponent kept a scalar.
            Some(p) => [Some(if p == 0.0 { g.zeros_like() } else { g * a.expect("saved").pow(p - 1.0) * p }), None],
            None => binary_grads(op, g, [a, b], rest.next(), needs),
        };
        let mut out = grads![];
        for (slot, grad) in [ga, gb].into_iter().enumerate() {
            if is_tensor[slot] {
                out.push(grad);
            }
        }
        out
    })
}

/// The gradients of `op(a, b)` for the operands in `needs`, from the saved operands (`s[i]` is
/// saved whenever operand `i`'s value is needed) and, for `pow`, the output; broadcast shapes
/// are summed down by the engine.
fn binary_grads(
    op: BinaryOp,
    g: &Tensor,
    s: [Option<&Tensor>; 2],
    out: Option<&Tensor>,
    needs: [bool; 2],
) -> [Option<Tensor>; 2] {
    use BinaryOp::*;
    let when = |i: usize, f: &dyn Fn() -> Tensor| needs[i].then(f);
    let a = || s[0].expect("saved when needed");
    let b = || s[1].expect("saved when needed");
    match op {
        Add => [when(0, &|| g.clone()), when(1, &|| g.clone())],
        Sub => [when(0, &|| g.clone()), when(1, &|| -g)],
        Mul => [when(0, &|| g * b()), when(1, &|| g * a())],
        Div => [when(0, &|| g / b()), when(1, &|| -(g * a()) / b().square())],
        Rem => [when(0, &|| g.clone()), when(1, &|| -(g * (a() / b()).floor()))],
        Pow => {
            let (a, e, out) = (a(), b(), out.expect("pow saves its output"));
            [
                // d/da a^e = e·a^(e-1), and 0 where e = 0 (PyTorch's convention, also at a = 0).
                when(0, &|| Tensor::where_cond(&e.eq(0.0), 0.0, g * e * a.pow(e - 1.0))),
                // d/de a^e = a^e·ln a, and 0 where a = 0 and e >= 0.
                when(1, &|| Tensor::where_cond(&a.eq(0.0).logical_and(e.ge(0.0)), 0.0, g * out * a.log())),
            ]
        }
        Maximum | Minimum => {
            let (a, b) = (a(), b());
            let a_wins = if op == Maximum { a.gt(b) } else { a.lt(b) };
            let tie = a.eq(b);
            let half = g * 0.5;
            [
                when(0, &|| Tensor::where_cond(&a_wins, g, Tensor::where_cond(&tie, &half, 0.0))),
                when(1, &|| Tensor::where_cond(&a_wins.logical_or(&tie), Tensor::where_cond(&tie, &half, 0.0), g)),
            ]
        }
        Atan2 => {
            let (a, b) = (a(), b());
            let r2 = a.square() + b.square();
            [when(0, &|| g * b / &r2), when(1, &|| -(g * a) / &r2)]
        }
        BitAnd | BitOr | BitXor | BitShl | BitShr => unreachable!("bitwise ops never record"),
    }
}

/// The eager computation of [`binary`], without recording.
#[track_caller]
pub(super) fn binary_forward(op: BinaryOp, a: &Operand, b: &Operand) -> Result<Tensor> {
    let dt = binary_dtype(op, a, b)?;
    if let (BinaryOp::Pow, Operand::Tensor(x), Operand::Scalar(e)) = (op, a, b) {
        if x.dtype() == dt {
            if let Some(r) = pow_scalar_special(x, e.to_f64()) {
                return r;
            }
        }
    }
    let shape = broadcast_all(op.name(), &[a.shape(), b.shape()])?;
    check_int_operands(op, dt, b)?;
    let scalar_operand = matches!(a, Operand::Scalar(_)) || matches!(b, Operand::Scalar(_));
    if matches!(dt, DType::F16 | DType::BF16) && matches!(op, BinaryOp::Mul | BinaryOp::Div) && scalar_operand {
        // PyTorch's half kernels keep a scalar factor or divisor at f32 precision (other ops
        // round it to the half type first): compute in f32, round once.
        let (fa, fb) = (a.to_tensor(DType::F32), b.to_tensor(DType::F32));
        return binary_forward(op, &Operand::Tensor(fa), &Operand::Tensor(fb))?.try_to_dtype(dt);
    }
    let (ta, tb) = (a.to_tensor(dt), b.to_tensor(dt));
    let la = ta.layout().broadcast_to(&shape).expect("shape was broadcast");
    let lb = tb.layout().broadcast_to(&shape).expect("shape was broadcast");
    let inputs = [(&ta, la), (&tb, lb)];
    elementwise(op.name(), NodeKind::Binary(op), EagerOp::Binary(op), &inputs, &shape, (dt, dt), || {
        let [(_, la), (_, lb)] = &inputs;
        let out = ta.with_cpu2(&tb, op.name(), |sa, sb| {
            match_cpu!(sa, |a: T| T::wrap(T::binary(op, a, la, sb.as_buf::<T>().expect("same dtype"), lb)))
        })?;
        Ok(Tensor::from_cpu_storage(out, &shape))
    })
}

/// `dst = op(dst, b)` in place: the result must keep `dst`'s shape and be castable to its dtype.
#[track_caller]
pub(crate) fn binary_inplace(op: BinaryOp, dst: &Tensor, b: &Operand) -> Result<()> {
    let recording = match b {
        Operand::Tensor(t) => autograd::is_recording(&[dst, t]),
        Operand::Scalar(_) => autograd::is_recording(&[dst]),
    };
    if recording {
        return autograd::inplace(op.name(), dst, |old| binary(op, &Operand::Tensor(old.clone()), b));
    }
    let a = Operand::Tensor(dst.clone());
    let dt = binary_dtype(op, &a, b)?;
    if !can_cast(dt, dst.dtype()) {
        bail!(op.name(), DType, "result type {dt} can't be cast to the desired output type {}", dst.dtype());
    }
    let shape = broadcast_all(op.name(), &[dst.shape(), b.shape()])?;
    if shape.as_slice() != dst.shape() {
        bail!(op.name(), Shape, "output with shape {:?} doesn't match the broadcast shape {:?}", dst.shape(), shape);
    }
    if dt != dst.dtype() {
        // e.g. an f16 tensor += an f32 tensor: compute in the wider type, round once.
        let r = binary(op, &a, b)?;
        return copy_into(dst, &r);
    }
    check_int_operands(op, dt, b)?;
    let tb = b.to_tensor(dt);
    check_writable(op.name(), dst)?;
    match Backend::of(op.name(), &[dst, &tb])? {
        Backend::Capture => {
            let lb = tb.layout().broadcast_to(&shape).expect("shape was broadcast");
            let r = crate::capture::elementwise(
                NodeKind::Binary(op),
                &[(dst, dst.layout().clone()), (&tb, lb)],
                dst.shape(),
                dt,
            );
            crate::capture::assign(dst, &r);
            Ok(())
        }
        // Out of place, then copied into the destination's view.
        Backend::Cuda => copy_into(dst, &binary_forward(op, &a, b)?),
        Backend::Cpu => {
            let tb = if tb.shares_storage_with(dst) { tb.deep_clone() } else { tb };
            let lb = tb.layout().broadcast_to(&shape).expect("shape was broadcast");
            dst.with_cpu_write(op.name(), &tb, |sd, sb| {
                match_cpu!(sd, |d: T| T::binary_inplace(
                    op,
                    d,
                    dst.layout(),
                    sb.as_buf::<T>().expect("same dtype"),
                    &lb
                ))
            })
        }
    }
}

/// An error when `dst` has elements that share memory (an expanded view), which an in-place
/// write cannot target.
#[track_caller]
pub(crate) fn check_writable(op: &'static str, dst: &Tensor) -> Result<()> {
    if !dst.layout().is_non_overlapping() {
        bail!(op, Value, "unsupported operation: more than one element of the written-to tensor (shape {:?}, strides {:?}) refers to a single memory location; clone() it first", dst.shape(), dst.stride());
    }
    Ok(())
}

/// Writes `src` (broadcast to `dst`'s shape, cast to its dtype) into `dst`.
#[track_caller]
pub(super) fn copy_into(dst: &Tensor, src: &Tensor) -> Result<()> {
    if autograd::is_recording(&[dst, src]) {
        // The values of `src`, broadcast to `dst`'s shape, with `src`'s history.
        return autograd::inplace("copy_", dst, |old| old.detach().zeros_like().try_add(src));
    }
    let shape = broadcast_all("copy_", &[dst.shape(), src.shape()])?;
    if shape.as_slice() != dst.shape() {
        bail!(
            "copy_",
            Shape,
            "the source of shape {:?} cannot be broadcast to the destination's shape {:?}",
            src.shape(),
            dst.shape()
        );
    }
    check_writable("copy_", dst)?;
    // A copy runs where it writes: on the destination's device.
    let backend = Backend::of("copy_", &[dst])?;
    if backend == Backend::Capture {
        crate::capture::assign(dst, &src.try_to_dtype(dst.dtype())?);
        return Ok(());
    }
    let src = if src.shares_storage_with(dst) { src.deep_clone() } else { src.clone() };
    // Across devices the source is copied over first (PyTorch's copy_ moves data); a 0-dim
    // CPU source joins a CUDA copy as it is.
    let cpu_scalar = src.device().is_cpu() && src.dim() == 0;
    let src = if src.device() != dst.device() && !cpu_scalar {
        crate::cuda::to_device("copy_", &src, dst.device())?
    } else {
        src
    };
    let ls = src.layout().broadcast_to(dst.shape()).expect("shape was broadcast");
    if backend == Backend::Cuda {
        return crate::cuda::copy_into("copy_", dst, &src, ls);
    }
    dst.with_cpu_write("copy_", &src, |sd, ss| {
        match_cpu!(sd, |d: D| match_cpu!(ss, |s: S| map2_inplace(d, dst.layout(), s, &ls, |_: D, v: S| {
            crate::tensor::cast::<S, D>(v)
        })))
    })
}

impl Tensor {
    /// Copies `src` into this tensor in place, broadcasting and casting as needed (`x.copy_(src)`).
    #[track_caller]
    pub fn copy_(&self, src: &Tensor) -> &Tensor {
        copy_into(self, src).or_panic();
        self
    }

    /// [`Tensor::copy_`] returning an error.
    #[track_caller]
    pub fn try_copy_(&self, src: &Tensor) -> Result<&Tensor> {
        copy_into(self, src)?;
        Ok(self)
    }

    /// Sets every element to `value` in place (`x.fill_(v)`); the value is converted to the
    /// dtype (a float into an integer tensor truncates toward zero). A value the dtype cannot
    /// hold panics, as PyTorch raises (`i32_tensor.fill_(1e20)`, `u8_tensor.fill_(-1.0)`,
    /// `f16_tensor.fill_(1e10)`; see [`Tensor::try_fill_`]).
    #[track_caller]
    pub fn fill_(&self, value: impl Into<Scalar>) -> &Tensor {
        self.try_fill_(value).or_panic()
    }

    /// [`Tensor::fill_`] returning an error for a value the dtype cannot hold without overflow
    /// (nothing is written then).
    #[track_caller]
    pub fn try_fill_(&self, value: impl Into<Scalar>) -> Result<&Tensor> {
        let v: Scalar = value.into();
        check_scalar_fits("fill_", v, self.dtype())?;
        if autograd::is_recording(&[self]) {
            autograd::inplace("fill_", self, |old| old.detach().zeros_like().try_add(v))?;
            return Ok(self);
        }
        check_writable("fill_", self)?;
        match Backend::of("fill_", &[self])? {
            Backend::Capture => crate::capture::assign(self, &crate::capture::scalar(v, self.dtype())),
            Backend::Cuda => {
                let value = Tensor::scalar_wrapping(v, self.dtype());
                let lv = value.layout().broadcast_to(self.shape()).expect("a 0-dim tensor broadcasts to any shape");
                crate::cuda::copy_into("fill_", self, &value, lv)?;
            }
            Backend::Cpu => self.with_cpu_mut("fill_", |s, l| {
                match_cpu!(s, |d: T| map1_inplace(d, l, |_| crate::tensor::scalar_as::<T>(v)))
            })?,
        }
        Ok(self)
    }

    /// Sets every element to zero in place.
    #[track_caller]
    pub fn zero_(&self) -> &Tensor {
        self.fill_(0)
    }
}

macro_rules! binary_methods {
    ($($op:ident $name:literal $int:ident [$method:ident $try_method:ident $inplace:ident $try_inplace:ident] $doc:literal;)*) => {
        impl Tensor {$(
            #[doc = concat!("Elementwise ", $doc, ", broadcasting, with PyTorch's type promotion (`torch.", $name, "`).")]
            #[track_caller]
            pub fn $method(&self, other: impl Into<Operand>) -> Tensor {
                binary(BinaryOp::$op, &Operand::Tensor(self.clone()), &other.into()).or_panic()
            }

            #[doc = concat!("[`Tensor::", stringify!($method), "`] returning an error (operands of a dtype the op refuses, shapes that cannot broadcast).")]
            #[track_caller]
            pub fn $try_method(&self, other: impl Into<Operand>) -> Result<Tensor> {
                binary(BinaryOp::$op, &Operand::Tensor(self.clone()), &other.into())
            }

            #[doc = concat!("In-place [`Tensor::", stringify!($method), "`]: the result keeps this tensor's shape and dtype (an i32 tensor takes an i64 operand, wrapping; a float result cannot be written into an integer tensor).")]
            #[track_caller]
            pub fn $inplace(&self, other: impl Into<Operand>) -> &Tensor {
                binary_inplace(BinaryOp::$op, self, &other.into()).or_panic();
                self
            }

            #[doc = concat!("[`Tensor::", stringify!($inplace), "`] returning an error (nothing is written then).")]
            #[track_caller]
            pub fn $try_inplace(&self, other: impl Into<Operand>) -> Result<&Tensor> {
                binary_inplace(BinaryOp::$op, self, &other.into())?;
                Ok(self)
            }
        )*}

        /// Every binary op with its `try_` method (for tests that go through each op's public
        /// name).
        #[doc(hidden)]
        pub const BINARY_METHODS: &[(BinaryOp, fn(&Tensor, Operand) -> Result<Tensor>)] =
            &[$((BinaryOp::$op, |x, y| x.$try_method(y)),)*];
    };
}

kiln_runtime::binary_op_table!(binary_methods);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promotion_and_broadcast() {
        let i = Tensor::new(&[[1i64], [2]]);
        let f = Tensor::new(&[0.5f32, 1.5, 2.5]);
        let s = &i + &f;
        assert_eq!((s.shape(), s.dtype()), (&[2usize, 3][..], DType::F32));
        assert_eq!(s.to_vec::<f32>(), vec![1.5, 2.5, 3.5, 2.5, 3.5, 4.5]);
        assert_eq!((&i + 2.5).dtype(), DType::F32);
        assert_eq!((&i * 3).dtype(), DType::I64);
        assert_eq!((Tensor::new(&[1i32]) + 5i64).dtype(), DType::I32);
        assert_eq!((Tensor::new(&[1.0f64]) / 2.0f32).dtype(), DType::F64);
        assert_eq!(Tensor::new(&[3i64]).div(2).to_vec::<f32>(), vec![1.5]);
        assert_eq!((2.0 - &f).to_vec::<f32>(), vec![1.5, 0.5, -0.5]);
        let e = Tensor::new(&[[1.0f32, 2.0, 3.0]; 2]).try_add(Tensor::new(&[1.0f32; 4])).unwrap_err().to_string();
        assert!(e.starts_with("add: shapes [2, 3] and [4] cannot broadcast (at src/ops/binary.rs:"), "{e}");
    }

    #[test]
    fn integer_rules() {
        let a = Tensor::new(&[-7i64, 7, 250]);
        assert_eq!(a.remainder(3).to_vec::<i64>(), vec![2, 1, 1]);
        assert!(a.try_remainder(0).unwrap_err().to_string().contains("ZeroDivisionError"));
        assert!(a.try_pow(-1).is_err());
        let f = Tensor::new(&[2.0f64, -3.0]);
        assert_eq!(f.pow(3.0).to_vec::<f64>(), vec![8.0, -27.0]);
        assert_eq!(f.pow(-2).to_vec::<f64>(), vec![0.25, 1.0 / 9.0]);
        assert_eq!(f.pow(0.5).to_vec::<f64>()[0], 2f64.sqrt());
        assert_eq!(f.pow(1.5).to_vec::<f64>()[0], 2f64.powf(1.5));
        assert_eq!(Tensor::new(&[250u8]).add(10).to_vec::<u8>(), vec![4]);
        let b = Tensor::new(&[true, false]);
        assert_eq!((&b + &b).to_vec::<bool>(), vec![true, false]);
        assert!(b.try_sub(&b).is_err());
    }

    #[test]
    fn inplace_through_views() {
        let x = Tensor::zeros([2, 3]);
        let col = x.i((.., 1));
        col.add_(5.0);
        x.t().mul_(Tensor::new(&[[1.0f32], [2.0], [3.0]]));
        assert_eq!(x.to_vec::<f32>(), vec![0.0, 10.0, 0.0, 0.0, 10.0, 0.0]);
        let v0 = x.version();
        x.add_(&x); // aliasing source is copied first
        assert_eq!(x.to_vec::<f32>(), vec![0.0, 20.0, 0.0, 0.0, 20.0, 0.0]);
        assert!(x.version() > v0);
        let i = Tensor::new(&[1i64, 2]);
        assert!(std::panic::catch_unwind(|| {
            i.add_(0.5);
        })
        .is_err());
        let e = Tensor::ones([3]).expand([2, 3]);
        assert!(std::panic::catch_unwind(|| {
            e.add_(1.0);
        })
        .is_err());
        let mut y = Tensor::ones([2]);
        y += 2.0;
        assert_eq!(y.to_vec::<f32>(), vec![3.0, 3.0]);
        let h = Tensor::ones([2]).to_dtype(DType::F16);
        h.add_(Tensor::new(&[0.5f32, 1.0]));
        assert_eq!(h.to_dtype(DType::F32).to_vec::<f32>(), vec![1.5, 2.0]);
    }

    #[test]
    fn empty_views_past_the_end_of_storage() {
        // narrow(1, 1, 0) of a [0, 1] tensor has offset 1 in an empty storage (as in PyTorch).
        let e = Tensor::zeros([0, 1]).narrow(1, 1, 0);
        assert_eq!((&e + 1.0).shape(), &[0, 0]);
        assert_eq!(e.exp().numel(), 0);
        e.add_(1.0);
        assert!(e.to_vec::<f32>().is_empty());
        assert!(e.contiguous().as_slice::<f32>().is_empty());
    }

    /// PyTorch 2.15's rule for a Python number written into a tensor (checked with torch:
    /// `torch.zeros(2, dtype=d).fill_(v)` for each value below).
    #[test]
    fn scalar_conversions_follow_pytorch() {
        use Scalar::{Bool as B, Float as F, Int as I};
        let fits = |v: Scalar, d: DType| scalar_fits(v, d);
        for (v, i32_ok, i64_ok, u8_ok) in [
            (F(1e20), false, false, false),
            (F(f64::NAN), false, false, false),
            (F(f64::INFINITY), false, false, false),
            (F(3.7), true, true, true),
            (F(-0.5), true, true, false),
            (F(-0.0), true, true, true),
            (F(255.9), true, true, true),
            (F(256.0), true, true, false),
            (F(2147483647.5), true, true, false),
            (F(2147483648.0), false, true, false),
            (F(-2147483648.5), false, true, false),
            (F(9.223372036854776e18), false, false, false),
            (F(-9.223372036854776e18), false, true, false),
            (I(-1), true, true, true),
            (I(-255), true, true, true),
            (I(-256), true, true, false),
            (I(256), true, true, false),
            (I(1 << 31), false, true, false),
            (I(1 << 40), false, true, false),
            (B(true), true, true, true),
        ] {
            assert_eq!(
                (fits(v, DType::I32), fits(v, DType::I64), fits(v, DType::U8)),
                (i32_ok, i64_ok, u8_ok),
                "{v:?}"
            );
            assert!(fits(v, DType::Bool));
        }
        assert!(!fits(F(3.5e38), DType::F32) && fits(F(3.4e38), DType::F32) && fits(F(f64::NAN), DType::F32));
        assert!(
            !fits(F(65519.0), DType::F16) && fits(F(65504.0), DType::F16) && fits(F(f64::NEG_INFINITY), DType::F16)
        );
        assert!(!fits(I(70000), DType::F16) && fits(F(1e10), DType::BF16) && !fits(F(3.4e38), DType::BF16));
        assert!(fits(F(1e300), DType::F64));

        // Every path that writes a number into a tensor checks it, naming the op.
        let i = Tensor::zeros([3]).to_dtype(DType::I32);
        let idx = Tensor::new(&[1i64]);
        let e = i.try_fill_(1e20).unwrap_err().to_string();
        assert!(e.starts_with("fill_: value 1e20 cannot be converted to type int32 without overflow"), "{e}");
        assert!(i.try_index_fill(0, &idx, 1i64 << 40).unwrap_err().to_string().starts_with("index_fill: value"));
        assert!(i.try_index_fill_(0, &idx, f64::NAN).is_err());
        assert!(i.try_scatter_value(0, &idx, 1i64 << 40).unwrap_err().to_string().starts_with("scatter: value"));
        assert!(i.try_scatter_value_(0, &idx, 1e20).is_err());
        assert!(Tensor::try_scalar_opts(1i64 << 40, DType::I32).unwrap_err().to_string().starts_with("tensor: value"));
        assert!(Tensor::try_full_opts([2], -1.0, DType::U8, kiln_runtime::Device::Cpu).is_err());
        assert!(Tensor::try_where(&Tensor::new(&[true]), i.narrow(0, 0, 1), 1i64 << 40)
            .unwrap_err()
            .to_string()
            .starts_with("where: value"));
        assert!(std::panic::catch_unwind(|| Tensor::full([1], 1e300)).is_err());
        assert_eq!(i.try_fill_(3.7).unwrap().to_vec::<i32>(), vec![3; 3]);
        assert_eq!(
            Tensor::zeros([1]).to_dtype(DType::U8).masked_fill(&Tensor::new(&[true]), -1).to_vec::<u8>(),
            vec![255]
        );
        // Arithmetic operands wrap, as PyTorch's do; a tensor cast is not a scalar conversion.
        assert_eq!((&i + (1i64 << 40)).to_vec::<i32>(), vec![3; 3]);
        assert_eq!(Tensor::full([1], 1e20).to_dtype(DType::I32).dtype(), DType::I32);
    }

    #[test]
    fn copy_and_fill() {
        let x = Tensor::zeros([2, 2]).to_dtype(DType::I32);
        x.copy_(&Tensor::new(&[1.9f32, -2.9]));
        assert_eq!(x.to_vec::<i32>(), vec![1, -2, 1, -2]);
        x.fill_(7);
        assert_eq!(x.to_vec::<i32>(), vec![7; 4]);
    }
}
