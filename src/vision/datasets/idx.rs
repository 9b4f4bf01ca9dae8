//! The IDX file format of MNIST (and Fashion-MNIST, KMNIST, …): a magic number
//! `0x00 0x00 <type> <ndim>`, `ndim` big-endian u32 sizes, then the data in row-major order.
//! Only unsigned bytes (type `0x08`) are supported, which is what the image datasets use.

use crate::error::{Error, ErrorKind, Result};
use std::io::Read;
use std::panic::Location;
use std::path::Path;

/// An IDX array of unsigned bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdxArray {
    /// The sizes of the dims.
    pub dims: Vec<usize>,
    /// The values, row-major (`dims.iter().product()` bytes).
    pub data: Vec<u8>,
}

/// The name of an IDX element type byte.
fn type_name(code: u8) -> &'static str {
    match code {
        0x08 => "unsigned byte",
        0x09 => "signed byte",
        0x0B => "i16",
        0x0C => "i32",
        0x0D => "f32",
        0x0E => "f64",
        _ => "unknown",
    }
}

/// An error about `path`'s contents.
#[track_caller]
fn bad(path: &Path, message: impl std::fmt::Display) -> Error {
    Error::new("read_idx", ErrorKind::Value, format!("{}: {message}", path.display()))
}

/// Reads a file whole, decompressing it if it is gzipped (recognized by its first two bytes,
/// `1f 8b`, whatever its name). An error keeps the I/O error as its source.
#[track_caller]
pub fn read_maybe_gz(op: &'static str, path: &Path) -> Result<Vec<u8>> {
    let at = Location::caller();
    let cannot = |what: &str, e: std::io::Error| {
        Error::at(op, ErrorKind::Io, format!("{}: {what}: {e}", path.display()), at).caused_by(e)
    };
    let raw = std::fs::read(path).map_err(|e| cannot("cannot read the file", e))?;
    if raw.len() < 2 || raw[..2] != [0x1f, 0x8b] {
        return Ok(raw);
    }
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(&raw[..])
        .read_to_end(&mut out)
        .map_err(|e| cannot("not a valid gzip stream", e))?;
    Ok(out)
}

/// Reads the IDX file at `path` (plain or gzipped).
#[track_caller]
pub fn read_idx(path: impl AsRef<Path>) -> Result<IdxArray> {
    let path = path.as_ref();
    let bytes = read_maybe_gz("read_idx", path)?;
    parse_idx(&bytes, path)
}

/// Parses IDX `bytes`; `path` names the file in errors.
#[track_caller]
pub fn parse_idx(bytes: &[u8], path: &Path) -> Result<IdxArray> {
    if bytes.len() < 4 {
        return Err(bad(path, format!("too short for an IDX header ({} bytes)", bytes.len())));
    }
    let magic = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    if bytes[0] != 0 || bytes[1] != 0 {
        return Err(bad(
            path,
            format!("bad magic number {magic:#010x}: an IDX file starts with two zero bytes, a type byte and the number of dims"),
        ));
    }
    if bytes[2] != 0x08 {
        return Err(bad(
            path,
            format!(
                "bad magic number {magic:#010x}: element type {:#04x} ({}) is not supported, only 0x08 (unsigned byte)",
                bytes[2],
                type_name(bytes[2])
            ),
        ));
    }
    let ndim = bytes[3] as usize;
    let header = 4 + 4 * ndim;
    if bytes.len() < header {
        return Err(bad(
            path,
            format!("truncated header: {ndim} dims need {header} bytes, but the file has {}", bytes.len()),
        ));
    }
    let dims: Vec<usize> =
        bytes[4..header].chunks_exact(4).map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as usize).collect();
    let Some(numel) = dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d)) else {
        return Err(bad(path, format!("dims {dims:?} hold more elements than fit in memory")));
    };
    let found = bytes.len() - header;
    if found < numel {
        return Err(bad(
            path,
            format!("truncated data: dims {dims:?} need {numel} bytes after the header, but only {found} are present"),
        ));
    }
    if found > numel {
        return Err(bad(
            path,
            format!("{} unexpected bytes after the {numel} bytes of data that dims {dims:?} describe", found - numel),
        ));
    }
    Ok(IdxArray { dims, data: bytes[header..].to_vec() })
}
