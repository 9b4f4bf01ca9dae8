//! The 60-minute blitz's CIFAR-10 `Net` (part 4, "Training a classifier"), shared by the
//! checkpoint test and the training-step bench (examples/cifar10_blitz.rs keeps its own copy, a
//! line-by-line port that reads on its own).

use kiln::nn::{self, functional as F, Module};
use kiln::Tensor;

/// conv(3→6, 5) → pool → conv(6→16, 5) → pool → fc 400→120→84→10, ReLU between.
#[derive(Module)]
pub struct Net {
    conv1: nn::Conv2d,
    pool: nn::MaxPool2d,
    conv2: nn::Conv2d,
    fc1: nn::Linear,
    fc2: nn::Linear,
    fc3: nn::Linear,
}

impl Net {
    /// The blitz's layers with PyTorch's default initialisation.
    pub fn new() -> Net {
        Net {
            conv1: nn::Conv2d::new(3, 6, 5),
            pool: nn::MaxPool2d::new(2),
            conv2: nn::Conv2d::new(6, 16, 5),
            fc1: nn::Linear::new(16 * 5 * 5, 120),
            fc2: nn::Linear::new(120, 84),
            fc3: nn::Linear::new(84, 10),
        }
    }
}

impl Module for Net {
    fn forward(&self, x: &Tensor) -> Tensor {
        let x = self.pool.forward(&F::relu(&self.conv1.forward(x)));
        let x = self.pool.forward(&F::relu(&self.conv2.forward(&x)));
        let x = x.flatten(1, -1);
        let x = F::relu(&self.fc1.forward(&x));
        let x = F::relu(&self.fc2.forward(&x));
        self.fc3.forward(&x)
    }
}
