//! Rust numbers used as operands (`&x + 2.0`, `x.fill_(1)`, `Tensor::full(&[2], 7)`).

use kiln_runtime::DType;

/// A Rust number given to an op: PyTorch's "wrapped number". Its category (bool, int, float)
/// takes part in type promotion, its width does not.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Float(f64),
}

impl Scalar {
    /// The dtype this scalar stands for in promotion: `Bool`, `I64` or `F64`.
    pub fn promotion_dtype(self) -> DType {
        match self {
            Scalar::Bool(_) => DType::Bool,
            Scalar::Int(_) => DType::I64,
            Scalar::Float(_) => DType::F64,
        }
    }

    /// The dtype a tensor made from this scalar alone gets: `Bool`, `I64` or the default `F32`.
    pub fn default_dtype(self) -> DType {
        match self {
            Scalar::Bool(_) => DType::Bool,
            Scalar::Int(_) => DType::I64,
            Scalar::Float(_) => DType::F32,
        }
    }

    /// The value as f64.
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => b as u8 as f64,
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
        }
    }

    /// The value as i64 (floats truncate toward zero).
    pub fn to_i64(self) -> i64 {
        match self {
            Scalar::Bool(b) => b as i64,
            Scalar::Int(i) => i,
            Scalar::Float(f) => f as i64,
        }
    }
}

macro_rules! scalar_from {
    ($variant:ident, $conv:ty: $($t:ty),*) => {
        $(impl From<$t> for Scalar {
            fn from(v: $t) -> Scalar {
                Scalar::$variant(v as $conv)
            }
        })*
    };
}
scalar_from!(Float, f64: f32, f64);
scalar_from!(Int, i64: i8, i16, i32, i64, u8, u16, u32, usize, isize);

impl From<bool> for Scalar {
    fn from(v: bool) -> Scalar {
        Scalar::Bool(v)
    }
}

impl From<half::f16> for Scalar {
    fn from(v: half::f16) -> Scalar {
        Scalar::Float(v.to_f64())
    }
}

impl From<half::bf16> for Scalar {
    fn from(v: half::bf16) -> Scalar {
        Scalar::Float(v.to_f64())
    }
}
