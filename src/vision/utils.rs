//! `make_grid` (torchvision.utils's): a batch of images laid out as one image, rows of
//! `nrow` images with `padding` pixels of `pad_value` around each, optionally normalized to
//! `[0, 1]` first; what the blitz tutorial's `imshow(make_grid(images))` shows.

use crate::error::{bail, OrPanic, Result};
use crate::Tensor;

/// The options of [`make_grid`], with torchvision's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct GridOpts {
    /// Images per row of the grid (8).
    pub nrow: usize,
    /// Pixels between and around the images (2).
    pub padding: usize,
    /// Shift the images to `[0, 1]` first: clamp to the range, subtract its low end, divide by
    /// its width (at least `1e-5`) (false).
    pub normalize: bool,
    /// The range `normalize` maps to `[0, 1]` (`None`: the batch's, or each image's with
    /// `scale_each`, minimum and maximum).
    pub value_range: Option<(f64, f64)>,
    /// Normalize each image by its own range rather than the batch's (false).
    pub scale_each: bool,
    /// The value of the padding pixels (0).
    pub pad_value: f64,
}

impl Default for GridOpts {
    fn default() -> GridOpts {
        GridOpts { nrow: 8, padding: 2, normalize: false, value_range: None, scale_each: false, pad_value: 0.0 }
    }
}

/// The images of `tensor` (`[B, C, H, W]`, or one image `[C, H, W]` or `[H, W]`; one channel
/// is repeated into three) as one `[C, H', W']` image: `nrow` per row, `ceil(B / nrow)` rows,
/// `padding` pixels of `pad_value` around each; a batch of one is returned as its image,
/// without padding (torchvision's `make_grid`). Not differentiable (torchvision runs it under
/// `no_grad`).
#[track_caller]
pub fn make_grid(tensor: &Tensor, opts: &GridOpts) -> Tensor {
    try_make_grid(tensor, opts).or_panic()
}

/// [`make_grid`] returning an error for a tensor of another rank, `nrow = 0`, or `normalize`
/// of a non-float tensor.
#[track_caller]
pub fn try_make_grid(tensor: &Tensor, opts: &GridOpts) -> Result<Tensor> {
    const OP: &str = "make_grid";
    let _no_grad = crate::no_grad_guard();
    let mut t = tensor.detach();
    if t.dim() == 2 {
        t = t.unsqueeze(0);
    }
    if t.dim() == 3 {
        if t.shape()[0] == 1 {
            t = Tensor::cat(&[&t, &t, &t], 0);
        }
        t = t.unsqueeze(0);
    }
    if t.dim() != 4 {
        bail!(
            OP,
            Shape,
            "expected a [B, C, H, W] batch or one [C, H, W] or [H, W] image, got shape {:?}",
            tensor.shape()
        );
    }
    if t.shape()[1] == 1 {
        t = Tensor::cat(&[&t, &t, &t], 1);
    }
    if opts.nrow == 0 {
        bail!(OP, Value, "nrow must be at least 1");
    }
    if opts.normalize {
        if !t.dtype().is_float() {
            bail!(OP, DType, "normalize needs a floating-point tensor, got {}", t.dtype());
        }
        t = if opts.scale_each {
            let each: Vec<Tensor> =
                (0..t.shape()[0]).map(|k| normalized(&t.select(0, k as i64), opts.value_range)).collect();
            Tensor::stack(&each, 0)
        } else {
            normalized(&t, opts.value_range)
        };
    }
    let [n, c, h, w] = [t.shape()[0], t.shape()[1], t.shape()[2], t.shape()[3]];
    if n == 1 {
        return Ok(t.squeeze_dim(0));
    }
    let (cols, p) = (opts.nrow.min(n), opts.padding);
    let rows = n.div_ceil(cols);
    let (cell_h, cell_w) = (h + p, w + p);
    let grid = Tensor::full([c, cell_h * rows + p, cell_w * cols + p], opts.pad_value).to_dtype(t.dtype());
    for k in 0..n {
        let (y, x) = (k / cols, k % cols);
        let cell = grid.narrow(1, (y * cell_h + p) as i64, h).narrow(2, (x * cell_w + p) as i64, w);
        cell.copy_(&t.select(0, k as i64));
    }
    Ok(grid)
}

/// `t` clamped to `range` (default: its own minimum and maximum), shifted to start at 0 and
/// divided by the range's width (at least `1e-5`), as torchvision's `norm_ip`.
fn normalized(t: &Tensor, range: Option<(f64, f64)>) -> Tensor {
    let (low, high) = range.unwrap_or_else(|| (t.min().item::<f64>(), t.max().item::<f64>()));
    (t.clamp(low, high) - low) / (high - low).max(1e-5)
}
