//! Padding modules: `ZeroPad1d/2d/3d`, `ConstantPad1d/2d/3d`, `ReflectionPad1d/2d/3d`,
//! `ReplicationPad1d/2d/3d` and `CircularPad1d/2d/3d`, each a [`F::pad`] with its amounts
//! fixed, printed as PyTorch prints them (`ReflectionPad2d((1, 1, 2, 0))`,
//! `ConstantPad1d(padding=(2, 2), value=3.5)`).

use super::functional::{self as F, PadMode};
use super::repr::py_float;
use crate::nn::Module;
use crate::Tensor;

/// The `(left, right)` amounts of a padding module, from the last dim backwards; `L` is twice
/// the number of padded dims. Converts from one amount for every side (`2`, as PyTorch's
/// `nn.ReflectionPad2d(2)`) or from all of them (`[1, 1, 2, 0]`, as `nn.ReflectionPad2d((1, 1,
/// 2, 0))`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Padding<const L: usize>(pub [i64; L]);

impl<const L: usize> From<i64> for Padding<L> {
    fn from(amount: i64) -> Self {
        Padding([amount; L])
    }
}

impl<const L: usize> From<[i64; L]> for Padding<L> {
    fn from(amounts: [i64; L]) -> Self {
        Padding(amounts)
    }
}

/// A Python tuple of the amounts: `(1, 1, 2, 0)`.
fn tuple(p: &[i64]) -> String {
    format!("({})", p.iter().map(i64::to_string).collect::<Vec<_>>().join(", "))
}

macro_rules! pad_module {
    ($(#[$doc:meta])* $name:ident, $len:literal, $mode:expr) => {
        $(#[$doc])*
        #[derive(crate::nn::Module, Clone, Copy, Debug)]
        #[module(extra_repr = "describe")]
        pub struct $name {
            /// The `(left, right)` amounts, from the last dim backwards.
            pub padding: [i64; $len],
        }

        impl $name {
            /// The module padding by `padding`: one amount for every side, or all of them.
            pub fn new(padding: impl Into<Padding<$len>>) -> $name {
                $name { padding: padding.into().0 }
            }

            fn describe(&self) -> String {
                tuple(&self.padding)
            }
        }

        impl Module for $name {
            #[track_caller]
            fn forward(&self, input: &Tensor) -> Tensor {
                let layer = crate::nn::summary::enter(self);
                layer.exit(F::pad(input, &self.padding, $mode))
            }
        }
    };
}

macro_rules! constant_pad_module {
    ($(#[$doc:meta])* $name:ident, $len:literal) => {
        $(#[$doc])*
        #[derive(crate::nn::Module, Clone, Copy, Debug)]
        #[module(extra_repr = "describe")]
        pub struct $name {
            /// The `(left, right)` amounts, from the last dim backwards; negative amounts crop.
            pub padding: [i64; $len],
            /// The value of the new elements.
            pub value: f64,
        }

        impl $name {
            /// The module padding by `padding` (one amount for every side, or all of them)
            /// with `value`.
            pub fn new(padding: impl Into<Padding<$len>>, value: f64) -> $name {
                $name { padding: padding.into().0, value }
            }

            fn describe(&self) -> String {
                format!("padding={}, value={}", tuple(&self.padding), py_float(self.value))
            }
        }

        impl Module for $name {
            #[track_caller]
            fn forward(&self, input: &Tensor) -> Tensor {
                let layer = crate::nn::summary::enter(self);
                layer.exit(F::pad(input, &self.padding, PadMode::Constant(self.value)))
            }
        }
    };
}

pad_module!(
    /// Zero padding of the last dim (`nn.ZeroPad1d`).
    ZeroPad1d, 2, PadMode::Constant(0.0)
);
pad_module!(
    /// Zero padding of the last 2 dims (`nn.ZeroPad2d`).
    ZeroPad2d, 4, PadMode::Constant(0.0)
);
pad_module!(
    /// Zero padding of the last 3 dims (`nn.ZeroPad3d`).
    ZeroPad3d, 6, PadMode::Constant(0.0)
);
constant_pad_module!(
    /// Constant padding of the last dim (`nn.ConstantPad1d`).
    ConstantPad1d, 2
);
constant_pad_module!(
    /// Constant padding of the last 2 dims (`nn.ConstantPad2d`).
    ConstantPad2d, 4
);
constant_pad_module!(
    /// Constant padding of the last 3 dims (`nn.ConstantPad3d`).
    ConstantPad3d, 6
);
pad_module!(
    /// Reflection padding of the last dim of `(C, W)` or `(N, C, W)` input
    /// (`nn.ReflectionPad1d`); each amount must be below the dim's size.
    ReflectionPad1d, 2, PadMode::Reflect
);
pad_module!(
    /// Reflection padding of the last 2 dims of `(C, H, W)` or `(N, C, H, W)` input
    /// (`nn.ReflectionPad2d`).
    ReflectionPad2d, 4, PadMode::Reflect
);
pad_module!(
    /// Reflection padding of the last 3 dims of `(C, D, H, W)` or `(N, C, D, H, W)` input
    /// (`nn.ReflectionPad3d`).
    ReflectionPad3d, 6, PadMode::Reflect
);
pad_module!(
    /// Edge replication of the last dim of `(C, W)` or `(N, C, W)` input (`nn.ReplicationPad1d`).
    ReplicationPad1d, 2, PadMode::Replicate
);
pad_module!(
    /// Edge replication of the last 2 dims of `(C, H, W)` or `(N, C, H, W)` input
    /// (`nn.ReplicationPad2d`).
    ReplicationPad2d, 4, PadMode::Replicate
);
pad_module!(
    /// Edge replication of the last 3 dims of `(C, D, H, W)` or `(N, C, D, H, W)` input
    /// (`nn.ReplicationPad3d`).
    ReplicationPad3d, 6, PadMode::Replicate
);
pad_module!(
    /// Circular (wrap-around) padding of the last dim of `(C, W)` or `(N, C, W)` input
    /// (`nn.CircularPad1d`); each amount must be at most the dim's size.
    CircularPad1d, 2, PadMode::Circular
);
pad_module!(
    /// Circular padding of the last 2 dims of `(C, H, W)` or `(N, C, H, W)` input
    /// (`nn.CircularPad2d`).
    CircularPad2d, 4, PadMode::Circular
);
pad_module!(
    /// Circular padding of the last 3 dims of `(C, D, H, W)` or `(N, C, D, H, W)` input
    /// (`nn.CircularPad3d`).
    CircularPad3d, 6, PadMode::Circular
);
