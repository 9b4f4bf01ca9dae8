//! Views: new layouts over the same storage, never a copy (except `reshape`, which copies only
//! when no view exists, as in PyTorch).

use super::shape_arg::signed_sizes;
use super::{check_shape, normalize_dim, sizes, IntoShape, Tensor};
use crate::autograd::{self, grads, SliceOf};
use crate::error::{bail, OrPanic, Result};
use kiln_runtime::layout::{checked_numel, numel};
use kiln_runtime::{Layout, Shape};
use std::ops::{Range, RangeFrom, RangeFull, RangeInclusive, RangeTo, RangeToInclusive};

/// One item of an [`Tensor::i`] index: a single position (removes the dim), a range (keeps it),
/// or a new size-1 axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorIndexer {
    /// `x[3]` / `x[-1]`
    Select(i64),
    /// `x[a:b]`, with `None` for an open end.
    Narrow(Option<i64>, Option<i64>),
    /// `x[None]`
    NewAxis,
}

/// An index as `i64`; a `usize` past `i64::MAX` saturates (out of range for every tensor, so
/// an error for a position and a clamp for a range end) instead of wrapping to a negative index
/// that would count from the end.
fn saturating_i64(i: impl TryInto<i64>) -> i64 {
    i.try_into().unwrap_or(i64::MAX)
}

macro_rules! indexer_from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for TensorIndexer {
            fn from(i: $t) -> Self {
                TensorIndexer::Select(saturating_i64(i))
            }
        }
        impl From<Range<$t>> for TensorIndexer {
            fn from(r: Range<$t>) -> Self {
                TensorIndexer::Narrow(Some(saturating_i64(r.start)), Some(saturating_i64(r.end)))
            }
        }
        impl From<RangeFrom<$t>> for TensorIndexer {
            fn from(r: RangeFrom<$t>) -> Self {
                TensorIndexer::Narrow(Some(saturating_i64(r.start)), None)
            }
        }
        impl From<RangeTo<$t>> for TensorIndexer {
            fn from(r: RangeTo<$t>) -> Self {
                TensorIndexer::Narrow(None, Some(saturating_i64(r.end)))
            }
        }
        impl From<RangeInclusive<$t>> for TensorIndexer {
            fn from(r: RangeInclusive<$t>) -> Self {
                TensorIndexer::Narrow(Some(saturating_i64(*r.start())), Some(saturating_i64(*r.end()).saturating_add(1)))
            }
        }
        impl From<RangeToInclusive<$t>> for TensorIndexer {
            fn from(r: RangeToInclusive<$t>) -> Self {
                TensorIndexer::Narrow(None, Some(saturating_i64(r.end).saturating_add(1)))
            }
        }
    )*};
}
indexer_from_int!(i32, i64, usize);

impl From<RangeFull> for TensorIndexer {
    fn from(_: RangeFull) -> Self {
        TensorIndexer::Narrow(None, None)
    }
}

/// The argument of [`Tensor::i`]: one indexer, or a tuple of up to six.
pub trait IndexArgs {
    /// The indexers, first dim first.
    fn indexers(self) -> Vec<TensorIndexer>;
}

impl<T: Into<TensorIndexer>> IndexArgs for T {
    fn indexers(self) -> Vec<TensorIndexer> {
        vec![self.into()]
    }
}

macro_rules! index_tuple {
    ($($name:ident),+) => {
        impl<$($name: Into<TensorIndexer>),+> IndexArgs for ($($name,)+) {
            #[allow(non_snake_case)]
            fn indexers(self) -> Vec<TensorIndexer> {
                let ($($name,)+) = self;
                vec![$($name.into()),+]
            }
        }
    };
}
index_tuple!(A);
index_tuple!(A, B);
index_tuple!(A, B, C);
index_tuple!(A, B, C, D);
index_tuple!(A, B, C, D, E);
index_tuple!(A, B, C, D, E, F);

/// Resolves a `view`/`reshape` shape with at most one -1 against `numel`. The product of the
/// given sizes is checked (see [`check_shape`]): a shape whose count overflows is an error,
/// never a count that wraps to the input's.
#[track_caller]
pub(crate) fn infer_shape(op: &'static str, from: &[usize], spec: &[i64]) -> Result<Shape> {
    let n = numel(from);
    let mut infer = None;
    for (i, &s) in spec.iter().enumerate() {
        match s {
            -1 if infer.is_none() => infer = Some(i),
            -1 => bail!(op, Shape, "only one dimension can be inferred (shape {spec:?})"),
            s if s < 0 => bail!(op, Shape, "invalid shape dimension {s} in {spec:?}"),
            _ => {}
        }
    }
    let given: Shape = spec.iter().filter(|&&s| s >= 0).map(|&s| s as usize).collect();
    let known = match checked_numel(&given) {
        Ok(k) => k,
        Err(e) => bail!(op, Shape, "shape {spec:?} {e}"),
    };
    let mut shape: Shape = spec.iter().map(|&s| s.max(0) as usize).collect();
    if let Some(i) = infer {
        if known == 0 || !n.is_multiple_of(known) {
            bail!(op, Shape, "shape {spec:?} is invalid for input of size {n} (shape {from:?})");
        }
        shape[i] = n / known;
    } else if known != n {
        bail!(op, Shape, "shape {spec:?} is invalid for input of size {n} (shape {from:?})");
    }
    Ok(shape)
}

/// One view step of basic indexing, with indices resolved against the shape at that step.
enum IndexStep {
    /// `select(dim, index)`
    Select(usize, usize),
    /// `narrow(dim, start, len)`
    Narrow(usize, usize, usize),
    /// `unsqueeze(dim)`
    Unsqueeze(usize),
}

/// The view steps of `x.i(idx)` for a tensor of `shape`: integers out of range are errors,
/// ranges are clamped as Python slices are.
#[track_caller]
fn index_steps(shape: &[usize], idx: &[TensorIndexer]) -> Result<Vec<IndexStep>> {
    let consumed = idx.iter().filter(|i| !matches!(i, TensorIndexer::NewAxis)).count();
    if consumed > shape.len() {
        bail!("index", Index, "too many indices for tensor of dimension {} (got {consumed})", shape.len());
    }
    let mut sizes = shape.to_vec();
    let mut steps = Vec::with_capacity(idx.len());
    let mut d = 0;
    for &item in idx {
        match item {
            TensorIndexer::Select(i) => {
                let size = sizes[d] as i64;
                let j = if i < 0 { i + size } else { i };
                if j < 0 || j >= size {
                    bail!("index", Index, "index {i} is out of bounds for dimension {d} with size {size}");
                }
                sizes.remove(d);
                steps.push(IndexStep::Select(d, j as usize));
            }
            TensorIndexer::Narrow(start, end) => {
                let size = sizes[d] as i64;
                let clamp = |v: i64| if v < 0 { (v + size).max(0) } else { v.min(size) };
                let s = start.map_or(0, clamp);
                let e = end.map_or(size, clamp).max(s);
                sizes[d] = (e - s) as usize;
                steps.push(IndexStep::Narrow(d, s as usize, (e - s) as usize));
                d += 1;
            }
            TensorIndexer::NewAxis => {
                sizes.insert(d, 1);
                steps.push(IndexStep::Unsqueeze(d));
                d += 1;
            }
        }
    }
    Ok(steps)
}

/// A shape as the `&[i64]` that `reshape` takes.
fn signed(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&s| s as i64).collect()
}

impl Tensor {
    /// Records `out`, a view of `self`, with the rule mapping the view's gradient to `self`'s,
    /// when autograd is recording (a view that is `self` itself becomes a new alias first).
    pub(crate) fn tracked_view(
        &self,
        out: Tensor,
        name: &'static str,
        rule: impl Fn(&Tensor) -> Tensor + Send + Sync + 'static,
    ) -> Tensor {
        if !autograd::is_recording(&[self]) {
            return out;
        }
        let out = if out.is_same(self) { self.detach() } else { out };
        autograd::record_view(out, name, self, move |_, g, _| grads![Some(rule(g))])
    }

    /// [`Tensor::tracked_view`] for views that only change the shape: the gradient is reshaped
    /// back.
    fn tracked_reshape(&self, out: Tensor, name: &'static str) -> Tensor {
        let shape = signed(self.shape());
        self.tracked_view(out, name, move |g| g.reshape(&shape))
    }

    /// [`Tensor::tracked_view`] for a narrowing along `dim` from `start`.
    fn tracked_narrow(&self, out: Tensor, name: &'static str, dim: usize, start: usize) -> Tensor {
        self.tracked_slice(out, name, SliceOf { dim, start, squeezed: false })
    }

    /// Records `out`, the slice `slice` of `self`, when autograd is recording: its gradient
    /// goes into that slice of `self`'s (the engine tiles the pieces, see
    /// `autograd/arrived.rs`).
    fn tracked_slice(&self, out: Tensor, name: &'static str, slice: SliceOf) -> Tensor {
        if !autograd::is_recording(&[self]) {
            return out;
        }
        let out = if out.is_same(self) { self.detach() } else { out };
        autograd::record_slice(out, name, self, slice)
    }
}

impl Tensor {
    /// The same elements with a new shape (one entry may be -1), sharing storage; an error when
    /// the strides do not allow it (use [`Tensor::reshape`]).
    #[track_caller]
    pub fn view(&self, shape: impl IntoShape) -> Tensor {
        self.try_view(shape).or_panic()
    }

    /// [`Tensor::view`] returning an error.
    #[track_caller]
    pub fn try_view(&self, shape: impl IntoShape) -> Result<Tensor> {
        self.view_dims(&signed_sizes(shape))
    }

    #[track_caller]
    fn view_dims(&self, shape: &[i64]) -> Result<Tensor> {
        let new = infer_shape("view", self.shape(), shape)?;
        match self.layout().view(&new) {
            Some(l) => Ok(self.tracked_reshape(self.with_layout(l), "ViewBackward0")),
            None => bail!(
                "view",
                Shape,
                "view size is not compatible with input tensor's size and stride (shape {:?}, strides {:?}, asked {shape:?}); use reshape() instead",
                self.shape(),
                self.stride()
            ),
        }
    }

    /// [`Tensor::view`] when the strides allow it, else a contiguous copy with the new shape.
    #[track_caller]
    pub fn reshape(&self, shape: impl IntoShape) -> Tensor {
        self.try_reshape(shape).or_panic()
    }

    /// [`Tensor::reshape`] returning an error.
    #[track_caller]
    pub fn try_reshape(&self, shape: impl IntoShape) -> Result<Tensor> {
        self.reshape_dims(&signed_sizes(shape))
    }

    #[track_caller]
    fn reshape_dims(&self, shape: &[i64]) -> Result<Tensor> {
        let new = infer_shape("reshape", self.shape(), shape)?;
        match self.layout().view(&new) {
            Some(l) => Ok(self.tracked_reshape(self.with_layout(l), "ViewBackward0")),
            None => {
                let c = {
                    let _off = autograd::no_grad_guard();
                    self.deep_clone()
                };
                let out = c.with_layout(Layout::contiguous(&new));
                if !autograd::is_recording(&[self]) {
                    return Ok(out);
                }
                let shape = signed(self.shape());
                Ok(autograd::record(out, "UnsafeViewBackward0", &[self], [], move |_, g, _| {
                    grads![Some(g.reshape(&shape))]
                }))
            }
        }
    }

    /// Swaps two dims (`x.transpose(0, 1)`).
    #[track_caller]
    pub fn transpose(&self, dim0: i64, dim1: i64) -> Tensor {
        let a = self.normalize_dim("transpose", dim0).or_panic();
        let b = self.normalize_dim("transpose", dim1).or_panic();
        if self.dim() == 0 {
            return self.tracked_reshape(self.clone(), "TransposeBackward0");
        }
        let (d0, d1) = (a as i64, b as i64);
        self.tracked_view(self.with_layout(self.layout().transpose(a, b)), "TransposeBackward0", move |g| {
            g.transpose(d0, d1)
        })
    }

    /// The transpose of a tensor of at most 2 dims (`x.t()`).
    #[track_caller]
    pub fn t(&self) -> Tensor {
        if self.dim() > 2 {
            panic!(
                "{}",
                crate::Error::new(
                    "t",
                    crate::ErrorKind::Shape,
                    format!(
                        "expects a tensor with <= 2 dimensions, but self is {}D (shape {:?})",
                        self.dim(),
                        self.shape()
                    )
                )
            );
        }
        if self.dim() < 2 {
            return self.tracked_reshape(self.clone(), "TBackward0");
        }
        self.transpose(0, 1)
    }

    /// Reorders the dims: dim `i` of the result is dim `dims[i]` of `self`.
    #[track_caller]
    pub fn permute(&self, dims: &[i64]) -> Tensor {
        self.try_permute(dims).or_panic()
    }

    /// [`Tensor::permute`] returning an error for a wrong number of dims or a repeated dim.
    #[track_caller]
    pub fn try_permute(&self, dims: &[i64]) -> Result<Tensor> {
        if dims.len() != self.dim() {
            bail!(
                "permute",
                Shape,
                "number of dims don't match: the tensor has {} (shape {:?}), got {dims:?}",
                self.dim(),
                self.shape()
            );
        }
        let mut perm = Vec::with_capacity(dims.len());
        for &d in dims {
            let d = self.normalize_dim("permute", d)?;
            if perm.contains(&d) {
                bail!("permute", Index, "repeated dim in {dims:?}");
            }
            perm.push(d);
        }
        let mut inverse = vec![0i64; perm.len()];
        for (i, &p) in perm.iter().enumerate() {
            inverse[p] = i as i64;
        }
        Ok(self.tracked_view(self.with_layout(self.layout().permute(&perm)), "PermuteBackward0", move |g| {
            g.permute(&inverse)
        }))
    }

    /// `length` elements along `dim` starting at `start` (negative `start` counts from the end).
    #[track_caller]
    pub fn narrow(&self, dim: i64, start: i64, length: usize) -> Tensor {
        self.try_narrow(dim, start, length).or_panic()
    }

    /// [`Tensor::narrow`] returning an error when the range leaves the dim.
    #[track_caller]
    pub fn try_narrow(&self, dim: i64, start: i64, length: usize) -> Result<Tensor> {
        if self.dim() == 0 {
            bail!("narrow", Shape, "cannot be applied to a 0-dim tensor");
        }
        let d = self.normalize_dim("narrow", dim)?;
        let size = self.shape()[d] as i64;
        let s = if start < 0 { start + size } else { start };
        if s < 0 || s > size || length > (size - s) as usize {
            bail!(
                "narrow",
                Index,
                "start ({start}) + length ({length}) exceeds dimension size ({size}) of dim {dim} (shape {:?})",
                self.shape()
            );
        }
        Ok(self.tracked_narrow(
            self.with_layout(self.layout().narrow(d, s as usize, length)),
            "SliceBackward0",
            d,
            s as usize,
        ))
    }

    /// The slice at `index` along `dim`, removing that dim (`x.select(0, 1)`, `x[1]`).
    #[track_caller]
    pub fn select(&self, dim: i64, index: i64) -> Tensor {
        self.try_select(dim, index).or_panic()
    }

    /// [`Tensor::select`] returning an error for an out-of-range index.
    #[track_caller]
    pub fn try_select(&self, dim: i64, index: i64) -> Result<Tensor> {
        if self.dim() == 0 {
            bail!("select", Shape, "cannot be applied to a 0-dim tensor");
        }
        let d = self.normalize_dim("select", dim)?;
        let size = self.shape()[d] as i64;
        let i = if index < 0 { index + size } else { index };
        if i < 0 || i >= size {
            bail!("select", Index, "index {index} is out of bounds for dimension {d} with size {size}");
        }
        let index = i as usize;
        let out = self.with_layout(self.layout().select(d, index));
        Ok(self.tracked_slice(out, "SelectBackward0", SliceOf { dim: d, start: index, squeezed: true }))
    }

    /// Basic indexing with integers and ranges, as Python's `x[1, :, 2:4]`:
    /// `x.i((1, .., 2..4))`. Integers remove their dim; ranges keep it (clamped, as Python
    /// slices are); missing trailing dims are kept whole.
    #[track_caller]
    pub fn i(&self, index: impl IndexArgs) -> Tensor {
        self.try_i(index).or_panic()
    }

    /// [`Tensor::i`] returning an error for too many indices or an index out of range.
    #[track_caller]
    pub fn try_i(&self, index: impl IndexArgs) -> Result<Tensor> {
        let steps = index_steps(self.shape(), &index.indexers())?;
        if autograd::is_recording(&[self]) {
            // Each step recorded on its own (PyTorch decomposes indexing the same way).
            let mut t = self.clone();
            for step in steps {
                t = match step {
                    IndexStep::Select(d, j) => t.try_select(d as i64, j as i64)?,
                    IndexStep::Narrow(d, s, len) => t.try_narrow(d as i64, s as i64, len)?,
                    IndexStep::Unsqueeze(d) => t.unsqueeze(d as i64),
                };
            }
            return Ok(if t.is_same(self) { self.tracked_reshape(self.clone(), "AliasBackward0") } else { t });
        }
        let mut layout = self.layout().clone();
        for step in steps {
            layout = match step {
                IndexStep::Select(d, j) => layout.select(d, j),
                IndexStep::Narrow(d, s, len) => layout.narrow(d, s, len),
                IndexStep::Unsqueeze(d) => layout.unsqueeze(d),
            };
        }
        Ok(self.with_layout(layout))
    }

    /// Removes every size-1 dim.
    pub fn squeeze(&self) -> Tensor {
        let mut l = self.layout().clone();
        for d in (0..self.dim()).rev() {
            if l.shape()[d] == 1 {
                l = l.squeeze(d);
            }
        }
        self.tracked_reshape(self.with_layout(l), "SqueezeBackward0")
    }

    /// Removes `dim` when its size is 1; otherwise returns the same view (as PyTorch).
    #[track_caller]
    pub fn squeeze_dim(&self, dim: i64) -> Tensor {
        let d = self.normalize_dim("squeeze", dim).or_panic();
        if self.dim() == 0 || self.shape()[d] != 1 {
            return self.tracked_reshape(self.clone(), "SqueezeBackward1");
        }
        self.tracked_reshape(self.with_layout(self.layout().squeeze(d)), "SqueezeBackward1")
    }

    /// Inserts a size-1 dim at `dim` (in `-dim()-1..=dim()`).
    #[track_caller]
    pub fn unsqueeze(&self, dim: i64) -> Tensor {
        let d = normalize_dim("unsqueeze", dim, self.dim() + 1).or_panic();
        self.tracked_reshape(self.with_layout(self.layout().unsqueeze(d)), "UnsqueezeBackward0")
    }

    /// Broadcasts to `shape` without copying; -1 keeps a dim's size (`x.expand(3, -1)`).
    #[track_caller]
    pub fn expand(&self, shape: impl IntoShape) -> Tensor {
        self.try_expand(shape).or_panic()
    }

    /// [`Tensor::expand`] returning an error when the shapes are incompatible.
    #[track_caller]
    pub fn try_expand(&self, shape: impl IntoShape) -> Result<Tensor> {
        self.expand_dims(&signed_sizes(shape))
    }

    #[track_caller]
    fn expand_dims(&self, shape: &[i64]) -> Result<Tensor> {
        if shape.len() < self.dim() {
            bail!("expand", Shape, "the number of sizes provided ({}) must be greater or equal to the number of dimensions in the tensor ({})", shape.len(), self.dim());
        }
        let lead = shape.len() - self.dim();
        let mut target = Shape::new();
        for (i, &s) in shape.iter().enumerate() {
            if s == -1 {
                if i < lead {
                    bail!("expand", Shape, "-1 is not allowed in a leading, non-existing dimension ({shape:?})");
                }
                target.push(self.shape()[i - lead]);
            } else if s < 0 {
                bail!("expand", Shape, "invalid size {s} in {shape:?}");
            } else {
                target.push(s as usize);
            }
        }
        self.broadcast_sizes(&target).map_err(|mut e| {
            e.op = "expand";
            e
        })
    }

    /// Broadcasts to `shape` without copying (`torch.broadcast_to`).
    #[track_caller]
    pub fn broadcast_to(&self, shape: impl IntoShape) -> Tensor {
        self.try_broadcast_to(shape).or_panic()
    }

    /// [`Tensor::broadcast_to`] returning an error when the shapes are incompatible or `shape`
    /// is too large for a tensor (a view holds at most 2^60 - 1 elements too, see
    /// [`kiln_runtime::layout::MAX_NUMEL`]).
    #[track_caller]
    pub fn try_broadcast_to(&self, shape: impl IntoShape) -> Result<Tensor> {
        self.broadcast_sizes(&sizes("broadcast_to", shape)?)
    }

    #[track_caller]
    fn broadcast_sizes(&self, shape: &[usize]) -> Result<Tensor> {
        check_shape("broadcast_to", shape)?;
        match self.layout().broadcast_to(shape) {
            // The engine sums the gradient over the broadcast dims.
            Some(l) => Ok(self.tracked_view(self.with_layout(l), "ExpandBackward0", |g| g.clone())),
            None => {
                bail!("broadcast_to", Shape, "the tensor of shape {:?} cannot be broadcast to {shape:?}", self.shape())
            }
        }
    }

    /// Flattens dims `start..=end` into one (`x.flatten(1, -1)`); a view when possible.
    #[track_caller]
    pub fn flatten(&self, start_dim: i64, end_dim: i64) -> Tensor {
        if self.dim() == 0 {
            return self.reshape([1]);
        }
        let s = self.normalize_dim("flatten", start_dim).or_panic();
        let e = self.normalize_dim("flatten", end_dim).or_panic();
        if s > e {
            panic!(
                "{}",
                crate::Error::new(
                    "flatten",
                    crate::ErrorKind::Index,
                    format!("start_dim ({start_dim}) cannot come after end_dim ({end_dim})")
                )
            );
        }
        let mut shape: Vec<i64> = self.shape()[..s].iter().map(|&v| v as i64).collect();
        shape.push(self.shape()[s..=e].iter().product::<usize>() as i64);
        shape.extend(self.shape()[e + 1..].iter().map(|&v| v as i64));
        self.reshape(&shape)
    }

    /// Splits `dim` into `sizes` (one may be -1): the inverse of `flatten`.
    #[track_caller]
    pub fn unflatten(&self, dim: i64, sizes: impl IntoShape) -> Tensor {
        let d = self.normalize_dim("unflatten", dim).or_panic();
        let inner = infer_shape("unflatten", &self.shape()[d..=d], &signed_sizes(sizes)).or_panic();
        let mut shape: Vec<i64> = self.shape()[..d].iter().map(|&v| v as i64).collect();
        shape.extend(inner.iter().map(|&v| v as i64));
        shape.extend(self.shape()[d + 1..].iter().map(|&v| v as i64));
        self.view(&shape)
    }

    /// Splits into pieces of `split_size` along `dim` (the last may be smaller).
    #[track_caller]
    pub fn split(&self, split_size: usize, dim: i64) -> Vec<Tensor> {
        let d = self.normalize_dim("split", dim).or_panic();
        let n = self.shape()[d];
        if split_size == 0 {
            assert!(
                n == 0,
                "{}",
                crate::Error::new(
                    "split",
                    crate::ErrorKind::Value,
                    format!("split_size can only be 0 if dimension size is 0, but got dimension size of {n}")
                )
            );
            return vec![self.clone()];
        }
        (0..n.div_ceil(split_size).max(1))
            .map(|k| {
                let start = k * split_size;
                self.tracked_narrow(
                    self.with_layout(self.layout().narrow(d, start, split_size.min(n - start))),
                    "SplitBackward0",
                    d,
                    start,
                )
            })
            .collect()
    }

    /// Splits into pieces with the given sizes along `dim` (`x.split([2, 3], 0)`).
    #[track_caller]
    pub fn split_with_sizes(&self, sizes: &[usize], dim: i64) -> Vec<Tensor> {
        let d = self.normalize_dim("split_with_sizes", dim).or_panic();
        let total = sizes.iter().try_fold(0usize, |t, &s| t.checked_add(s));
        if total != Some(self.shape()[d]) {
            let sum = total.map_or("a count that overflows 64 bits".to_string(), |t| t.to_string());
            panic!(
                "{}",
                crate::Error::new(
                    "split_with_sizes",
                    crate::ErrorKind::Shape,
                    format!(
                        "split sizes {sizes:?} must sum to the size of dim {d} ({}), but sum to {sum}",
                        self.shape()[d]
                    )
                )
            );
        }
        let mut start = 0;
        sizes
            .iter()
            .map(|&s| {
                let v = self.tracked_narrow(
                    self.with_layout(self.layout().narrow(d, start, s)),
                    "SplitWithSizesBackward0",
                    d,
                    start,
                );
                start += s;
                v
            })
            .collect()
    }

    /// Splits into `chunks` pieces of `ceil(size/chunks)` along `dim` (fewer when it divides
    /// unevenly, as PyTorch's `chunk`).
    #[track_caller]
    pub fn chunk(&self, chunks: usize, dim: i64) -> Vec<Tensor> {
        if chunks == 0 {
            panic!(
                "{}",
                crate::Error::new("chunk", crate::ErrorKind::Value, "chunk expects `chunks` to be greater than 0")
            );
        }
        let d = self.normalize_dim("chunk", dim).or_panic();
        self.split(self.shape()[d].div_ceil(chunks), dim)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m() -> Tensor {
        Tensor::arange(24).view([2, 3, 4])
    }

    #[test]
    fn views_share_storage_and_see_writes() {
        let x = m();
        let t = x.transpose(0, 2);
        assert_eq!(t.shape(), &[4, 3, 2]);
        assert!(t.shares_storage_with(&x));
        assert_eq!(x.i((1, 2, 3)).item::<i64>(), 23);
        assert_eq!(t.i((3, 2, 1)).item::<i64>(), 23);
        assert_eq!(x.narrow(2, 1, 2).i((0, 0)).to_vec::<i64>(), vec![1, 2]);
        assert_eq!(x.select(1, -1).to_vec::<i64>(), vec![8, 9, 10, 11, 20, 21, 22, 23]);
    }

    #[test]
    fn view_vs_reshape() {
        let x = m();
        assert_eq!(x.view([-1, 4]).shape(), &[6, 4]);
        let t = x.transpose(1, 2);
        let e = t.try_view([-1]).unwrap_err().to_string();
        assert!(e.starts_with("view: view size is not compatible"), "{e}");
        let r = t.reshape([-1]);
        assert!(!r.shares_storage_with(&x));
        assert_eq!(r.to_vec::<i64>()[..6], [0, 4, 8, 1, 5, 9]);
        assert!(x.try_view([5, -1]).is_err());
        assert!(x.try_view([-1, -1]).is_err());
    }

    #[test]
    fn indexing_like_python() {
        let x = m();
        assert_eq!(x.i((.., 1..)).shape(), &[2, 2, 4]);
        assert_eq!(x.i((.., -1, ..2)).to_vec::<i64>(), vec![8, 9, 20, 21]);
        assert_eq!(x.i(1..=1).shape(), &[1, 3, 4]);
        assert_eq!(x.i((0, 0, 10..)).shape(), &[0]);
        assert!(x.try_i((0, 0, 0, 0)).is_err());
        assert!(x.try_i(2).is_err());
    }

    #[test]
    fn squeeze_unsqueeze_expand_flatten() {
        let x = Tensor::zeros([1, 3, 1]);
        assert_eq!(x.squeeze().shape(), &[3]);
        assert_eq!(x.squeeze_dim(0).shape(), &[3, 1]);
        assert_eq!(x.squeeze_dim(1).shape(), &[1, 3, 1]);
        assert_eq!(x.unsqueeze(-1).shape(), &[1, 3, 1, 1]);
        let e = Tensor::arange(3).unsqueeze(1).expand([2, -1, 4]);
        assert_eq!(e.shape(), &[2, 3, 4]);
        assert_eq!(e.stride(), &[0, 1, 0]);
        assert!(Tensor::arange(3).try_expand([4]).is_err());
        assert_eq!(m().flatten(1, -1).shape(), &[2, 12]);
        assert_eq!(m().flatten(0, 1).unflatten(0, [2, -1]).shape(), &[2, 3, 4]);
        assert_eq!(m().permute(&[2, 0, 1]).shape(), &[4, 2, 3]);
        assert!(m().try_permute(&[0, 0, 1]).is_err());
    }

    #[test]
    fn split_and_chunk() {
        let x = Tensor::arange(10);
        let parts: Vec<usize> = x.split(3, 0).iter().map(|p| p.numel()).collect();
        assert_eq!(parts, vec![3, 3, 3, 1]);
        let parts: Vec<usize> = x.chunk(4, 0).iter().map(|p| p.numel()).collect();
        assert_eq!(parts, vec![3, 3, 3, 1]);
        let parts: Vec<usize> = Tensor::arange(6).chunk(4, 0).iter().map(|p| p.numel()).collect();
        assert_eq!(parts, vec![2, 2, 2]);
        assert_eq!(x.split_with_sizes(&[2, 8], 0)[1].to_vec::<i64>()[0], 2);
    }
}
