//! Image files in and out (torchvision.io's and torchvision.utils's): [`decode_image`] and
//! [`read_image`] (PNG, JPEG) give `u8` tensors `[C, H, W]` with the file's channels (1 gray,
//! 2 gray + alpha, 3 RGB, 4 RGBA; 16-bit PNGs narrowed to 8 bits); [`write_png`] writes such a
//! tensor; [`save_image`] writes a float batch as torchvision does (`make_grid`, then
//! `x·255 + 0.5` clamped to `[0, 255]` and truncated to bytes), as PNG or JPEG by the file's
//! extension. Decoding and encoding are the `image` crate's.

use super::utils::{try_make_grid, GridOpts};
use super::Pixels;
use crate::error::{Error, ErrorKind, Result};
use crate::{DType, Tensor};
use ::image::{DynamicImage, ExtendedColorType, ImageFormat};
use std::panic::Location;
use std::path::Path;

/// The image encoded in `bytes` (PNG or JPEG) as a `u8` tensor `[C, H, W]`
/// (`torchvision.io.decode_image`).
#[track_caller]
pub fn decode_image(bytes: &[u8]) -> Result<Tensor> {
    decode_at(bytes, "decode_image", "the bytes", Location::caller())
}

/// The image in the file at `path` (PNG or JPEG) as a `u8` tensor `[C, H, W]`
/// (`torchvision.io.read_image`); errors name the file.
#[track_caller]
pub fn read_image(path: impl AsRef<Path>) -> Result<Tensor> {
    let at = Location::caller();
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| {
        Error::at("read_image", ErrorKind::Io, format!("cannot read {}: {e}", path.display()), at).caused_by(e)
    })?;
    decode_at(&bytes, "read_image", &path.display().to_string(), at)
}

/// The image in the file at `path` as RGB pixels, as torchvision's default loader reads it
/// (`PIL.Image.open(path).convert("RGB")`: grey replicated, alpha dropped); errors name `op`
/// and the file.
pub(crate) fn read_rgb(path: &Path, op: &'static str, at: &'static Location<'static>) -> Result<Pixels> {
    let img = ::image::open(path)
        .map_err(|e| Error::at(op, ErrorKind::Io, format!("cannot read {}: {e}", path.display()), at).caused_by(e))?;
    let (w, h) = (img.width() as usize, img.height() as usize);
    Pixels::new(planar(img.to_rgb8().into_raw(), h, w, 3).to_vec::<u8>(), 3, h, w)
}

/// Interleaved `h x w x channels` bytes as a channel-first `u8` tensor `[C, H, W]`.
fn planar(hwc: Vec<u8>, h: usize, w: usize, channels: usize) -> Tensor {
    Tensor::from_vec(hwc, [h, w, channels]).permute(&[2, 0, 1]).contiguous()
}

/// Decodes `bytes` for `op`; `what` names them in errors.
fn decode_at(bytes: &[u8], op: &'static str, what: &str, at: &'static Location<'static>) -> Result<Tensor> {
    let img = ::image::load_from_memory(bytes)
        .map_err(|e| Error::at(op, ErrorKind::Io, format!("cannot decode {what}: {e}"), at).caused_by(e))?;
    let (w, h) = (img.width() as usize, img.height() as usize);
    let (channels, hwc) = match img.color().channel_count() {
        1 => (1, DynamicImage::ImageLuma8(img.to_luma8()).into_bytes()),
        2 => (2, DynamicImage::ImageLumaA8(img.to_luma_alpha8()).into_bytes()),
        3 => (3, DynamicImage::ImageRgb8(img.to_rgb8()).into_bytes()),
        _ => (4, DynamicImage::ImageRgba8(img.to_rgba8()).into_bytes()),
    };
    Ok(planar(hwc, h, w, channels))
}

/// Writes `image` (`u8`, `[C, H, W]` with 1, 2, 3 or 4 channels) to `path` as a PNG
/// (`torchvision.io.write_png`), replacing the file.
#[track_caller]
pub fn write_png(image: &Tensor, path: impl AsRef<Path>) -> Result<()> {
    let at = Location::caller();
    if image.dtype() != DType::U8 || image.dim() != 3 || !(1..=4).contains(&image.shape()[0]) {
        return Err(Error::at(
            "write_png",
            ErrorKind::Shape,
            format!(
                "expected a uint8 [C, H, W] image with 1 to 4 channels, got {} of shape {:?}",
                image.dtype(),
                image.shape()
            ),
            at,
        ));
    }
    write_at(image, path.as_ref(), Some(ImageFormat::Png), "write_png", at)
}

/// Writes `tensor` (a float batch `[B, C, H, W]` or one image, values in `[0, 1]`) to `path`
/// as torchvision's `save_image` does: [`make_grid`](super::utils::make_grid) with `opts`,
/// then each value `x·255 + 0.5` clamped to `[0, 255]` and truncated to a byte; PNG or JPEG
/// by the extension of `path`.
#[track_caller]
pub fn save_image(tensor: &Tensor, path: impl AsRef<Path>, opts: &GridOpts) -> Result<()> {
    let at = Location::caller();
    let grid = try_make_grid(tensor, opts)?;
    let bytes = (grid.to_dtype(DType::F32) * 255.0 + 0.5).clamp(0.0, 255.0).to_dtype(DType::U8);
    write_at(&bytes, path.as_ref(), None, "save_image", at)
}

/// Encodes `image` (`u8`, `[C, H, W]`, 1 to 4 channels) to `path` in `format` (`None`: by
/// the extension).
fn write_at(
    image: &Tensor,
    path: &Path,
    format: Option<ImageFormat>,
    op: &'static str,
    at: &'static Location<'static>,
) -> Result<()> {
    let (hwc, w, h, color) = interleaved(image);
    let format = match format.or_else(|| ImageFormat::from_path(path).ok()) {
        Some(f) => f,
        None => {
            return Err(Error::at(
                op,
                ErrorKind::Value,
                format!("cannot tell the image format of {} from its extension (use .png or .jpg)", path.display()),
                at,
            ))
        }
    };
    ::image::save_buffer_with_format(path, &hwc, w, h, color, format)
        .map_err(|e| Error::at(op, ErrorKind::Io, format!("cannot write {}: {e}", path.display()), at).caused_by(e))
}

/// `image` (`u8`, `[C, H, W]`, 1 to 4 channels, checked by the caller) as a PNG file's bytes
/// (what TensorBoard's image summaries hold).
pub(crate) fn encode_png(image: &Tensor) -> Result<Vec<u8>, ::image::ImageError> {
    use ::image::ImageEncoder;
    let (hwc, w, h, color) = interleaved(image);
    let mut png = Vec::new();
    ::image::codecs::png::PngEncoder::new(&mut png).write_image(&hwc, w, h, color)?;
    Ok(png)
}

/// The pixels of `image` (`u8`, `[C, H, W]`, 1 to 4 channels) interleaved row by row, its
/// width and height, and its colour type.
fn interleaved(image: &Tensor) -> (Vec<u8>, u32, u32, ExtendedColorType) {
    let (c, h, w) = (image.shape()[0], image.shape()[1], image.shape()[2]);
    let hwc = image.permute(&[1, 2, 0]).contiguous().to_vec::<u8>();
    let color = match c {
        1 => ExtendedColorType::L8,
        2 => ExtendedColorType::La8,
        3 => ExtendedColorType::Rgb8,
        _ => ExtendedColorType::Rgba8,
    };
    (hwc, w as u32, h as u32, color)
}
