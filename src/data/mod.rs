//! `kiln::data`: datasets and the `DataLoader` (PyTorch's `torch.utils.data`).
