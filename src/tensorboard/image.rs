//! Image summaries as torch's `add_image`/`add_images` make them: the tensor's dims named by
//! `dataformats` (`CHW`, `HWC`, `HW`; `NCHW`, `NHWC` for a batch), a batch laid out as one
//! image (torch's tensorboard `make_grid`: up to 8 per row, no padding, which is
//! [`make_grid`](crate::vision::utils::make_grid) with `padding: 0`), one channel repeated into
//! three, `uint8` values kept and every other dtype scaled by 255, clipped to `[0, 255]` and
//! truncated, then encoded as a PNG.

use super::proto::Image;
use crate::error::{bail, Error, ErrorKind, Result};
use crate::vision::io::encode_png;
use crate::vision::utils::{try_make_grid, GridOpts};
use crate::{DType, Device, Tensor};
use std::panic::Location;

/// The image summary of `tensor`, whose dims `dataformats` names (its letters: `N` for a
/// batch, 4 dims, when `batch`; otherwise `H`, `W` and optionally `C`).
#[track_caller]
pub(crate) fn image(op: &'static str, tensor: &Tensor, dataformats: &str, batch: bool) -> Result<Image> {
    let format = dataformats.to_ascii_uppercase();
    let wanted: &[&str] = if batch { &["NCHW"] } else { &["CHW", "HW"] };
    let letters = |s: &str| {
        let mut v: Vec<char> = s.chars().collect();
        v.sort_unstable();
        v
    };
    if !wanted.iter().any(|w| letters(w) == letters(&format)) {
        let other = if batch { "one image takes add_image" } else { "a batch takes add_images" };
        bail!(
            op,
            Value,
            "dataformats {dataformats:?} must order the letters {} ({other})",
            wanted.iter().map(|w| format!("{w:?}")).collect::<Vec<_>>().join(" or ")
        );
    }
    if tensor.dim() != format.len() {
        bail!(
            op,
            Shape,
            "dataformats {dataformats:?} names {} dims, the tensor has {} (shape {:?})",
            format.len(),
            tensor.dim(),
            tensor.shape()
        );
    }
    let _no_grad = crate::no_grad_guard();
    // Dims in the order N, C, H, W (those `format` has).
    let order: Vec<i64> = "NCHW".chars().filter_map(|c| format.find(c).map(|i| i as i64)).collect();
    let mut t = tensor.detach().to(&Device::Cpu).permute(&order);
    if !format.contains('C') {
        t = t.unsqueeze(0);
    }
    let channels = t.shape()[t.dim() - 3];
    if ![1, 3, 4].contains(&channels) || t.numel() == 0 {
        bail!(
            op,
            Shape,
            "expected 1, 3 or 4 channels and no empty dim, got shape {:?} as {dataformats:?}",
            tensor.shape()
        );
    }
    if t.dtype() != DType::U8 {
        t = (t.to_dtype(DType::F32) * 255.0).clamp(0.0, 255.0).to_dtype(DType::U8);
    }
    let grid = try_make_grid(&t, &GridOpts { padding: 0, ..Default::default() })?;
    let [c, h, w] = [grid.shape()[0], grid.shape()[1], grid.shape()[2]];
    let at = Location::caller();
    let png = encode_png(&grid).map_err(|e| {
        Error::at(op, ErrorKind::Value, format!("cannot encode the {h}×{w} image as PNG: {e}"), at).caused_by(e)
    })?;
    Ok(Image { height: h as i32, width: w as i32, colorspace: c as i32, encoded_image_string: png })
}
