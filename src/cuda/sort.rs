//! `sort`, `argsort` and `topk` on CUDA tensors: the sorted dim is moved last and the rows made
//! contiguous (one copy kernel, none when they already are), then the bitonic sort kernels of
//! `kiln_codegen::cuda::sort` order each row's `(key, position)` pairs (stable, the CPU's
//! order: NaN largest, `-0.0 == 0.0`, ties by position in both directions) and write the
//! first `k` values and positions; the results are moved back to the op's dim.

use super::{dense, ordinal_of, LoadedKernels, OrOp};
use crate::error::{bail, Result};
use crate::tensor::Tensor;
use kiln_codegen::cuda::{LoadedSort, SortPlan, SortScratch, SORT_MAX_LEN};
use kiln_runtime::cuda::CudaStorage;
use kiln_runtime::{DType, Storage};
use std::sync::Arc;

/// The sort kernels of `dtype` on `cuda:ordinal`: compiled and loaded once per process.
#[track_caller]
fn loaded(op: &'static str, dtype: DType, ordinal: usize) -> Result<Arc<LoadedSort>> {
    static LOADED: LoadedKernels<(DType, usize), LoadedSort> = LoadedKernels::new();
    LOADED.get_or_load(op, (dtype, ordinal), || LoadedSort::load(dtype, ordinal))
}

/// The permutation moving dim `d` of `ndim` dims last, and its inverse (as `permute` takes
/// them).
pub(crate) fn dim_last(ndim: usize, d: usize) -> (Vec<i64>, Vec<i64>) {
    let forward: Vec<i64> = (0..ndim).filter(|&k| k != d).chain([d]).map(|k| k as i64).collect();
    let mut inverse = vec![0i64; ndim];
    for (at, &k) in forward.iter().enumerate() {
        inverse[k as usize] = at as i64;
    }
    (forward, inverse)
}

/// The first `k` values of each row of the CUDA tensor `x` along dim `d` sorted (ascending, or
/// descending when `descending`; stable) and their positions (int64), both of `x`'s shape with
/// dim `d` of size `k`, contiguous. A 0-dim `x` is one row of one element.
#[track_caller]
pub(crate) fn sorted_rows(
    op: &'static str,
    x: &Tensor,
    d: usize,
    k: usize,
    descending: bool,
) -> Result<(Tensor, Tensor)> {
    let _off = crate::autograd::no_grad_guard();
    let ordinal = ordinal_of(x);
    let x1 = if x.dim() == 0 { x.reshape([1]) } else { x.clone() };
    let (forward, inverse) = dim_last(x1.dim(), d);
    let moved = dense(&x1.try_permute(&forward)?);
    let n = x1.shape()[d];
    if n > SORT_MAX_LEN {
        bail!(
            op,
            Unsupported,
            "rows of {n} elements along dim {d} of shape {:?} are longer than the CUDA sort's limit of {SORT_MAX_LEN}",
            x.shape()
        );
    }
    let mut out_shape = moved.shape().to_vec();
    *out_shape.last_mut().expect("at least 1-dim") = k;
    let rows = out_shape[..out_shape.len() - 1].iter().product::<usize>();
    let plan = SortPlan::new(n);
    let mut values = CudaStorage::uninit(op, ordinal, x.dtype(), rows * k).or_op(op)?;
    let mut indices = CudaStorage::uninit(op, ordinal, DType::I64, rows * k).or_op(op)?;
    if rows * k > 0 {
        // The scratch pairs: u64 keys (stored as int64) and u32 positions (as int32).
        let mut keys = CudaStorage::uninit(op, ordinal, DType::I64, rows * plan.p).or_op(op)?;
        let mut pos = CudaStorage::uninit(op, ordinal, DType::I32, rows * plan.p).or_op(op)?;
        let kernels = loaded(op, x.dtype(), ordinal)?;
        let guard = moved.read_storage();
        let Storage::Cuda(sx) = &*guard else { unreachable!("the tensor's device is CUDA") };
        let scratch = SortScratch { keys: keys.buffer_mut(), pos: pos.buffer_mut() };
        kernels
            .run(sx.buffer(), scratch, (values.buffer_mut(), indices.buffer_mut()), rows, n, k, descending)
            .or_op(op)?;
    }
    let back = |s: CudaStorage| -> Result<Tensor> {
        let t = Tensor::from_storage(Storage::Cuda(s), &out_shape).try_permute(&inverse)?;
        let t = if x.dim() == 0 { t.reshape(()) } else { t };
        Ok(t.contiguous())
    };
    Ok((back(values)?, back(indices)?))
}

#[cfg(test)]
mod tests {
    use super::dim_last;

    #[test]
    fn moving_a_dim_last_and_back() {
        assert_eq!(dim_last(1, 0), (vec![0], vec![0]));
        assert_eq!(dim_last(3, 2), (vec![0, 1, 2], vec![0, 1, 2]));
        assert_eq!(dim_last(3, 0), (vec![1, 2, 0], vec![2, 0, 1]));
        assert_eq!(dim_last(4, 1), (vec![0, 2, 3, 1], vec![0, 3, 1, 2]));
        // The inverse undoes the forward permutation.
        let (f, i) = dim_last(5, 2);
        assert!((0..5).all(|k| f[i[k] as usize] == k as i64));
    }
}
