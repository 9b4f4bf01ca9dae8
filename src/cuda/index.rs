//! Indexing along one dim on CUDA tensors (`gather`, `index_select`, `scatter`,
//! `scatter_add`, `index_fill`) as kernels from the CUDA C emitter (`kiln_codegen::cuda::index`).
//!
//! The op layer (`ops::index`) keeps its checks (dtypes, dims, shapes) and hands over the
//! *iteration shape* with iteration-shaped layouts: the target (the gathered input or the
//! scatter's destination, stride 0 along the indexed dim), the index and the values. Before
//! any launch the index values are validated on the device by the bounds kernel
//! (`kiln_codegen::cuda::bounds`: one pass raising a flag word, the 4-byte flag read back, so
//! one synchronization per op); when it is raised the index is copied to the host to name the
//! first bad value in row-major order, as the CPU's error does, and nothing is launched. The
//! kernels check each value again, so no index reaches outside the target.
//!
//! Under `use_deterministic_algorithms(true)`, `scatter_add` runs the line kernel
//! ([`IndexKind::ScatterAddLines`]: one thread per line of the scatter dim, adding in order, so
//! the CPU's result bit for bit); otherwise the atomic one, faster on wide lines. A plain
//! scatter whose values may differ along a line runs its storing twin there
//! ([`IndexKind::ScatterLines`]: the last write in the CPU's order wins).

use super::elementwise::{collapse_all, common_device};
use super::{LoadedKernels, OrOp};
use crate::error::Result;
use crate::ops::out_of_bounds;
use crate::tensor::Tensor;
use kiln_codegen::cuda::{
    emit_bounds, emit_index, IndexKind, IndexedDim, LoadedBounds, LoadedIndex, ScatterLine, StridedOperand,
};
use kiln_runtime::cuda::CudaStorage;
use kiln_runtime::{DType, Device, Layout, Storage};
use std::sync::Arc;

/// The kernel of `kind` for `dtype` over `ndim` dims on `cuda:ordinal`: emitted, compiled and
/// loaded once per process.
#[track_caller]
fn loaded(name: &'static str, kind: IndexKind, dtype: DType, ndim: usize, ordinal: usize) -> Result<Arc<LoadedIndex>> {
    static LOADED: LoadedKernels<(IndexKind, DType, usize, usize), LoadedIndex> = LoadedKernels::new();
    let key = (kind, dtype, ndim, ordinal);
    if let Some(k) = LOADED.get(&key) {
        return Ok(k);
    }
    let kernel = emit_index(kind, dtype, ndim).or_op(name)?;
    Ok(LOADED.insert(key, LoadedIndex::load(&kernel, ordinal).or_op(name)?))
}

/// The smallest and largest value of the CUDA int64 tensor `t` (two reduction kernels, each
/// value read back), or `None` when `t` is empty: what `one_hot` needs (its class count may
/// come from the largest value).
#[track_caller]
pub(crate) fn min_max(t: &Tensor) -> Result<Option<(i64, i64)>> {
    if t.numel() == 0 {
        return Ok(None);
    }
    Ok(Some((t.try_min()?.try_item::<i64>()?, t.try_max()?.try_item::<i64>()?)))
}

/// An error unless every value of the CUDA int64 tensor `index` lies in `0..size` (in
/// `-size..size` when `allow_negative`), naming the first bad one in row-major order: one
/// device pass and a 4-byte read-back ([`all_within`]); only when a value is out of range is
/// the index copied to the host to find it. Nothing to check when `index` is empty.
#[track_caller]
pub(crate) fn check_range(
    op: &'static str,
    index: &Tensor,
    dim: usize,
    size: usize,
    allow_negative: bool,
) -> Result<()> {
    let n = size as i64;
    let first = if allow_negative { -n } else { 0 };
    if index.numel() == 0 || all_within(op, index, first, n)? {
        return Ok(());
    }
    let bad = index.to_vec::<i64>().into_iter().find(|&v| v < first || v >= n);
    Err(out_of_bounds(op, bad.expect("the device flagged a value out of range"), dim, size))
}

/// True when every value of the CUDA int64 tensor `index` lies in `lo..hi`: the bounds kernel
/// over its view (dims collapsed), its flag read back (waits for the device's queued work).
#[track_caller]
fn all_within(op: &'static str, index: &Tensor, lo: i64, hi: i64) -> Result<bool> {
    let ordinal = device_of(op, &[index])?;
    let (shape, strides) = collapse_all(index.shape(), &[index.layout().strides()]);
    static LOADED: LoadedKernels<(usize, usize), LoadedBounds> = LoadedKernels::new();
    let kernel =
        LOADED.get_or_load(op, (shape.len(), ordinal), || LoadedBounds::load(&emit_bounds(shape.len())?, ordinal))?;
    let storage = index.read_storage();
    let Storage::Cuda(s) = &*storage else { unreachable!("device_of found a CUDA device") };
    let view = StridedOperand { offset: index.layout().offset(), strides: &strides[0] };
    kernel.all_within((s.buffer(), view), &shape, lo, hi).or_op(op)
}

/// The ordinal of the CUDA device all of `tensors` are on (0-dim CPU tensors excepted: none
/// here), or an error naming the op and both devices.
#[track_caller]
fn device_of(op: &'static str, tensors: &[&Tensor]) -> Result<usize> {
    let devices: Vec<(Device, bool)> = tensors.iter().map(|t| (t.device(), false)).collect();
    common_device(op, &devices)
}

/// The index space of an op along dim `d`: the iteration shape and the target's
/// iteration-shaped layout (`x`'s strides on the other dims, 0 along `d`), the indexed dim,
/// and the three operands' strides collapsed together.
struct Space {
    shape: Vec<usize>,
    strides: Vec<Vec<usize>>,
    dim: IndexedDim,
}

impl Space {
    /// `x` (at least 1-dim) indexed along `d`, walked over `shape` by layouts `index` and
    /// `values`.
    fn new(x: &Layout, d: usize, shape: &[usize], index: &Layout, values: &Layout) -> Space {
        let mut target: Vec<usize> = x.strides().to_vec();
        target[d] = 0;
        let (shape, strides) = collapse_all(shape, &[&target, index.strides(), values.strides()]);
        Space { shape, strides, dim: IndexedDim { size: x.shape()[d], stride: x.strides()[d] } }
    }

    /// The line kernels' space: `shape` without dim `d` (each position a line along `d`,
    /// dims collapsed), and the line (its length and the index's and the values' strides
    /// along `d`); otherwise as [`Space::new`].
    fn lines(x: &Layout, d: usize, shape: &[usize], index: &Layout, values: &Layout) -> (Space, ScatterLine) {
        let drop_d =
            |v: &[usize]| -> Vec<usize> { v.iter().enumerate().filter(|&(m, _)| m != d).map(|(_, &s)| s).collect() };
        let strides = [drop_d(x.strides()), drop_d(index.strides()), drop_d(values.strides())];
        let (outer, strides) = collapse_all(&drop_d(shape), &[&strides[0], &strides[1], &strides[2]]);
        let line = ScatterLine { len: shape[d], idx_stride: index.strides()[d], src_stride: values.strides()[d] };
        (Space { shape: outer, strides, dim: IndexedDim { size: x.shape()[d], stride: x.strides()[d] } }, line)
    }

    /// Operand `j`'s view at element offset `offset`.
    fn view(&self, j: usize, offset: usize) -> StridedOperand<'_> {
        StridedOperand { offset, strides: &self.strides[j] }
    }
}

/// The launch plan of a scatter into `x` along `d` over `shape` (layouts as [`Space::new`]'s):
/// with `ordered`, the line kernels' space and line ([`Space::lines`]), otherwise the space
/// of one thread per position and no line.
fn plan(
    x: &Layout,
    d: usize,
    shape: &[usize],
    index: &Layout,
    values: &Layout,
    ordered: bool,
) -> (Space, Option<ScatterLine>) {
    if ordered {
        let (space, line) = Space::lines(x, d, shape, index, values);
        (space, Some(line))
    } else {
        (Space::new(x, d, shape, index, values), None)
    }
}

/// `out[p] = x[.., index[p], ..]` along dim `d` of the CUDA tensor `x` (at least 1-dim) for
/// each position `p` of `shape`, the index read through `li` (iteration-shaped): a new
/// contiguous tensor of `out_shape` (the same element count as `shape`).
#[track_caller]
pub(crate) fn gather(
    op: &'static str,
    x: &Tensor,
    d: usize,
    index: &Tensor,
    li: &Layout,
    shape: &[usize],
    out_shape: &[usize],
) -> Result<Tensor> {
    let ordinal = device_of(op, &[x, index])?;
    check_range(op, index, d, x.shape()[d], false)?;
    let lo = Layout::contiguous(shape);
    let space = Space::new(x.layout(), d, shape, li, &lo);
    let mut out = CudaStorage::uninit(op, ordinal, x.dtype(), lo.numel()).or_op(op)?;
    let kernel = loaded(op, IndexKind::Gather, x.dtype(), space.shape.len(), ordinal)?;
    {
        let operands = [x.clone(), index.clone()];
        let (guards, at) = Tensor::read_storages(&operands);
        let (Storage::Cuda(sx), Storage::Cuda(si)) = (&*guards[at[0]], &*guards[at[1]]) else {
            unreachable!("devices were checked")
        };
        let t = (sx.buffer(), space.view(0, x.layout().offset()));
        let i = (si.buffer(), space.view(1, li.offset()));
        kernel.gather(t, i, (out.buffer_mut(), space.view(2, 0)), &space.shape, space.dim).or_op(op)?;
    }
    Ok(Tensor::from_storage(Storage::Cuda(out), out_shape))
}

/// `dst[.., index[p], ..] = src[p]` (or `+=` when `accumulate`) along dim `d` of the CUDA
/// tensor `dst` (at least 1-dim, not sharing storage with `index` or `src`) for each position
/// `p` of the index's shape, `src` read through `ls` (index-shaped). Validates every index
/// value first: nothing is written when one is out of range. `src` is a tensor on `dst`'s
/// device, or 0-dim (a scalar source, broadcast by `ls`; it may be on the CPU). Under
/// `use_deterministic_algorithms(true)` the positions are applied in the CPU's order (one
/// thread per line of dim `d`, see [`launch_scatter`]): a `scatter_add` adds in that order and
/// a plain scatter keeps the last value written at a repeated position, both the CPU's result.
#[track_caller]
pub(crate) fn scatter(
    op: &'static str,
    dst: &Tensor,
    d: usize,
    index: &Tensor,
    src: &Tensor,
    ls: &Layout,
    accumulate: bool,
) -> Result<()> {
    // A 0-dim source (a scalar) may come from the host; the rest must be on one CUDA device.
    let ordinal = common_device(op, &[(dst.device(), false), (index.device(), false), (src.device(), src.dim() == 0)])?;
    let src = if src.device().is_cpu() { super::to_device(op, src, Device::Cuda(ordinal))? } else { src.clone() };
    check_range(op, index, d, dst.shape()[d], false)?;
    launch_scatter(op, dst, d, (index, index.layout(), index.shape()), (&src, ls), accumulate, ordinal)
}

/// `dst[.., index[k], ..] = value` along dim `d` of the CUDA tensor `dst` (at least 1-dim) for
/// every entry of the int64 vector `index` (0- or 1-dim, on `dst`'s device; negative entries
/// count from the end), in place. Validates every entry first: nothing is written when one is
/// out of range. A plain scatter of one value: deterministic whatever the index holds.
#[track_caller]
pub(crate) fn fill_along(
    op: &'static str,
    dst: &Tensor,
    d: usize,
    index: &Tensor,
    value: crate::scalar::Scalar,
) -> Result<()> {
    let ordinal = device_of(op, &[dst, index])?;
    let size = dst.shape()[d];
    let mut shape = dst.shape().to_vec();
    shape[d] = index.numel();
    if kiln_runtime::layout::numel(&shape) == 0 {
        return Ok(()); // nothing visited, nothing checked (as on the CPU)
    }
    check_range(op, index, d, size, true)?;
    // In -size..size now: the divisor-signed remainder counts negative entries from the end.
    let wrapped = index.try_remainder(size as i64)?;
    let mut strides = vec![0; shape.len()];
    strides[d] = usize::from(wrapped.dim() == 1);
    let li = Layout::new(shape.as_slice().into(), strides.into(), 0);
    let fill = super::to_device(op, &Tensor::scalar_wrapping(value, dst.dtype()), Device::Cuda(ordinal))?;
    let ls = Layout::new(shape.as_slice().into(), vec![0; shape.len()].into(), 0);
    launch_scatter(op, dst, d, (&wrapped, &li, &shape), (&fill, &ls), false, ordinal)
}

/// Launches the scatter of `src` (through its layout `ls`) into `dst` along `d` at the
/// positions of `index` (with its iteration-shaped layout and the iteration shape), all on
/// `cuda:ordinal` and the index values already validated. Under the deterministic mode a
/// scatter_add, and a plain scatter whose source varies along `d` (so that repeated positions
/// may be written different values), run a line kernel: one thread per line of dim `d`,
/// walking it in order, as the CPU does. A plain scatter of one value along each line (a
/// scalar, `index_fill`) writes the same bits in any order and keeps the wider kernel.
#[track_caller]
fn launch_scatter(
    op: &'static str,
    dst: &Tensor,
    d: usize,
    (index, li, shape): (&Tensor, &Layout, &[usize]),
    (src, ls): (&Tensor, &Layout),
    accumulate: bool,
    ordinal: usize,
) -> Result<()> {
    let ordered = crate::are_deterministic_algorithms_enabled() && (accumulate || ls.strides()[d] != 0);
    let (space, line) = plan(dst.layout(), d, shape, li, ls, ordered);
    let kernel = loaded(op, IndexKind::scatter(accumulate, ordered), dst.dtype(), space.shape.len(), ordinal)?;
    let operands = [index.clone(), src.clone()];
    let (guards, at) = Tensor::read_storages(&operands);
    let (Storage::Cuda(si), Storage::Cuda(ss)) = (&*guards[at[0]], &*guards[at[1]]) else {
        unreachable!("devices were checked")
    };
    let mut w = dst.write_storage();
    let Storage::Cuda(sd) = &mut *w else { unreachable!("devices were checked") };
    let t = (sd.buffer_mut(), space.view(0, dst.layout().offset()));
    let (i, v) = ((si.buffer(), space.view(1, li.offset())), (ss.buffer(), space.view(2, ls.offset())));
    match line {
        Some(line) => kernel.scatter_lines(t, i, v, &space.shape, space.dim, line),
        None => kernel.scatter(t, i, v, &space.shape, space.dim),
    }
    .or_op(op)
}

/// The scatter kernels' threads run on the host over a launch plan, for unit tests of the
/// plans' index arithmetic against the CPU's ops.
#[cfg(test)]
pub(super) mod host {
    use super::{plan, Space};
    use kiln_codegen::cuda::ScatterLine;
    use kiln_runtime::Layout;

    /// The f32 line kernel's scatter (or scatter_add, `add`) of `v` into the storage `t` at
    /// the values of `idx` (storages of the views `li` and `ls`) along dim `d` of the target
    /// layout `x`, over `shape`: [`plan`]'s ordered space walked thread by thread as the
    /// generated kernel walks it. Asserts that no two threads write one target element, which
    /// makes the result independent of scheduling.
    pub(in crate::cuda) fn scatter(
        t: &mut [f32],
        idx: &[i64],
        v: &[f32],
        (x, d, shape): (&Layout, usize, &[usize]),
        li: &Layout,
        ls: &Layout,
        add: bool,
    ) {
        let (space, line) = plan(x, d, shape, li, ls, true);
        run(t, idx, v, &space, [x.offset(), li.offset(), ls.offset()], line.expect("an ordered plan has a line"), add);
    }

    /// `n` f32 values of mixed signs and magnitudes: the order of additions shows in the bits.
    pub(in crate::cuda) fn mixed(n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| {
                (if i % 3 == 0 { -1.0 } else { 1.0 }) * ((i * 7919) % 1000) as f32 / 7.0
                    * 10f32.powi((i % 5) as i32 - 2)
            })
            .collect()
    }

    /// Each thread `i` of `space`: its position decomposed innermost dim first (the kernels'
    /// `open_index_loop`), then its line in order.
    fn run(t: &mut [f32], idx: &[i64], v: &[f32], space: &Space, offsets: [usize; 3], line: ScatterLine, add: bool) {
        let mut owner: Vec<Option<usize>> = vec![None; t.len()];
        let ScatterLine { len, idx_stride: line_pi, src_stride: line_pv } = line;
        for i in 0..space.shape.iter().product::<usize>() {
            let (mut p, mut r) = (offsets, i);
            for m in (0..space.shape.len()).rev() {
                let c = if m == 0 { r } else { r % space.shape[m] };
                r /= space.shape[m].max(1);
                p.iter_mut().zip(&space.strides).for_each(|(p, s)| *p += c * s[m]);
            }
            for j in 0..len {
                let k = idx[p[1] + j * line_pi];
                if k < 0 || k as usize >= space.dim.size {
                    continue;
                }
                let at = p[0] + k as usize * space.dim.stride;
                let b = v[p[2] + j * line_pv];
                t[at] = if add { t[at] + b } else { b };
                let first = *owner[at].get_or_insert(i);
                assert_eq!(first, i, "element {at} written by two threads");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::host::{self, mixed};
    use crate::Tensor;
    use kiln_runtime::Layout;

    /// An int64 `[rows, cols]` tensor of values in `0..k` repeating irregularly.
    fn repeated(rows: usize, cols: usize, k: usize) -> Tensor {
        Tensor::from_vec((0..rows * cols).map(|i| ((i * 5 + i / 7) % k) as i64).collect(), [rows, cols])
    }

    /// The CPU's scatter (`add`: scatter_add) into the view `view(parent)` along `d` against
    /// the line plan run on the host over the same storages, bit for bit.
    fn same_as_cpu(
        parent: &Tensor,
        view: impl Fn(&Tensor) -> Tensor,
        d: usize,
        (idx_parent, idx): (&Tensor, &Tensor),
        (src_parent, src): (&Tensor, &Tensor),
        add: bool,
    ) {
        let out = parent.deep_clone();
        if add {
            view(&out).scatter_add_(d as i64, idx, src);
        } else {
            view(&out).scatter_(d as i64, idx, src);
        }
        let mut t = parent.to_vec::<f32>();
        let x = view(parent).layout().clone();
        let ls = Layout::new(idx.shape().into(), src.stride().into(), src.storage_offset());
        let (i, v) = (idx_parent.to_vec::<i64>(), src_parent.to_vec::<f32>());
        host::scatter(&mut t, &i, &v, (&x, d, idx.shape()), idx.layout(), &ls, add);
        let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
        assert_eq!(bits(t), bits(out.to_vec::<f32>()), "dim {d}, add {add}");
    }

    #[test]
    fn the_line_plans_apply_repeated_positions_in_the_cpus_order() {
        let parent = Tensor::from_vec(mixed(30), [6, 5]);
        let transposed = |p: &Tensor| p.t(); // [5, 6], strides [1, 5]
                                             // Along dim 0: a narrowed index [7, 6] (values in 0..5) and a transposed source.
        let (ip, sp) = (repeated(7, 10, 5), Tensor::from_vec(mixed(56), [8, 7]));
        let (idx, src) = (ip.narrow(1, 2, 6), sp.t());
        // Along the last dim: a transposed index [5, 9] (values in 0..6), a narrowed source.
        let (ip1, sp1) = (repeated(9, 5, 6), Tensor::from_vec(mixed(60), [5, 12]));
        let (idx1, src1) = (ip1.t(), sp1.narrow(1, 3, 9));
        for add in [false, true] {
            same_as_cpu(&parent, transposed, 0, (&ip, &idx), (&sp, &src), add);
            same_as_cpu(&parent, transposed, 1, (&ip1, &idx1), (&sp1, &src1), add);
            // A contiguous target: the index narrowed to its 5 columns.
            same_as_cpu(&parent, |p| p.clone(), 0, (&ip, &idx.narrow(1, 0, 5)), (&sp, &src), add);
        }
    }
}
