//! Custom differentiable functions (`torch.autograd.Function`).
