//! `kiln::nn::functional` (PyTorch's `torch.nn.functional`, usually imported as `F`): the
//! stateless forms of the layers, losses and activations.

mod activation;
pub(crate) mod attention;
mod bilinear;
mod conv;
mod conv3d;
mod conv_transpose;
mod distance;
mod dropout;
mod embedding;
mod fused_rows;
mod interpolate;
mod loss;
mod norm;
mod pad;
mod pool;
mod pool_nd;

pub use activation::*;
pub use attention::{scaled_dot_product_attention, try_scaled_dot_product_attention};
pub use bilinear::*;
pub use conv::*;
pub use conv3d::*;
pub use conv_transpose::*;
pub use distance::*;
pub use dropout::*;
pub use embedding::*;
pub use interpolate::*;
pub use loss::*;
pub use norm::*;
pub use pad::*;
pub use pool::*;
pub use pool_nd::*;
