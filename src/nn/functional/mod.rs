//! `kiln::nn::functional` (PyTorch's `torch.nn.functional`, usually imported as `F`): the
//! stateless forms of the layers, losses and activations.

mod activation;
pub(crate) mod attention;
mod conv;
mod distance;
mod dropout;
mod embedding;
mod interpolate;
mod loss;
mod norm;
mod pad;
mod pool;

pub use activation::*;
pub use attention::{scaled_dot_product_attention, try_scaled_dot_product_attention};
pub use conv::*;
pub use distance::*;
pub use dropout::*;
pub use embedding::*;
pub use interpolate::*;
pub use loss::*;
pub use norm::*;
pub use pad::*;
pub use pool::*;
