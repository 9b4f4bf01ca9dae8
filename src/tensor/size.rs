//! The one check every new shape goes through: creation, views and each op's output shape.
//!
//! A tensor's shape has at most [`MAX_NUMEL`] (2^60 - 1) elements, and its nonzero sizes
//! multiply to at most that too, so that its byte size in any dtype stays within `isize::MAX`
//! (Rust's allocation limit) and no count, stride, offset or byte size computed from it can
//! overflow, in eager ops or in compiled kernels. A shape past that is a [`ErrorKind::Shape`]
//! error at the caller's line, worded as `zeros: shape [9223372036854775809, 2] has too many
//! elements (the count overflows 64 bits)`.
//!
//! A new CPU tensor's bytes are also reserved in the caching allocator before its kernel runs
//! (see [`kiln_runtime::cpu::alloc::reserve`]), so that memory the system refuses is an
//! [`ErrorKind::OutOfMemory`] error from the `try_` forms (and a panic with the same message,
//! op and line from the panicking forms), never an abort.

use crate::error::{Error, ErrorKind, Result};
use kiln_runtime::cpu::alloc;
use kiln_runtime::layout::checked_numel;
use kiln_runtime::DType;

#[cfg(doc)]
use kiln_runtime::layout::MAX_NUMEL;

/// The element count of `shape` when a tensor can have it; else an error of `op` saying what
/// overflowed. For shapes that make no new memory (views, captured results).
#[track_caller]
pub(crate) fn check_shape(op: &'static str, shape: &[usize]) -> Result<usize> {
    match checked_numel(shape) {
        Ok(n) => Ok(n),
        Err(e) => Err(Error::new(op, ErrorKind::Shape, format!("shape {shape:?} {e}"))),
    }
}

/// [`check_shape`] for a tensor about to be made in CPU memory (a creation's, an eager CPU
/// kernel's result): its bytes are reserved in the caching allocator, so that memory the system
/// refuses is an `OutOfMemory` error of `op` naming the bytes, the shape and the dtype, instead
/// of a failure inside the kernel. (CUDA allocations report their own errors.)
#[track_caller]
pub(crate) fn reserve(op: &'static str, shape: &[usize], dtype: DType) -> Result<usize> {
    let n = check_shape(op, shape)?;
    // Cannot overflow: n <= MAX_NUMEL and elements take at most 8 bytes.
    let bytes = n * dtype.size_in_bytes();
    if let Err(e) = alloc::reserve(bytes) {
        return Err(Error::new(
            op,
            ErrorKind::OutOfMemory,
            format!("{e} for a tensor of shape {shape:?} and dtype {dtype}"),
        ));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflowing_shapes_are_errors_naming_op_and_shape() {
        let e = check_shape("zeros", &[(1 << 63) + 1, 2]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Shape);
        assert_eq!(e.message, "shape [9223372036854775809, 2] has too many elements (the count overflows 64 bits)");
        assert_eq!(e.location.line(), line!() - 3, "the caller's line");
        assert_eq!(check_shape("view", &[3, 0, 5]).unwrap(), 0);
        let e = check_shape("view", &[1 << 61]).unwrap_err();
        assert!(e.message.starts_with("shape [2305843009213693952] has too many elements (2305843009213693952; a tensor holds at most 2^60 - 1"), "{}", e.message);
    }

    #[test]
    fn memory_the_system_refuses_is_an_out_of_memory_error() {
        // 2^48 f32 = 2^50 bytes: past a Linux process's address space, so always refused.
        let e = reserve("zeros", &[1 << 24, 1 << 24], DType::F32).unwrap_err();
        assert_eq!(e.kind, ErrorKind::OutOfMemory);
        assert_eq!(
            e.message,
            "out of memory: the system refused to allocate 1125899906842624 bytes (1.0 PiB) for a tensor of shape [16777216, 16777216] and dtype float32"
        );
        assert_eq!(reserve("zeros", &[4, 4], DType::F32).unwrap(), 16);
    }
}
