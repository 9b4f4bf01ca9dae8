//! Matrix products: `matmul` with `torch.matmul`'s rules, and the strict forms `mm`, `bmm`, `mv`,
//! `dot`, `outer`.
//!
//! Every product goes through one function that lines the operands up as `[batch..., m, k]` and
//! `[batch..., k, n]` views (a 1-D lhs becomes a `[1, k]` row, a 1-D rhs a `[k, 1]` column, the
//! batch dims broadcast with stride 0, nothing copied) and calls
//! [`kiln_runtime::cpu::matmul::matmul`] on the CPU, or cuBLAS for CUDA tensors
//! (`crate::cuda::matmul`: f32, f64, f16 and bf16; TF32 only after
//! `kiln::backends::cuda::matmul::set_allow_tf32(true)`). Both operands must have the same dtype (no promotion,
//! as in PyTorch); `Bool` is not supported.
//!
//! Autograd: every product records one node whose rule is the same for all cases: with the
//! operands and the gradient lined up as matrices (a unit dim put back where a 1-D operand lost
//! it), `grad_a = g @ b^T` and `grad_b = a^T @ g`, the unit dim removed again; the engine sums
//! the broadcast batch dims down to each operand's shape. `mm`, `bmm`, `mv` and `dot` record
//! PyTorch's `MmBackward0`, `BmmBackward0`, `MvBackward0`, `DotBackward0`; `matmul` records the
//! node of the strict op its case is (1-D·1-D `DotBackward0`, 2-D·1-D `MvBackward0`, 2-D·2-D
//! `MmBackward0`) and `MatmulBackward0` for the other cases (which PyTorch builds from views
//! around `mm`/`bmm`, showing `SqueezeBackward4` or `UnsafeViewBackward0`). `outer` records
//! `MulBackward0`, as PyTorch (where it is a broadcast `mul`).

use super::kernel_op;
use crate::autograd::{self, grads, Saved};
use crate::error::{bail, OrPanic, Result};
use crate::tensor::{check_shape, Tensor};
use kiln_runtime::cpu::matmul::matmul as cpu_matmul;
use kiln_runtime::layout::broadcast_shapes;
use kiln_runtime::{CpuStorage, Layout, Shape};

impl Tensor {
    /// The matrix product with `torch.matmul`'s rules: 1-D·1-D is the dot product (0-dim),
    /// 2-D·2-D the matrix product, a 1-D lhs (rhs) is a row (column) whose dim is removed from
    /// the result, and N-D operands multiply batches of matrices with the batch dims broadcast
    /// (`[2, 1, 3, 4] @ [5, 4, 2]` is `[2, 5, 3, 2]`).
    #[track_caller]
    pub fn matmul(&self, other: &Tensor) -> Tensor {
        self.try_matmul(other).or_panic()
    }

    /// [`Tensor::matmul`] returning an error for shapes that do not multiply, different dtypes,
    /// `Bool` operands, or operands on different devices.
    #[track_caller]
    pub fn try_matmul(&self, other: &Tensor) -> Result<Tensor> {
        if let Some(c) = crate::amp::autocast::operands("matmul", &[Some(self), Some(other)])? {
            return c.arg(0).try_matmul(c.arg(1));
        }
        product("matmul", self, other)
    }

    /// The product of two matrices (`torch.mm`): both operands must be 2-D.
    #[track_caller]
    pub fn mm(&self, other: &Tensor) -> Tensor {
        self.try_mm(other).or_panic()
    }

    /// [`Tensor::mm`] returning an error instead of panicking.
    #[track_caller]
    pub fn try_mm(&self, other: &Tensor) -> Result<Tensor> {
        if let Some(c) = crate::amp::autocast::operands("mm", &[Some(self), Some(other)])? {
            return c.arg(0).try_mm(c.arg(1));
        }
        expect_dims("mm", self, other, 2, 2)?;
        product("mm", self, other)
    }

    /// Batched matrix product (`torch.bmm`): `[b, m, k] @ [b, k, n]`, no broadcasting.
    #[track_caller]
    pub fn bmm(&self, other: &Tensor) -> Tensor {
        self.try_bmm(other).or_panic()
    }

    /// [`Tensor::bmm`] returning an error instead of panicking.
    #[track_caller]
    pub fn try_bmm(&self, other: &Tensor) -> Result<Tensor> {
        if let Some(c) = crate::amp::autocast::operands("bmm", &[Some(self), Some(other)])? {
            return c.arg(0).try_bmm(c.arg(1));
        }
        expect_dims("bmm", self, other, 3, 3)?;
        if self.shape()[0] != other.shape()[0] {
            bail!(
                "bmm",
                Shape,
                "expected the same batch size, but got shapes {:?} and {:?} ({} != {})",
                self.shape(),
                other.shape(),
                self.shape()[0],
                other.shape()[0]
            );
        }
        product("bmm", self, other)
    }

    /// Matrix-vector product (`torch.mv`): `[m, k] @ [k]` is `[m]`.
    #[track_caller]
    pub fn mv(&self, vec: &Tensor) -> Tensor {
        self.try_mv(vec).or_panic()
    }

    /// [`Tensor::mv`] returning an error instead of panicking.
    #[track_caller]
    pub fn try_mv(&self, vec: &Tensor) -> Result<Tensor> {
        expect_dims("mv", self, vec, 2, 1)?;
        product("mv", self, vec)
    }

    /// Dot product of two 1-D tensors of the same length (`torch.dot`), as a 0-dim tensor.
    #[track_caller]
    pub fn dot(&self, other: &Tensor) -> Tensor {
        self.try_dot(other).or_panic()
    }

    /// [`Tensor::dot`] returning an error instead of panicking.
    #[track_caller]
    pub fn try_dot(&self, other: &Tensor) -> Result<Tensor> {
        expect_dims("dot", self, other, 1, 1)?;
        product("dot", self, other)
    }

    /// Outer product of two 1-D tensors (`torch.outer`): `out[i, j] = self[i] * other[j]`, with
    /// the type promotion of `mul` (so `Bool` and mixed dtypes work, as in PyTorch).
    #[track_caller]
    pub fn outer(&self, other: &Tensor) -> Tensor {
        self.try_outer(other).or_panic()
    }

    /// [`Tensor::outer`] returning an error instead of panicking.
    #[track_caller]
    pub fn try_outer(&self, other: &Tensor) -> Result<Tensor> {
        expect_dims("outer", self, other, 1, 1)?;
        let out = {
            let _off = autograd::no_grad_guard();
            self.unsqueeze(1).try_mul(other)?
        };
        if !out.dtype().is_float() || !autograd::is_recording(&[self, other]) {
            return Ok(out);
        }
        // grad_a[i] = Σ_j g[i, j] b[j] and grad_b[j] = Σ_i g[i, j] a[i]; the operands may have
        // another dtype than the (promoted) output, so they are cast to the gradient's first.
        let (need_a, need_b) = (self.requires_grad(), other.requires_grad());
        let saved = [need_b.then(|| Saved::of(self)), need_a.then(|| Saved::of(other))];
        Ok(autograd::record(out, "MulBackward0", &[self, other], saved.into_iter().flatten(), move |ctx, g, s| {
            let a = need_b.then(|| &s[0]);
            let b = need_a.then(|| s.last().expect("saved rhs"));
            grads![
                (ctx.needs_input_grad(0)).then(|| g.matmul(&b.expect("rhs saved").to_dtype(g.dtype()))),
                (ctx.needs_input_grad(1)).then(|| g.t().matmul(&a.expect("lhs saved").to_dtype(g.dtype()))),
            ]
        }))
    }

    /// Alias of [`Tensor::outer`] (`torch.ger`).
    #[track_caller]
    pub fn ger(&self, other: &Tensor) -> Tensor {
        self.outer(other)
    }
}

/// An error unless `a` is `da`-D and `b` is `db`-D.
#[track_caller]
fn expect_dims(op: &'static str, a: &Tensor, b: &Tensor, da: usize, db: usize) -> Result<()> {
    if a.dim() != da || b.dim() != db {
        bail!(op, Shape, "expected {da}-D and {db}-D tensors, but got shapes {:?} and {:?}", a.shape(), b.shape());
    }
    Ok(())
}

/// `a @ b` with `torch.matmul`'s rules; `op` names the caller in errors.
#[track_caller]
fn product(op: &'static str, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (da, db) = (a.dim(), b.dim());
    if da == 0 || db == 0 {
        bail!(op, Shape, "both arguments need to be at least 1-D, but got shapes {:?} and {:?}", a.shape(), b.shape());
    }
    let la = if da == 1 { a.layout().unsqueeze(0) } else { a.layout().clone() };
    let lb = if db == 1 { b.layout().unsqueeze(1) } else { b.layout().clone() };
    let (ra, rb) = (la.ndim(), lb.ndim());
    let (m, k, kb, n) = (la.shape()[ra - 2], la.shape()[ra - 1], lb.shape()[rb - 2], lb.shape()[rb - 1]);
    if k != kb {
        bail!(op, Shape, "shapes {:?} and {:?} cannot be multiplied ({k} != {kb})", a.shape(), b.shape());
    }
    let (batch_a, batch_b) = (&la.shape()[..ra - 2], &lb.shape()[..rb - 2]);
    let Some(batch) = broadcast_shapes(batch_a, batch_b) else {
        bail!(
            op,
            Shape,
            "shapes {:?} and {:?} cannot be multiplied (batch dimensions {batch_a:?} and {batch_b:?} cannot broadcast)",
            a.shape(),
            b.shape()
        );
    };
    let full = |rows: usize, cols: usize| -> Shape { batch.iter().copied().chain([rows, cols]).collect() };
    let (la, lb) = match (la.broadcast_to(&full(m, k)), lb.broadcast_to(&full(k, n))) {
        (Some(la), Some(lb)) => (la, lb),
        _ => unreachable!("batch dims {batch_a:?} and {batch_b:?} broadcast to {batch:?}"),
    };
    let mut shape = batch.clone();
    if da > 1 {
        shape.push(m);
    }
    if db > 1 {
        shape.push(n);
    }
    // The operands broadcast over the batch dims, and the result, must be tensor shapes:
    // [2^32, 1] @ [1, 2^32] would have 2^64 elements.
    for s in [full(m, k), full(k, n), shape.clone()] {
        check_shape(op, &s).map_err(|mut e| {
            e.message = format!("shapes {:?} and {:?} cannot be multiplied: the {}", a.shape(), b.shape(), e.message);
            e
        })?;
    }
    // The CPU kernels take two operands of one dtype, not Bool; cuBLAS, one float dtype.
    if a.dtype() != b.dtype() || (a.dtype() == kiln_runtime::DType::Bool && !crate::cuda::any_on_cuda(&[a, b])) {
        return unsupported(op, a, b);
    }
    let (cpu_la, cpu_lb, out_shape) = (la.clone(), lb.clone(), shape.clone());
    let cpu = move |ins: &[Tensor]| {
        let storage = ins[0].with_cpu2(&ins[1], op, |sa, sb| product_storage(sa, &cpu_la, sb, &cpu_lb))?;
        Ok(Tensor::from_cpu_storage(storage.expect("dtypes checked before the call"), &out_shape))
    };
    let out_shape = shape.clone();
    let cuda = move |ins: &[Tensor]| crate::cuda::matmul(op, &ins[0], &la, &ins[1], &lb, &out_shape);
    let out = kernel_op(op, &[a, b], (&shape, a.dtype()), cpu, cuda)?;
    if !out.dtype().is_float() || !autograd::is_recording(&[a, b]) {
        return Ok(out);
    }
    Ok(record_product(op, out, a, b))
}

/// The error for operands no product kernel takes (mixed dtypes, Bool).
#[track_caller]
fn unsupported(op: &'static str, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if a.dtype() != b.dtype() {
        bail!(op, DType, "expected both operands to have the same dtype, but got {} and {}", a.dtype(), b.dtype());
    }
    bail!(op, DType, "not implemented for dtype {} (shapes {:?} and {:?})", a.dtype(), a.shape(), b.shape());
}

/// PyTorch's name of the node a product records (see the module docs).
fn node_name(op: &'static str, da: usize, db: usize) -> &'static str {
    match (op, da, db) {
        ("mm", ..) | ("matmul", 2, 2) => "MmBackward0",
        ("mv", ..) | ("matmul", 2, 1) => "MvBackward0",
        ("dot", ..) | ("matmul", 1, 1) => "DotBackward0",
        ("bmm", ..) => "BmmBackward0",
        _ => "MatmulBackward0",
    }
}

/// Records the node of `out = a @ b` (any of `matmul`'s cases). Each operand is saved only when
/// the other one needs its gradient, as PyTorch does (so an in-place write to an input that
/// the backward does not read is allowed).
///
/// As PyTorch's `mm_mat1_backward`/`mm_mat2_backward`, an operand stored transposed (a
/// `w.t()` view of a contiguous matrix, as `linear` makes) gets its gradient in the same
/// transposed layout: `(gᵀ a)ᵀ` rather than `aᵀ g`, so the view's backward hands `w` a
/// contiguous gradient and accumulating it into `.grad` copies nothing.
#[track_caller]
fn record_product(op: &'static str, out: Tensor, a: &Tensor, b: &Tensor) -> Tensor {
    let (da, db) = (a.dim(), b.dim());
    let (need_a, need_b) = (a.requires_grad(), b.requires_grad());
    let (a_transposed, b_transposed) = (da > 1 && stored_transposed(a), db > 1 && stored_transposed(b));
    let saved = [need_b.then(|| Saved::of(a)), need_a.then(|| Saved::of(b))];
    autograd::record(out, node_name(op, da, db), &[a, b], saved.into_iter().flatten(), move |ctx, g, s| {
        let a = need_b.then(|| &s[0]);
        let b = need_a.then(|| s.last().expect("saved rhs"));
        // The gradient as [batch..., m, n]: put back the dims that 1-D operands removed.
        let g = if db == 1 { g.unsqueeze(-1) } else { g.clone() };
        let g = if da == 1 { g.unsqueeze(-2) } else { g };
        let grad_a = ctx.needs_input_grad(0).then(|| {
            let b = b.expect("rhs saved");
            let ga = if db == 1 {
                g.matmul(&b.unsqueeze(0))
            } else if a_transposed {
                b.matmul(&g.transpose(-1, -2)).transpose(-1, -2)
            } else {
                g.matmul(&b.transpose(-1, -2))
            };
            if da == 1 {
                ga.squeeze_dim(-2)
            } else {
                ga
            }
        });
        let grad_b = ctx.needs_input_grad(1).then(|| {
            let a = a.expect("lhs saved");
            let gb = if da == 1 {
                a.unsqueeze(1).matmul(&g)
            } else if db == 2 && da > 2 {
                // `b` was broadcast over `a`'s batch dims (`linear` on a batch of sequences):
                // one product over the batch's rows, as PyTorch's matmul folds them, not a
                // product per batch entry summed afterwards.
                let (k, n) = (a.shape()[da - 1] as i64, g.shape()[g.dim() - 1] as i64);
                let (a, g) = (a.reshape([-1, k]), g.reshape([-1, n]));
                if b_transposed {
                    g.t().matmul(&a).t()
                } else {
                    a.t().matmul(&g)
                }
            } else if b_transposed {
                g.transpose(-1, -2).matmul(a).transpose(-1, -2)
            } else {
                a.transpose(-1, -2).matmul(&g)
            };
            if db == 1 {
                gb.squeeze_dim(-1)
            } else {
                gb
            }
        });
        grads![grad_a, grad_b]
    })
}

/// True when `t`'s last two dims are stored column by column (`t` is the transpose of a
/// contiguous matrix, or a batch of them): PyTorch's test `strides[0] == 1 && strides[1] ==
/// sizes[0]` on those dims.
fn stored_transposed(t: &Tensor) -> bool {
    let (shape, strides) = (t.shape(), t.stride());
    let r = shape.len();
    strides[r - 2] == 1 && strides[r - 1] == shape[r - 2] && shape[r - 1] > 1 && shape[r - 2] > 1
}

/// The CPU product of two storages of one dtype, `None` for mixed dtypes or `Bool`.
fn product_storage(sa: &CpuStorage, la: &Layout, sb: &CpuStorage, lb: &Layout) -> Option<CpuStorage> {
    macro_rules! by_dtype {
        ($($v:ident),*) => {
            match (sa, sb) {
                $((CpuStorage::$v(a), CpuStorage::$v(b)) => Some(CpuStorage::$v(cpu_matmul(a, la, b, lb))),)*
                _ => None,
            }
        };
    }
    by_dtype!(F32, F64, F16, BF16, I64, I32, U8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_runtime::DType;

    #[test]
    fn result_shapes_follow_torch_matmul() {
        let cases: &[(&[usize], &[usize], &[usize])] = &[
            (&[3], &[3], &[]),
            (&[2, 3], &[3], &[2]),
            (&[3], &[3, 4], &[4]),
            (&[2, 3], &[3, 4], &[2, 4]),
            (&[5, 2, 3], &[3], &[5, 2]),
            (&[3], &[5, 3, 4], &[5, 4]),
            (&[2, 1, 3, 4], &[5, 4, 2], &[2, 5, 3, 2]),
            (&[0, 3], &[3, 4], &[0, 4]),
            (&[2, 0], &[0, 4], &[2, 4]),
        ];
        for &(sa, sb, want) in cases {
            let out = Tensor::zeros(sa).matmul(&Tensor::zeros(sb));
            assert_eq!(out.shape(), want, "{sa:?} @ {sb:?}");
        }
    }

    #[test]
    fn errors_name_shapes_and_dtypes() {
        let e = |r: Result<Tensor>| r.unwrap_err().to_string();
        let (a, b) = (Tensor::zeros([2, 3]), Tensor::zeros([4, 5]));
        assert!(e(a.try_matmul(&b))
            .starts_with("matmul: shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4) (at src/ops/matmul.rs:"));
        assert!(e(a.try_matmul(&Tensor::scalar(1.0f32))).starts_with("matmul: both arguments need to be at least 1-D"));
        let c = Tensor::zeros([2, 3, 4]);
        assert!(e(c.try_matmul(&Tensor::zeros([3, 4, 2]))).contains("batch dimensions [2] and [3] cannot broadcast"));
        let d = Tensor::zeros_opts([3, 2], DType::F64, kiln_runtime::Device::Cpu);
        assert!(e(a.try_matmul(&d))
            .starts_with("matmul: expected both operands to have the same dtype, but got float32 and float64"));
        let bools = Tensor::zeros_opts([2, 2], DType::Bool, kiln_runtime::Device::Cpu);
        assert!(e(bools.try_mm(&bools)).starts_with("mm: not implemented for dtype bool"));
        assert!(e(c.try_mm(&b)).starts_with("mm: expected 2-D and 2-D tensors, but got shapes [2, 3, 4] and [4, 5]"));
        assert!(e(Tensor::zeros([1, 3, 4]).try_bmm(&Tensor::zeros([2, 4, 3])))
            .starts_with("bmm: expected the same batch size"));
        assert!(e(Tensor::zeros([3]).try_dot(&Tensor::zeros([4])))
            .starts_with("dot: shapes [3] and [4] cannot be multiplied (3 != 4)"));
        assert!(e(a.try_outer(&Tensor::zeros([2]))).starts_with("outer: expected 1-D and 1-D tensors"));
    }
}
