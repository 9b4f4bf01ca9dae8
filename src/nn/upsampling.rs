//! Resampling modules: `Upsample`, `UpsamplingNearest2d`, `UpsamplingBilinear2d` (each an
//! [`F::interpolate`] with fixed arguments) and `PixelShuffle`/`PixelUnshuffle`, printed as
//! PyTorch prints them (`Upsample(scale_factor=2.0, mode='nearest')`,
//! `PixelShuffle(upscale_factor=3)`).

use super::functional::{self as F, InterpolateMode, InterpolateOpts, Resize};
use super::repr::{py_float, py_tuple};
use crate::nn::Module;
use crate::Tensor;

/// PyTorch's `extra_repr` of the upsampling modules: `scale_factor=2.0` or `size=(4, 5)`, then
/// the mode.
fn describe(opts: &InterpolateOpts) -> String {
    let resize = match &opts.resize {
        Resize::Size(s) if s.len() == 1 => format!("size={}", s[0]),
        Resize::Size(s) => format!("size={}", py_tuple(s)),
        Resize::ScaleFactor(f) if f.len() == 1 => format!("scale_factor={}", py_float(f[0])),
        Resize::ScaleFactor(f) => {
            format!("scale_factor=({})", f.iter().map(|&v| py_float(v)).collect::<Vec<_>>().join(", "))
        }
    };
    format!("{resize}, mode='{}'", opts.mode.name())
}

/// Resamples its input to a size or by a scale factor (`nn.Upsample`): [`F::interpolate`]
/// with the module's options.
#[derive(crate::nn::Module, Clone, Debug)]
#[module(extra_repr = "describe")]
pub struct Upsample {
    /// The size or scale factor, mode, `align_corners` and `recompute_scale_factor`.
    #[module(skip)]
    pub opts: InterpolateOpts,
}

impl Upsample {
    /// `nn.Upsample(size | scale_factor, mode)`: `resize` is a size (`8`, `[8, 6]`) or a
    /// scale factor (`2.0`, `[2.0, 1.5]`); `align_corners` is left unset (false).
    pub fn new(resize: impl Into<Resize>, mode: InterpolateMode) -> Upsample {
        Upsample { opts: InterpolateOpts::new(resize, mode) }
    }

    /// Every option (`align_corners`, `recompute_scale_factor`).
    pub fn with_opts(opts: InterpolateOpts) -> Upsample {
        Upsample { opts }
    }

    fn describe(&self) -> String {
        describe(&self.opts)
    }
}

impl Module for Upsample {
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(F::interpolate_opts(input, &self.opts))
    }
}

/// Nearest-neighbour upsampling of `(N, C, H, W)` input (`nn.UpsamplingNearest2d`, which
/// PyTorch keeps for compatibility: `Upsample` with mode `nearest`).
#[derive(crate::nn::Module, Clone, Debug)]
#[module(extra_repr = "describe")]
pub struct UpsamplingNearest2d {
    /// The size or scale factor, with mode `nearest`.
    #[module(skip)]
    pub opts: InterpolateOpts,
}

impl UpsamplingNearest2d {
    /// `nn.UpsamplingNearest2d(size | scale_factor)`.
    pub fn new(resize: impl Into<Resize>) -> UpsamplingNearest2d {
        UpsamplingNearest2d { opts: InterpolateOpts::new(resize, InterpolateMode::Nearest) }
    }

    fn describe(&self) -> String {
        describe(&self.opts)
    }
}

impl Module for UpsamplingNearest2d {
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(F::interpolate_opts(input, &self.opts))
    }
}

/// Bilinear upsampling of `(N, C, H, W)` input with `align_corners=True`
/// (`nn.UpsamplingBilinear2d`, which PyTorch keeps for compatibility).
#[derive(crate::nn::Module, Clone, Debug)]
#[module(extra_repr = "describe")]
pub struct UpsamplingBilinear2d {
    /// The size or scale factor, with mode `bilinear` and `align_corners` true.
    #[module(skip)]
    pub opts: InterpolateOpts,
}

impl UpsamplingBilinear2d {
    /// `nn.UpsamplingBilinear2d(size | scale_factor)`.
    pub fn new(resize: impl Into<Resize>) -> UpsamplingBilinear2d {
        let mut opts = InterpolateOpts::new(resize, InterpolateMode::Bilinear);
        opts.align_corners = Some(true);
        UpsamplingBilinear2d { opts }
    }

    fn describe(&self) -> String {
        describe(&self.opts)
    }
}

impl Module for UpsamplingBilinear2d {
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(F::interpolate_opts(input, &self.opts))
    }
}

/// Rearranges `(*, C·r², H, W)` into `(*, C, H·r, W·r)` (`nn.PixelShuffle(r)`, see
/// [`F::pixel_shuffle`]).
#[derive(crate::nn::Module, Clone, Copy, Debug)]
#[module(extra_repr = "describe")]
pub struct PixelShuffle {
    /// `r`, the factor the height and width grow by.
    pub upscale_factor: usize,
}

impl PixelShuffle {
    /// `nn.PixelShuffle(upscale_factor)`.
    pub fn new(upscale_factor: usize) -> PixelShuffle {
        PixelShuffle { upscale_factor }
    }

    fn describe(&self) -> String {
        format!("upscale_factor={}", self.upscale_factor)
    }
}

impl Module for PixelShuffle {
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(F::pixel_shuffle(input, self.upscale_factor))
    }
}

/// Rearranges `(*, C, H·r, W·r)` into `(*, C·r², H, W)` (`nn.PixelUnshuffle(r)`, see
/// [`F::pixel_unshuffle`]).
#[derive(crate::nn::Module, Clone, Copy, Debug)]
#[module(extra_repr = "describe")]
pub struct PixelUnshuffle {
    /// `r`, the factor the height and width shrink by.
    pub downscale_factor: usize,
}

impl PixelUnshuffle {
    /// `nn.PixelUnshuffle(downscale_factor)`.
    pub fn new(downscale_factor: usize) -> PixelUnshuffle {
        PixelUnshuffle { downscale_factor }
    }

    fn describe(&self) -> String {
        format!("downscale_factor={}", self.downscale_factor)
    }
}

impl Module for PixelUnshuffle {
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(F::pixel_unshuffle(input, self.downscale_factor))
    }
}
