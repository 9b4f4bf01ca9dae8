//! Indexing by tensors: `index_select`, `gather`, the `scatter` family, `index_fill_`, advanced
//! indexing (`index`, `index_put_`), `masked_select`, `nonzero` and `one_hot`.
//!
//! Every index value is checked before anything is written (an out-of-range index is an error
//! naming the op, the value, the dim and its size). As in PyTorch, `gather`, `scatter*` and
//! `index_select` reject negative indices, while advanced indexing and `index_fill_` count them
//! from the end. Where several index positions hit one element, a plain write is deterministic:
//! the last position in row-major order wins (PyTorch leaves it unspecified).
//!
//! Autograd: the gradients are written with the ops of this family (a gather's gradient is a
//! `scatter_add` into zeros, a scatter's source gradient is a `gather`, advanced indexing's is an
//! accumulating `index_put`, …), so they are differentiable again. Inside a compiled step, a
//! gather of one element per row along the last dim is captured as a masked sum instead
//! ([`super::pick`]), so it fuses and its gradient is elementwise. As in PyTorch, the gradient
//! of a plain (non-accumulating) write with repeated positions reaches every repeated source
//! element, although only one of them was written.

use super::binary::{broadcast_all, check_writable};
use super::{data_dependent, kernel_op};
use crate::autograd::{self, grads, Saved};
use crate::error::{bail, AtCaller, Error, ErrorKind, OrPanic, Result};
use crate::scalar::Scalar;
use crate::tensor::{check_shape, scalar_as, IntoScalar, Tensor};
use kiln_runtime::cpu::index::{self as kernels, BadIndex, IndexArg, IndexMap};
use kiln_runtime::storage::StorageElement;
use kiln_runtime::{match_cpu, DType, Device, Element, Layout, Shape};
use smallvec::SmallVec;

/// The index list of advanced indexing (`x[i, :, j]`): one entry per leading dim, `None` for a
/// whole dim. Implemented for slices, arrays and `Vec`s of `&Tensor` or `Option<&Tensor>`, and
/// for a single `Tensor`.
pub trait TensorIndices {
    /// The entries, first dim first.
    fn entries(&self) -> Vec<Option<&Tensor>>;
}

impl TensorIndices for Tensor {
    fn entries(&self) -> Vec<Option<&Tensor>> {
        vec![Some(self)]
    }
}

impl TensorIndices for [&Tensor] {
    fn entries(&self) -> Vec<Option<&Tensor>> {
        self.iter().map(|t| Some(*t)).collect()
    }
}

impl TensorIndices for [Option<&Tensor>] {
    fn entries(&self) -> Vec<Option<&Tensor>> {
        self.to_vec()
    }
}

impl<const N: usize> TensorIndices for [&Tensor; N] {
    fn entries(&self) -> Vec<Option<&Tensor>> {
        self[..].entries()
    }
}

impl<const N: usize> TensorIndices for [Option<&Tensor>; N] {
    fn entries(&self) -> Vec<Option<&Tensor>> {
        self[..].entries()
    }
}

impl TensorIndices for Vec<&Tensor> {
    fn entries(&self) -> Vec<Option<&Tensor>> {
        self[..].entries()
    }
}

impl TensorIndices for Vec<Option<&Tensor>> {
    fn entries(&self) -> Vec<Option<&Tensor>> {
        self[..].entries()
    }
}

/// An error unless `index` holds int64 values.
#[track_caller]
fn check_index_dtype(op: &'static str, index: &Tensor) -> Result<()> {
    if index.dtype() != DType::I64 {
        bail!(op, DType, "expected dtype int64 for index, got {} (shape {:?})", index.dtype(), index.shape());
    }
    Ok(())
}

/// `index` as int64: int32 indices are widened (gather, scatter and index_select accept them,
/// as PyTorch's do); any other dtype is an error.
#[track_caller]
fn widened_index(op: &'static str, index: &Tensor) -> Result<Tensor> {
    match index.dtype() {
        DType::I64 => Ok(index.clone()),
        DType::I32 => index.try_to_dtype(DType::I64),
        other => bail!(op, DType, "expected dtype int64 or int32 for index, got {other} (shape {:?})", index.shape()),
    }
}

/// The kernel's verdict on the index values, as an error naming the op.
#[track_caller]
fn located<T>(op: &'static str, r: std::result::Result<T, BadIndex>) -> Result<T> {
    match r {
        Ok(v) => Ok(v),
        Err(b) => Err(out_of_bounds(op, b.value, b.dim, b.size)),
    }
}

/// The error of an index value outside its dim, on every device.
#[track_caller]
pub(crate) fn out_of_bounds(op: &'static str, value: i64, dim: usize, size: usize) -> Error {
    Error::new(op, ErrorKind::Index, format!("index {value} is out of bounds for dimension {dim} with size {size}"))
}

/// A 0-dim tensor seen as a 1-element vector (PyTorch's scalar rule for gather and scatter).
fn at_least_1d(t: &Tensor) -> Tensor {
    if t.dim() == 0 {
        t.with_layout(t.layout().unsqueeze(0))
    } else {
        t.clone()
    }
}

/// `shape` with dim `d` replaced by `len`.
fn with_len(shape: &[usize], d: usize, len: usize) -> Shape {
    let mut s = Shape::from_slice(shape);
    s[d] = len;
    s
}

/// Every dim but `d` walks itself: the iteration plan of ops along one dim.
fn walk_except(ndim: usize, d: usize) -> Vec<Option<usize>> {
    (0..ndim).map(|k| (k != d).then_some(k)).collect()
}

/// The layout of a vector index (0- or 1-dim) spread over `shape` along dim `d`.
fn vector_along(index: &Tensor, shape: &[usize], d: usize) -> Layout {
    let mut strides: SmallVec<[usize; 6]> = SmallVec::from_elem(0, shape.len());
    strides[d] = index.stride().first().copied().unwrap_or(0);
    Layout::new(Shape::from_slice(shape), strides, index.storage_offset())
}

/// An error unless `index` is a vector (0- or 1-dim) of int64.
#[track_caller]
fn check_vector_index(op: &'static str, index: &Tensor) -> Result<()> {
    check_index_dtype(op, index)?;
    if index.dim() > 1 {
        bail!(op, Shape, "index is supposed to be a vector, got shape {:?}", index.shape());
    }
    Ok(())
}

/// `src`, or a copy of it when it shares storage with `dst` (an in-place write must not read
/// what it overwrites).
fn unaliased(dst: &Tensor, src: &Tensor) -> Tensor {
    if src.shares_storage_with(dst) {
        src.deep_clone()
    } else {
        src.clone()
    }
}

/// What an indexed write stores: a tensor's values (through an iteration-shaped layout), or one
/// scalar everywhere.
enum Values {
    Tensor(Tensor, Layout),
    Scalar(Scalar),
}

/// Writes (or adds, when `accumulate`) `values` into `dst` at the elements `map` picks.
#[track_caller]
fn write_indexed(op: &'static str, dst: &Tensor, map: &IndexMap<'_>, values: Values, accumulate: bool) -> Result<()> {
    fn go<T: Element>(dst: &mut [T], map: &IndexMap<'_>, src: &[T], ls: &Layout, accumulate: bool) {
        if accumulate {
            kernels::scatter(dst, map, src, ls, kernels::add)
        } else {
            kernels::scatter(dst, map, src, ls, |_, v| v)
        }
    }
    match values {
        Values::Tensor(src, ls) => dst.with_cpu_write(op, &src, |d, s| {
            match_cpu!(d, |db: T| go(db, map, s.as_buf::<T>().expect("dtypes checked"), &ls, accumulate))
        }),
        Values::Scalar(v) => {
            let ls = Layout::contiguous(&[]).broadcast_to(map.shape()).expect("a scalar broadcasts to any shape");
            dst.with_cpu_mut(op, |d, _| match_cpu!(d, |db: T| go(db, map, &[scalar_as::<T>(v)], &ls, accumulate)))
        }
    }
}

/// What `scatter` writes: a source tensor or a scalar.
#[derive(Clone)]
enum Source {
    Tensor(Tensor),
    Scalar(Scalar),
}

/// A kernel writing into its first argument from the realized operands.
type WriteFn = Box<dyn FnOnce(&Tensor, &[Tensor]) -> Result<()> + Send>;

/// An indexed write checked and ready to run: the tensors it reads (the index first) and the
/// kernel of each device. [`IndexedWrite::into`] writes a tensor in place,
/// [`IndexedWrite::copy_of`] a copy; both dispatch in `super::dispatch`.
struct IndexedWrite {
    op: &'static str,
    operands: Vec<Tensor>,
    cpu: WriteFn,
    cuda: WriteFn,
}

impl IndexedWrite {
    /// Writes `dst` in place; an operand sharing its storage is read through a copy (a write
    /// must not read what it overwrites).
    #[track_caller]
    fn into(self, dst: &Tensor) -> Result<()> {
        check_writable(self.op, dst)?;
        let operands: Vec<Tensor> = self.operands.iter().map(|t| unaliased(dst, t)).collect();
        let operands: Vec<&Tensor> = operands.iter().collect();
        super::write_op(self.op, dst, &operands, self.cpu, self.cuda)
    }

    /// A copy of `x` written.
    #[track_caller]
    fn copy_of(self, x: &Tensor) -> Result<Tensor> {
        let operands: Vec<&Tensor> = self.operands.iter().collect();
        super::written_copy(self.op, x, &operands, self.cpu, self.cuda)
    }
}

/// `dst[.., index[i][j], ..] = src[i][j]` (or `+=`) along `dim`, checked against `dst` (the
/// tensor written, or the one a copy of is written).
#[track_caller]
fn scatter_write(
    op: &'static str,
    dst: &Tensor,
    dim: i64,
    index: &Tensor,
    src: Source,
    accumulate: bool,
) -> Result<IndexedWrite> {
    if let Source::Scalar(v) = &src {
        super::binary::check_scalar_fits(op, *v, dst.dtype())?;
    }
    let index = widened_index(op, index)?;
    dst.check_same_device(op, &index)?;
    let d = dst.normalize_dim(op, dim)?;
    let (x, idx) = (at_least_1d(dst), at_least_1d(&index));
    if idx.dim() != x.dim() {
        bail!(
            op,
            Shape,
            "index tensor must have the same number of dimensions as self tensor (index shape {:?}, self shape {:?})",
            index.shape(),
            dst.shape()
        );
    }
    if let Source::Tensor(s) = &src {
        if s.dtype() != dst.dtype() {
            bail!(op, DType, "expected self.dtype to be equal to src.dtype (got {} and {})", dst.dtype(), s.dtype());
        }
        if at_least_1d(s).dim() != x.dim() {
            bail!(
                op,
                Shape,
                "src tensor must have the same number of dimensions as self tensor (src shape {:?}, self shape {:?})",
                s.shape(),
                dst.shape()
            );
        }
    }
    for k in 0..x.dim() {
        let over_self = k != d && idx.shape()[k] > x.shape()[k];
        let over_src = matches!(&src, Source::Tensor(s) if idx.shape()[k] > at_least_1d(s).shape()[k]);
        if over_self || over_src {
            let src_note = match &src {
                Source::Tensor(s) => format!(" and no larger than src {:?}", s.shape()),
                Source::Scalar(_) => String::new(),
            };
            bail!(op, Shape, "expected index {:?} to be no larger than self {:?} apart from dimension {d}{src_note} (at dimension {k})", index.shape(), dst.shape());
        }
    }
    let scalar = match &src {
        Source::Tensor(_) => None,
        Source::Scalar(v) => Some(*v),
    };
    let cpu = move |dst: &Tensor, ins: &[Tensor]| {
        let (x, idx, values) = scatter_operands(dst, ins, scalar);
        // The scatter walks the index where it lies, its values checked in one read-only pass
        // first (nothing is written when one is out of range). Its lock is held meanwhile, so an
        // index sharing storage with the source is read through a copy.
        let idx =
            if matches!(&values, Values::Tensor(s, _) if s.shares_storage_with(&idx)) { idx.deep_clone() } else { idx };
        let walk = walk_except(x.dim(), d);
        let written = idx.with_cpu(op, |si, li| {
            let arg = IndexArg { data: si.as_buf::<i64>().expect("dtype checked"), layout: li.clone(), dim: d };
            let map = IndexMap::direct(x.layout(), idx.shape(), &walk, arg).validated();
            map.map(|map| write_indexed(op, dst, &map, values, accumulate))
        })?;
        located(op, written)?
    };
    let cuda = move |dst: &Tensor, ins: &[Tensor]| {
        let (x, idx, values) = scatter_operands(dst, ins, scalar);
        let (src, ls) = match values {
            Values::Tensor(s, ls) => (s, ls),
            Values::Scalar(v) => (
                Tensor::scalar_wrapping(v, dst.dtype()),
                Layout::new(Shape::from_slice(idx.shape()), SmallVec::from_elem(0, idx.dim()), 0),
            ),
        };
        crate::cuda::index::scatter(op, &x, d, &idx, &src, &ls, accumulate)
    };
    let mut operands = vec![index];
    if let Source::Tensor(s) = src {
        operands.push(s);
    }
    Ok(IndexedWrite { op, operands, cpu: Box::new(cpu), cuda: Box::new(cuda) })
}

/// A scatter's destination and index (at least 1-D) and what it writes, from the realized
/// operands: the index, then the source unless a `scalar` is written (the source read through
/// the index's shape, from its own strides).
fn scatter_operands(dst: &Tensor, ins: &[Tensor], scalar: Option<Scalar>) -> (Tensor, Tensor, Values) {
    let (x, idx) = (at_least_1d(dst), at_least_1d(&ins[0]));
    let values = match scalar {
        Some(v) => Values::Scalar(v),
        None => {
            let s = at_least_1d(&ins[1]);
            let ls = Layout::new(Shape::from_slice(idx.shape()), s.stride().into(), s.storage_offset());
            Values::Tensor(s, ls)
        }
    };
    (x, idx, values)
}

/// `g` padded with zeros at the end of each dim up to `shape`: the gradient of a source larger
/// than its index (only the index's extent was read). Built with `cat`, so it is differentiable.
fn pad_to(g: Tensor, shape: &[usize]) -> Tensor {
    let mut g = if g.dim() == 0 && shape.len() == 1 { g.reshape([1]) } else { g };
    if g.dim() != shape.len() {
        return g;
    }
    for (k, &want) in shape.iter().enumerate() {
        let have = g.shape()[k];
        if have < want {
            let zeros = Tensor::zeros_opts(with_len(g.shape(), k, want - have), g.dtype(), g.device());
            g = Tensor::cat(&[&g, &zeros], k as i64);
        }
    }
    g
}

/// A copy of `x` written by [`scatter_write`] (`op` names the public op in errors), recorded for
/// autograd: `ScatterBackward0/1` or `ScatterAddBackward0`.
#[track_caller]
fn scatter_out(
    op: &'static str,
    x: &Tensor,
    dim: i64,
    index: &Tensor,
    src: Source,
    accumulate: bool,
) -> Result<Tensor> {
    let index = &widened_index(op, index)?;
    let out = scatter_write(op, x, dim, index, src.clone(), accumulate)?.copy_of(x)?;
    let d = x.normalize_dim(op, dim)? as i64;
    match src {
        Source::Tensor(s) if autograd::is_recording(&[x, &s]) => {
            let name = if accumulate { "ScatterAddBackward0" } else { "ScatterBackward0" };
            let src_shape = s.shape().to_vec();
            Ok(autograd::record(out, name, &[x, &s], [Saved::of(index)], move |ctx, g, s| {
                let index = &s[0];
                grads![
                    ctx.needs_input_grad(0).then(|| if accumulate {
                        g.clone()
                    } else {
                        g.scatter_value(d, index, 0.0)
                    }),
                    ctx.needs_input_grad(1).then(|| pad_to(g.gather(d, index), &src_shape)),
                ]
            }))
        }
        Source::Scalar(_) if autograd::is_recording(&[x]) => {
            Ok(autograd::record(out, "ScatterBackward1", &[x], [Saved::of(index)], move |_, g, s| {
                grads![Some(g.scatter_value(d, &s[0], 0.0))]
            }))
        }
        _ => Ok(out),
    }
}

/// An in-place scatter: while autograd records, the recorded out-of-place form written back
/// into `dst` ([`autograd::inplace`]); otherwise a direct write.
#[track_caller]
fn scatter_in_place(
    op: &'static str,
    dst: &Tensor,
    dim: i64,
    index: &Tensor,
    src: Source,
    accumulate: bool,
) -> Result<()> {
    let recording = match &src {
        Source::Tensor(s) => autograd::is_recording(&[dst, s]),
        Source::Scalar(_) => autograd::is_recording(&[dst]),
    };
    if recording {
        // The closure cannot pass the caller's line on: its errors are located here.
        autograd::inplace(op, dst, |old| scatter_out(op, old, dim, index, src, accumulate)).at_caller()
    } else {
        scatter_write(op, dst, dim, index, src, accumulate)?.into(dst)
    }
}

/// Which entries of an advanced index are tensors, and those tensors saved for backward.
fn save_indices(indices: &[Option<&Tensor>]) -> (Vec<bool>, Vec<Saved>) {
    (indices.iter().map(Option::is_some).collect(), indices.iter().flatten().map(|t| Saved::of(t)).collect())
}

/// The advanced index [`save_indices`] saved, rebuilt from the unpacked tensors.
fn restore_indices<'a>(present: &[bool], saved: &'a [Tensor]) -> Vec<Option<&'a Tensor>> {
    let mut it = saved.iter();
    present.iter().map(|&p| if p { it.next() } else { None }).collect()
}

/// Advanced indexing `x[indices]` resolved: the result shape, which result dims walk which dims
/// of `x`, and each index tensor (int64, on `x`'s device) with its result-shaped layout over a
/// contiguous copy of it and the dim of `x` it indexes.
#[derive(Clone)]
struct Advanced {
    shape: Shape,
    walk: Vec<Option<usize>>,
    indices: Vec<(Tensor, Layout, usize)>,
}

impl Advanced {
    /// Validates the index values against the CPU tensor `x` (negative values count from the
    /// end) into the CPU kernels' map.
    #[track_caller]
    fn map(&self, op: &'static str, x: &Tensor) -> Result<IndexMap<'static>> {
        let values: Vec<Vec<i64>> = self.indices.iter().map(|(t, _, _)| t.to_vec::<i64>()).collect();
        let args: Vec<IndexArg<'_>> = self
            .indices
            .iter()
            .zip(&values)
            .map(|((_, layout, dim), data)| IndexArg { data, layout: layout.clone(), dim: *dim })
            .collect();
        located(op, IndexMap::new(x.layout(), &self.shape, &self.walk, &args, true))
    }

    /// The same index with `tensors` (realized ones, in order) in place of its index tensors.
    fn with_tensors(&self, tensors: &[Tensor]) -> Advanced {
        let indices = self.indices.iter().zip(tensors).map(|((_, l, d), t)| (t.clone(), l.clone(), *d)).collect();
        Advanced { shape: self.shape.clone(), walk: self.walk.clone(), indices }
    }

    /// The resolved index as the CUDA path takes it.
    fn resolved(&self) -> crate::cuda::advanced::Resolved<'_> {
        crate::cuda::advanced::Resolved { shape: &self.shape, walk: &self.walk, indices: &self.indices }
    }
}

/// Resolves PyTorch's advanced-indexing rules: bool masks stand for their `nonzero()` columns;
/// index tensors broadcast together to a shape `B`; the result is `x`'s shape with the indexed
/// dims replaced by `B`, in place when the indexed dims are adjacent, in front otherwise.
#[track_caller]
fn advanced(op: &'static str, x: &Tensor, entries: &[Option<&Tensor>]) -> Result<Advanced> {
    let ndim = x.dim();
    let mut picked: Vec<(usize, Tensor)> = Vec::new();
    let mut pos = 0;
    for t in entries {
        let Some(t) = t else {
            pos += 1;
            continue;
        };
        x.check_same_device(op, t)?;
        match t.dtype() {
            DType::I64 | DType::I32 => {
                picked.push((pos, t.to_dtype(DType::I64)));
                pos += 1;
            }
            DType::Bool => {
                let k = t.dim();
                if k == 0 {
                    bail!(op, Unsupported, "a 0-dim bool index is not supported");
                }
                if pos + k > ndim || t.shape() != &x.shape()[pos..pos + k] {
                    bail!(
                        op,
                        Shape,
                        "the shape of the mask {:?} at index {pos} does not match the shape of the indexed tensor {:?}",
                        t.shape(),
                        x.shape()
                    );
                }
                let nz = t.try_nonzero()?;
                picked.extend((0..k).map(|j| (pos + j, nz.select(1, j as i64))));
                pos += k;
            }
            other => bail!(op, DType, "tensors used as indices must be int64, int32 or bool tensors, got {other}"),
        }
    }
    if pos > ndim {
        bail!(op, Index, "too many indices for tensor of dimension {ndim} (got {pos})");
    }
    let shapes: Vec<&[usize]> = picked.iter().map(|(_, t)| t.shape()).collect();
    let b = broadcast_all(op, &shapes)?;
    let dims: Vec<usize> = picked.iter().map(|(d, _)| *d).collect();
    let adjacent = dims.windows(2).all(|w| w[1] == w[0] + 1);
    let (mut shape, mut walk) = (Shape::new(), Vec::new());
    let push_walk = |shape: &mut Shape, walk: &mut Vec<Option<usize>>, d: usize| {
        shape.push(x.shape()[d]);
        walk.push(Some(d));
    };
    let b_at;
    if adjacent {
        let first = dims.first().copied().unwrap_or(0);
        let after = dims.last().map_or(0, |l| l + 1);
        (0..first).for_each(|d| push_walk(&mut shape, &mut walk, d));
        b_at = shape.len();
        shape.extend_from_slice(&b);
        walk.extend(b.iter().map(|_| None));
        (after..ndim).for_each(|d| push_walk(&mut shape, &mut walk, d));
    } else {
        b_at = 0;
        shape.extend_from_slice(&b);
        walk.extend(b.iter().map(|_| None));
        (0..ndim).filter(|d| !dims.contains(d)).for_each(|d| push_walk(&mut shape, &mut walk, d));
    }
    // The index shape times the dims kept whole may be more than a tensor holds.
    check_shape(op, &shape)?;
    let indices = picked
        .iter()
        .map(|(d, t)| {
            let lb = Layout::contiguous(t.shape()).broadcast_to(&b).expect("shapes were broadcast");
            let mut strides: SmallVec<[usize; 6]> = SmallVec::from_elem(0, shape.len());
            strides[b_at..b_at + b.len()].copy_from_slice(lb.strides());
            (t.clone(), Layout::new(shape.clone(), strides, 0), *d)
        })
        .collect();
    Ok(Advanced { shape, walk, indices })
}

/// `dst[indices] = values` (or `+=`), `values` broadcast to the indexing result, checked
/// against `dst` (the tensor written, or the one a copy of is written).
#[track_caller]
fn index_put_write(
    op: &'static str,
    dst: &Tensor,
    indices: &[Option<&Tensor>],
    values: &Tensor,
    accumulate: bool,
) -> Result<IndexedWrite> {
    if values.dtype() != dst.dtype() {
        bail!(op, DType, "index put requires the source and destination dtypes match, got {} for the destination and {} for the source", dst.dtype(), values.dtype());
    }
    dst.check_same_device(op, values)?;
    let adv = advanced(op, dst, indices)?;
    if values.layout().broadcast_to(&adv.shape).is_none() {
        bail!(
            op,
            Shape,
            "shape mismatch: value tensor of shape {:?} cannot be broadcast to indexing result of shape {:?}",
            values.shape(),
            adv.shape
        );
    }
    let mut operands: Vec<Tensor> = adv.indices.iter().map(|(t, _, _)| t.clone()).collect();
    operands.push(values.clone());
    let for_cuda = adv.clone();
    // The realized operands: the index tensors, then the values.
    let cpu = move |dst: &Tensor, ins: &[Tensor]| {
        let (adv, src) = (adv.with_tensors(&ins[..ins.len() - 1]), &ins[ins.len() - 1]);
        let map = adv.map(op, dst)?;
        let ls = src.layout().broadcast_to(&adv.shape).expect("shape checked");
        write_indexed(op, dst, &map, Values::Tensor(src.clone(), ls), accumulate)
    };
    let cuda = move |dst: &Tensor, ins: &[Tensor]| {
        let (adv, src) = (for_cuda.with_tensors(&ins[..ins.len() - 1]), &ins[ins.len() - 1]);
        crate::cuda::advanced::put(op, dst, &adv.resolved(), src, accumulate)
    };
    Ok(IndexedWrite { op, operands, cpu: Box::new(cpu), cuda: Box::new(cuda) })
}

/// `dst[.., index[k], ..] = value` along `dim` for every `k`, checked against `dst` (the tensor
/// written, or the one a copy of is written).
#[track_caller]
fn index_fill_write(op: &'static str, dst: &Tensor, dim: i64, index: &Tensor, value: Scalar) -> Result<IndexedWrite> {
    super::binary::check_scalar_fits(op, value, dst.dtype())?;
    check_vector_index(op, index)?;
    dst.check_same_device(op, index)?;
    let d = dst.normalize_dim(op, dim)?;
    let cpu = move |dst: &Tensor, ins: &[Tensor]| {
        let (x, index) = (at_least_1d(dst), &ins[0]);
        let shape = with_len(x.shape(), d, index.numel());
        let map = index.with_cpu(op, |si, _| {
            let arg = IndexArg {
                data: si.as_buf::<i64>().expect("dtype checked"),
                layout: vector_along(index, &shape, d),
                dim: d,
            };
            IndexMap::new(x.layout(), &shape, &walk_except(x.dim(), d), &[arg], true)
        })?;
        write_indexed(op, dst, &located(op, map)?, Values::Scalar(value), false)
    };
    let cuda =
        move |dst: &Tensor, ins: &[Tensor]| crate::cuda::index::fill_along(op, &at_least_1d(dst), d, &ins[0], value);
    Ok(IndexedWrite { op, operands: vec![index.clone()], cpu: Box::new(cpu), cuda: Box::new(cuda) })
}

/// A copy of `x` written by [`index_put_write`], recorded for autograd (`IndexPutBackward0`).
#[track_caller]
fn index_put_out(
    op: &'static str,
    x: &Tensor,
    indices: &[Option<&Tensor>],
    values: &Tensor,
    accumulate: bool,
) -> Result<Tensor> {
    let out = index_put_write(op, x, indices, values, accumulate)?.copy_of(x)?;
    if !autograd::is_recording(&[x, values]) {
        return Ok(out);
    }
    let (present, saved) = save_indices(indices);
    Ok(autograd::record(out, "IndexPutBackward0", &[x, values], saved, move |ctx, g, s| {
        let indices = restore_indices(&present, s);
        let masked = || {
            let zero = Tensor::zeros_opts((), g.dtype(), g.device());
            g.index_put(&indices, &zero, false)
        };
        grads![
            ctx.needs_input_grad(0).then(|| if accumulate { g.clone() } else { masked() }),
            ctx.needs_input_grad(1).then(|| g.index(&indices)),
        ]
    }))
}

/// A copy of `x` written by [`index_fill_write`], recorded for autograd (`IndexFillBackward0`).
#[track_caller]
fn index_fill_out(op: &'static str, x: &Tensor, dim: i64, index: &Tensor, value: Scalar) -> Result<Tensor> {
    let out = index_fill_write(op, x, dim, index, value)?.copy_of(x)?;
    if !autograd::is_recording(&[x]) {
        return Ok(out);
    }
    let d = x.normalize_dim(op, dim)? as i64;
    Ok(autograd::record(out, "IndexFillBackward0", &[x], [Saved::of(index)], move |_, g, s| {
        grads![Some(g.index_fill(d, &s[0], 0.0))]
    }))
}

/// Zeros of `shape`, `dtype` and `device`: the base the scatter-like gradients are written into.
fn zeros(shape: &[usize], dtype: DType, device: Device) -> Tensor {
    Tensor::zeros_opts(shape, dtype, device)
}

impl Tensor {
    /// The entries of `index` (a vector of int64) along `dim` (`x.index_select(dim, index)`):
    /// the result has this tensor's shape with `dim` of size `index.numel()`.
    #[track_caller]
    pub fn index_select(&self, dim: i64, index: &Tensor) -> Tensor {
        self.try_index_select(dim, index).or_panic()
    }

    /// [`Tensor::index_select`] returning an error for a bad dim, index dtype or index value.
    #[track_caller]
    pub fn try_index_select(&self, dim: i64, index: &Tensor) -> Result<Tensor> {
        const OP: &str = "index_select";
        let index = &widened_index(OP, index)?;
        check_vector_index(OP, index)?;
        let d = self.normalize_dim(OP, dim)?;
        if self.dim() == 0 && index.numel() != 1 {
            bail!(OP, Index, "index to a 0-dim tensor can have only 1 value, got {}", index.numel());
        }
        let shape = with_len(at_least_1d(self).shape(), d, index.numel());
        check_shape(OP, &shape)?;
        let out_shape: Shape = if self.dim() == 0 { Shape::new() } else { shape.clone() };
        let (cuda_shape, cuda_out) = (shape.clone(), out_shape.clone());
        let cuda = move |ins: &[Tensor]| {
            let (x, index) = (at_least_1d(&ins[0]), at_least_1d(&ins[1]));
            let along = vector_along(&index, &cuda_shape, d);
            crate::cuda::index::gather(OP, &x, d, &index, &along, &cuda_shape, &cuda_out)
        };
        let result_shape = out_shape.clone();
        let cpu = move |ins: &[Tensor]| {
            let (x, index) = (at_least_1d(&ins[0]), &ins[1]);
            let out = ins[0].with_cpu2(index, OP, |sx, si| {
                let arg = IndexArg {
                    data: si.as_buf::<i64>().expect("dtype checked"),
                    layout: vector_along(index, &shape, d),
                    dim: d,
                };
                let map = IndexMap::direct(x.layout(), &shape, &walk_except(x.dim(), d), arg);
                match_cpu!(sx, |b: T| kernels::gather(b, &map).map(T::wrap))
            })?;
            Ok(Tensor::from_cpu_storage(located(OP, out)?, &out_shape))
        };
        let out = kernel_op(OP, &[self, index], (&result_shape, self.dtype()), cpu, cuda)?;
        if !autograd::is_recording(&[self]) {
            return Ok(out);
        }
        // The gradient adds each entry of `g` back at the position it was read from (repeated
        // indices accumulate): a scatter_add along `d` of the index spread over `g`'s shape
        // (a view), which every device runs.
        let (xshape, dtype, device) = (self.shape().to_vec(), self.dtype(), self.device());
        Ok(autograd::record(out, "IndexSelectBackward0", &[self], [Saved::of(index)], move |_, g, s| {
            if xshape.is_empty() {
                return grads![Some(g.clone())];
            }
            let mut along = vec![1i64; xshape.len()];
            along[d] = -1;
            let gshape: Vec<i64> = g.shape().iter().map(|&n| n as i64).collect();
            let index = s[0].reshape(&along).expand(&gshape);
            grads![Some(zeros(&xshape, dtype, device).scatter_add(d as i64, &index, g))]
        }))
    }

    /// `out[i][j] = self[index[i][j]][j]` along `dim` (`torch.gather`): the result has the
    /// index's shape; the index has this tensor's number of dims and is no larger in the others.
    #[track_caller]
    pub fn gather(&self, dim: i64, index: &Tensor) -> Tensor {
        self.try_gather(dim, index).or_panic()
    }

    /// [`Tensor::gather`] returning an error for a bad dim, index shape, dtype or value.
    #[track_caller]
    pub fn try_gather(&self, dim: i64, index: &Tensor) -> Result<Tensor> {
        const OP: &str = "gather";
        let index = &widened_index(OP, index)?;
        let d = self.normalize_dim(OP, dim)?;
        let (x, idx) = (at_least_1d(self), at_least_1d(index));
        if idx.dim() != x.dim() {
            bail!(OP, Shape, "index tensor must have the same number of dimensions as input tensor (index shape {:?}, input shape {:?})", index.shape(), self.shape());
        }
        if let Some(k) = (0..x.dim()).find(|&k| k != d && idx.shape()[k] > x.shape()[k]) {
            bail!(OP, Shape, "size does not match at dimension {k}: expected index {:?} to be no larger than self {:?} apart from dimension {d}", index.shape(), self.shape());
        }
        drop((x, idx));
        if let Some(picked) = super::pick::captured_pick(OP, self, d, index) {
            return picked;
        }
        let cuda = move |ins: &[Tensor]| {
            let (x, idx) = (at_least_1d(&ins[0]), at_least_1d(&ins[1]));
            crate::cuda::index::gather(OP, &x, d, &idx, idx.layout(), idx.shape(), ins[1].shape())
        };
        let cpu = move |ins: &[Tensor]| {
            let (x, idx) = (at_least_1d(&ins[0]), at_least_1d(&ins[1]));
            let out = ins[0].with_cpu2(&ins[1], OP, |sx, si| {
                let arg =
                    IndexArg { data: si.as_buf::<i64>().expect("dtype checked"), layout: idx.layout().clone(), dim: d };
                let map = IndexMap::direct(x.layout(), idx.shape(), &walk_except(x.dim(), d), arg);
                match_cpu!(sx, |b: T| kernels::gather(b, &map).map(T::wrap))
            })?;
            Ok(Tensor::from_cpu_storage(located(OP, out)?, ins[1].shape()))
        };
        let out = kernel_op(OP, &[self, index], (index.shape(), self.dtype()), cpu, cuda)?;
        if !autograd::is_recording(&[self]) {
            return Ok(out);
        }
        let (xshape, dtype, device) = (self.shape().to_vec(), self.dtype(), self.device());
        Ok(autograd::record(out, "GatherBackward0", &[self], [Saved::of(index)], move |_, g, s| {
            grads![Some(zeros(&xshape, dtype, device).scatter_add(d as i64, &s[0], g))]
        }))
    }

    /// In place, `self[index[i][j]][j] = src[i][j]` along `dim` (`x.scatter_(dim, index, src)`).
    /// Where indices repeat, the last position in row-major order wins (deterministic).
    #[track_caller]
    pub fn scatter_(&self, dim: i64, index: &Tensor, src: &Tensor) -> &Tensor {
        self.try_scatter_(dim, index, src).or_panic()
    }

    /// [`Tensor::scatter_`] returning an error (nothing is written when it fails).
    #[track_caller]
    pub fn try_scatter_(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<&Tensor> {
        scatter_in_place("scatter_", self, dim, index, Source::Tensor(src.clone()), false)?;
        Ok(self)
    }

    /// In place, `self[index[i][j]][j] = value` along `dim` (`x.scatter_(dim, index, value)`).
    #[track_caller]
    pub fn scatter_value_(&self, dim: i64, index: &Tensor, value: impl IntoScalar) -> &Tensor {
        self.try_scatter_value_(dim, index, value).or_panic()
    }

    /// [`Tensor::scatter_value_`] returning an error (nothing is written when it fails).
    #[track_caller]
    pub fn try_scatter_value_(&self, dim: i64, index: &Tensor, value: impl IntoScalar) -> Result<&Tensor> {
        scatter_in_place("scatter_", self, dim, index, Source::Scalar(value.into()), false)?;
        Ok(self)
    }

    /// In place, `self[index[i][j]][j] += src[i][j]` along `dim`, accumulating repeated indices
    /// (`x.scatter_add_(dim, index, src)`); the order of additions is fixed, so float results are
    /// reproducible.
    #[track_caller]
    pub fn scatter_add_(&self, dim: i64, index: &Tensor, src: &Tensor) -> &Tensor {
        self.try_scatter_add_(dim, index, src).or_panic()
    }

    /// [`Tensor::scatter_add_`] returning an error (nothing is written when it fails).
    #[track_caller]
    pub fn try_scatter_add_(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<&Tensor> {
        scatter_in_place("scatter_add_", self, dim, index, Source::Tensor(src.clone()), true)?;
        Ok(self)
    }

    /// Out-of-place [`Tensor::scatter_`] (`torch.scatter(x, dim, index, src)`).
    #[track_caller]
    pub fn scatter(&self, dim: i64, index: &Tensor, src: &Tensor) -> Tensor {
        self.try_scatter(dim, index, src).or_panic()
    }

    /// [`Tensor::scatter`] returning an error.
    #[track_caller]
    pub fn try_scatter(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        scatter_out("scatter", self, dim, index, Source::Tensor(src.clone()), false)
    }

    /// Out-of-place [`Tensor::scatter_value_`] (`torch.scatter(x, dim, index, value)`).
    #[track_caller]
    pub fn scatter_value(&self, dim: i64, index: &Tensor, value: impl IntoScalar) -> Tensor {
        self.try_scatter_value(dim, index, value).or_panic()
    }

    /// [`Tensor::scatter_value`] returning an error.
    #[track_caller]
    pub fn try_scatter_value(&self, dim: i64, index: &Tensor, value: impl IntoScalar) -> Result<Tensor> {
        scatter_out("scatter", self, dim, index, Source::Scalar(value.into()), false)
    }

    /// Out-of-place [`Tensor::scatter_add_`] (`torch.scatter_add`).
    #[track_caller]
    pub fn scatter_add(&self, dim: i64, index: &Tensor, src: &Tensor) -> Tensor {
        self.try_scatter_add(dim, index, src).or_panic()
    }

    /// [`Tensor::scatter_add`] returning an error.
    #[track_caller]
    pub fn try_scatter_add(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        scatter_out("scatter_add", self, dim, index, Source::Tensor(src.clone()), true)
    }

    /// In place, `self[.., index[k], ..] = value` along `dim` for every entry of `index` (a
    /// vector of int64; negative entries count from the end) (`x.index_fill_(dim, index, v)`).
    #[track_caller]
    pub fn index_fill_(&self, dim: i64, index: &Tensor, value: impl IntoScalar) -> &Tensor {
        self.try_index_fill_(dim, index, value).or_panic()
    }

    /// [`Tensor::index_fill_`] returning an error (nothing is written when it fails).
    #[track_caller]
    pub fn try_index_fill_(&self, dim: i64, index: &Tensor, value: impl IntoScalar) -> Result<&Tensor> {
        let value = value.into();
        if autograd::is_recording(&[self]) {
            autograd::inplace("index_fill_", self, |old| index_fill_out("index_fill_", old, dim, index, value))
                .at_caller()?;
        } else {
            index_fill_write("index_fill_", self, dim, index, value)?.into(self)?;
        }
        Ok(self)
    }

    /// Out-of-place [`Tensor::index_fill_`].
    #[track_caller]
    pub fn index_fill(&self, dim: i64, index: &Tensor, value: impl IntoScalar) -> Tensor {
        self.try_index_fill(dim, index, value).or_panic()
    }

    /// [`Tensor::index_fill`] returning an error.
    #[track_caller]
    pub fn try_index_fill(&self, dim: i64, index: &Tensor, value: impl IntoScalar) -> Result<Tensor> {
        index_fill_out("index_fill", self, dim, index, value.into())
    }

    /// Advanced indexing, Python's `x[i, :, j]` with index tensors: `x.index(&[Some(&i), None,
    /// Some(&j)])`, or `x.index(&[&i, &j])`, or `x.index(&i)`. Int64 (or int32) indices
    /// broadcast together and may be negative; a bool mask stands for the positions where it is
    /// true. Always a copy.
    #[track_caller]
    pub fn index(&self, indices: &(impl TensorIndices + ?Sized)) -> Tensor {
        self.try_index(indices).or_panic()
    }

    /// [`Tensor::index`] returning an error for bad indices.
    #[track_caller]
    pub fn try_index(&self, indices: &(impl TensorIndices + ?Sized)) -> Result<Tensor> {
        const OP: &str = "index";
        let adv = advanced(OP, self, &indices.entries())?;
        let index_tensors: Vec<Tensor> = adv.indices.iter().map(|(t, _, _)| t.clone()).collect();
        let operands: Vec<&Tensor> = std::iter::once(self).chain(&index_tensors).collect();
        let (shape, for_cuda) = (adv.shape.clone(), adv.clone());
        // The realized operands: this tensor, then the index tensors.
        let cpu = move |ins: &[Tensor]| {
            let adv = adv.with_tensors(&ins[1..]);
            let map = adv.map(OP, &ins[0])?;
            let out = ins[0].with_cpu(OP, |s, _| match_cpu!(s, |b: T| kernels::gather(b, &map).map(T::wrap)))?;
            Ok(Tensor::from_cpu_storage(located(OP, out)?, &adv.shape))
        };
        let cuda = move |ins: &[Tensor]| {
            crate::cuda::advanced::index(OP, &ins[0], &for_cuda.with_tensors(&ins[1..]).resolved())
        };
        let out = kernel_op(OP, &operands, (&shape, self.dtype()), cpu, cuda)?;
        if !autograd::is_recording(&[self]) {
            return Ok(out);
        }
        // Every element read goes back where it came from, repeated positions adding up.
        let (present, saved) = save_indices(&indices.entries());
        let (xshape, dtype, device) = (self.shape().to_vec(), self.dtype(), self.device());
        Ok(autograd::record(out, "IndexBackward0", &[self], saved, move |_, g, s| {
            grads![Some(zeros(&xshape, dtype, device).index_put(&restore_indices(&present, s), g, true))]
        }))
    }

    /// Advanced-indexing assignment in place, Python's `x[i, j] = values`
    /// (`x.index_put_((i, j), values, accumulate)`): `values` (of this tensor's dtype) broadcast
    /// to the shape `x.index(indices)` would have. With `accumulate`, repeated positions add up;
    /// without it, the last one in row-major order wins.
    #[track_caller]
    pub fn index_put_(&self, indices: &(impl TensorIndices + ?Sized), values: &Tensor, accumulate: bool) -> &Tensor {
        self.try_index_put_(indices, values, accumulate).or_panic()
    }

    /// [`Tensor::index_put_`] returning an error (nothing is written when it fails).
    #[track_caller]
    pub fn try_index_put_(
        &self,
        indices: &(impl TensorIndices + ?Sized),
        values: &Tensor,
        accumulate: bool,
    ) -> Result<&Tensor> {
        let indices = indices.entries();
        if autograd::is_recording(&[self, values]) {
            autograd::inplace("index_put_", self, |old| index_put_out("index_put_", old, &indices, values, accumulate))
                .at_caller()?;
        } else {
            index_put_write("index_put_", self, &indices, values, accumulate)?.into(self)?;
        }
        Ok(self)
    }

    /// Out-of-place [`Tensor::index_put_`].
    #[track_caller]
    pub fn index_put(&self, indices: &(impl TensorIndices + ?Sized), values: &Tensor, accumulate: bool) -> Tensor {
        self.try_index_put(indices, values, accumulate).or_panic()
    }

    /// [`Tensor::index_put`] returning an error.
    #[track_caller]
    pub fn try_index_put(
        &self,
        indices: &(impl TensorIndices + ?Sized),
        values: &Tensor,
        accumulate: bool,
    ) -> Result<Tensor> {
        index_put_out("index_put", self, &indices.entries(), values, accumulate)
    }

    /// The elements where `mask` (bool, broadcast with this tensor) is true, as a 1-D tensor in
    /// row-major order (`x.masked_select(mask)`).
    #[track_caller]
    pub fn masked_select(&self, mask: &Tensor) -> Tensor {
        self.try_masked_select(mask).or_panic()
    }

    /// [`Tensor::masked_select`] returning an error for a non-bool mask or shapes that cannot
    /// broadcast.
    #[track_caller]
    pub fn try_masked_select(&self, mask: &Tensor) -> Result<Tensor> {
        const OP: &str = "masked_select";
        if mask.dtype() != DType::Bool {
            bail!(OP, DType, "expected a bool mask, got {} (shape {:?})", mask.dtype(), mask.shape());
        }
        let shape = broadcast_all(OP, &[self.shape(), mask.shape()])?;
        let cpu = |ins: &[Tensor]| {
            let ls = ins[0].layout().broadcast_to(&shape).expect("shape was broadcast");
            let lm = ins[1].layout().broadcast_to(&shape).expect("shape was broadcast");
            let out = ins[0].with_cpu2(&ins[1], OP, |sx, sm| {
                let m = sm.as_buf::<bool>().expect("dtype checked");
                match_cpu!(sx, |b: T| T::wrap(kernels::masked_select(b, &ls, m, &lm)))
            })?;
            let n = out.len();
            Ok(Tensor::from_cpu_storage(out, &[n]))
        };
        let cuda = |ins: &[Tensor]| {
            ins[0].check_same_device(OP, &ins[1])?;
            crate::cuda::select::masked_select(OP, &ins[0], &ins[1], &shape)
        };
        let out = data_dependent(OP, &[self, mask], cpu, cuda)?;
        if !autograd::is_recording(&[self]) {
            return Ok(out);
        }
        // The gradient goes back to the selected positions of the broadcast shape (at least 1-D:
        // a bool index has a dim); the engine sums it down to this tensor's shape.
        let (dtype, device) = (self.dtype(), self.device());
        let full: Vec<usize> = if shape.is_empty() { vec![1] } else { shape.to_vec() };
        Ok(autograd::record(out, "MaskedSelectBackward0", &[self], [Saved::of(mask)], move |_, g, s| {
            let mask = s[0].broadcast_to(&full);
            grads![Some(zeros(&full, dtype, device).index_put(&[&mask], g, true))]
        }))
    }

    /// The coordinates of the nonzero elements (NaN counts as nonzero), as an int64 tensor of
    /// shape `[count, ndim]` in row-major order (`x.nonzero()`).
    #[track_caller]
    pub fn nonzero(&self) -> Tensor {
        self.try_nonzero().or_panic()
    }

    /// [`Tensor::nonzero`] returning an error for an unsupported device.
    #[track_caller]
    pub fn try_nonzero(&self) -> Result<Tensor> {
        let cpu = |ins: &[Tensor]| {
            let (buf, n) = ins[0].with_cpu("nonzero", |s, l| match_cpu!(s, |b: T| kernels::nonzero(b, l)))?;
            Ok(Tensor::from_buf(buf, &[n, ins[0].dim()]))
        };
        data_dependent("nonzero", &[self], cpu, |ins| crate::cuda::select::nonzero("nonzero", &ins[0]))
    }

    /// One-hot encoding of an int64 tensor (`F.one_hot(x, num_classes)`): shape `[.., C]`, int64,
    /// with a 1 at each value's class. `num_classes = -1` uses the largest value + 1.
    #[track_caller]
    pub fn one_hot(&self, num_classes: i64) -> Tensor {
        self.try_one_hot(num_classes).or_panic()
    }

    /// [`Tensor::one_hot`] returning an error for a non-int64 input or values outside
    /// `0..num_classes`.
    #[track_caller]
    pub fn try_one_hot(&self, num_classes: i64) -> Result<Tensor> {
        const OP: &str = "one_hot";
        if self.dtype() != DType::I64 {
            bail!(OP, DType, "one_hot is only applicable to index tensors of dtype int64, got {}", self.dtype());
        }
        if num_classes < -1 {
            bail!(OP, Value, "num_classes must be -1 or non-negative, got {num_classes}");
        }
        let range = data_dependent(
            OP,
            &[self],
            |ins| ins[0].with_cpu(OP, |s, l| kernels::min_max(s.as_buf::<i64>().expect("dtype checked"), l)),
            |ins| crate::cuda::index::min_max(&ins[0]),
        )?;
        if let Some((lo, _)) = range.filter(|&(lo, _)| lo < 0) {
            bail!(OP, Value, "class values must be non-negative, got {lo}");
        }
        let classes = match (num_classes, range) {
            (n, None) if n <= 0 => bail!(OP, Value, "can not infer the total number of classes from an empty tensor"),
            // Saturates for i64::MAX, a class count that the shape check refuses.
            (-1, Some((_, hi))) => hi.saturating_add(1),
            (n, _) => n,
        };
        let mut shape = Shape::from_slice(self.shape());
        shape.push(classes as usize);
        check_shape(OP, &shape)?;
        if let Some((_, hi)) = range.filter(|&(_, hi)| hi >= classes) {
            bail!(OP, Value, "class values must be smaller than num_classes, got {hi} (num_classes = {classes})");
        }
        let classes = classes as usize;
        let (cpu_shape, cuda_shape) = (shape.clone(), shape.clone());
        let cpu = move |ins: &[Tensor]| {
            let buf =
                ins[0].with_cpu(OP, |s, l| kernels::one_hot(s.as_buf::<i64>().expect("dtype checked"), l, classes))?;
            Ok(Tensor::from_buf(buf, &cpu_shape))
        };
        let cuda = move |ins: &[Tensor]| {
            // A 1 scattered along the new last dim of zeros (the values are checked already).
            let out = Tensor::try_zeros_opts(&cuda_shape, DType::I64, ins[0].device())?;
            out.try_scatter_value_(-1, &ins[0].unsqueeze(-1), 1i64)?;
            Ok(out)
        };
        kernel_op(OP, &[self], (&shape, DType::I64), cpu, cuda)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(r: Result<impl Sized>) -> String {
        r.err().expect("expected an error").to_string()
    }

    #[test]
    fn advanced_result_shapes_follow_pytorch() {
        let y = Tensor::arange(24).view([2, 3, 4]);
        let i = Tensor::new(&[0i64, 1]);
        let j = Tensor::new(&[[1i64], [3]]);
        // adjacent indexed dims stay in place; separated ones move to the front
        assert_eq!(y.index(&[None, Some(&i), Some(&j)]).shape(), &[2, 2, 2]);
        assert_eq!(y.index(&[Some(&i), None, Some(&j)]).shape(), &[2, 2, 3]);
        assert_eq!(y.index(&[&i]).shape(), &[2, 3, 4]);
        assert_eq!(y.index(&i).shape(), &[2, 3, 4]);
        // a 0-dim index removes its dim, like select
        assert_eq!(y.index(&[None, Some(&Tensor::scalar(2i64))]).shape(), &[2, 4]);
        // no index tensor at all: the whole tensor
        assert_eq!(y.index(&[None::<&Tensor>; 2]).to_vec::<i64>(), y.to_vec::<i64>());
        // a bool mask covers as many dims as it has
        let m = Tensor::new(&[[true, false, true], [false, false, true]]);
        assert_eq!(y.index(&m).shape(), &[3, 4]);
    }

    #[test]
    fn index_rules_and_messages() {
        let x = Tensor::zeros([2, 3]);
        let i = Tensor::new(&[0i64, 2]);
        let e = err(x.try_index(&[&i, &i, &i]));
        assert!(e.starts_with("index: too many indices for tensor of dimension 2 (got 3)"), "{e}");
        let e = err(x.try_index(&[&i, &Tensor::new(&[0i64, 1, 2])]));
        assert!(e.starts_with("index: shapes [2] and [3] cannot broadcast"), "{e}");
        let e = err(x.try_index(&[&i]));
        assert!(e.starts_with("index: index 2 is out of bounds for dimension 0 with size 2"), "{e}");
        let e = err(x.try_index(&[&Tensor::new(&[0.5f32])]));
        assert!(
            e.starts_with("index: tensors used as indices must be int64, int32 or bool tensors, got float32"),
            "{e}"
        );
        let e = err(x.try_index(&[&Tensor::new(&[true, false, true])]));
        assert!(
            e.starts_with(
                "index: the shape of the mask [3] at index 0 does not match the shape of the indexed tensor [2, 3]"
            ),
            "{e}"
        );
        let e = err(x.try_index_put_(&[&i], &Tensor::zeros([3]), false));
        assert!(e.starts_with("index_put_: index 2 is out of bounds"), "{e}");
        let e = err(x.try_index_put_(&[None, Some(&i)], &Tensor::zeros([3]), false));
        assert!(e.contains("value tensor of shape [3] cannot be broadcast to indexing result of shape [2, 2]"), "{e}");
        let e = err(x.try_index_put_(&[None, Some(&i)], &Tensor::zeros([1]).to_dtype(DType::F64), false));
        assert!(e.contains("got float32 for the destination and float64 for the source"), "{e}");
    }

    #[test]
    fn scatter_rules_and_messages() {
        let x = Tensor::zeros([2, 3]);
        let e = err(x.try_scatter_(1, &Tensor::new(&[[0i64, 3]]), &Tensor::ones([1, 2])));
        assert!(e.starts_with("scatter_: index 3 is out of bounds for dimension 1 with size 3"), "{e}");
        assert_eq!(x.to_vec::<f32>(), vec![0.0; 6], "the valid index 0 was not written either");
        // An index that is also the destination and the source: read as it was before.
        let i = Tensor::new(&[0i64, 1, 1]);
        i.scatter_add_(0, &i, &i);
        assert_eq!(i.to_vec::<i64>(), vec![0, 3, 1]);
        let e = err(x.try_scatter_(1, &Tensor::new(&[[-1i64]]), &Tensor::ones([1, 1])));
        assert!(e.starts_with("scatter_: index -1 is out of bounds for dimension 1 with size 3"), "{e}");
        let e = err(x.try_scatter_(1, &Tensor::new(&[0i64]), &Tensor::ones([1])));
        assert!(e.starts_with("scatter_: index tensor must have the same number of dimensions as self tensor (index shape [1], self shape [2, 3])"), "{e}");
        let e = err(x.try_scatter_(1, &Tensor::new(&[[0i64, 1]]), &Tensor::ones([1, 1])));
        assert!(e.contains("expected index [1, 2] to be no larger than self [2, 3] apart from dimension 1 and no larger than src [1, 1]"), "{e}");
        let e = err(x.try_scatter_(1, &Tensor::new(&[[0i64]; 3]), &Tensor::ones([3, 1])));
        assert!(e.contains("expected index [3, 1] to be no larger than self [2, 3] apart from dimension 1"), "{e}");
        // along `dim` itself the index may be longer than self
        x.scatter_(0, &Tensor::new(&[[1i64]; 3]), &Tensor::ones([3, 1]));
        let e = err(x.try_scatter_(1, &Tensor::new(&[[0u8]]), &Tensor::ones([1, 1])));
        assert!(e.starts_with("scatter_: expected dtype int64 or int32 for index, got uint8"), "{e}");
        let e = err(x.try_scatter_add_(1, &Tensor::new(&[[0i64]]), &Tensor::ones([1, 1]).to_dtype(DType::F64)));
        assert!(
            e.starts_with("scatter_add_: expected self.dtype to be equal to src.dtype (got float32 and float64)"),
            "{e}"
        );
        let e = err(Tensor::zeros([3]).expand([2, 3]).try_scatter_value_(1, &Tensor::new(&[[0i64]]), 1.0));
        assert!(e.contains("more than one element of the written-to tensor"), "{e}");
        let e = err(x.try_scatter(2, &Tensor::new(&[[0i64]]), &Tensor::ones([1, 1])));
        assert!(
            e.starts_with("scatter: dimension out of range (expected to be in range of [-2, 1], but got 2)"),
            "{e}"
        );
    }

    #[test]
    fn vector_ops_rules_and_messages() {
        let x = Tensor::zeros([2, 3]);
        let e = err(x.try_index_select(1, &Tensor::new(&[[0i64]])));
        assert!(e.starts_with("index_select: index is supposed to be a vector, got shape [1, 1]"), "{e}");
        let e = err(x.try_index_select(1, &Tensor::new(&[-1i64])));
        assert!(e.starts_with("index_select: index -1 is out of bounds for dimension 1 with size 3"), "{e}");
        let e = err(Tensor::scalar(1.0).try_index_select(0, &Tensor::new(&[0i64, 0])));
        assert!(e.starts_with("index_select: index to a 0-dim tensor can have only 1 value, got 2"), "{e}");
        let e = err(x.try_index_fill_(0, &Tensor::new(&[-3i64]), 1.0));
        assert!(e.starts_with("index_fill_: index -3 is out of bounds for dimension 0 with size 2"), "{e}");
        let e = err(x.try_gather(0, &Tensor::new(&[[0i64; 4]])));
        assert!(e.starts_with("gather: size does not match at dimension 1: expected index [1, 4] to be no larger than self [2, 3] apart from dimension 0"), "{e}");
        let e = err(x.try_masked_select(&Tensor::new(&[1u8, 0, 1])));
        assert!(e.starts_with("masked_select: expected a bool mask, got uint8"), "{e}");
        let e = err(x.try_masked_select(&Tensor::new(&[true, false])));
        assert!(e.starts_with("masked_select: shapes [2, 3] and [2] cannot broadcast"), "{e}");
    }

    #[test]
    fn one_hot_rules_and_messages() {
        let e = err(Tensor::new(&[1i32]).try_one_hot(3));
        assert!(e.starts_with("one_hot: one_hot is only applicable to index tensors of dtype int64, got int32"), "{e}");
        let e = err(Tensor::new(&[-1i64, 2]).try_one_hot(-1));
        assert!(e.starts_with("one_hot: class values must be non-negative, got -1"), "{e}");
        let e = err(Tensor::new(&[1i64, 2]).try_one_hot(2));
        assert!(
            e.starts_with("one_hot: class values must be smaller than num_classes, got 2 (num_classes = 2)"),
            "{e}"
        );
        let empty = Tensor::new(&[0i64]).narrow(0, 0, 0);
        assert!(err(empty.try_one_hot(-1)).contains("can not infer the total number of classes"));
        assert_eq!(empty.one_hot(3).shape(), &[0, 3]);
        assert!(err(Tensor::new(&[1i64]).try_one_hot(-2)).contains("num_classes must be -1 or non-negative"));
    }
}
