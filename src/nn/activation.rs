//! Activation modules (`nn.ReLU()`, `nn.GELU()`, `nn.Softmax(dim=1)`, …).

use super::functional as F;
use super::repr::py_float;
use crate::nn::Module;
use crate::Tensor;

/// Defines a parameterless activation module that applies `$apply` to its input.
macro_rules! activation {
    ($(#[$doc:meta])* $name:ident, |$x:ident| $apply:expr) => {
        $(#[$doc])*
        #[derive(crate::nn::Module, Clone, Copy, Debug, Default)]
        pub struct $name;

        impl Module for $name {
            #[track_caller]
            fn forward(&self, $x: &Tensor) -> Tensor {
                let layer = crate::nn::summary::enter(self);
                layer.exit($apply)
            }
        }
    };
}

activation!(
    /// `max(x, 0)`.
    ReLU, |x| x.relu()
);
activation!(
    /// Logistic sigmoid.
    Sigmoid, |x| x.sigmoid()
);
activation!(
    /// Hyperbolic tangent.
    Tanh, |x| x.tanh()
);

/// Defines the module of each composite activation (`nn.Mish()`, `nn.ELU(alpha=1.0)`, …): its
/// parameters as fields with PyTorch's defaults, printed as PyTorch prints them.
macro_rules! composite_modules {
    ($($name:ident ($($p:ident = $default:literal),*) [$($module:ident)?] $compute:ident $doc:literal |$x:ident| $body:expr $(, fast $fast:tt)?;)*) => {$(
        composite_module!([$($module)?] $name ($($p = $default),*) $doc);
    )*};
}

/// The module of one composite row; none for `[]` (`isnan`).
macro_rules! composite_module {
    ([] $($rest:tt)*) => {};
    ([$module:ident] $name:ident ($($p:ident = $default:literal),*) $doc:literal) => {
        #[doc = concat!("Applies ", $doc, " (`nn.", stringify!($module), "`; [`F::", stringify!($name), "`]).")]
        #[derive(crate::nn::Module, Clone, Copy, Debug)]
        #[module(extra_repr = "describe")]
        pub struct $module {
            $(
                #[doc = concat!("`", stringify!($p), "` (default ", stringify!($default), ").")]
                pub $p: f64,
            )*
        }

        impl $module {
            #[doc = concat!("`nn.", stringify!($module), "(", $(stringify!($p), ", ",)* ")`.")]
            pub fn new($($p: f64),*) -> $module {
                $module { $($p),* }
            }

            fn describe(&self) -> String {
                let parts: Vec<String> = vec![$(format!("{}={}", stringify!($p), py_float(self.$p))),*];
                parts.join(", ")
            }
        }

        impl Default for $module {
            fn default() -> $module {
                $module::new($($default),*)
            }
        }

        impl Module for $module {
            #[track_caller]
            fn forward(&self, x: &Tensor) -> Tensor {
                let layer = crate::nn::summary::enter(self);
                layer.exit(F::$name(x, $(self.$p),*))
            }
        }
    };
}

crate::ops::composite_unary_table!(composite_modules);

/// GELU, exact (`nn.GELU()`) or with the tanh approximation (`nn.GELU(approximate='tanh')`).
#[derive(crate::nn::Module, Clone, Copy, Debug, Default)]
#[module(extra_repr = "describe")]
pub struct GELU {
    /// Whether to use the tanh approximation.
    pub tanh_approximation: bool,
}

impl GELU {
    /// The exact GELU.
    pub fn new() -> GELU {
        GELU { tanh_approximation: false }
    }

    /// The tanh approximation.
    pub fn tanh() -> GELU {
        GELU { tanh_approximation: true }
    }

    fn describe(&self) -> String {
        format!("approximate='{}'", if self.tanh_approximation { "tanh" } else { "none" })
    }
}

impl Module for GELU {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(if self.tanh_approximation { x.gelu_tanh() } else { x.gelu() })
    }
}

/// Softmax over `dim` (`nn.Softmax(dim=1)`).
#[derive(crate::nn::Module, Clone, Copy, Debug)]
#[module(extra_repr = "describe")]
pub struct Softmax {
    /// The dim the probabilities sum to one over.
    pub dim: i64,
}

impl Softmax {
    /// `nn.Softmax(dim)`.
    pub fn new(dim: i64) -> Softmax {
        Softmax { dim }
    }

    fn describe(&self) -> String {
        format!("dim={}", self.dim)
    }
}

impl Module for Softmax {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(x.softmax(self.dim))
    }
}

/// Log-softmax over `dim` (`nn.LogSoftmax(dim=1)`).
#[derive(crate::nn::Module, Clone, Copy, Debug)]
#[module(extra_repr = "describe")]
pub struct LogSoftmax {
    /// The dim normalised over.
    pub dim: i64,
}

impl LogSoftmax {
    /// `nn.LogSoftmax(dim)`.
    pub fn new(dim: i64) -> LogSoftmax {
        LogSoftmax { dim }
    }

    fn describe(&self) -> String {
        format!("dim={}", self.dim)
    }
}

impl Module for LogSoftmax {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(x.log_softmax(self.dim))
    }
}

/// The gated linear unit over `dim` (`nn.GLU(dim=-1)`): see [`F::glu`].
#[derive(crate::nn::Module, Clone, Copy, Debug)]
#[module(extra_repr = "describe")]
pub struct GLU {
    /// The dim split in halves.
    pub dim: i64,
}

impl GLU {
    /// `nn.GLU(dim)`.
    pub fn new(dim: i64) -> GLU {
        GLU { dim }
    }

    fn describe(&self) -> String {
        format!("dim={}", self.dim)
    }
}

impl Default for GLU {
    /// `nn.GLU()`: the last dim.
    fn default() -> GLU {
        GLU::new(-1)
    }
}

impl Module for GLU {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(F::glu(x, self.dim))
    }
}

/// Parametric ReLU (`nn.PReLU(num_parameters=1, init=0.25)`): `x` where positive, a learned
/// slope times `x` elsewhere, one slope for all channels or one per channel (dim 1).
#[derive(crate::nn::Module)]
#[module(extra_repr = "describe")]
pub struct PReLU {
    /// The slopes, `(num_parameters)`.
    pub weight: Tensor,
    /// 1, or the number of channels of the input.
    pub num_parameters: usize,
}

impl PReLU {
    /// `nn.PReLU(num_parameters, init)`.
    #[track_caller]
    pub fn new(num_parameters: usize, init: f64) -> PReLU {
        PReLU { weight: Tensor::full([num_parameters], init).requires_grad_(true), num_parameters }
    }

    fn describe(&self) -> String {
        format!("num_parameters={}", self.num_parameters)
    }
}

impl Default for PReLU {
    /// `nn.PReLU()`: one slope, 0.25.
    fn default() -> PReLU {
        PReLU::new(1, 0.25)
    }
}

impl Module for PReLU {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(F::prelu(x, &self.weight))
    }
}
