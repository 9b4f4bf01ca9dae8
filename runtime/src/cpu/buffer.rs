//! `CpuBuf<T>`: a typed, fixed-length array in a block of the caching allocator.

use super::alloc::RawBuffer;
use crate::dtype::Element;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

/// A typed array of `len` elements in CPU memory from the caching allocator.
pub struct CpuBuf<T: Element> {
    raw: RawBuffer,
    len: usize,
    _elem: PhantomData<T>,
}

impl<T: Element> CpuBuf<T> {
    /// A buffer whose contents are unspecified (old values of a reused block, or zeros), for
    /// kernels that write every element before anything reads them.
    pub fn uninit(len: usize) -> Self {
        let bytes = len.checked_mul(std::mem::size_of::<T>()).expect("buffer size overflows usize");
        let (raw, fresh) = RawBuffer::acquire(bytes);
        let buf = CpuBuf { raw, len, _elem: PhantomData };
        if !fresh && T::DTYPE == crate::DType::Bool {
            // A reused block may hold bytes other than 0/1, which are not valid `bool`s.
            // SAFETY: the block has at least len bytes (size of bool is 1) and we own it.
            unsafe { std::ptr::write_bytes(buf.raw.as_ptr(), 0, len) };
        }
        buf
    }

    /// A buffer of `len` zeros.
    pub fn zeros(len: usize) -> Self {
        Self::filled(len, T::zero())
    }

    /// A buffer of `len` copies of `value`.
    pub fn filled(len: usize, value: T) -> Self {
        let mut buf = Self::uninit(len);
        crate::cpu::parallel::fill(&mut buf, value);
        buf
    }

    /// A buffer holding a copy of `data`.
    pub fn from_slice(data: &[T]) -> Self {
        let mut buf = Self::uninit(data.len());
        buf.copy_from_slice(data);
        buf
    }

    /// A copy of `data` in page-locked host memory (see [`crate::cuda::pinned`]), which a
    /// host→device copy reads asynchronously; needs a CUDA device (`op` names the caller in
    /// the "no CUDA device available" error).
    pub fn pinned_from_slice(op: &'static str, data: &[T]) -> crate::cuda::Result<Self> {
        let bytes = std::mem::size_of_val(data);
        let mut buf = CpuBuf { raw: RawBuffer::acquire_pinned(op, bytes)?, len: data.len(), _elem: PhantomData };
        crate::cpu::parallel::copy(&mut buf, data);
        Ok(buf)
    }

    /// Whether the elements live in page-locked host memory ([`CpuBuf::pinned_from_slice`]).
    pub fn is_pinned(&self) -> bool {
        self.raw.is_pinned()
    }

    /// A buffer whose element `i` is `f(i)`, computed in parallel.
    pub fn from_fn(len: usize, f: impl Fn(usize) -> T + Sync + Send) -> Self {
        let mut buf = Self::uninit(len);
        crate::cpu::parallel::fill_with_index(&mut buf, f);
        buf
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The start of the elements' bytes (`len * size_of::<T>()` initialized bytes).
    pub(crate) fn byte_ptr(&self) -> *const u8 {
        self.raw.as_ptr()
    }

    /// True when the buffer holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<T: Element> Deref for CpuBuf<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: the block holds at least len * size_of::<T>() initialized bytes (fresh blocks
        // are zeroed, reused ones were written by earlier owners; Bool blocks are re-zeroed so
        // every byte is 0 or 1), it is aligned to at least 64 bytes, and `self` owns it.
        unsafe { std::slice::from_raw_parts(self.raw.as_ptr().cast::<T>(), self.len) }
    }
}

impl<T: Element> DerefMut for CpuBuf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.raw.as_ptr().cast::<T>(), self.len) }
    }
}

impl<T: Element> Clone for CpuBuf<T> {
    fn clone(&self) -> Self {
        let mut buf = Self::uninit(self.len);
        crate::cpu::parallel::copy(&mut buf, self);
        buf
    }
}

impl<T: Element> std::fmt::Debug for CpuBuf<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reused_bool_block_holds_valid_bools() {
        let bytes = 777_777;
        let mut a = CpuBuf::<u8>::uninit(bytes);
        a.fill(7);
        drop(a);
        let b = CpuBuf::<bool>::uninit(bytes);
        assert!(b.iter().all(|&v| !v));
    }

    #[test]
    fn from_fn_and_clone() {
        let a = CpuBuf::<f32>::from_fn(100_000, |i| i as f32);
        let b = a.clone();
        assert_eq!(b[99_999], 99_999.0);
        assert_eq!(&a[..], &b[..]);
    }
}
