//! `kiln::load_pth`: state dicts from PyTorch checkpoints written by `torch.save` — the zip
//! archive of PyTorch 1.6 and later (`data.pkl` and one entry per storage) and the legacy
//! format (`_use_new_zipfile_serialization=False`: pickles, then the raw storages) — read
//! without running their pickles' code ([`super::pickle`], [`super::torch_objects`]).
//!
//! The pickled object is flattened into a [`StateDict`]: a dict's tensors keep their keys, a
//! nested dict's or list's entries are named by their path with dots (`optimizer.state.0.exp_avg`,
//! `model.fc1.weight`), and the numbers, strings, booleans and `None`s in it become string
//! metadata under the same kind of name (`epoch` = `3`, `optimizer.param_groups.0.lr` = `0.01`;
//! a list or tuple of them is one entry, comma-separated: `betas` = `0.9,0.999`), in the text
//! forms kiln's optimizers write. Every tensor is loaded on the CPU, as its own contiguous
//! copy — except a tensor that is its whole storage (kept, with any other name for the same
//! tensor), and a view that overlaps itself (an `expand`ed one, kept as the same view of its
//! storage, as PyTorch loads it).

use super::pickle::{self, Key, ReadError, Value};
use super::torch_objects::{StorageRef, TensorRef, TorchMachine, TorchObject, TorchValue};
use crate::error::{Error, ErrorKind, Result};
use crate::{DType, StateDict, Tensor};
use kiln_runtime::layout::{checked_numel, Layout};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::io::{Cursor, Read};
use std::panic::Location;
use std::path::Path;
use std::rc::Rc;
use zip::ZipArchive;

/// The pickled magic number that starts a legacy checkpoint: `PROTO`, then `LONG1` of
/// `0x1950a86a20f9469cfc6c` (torch.serialization's `MAGIC_NUMBER`).
const LEGACY_MAGIC: [u8; 12] = [0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19];

/// The legacy format's protocol version (torch.serialization's `PROTOCOL_VERSION`).
const LEGACY_PROTOCOL: i128 = 1001;

/// How deep containers may nest in a checkpoint (a state dict nests two or three deep).
const MAX_DEPTH: usize = 32;

/// Reads the state dict of a PyTorch checkpoint written by `torch.save` (`.pt`/`.pth`): the zip
/// archive PyTorch writes since 1.6, or the legacy format (`_use_new_zipfile_serialization=False`).
/// [`crate::load`] calls it for such files, so `kiln::load("model.pth")` works too.
///
/// ```no_run
/// use kiln::nn::Module;
/// let mut net = kiln::nn::Linear::new(4, 2);
/// net.load_state_dict(&kiln::load_pth("linear.pth")?)?; // torch.save(linear.state_dict(), "linear.pth")
/// # Ok::<(), kiln::Error>(())
/// ```
///
/// No pickled code runs: the pickle may only rebuild tensors (`torch._utils._rebuild_tensor_v2`
/// and `_v3`, `_rebuild_parameter`) and dicts (`collections.OrderedDict`); any other global is
/// an error naming it, such as `__main__.Net` in a file written by `torch.save(model)` (save
/// `model.state_dict()` instead).
///
/// A dict of tensors (`model.state_dict()`) loads under its keys, in its order. Nested dicts
/// and lists are flattened with dots: `torch.save({"model": sd, "epoch": 3})` gives the tensors
/// `model.fc.weight`, … and the metadata `epoch` = `"3"`; an optimizer's `state_dict()` gives
/// `state.0.exp_avg`, … and `param_groups.0.lr`, …, the names kiln's optimizers use. Numbers,
/// strings, booleans (`true`/`false`) and `None` become metadata strings; a list or tuple of
/// them one comma-separated string. Tensors come back on the CPU whatever device they were
/// saved from, without `requires_grad`; views are copied into tensors of their own (an
/// expanded view, whose elements share storage, stays a view). The dtypes kiln has load
/// (float32, float64, float16, bfloat16, int64, int32, uint8, bool); a tensor of another
/// (int8, int16, complex, …) is an error naming it. A module's `_metadata` (its version
/// numbers) is not kept.
///
/// Errors (never panics, whatever the file holds) name the file and what is wrong: a file
/// that is not a checkpoint or is cut short or corrupt (`ErrorKind::Io`), a global or feature
/// kiln does not read (`Unsupported`), a dtype kiln lacks (`DType`), two entries with one
/// flattened name, or an object that is not a dict (`Value`).
#[track_caller]
pub fn load_pth(path: impl AsRef<Path>) -> Result<StateDict> {
    let (path, at) = (path.as_ref(), Location::caller());
    let bytes = std::fs::read(path).map_err(|e| {
        Error::at("load_pth", ErrorKind::Io, format!("cannot read {}: {e}", path.display()), at).caused_by(e)
    })?;
    read_pth(&bytes, path, "load_pth", at)
}

/// Whether `bytes` start as a `torch.save` checkpoint does: a zip archive's first entry, or a
/// pickle of the legacy format's magic number (in a `FRAME` from protocol 4 on).
pub(crate) fn is_torch_save(bytes: &[u8]) -> bool {
    let [0x80, 2..=5, rest @ ..] = bytes else { return bytes.starts_with(b"PK\x03\x04") };
    let unframed = match rest {
        [0x95, _, _, _, _, _, _, _, _, after @ ..] => after,
        _ => rest,
    };
    unframed.starts_with(&LEGACY_MAGIC)
}

/// The state dict in `bytes`, the contents of `path`; errors are `op`'s, located at `at`.
pub(crate) fn read_pth(
    bytes: &[u8],
    path: &Path,
    op: &'static str,
    at: &'static Location<'static>,
) -> Result<StateDict> {
    read(bytes).map_err(|e| Error::at(op, e.kind, format!("{}: {}", path.display(), e.message), at))
}

/// [`read_pth`] with errors not yet naming the file.
fn read(bytes: &[u8]) -> std::result::Result<StateDict, ReadError> {
    let (root, storages, pickle_len) = if bytes.starts_with(b"PK\x03\x04") {
        zip_checkpoint(bytes)?
    } else if is_torch_save(bytes) {
        legacy_checkpoint(bytes)?
    } else {
        return Err(ReadError::corrupt(format!(
            "is not a checkpoint written by torch.save (neither a zip archive nor a legacy pickle: it starts with {:02x?})",
            &bytes[..bytes.len().min(8)]
        )));
    };
    let dict = match root {
        Value::Dict(dict) => dict,
        Value::Object(o) => return Err(not_a_dict(o.describe())),
        other => return Err(not_a_dict(format!("a {}", other.type_name()))),
    };
    let mut out = Flatten {
        storages,
        decoded: HashMap::new(),
        tensors: HashMap::new(),
        names: HashSet::new(),
        state: StateDict::new(),
        visits_left: pickle_len + 64,
        copies_left: bytes.len(),
    };
    for (key, value) in dict.items() {
        out.entry(key.to_string(), &value, 1)?;
    }
    Ok(out.state)
}

/// A zip checkpoint's object, its storages, and the size of its pickle.
fn zip_checkpoint(bytes: &[u8]) -> std::result::Result<(TorchValue, Storages<'_>, usize), ReadError> {
    let mut archive = ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| ReadError::corrupt(format!("is not a readable zip archive ({e})")))?;
    // torch.save names its records `{archive name}/data.pkl`, `{archive name}/data/{key}`, ….
    let pkl = archive
        .file_names()
        .filter_map(|name| name.ok())
        .filter(|name| name.ends_with("/data.pkl") && name.matches('/').count() == 1)
        .min()
        .map(|name| name.into_owned());
    let Some(pkl) = pkl else {
        return Err(ReadError::corrupt("is a zip archive without a data.pkl: not a checkpoint written by torch.save"));
    };
    let prefix = pkl.trim_end_matches("data.pkl").to_string();
    if archive.index_for_name(&format!("{prefix}byteorder")).is_some() {
        let order = read_entry(&mut archive, &format!("{prefix}byteorder"))?;
        if order != b"little" {
            return Err(ReadError::unsupported(format!(
                "stores its tensors in {:?} byte order; kiln reads little-endian checkpoints",
                String::from_utf8_lossy(&order)
            )));
        }
    }
    let data = read_entry(&mut archive, &pkl)?;
    let (root, _) = pickle::load(&data, &mut TorchMachine::default())?;
    Ok((root, Storages::Zip { archive, prefix }, data.len()))
}

/// The bytes of the archive's entry `name`.
fn read_entry(archive: &mut ZipArchive<Cursor<&[u8]>>, name: &str) -> std::result::Result<Vec<u8>, ReadError> {
    let cannot = |e: &dyn std::fmt::Display| ReadError::corrupt(format!("cannot read the entry {name}: {e}"));
    // Entries' data lies before the central directory.
    let bound = usize::try_from(archive.central_directory_start()).unwrap_or(0);
    let mut entry = archive.by_name(name).map_err(|e| cannot(&e))?;
    // The declared size is only a hint: the read stops where the entry's data does.
    let mut data = Vec::with_capacity(usize::try_from(entry.size()).unwrap_or(0).min(bound));
    entry.read_to_end(&mut data).map_err(|e| cannot(&e))?;
    Ok(data)
}

/// A legacy checkpoint's object, its storages, and the size of its pickle. The file holds the
/// pickles of the magic number, the protocol version, the system's info, the object, and the
/// list of storage keys; then each storage as its element count (8 bytes, little-endian) and
/// its bytes.
fn legacy_checkpoint(bytes: &[u8]) -> std::result::Result<(TorchValue, Storages<'_>, usize), ReadError> {
    let mut machine = TorchMachine::default();
    let mut pos = 0;
    let mut next = |machine: &mut TorchMachine| {
        let (value, used) = pickle::load(&bytes[pos..], machine)?;
        pos += used;
        Ok::<_, ReadError>((value, used))
    };
    next(&mut machine)?; // The magic number, which `is_torch_save` has seen.
    let (protocol, _) = next(&mut machine)?;
    if !matches!(protocol, Value::Int(LEGACY_PROTOCOL)) {
        return Err(ReadError::unsupported("is a legacy torch.save file of a protocol version other than 1001"));
    }
    let (Value::Dict(info), _) = next(&mut machine)? else {
        return Err(ReadError::corrupt("has no system info after its protocol version"));
    };
    if info.items().iter().any(|(k, v)| *k == Key::Str("little_endian".into()) && matches!(v, Value::Bool(false))) {
        return Err(ReadError::unsupported(
            "was written on a big-endian machine; kiln reads little-endian checkpoints",
        ));
    }
    let (root, pickle_len) = next(&mut machine)?;
    let (Value::List(keys), _) = next(&mut machine)? else {
        return Err(ReadError::corrupt("has no list of storage keys after its object"));
    };
    let mut storages = HashMap::new();
    for key in keys.items() {
        let Value::Str(key) = key else { return Err(ReadError::corrupt("lists a storage key that is not a string")) };
        let Some(storage) = machine.storage(&key) else {
            return Err(ReadError::corrupt(format!("lists storage {key}, which no tensor uses")));
        };
        let numel = bytes.get(pos..pos + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
        let len = storage.nbytes().filter(|_| numel == Some(storage.numel as u64));
        let Some(data) = len.and_then(|len| bytes.get(pos + 8..(pos + 8).checked_add(len)?)) else {
            return Err(ReadError::corrupt(format!(
                "is cut short or corrupt at byte {pos}: storage {key} of {} elements does not follow",
                storage.numel
            )));
        };
        pos += 8 + data.len();
        storages.insert(key.to_string(), data);
    }
    Ok((root, Storages::Legacy(storages), pickle_len))
}

/// Where the storages' bytes are.
enum Storages<'a> {
    /// Entries `{prefix}data/{key}` of the archive.
    Zip { archive: ZipArchive<Cursor<&'a [u8]>>, prefix: String },
    /// The legacy file's storages by key.
    Legacy(HashMap<String, &'a [u8]>),
}

impl<'a> Storages<'a> {
    /// The bytes of `storage`, which must be as many as its size says.
    fn bytes(&mut self, storage: &StorageRef) -> std::result::Result<Cow<'a, [u8]>, ReadError> {
        let key = &storage.key;
        let data = match self {
            Storages::Zip { archive, prefix } => {
                let name = format!("{prefix}data/{key}");
                if archive.index_for_name(&name).is_none() {
                    return Err(ReadError::corrupt(format!("has no entry {name} for storage {key}")));
                }
                Cow::Owned(read_entry(archive, &name)?)
            }
            Storages::Legacy(map) => match map.get(key.as_str()) {
                Some(data) => Cow::Borrowed(*data),
                None => return Err(ReadError::corrupt(format!("has no data for storage {key}"))),
            },
        };
        if Some(data.len()) != storage.nbytes() {
            return Err(ReadError::corrupt(format!(
                "storage {key} holds {} bytes, but it is {} elements of {}",
                data.len(),
                storage.numel,
                storage.dtype.name
            )));
        }
        Ok(data)
    }
}

/// The flattening of a checkpoint's object into a state dict.
struct Flatten<'a> {
    storages: Storages<'a>,
    /// Each storage as a 1-D tensor of the dtype it was read as.
    decoded: HashMap<(String, DType), Tensor>,
    /// Each tensor made, by its pickle object (one object under two names is one tensor).
    tensors: HashMap<*const TensorRef, Tensor>,
    /// The tensor names given so far.
    names: HashSet<String>,
    state: StateDict,
    /// How many more values may be visited: a pickle's bytes bound a tree's values, so more
    /// visits mean containers shared or cyclic past any state dict's.
    visits_left: usize,
    /// How many more bytes views may be copied into: the file's bytes bound the copies of
    /// views that do not overlap; past that, views stay views.
    copies_left: usize,
}

/// The text of a number, string, boolean or `None`, as kiln's optimizers write hyperparameters.
fn scalar_text(value: &TorchValue) -> Option<String> {
    match value {
        Value::None => Some("None".into()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Int(i) => Some(i.to_string()),
        Value::Float(x) => Some(format!("{x:?}")),
        Value::Str(s) => Some(s.to_string()),
        _ => None,
    }
}

impl Flatten<'_> {
    /// Adds `value` under `name`: a tensor, metadata, or a container's entries under
    /// `name.key`.
    fn entry(&mut self, name: String, value: &TorchValue, depth: usize) -> std::result::Result<(), ReadError> {
        self.visits_left = self.visits_left.checked_sub(1).ok_or_else(|| {
            ReadError::unsupported(format!("refers to shared containers more often than a state dict does (at {name})"))
        })?;
        if depth > MAX_DEPTH {
            return Err(ReadError::unsupported(format!("nests containers more than {MAX_DEPTH} deep (at {name})")));
        }
        if let Some(text) = scalar_text(value) {
            return self.metadata(name, text);
        }
        match value {
            Value::Object(TorchObject::Tensor(t)) => {
                if !self.names.insert(name.clone()) {
                    return Err(duplicate(&name));
                }
                let tensor = self.tensor(&name, t)?;
                self.state.insert(name, tensor);
            }
            Value::Dict(d) => {
                for (key, value) in d.items() {
                    self.entry(format!("{name}.{key}"), &value, depth + 1)?;
                }
            }
            Value::List(items) | Value::Tuple(items) => {
                let items = items.items();
                match items.iter().map(scalar_text).collect::<Option<Vec<_>>>() {
                    Some(texts) => self.metadata(name, texts.join(","))?,
                    None => {
                        for (i, value) in items.iter().enumerate() {
                            self.entry(format!("{name}.{i}"), value, depth + 1)?;
                        }
                    }
                }
            }
            Value::Object(other) => {
                return Err(ReadError::unsupported(format!(
                    "holds {} at {name}, where kiln reads tensors, numbers and strings",
                    other.describe()
                )))
            }
            Value::Bytes => {
                return Err(ReadError::unsupported(format!(
                    "holds bytes at {name}, where kiln reads tensors, numbers and strings"
                )))
            }
            // Metadata, above.
            Value::None | Value::Bool(_) | Value::Int(_) | Value::Float(_) | Value::Str(_) => {}
        }
        Ok(())
    }

    /// Sets the metadata entry `name` to `text`; an error if it is set already.
    fn metadata(&mut self, name: String, text: String) -> std::result::Result<(), ReadError> {
        if self.state.metadata(&name).is_some() {
            return Err(duplicate(&name));
        }
        self.state.set_metadata(name, text);
        Ok(())
    }

    /// The tensor `t`, named `name`.
    fn tensor(&mut self, name: &str, t: &Rc<TensorRef>) -> std::result::Result<Tensor, ReadError> {
        if let Some(tensor) = self.tensors.get(&Rc::as_ptr(t)) {
            return Ok(tensor.clone());
        }
        let Some(dtype) = t.dtype.kiln else {
            return Err(ReadError {
                kind: ErrorKind::DType,
                message: format!(
                    "tensor {name} has dtype torch.{}, which kiln does not have (it has float32, float64, float16, bfloat16, int64, int32, uint8 and bool)",
                    t.dtype.name
                ),
            });
        };
        let storage = self.storage(&t.storage, dtype)?;
        let len = storage.numel();
        let numel = checked_numel(&t.size)
            .map_err(|e| ReadError::corrupt(format!("tensor {name} has the shape {:?}, which {e}", t.size)))?;
        // One past the last element it reads; its offset when it is empty.
        let end = match numel {
            0 => Some(t.offset),
            _ => t
                .size
                .iter()
                .zip(&t.stride)
                .try_fold(t.offset, |end, (&n, &s)| end.checked_add((n - 1).checked_mul(s)?))
                .and_then(|last| last.checked_add(1)),
        };
        if end.is_none_or(|end| end > len) {
            return Err(ReadError::corrupt(format!(
                "tensor {name} (offset {}, shape {:?}, strides {:?}) reaches past the end of storage {} ({len} elements)",
                t.offset, t.size, t.stride, t.storage.key
            )));
        }
        if t.negative && !matches!(dtype, DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::I64 | DType::I32)
        {
            return Err(ReadError::corrupt(format!("tensor {name} of dtype {dtype} has torch's neg bit set")));
        }
        let layout = Layout::new(t.size.as_slice().into(), t.stride.as_slice().into(), t.offset);
        let whole = layout.is_contiguous() && t.offset == 0 && numel == len;
        let copy = !whole && layout.is_non_overlapping();
        let bytes = numel * dtype.size_in_bytes();
        let view = storage.with_layout(layout);
        let mut tensor = if copy && bytes <= self.copies_left {
            self.copies_left -= bytes;
            view.deep_clone()
        } else {
            view
        };
        if t.negative {
            tensor = tensor.neg();
        }
        self.tensors.insert(Rc::as_ptr(t), tensor.clone());
        Ok(tensor)
    }

    /// `storage` as a 1-D tensor of `dtype`, read once.
    fn storage(&mut self, storage: &StorageRef, dtype: DType) -> std::result::Result<Tensor, ReadError> {
        let key = (storage.key.clone(), dtype);
        if let Some(t) = self.decoded.get(&key) {
            return Ok(t.clone());
        }
        let data = self.storages.bytes(storage)?;
        if !data.len().is_multiple_of(dtype.size_in_bytes()) {
            return Err(ReadError::corrupt(format!(
                "storage {} of {} bytes does not hold whole elements of {dtype}",
                storage.key,
                data.len()
            )));
        }
        let n = data.len() / dtype.size_in_bytes();
        let t = super::from_le_bytes(dtype, &data, &[n])
            .map_err(|e| ReadError::corrupt(format!("storage {}: {e}", storage.key)))?;
        self.decoded.insert(key, t.clone());
        Ok(t)
    }
}

/// The pickled object is `what`, not a dict.
fn not_a_dict(what: String) -> ReadError {
    ReadError { kind: ErrorKind::Value, message: format!("holds {what}, not a dict of tensors") }
}

/// Two entries flatten to one name.
fn duplicate(name: &str) -> ReadError {
    ReadError {
        kind: ErrorKind::Value,
        message: format!("has two entries named {name} once nested names are joined with dots"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURES: [(&str, &[u8]); 4] = [
        ("tensors.pth", include_bytes!("../../tests/fixtures/pth/tensors.pth")),
        ("tensors_legacy.pth", include_bytes!("../../tests/fixtures/pth/tensors_legacy.pth")),
        ("tensors_legacy_protocol4.pth", include_bytes!("../../tests/fixtures/pth/tensors_legacy_protocol4.pth")),
        ("checkpoint.pth", include_bytes!("../../tests/fixtures/pth/checkpoint.pth")),
    ];

    #[test]
    fn every_cut_of_a_checkpoint_is_an_io_error() {
        for (file, bytes) in FIXTURES {
            assert!(read(bytes).is_ok(), "{file}");
            for len in 0..bytes.len() {
                let err = read(&bytes[..len]).err().unwrap_or_else(|| panic!("{file} cut at {len} loads"));
                assert_eq!(err.kind, ErrorKind::Io, "{file} cut at {len}: {}", err.message);
            }
        }
    }

    #[test]
    fn no_corrupted_byte_makes_a_panic() {
        // Every byte replaced by three others: an error or a state dict, never a panic. In the
        // zip files, CRCs catch most changes; the legacy file's pickles take every one.
        for (_, bytes) in FIXTURES {
            let mut corrupted = bytes.to_vec();
            for i in 0..bytes.len() {
                for b in [0x00, 0xff, bytes[i] ^ 0x01] {
                    corrupted[i] = b;
                    let _ = read(&corrupted);
                }
                corrupted[i] = bytes[i];
            }
        }
    }
}
