//! What a `torch.save` pickle may make, and nothing else: the [`Machine`] that the pickle
//! reader asks about globals, persistent ids, calls and `BUILD`s.
//!
//! Allowed globals: `collections.OrderedDict` (called with no arguments: a dict),
//! `torch._utils._rebuild_tensor_v2` / `_rebuild_tensor_v3` / `_rebuild_parameter` (a
//! [`TensorRef`]), the storage classes `torch.FloatStorage`, … and `torch.UntypedStorage` (only
//! inside a storage's persistent id), and the dtypes `torch.float32`, … (only as
//! `_rebuild_tensor_v3`'s argument). Any other global, `__main__.Net` of a pickled module or
//! `os.system` of a malicious file, is an error naming it; so is a call of an allowed global
//! that is not one of the above.

use super::pickle::{Machine, PResult, ReadError, Value};
use crate::DType;
use std::collections::HashMap;
use std::rc::Rc;

/// A torch element type: its dtype's name (`float32`), the storage class that holds it
/// (`FloatStorage`), its size in bytes and the kiln dtype, if kiln has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TorchDType {
    /// `torch.{name}` is the dtype.
    pub name: &'static str,
    /// `torch.{storage}` is its legacy typed storage class, if it has one.
    storage: Option<&'static str>,
    /// Bytes per element.
    pub size: usize,
    /// The kiln dtype, if kiln has one.
    pub kiln: Option<DType>,
}

const fn dt(name: &'static str, storage: Option<&'static str>, size: usize, kiln: Option<DType>) -> TorchDType {
    TorchDType { name, storage, size, kiln }
}

/// The element types a checkpoint may name: kiln's, and those kiln lacks (named in errors).
const DTYPES: [TorchDType; 23] = [
    dt("float32", Some("FloatStorage"), 4, Some(DType::F32)),
    dt("float64", Some("DoubleStorage"), 8, Some(DType::F64)),
    dt("float16", Some("HalfStorage"), 2, Some(DType::F16)),
    dt("bfloat16", Some("BFloat16Storage"), 2, Some(DType::BF16)),
    dt("int64", Some("LongStorage"), 8, Some(DType::I64)),
    dt("int32", Some("IntStorage"), 4, Some(DType::I32)),
    dt("uint8", Some("ByteStorage"), 1, Some(DType::U8)),
    dt("bool", Some("BoolStorage"), 1, Some(DType::Bool)),
    dt("int16", Some("ShortStorage"), 2, None),
    dt("int8", Some("CharStorage"), 1, None),
    dt("complex32", Some("ComplexHalfStorage"), 4, None),
    dt("complex64", Some("ComplexFloatStorage"), 8, None),
    dt("complex128", Some("ComplexDoubleStorage"), 16, None),
    dt("qint8", Some("QInt8Storage"), 1, None),
    dt("quint8", Some("QUInt8Storage"), 1, None),
    dt("qint32", Some("QInt32Storage"), 4, None),
    dt("quint4x2", Some("QUInt4x2Storage"), 1, None),
    dt("uint16", None, 2, None),
    dt("uint32", None, 4, None),
    dt("uint64", None, 8, None),
    dt("float8_e4m3fn", None, 1, None),
    dt("float8_e5m2", None, 1, None),
    dt("float8_e4m3fnuz", None, 1, None),
];

/// `torch.UntypedStorage`: bytes.
const UNTYPED: TorchDType = dt("uint8", Some("UntypedStorage"), 1, Some(DType::U8));

/// A storage that a persistent id names: `archive/data/{key}` in a zip checkpoint, or the
/// storage after the pickles under `key` in the legacy format.
#[derive(Debug)]
pub(crate) struct StorageRef {
    /// The storage's key.
    pub key: String,
    /// Its element type (bytes for an untyped storage).
    pub dtype: TorchDType,
    /// Its size in elements of `dtype`.
    pub numel: usize,
}

impl StorageRef {
    /// Its size in bytes, when that fits.
    pub(crate) fn nbytes(&self) -> Option<usize> {
        self.numel.checked_mul(self.dtype.size)
    }
}

/// A tensor as `_rebuild_tensor_v2` / `v3` describe it: a strided view of a storage.
#[derive(Debug)]
pub(crate) struct TensorRef {
    /// The storage it views.
    pub storage: Rc<StorageRef>,
    /// Its element type (the storage's, or `_rebuild_tensor_v3`'s `dtype`).
    pub dtype: TorchDType,
    /// Offset of its first element in the storage, in elements.
    pub offset: usize,
    /// Sizes.
    pub size: Vec<usize>,
    /// Strides in elements.
    pub stride: Vec<usize>,
    /// torch's neg bit (`torch._neg_view`): the values read negated.
    pub negative: bool,
}

/// What the pickle of a checkpoint makes beyond plain values.
#[derive(Clone, Debug)]
pub(crate) enum TorchObject {
    /// `collections.OrderedDict`.
    OrderedDict,
    /// `torch._utils._rebuild_tensor_v2`.
    RebuildTensorV2,
    /// `torch._utils._rebuild_tensor_v3`.
    RebuildTensorV3,
    /// `torch._utils._rebuild_parameter`.
    RebuildParameter,
    /// A storage class (`torch.FloatStorage`, `torch.UntypedStorage`).
    StorageClass(TorchDType),
    /// A dtype (`torch.float32`).
    DType(TorchDType),
    /// A storage that a persistent id named.
    Storage(Rc<StorageRef>),
    /// A tensor.
    Tensor(Rc<TensorRef>),
}

impl TorchObject {
    /// The Python name of a global, or what the object is.
    pub(crate) fn describe(&self) -> String {
        match self {
            TorchObject::OrderedDict => "`collections.OrderedDict`".into(),
            TorchObject::RebuildTensorV2 => "`torch._utils._rebuild_tensor_v2`".into(),
            TorchObject::RebuildTensorV3 => "`torch._utils._rebuild_tensor_v3`".into(),
            TorchObject::RebuildParameter => "`torch._utils._rebuild_parameter`".into(),
            TorchObject::StorageClass(t) => format!("`torch.{}`", t.storage.unwrap_or(t.name)),
            TorchObject::DType(t) => format!("`torch.{}`", t.name),
            TorchObject::Storage(s) => format!("storage {}", s.key),
            TorchObject::Tensor(_) => "a tensor".into(),
        }
    }
}

/// A value of a checkpoint's pickle.
pub(crate) type TorchValue = Value<TorchObject>;

/// The [`Machine`] for `torch.save` pickles (both formats); it keeps the storages that the
/// persistent ids named.
#[derive(Default)]
pub(crate) struct TorchMachine {
    storages: HashMap<String, Rc<StorageRef>>,
}

/// An error about a call's arguments: the file is not what `torch.save` writes.
fn bad_args(func: &TorchObject, why: impl std::fmt::Display) -> ReadError {
    ReadError::corrupt(format!("{} is called with {why}", func.describe()))
}

/// A non-negative integer that fits `usize`.
fn index(v: &TorchValue) -> Option<usize> {
    match v {
        Value::Int(i) => usize::try_from(*i).ok(),
        _ => None,
    }
}

/// A tuple of non-negative integers (a size or a stride).
fn indices(v: &TorchValue) -> Option<Vec<usize>> {
    match v {
        Value::Tuple(t) => t.items().iter().map(index).collect(),
        _ => None,
    }
}

/// Whether `_rebuild_tensor`'s metadata sets the neg bit; an error for any other bit.
fn neg_bit(func: &TorchObject, metadata: Option<&TorchValue>) -> PResult<bool> {
    let Some(metadata) = metadata else { return Ok(false) };
    let Value::Dict(d) = metadata else { return Err(bad_args(func, "metadata that is not a dict")) };
    let mut negative = false;
    for (key, value) in d.items() {
        match (key.to_string().as_str(), value) {
            ("neg", Value::Bool(b)) => negative = b,
            (_, Value::Bool(false)) => {}
            (other, _) => {
                return Err(ReadError::unsupported(format!(
                    "a tensor has torch's `{other}` bit set, which kiln does not read"
                )))
            }
        }
    }
    Ok(negative)
}

impl TorchMachine {
    /// The storage named `key` (as the first persistent id that named it described it).
    pub(crate) fn storage(&self, key: &str) -> Option<Rc<StorageRef>> {
        self.storages.get(key).cloned()
    }

    /// `_rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata])`
    /// and `_rebuild_tensor_v3(…, hooks, dtype[, metadata])`.
    fn rebuild_tensor(func: &TorchObject, args: &[TorchValue]) -> PResult<TorchValue> {
        let v3 = matches!(func, TorchObject::RebuildTensorV3);
        let arity = if v3 { 7 } else { 6 };
        if args.len() != arity && args.len() != arity + 1 {
            return Err(bad_args(func, format!("{} arguments", args.len())));
        }
        let Value::Object(TorchObject::Storage(storage)) = &args[0] else {
            return Err(bad_args(func, format!("a {} for its storage", args[0].type_name())));
        };
        let (Some(offset), Some(size), Some(stride)) = (index(&args[1]), indices(&args[2]), indices(&args[3])) else {
            return Err(bad_args(func, "an offset, size or stride that is not made of non-negative integers"));
        };
        if size.len() != stride.len() {
            return Err(bad_args(func, format!("{} sizes but {} strides", size.len(), stride.len())));
        }
        let dtype = match (v3, &args[6..]) {
            (false, _) => storage.dtype,
            (true, [Value::Object(TorchObject::DType(t)), ..]) => *t,
            (true, other) => {
                let what = other.first().map_or("nothing", |v| v.type_name());
                return Err(bad_args(func, format!("a {what} for its dtype")));
            }
        };
        let negative = neg_bit(func, args.get(arity))?;
        let tensor = TensorRef { storage: storage.clone(), dtype, offset, size, stride, negative };
        Ok(Value::Object(TorchObject::Tensor(Rc::new(tensor))))
    }
}

impl Machine for TorchMachine {
    type Object = TorchObject;

    fn find_class(&mut self, module: &str, name: &str) -> PResult<TorchObject> {
        let object = match (module, name) {
            ("collections", "OrderedDict") => Some(TorchObject::OrderedDict),
            ("torch._utils", "_rebuild_tensor_v2") => Some(TorchObject::RebuildTensorV2),
            ("torch._utils", "_rebuild_tensor_v3") => Some(TorchObject::RebuildTensorV3),
            ("torch._utils", "_rebuild_parameter") => Some(TorchObject::RebuildParameter),
            ("torch" | "torch.storage", "UntypedStorage") => Some(TorchObject::StorageClass(UNTYPED)),
            ("torch", _) => DTYPES.iter().find_map(|t| {
                (t.storage == Some(name))
                    .then_some(TorchObject::StorageClass(*t))
                    .or((t.name == name).then_some(TorchObject::DType(*t)))
            }),
            _ => None,
        };
        object.ok_or_else(|| {
            ReadError::unsupported(format!(
                "the pickle names `{module}.{name}`, which kiln does not run (it rebuilds only tensors and dicts); \
                 if the file was written by `torch.save(model)`, save `model.state_dict()` instead"
            ))
        })
    }

    /// `('storage', storage class, key, location, numel)`, and in the legacy format a sixth
    /// item, the storage view (`None` since PyTorch 0.4). The location (`cpu`, `cuda:0`) is
    /// not used: kiln loads every tensor on the CPU.
    fn persistent_load(&mut self, pid: TorchValue) -> PResult<TorchValue> {
        let Value::Tuple(pid) = pid else {
            return Err(ReadError::corrupt(format!("a persistent id is a {}, not a tuple", pid.type_name())));
        };
        let items = pid.items();
        match &items[..] {
            [Value::Str(kind), Value::Object(TorchObject::StorageClass(dtype)), Value::Str(key), Value::Str(_), numel, view @ ..]
                if &**kind == "storage" && view.len() <= 1 =>
            {
                if view.iter().any(|v| !matches!(v, Value::None)) {
                    return Err(ReadError::unsupported(format!(
                        "storage {key} is a storage view (PyTorch before 0.4), which kiln does not read"
                    )));
                }
                let Some(numel) = index(numel) else {
                    return Err(ReadError::corrupt(format!("storage {key} has a size that is not a count")));
                };
                let storage = Rc::new(StorageRef { key: key.to_string(), dtype: *dtype, numel });
                self.storages.entry(storage.key.clone()).or_insert_with(|| storage.clone());
                Ok(Value::Object(TorchObject::Storage(storage)))
            }
            _ => Err(ReadError::corrupt(format!(
                "a persistent id ({} items) is not a storage's ('storage', class, key, location, size)",
                items.len()
            ))),
        }
    }

    fn reduce(&mut self, func: TorchObject, args: Vec<TorchValue>) -> PResult<TorchValue> {
        match &func {
            TorchObject::OrderedDict if args.is_empty() => Ok(Value::Dict(Rc::new(super::pickle::Dict::new()))),
            TorchObject::RebuildTensorV2 | TorchObject::RebuildTensorV3 => Self::rebuild_tensor(&func, &args),
            TorchObject::RebuildParameter => match &args[..] {
                [tensor @ Value::Object(TorchObject::Tensor(_)), Value::Bool(_), Value::Dict(_)] => Ok(tensor.clone()),
                _ => Err(bad_args(&func, "arguments other than (tensor, requires_grad, hooks)")),
            },
            _ => Err(ReadError::unsupported(format!(
                "the pickle calls {} with {} arguments, which kiln does not run",
                func.describe(),
                args.len()
            ))),
        }
    }

    /// An `OrderedDict`'s state (a module's `_metadata` of versions) is dropped; nothing else
    /// takes a state.
    fn build(&mut self, obj: TorchValue, state: TorchValue) -> PResult<TorchValue> {
        match obj {
            Value::Dict(_) => Ok(obj),
            other => Err(ReadError::unsupported(format!(
                "the pickle sets the state of a {} (to a {}), which kiln does not run",
                match &other {
                    Value::Object(o) => o.describe(),
                    v => v.type_name().to_string(),
                },
                state.type_name()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::serialize::pickle::load;

    /// The error of loading `p`, which must say `says`.
    fn refused(p: &[u8], says: &str) -> ReadError {
        let e = load(p, &mut TorchMachine::default()).err().expect("an error");
        assert!(e.message.contains(says), "{}\nshould say: {says}", e.message);
        e
    }

    #[test]
    fn globals_outside_the_list_are_refused_by_name() {
        for (pickle, name) in [
            (&b"\x80\x02c__main__\nNet\n)\x81."[..], "`__main__.Net`"),
            (b"cos\nsystem\nX\x02\x00\x00\x00ls\x85R.", "`os.system`"),
            (b"cbuiltins\neval\n.", "`builtins.eval`"),
            (b"ctorch\nload\n.", "`torch.load`"),
            (b"ctorch._utils\n_rebuild_tensor\n.", "`torch._utils._rebuild_tensor`"),
        ] {
            let e = refused(pickle, name);
            assert_eq!(e.kind, ErrorKind::Unsupported, "{}", e.message);
            assert!(e.message.contains("model.state_dict()"), "{}", e.message);
        }
    }

    #[test]
    fn allowed_globals_cannot_be_called_other_ways() {
        // torch.FloatStorage(), OrderedDict([..]), a storage's BUILD.
        refused(b"ctorch\nFloatStorage\n)R.", "calls `torch.FloatStorage` with 0 arguments");
        refused(b"ccollections\nOrderedDict\n]\x85R.", "calls `collections.OrderedDict` with 1 arguments");
        refused(b"ctorch\nfloat32\nNb.", "sets the state of a `torch.float32`");
        refused(
            b"ctorch._utils\n_rebuild_parameter\nK\x01\x85R.",
            "_rebuild_parameter` is called with arguments other than",
        );
    }

    #[test]
    fn storage_ids_and_tensor_arguments_are_checked() {
        refused(b"X\x07\x00\x00\x00storage\x85Q.", "persistent id (1 items) is not a storage's");
        // A legacy storage view: ('storage', FloatStorage, '0', 'cpu', 4, ('1', 0, 2)).
        refused(
            b"(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x04K\x00tQ.",
            "storage 0 is a storage view",
        );
        let storage =
            &b"(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x04tQ"[..];
        let rebuild = |rest: &[u8]| [&b"ctorch._utils\n_rebuild_tensor_v2\n("[..], storage, rest, &b"tR."[..]].concat();
        refused(&rebuild(b"K\x00K\x02\x85K\x01\x85\x89"), "called with 5 arguments");
        refused(&rebuild(b"K\x00K\x02K\x02\x86K\x01\x85\x89}"), "2 sizes but 1 strides");
        refused(&rebuild(b"J\xff\xff\xff\xffK\x02\x85K\x01\x85\x89}"), "not made of non-negative integers");
        let e = refused(&rebuild(b"K\x00K\x02\x85K\x01\x85\x89}(X\x04\x00\x00\x00conj\x88d"), "`conj` bit");
        assert_eq!(e.kind, ErrorKind::Unsupported);
        // A v3 call must name its dtype.
        refused(
            &[&b"ctorch._utils\n_rebuild_tensor_v3\n("[..], storage, &b"K\x00K\x02\x85K\x01\x85\x89}NtR."[..]].concat(),
            "_rebuild_tensor_v3` is called with a None for its dtype",
        );
        let (value, _) = load(&rebuild(b"K\x01K\x02\x85K\x01\x85\x89}"), &mut TorchMachine::default()).unwrap();
        let Value::Object(TorchObject::Tensor(t)) = value else { panic!("a tensor") };
        assert_eq!((t.offset, &t.size[..], &t.stride[..], t.dtype.kiln), (1, &[2][..], &[1][..], Some(DType::F32)));
        assert_eq!((t.storage.key.as_str(), t.storage.numel, t.storage.nbytes()), ("0", 4, Some(16)));
    }
}
