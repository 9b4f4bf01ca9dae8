//! `kiln::nn`: modules, layers, losses and initialisation (PyTorch's `torch.nn`).

pub mod functional;
