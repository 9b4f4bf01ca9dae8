//! Advanced indexing on CUDA tensors (`index`, `index_put_`), as the indexing kernels of
//! `kiln_codegen::cuda::index` along one dim of the storage.
//!
//! Every element `x[indices]` reads (or `index_put_` writes) is at one storage offset:
//! `offset + Σ idx_k · stride(d_k) + Σ c_r · stride(walk r)` over the index tensors (each
//! checked in `-size..size` on the device first, then wrapped with one `remainder` kernel) and
//! the result dims that walk a dim of `x`. That offset is computed by broadcasting elementwise
//! kernels into one int64 tensor of the result's shape; then a gather from the whole storage
//! seen as a vector, or a scatter (or scatter_add) into it along the merged index dims
//! ([`along_index_dims`]: deterministic in the CPU's order when asked), does the rest. A bool
//! mask index arrives here as its `nonzero` columns (on the device).

use super::{dense, ordinal_of};
use crate::error::Result;
use crate::tensor::Tensor;
use kiln_runtime::{DType, Device, Layout};

/// An advanced index resolved by the op layer: the result shape, the dim of `x` each result
/// dim walks (`None` for the broadcast index dims), and each index tensor (int64, on `x`'s
/// device) with its result-shaped layout over a contiguous copy and the dim of `x` it indexes.
pub(crate) struct Resolved<'a> {
    /// The indexing result's shape.
    pub shape: &'a [usize],
    /// For each result dim, the dim of `x` it walks, or `None`.
    pub walk: &'a [Option<usize>],
    /// The index tensors: values, result-shaped layout over their contiguous copy, indexed dim.
    pub indices: &'a [(Tensor, Layout, usize)],
}

/// The storage offset of every element of `x[indices]`: a contiguous int64 vector on `x`'s
/// device, in the result's row-major order. Errors name `op` and the first out-of-range index
/// value, as the CPU's.
#[track_caller]
fn offsets(op: &'static str, x: &Tensor, adv: &Resolved<'_>) -> Result<Tensor> {
    let device = Device::Cuda(ordinal_of(x));
    let mut acc = Tensor::full_opts((), x.layout().offset() as i64, DType::I64, device);
    for (t, layout, d) in adv.indices {
        let size = x.shape()[*d];
        let t = dense(t);
        super::index::check_range(op, &t, *d, size, true)?;
        // In -size..size now: the divisor-signed remainder counts negative values from the end.
        let wrapped = if t.numel() == 0 { t } else { t.try_remainder(size as i64)? }.with_layout(layout.clone());
        acc = acc.try_add(&wrapped.try_mul(x.stride()[*d] as i64)?)?;
    }
    for (r, walked) in adv.walk.iter().enumerate() {
        let Some(d) = *walked else { continue };
        let steps: Vec<i64> = (0..x.shape()[d]).map(|c| (c * x.stride()[d]) as i64).collect();
        let mut strides = vec![0; adv.shape.len()];
        strides[r] = 1;
        let steps = super::to_device(op, &Tensor::from_vec(steps, [x.shape()[d]]), device)?;
        acc = acc.try_add(steps.with_layout(Layout::new(adv.shape.into(), strides.into(), 0)))?;
    }
    Ok(dense(&acc.try_broadcast_to(adv.shape)?).reshape([-1]))
}

/// The whole storage of `x` as a vector (a view sharing it).
fn storage_vector(x: &Tensor) -> Tensor {
    x.with_layout(Layout::contiguous(&[x.storage_len()]))
}

/// `x[indices]` of the CUDA tensor `x`: a new contiguous tensor of the result's shape (no
/// autograd: the op layer records it).
#[track_caller]
pub(crate) fn index(op: &'static str, x: &Tensor, adv: &Resolved<'_>) -> Result<Tensor> {
    let _off = crate::autograd::no_grad_guard();
    let at = offsets(op, x, adv)?;
    let m = at.numel();
    super::index::gather(op, &storage_vector(x), 0, &at, at.layout(), &[m], adv.shape)
}

/// The positions of a put as a scatter along one dim `b`: the result `shape` with its
/// broadcast index dims (`None` in `walk`, always adjacent) merged into dim `b` (a dim of 1
/// inserted in front when there are none), and the target layout over the whole storage
/// (`storage_len` elements): `storage_len` along `b` with stride 1, stride 0 on every other
/// dim, so that a storage offset is the index value along `b`. The result dims that walk `x`
/// are the lines' other dims: distinct walk coordinates are distinct elements, and each line
/// holds the positions one element may be written by, in the result's row-major order (the
/// CPU's).
fn along_index_dims(shape: &[usize], walk: &[Option<usize>], storage_len: usize) -> (Vec<usize>, usize, Layout) {
    let b = walk.iter().position(Option::is_none).unwrap_or(0);
    let end = walk.iter().rposition(Option::is_none).map_or(b, |e| e + 1);
    debug_assert!(walk[b..end].iter().all(Option::is_none), "the index dims are adjacent");
    let mut lines = shape[..b].to_vec();
    lines.push(shape[b..end].iter().product());
    lines.extend_from_slice(&shape[end..]);
    let mut target = lines.clone();
    target[b] = storage_len;
    let mut strides = vec![0; lines.len()];
    strides[b] = 1;
    (lines, b, Layout::new(target.as_slice().into(), strides.into(), 0))
}

/// `dst[indices] = values` (or `+=` when `accumulate`) on the CUDA tensor `dst`, `values`
/// (of `dst`'s dtype and device, not sharing its storage) broadcast to the result's shape: a
/// scatter (or scatter_add) into the storage at the element offsets, along the merged index
/// dims ([`along_index_dims`]). By default a plain write where positions repeat keeps one of
/// the values (not necessarily the last, as on the CPU) and an accumulating one adds with
/// atomics, in a scheduling-dependent order. Under `use_deterministic_algorithms(true)` one
/// thread per position of the walked dims (`x[idx] += v` on `[M, D]`: `D` threads) walks the
/// index positions in the CPU's order, so the result is the CPU's bit for bit (the last value
/// wins a plain write); with no walked dim that is a single thread.
#[track_caller]
pub(crate) fn put(op: &'static str, dst: &Tensor, adv: &Resolved<'_>, values: &Tensor, accumulate: bool) -> Result<()> {
    let _off = crate::autograd::no_grad_guard();
    let at = offsets(op, dst, adv)?;
    let (shape, b, target) = along_index_dims(adv.shape, adv.walk, dst.storage_len());
    let at = at.with_layout(Layout::contiguous(&shape));
    let (src, ls) = if values.dim() == 0 {
        (values.clone(), Layout::new(shape.as_slice().into(), vec![0; shape.len()].into(), values.layout().offset()))
    } else {
        (dense(&values.try_broadcast_to(adv.shape)?), Layout::contiguous(&shape))
    };
    super::index::scatter(op, &dst.with_layout(target), b, &at, &src, &ls, accumulate)
}

#[cfg(test)]
mod tests {
    use super::along_index_dims;
    use crate::cuda::index::host;
    use crate::Tensor;
    use kiln_runtime::Layout;

    /// The CPU's `index_put_` into the view `view(parent)` against the put's line plan
    /// ([`along_index_dims`]) run on the host over `parent`'s storage, bit for bit. `offset`
    /// is the storage offset of each result position (what `offsets` computes on the device).
    fn same_as_cpu(
        parent: &Tensor,
        view: impl Fn(&Tensor) -> Tensor,
        indices: &[Option<&Tensor>],
        (shape, walk): (&[usize], &[Option<usize>]),
        offset: impl Fn(&[usize]) -> i64,
        values: &Tensor,
        accumulate: bool,
    ) {
        let out = parent.deep_clone();
        view(&out).index_put_(indices, values, accumulate);
        // Every result position's offset, in row-major order.
        let n: usize = shape.iter().product();
        let at: Vec<i64> = (0..n)
            .map(|mut i| {
                let mut c = vec![0; shape.len()];
                for m in (0..shape.len()).rev() {
                    (c[m], i) = (i % shape[m], i / shape[m]);
                }
                offset(&c)
            })
            .collect();
        let mut t = parent.to_vec::<f32>();
        let (lines, b, target) = along_index_dims(shape, walk, t.len());
        // As `put` lays the values out: one value with strides 0, or dense.
        let dense = Layout::contiguous(&lines);
        let (v, ls) = match values.dim() {
            0 => (values.to_vec::<f32>(), Layout::new(lines.as_slice().into(), vec![0; lines.len()].into(), 0)),
            _ => (values.broadcast_to(shape).contiguous().to_vec::<f32>(), dense.clone()),
        };
        host::scatter(&mut t, &at, &v, (&target, b, &lines), &dense, &ls, accumulate);
        let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
        assert_eq!(bits(t), bits(out.to_vec::<f32>()), "shape {shape:?}, accumulate {accumulate}");
    }

    #[test]
    fn puts_merge_their_index_dims_into_one_line() {
        let walk = [Some(0), None, None, Some(3), Some(4)];
        let (lines, b, target) = along_index_dims(&[2, 3, 4, 5, 6], &walk, 1000);
        assert_eq!((lines.as_slice(), b), (&[2, 12, 5, 6][..], 1));
        assert_eq!((target.shape(), target.strides()), (&[2, 1000, 5, 6][..], &[0, 1, 0, 0][..]));
        // Index dims in front; no index dim (a dim of 1 in front).
        let (lines, b, _) = along_index_dims(&[3, 4, 5], &[None, None, Some(1)], 60);
        assert_eq!((lines.as_slice(), b), (&[12, 5][..], 0));
        let (lines, b, target) = along_index_dims(&[3, 4], &[Some(0), Some(1)], 12);
        assert_eq!((lines.as_slice(), b, target.shape()), (&[1, 3, 4][..], 0, &[12, 3, 4][..]));
    }

    #[test]
    fn the_put_plans_apply_repeated_positions_in_the_cpus_order() {
        let mixed = |n: usize| Tensor::from_vec(host::mixed(n), [n]);
        let parent = mixed(24).reshape([6, 4]);
        let transposed = |p: &Tensor| p.t(); // [4, 6], strides [1, 4]
                                             // x[rows] (+)= v: rows repeat; one line per column of x.
        let rows = Tensor::new(&[3i64, 0, 3, 3, 1, 0]);
        let v = mixed(36).reshape([6, 6]);
        // x[:, cols] (+)= v: columns repeat, one of them negative.
        let cols = Tensor::new(&[5i64, 1, -1, 2, 5]);
        let w = mixed(20).reshape([4, 5]);
        // x3[i, :, j] (+)= u: two index tensors apart, so their dims go in front.
        let x3 = mixed(60).reshape([3, 4, 5]);
        let (i, j) = (Tensor::new(&[[2i64, 0, 2], [1, 2, 2]]), Tensor::new(&[[4i64, 4, 0], [4, 1, 4]]));
        let u = mixed(24).reshape([2, 3, 4]);
        for acc in [false, true] {
            let at = |c: &[usize]| rows.to_vec::<i64>()[c[0]] + 4 * c[1] as i64;
            same_as_cpu(&parent, transposed, &[Some(&rows)], (&[6, 6], &[None, Some(1)]), at, &v, acc);
            let at = |c: &[usize]| c[0] as i64 + 4 * cols.to_vec::<i64>()[c[1]].rem_euclid(6);
            same_as_cpu(&parent, transposed, &[None, Some(&cols)], (&[4, 5], &[Some(0), None]), at, &w, acc);
            let at = |c: &[usize]| {
                20 * i.to_vec::<i64>()[3 * c[0] + c[1]] + 5 * c[2] as i64 + j.to_vec::<i64>()[3 * c[0] + c[1]]
            };
            let shape = (&[2, 3, 4][..], &[None, None, Some(1)][..]);
            same_as_cpu(&x3, |p| p.clone(), &[Some(&i), None, Some(&j)], shape, at, &u, acc);
            // One value broadcast to every position.
            same_as_cpu(&x3, |p| p.clone(), &[Some(&i), None, Some(&j)], shape, at, &Tensor::scalar(1.25f32), acc);
        }
    }
}
