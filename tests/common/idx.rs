//! Writing IDX files (MNIST's format) for the dataset tests.
//!
//! Use it from a test file with `#[path = "common/idx.rs"] mod idx;`.

/// An IDX file of unsigned bytes: magic `0 0 8 ndim`, the dims (big-endian), the data.
pub fn idx(dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut out = vec![0, 0, 8, dims.len() as u8];
    for d in dims {
        out.extend_from_slice(&d.to_be_bytes());
    }
    out.extend_from_slice(data);
    out
}
