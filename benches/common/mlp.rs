//! The MLP 784-512-512-10 of the training-step benches (ReLU between layers).

use kiln::nn::{self, functional as F, Module};
use kiln::Tensor;

/// Three linear layers with ReLU between them.
#[derive(Module)]
pub struct Mlp {
    fc1: nn::Linear,
    fc2: nn::Linear,
    fc3: nn::Linear,
}

impl Mlp {
    /// 784 → 512 → 512 → 10 with PyTorch's default initialisation.
    pub fn new() -> Mlp {
        Mlp { fc1: nn::Linear::new(784, 512), fc2: nn::Linear::new(512, 512), fc3: nn::Linear::new(512, 10) }
    }
}

impl Module for Mlp {
    fn forward(&self, x: &Tensor) -> Tensor {
        let x = F::relu(&self.fc1.forward(x));
        let x = F::relu(&self.fc2.forward(&x));
        self.fc3.forward(&x)
    }
}
