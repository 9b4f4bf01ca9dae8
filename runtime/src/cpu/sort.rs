//! Sorting along a dim: `sort` (stable), `topk`, in parallel over rows.
//!
//! Each row is turned into `(key, position)` pairs, where the key is an order-preserving `u64`
//! image of the value ([`sort_key`]: NaN largest, `-0.0 == 0.0`, flipped for descending order).
//! Positions are distinct, so an unstable sort of the pairs gives exactly the stable order: ties
//! keep their original order, in both directions, as PyTorch's `stable=True` does.

use super::buffer::CpuBuf;
use super::elementwise::SendPtr;
use super::parallel::{for_ranges, num_threads, pool, GRAIN};
use super::strided::collapse;
use crate::dtype::Element;
use crate::layout::{contiguous_strides, numel, Layout, Shape};
use rayon::slice::ParallelSliceMut;
use smallvec::SmallVec;

/// A `u64` whose order is PyTorch's sort order of the values: floats by value with every NaN
/// above `+inf` and `-0.0` equal to `0.0`; integers and bools by value.
#[inline(always)]
pub fn sort_key<T: Element>(x: T) -> u64 {
    if T::DTYPE.is_float() {
        let v = x.to_f64(); // exact for every float dtype
        if v.is_nan() {
            return u64::MAX;
        }
        let bits = (v + 0.0).to_bits(); // -0.0 + 0.0 == +0.0
        if bits >> 63 == 1 {
            !bits
        } else {
            bits | 1 << 63
        }
    } else {
        (x.to_i64() as u64) ^ 1 << 63
    }
}

/// The sorted values and their original positions along `dim`, in new contiguous buffers of
/// `layout`'s shape. Stable: equal values keep their order.
pub fn sort<T: Element>(src: &[T], layout: &Layout, dim: usize, descending: bool) -> (CpuBuf<T>, CpuBuf<i64>) {
    let n = layout.shape()[dim];
    let one_row = numel(layout.shape()) / n.max(1) < num_threads();
    select_rows(src, layout, dim, n, descending, |keys| {
        if one_row && keys.len() >= GRAIN {
            pool().install(|| keys.par_sort_unstable());
        } else {
            keys.sort_unstable();
        }
    })
}

/// The `k` largest (or smallest) values along `dim` and their positions, in new contiguous
/// buffers of `layout`'s shape with `dim` of size `k` (`k <= size`). When `sorted`, they come in
/// order (largest first for `largest`); otherwise in an unspecified but deterministic order.
/// Ties go to the earlier position; NaN counts as the largest value.
pub fn topk<T: Element>(
    src: &[T],
    layout: &Layout,
    dim: usize,
    k: usize,
    largest: bool,
    sorted: bool,
) -> (CpuBuf<T>, CpuBuf<i64>) {
    assert!(k <= layout.shape()[dim], "topk: k is larger than the dim");
    select_rows(src, layout, dim, k, largest, |keys| {
        if k < keys.len() {
            if k > 0 {
                keys.select_nth_unstable(k - 1);
            }
            keys.truncate(k);
        }
        if sorted {
            keys.sort_unstable();
        }
    })
}

/// For each row along `dim`: builds its `(key, position)` pairs (keys flipped when
/// `descending`), lets `arrange` reorder them and keep the first `k`, and writes those values
/// and positions into the row of the outputs (contiguous, `dim` of size `k`).
fn select_rows<T: Element>(
    src: &[T],
    layout: &Layout,
    dim: usize,
    k: usize,
    descending: bool,
    arrange: impl Fn(&mut Vec<(u64, usize)>) + Sync + Send,
) -> (CpuBuf<T>, CpuBuf<i64>) {
    let (n, ss) = (layout.shape()[dim], layout.strides()[dim]);
    let mut out_shape: Shape = SmallVec::from_slice(layout.shape());
    out_shape[dim] = k;
    let total = numel(&out_shape);
    let mut values = CpuBuf::<T>::uninit(total);
    let mut indices = CpuBuf::<i64>::uninit(total);
    if total == 0 {
        return (values, indices);
    }
    assert!(layout.storage_end() <= src.len(), "sort: layout outside its storage");
    let out_strides = contiguous_strides(&out_shape);
    let os = out_strides[dim];
    // The rows: every dim but `dim`, in the input and in the output.
    let drop_dim = |v: &[usize]| -> SmallVec<[usize; 6]> {
        v.iter().enumerate().filter(|&(d, _)| d != dim).map(|(_, &x)| x).collect()
    };
    let row_shape = drop_dim(layout.shape());
    let rows = collapse(&row_shape, [&drop_dim(layout.strides())[..], &drop_dim(&out_strides)[..]]);
    let flip = if descending { u64::MAX } else { 0 };
    let (vp, ip) = (SendPtr(values.as_mut_ptr()), SendPtr(indices.as_mut_ptr()));
    for_ranges(numel(&row_shape), (GRAIN / n.max(1)).max(1), |range| {
        let (vp, ip) = (vp, ip);
        let mut keys = Vec::with_capacity(n);
        rows.walk([layout.offset(), 0], range, |[s0, o0], run, [sr, or]| {
            for r in 0..run {
                let (s, o) = (s0 + r * sr, o0 + r * or);
                keys.clear();
                keys.extend((0..n).map(|j| (sort_key(src[s + j * ss]) ^ flip, j)));
                arrange(&mut keys);
                for (j, &(_, i)) in keys.iter().enumerate().take(k) {
                    let v = src[s + i * ss];
                    // SAFETY: `o + j * os` (j < k) is the output offset of element j of this
                    // row, inside the `total`-element buffers by construction of the contiguous
                    // strides; rows are distinct, threads get disjoint row ranges, and both
                    // buffers are owned by this function and not otherwise borrowed.
                    unsafe {
                        *vp.0.add(o + j * os) = v;
                        *ip.0.add(o + j * os) = i as i64;
                    }
                }
            }
        });
    });
    (values, indices)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_order_like_pytorch() {
        let xs = [f32::NEG_INFINITY, -2.5, -0.0, 0.0, 1e-30, 3.0, f32::INFINITY, f32::NAN];
        let keys: Vec<u64> = xs.iter().map(|&x| sort_key(x)).collect();
        assert!(keys.windows(2).all(|w| w[0] <= w[1]), "{keys:x?}");
        assert_eq!(sort_key(-0.0f32), sort_key(0.0f32));
        assert_eq!(sort_key(-f64::NAN), sort_key(f64::NAN));
        assert!(sort_key(-5i64) < sort_key(3i64));
        assert!(sort_key(i64::MIN) < sort_key(i64::MAX));
        assert!(sort_key(false) < sort_key(true));
    }

    #[test]
    fn stable_in_both_directions() {
        let x = [2i32, 1, 2, 1, 3];
        let l = Layout::contiguous(&[5]);
        let (v, i) = sort(&x, &l, 0, false);
        assert_eq!((&v[..], &i[..]), (&[1, 1, 2, 2, 3][..], &[1, 3, 0, 2, 4][..]));
        let (v, i) = sort(&x, &l, 0, true);
        assert_eq!((&v[..], &i[..]), (&[3, 2, 2, 1, 1][..], &[4, 0, 2, 1, 3][..]));
    }

    #[test]
    fn rows_of_a_transposed_layout() {
        // [[3, 1], [2, 4], [1, 5]] stored transposed; sort along dim 0.
        let x = [3.0f64, 2.0, 1.0, 1.0, 4.0, 5.0];
        let l = Layout::contiguous(&[2, 3]).transpose(0, 1);
        let (v, i) = sort(&x, &l, 0, false);
        assert_eq!(&v[..], &[1.0, 1.0, 2.0, 4.0, 3.0, 5.0]);
        assert_eq!(&i[..], &[2, 0, 1, 1, 0, 2]);
        let (v, i) = topk(&x, &l, 1, 1, true, true);
        assert_eq!((&v[..], &i[..]), (&[3.0, 4.0, 5.0][..], &[0, 1, 1][..]));
    }

    #[test]
    fn topk_nan_and_ties() {
        let x = [1.0f32, f32::NAN, 3.0, 3.0, 0.0];
        let l = Layout::contiguous(&[5]);
        let (v, i) = topk(&x, &l, 0, 3, true, true);
        assert!(v[0].is_nan());
        assert_eq!((&v[1..], &i[..]), (&[3.0, 3.0][..], &[1, 2, 3][..]));
        let (v, i) = topk(&x, &l, 0, 2, false, true);
        assert_eq!((&v[..], &i[..]), (&[0.0, 1.0][..], &[4, 0][..]));
        let (v, _) = topk(&x, &l, 0, 0, true, true);
        assert!(v.is_empty());
    }

    #[test]
    fn large_single_row_sorts_in_parallel() {
        let n = 200_003;
        let x: Vec<i64> = (0..n as i64).map(|i| (i * 7919) % 1000).collect();
        let (v, i) = sort(&x, &Layout::contiguous(&[n]), 0, false);
        assert!(v.windows(2).all(|w| w[0] <= w[1]));
        assert!(i.windows(2).zip(v.windows(2)).all(|(i, v)| v[0] < v[1] || i[0] < i[1]));
        assert!(i.iter().zip(v.iter()).all(|(&i, &v)| x[i as usize] == v));
    }
}
