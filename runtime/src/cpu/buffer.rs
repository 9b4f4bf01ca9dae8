//! `CpuBuf<T>`: a typed, fixed-length array in a block of the caching allocator.

use super::alloc::RawBuffer;
use super::host_block::Fence;
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
        let (raw, fresh) = RawBuffer::acquire(Self::bytes(len));
        Self::from_raw(raw, len, fresh)
    }

    /// [`CpuBuf::uninit`] in page-locked host memory (see [`crate::cuda::pinned`]); needs a
    /// CUDA device (`op` names the caller in the "no CUDA device available" error).
    pub fn pinned_uninit(op: &'static str, len: usize) -> crate::cuda::Result<Self> {
        Ok(Self::from_raw(RawBuffer::acquire_pinned(op, Self::bytes(len))?, len, false))
    }

    /// The bytes `len` elements take. Tensors hold at most [`crate::layout::MAX_NUMEL`]
    /// elements, whose bytes fit; a count past that (a kernel's own buffer) panics, naming it.
    fn bytes(len: usize) -> usize {
        let size = std::mem::size_of::<T>();
        len.checked_mul(size).unwrap_or_else(|| {
            panic!("a buffer of {len} {} elements ({size} bytes each) needs more bytes than usize can count", T::DTYPE)
        })
    }

    /// `len` elements in `raw` (`fresh`: its bytes are all zero).
    fn from_raw(raw: RawBuffer, len: usize, fresh: bool) -> Self {
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
        let mut buf = Self::pinned_uninit(op, data.len())?;
        crate::cpu::parallel::copy(&mut buf, data);
        Ok(buf)
    }

    /// Records that `fence`'s write into the elements (queued through a slice borrowed before
    /// this call) may still be in flight: the next access waits for it (see
    /// [`RawBuffer::set_pending`]).
    pub(crate) fn set_pending(&mut self, fence: Box<dyn Fence>) {
        self.raw.set_pending(fence)
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
    #[inline]
    fn deref(&self) -> &[T] {
        // SAFETY: the block holds at least len * size_of::<T>() initialized bytes (fresh blocks
        // are zeroed, reused ones were written by earlier owners; Bool blocks are re-zeroed so
        // every byte is 0 or 1), it is aligned to at least 64 bytes, and `self` owns it. A copy
        // still writing it has finished: `as_ptr` waits for it before returning.
        unsafe { std::slice::from_raw_parts(self.raw.as_ptr().cast::<T>(), self.len) }
    }
}

impl<T: Element> DerefMut for CpuBuf<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref` (the copy in flight included), and `&mut self` guarantees
        // exclusive access.
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
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::thread::JoinHandle;

    /// The stand-in for a device→host DMA on the CPU: a thread that sleeps, then writes every
    /// element of a buffer; waiting joins it. Counts the waits; `fail` makes them report an
    /// error (after the write, so nothing races with the test's checks).
    struct LateWrite {
        writer: Mutex<Option<JoinHandle<()>>>,
        waits: Arc<AtomicUsize>,
        fail: bool,
    }

    impl Fence for LateWrite {
        fn wait(&self) -> Result<(), String> {
            self.waits.fetch_add(1, Ordering::SeqCst);
            if let Some(h) = self.writer.lock().unwrap().take() {
                h.join().unwrap();
            }
            if self.fail {
                return Err("the copy faulted".into());
            }
            Ok(())
        }

        fn is_complete(&self) -> bool {
            self.writer.lock().unwrap().as_ref().is_none_or(|h| h.is_finished())
        }
    }

    /// Starts a late write of `value` into every element of `buf`, sets it as the buffer's
    /// pending write, and returns the counter of its waits.
    fn late_write(buf: &mut CpuBuf<f32>, value: f32, fail: bool) -> Arc<AtomicUsize> {
        let (addr, len) = (buf.as_mut_ptr() as usize, buf.len());
        let writer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(30));
            // SAFETY: the buffer outlives this thread (every access and the drop join it first,
            // through the fence) and nothing else touches its elements until then.
            unsafe { std::slice::from_raw_parts_mut(addr as *mut f32, len) }.fill(value);
        });
        let waits = Arc::new(AtomicUsize::new(0));
        buf.set_pending(Box::new(LateWrite { writer: Mutex::new(Some(writer)), waits: waits.clone(), fail }));
        waits
    }

    #[test]
    fn a_pending_write_is_waited_for_once_at_the_first_read() {
        let mut buf = CpuBuf::<f32>::zeros(100_000);
        let waits = late_write(&mut buf, 2.5, false);
        assert_eq!(
            (waits.load(Ordering::SeqCst), buf.len(), buf.is_pinned()),
            (0, 100_000, false),
            "len and is_pinned do not wait"
        );
        assert!(buf.iter().all(|&v| v == 2.5), "the first read sees the whole write");
        assert_eq!(buf[99_999] + buf.clone()[0], 5.0);
        assert_eq!(waits.load(Ordering::SeqCst), 1, "later accesses do not wait again");
        // A second pending write: the next access waits for it, not for the first one again.
        let again = late_write(&mut buf, -1.0, false);
        assert_eq!(format!("{:?}", &buf[..2]), "[-1.0, -1.0]");
        assert_eq!((waits.load(Ordering::SeqCst), again.load(Ordering::SeqCst)), (1, 1));
    }

    #[test]
    fn a_pending_write_is_waited_for_by_writes_clones_threads_and_drops() {
        // A write in place lands after the pending one, never under it.
        let mut buf = CpuBuf::<f32>::zeros(50_000);
        let waits = late_write(&mut buf, 1.0, false);
        buf[7] = 9.0;
        assert_eq!((buf[6], buf[7], waits.load(Ordering::SeqCst)), (1.0, 9.0, 1));
        // A clone copies the finished values.
        let waits = late_write(&mut buf, 3.0, false);
        assert!(buf.clone().iter().all(|&v| v == 3.0));
        assert_eq!(waits.load(Ordering::SeqCst), 1);
        // Readers on several threads at once: one waits, all see the write.
        let waits = late_write(&mut buf, 4.0, false);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| assert!(buf.iter().all(|&v| v == 4.0)));
            }
        });
        assert_eq!(waits.load(Ordering::SeqCst), 1);
        // Dropped before any access: the block goes back to the cache only after the write.
        let mut dropped = CpuBuf::<f32>::zeros(50_000);
        let waits = late_write(&mut dropped, 5.0, false);
        drop(dropped);
        assert_eq!(waits.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_failed_pending_write_panics_at_access_and_keeps_the_block() {
        let mut buf = CpuBuf::<f32>::zeros(1000);
        let waits = late_write(&mut buf, 1.0, true);
        let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| buf[0])).unwrap_err();
        let msg = e.downcast_ref::<String>().unwrap();
        assert_eq!(msg, "waiting for an asynchronous copy into host memory failed: the copy faulted");
        // Still not waited for: every access panics; the drop waits and then leaks the block.
        assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| buf.to_vec())).is_err());
        drop(buf);
        assert_eq!(waits.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn sizes_past_memory_panic_with_the_request_instead_of_aborting() {
        let e = std::panic::catch_unwind(|| CpuBuf::<f64>::uninit(usize::MAX / 4)).unwrap_err();
        let msg = e.downcast_ref::<String>().unwrap();
        assert!(
            msg.starts_with("a buffer of 4611686018427387903 float64 elements (8 bytes each) needs more bytes"),
            "{msg}"
        );
        // 2^47 f64 = 2^50 bytes: past the address space a Linux process gets, so always refused.
        let e = std::panic::catch_unwind(|| CpuBuf::<f64>::zeros(1 << 47)).unwrap_err();
        let msg = e.downcast_ref::<String>().unwrap();
        assert!(msg.starts_with("out of memory: the system refused to allocate 1125899906842624 bytes"), "{msg}");
    }

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
