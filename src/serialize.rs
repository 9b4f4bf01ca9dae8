//! `kiln::save` / `kiln::load`: state dicts as safetensors files, the format PyTorch reads and
//! writes with `safetensors.torch.save_file` / `load_file`; `kiln::load` also reads PyTorch's
//! own checkpoints (`torch.save`), through `kiln::load_pth` ([`pth`]).
//!
//! Tensors are written contiguous and little-endian; the state dict's metadata becomes the
//! file's `__metadata__`. A loaded state dict lists its tensors sorted by name (safetensors keeps
//! no insertion order).

mod pickle;
mod pth;
mod torch_objects;

pub use pth::load_pth;

use crate::error::{Error, ErrorKind, Result};
use crate::{DType, StateDict, Tensor};
use half::{bf16, f16};
use safetensors::tensor::{Dtype as StDtype, SafeTensors, TensorView};
use std::collections::HashMap;
use std::fs::File;
use std::panic::Location;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Writes `state` to `path` as a safetensors file, atomically: the file is written under a
/// temporary name in the same directory, flushed to disk, renamed over `path` and the directory
/// flushed, so a crash, a kill or a full disk during a save leaves either the old file or the
/// new one, never a truncated one. (A save killed midway may leave its temporary file,
/// `.NAME.kiln-tmp-*`, beside the target; a failed save removes it.)
#[track_caller]
pub fn save(state: &StateDict, path: impl AsRef<Path>) -> Result<()> {
    save_at(state, path.as_ref(), Location::caller())
}

/// [`save`] with errors naming `at`.
pub(crate) fn save_at(state: &StateDict, path: &Path, at: &'static Location<'static>) -> Result<()> {
    let mut blobs = Vec::with_capacity(state.len());
    for (name, t) in state.iter() {
        if !t.device().is_cpu() {
            return Err(Error::at(
                "save",
                ErrorKind::Device,
                format!("tensor {name} is on {}; move it to the CPU first", t.device()),
                at,
            ));
        }
        blobs.push((name.to_string(), st_dtype(t.dtype()), t.shape().to_vec(), le_bytes(t)));
    }
    let views = blobs
        .iter()
        .map(|(name, dtype, shape, bytes)| {
            let view = TensorView::new(*dtype, shape.clone(), bytes)
                .map_err(|e| Error::at("save", ErrorKind::Value, format!("tensor {name}: {e}"), at).caused_by(e))?;
            Ok((name.as_str(), view))
        })
        .collect::<Result<Vec<_>>>()?;
    let metadata: HashMap<String, String> = state.metadata_entries().clone().into_iter().collect();
    let metadata = (!metadata.is_empty()).then_some(metadata);
    let cannot = |e: std::io::Error| {
        Error::at("save", ErrorKind::Io, format!("cannot write {}: {e}", path.display()), at).caused_by(e)
    };
    let tmp = temporary_beside(path).map_err(cannot)?;
    let written = safetensors::tensor::serialize_to_file(views, metadata, &tmp)
        .map_err(|e| Error::at("save", ErrorKind::Io, format!("cannot write {}: {e}", path.display()), at).caused_by(e))
        .and_then(|()| replace_durably(&tmp, path).map_err(cannot));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// A fresh temporary path in `path`'s directory (`.NAME.kiln-tmp-PID-N`).
fn temporary_beside(path: &Path) -> std::io::Result<PathBuf> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path names no file"))?;
    let tmp =
        format!(".{}.kiln-tmp-{}-{}", name.to_string_lossy(), std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
    Ok(path.with_file_name(tmp))
}

/// Flushes `tmp` to disk, renames it over `target` and flushes the directory, so the rename
/// survives a crash.
fn replace_durably(tmp: &Path, target: &Path) -> std::io::Result<()> {
    File::open(tmp)?.sync_all()?;
    std::fs::rename(tmp, target)?;
    let dir = target.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    // Directories can be opened and flushed on Unix; elsewhere the rename is as durable as the
    // file system makes it.
    if cfg!(unix) {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Reads a state dict from a safetensors file written by [`save`] or by PyTorch, or from a
/// PyTorch checkpoint written by `torch.save` (`.pt`/`.pth`: a zip archive, or the legacy
/// format), which it recognises by its first bytes and reads with [`load_pth`] (see there for
/// what it accepts and how nested dicts are named): `kiln::load("model.pth")` just works.
#[track_caller]
pub fn load(path: impl AsRef<Path>) -> Result<StateDict> {
    load_at(path.as_ref(), Location::caller())
}

/// [`load`] with errors naming `at`.
pub(crate) fn load_at(path: &Path, at: &'static Location<'static>) -> Result<StateDict> {
    let bytes = std::fs::read(path).map_err(|e| {
        Error::at("load", ErrorKind::Io, format!("cannot read {}: {e}", path.display()), at).caused_by(e)
    })?;
    let bad = |what: String| {
        Error::at("load", ErrorKind::Io, format!("{} is not a valid safetensors file: {what}", path.display()), at)
    };
    let file = match SafeTensors::deserialize(&bytes) {
        Ok(file) => file,
        Err(_) if pth::is_torch_save(&bytes) => return pth::read_pth(&bytes, path, "load", at),
        Err(e) => return Err(bad(e.to_string()).caused_by(e)),
    };
    let mut tensors = file.tensors();
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    let mut state = StateDict::new();
    for (name, view) in tensors {
        let t = from_view(&view).map_err(|e| bad(format!("tensor {name}: {e}")))?;
        state.insert(name, t);
    }
    let (_, metadata) = SafeTensors::read_metadata(&bytes).map_err(|e| bad(e.to_string()).caused_by(e))?;
    if let Some(entries) = metadata.metadata() {
        for (k, v) in entries {
            state.set_metadata(k.clone(), v.clone());
        }
    }
    Ok(state)
}

fn st_dtype(dtype: DType) -> StDtype {
    match dtype {
        DType::F32 => StDtype::F32,
        DType::F64 => StDtype::F64,
        DType::F16 => StDtype::F16,
        DType::BF16 => StDtype::BF16,
        DType::I64 => StDtype::I64,
        DType::I32 => StDtype::I32,
        DType::U8 => StDtype::U8,
        DType::Bool => StDtype::BOOL,
    }
}

/// The tensor's values, row-major, as little-endian bytes.
fn le_bytes(t: &Tensor) -> Vec<u8> {
    fn flat<T, const N: usize>(values: Vec<T>, to_le: fn(T) -> [u8; N]) -> Vec<u8> {
        values.into_iter().flat_map(to_le).collect()
    }
    match t.dtype() {
        DType::F32 => flat(t.to_vec::<f32>(), f32::to_le_bytes),
        DType::F64 => flat(t.to_vec::<f64>(), f64::to_le_bytes),
        DType::F16 => flat(t.to_vec::<f16>(), f16::to_le_bytes),
        DType::BF16 => flat(t.to_vec::<bf16>(), bf16::to_le_bytes),
        DType::I64 => flat(t.to_vec::<i64>(), i64::to_le_bytes),
        DType::I32 => flat(t.to_vec::<i32>(), i32::to_le_bytes),
        DType::U8 => t.to_vec::<u8>(),
        DType::Bool => t.to_vec::<bool>().into_iter().map(u8::from).collect(),
    }
}

/// A tensor from a safetensors view; dtypes kiln has no counterpart for are errors.
fn from_view(view: &TensorView<'_>) -> std::result::Result<Tensor, String> {
    let shape = view.shape();
    // An empty tensor's other dims can still be too large (their strides overflow).
    crate::tensor::check_shape("load", shape).map_err(|e| e.message)?;
    let dtype = match view.dtype() {
        StDtype::F32 => DType::F32,
        StDtype::F64 => DType::F64,
        StDtype::F16 => DType::F16,
        StDtype::BF16 => DType::BF16,
        StDtype::I64 => DType::I64,
        StDtype::I32 => DType::I32,
        StDtype::U8 => DType::U8,
        StDtype::BOOL => DType::Bool,
        other => return Err(format!("dtype {other:?} is not supported by kiln")),
    };
    from_le_bytes(dtype, view.data(), shape)
}

/// A tensor of `dtype` and `shape` from its values as little-endian bytes (`data` holds
/// exactly the shape's elements); a bool byte other than 0 or 1 is an error.
fn from_le_bytes(dtype: DType, data: &[u8], shape: &[usize]) -> std::result::Result<Tensor, String> {
    fn values<T, const N: usize>(data: &[u8], from_le: fn([u8; N]) -> T) -> Vec<T> {
        data.chunks_exact(N).map(|c| from_le(c.try_into().expect("chunk of N bytes"))).collect()
    }
    Ok(match dtype {
        DType::F32 => Tensor::from_vec(values(data, f32::from_le_bytes), shape),
        DType::F64 => Tensor::from_vec(values(data, f64::from_le_bytes), shape),
        DType::F16 => Tensor::from_vec(values(data, f16::from_le_bytes), shape),
        DType::BF16 => Tensor::from_vec(values(data, bf16::from_le_bytes), shape),
        DType::I64 => Tensor::from_vec(values(data, i64::from_le_bytes), shape),
        DType::I32 => Tensor::from_vec(values(data, i32::from_le_bytes), shape),
        DType::U8 => Tensor::from_vec(data.to_vec(), shape),
        DType::Bool => {
            if let Some(bad) = data.iter().find(|&&b| b > 1) {
                return Err(format!("a bool holds the byte {bad}"));
            }
            Tensor::from_vec(data.iter().map(|&b| b == 1).collect::<Vec<bool>>(), shape)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_dtype_and_metadata() {
        let dir = std::env::temp_dir().join(format!("kiln-serialize-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("all.safetensors");
        let mut sd = StateDict::new();
        let base = Tensor::new(&[[1.5f32, -2.0, 0.0], [3.25, 4.0, -0.5]]);
        for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::I32, DType::U8, DType::Bool] {
            sd.insert(format!("t_{dtype}"), base.abs().to_dtype(dtype));
        }
        sd.insert("transposed", base.t());
        sd.set_metadata("epoch", "3");
        save(&sd, &path).unwrap();
        let back = load(&path).unwrap();
        assert_eq!(back.len(), sd.len());
        for (name, t) in sd.iter() {
            let b = back.get(name).unwrap();
            assert_eq!((b.shape(), b.dtype()), (t.shape(), t.dtype()), "{name}");
            assert_eq!(b.to_dtype(DType::F64).to_vec::<f64>(), t.to_dtype(DType::F64).to_vec::<f64>(), "{name}");
        }
        assert_eq!(back.metadata("epoch"), Some("3"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_files_are_errors_naming_the_file() {
        let path = std::env::temp_dir().join(format!("kiln-bad-{}.safetensors", std::process::id()));
        std::fs::write(&path, b"\x08\x00\x00\x00\x00\x00\x00\x00{not json").unwrap();
        let err = load(&path).unwrap_err().to_string();
        assert!(err.contains("not a valid safetensors file") && err.contains(&path.display().to_string()), "{err}");
        std::fs::remove_file(&path).unwrap();
        let err = load("/nonexistent/kiln.safetensors").unwrap_err();
        assert!(err.to_string().contains("cannot read /nonexistent/kiln.safetensors"), "{err}");
        let cause =
            std::error::Error::source(&err).and_then(|c| c.downcast_ref::<std::io::Error>()).expect("the io error");
        assert_eq!(cause.kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn cut_short_pytorch_checkpoints_are_read_as_such_and_refused() {
        let dir = std::env::temp_dir().join(format!("kiln-pth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // The starts of torch.save's two formats: a zip archive's local header, and the
        // legacy format's pickled magic number (`_use_new_zipfile_serialization=False`).
        for (name, bytes, says) in [
            ("new.pth", &b"PK\x03\x04\x00\x00\x08\x08archive/data.pkl"[..], "is not a readable zip archive"),
            ("legacy.pth", &b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.\x80\x02"[..], "the pickle is cut short"),
        ] {
            let path = dir.join(name);
            std::fs::write(&path, bytes).unwrap();
            let err = load(&path).unwrap_err();
            assert_eq!((err.op, err.kind), ("load", ErrorKind::Io), "{err}");
            assert!(err.message.starts_with(&format!("{}: {says}", path.display())), "{err}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_save_leaves_the_target_and_no_temporary_file() {
        let dir = std::env::temp_dir().join(format!("kiln-save-fail-{}", std::process::id()));
        let target = dir.join("ckpt.safetensors");
        // The target is a directory: the final rename fails.
        std::fs::create_dir_all(target.join("inside")).unwrap();
        let mut sd = StateDict::new();
        sd.insert("w", Tensor::ones([4]));
        let err = save(&sd, &target).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Io, "{err}");
        assert!(target.join("inside").is_dir(), "the target is untouched");
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["ckpt.safetensors"], "no temporary file is left");
        // A successful save leaves only its file.
        let ok = dir.join("ok.safetensors");
        save(&sd, &ok).unwrap();
        save(&sd, &ok).unwrap();
        let mut names: Vec<_> =
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        assert_eq!(names, ["ckpt.safetensors", "ok.safetensors"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
