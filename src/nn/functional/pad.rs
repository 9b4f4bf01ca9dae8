//! `pad` (PyTorch's `F.pad`): constant, reflect, replicate and circular padding, written as
//! decompositions into `narrow`, `cat` and `index_select` with index tensors computed from the
//! shape alone, so that autograd, `kiln::compile` and every device work with no kernel of its
//! own.
//!
//! The rules follow PyTorch: `pad` holds `(left, right)` pairs from the last dim backwards;
//! constant padding pads any number of dims and negative amounts crop; the other modes pad the
//! last 1, 2 or 3 dims of a (batched or unbatched) input, reflect needs each amount below the
//! dim's size, circular at most the dim's size. Circular padding with a negative amount crops
//! first and wraps what is left, as PyTorch does; an amount larger than that remainder is an
//! error here (PyTorch checks it against the uncropped size only and then reads memory it never
//! wrote).

use crate::error::{bail, OrPanic, Result};
use crate::{Scalar, Tensor};

/// How [`pad`] fills the new elements (PyTorch's `mode` and `value` arguments in one enum,
/// so that a value can only be given to the mode that takes one).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PadMode {
    /// Every new element is the value (`mode='constant', value=v`); negative amounts crop.
    Constant(f64),
    /// The input mirrored about its edge element, which is not repeated (`mode='reflect'`):
    /// `[1, 2, 3]` padded by 2 on the left is `[3, 2, 1, 2, 3]`.
    Reflect,
    /// The edge element repeated (`mode='replicate'`).
    Replicate,
    /// The input wrapped around (`mode='circular'`): the left padding is the dim's end.
    /// Negative amounts crop first; the rest wraps the cropped input, as in PyTorch.
    Circular,
}

impl Default for PadMode {
    /// PyTorch's default: `Constant(0.0)`.
    fn default() -> Self {
        PadMode::Constant(0.0)
    }
}

impl PadMode {
    /// PyTorch's name of the mode (`"constant"`, `"reflect"`, `"replicate"`, `"circular"`).
    pub fn name(&self) -> &'static str {
        match self {
            PadMode::Constant(_) => "constant",
            PadMode::Reflect => "reflect",
            PadMode::Replicate => "replicate",
            PadMode::Circular => "circular",
        }
    }
}

/// Pads `input` (`F.pad(input, pad, mode, value)`).
///
/// `pad` lists `(left, right)` amounts from the last dim backwards, as in PyTorch:
/// `&[1, 1]` pads the last dim by one on each side, `&[1, 1, 2, 0]` also the second-to-last by
/// two at its start. Amounts are `i64` because constant padding takes negative amounts, which
/// crop. The mode and, for constant padding, the value are one [`PadMode`]:
///
/// ```
/// use kiln::prelude::*;
/// use kiln::nn::functional::PadMode;
/// let x = Tensor::arange(6).to_dtype(kiln::DType::F32).view(&[1, 2, 3]);
/// let y = F::pad(&x, &[2, 1], PadMode::Reflect);          // F.pad(x, (2, 1), mode='reflect')
/// assert_eq!(y.shape(), &[1, 2, 6]);
/// let z = F::pad(&x, &[1, 1, 1, 1], PadMode::Constant(-1.0)); // F.pad(x, (1, 1, 1, 1), value=-1.)
/// assert_eq!(z.shape(), &[1, 4, 5]);
/// ```
///
/// Constant padding works on any number of dims and any dtype (the value is converted to it).
/// Reflect, replicate and circular pad the last 1, 2 or 3 dims of a 2-D/3-D, 3-D/4-D or
/// 4-D/5-D input (unbatched or batched), as PyTorch does. Panics with the op's name and the
/// shapes on a bad padding; [`try_pad`] returns the error instead.
#[track_caller]
pub fn pad(input: &Tensor, pad: &[i64], mode: PadMode) -> Tensor {
    try_pad(input, pad, mode).or_panic()
}

/// [`pad`] with constant `value` (`F.pad(input, pad, value=value)`).
#[track_caller]
pub fn pad_value(input: &Tensor, pad: &[i64], value: f64) -> Tensor {
    try_pad(input, pad, PadMode::Constant(value)).or_panic()
}

/// [`pad`] returning an error for an odd or too long `pad`, amounts the mode cannot take
/// (reflect at least the dim's size, circular wrapping more than once, an output that would be
/// negative or, for reflect and replicate, empty), or dims the mode does not pad.
#[track_caller]
pub fn try_pad(input: &Tensor, pad: &[i64], mode: PadMode) -> Result<Tensor> {
    let listed = match mode {
        PadMode::Reflect => Some("pad_reflect"),
        PadMode::Replicate => Some("pad_replicate"),
        _ => None,
    };
    if let Some(c) = listed.map(|op| crate::amp::autocast::operands(op, &[Some(input)])).transpose()?.flatten() {
        return try_pad(c.arg(0), pad, mode);
    }
    let op = "pad";
    let shape = input.shape().to_vec();
    let n = shape.len();
    if !pad.len().is_multiple_of(2) {
        bail!(
            op,
            Value,
            "padding length must be divisible by 2, but got padding {pad:?} of length {} for input of shape {shape:?}",
            pad.len()
        );
    }
    let k = pad.len() / 2;
    if k > n {
        bail!(
            op,
            Value,
            "padding length should be less than or equal to two times the input dimension, but got padding {pad:?} \
             of length {} and input of shape {shape:?} (dimension {n})",
            pad.len()
        );
    }
    // (dim, left, right) for each padded dim, the last dim first.
    let dims: Vec<(usize, i64, i64)> = (0..k).map(|i| (n - 1 - i, pad[2 * i], pad[2 * i + 1])).collect();
    if let PadMode::Constant(value) = mode {
        return constant(input, &dims, value);
    }
    if !matches!((k, n), (1, 2 | 3) | (2, 3 | 4) | (3, 4 | 5)) {
        bail!(
            op,
            Unsupported,
            "{} padding of length {} is not supported for {n}-D input of shape {shape:?}; supported combinations \
             for non-constant padding: 2-D or 3-D input with padding length 2 (pads the last dim), 3-D or 4-D input \
             with length 4 (the last 2 dims), 4-D or 5-D input with length 6 (the last 3 dims)",
            mode.name(),
            pad.len()
        );
    }
    let mut out = input.clone();
    for &(d, l, r) in &dims {
        let size = shape[d] as i64;
        match mode {
            PadMode::Reflect | PadMode::Replicate => {
                if shape[n - k - 1..].contains(&0) {
                    bail!(
                        op,
                        Shape,
                        "{} padding expects a {}-D or {}-D (batch mode) tensor with possibly 0 batch size and other \
                         non-zero dimensions, but got input of shape {shape:?}",
                        mode.name(),
                        k + 1,
                        k + 2
                    );
                }
                if mode == PadMode::Reflect && (l >= size || r >= size) {
                    bail!(
                        op,
                        Value,
                        "reflect padding size should be less than the corresponding input dimension, but got \
                         padding ({l}, {r}) at dimension {d} of input of shape {shape:?}"
                    );
                }
                if size + l + r < 1 {
                    bail!(
                        op,
                        Shape,
                        "{} padding ({l}, {r}) at dimension {d} of input of shape {shape:?} gives output size {}; \
                         it must be at least 1",
                        mode.name(),
                        size + l + r
                    );
                }
            }
            PadMode::Circular => {
                // PyTorch crops the negative amounts first and wraps what is left.
                let core = size - (-l).max(0) - (-r).max(0);
                if core < 0 || size + l + r < 0 {
                    bail!(
                        op,
                        Shape,
                        "negative circular padding ({l}, {r}) at dimension {d} of input of shape {shape:?} results \
                         in an empty dimension"
                    );
                }
                if l > core || r > core {
                    bail!(
                        op,
                        Value,
                        "circular padding ({l}, {r}) at dimension {d} of input of shape {shape:?} wraps around more \
                         than once (each amount must be at most the dim's size after cropping, {core})"
                    );
                }
            }
            PadMode::Constant(_) => unreachable!("constant padding returned above"),
        }
        if l == 0 && r == 0 {
            continue;
        }
        // Circular padding wraps the cropped input, `core` elements from `start`.
        let start = (-l).max(0);
        let core = size - start - (-r).max(0);
        let src = |p: i64| -> i64 {
            match mode {
                PadMode::Reflect if p < 0 => -p,
                PadMode::Reflect if p >= size => 2 * (size - 1) - p,
                PadMode::Replicate => p.clamp(0, size - 1),
                PadMode::Circular => start + (p - start).rem_euclid(core.max(1)),
                _ => p,
            }
        };
        let index: Vec<i64> = (-l..size + r).map(src).collect();
        let len = index.len();
        let index = Tensor::from_vec(index, [len]).to(&input.device());
        out = out.try_index_select(d as i64, &index)?;
    }
    Ok(out)
}

/// Constant padding: negative amounts narrow first, positive ones concatenate filled blocks.
#[track_caller]
fn constant(input: &Tensor, dims: &[(usize, i64, i64)], value: f64) -> Result<Tensor> {
    let shape = input.shape().to_vec();
    let mut out = input.clone();
    for &(d, l, r) in dims {
        let size = shape[d] as i64;
        let (cut_l, cut_r) = ((-l).max(0), (-r).max(0));
        if cut_l + cut_r > size {
            bail!(
                "pad",
                Shape,
                "the input size {size}, plus negative padding ({l}, {r}), resulted in a negative output size, which \
                 is invalid; check dimension {d} of the input of shape {shape:?}"
            );
        }
        if cut_l + cut_r > 0 {
            out = out.narrow(d as i64, cut_l, (size - cut_l - cut_r) as usize);
        }
        let (add_l, add_r) = (l.max(0) as usize, r.max(0) as usize);
        if add_l + add_r > 0 {
            // An integral value fills integer dtypes exactly; any other is checked to fit.
            let fill = if !input.dtype().is_float() && value.fract() == 0.0 && value.abs() < 9.0e18 {
                Scalar::Int(value as i64)
            } else {
                Scalar::Float(value)
            };
            let block = |len: usize| {
                let mut s = out.shape().to_vec();
                s[d] = len;
                Tensor::try_full_opts(&s, fill, out.dtype(), out.device())
            };
            let mut parts = Vec::with_capacity(3);
            if add_l > 0 {
                parts.push(block(add_l)?);
            }
            parts.push(out.clone());
            if add_r > 0 {
                parts.push(block(add_r)?);
            }
            out = Tensor::try_cat(&parts, d as i64)?;
        }
    }
    Ok(out)
}
