//! `kiln::load_pth` (and `kiln::load`) on checkpoints written by `torch.save`
//! (tests/fixtures/pth, made by scripts/fixtures_pth.py): names, order, dtypes, shapes and
//! values bit for bit against `expected.safetensors`, in the zip format and the legacy format,
//! each with pickle protocols 2 and 4; nested checkpoints flattened with dots; a loaded state dict running
//! in a kiln network as in PyTorch; and files that are cut short, corrupt, pickle a module or
//! other code, or hold what a state dict does not, refused with errors naming the file,
//! never a panic. The malformed legacy files are written here, pickle by pickle; every cut and
//! corrupted byte of the fixtures is tried by the unit tests of src/serialize/pth.rs.

use kiln::nn::{self, Module};
use kiln::prelude::*;
use kiln::ErrorKind;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pth").join(name)
}

fn expected() -> StateDict {
    kiln::load(fixture("expected.safetensors")).unwrap()
}

/// The values' bits, widened to u64, for any dtype.
fn bits(t: &Tensor) -> Vec<u64> {
    let t = t.contiguous();
    match t.dtype() {
        DType::F32 => t.to_vec::<f32>().iter().map(|v| v.to_bits().into()).collect(),
        DType::F64 => t.to_vec::<f64>().iter().map(|v| v.to_bits()).collect(),
        DType::F16 => t.to_vec::<half::f16>().iter().map(|v| v.to_bits().into()).collect(),
        DType::BF16 => t.to_vec::<half::bf16>().iter().map(|v| v.to_bits().into()).collect(),
        DType::I64 => t.to_vec::<i64>().iter().map(|&v| v as u64).collect(),
        DType::I32 => t.to_vec::<i32>().iter().map(|&v| v as u32 as u64).collect(),
        DType::U8 => t.to_vec::<u8>().iter().map(|&v| v.into()).collect(),
        DType::Bool => t.to_vec::<bool>().iter().map(|&v| v.into()).collect(),
    }
}

/// `got` has `want`'s dtype, shape and bits.
fn assert_same(name: &str, got: &Tensor, want: &Tensor) {
    assert_eq!((got.dtype(), got.shape()), (want.dtype(), want.shape()), "{name}");
    assert_eq!(bits(got), bits(want), "{name}");
}

/// `sd` holds the tensors `names`, in that order, each as `expected.safetensors` holds it
/// under `prefix` + its name.
fn assert_tensors(sd: &StateDict, names: &[&str], prefix: &str) {
    assert_eq!(sd.keys().collect::<Vec<_>>(), names, "PyTorch's names in its order");
    let want = expected();
    for name in names {
        assert_same(name, sd.get(name).unwrap(), want.get(&format!("{prefix}{name}")).unwrap());
    }
}

const TENSORS: [&str; 18] = [
    "f32",
    "f64",
    "f16",
    "bf16",
    "i64",
    "i32",
    "u8",
    "bool",
    "transposed",
    "strided",
    "shared_a",
    "shared_b",
    "tied_a",
    "tied_b",
    "scalar",
    "empty",
    "expanded",
    "negative",
];

#[test]
fn every_dtype_and_layout_loads_bit_exact_in_each_format() {
    for file in ["tensors.pth", "tensors_legacy.pth", "tensors_protocol4.pth", "tensors_legacy_protocol4.pth"] {
        let sd = kiln::load_pth(fixture(file)).unwrap();
        assert_tensors(&sd, &TENSORS, "");
        for name in TENSORS {
            let t = sd.get(name).unwrap();
            assert!(t.device().is_cpu() && !t.requires_grad(), "{file}: {name}");
            if name != "expanded" {
                assert!(t.is_contiguous(), "{file}: {name} is copied contiguous");
            }
        }
        let shapes: Vec<&[usize]> = ["transposed", "shared_b", "scalar", "empty", "expanded"]
            .iter()
            .map(|n| sd.get(n).unwrap().shape())
            .collect();
        assert_eq!(shapes, [&[3, 2][..], &[2, 2], &[], &[0, 3], &[2, 3]], "{file}");
        assert_eq!(sd.get("shared_a").unwrap().to_vec::<f32>(), [1.0, 1.5, 2.0], "{file}: offset 2 of the storage");
        assert_eq!(sd.get("negative").unwrap().to_vec::<f32>(), [-1.0, 2.0, -0.0], "{file}: the neg bit applied");
        assert!(sd.metadata_entries().is_empty(), "{file}");
    }
}

#[test]
fn a_module_state_dict_keeps_its_names_order_and_buffers() {
    let sd = kiln::load_pth(fixture("sequential.pth")).unwrap();
    let names: Vec<&str> = "0.weight 0.bias 1.weight 1.bias 1.running_mean 1.running_var
        1.num_batches_tracked 4.weight 4.bias"
        .split_whitespace()
        .collect();
    assert_tensors(&sd, &names, "sequential/");
    let batches = sd.get("1.num_batches_tracked").unwrap();
    assert_eq!((batches.dtype(), batches.shape(), batches.item::<i64>()), (DType::I64, &[][..], 2));
    assert!(sd.metadata_entries().is_empty(), "a module's _metadata (versions) is not kept");
}

#[test]
fn kiln_load_reads_a_pth_into_a_kiln_network_that_computes_what_pytorch_did() {
    let want = expected();
    let mut net = nn::Sequential::new()
        .add(nn::Conv2d::new(1, 2, 3))
        .add(nn::BatchNorm2d::new(2))
        .add(nn::ReLU)
        .add(nn::Flatten::new())
        .add(nn::Linear::new(8, 3));
    net.load_state_dict(&kiln::load(fixture("sequential.pth")).unwrap()).unwrap();
    net.eval();
    let out = kiln::no_grad(|| net.forward(want.get("sequential/input").unwrap()));
    let torch_out = want.get("sequential/output").unwrap();
    assert_eq!(out.shape(), torch_out.shape());
    for (got, want) in out.to_vec::<f32>().iter().zip(torch_out.to_vec::<f32>()) {
        assert!((got - want).abs() <= 1e-6 * want.abs().max(1.0), "{got} vs PyTorch's {want}");
    }
}

#[test]
fn a_checkpoint_dict_flattens_with_dots_and_keeps_its_numbers_as_metadata() {
    let sd = kiln::load(fixture("checkpoint.pth")).unwrap();
    let names: Vec<&str> = "model.weight model.bias
        optimizer.state.0.step optimizer.state.0.exp_avg optimizer.state.0.exp_avg_sq
        optimizer.state.1.step optimizer.state.1.exp_avg optimizer.state.1.exp_avg_sq params.w"
        .split_whitespace()
        .collect();
    assert_tensors(&sd, &names, "");
    let meta = |k: &str| sd.metadata(k).unwrap_or_else(|| panic!("metadata {k}"));
    assert_eq!(
        [meta("epoch"), meta("note"), meta("best"), meta("none"), meta("flags")],
        ["3", "run 1", "0.25", "None", "true,false"]
    );
    let group = |k: &str| meta(&format!("optimizer.param_groups.0.{k}"));
    assert_eq!(
        [group("lr"), group("betas"), group("eps"), group("amsgrad"), group("foreach"), group("params")],
        ["0.01", "0.9,0.999", "1e-8", "false", "None", "0,1"]
    );
    // The model's part loads into a kiln Linear under its own names.
    let mut part = StateDict::new();
    for (name, t) in sd.iter() {
        if let Some(rest) = name.strip_prefix("model.") {
            part.insert(rest, t.clone());
        }
    }
    let mut linear = nn::Linear::new(3, 2);
    linear.load_state_dict(&part).unwrap();
    assert_same("weight", linear.state_dict().get("weight").unwrap(), sd.get("model.weight").unwrap());
}

/// The error of loading `path`, with the line that called `load_pth`.
fn load_error(path: &Path) -> (kiln::Error, u32) {
    let line = line!() + 1;
    (kiln::load_pth(path).expect_err("an error"), line)
}

#[test]
fn dtypes_kiln_lacks_are_errors_naming_the_tensor_and_the_dtype() {
    for (file, says) in [
        ("int8.pth", "tensor small has dtype torch.int8, which kiln does not have"),
        ("int16.pth", "tensor short has dtype torch.int16"),
        ("uint16.pth", "tensor wide has dtype torch.uint16"),
    ] {
        let path = fixture(file);
        let (err, line) = load_error(&path);
        assert_eq!((err.op, err.kind), ("load_pth", ErrorKind::DType), "{err}");
        assert!(err.message.starts_with(&format!("{}: {says}", path.display())), "{err}");
        assert!(err.location.file().ends_with("pth.rs") && err.location.line() == line, "{err}");
    }
}

#[test]
fn a_pickled_module_is_refused_naming_its_class() {
    let path = fixture("whole_module.pth");
    let (err, line) = load_error(&path);
    assert_eq!((err.kind, err.location.line()), (ErrorKind::Unsupported, line), "{err}");
    assert!(
        err.message
            .starts_with(&format!("{}: the pickle names `__main__.Net`, which kiln does not run", path.display())),
        "{err}"
    );
    assert!(err.message.contains("save `model.state_dict()` instead"), "{err}");
    let err = kiln::load(&path).unwrap_err();
    assert_eq!((err.op, err.kind), ("load", ErrorKind::Unsupported), "{err}");
}

#[test]
fn a_missing_storage_entry_is_an_error_naming_it() {
    let path = fixture("missing_storage.pth");
    let (err, _) = load_error(&path);
    assert_eq!(err.kind, ErrorKind::Io, "{err}");
    assert_eq!(err.message, format!("{}: has no entry missing_storage/data/1 for storage 1", path.display()));
}

#[test]
fn cut_short_files_are_io_errors_naming_the_file() {
    // Every cut and corrupted byte is tried in memory by the unit tests of src/serialize/pth.rs;
    // here a sample of cuts goes through the file.
    let path = std::env::temp_dir().join(format!("kiln-pth-cut-{}.pth", std::process::id()));
    for file in ["tensors.pth", "tensors_legacy.pth"] {
        let bytes = std::fs::read(fixture(file)).unwrap();
        for len in (0..bytes.len()).step_by(97).chain([bytes.len() - 1]) {
            std::fs::write(&path, &bytes[..len]).unwrap();
            let err = kiln::load(&path).expect_err("a prefix of a checkpoint");
            assert_eq!(err.kind, ErrorKind::Io, "{file} cut at {len}: {err}");
            assert!(err.message.contains(&path.display().to_string()), "{err}");
        }
    }
    std::fs::remove_file(&path).unwrap();
}

/// Pickles written by hand, for legacy files holding what `torch.save` of a state dict never
/// does.
mod legacy {
    /// The parts, one after the other.
    pub fn cat(parts: &[&[u8]]) -> Vec<u8> {
        parts.concat()
    }

    /// A string (`SHORT_BINUNICODE`).
    pub fn s(text: &str) -> Vec<u8> {
        cat(&[&[0x8c, text.len() as u8], text.as_bytes()])
    }

    /// A small integer (`BININT1`).
    pub fn int(v: u8) -> Vec<u8> {
        vec![b'K', v]
    }

    /// A tuple of the small integers `vs`.
    pub fn ints(vs: &[u8]) -> Vec<u8> {
        cat(&[b"(", &vs.iter().flat_map(|&v| int(v)).collect::<Vec<u8>>(), b"t"])
    }

    /// `_rebuild_tensor_v2` of f32 storage `key` (`numel` elements).
    pub fn tensor(key: &str, numel: u8, offset: u8, size: &[u8], stride: &[u8]) -> Vec<u8> {
        let pid = cat(&[b"(", &s("storage"), b"ctorch\nFloatStorage\n", &s(key), &s("cpu"), &int(numel), b"NtQ"]);
        let hooks = b"ccollections\nOrderedDict\n)R";
        cat(&[
            b"ctorch._utils\n_rebuild_tensor_v2\n(",
            &pid,
            &int(offset),
            &ints(size),
            &ints(stride),
            b"\x89",
            hooks,
            b"tR",
        ])
    }

    /// A dict of the (key pickle, value pickle) pairs.
    pub fn dict(items: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
        let pairs: Vec<u8> = items.iter().flat_map(|(k, v)| cat(&[k, v])).collect();
        cat(&[b"}(", &pairs, b"u"])
    }

    /// A legacy checkpoint of `object` (a pickle body, without `PROTO` and `STOP`) and the f32
    /// storages `(key, values)`.
    pub fn file(object: &[u8], storages: &[(&str, &[f32])]) -> Vec<u8> {
        let magic = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.\x80\x02M\xe9\x03.\x80\x02}.";
        let keys = cat(&[b"](", &storages.iter().flat_map(|(k, _)| s(k)).collect::<Vec<u8>>(), b"e"]);
        let mut out = cat(&[magic, b"\x80\x02", object, b".\x80\x02", &keys, b"."]);
        for (_, values) in storages {
            out.extend((values.len() as u64).to_le_bytes());
            out.extend(values.iter().flat_map(|v| v.to_le_bytes()));
        }
        out
    }
}

/// The error of loading the legacy file `bytes`.
fn legacy_error(bytes: &[u8]) -> kiln::Error {
    let path = std::env::temp_dir().join(format!("kiln-pth-legacy-{}-{}.pth", std::process::id(), bytes.len()));
    std::fs::write(&path, bytes).unwrap();
    let result = kiln::load_pth(&path);
    std::fs::remove_file(&path).unwrap();
    let err = result.expect_err("an error");
    assert!(err.message.starts_with(&format!("{}: ", path.display())), "{err}");
    err
}

#[test]
fn hand_written_legacy_files_load_and_what_no_state_dict_holds_is_refused() {
    use legacy::*;
    let storage: &[(&str, &[f32])] = &[("7", &[1.0, 2.0, 3.0, 4.0])];
    let t = |offset, size: &[u8], stride: &[u8]| tensor("7", 4, offset, size, stride);
    // The writer itself: a transposed view, read back.
    let path = std::env::temp_dir().join(format!("kiln-pth-legacy-ok-{}.pth", std::process::id()));
    std::fs::write(&path, file(&dict(&[(s("w"), t(0, &[2, 2], &[1, 2]))]), storage)).unwrap();
    let sd = kiln::load_pth(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(sd.get("w").unwrap().to_vec::<f32>(), [1.0, 3.0, 2.0, 4.0]);

    let cases: Vec<(Vec<u8>, &[(&str, &[f32])], ErrorKind, &str)> = vec![
        (t(0, &[4], &[1]), storage, ErrorKind::Value, "holds a tensor, not a dict of tensors"),
        (b"]".to_vec(), &[], ErrorKind::Value, "holds a list, not a dict of tensors"),
        (
            dict(&[(s("a.b"), t(0, &[1], &[1])), (s("a"), dict(&[(s("b"), t(1, &[1], &[1]))]))]),
            storage,
            ErrorKind::Value,
            "has two entries named a.b once nested names are joined with dots",
        ),
        (
            dict(&[(s("w"), t(2, &[2, 2], &[2, 1]))]),
            storage,
            ErrorKind::Io,
            "tensor w (offset 2, shape [2, 2], strides [2, 1]) reaches past the end of storage 7 (4 elements)",
        ),
        (dict(&[(s("w"), t(0, &[4], &[1]))]), &[("7", &[1.0, 2.0])], ErrorKind::Io, "is cut short or corrupt"),
        (dict(&[(s("w"), t(0, &[4], &[1]))]), &[], ErrorKind::Io, "has no data for storage 7"),
        (dict(&[(s("b"), b"C\x01x".to_vec())]), &[], ErrorKind::Unsupported, "holds bytes at b"),
        (dict(&[(s("d"), b"ctorch\nfloat32\n".to_vec())]), &[], ErrorKind::Unsupported, "holds `torch.float32` at d"),
        (
            dict(&[(s("k"), cat(&[b"cposix\nsystem\n", &s("ls"), b"\x85R"]))]),
            &[],
            ErrorKind::Unsupported,
            "the pickle names `posix.system`",
        ),
    ];
    for (object, storages, kind, says) in cases {
        let err = legacy_error(&file(&object, storages));
        assert_eq!((err.op, err.kind), ("load_pth", kind), "{err}");
        assert!(err.message.contains(says), "{err}\nshould say: {says}");
    }

    // Dicts nested 40 deep; and 30 levels of dicts that each hold the one below twice (2^30
    // paths through a pickle of a few hundred bytes).
    let mut deep = dict(&[(s("x"), int(1))]);
    for _ in 0..40 {
        deep = dict(&[(s("d"), deep)]);
    }
    let err = legacy_error(&file(&deep, &[]));
    assert!(err.message.contains("nests containers more than 32 deep"), "{err}");
    let mut shared = cat(&[&dict(&[(s("x"), int(1))]), b"q\x00"]);
    for _ in 0..30 {
        shared = cat(&[&dict(&[(s("a"), shared), (s("b"), b"h\x00".to_vec())]), b"q\x00"]);
    }
    let err = legacy_error(&file(&shared, &[]));
    assert!(err.message.contains("refers to shared containers more often than a state dict does"), "{err}");
}
