//! Element types and PyTorch's type-promotion rules.

use half::{bf16, f16};
use std::fmt;

/// The element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// Boolean (one byte, 0 or 1).
    Bool,
    /// Unsigned 8-bit integer.
    U8,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer (PyTorch's `long`, the default integer type).
    I64,
    /// IEEE half precision.
    F16,
    /// Brain floating point (8-bit exponent, 7-bit mantissa).
    BF16,
    /// Single precision, the default floating-point type.
    F32,
    /// Double precision.
    F64,
}

/// The three promotion categories of PyTorch (complex is not supported).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Category {
    /// `Bool`.
    Bool,
    /// Integer types.
    Int,
    /// Floating-point types.
    Float,
}

impl DType {
    /// Every dtype, in a fixed order.
    pub const ALL: [DType; 8] =
        [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::I32, DType::U8, DType::Bool];

    /// Bytes per element.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::Bool | DType::U8 => 1,
            DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::F32 => 4,
            DType::I64 | DType::F64 => 8,
        }
    }

    /// True for the floating-point dtypes.
    pub fn is_float(self) -> bool {
        self.category() == Category::Float
    }

    /// The largest finite value of a floating-point dtype (`torch.finfo(dtype).max`); `None`
    /// for the other dtypes.
    pub fn finite_max(self) -> Option<f64> {
        match self {
            DType::F16 => Some(f16::MAX.to_f64()),
            DType::BF16 => Some(bf16::MAX.to_f64()),
            DType::F32 => Some(f32::MAX as f64),
            DType::F64 => Some(f64::MAX),
            DType::Bool | DType::U8 | DType::I32 | DType::I64 => None,
        }
    }

    /// True for the integer dtypes (not `Bool`).
    pub fn is_int(self) -> bool {
        self.category() == Category::Int
    }

    /// The promotion category of this dtype.
    pub fn category(self) -> Category {
        match self {
            DType::Bool => Category::Bool,
            DType::U8 | DType::I32 | DType::I64 => Category::Int,
            DType::F16 | DType::BF16 | DType::F32 | DType::F64 => Category::Float,
        }
    }

    /// PyTorch's name, as printed in `dtype=torch.float64` (without the `torch.` prefix).
    pub fn torch_name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "uint8",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }

    /// The default dtype of a category: what a Python scalar of that category becomes.
    pub fn default_for(category: Category) -> DType {
        match category {
            Category::Bool => DType::Bool,
            Category::Int => DType::I64,
            Category::Float => DType::F32,
        }
    }

    /// The smallest dtype both `self` and `other` convert to without losing their category
    /// (`torch.promote_types`).
    pub fn promote(self, other: DType) -> DType {
        use DType::*;
        if self == other {
            return self;
        }
        match (self.category(), other.category()) {
            (Category::Bool, _) => other,
            (_, Category::Bool) => self,
            (Category::Int, Category::Float) => other,
            (Category::Float, Category::Int) => self,
            (Category::Int, Category::Int) => {
                // U8 < I32 < I64 here (no I8/I16, so no unsigned/signed widening case arises
                // beyond "the wider signed type").
                if self.size_in_bytes() >= other.size_in_bytes() && self != U8 {
                    self
                } else {
                    other
                }
            }
            (Category::Float, Category::Float) => match (self, other) {
                (F16, BF16) | (BF16, F16) => F32,
                _ => {
                    if self.size_in_bytes() >= other.size_in_bytes() {
                        self
                    } else {
                        other
                    }
                }
            },
        }
    }

    /// The floating-point dtype an op such as `exp` or true division returns for this input:
    /// the dtype itself when it is floating, the default `F32` otherwise.
    pub fn to_float(self) -> DType {
        if self.is_float() {
            self
        } else {
            DType::F32
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.torch_name())
    }
}

/// The priority tier of an operand in `result_type` (PyTorch's rule): dimensioned tensors
/// decide first, zero-dim tensors only when they are of a higher category, Rust scalars last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperandKind {
    /// A tensor with at least one dimension.
    Tensor,
    /// A zero-dimensional tensor.
    ZeroDim,
    /// A Rust scalar (PyTorch's "wrapped number").
    Scalar,
}

/// `torch.result_type` over operands given as (dtype, kind). Scalars participate only through
/// their category: a float scalar turns an integer tensor into `F32`, but never widens an `F16`
/// tensor.
pub fn result_type(operands: &[(DType, OperandKind)]) -> DType {
    let tier = |kind: OperandKind| -> Option<DType> {
        operands.iter().filter(|(_, k)| *k == kind).map(|(d, _)| *d).reduce(DType::promote)
    };
    let dims = tier(OperandKind::Tensor);
    let zero = tier(OperandKind::ZeroDim);
    let scalar = tier(OperandKind::Scalar);
    if dims.is_none() && zero.is_none() {
        // Only Rust scalars (e.g. `where(cond, 1.5, 0)`): the default dtype of their category.
        return DType::default_for(scalar.expect("result_type needs at least one operand").category());
    }
    let mut result: Option<DType> = None;
    for candidate in [dims, zero, scalar].into_iter().flatten() {
        result = Some(match result {
            None => candidate,
            Some(r) if candidate.category() > r.category() => {
                // A higher category from a lower tier: scalars use the default dtype of their
                // category, zero-dim tensors keep their own dtype.
                if Some(candidate) == scalar && Some(candidate) != zero {
                    DType::default_for(candidate.category())
                } else {
                    candidate
                }
            }
            Some(r) => r,
        });
    }
    result.expect("result_type needs at least one operand")
}

/// A Rust type that can be the element of a tensor.
pub trait Element: Copy + Send + Sync + 'static + Default + PartialEq + PartialOrd + fmt::Debug {
    /// The dtype of this element type.
    const DTYPE: DType;
    /// Converts to f64 (exactly for every type but i64 values above 2^53).
    fn to_f64(self) -> f64;
    /// Converts from f64 with Rust's `as` semantics (saturating for integers, NaN to 0).
    fn from_f64(v: f64) -> Self;
    /// Converts to i64 (truncating floats toward zero), used for integer ops and indices.
    fn to_i64(self) -> i64;
    /// Converts from i64 (wrapping for narrower integers, as PyTorch's casts do).
    fn from_i64(v: i64) -> Self;
    /// The value zero.
    fn zero() -> Self;
    /// The value one.
    fn one() -> Self;
}

macro_rules! int_element {
    ($t:ty, $d:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                // Through i64 so that negative floats wrap into U8 as PyTorch's casts do.
                (v as i64) as $t
            }
            #[inline(always)]
            fn to_i64(self) -> i64 {
                self as i64
            }
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn zero() -> Self {
                0
            }
            #[inline(always)]
            fn one() -> Self {
                1
            }
        }
    };
}
int_element!(u8, U8);
int_element!(i32, I32);
int_element!(i64, I64);

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    #[inline(always)]
    fn to_i64(self) -> i64 {
        self as i64
    }
    #[inline(always)]
    fn from_i64(v: i64) -> Self {
        v != 0
    }
    #[inline(always)]
    fn zero() -> Self {
        false
    }
    #[inline(always)]
    fn one() -> Self {
        true
    }
}

macro_rules! native_float_element {
    ($t:ty, $d:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to_i64(self) -> i64 {
                self as i64
            }
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn zero() -> Self {
                0.0
            }
            #[inline(always)]
            fn one() -> Self {
                1.0
            }
        }
    };
}
native_float_element!(f32, F32);
native_float_element!(f64, F64);

macro_rules! half_float_element {
    ($t:ty, $d:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self.to_f64()
            }
            /// Through f32, as PyTorch's `static_cast<c10::Half>(double)` (two roundings;
            /// `half`'s own `from_f64` drops the f64's low 32 bits before rounding, so an f32
            /// halfway case with low bits set would round down).
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                <$t>::from_f32(v as f32)
            }
            #[inline(always)]
            fn to_i64(self) -> i64 {
                self.to_f32() as i64
            }
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                <$t>::from_f64(v as f64)
            }
            #[inline(always)]
            fn zero() -> Self {
                <$t>::ZERO
            }
            #[inline(always)]
            fn one() -> Self {
                <$t>::ONE
            }
        }
    };
}
half_float_element!(f16, F16);
half_float_element!(bf16, BF16);

/// A floating-point element type, with the f32 it computes in. `f32` and `f64` compute in
/// themselves; `f16` and `bf16` are widened to `f32` for every op and rounded back.
pub trait FloatElement: Element {
    /// The type arithmetic runs in.
    type Compute: num_like::Float;
    /// Widens to the compute type.
    fn to_compute(self) -> Self::Compute;
    /// Rounds from the compute type.
    fn from_compute(v: Self::Compute) -> Self;
}

impl FloatElement for f32 {
    type Compute = f32;
    #[inline(always)]
    fn to_compute(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_compute(v: f32) -> Self {
        v
    }
}

impl FloatElement for f64 {
    type Compute = f64;
    #[inline(always)]
    fn to_compute(self) -> f64 {
        self
    }
    #[inline(always)]
    fn from_compute(v: f64) -> Self {
        v
    }
}

impl FloatElement for f16 {
    type Compute = f32;
    #[inline(always)]
    fn to_compute(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn from_compute(v: f32) -> Self {
        f16::from_f32(v)
    }
}

impl FloatElement for bf16 {
    type Compute = f32;
    #[inline(always)]
    fn to_compute(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn from_compute(v: f32) -> Self {
        bf16::from_f32(v)
    }
}

/// The arithmetic that f32 and f64 share, so kernels are written once for both.
pub mod num_like {
    /// `f32` or `f64`: the compute types of [`super::FloatElement`].
    pub trait Float:
        super::Element
        + std::ops::Add<Output = Self>
        + std::ops::Sub<Output = Self>
        + std::ops::Mul<Output = Self>
        + std::ops::Div<Output = Self>
        + std::ops::Rem<Output = Self>
        + std::ops::Neg<Output = Self>
    {
        /// Converts an f64 constant.
        fn c(v: f64) -> Self;
        /// e^x.
        fn exp(self) -> Self;
        /// 2^x.
        fn exp2(self) -> Self;
        /// Natural logarithm.
        fn ln(self) -> Self;
        /// Base-2 logarithm.
        fn log2(self) -> Self;
        /// ln(1 + x), accurate near 0.
        fn ln_1p(self) -> Self;
        /// e^x - 1, accurate near 0.
        fn exp_m1(self) -> Self;
        /// Square root.
        fn sqrt(self) -> Self;
        /// Sine.
        fn sin(self) -> Self;
        /// Cosine.
        fn cos(self) -> Self;
        /// Tangent.
        fn tan(self) -> Self;
        /// Hyperbolic tangent.
        fn tanh(self) -> Self;
        /// Arcsine.
        fn asin(self) -> Self;
        /// Arccosine.
        fn acos(self) -> Self;
        /// Arctangent.
        fn atan(self) -> Self;
        /// Hyperbolic sine.
        fn sinh(self) -> Self;
        /// Hyperbolic cosine.
        fn cosh(self) -> Self;
        /// Inverse hyperbolic sine.
        fn asinh(self) -> Self;
        /// Inverse hyperbolic cosine.
        fn acosh(self) -> Self;
        /// Inverse hyperbolic tangent.
        fn atanh(self) -> Self;
        /// Absolute value.
        fn abs(self) -> Self;
        /// Round toward -inf.
        fn floor(self) -> Self;
        /// Round toward +inf.
        fn ceil(self) -> Self;
        /// Round toward zero.
        fn trunc(self) -> Self;
        /// Round half to even (PyTorch's `round`).
        fn round_half_even(self) -> Self;
        /// x^y.
        fn powf(self, y: Self) -> Self;
        /// atan2(self, x).
        fn atan2(self, x: Self) -> Self;
        /// The error function.
        fn erf(self) -> Self;
        /// NaN test.
        fn is_nan(self) -> bool;
        /// The larger value, propagating NaN (PyTorch's `maximum`).
        fn max_nan(self, other: Self) -> Self;
        /// The smaller value, propagating NaN (PyTorch's `minimum`).
        fn min_nan(self, other: Self) -> Self;
    }

    macro_rules! float_impl {
        ($t:ident, $erf:path, $exp:path, $tanh:path) => {
            impl Float for $t {
                #[inline(always)]
                fn c(v: f64) -> Self {
                    v as $t
                }
                #[inline(always)]
                fn exp(self) -> Self {
                    $exp(self)
                }
                #[inline(always)]
                fn exp2(self) -> Self {
                    $t::exp2(self)
                }
                #[inline(always)]
                fn ln(self) -> Self {
                    $t::ln(self)
                }
                #[inline(always)]
                fn log2(self) -> Self {
                    $t::log2(self)
                }
                #[inline(always)]
                fn ln_1p(self) -> Self {
                    $t::ln_1p(self)
                }
                #[inline(always)]
                fn exp_m1(self) -> Self {
                    $t::exp_m1(self)
                }
                #[inline(always)]
                fn sqrt(self) -> Self {
                    $t::sqrt(self)
                }
                #[inline(always)]
                fn sin(self) -> Self {
                    $t::sin(self)
                }
                #[inline(always)]
                fn cos(self) -> Self {
                    $t::cos(self)
                }
                #[inline(always)]
                fn tan(self) -> Self {
                    $t::tan(self)
                }
                #[inline(always)]
                fn tanh(self) -> Self {
                    $tanh(self)
                }
                #[inline(always)]
                fn asin(self) -> Self {
                    $t::asin(self)
                }
                #[inline(always)]
                fn acos(self) -> Self {
                    $t::acos(self)
                }
                #[inline(always)]
                fn atan(self) -> Self {
                    $t::atan(self)
                }
                #[inline(always)]
                fn sinh(self) -> Self {
                    $t::sinh(self)
                }
                #[inline(always)]
                fn cosh(self) -> Self {
                    $t::cosh(self)
                }
                #[inline(always)]
                fn asinh(self) -> Self {
                    $t::asinh(self)
                }
                #[inline(always)]
                fn acosh(self) -> Self {
                    $t::acosh(self)
                }
                #[inline(always)]
                fn atanh(self) -> Self {
                    $t::atanh(self)
                }
                #[inline(always)]
                fn abs(self) -> Self {
                    $t::abs(self)
                }
                #[inline(always)]
                fn floor(self) -> Self {
                    $t::floor(self)
                }
                #[inline(always)]
                fn ceil(self) -> Self {
                    $t::ceil(self)
                }
                #[inline(always)]
                fn trunc(self) -> Self {
                    $t::trunc(self)
                }
                #[inline(always)]
                fn round_half_even(self) -> Self {
                    $t::round_ties_even(self)
                }
                #[inline(always)]
                fn powf(self, y: Self) -> Self {
                    $t::powf(self, y)
                }
                #[inline(always)]
                fn atan2(self, x: Self) -> Self {
                    $t::atan2(self, x)
                }
                #[inline(always)]
                fn erf(self) -> Self {
                    $erf(self)
                }
                #[inline(always)]
                fn is_nan(self) -> bool {
                    $t::is_nan(self)
                }
                #[inline(always)]
                fn max_nan(self, other: Self) -> Self {
                    if self.is_nan() || other.is_nan() {
                        $t::NAN
                    } else if self >= other {
                        self
                    } else {
                        other
                    }
                }
                #[inline(always)]
                fn min_nan(self, other: Self) -> Self {
                    if self.is_nan() || other.is_nan() {
                        $t::NAN
                    } else if self <= other {
                        self
                    } else {
                        other
                    }
                }
            }
        };
    }
    // f32 exp/tanh are the vectorizable ones, so that every kernel (contiguous or strided,
    // eager or in place) gives the same bits.
    float_impl!(
        f32,
        crate::cpu::special::erf_f32,
        crate::cpu::simd::vecmath::exp_f32,
        crate::cpu::simd::vecmath::tanh_f32
    );
    float_impl!(f64, crate::cpu::special::erf_f64, f64::exp, f64::tanh);
}

#[cfg(test)]
mod tests {
    use super::OperandKind::*;
    use super::*;

    #[test]
    fn promote_follows_pytorch() {
        use DType::*;
        assert_eq!(I64.promote(F32), F32);
        assert_eq!(Bool.promote(I32), I32);
        assert_eq!(Bool.promote(U8), U8);
        assert_eq!(U8.promote(I32), I32);
        assert_eq!(I32.promote(I64), I64);
        assert_eq!(F16.promote(BF16), F32);
        assert_eq!(F32.promote(F64), F64);
        assert_eq!(F16.promote(I64), F16);
    }

    #[test]
    fn result_type_tiers() {
        use DType::*;
        // (int_tensor + 5).dtype == int32
        assert_eq!(result_type(&[(I32, Tensor), (I64, Scalar)]), I32);
        // int tensor + float scalar -> default float
        assert_eq!(result_type(&[(I64, Tensor), (F64, Scalar)]), F32);
        // half tensor + float scalar stays half
        assert_eq!(result_type(&[(F16, Tensor), (F64, Scalar)]), F16);
        // int_tensor + long zero-dim -> int32
        assert_eq!(result_type(&[(I32, Tensor), (I64, ZeroDim)]), I32);
        // int tensor + double zero-dim -> double (higher category keeps its dtype)
        assert_eq!(result_type(&[(I32, Tensor), (F64, ZeroDim)]), F64);
        // bool tensor + int scalar -> int64
        assert_eq!(result_type(&[(Bool, Tensor), (I64, Scalar)]), I64);
        // two zero-dim tensors promote normally
        assert_eq!(result_type(&[(F32, ZeroDim), (F64, ZeroDim)]), F64);
    }
}
