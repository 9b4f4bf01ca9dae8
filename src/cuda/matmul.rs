//! Matrix products of CUDA tensors through cuBLAS (`kiln_runtime::cuda::gemm`).
//!
//! The op layer (`ops::matmul`) lines the operands up as `[batch..., m, k]` and `[batch..., k,
//! n]` views (broadcast batch dims have stride 0). Here each operand's batch dims are merged
//! into one stride and its matrices described as row- or column-major (a transposed view is
//! a transpose flag); an operand that fits neither (batch dims that do not merge, matrices
//! with no unit stride) is copied to a contiguous tensor first. One strided-batched cuBLAS
//! call then writes the contiguous `[batch..., m, n]` result.

use super::elementwise::common_device;
use super::OrOp;
use crate::autograd;
use crate::error::{bail, Result};
use crate::tensor::Tensor;
use kiln_runtime::cuda::{gemm, CudaStorage, GemmOperand, GemmShape, MatrixLayout};
use kiln_runtime::{Device, Layout, Storage};

/// The element distance between consecutive matrices of a view whose first `batch_dims` dims
/// are batch dims, when they merge into one (unit dims skipped; 0 for a broadcast batch).
fn merged_batch_stride(l: &Layout, batch_dims: usize) -> Option<usize> {
    let dims: Vec<(usize, usize)> =
        (0..batch_dims).map(|i| (l.shape()[i], l.strides()[i])).filter(|&(size, _)| size > 1).collect();
    let merges = dims.windows(2).all(|w| w[0].1 == w[1].1 * w[1].0);
    merges.then(|| dims.last().map_or(0, |&(_, s)| s))
}

/// `t` viewed through `l` as cuBLAS can read it: the tensor (the same one, or a contiguous
/// copy of the view), its layout, and its matrices' layout and batch stride.
fn operand(t: &Tensor, l: &Layout) -> (Tensor, Layout, MatrixLayout, usize) {
    let r = l.ndim();
    let read = |l: &Layout| {
        let (s, st) = (l.shape(), l.strides());
        Some((MatrixLayout::of(s[r - 2], s[r - 1], st[r - 2], st[r - 1])?, merged_batch_stride(l, r - 2)?))
    };
    if let Some((m, b)) = read(l) {
        return (t.clone(), l.clone(), m, b);
    }
    let copy = {
        let _off = autograd::no_grad_guard();
        t.with_layout(l.clone()).contiguous()
    };
    let lc = copy.layout().clone();
    let (m, b) = read(&lc).expect("a contiguous matrix batch is readable");
    (copy, lc, m, b)
}

/// `a @ b` for CUDA tensors `a` and `b` of one float dtype, viewed through `la`
/// (`[batch..., m, k]`) and `lb` (`[batch..., k, n]`, the same batch dims): a new contiguous
/// tensor of `shape` (the `[batch..., m, n]` elements, with the dims a 1-D operand removed).
#[track_caller]
pub(crate) fn matmul(
    op: &'static str,
    a: &Tensor,
    la: &Layout,
    b: &Tensor,
    lb: &Layout,
    shape: &[usize],
) -> Result<Tensor> {
    let ordinal = common_device(op, &[(a.device(), false), (b.device(), false)])?;
    let dtype = a.dtype();
    if !dtype.is_float() {
        bail!(op, DType, "not implemented for dtype {dtype} on CUDA (shapes {:?} and {:?}); cuBLAS multiplies float32, float64, float16 and bfloat16", a.shape(), b.shape());
    }
    let r = la.ndim();
    let (m, k, n) = (la.shape()[r - 2], la.shape()[r - 1], lb.shape()[r - 1]);
    let batch: usize = la.shape()[..r - 2].iter().product();
    if batch * m * n == 0 || k == 0 {
        // Nothing to multiply: an empty result, or sums of no products.
        return Tensor::try_full_opts(shape, 0, dtype, Device::Cuda(ordinal));
    }
    let (ta, la, ma, sa) = operand(a, la);
    let (tb, lb, mb, sb) = operand(b, lb);
    let mut out = CudaStorage::uninit(op, ordinal, dtype, batch * m * n).or_op(op)?;
    {
        let operands = [ta, tb];
        let (guards, at) = Tensor::read_storages(&operands);
        let (Storage::Cuda(xa), Storage::Cuda(xb)) = (&*guards[at[0]], &*guards[at[1]]) else {
            unreachable!("devices were checked")
        };
        let ga = GemmOperand { buf: xa.buffer(), offset: la.offset(), layout: ma, batch_stride: sa };
        let gb = GemmOperand { buf: xb.buffer(), offset: lb.offset(), layout: mb, batch_stride: sb };
        gemm(op, dtype, GemmShape { batch, m, k, n }, ga, gb, out.buffer_mut()).or_op(op)?;
    }
    Ok(Tensor::from_storage(Storage::Cuda(out), shape))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_dims_merge_when_they_are_one_run() {
        let l = Layout::contiguous(&[2, 3, 4, 5]);
        assert_eq!(merged_batch_stride(&l, 2), Some(20));
        // A broadcast batch repeats one matrix; a unit batch dim is skipped.
        let l = Layout::new(vec![6, 1, 4, 5].into(), vec![0, 7, 5, 1].into(), 0);
        assert_eq!(merged_batch_stride(&l, 2), Some(0));
        assert_eq!(merged_batch_stride(&Layout::contiguous(&[4, 5]), 0), Some(0));
        // [2, 5] batches from a [2, 1] operand broadcast along the second dim do not merge.
        let l = Layout::new(vec![2, 5, 4, 5].into(), vec![20, 0, 5, 1].into(), 0);
        assert_eq!(merged_batch_stride(&l, 2), None);
    }
}
