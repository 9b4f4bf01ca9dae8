//! [`Image`]: what vision transforms take and return — raw bytes ([`Pixels`]) or a tensor.

use crate::error::{bail, Result};
use crate::Tensor;
use kiln_runtime::cpu::CpuBuf;

/// An image as stored by the datasets: bytes in channel-first order (`[C, H, W]`), the
/// counterpart of torchvision's PIL image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pixels {
    data: Vec<u8>,
    channels: usize,
    height: usize,
    width: usize,
}

impl Pixels {
    /// Pixels from `channels * height * width` bytes, channel-first; an error if the length
    /// does not match.
    #[track_caller]
    pub fn new(data: Vec<u8>, channels: usize, height: usize, width: usize) -> Result<Pixels> {
        let want = channels.checked_mul(height).and_then(|n| n.checked_mul(width));
        if want != Some(data.len()) {
            bail!("Pixels", Shape, "{} bytes cannot hold a {channels}x{height}x{width} image", data.len());
        }
        Ok(Pixels { data, channels, height, width })
    }

    /// The bytes, channel-first.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// The bytes, mutable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }

    /// Number of channels (1 for grey, 3 for RGB).
    pub fn channels(&self) -> usize {
        self.channels
    }

    /// Height in pixels.
    pub fn height(&self) -> usize {
        self.height
    }

    /// Width in pixels.
    pub fn width(&self) -> usize {
        self.width
    }

    /// `[channels, height, width]`.
    pub fn shape(&self) -> [usize; 3] {
        [self.channels, self.height, self.width]
    }

    /// `ToTensor`: an f32 tensor `[C, H, W]` of `byte / 255` (computed as f32, like torchvision).
    pub fn to_tensor(&self) -> Tensor {
        let lut: [f32; 256] = std::array::from_fn(|k| k as f32 / 255.0);
        self.map_to_tensor(&[lut])
    }

    /// The bytes as a u8 tensor `[C, H, W]` (`pil_to_tensor`).
    pub fn to_u8_tensor(&self) -> Tensor {
        Tensor::from_buf(CpuBuf::from_slice(&self.data), &self.shape())
    }

    /// An f32 tensor `[C, H, W]` whose value at a byte `k` of channel `c` is `luts[c][k]` (one
    /// table for all channels when `luts` has one): how `ToTensor` and `Normalize` run fused.
    pub(crate) fn map_to_tensor(&self, luts: &[[f32; 256]]) -> Tensor {
        let plane = self.height * self.width;
        let mut buf = CpuBuf::<f32>::uninit(self.data.len());
        if plane > 0 {
            for (c, (out, src)) in buf.chunks_exact_mut(plane).zip(self.data.chunks_exact(plane)).enumerate() {
                let lut = &luts[if luts.len() == 1 { 0 } else { c }];
                for (o, &k) in out.iter_mut().zip(src) {
                    *o = lut[k as usize];
                }
            }
        }
        Tensor::from_buf(buf, &self.shape())
    }
}

/// What a vision transform takes and returns: pixels as a dataset stores them, or a tensor
/// (`[..., C, H, W]`, usually after `ToTensor`).
#[derive(Clone, Debug)]
pub enum Image {
    /// Bytes, channel-first.
    Pixels(Pixels),
    /// A tensor whose last two dims are height and width.
    Tensor(Tensor),
}

impl Image {
    /// The image as a tensor: pixels go through `ToTensor` (f32 in `[0, 1]`), a tensor is
    /// returned as it is.
    pub fn into_tensor(self) -> Tensor {
        match self {
            Image::Pixels(p) => p.to_tensor(),
            Image::Tensor(t) => t,
        }
    }

    /// `(height, width)`; an error for a tensor of fewer than 2 dims.
    #[track_caller]
    pub fn size(&self) -> Result<(usize, usize)> {
        match self {
            Image::Pixels(p) => Ok((p.height, p.width)),
            Image::Tensor(t) if t.dim() >= 2 => Ok((t.shape()[t.dim() - 2], t.shape()[t.dim() - 1])),
            Image::Tensor(t) => {
                bail!(
                    "Image",
                    Shape,
                    "expected a tensor image of at least 2 dims ([..., H, W]), but got shape {:?}",
                    t.shape()
                )
            }
        }
    }
}

impl From<Pixels> for Image {
    fn from(p: Pixels) -> Image {
        Image::Pixels(p)
    }
}

impl From<Tensor> for Image {
    fn from(t: Tensor) -> Image {
        Image::Tensor(t)
    }
}
