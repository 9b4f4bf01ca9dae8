//! Ops of several tensors written as decompositions into primitive ops (`lerp`, `addcmul`,
//! `addcdiv`, `addmm`, `baddbmm`), the triangular masks `tril`/`triu`, and `nan_to_num`. Like the composite
//! elementwise ops, they need no kernel, backward rule or code generator of their own:
//! autograd and `kiln::compile` see the primitives.

use super::binary::Operand;
use crate::error::{bail, OrPanic, Result};
use crate::{DType, Tensor};

impl Tensor {
    /// Linear interpolation `self + weight·(end − self)`, broadcasting (`torch.lerp`), with
    /// PyTorch's formula: from `end` back, `end − (end − self)·(1 − weight)`, where
    /// `|weight| ≥ 0.5`, so that `weight = 1` gives `end` exactly.
    #[track_caller]
    pub fn lerp(&self, end: &Tensor, weight: impl Into<Operand>) -> Tensor {
        let diff = end - self;
        match weight.into() {
            Operand::Scalar(w) if w.to_f64().abs() < 0.5 => self + &diff * w,
            Operand::Scalar(w) => {
                // `1 − weight` in the compute type, as PyTorch: f32 unless the tensors are f64.
                let w = w.to_f64();
                let one_minus = if diff.dtype() == DType::F64 { 1.0 - w } else { f64::from(1.0 - w as f32) };
                end - &diff * one_minus
            }
            Operand::Tensor(w) => Tensor::where_cond(&w.abs().lt(0.5), self + &diff * &w, end - &diff * (1.0 - &w)),
        }
    }

    /// `self + value·tensor1·tensor2`, broadcasting (`torch.addcmul`).
    #[track_caller]
    pub fn addcmul(&self, tensor1: &Tensor, tensor2: &Tensor, value: f64) -> Tensor {
        self + (tensor1 * tensor2) * value
    }

    /// `self + value·tensor1/tensor2`, broadcasting (`torch.addcdiv`).
    #[track_caller]
    pub fn addcdiv(&self, tensor1: &Tensor, tensor2: &Tensor, value: f64) -> Tensor {
        self + (tensor1 / tensor2) * value
    }

    /// `beta·self + alpha·(mat1 @ mat2)` for matrices, `self` broadcast to the product's shape
    /// (`torch.addmm`); with `beta = 0`, `self` is ignored (its NaN included), as PyTorch.
    #[track_caller]
    pub fn addmm(&self, mat1: &Tensor, mat2: &Tensor, beta: f64, alpha: f64) -> Tensor {
        self.try_addmm(mat1, mat2, beta, alpha).or_panic()
    }

    /// [`Tensor::addmm`] returning an error for shapes that do not fit.
    #[track_caller]
    pub fn try_addmm(&self, mat1: &Tensor, mat2: &Tensor, beta: f64, alpha: f64) -> Result<Tensor> {
        if let Some(c) = crate::amp::autocast::operands("addmm", &[Some(self), Some(mat1), Some(mat2)])? {
            return c.arg(0).try_addmm(c.arg(1), c.arg(2), beta, alpha);
        }
        scaled_sum(self, mat1.try_mm(mat2)?, beta, alpha)
    }

    /// `beta·self + alpha·(batch1 @ batch2)` for batches of matrices (`torch.baddbmm`).
    #[track_caller]
    pub fn baddbmm(&self, batch1: &Tensor, batch2: &Tensor, beta: f64, alpha: f64) -> Tensor {
        self.try_baddbmm(batch1, batch2, beta, alpha).or_panic()
    }

    /// [`Tensor::baddbmm`] returning an error for shapes that do not fit.
    #[track_caller]
    pub fn try_baddbmm(&self, batch1: &Tensor, batch2: &Tensor, beta: f64, alpha: f64) -> Result<Tensor> {
        if let Some(c) = crate::amp::autocast::operands("baddbmm", &[Some(self), Some(batch1), Some(batch2)])? {
            return c.arg(0).try_baddbmm(c.arg(1), c.arg(2), beta, alpha);
        }
        scaled_sum(self, batch1.try_bmm(batch2)?, beta, alpha)
    }

    /// NaN replaced by `nan`, +∞ by `posinf` and −∞ by `neginf`, which default to 0 and the
    /// dtype's largest and smallest finite values (`torch.nan_to_num`). Integer and Bool
    /// tensors come back as a copy. The gradient passes where the input was finite.
    #[track_caller]
    pub fn nan_to_num(&self, nan: f64, posinf: Option<f64>, neginf: Option<f64>) -> Tensor {
        let Some(max) = self.dtype().finite_max() else { return self.deep_clone() };
        let (posinf, neginf) = (posinf.unwrap_or(max), neginf.unwrap_or(-max));
        let high = Tensor::where_cond(&self.eq(f64::INFINITY), posinf, self);
        let low = Tensor::where_cond(&self.eq(f64::NEG_INFINITY), neginf, &high);
        Tensor::where_cond(&self.isnan(), nan, &low)
    }

    /// The lower triangle of the last two dims: elements with `col − row ≤ diagonal` kept, the
    /// others zero (`torch.tril`); the dtype is kept.
    #[track_caller]
    pub fn tril(&self, diagonal: i64) -> Tensor {
        self.try_tril(diagonal).or_panic()
    }

    /// [`Tensor::tril`] returning an error for a tensor of fewer than 2 dims.
    #[track_caller]
    pub fn try_tril(&self, diagonal: i64) -> Result<Tensor> {
        triangle("tril", self, |offset| offset.le(diagonal))
    }

    /// The upper triangle of the last two dims: elements with `col − row ≥ diagonal` kept, the
    /// others zero (`torch.triu`); the dtype is kept.
    #[track_caller]
    pub fn triu(&self, diagonal: i64) -> Tensor {
        self.try_triu(diagonal).or_panic()
    }

    /// [`Tensor::triu`] returning an error for a tensor of fewer than 2 dims.
    #[track_caller]
    pub fn try_triu(&self, diagonal: i64) -> Result<Tensor> {
        triangle("triu", self, |offset| offset.ge(diagonal))
    }
}

/// `beta·input + alpha·product`, shaped like the product; `input` unread when `beta = 0`.
#[track_caller]
fn scaled_sum(input: &Tensor, product: Tensor, beta: f64, alpha: f64) -> Result<Tensor> {
    let product = if alpha == 1.0 { product } else { product * alpha };
    let shape: Vec<usize> = product.shape().to_vec();
    let input = input.try_broadcast_to(&shape)?;
    if beta == 0.0 {
        Ok(product)
    } else if beta == 1.0 {
        input.try_add(product)
    } else {
        (input * beta).try_add(product)
    }
}

/// `x` where `keep(col − row)` holds over its last two dims, zero elsewhere.
#[track_caller]
fn triangle(op: &'static str, x: &Tensor, keep: impl Fn(&Tensor) -> Tensor) -> Result<Tensor> {
    if x.dim() < 2 {
        bail!(op, Shape, "input tensor must have at least 2 dimensions, but got shape {:?}", x.shape());
    }
    let (rows, cols) = (x.shape()[x.dim() - 2] as i64, x.shape()[x.dim() - 1] as i64);
    let offset = Tensor::arange(cols).unsqueeze(0) - Tensor::arange(rows).unsqueeze(1);
    let mask = keep(&offset).to(&x.device());
    Tensor::try_where(&mask, x, x.zeros_like())
}
