//! Shapes and strided layouts: how a tensor's elements sit in its storage.
//!
//! Every view (transpose, narrow, expand, …) is a new [`Layout`] over the same storage; kernels
//! read any layout through [`crate::cpu::strided`]. Dims here are already normalized (`usize`,
//! in range): the `kiln` crate checks user input and names the op in its errors.

use smallvec::SmallVec;

/// A tensor's sizes, one per dimension; inline up to 6 dims.
pub type Shape = SmallVec<[usize; 6]>;

/// Strides in elements, one per dimension.
pub type Strides = SmallVec<[usize; 6]>;

/// The most elements a tensor's shape may have: 2^60 - 1. Its bytes in the widest dtype (8
/// bytes) then stay within `isize::MAX`, Rust's allocation limit, whatever dtype the elements
/// take later (`to_dtype`, an f64 result), and so do its contiguous strides and every offset
/// into it; compiled kernels index it with `i64` arithmetic that cannot overflow.
pub const MAX_NUMEL: usize = isize::MAX as usize / 8;

/// Why a shape cannot be a tensor's (see [`checked_numel`]); displayed as the end of a
/// sentence that starts with the shape: "shape [..] has too many elements (…)".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShapeError {
    /// The product of the sizes overflows 64 bits.
    Overflow,
    /// The product fits 64 bits but exceeds [`MAX_NUMEL`] (the product).
    TooLarge(usize),
    /// The shape has a zero size, but its other sizes multiply past [`MAX_NUMEL`]: its
    /// contiguous strides would overflow (PyTorch: "Stride calculation overflowed").
    Strides,
}

impl std::fmt::Display for ShapeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShapeError::Overflow => write!(f, "has too many elements (the count overflows 64 bits)"),
            ShapeError::TooLarge(n) => write!(
                f,
                "has too many elements ({n}; a tensor holds at most 2^60 - 1 = {MAX_NUMEL}, so that its size in bytes stays within isize::MAX in every dtype)"
            ),
            ShapeError::Strides => write!(
                f,
                "is too large: its nonzero sizes multiply past 2^60 - 1 = {MAX_NUMEL}, so its strides would overflow (even though it holds no element)"
            ),
        }
    }
}

impl std::error::Error for ShapeError {}

/// The number of elements of a shape that a tensor may have: at most [`MAX_NUMEL`], and with
/// its nonzero sizes multiplying to at most [`MAX_NUMEL`] too (so that its contiguous strides
/// fit). Every shape a user can give goes through this check before a layout is made of it.
pub fn checked_numel(shape: &[usize]) -> Result<usize, ShapeError> {
    let mut span: usize = 1;
    let mut overflowed = false;
    for &d in shape {
        match span.checked_mul(d.max(1)) {
            Some(p) => span = p,
            None => overflowed = true,
        }
    }
    let empty = shape.contains(&0);
    match (empty, overflowed) {
        (true, _) if overflowed || span > MAX_NUMEL => Err(ShapeError::Strides),
        (true, _) => Ok(0),
        (false, true) => Err(ShapeError::Overflow),
        (false, false) if span > MAX_NUMEL => Err(ShapeError::TooLarge(span)),
        (false, false) => Ok(span),
    }
}

/// The number of elements of a shape (1 for a 0-dim shape). The shape is one that passed
/// [`checked_numel`] (or a part of one); a product that overflows panics, in release builds
/// too, rather than wrapping to a wrong count.
pub fn numel(shape: &[usize]) -> usize {
    if shape.contains(&0) {
        return 0;
    }
    shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d)).unwrap_or_else(|| {
        panic!("the element count of shape {shape:?} overflows usize (the shape skipped kiln's shape checks)")
    })
}

/// Row-major (C-contiguous) strides for a shape (one that passed [`checked_numel`]: a stride
/// that overflows panics rather than wrapping).
pub fn contiguous_strides(shape: &[usize]) -> Strides {
    let mut strides: Strides = SmallVec::from_elem(1, shape.len());
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1].checked_mul(shape[d + 1].max(1)).unwrap_or_else(|| {
            panic!("the strides of shape {shape:?} overflow usize (the shape skipped kiln's shape checks)")
        });
    }
    strides
}

/// The shape two shapes broadcast to (NumPy/PyTorch rule: align on the right; sizes must be
/// equal or one of them 1), or `None` when they cannot broadcast.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Shape> {
    if a == b || b.is_empty() {
        return Some(SmallVec::from_slice(a)); // the common cases, without the loop
    }
    let n = a.len().max(b.len());
    let mut out: Shape = SmallVec::from_elem(0, n);
    for i in 0..n {
        let da = if i < n - a.len() { 1 } else { a[i - (n - a.len())] };
        let db = if i < n - b.len() { 1 } else { b[i - (n - b.len())] };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(out)
}

/// Sizes, strides (in elements) and the offset of element 0 in the storage.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    shape: Shape,
    strides: Strides,
    offset: usize,
}

impl Layout {
    /// The row-major layout of a shape at offset 0.
    pub fn contiguous(shape: &[usize]) -> Layout {
        Layout { shape: SmallVec::from_slice(shape), strides: contiguous_strides(shape), offset: 0 }
    }

    /// A layout from its parts; the caller guarantees it stays inside its storage.
    pub fn new(shape: Shape, strides: Strides, offset: usize) -> Layout {
        debug_assert_eq!(shape.len(), strides.len());
        Layout { shape, strides, offset }
    }

    /// Sizes.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Strides in elements.
    pub fn strides(&self) -> &[usize] {
        &self.strides
    }

    /// Offset of element 0 in the storage, in elements.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        numel(&self.shape)
    }

    /// Row-major contiguous, as PyTorch's `is_contiguous` (strides of size-1 dims are ignored).
    pub fn is_contiguous(&self) -> bool {
        let mut expected = 1;
        for d in (0..self.ndim()).rev() {
            if self.shape[d] != 1 {
                if self.strides[d] != expected {
                    return self.numel() == 0;
                }
                expected *= self.shape[d];
            }
        }
        true
    }

    /// One past the largest storage index this layout reaches (its offset when it is empty).
    pub fn storage_end(&self) -> usize {
        if self.numel() == 0 {
            return self.offset;
        }
        self.offset + self.shape.iter().zip(&self.strides).map(|(&n, &s)| (n - 1) * s).sum::<usize>() + 1
    }

    /// True when no two elements share a storage location (required of the destination of an
    /// in-place write). Sufficient test: sorted by stride, each stride exceeds the span of the
    /// smaller dims.
    pub fn is_non_overlapping(&self) -> bool {
        let mut dims: SmallVec<[(usize, usize); 6]> =
            self.shape.iter().zip(&self.strides).filter(|(&n, _)| n > 1).map(|(&n, &s)| (s, n)).collect();
        dims.sort_unstable();
        let mut span = 0;
        for (s, n) in dims {
            if s <= span {
                return false;
            }
            span += (n - 1) * s;
        }
        true
    }

    /// Swaps two dims.
    pub fn transpose(&self, d0: usize, d1: usize) -> Layout {
        let mut l = self.clone();
        l.shape.swap(d0, d1);
        l.strides.swap(d0, d1);
        l
    }

    /// Reorders dims: dim `i` of the result is dim `perm[i]` of `self` (a valid permutation).
    pub fn permute(&self, perm: &[usize]) -> Layout {
        Layout {
            shape: perm.iter().map(|&p| self.shape[p]).collect(),
            strides: perm.iter().map(|&p| self.strides[p]).collect(),
            offset: self.offset,
        }
    }

    /// Elements `start..start+len` along `dim`.
    pub fn narrow(&self, dim: usize, start: usize, len: usize) -> Layout {
        let mut l = self.clone();
        l.offset += start * self.strides[dim];
        l.shape[dim] = len;
        l
    }

    /// Every `step`-th element of `start..start+len` along `dim` (`len` elements result
    /// from `ceil(len/step)` picks).
    pub fn slice_step(&self, dim: usize, start: usize, count: usize, step: usize) -> Layout {
        let mut l = self.clone();
        l.offset += start * self.strides[dim];
        l.shape[dim] = count;
        l.strides[dim] *= step;
        l
    }

    /// Index `index` along `dim`, removing that dim.
    pub fn select(&self, dim: usize, index: usize) -> Layout {
        let mut l = self.clone();
        l.offset += index * self.strides[dim];
        l.shape.remove(dim);
        l.strides.remove(dim);
        l
    }

    /// Inserts a size-1 dim at `dim` (0..=ndim).
    pub fn unsqueeze(&self, dim: usize) -> Layout {
        let mut l = self.clone();
        let stride = if dim < self.ndim() { self.strides[dim] * self.shape[dim] } else { 1 };
        l.shape.insert(dim, 1);
        l.strides.insert(dim, stride);
        l
    }

    /// Removes dim `dim`, which must have size 1.
    pub fn squeeze(&self, dim: usize) -> Layout {
        debug_assert_eq!(self.shape[dim], 1);
        let mut l = self.clone();
        l.shape.remove(dim);
        l.strides.remove(dim);
        l
    }

    /// This layout broadcast to `shape` (stride 0 on new and expanded dims), or `None` when the
    /// shapes are incompatible.
    pub fn broadcast_to(&self, shape: &[usize]) -> Option<Layout> {
        if self.shape.as_slice() == shape {
            return Some(self.clone());
        }
        if shape.len() < self.ndim() {
            return None;
        }
        let lead = shape.len() - self.ndim();
        let mut strides: Strides = SmallVec::from_elem(0, shape.len());
        for (i, &n) in shape.iter().enumerate() {
            if i < lead {
                continue;
            }
            let own = self.shape[i - lead];
            strides[i] = if own == n {
                self.strides[i - lead]
            } else if own == 1 {
                0
            } else {
                return None;
            };
        }
        Some(Layout { shape: SmallVec::from_slice(shape), strides, offset: self.offset })
    }

    /// The same elements seen with a new shape without copying, when the strides allow it
    /// (PyTorch's `computeStride`); `None` when a copy is needed.
    pub fn view(&self, new_shape: &[usize]) -> Option<Layout> {
        debug_assert_eq!(numel(new_shape), self.numel());
        if self.numel() == 0 || self.ndim() == 0 {
            return Some(Layout {
                shape: SmallVec::from_slice(new_shape),
                strides: contiguous_strides(new_shape),
                offset: self.offset,
            });
        }
        let mut new_strides: Strides = SmallVec::from_elem(0, new_shape.len());
        let mut view_d = new_shape.len() as isize - 1;
        let mut chunk_base_stride = *self.strides.last().unwrap();
        let mut tensor_numel = 1;
        let mut view_numel = 1;
        for tensor_d in (0..self.ndim()).rev() {
            tensor_numel *= self.shape[tensor_d];
            let chunk_ends = tensor_d == 0
                || (self.shape[tensor_d - 1] != 1 && self.strides[tensor_d - 1] != tensor_numel * chunk_base_stride);
            if chunk_ends {
                while view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d as usize] == 1) {
                    new_strides[view_d as usize] = view_numel * chunk_base_stride;
                    view_numel *= new_shape[view_d as usize];
                    view_d -= 1;
                }
                if view_numel != tensor_numel {
                    return None;
                }
                if tensor_d > 0 {
                    chunk_base_stride = self.strides[tensor_d - 1];
                    tensor_numel = 1;
                    view_numel = 1;
                }
            }
        }
        if view_d != -1 {
            return None;
        }
        Some(Layout { shape: SmallVec::from_slice(new_shape), strides: new_strides, offset: self.offset })
    }

    /// The storage index of the element at a multi-index.
    pub fn index_of(&self, idx: &[usize]) -> usize {
        self.offset + idx.iter().zip(&self.strides).map(|(i, s)| i * s).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguity() {
        let l = Layout::contiguous(&[2, 3, 4]);
        assert!(l.is_contiguous());
        assert_eq!(l.strides(), &[12, 4, 1]);
        assert!(!l.transpose(0, 1).is_contiguous());
        assert!(l.narrow(0, 1, 1).is_contiguous());
        assert!(!l.narrow(2, 1, 2).is_contiguous());
        assert!(l.unsqueeze(1).is_contiguous());
    }

    #[test]
    fn broadcasting() {
        assert_eq!(broadcast_shapes(&[2, 1, 4], &[3, 1]).unwrap().as_slice(), &[2, 3, 4]);
        assert!(broadcast_shapes(&[2, 3], &[4]).is_none());
        assert_eq!(broadcast_shapes(&[], &[5]).unwrap().as_slice(), &[5]);
        let b = Layout::contiguous(&[3, 1]).broadcast_to(&[2, 3, 4]).unwrap();
        assert_eq!(b.strides(), &[0, 1, 0]);
        assert!(!b.is_non_overlapping());
    }

    #[test]
    fn view_follows_pytorch() {
        let l = Layout::contiguous(&[2, 3, 4]);
        assert_eq!(l.view(&[6, 4]).unwrap().strides(), &[4, 1]);
        let t = l.transpose(1, 2); // [2, 4, 3] strides [12, 1, 4]
        assert!(t.view(&[8, 3]).is_none());
        assert_eq!(t.view(&[2, 12]), None);
        assert_eq!(t.view(&[2, 4, 3, 1]).unwrap().strides()[..3], [12, 1, 4]);
        // splitting a non-contiguous dim keeps the view
        let n = l.narrow(2, 0, 2); // [2,3,2] strides [12,4,1]
        assert_eq!(n.view(&[2, 3, 2, 1]).unwrap().strides()[..3], [12, 4, 1]);
        assert!(n.view(&[12]).is_none());
        assert_eq!(l.transpose(0, 1).view(&[3, 2, 2, 2]).unwrap().strides(), &[4, 12, 2, 1]);
    }

    #[test]
    fn checked_counts_and_their_limits() {
        assert_eq!(checked_numel(&[]), Ok(1));
        assert_eq!(checked_numel(&[2, 3, 4]), Ok(24));
        assert_eq!(checked_numel(&[0, 5]), Ok(0));
        assert_eq!(checked_numel(&[MAX_NUMEL]), Ok(MAX_NUMEL));
        assert_eq!(checked_numel(&[MAX_NUMEL, 1, 0]), Ok(0));
        // The product wraps to 2 in 64 bits: the wrapping count the issue reported.
        assert_eq!(checked_numel(&[(1 << 63) + 1, 2]), Err(ShapeError::Overflow));
        assert_eq!(checked_numel(&[1 << 32, 1 << 32]), Err(ShapeError::Overflow));
        assert_eq!(checked_numel(&[MAX_NUMEL + 1]), Err(ShapeError::TooLarge(MAX_NUMEL + 1)));
        assert_eq!(checked_numel(&[1 << 31, 1 << 31]), Err(ShapeError::TooLarge(1 << 62)));
        // A zero size anywhere, even after the overflow, still leaves strides that overflow.
        assert_eq!(checked_numel(&[1 << 40, 1 << 40, 0]), Err(ShapeError::Strides));
        assert_eq!(checked_numel(&[0, 1 << 61]), Err(ShapeError::Strides));
        assert_eq!(
            format!("shape {:?} {}", [(1usize << 63) + 1, 2], ShapeError::Overflow),
            "shape [9223372036854775809, 2] has too many elements (the count overflows 64 bits)"
        );
    }

    #[test]
    fn unchecked_products_panic_instead_of_wrapping() {
        // In release builds too: the count is computed with checked arithmetic.
        assert_eq!(numel(&[1 << 40, 1 << 40, 0]), 0);
        let e = std::panic::catch_unwind(|| numel(&[(1 << 63) + 1, 2])).unwrap_err();
        assert!(e.downcast_ref::<String>().unwrap().contains("overflows usize"));
        assert!(std::panic::catch_unwind(|| contiguous_strides(&[0, 1 << 40, 1 << 40])).is_err());
    }

    #[test]
    fn overlap_and_extent() {
        let l = Layout::contiguous(&[3, 4]);
        assert!(l.is_non_overlapping());
        assert!(l.transpose(0, 1).is_non_overlapping());
        assert_eq!(l.narrow(1, 1, 2).storage_end(), 11);
        assert_eq!(l.select(0, 2).offset(), 8);
    }
}
