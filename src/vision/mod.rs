//! `kiln::vision`: datasets and transforms for images (torchvision's counterparts).
