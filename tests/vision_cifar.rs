//! `kiln::vision::datasets::CIFAR10` on small binary files written here, and the transforms
//! (`ToTensor`, `Normalize`, `Compose`, `RandomCrop`, `RandomHorizontalFlip`).

use kiln::data::{seed_item_generator, DataLoader, Dataset};
use kiln::vision::datasets::{Split, CIFAR10};
use kiln::vision::transforms::{Compose, Lambda, Normalize, RandomCrop, RandomHorizontalFlip, ToTensor, Transform};
use kiln::vision::{Image, Pixels};
use kiln::{DType, ErrorKind, Tensor};
use std::path::{Path, PathBuf};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kiln-vision-cifar-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `n` records: label `(first + i) % 10`, then pixel `p` = `(first + i + 3 * p) % 256`.
fn records(first: usize, n: usize) -> Vec<u8> {
    let mut out = vec![];
    for i in first..first + n {
        out.push((i % 10) as u8);
        out.extend((0..3072).map(|p| ((i + 3 * p) % 256) as u8));
    }
    out
}

/// A CIFAR-10 folder: 2 records in each training batch, 3 in the test batch.
fn cifar_dir(name: &str) -> PathBuf {
    let dir = temp_dir(name);
    for b in 1..=5 {
        std::fs::write(dir.join(format!("data_batch_{b}.bin")), records(2 * (b - 1), 2)).unwrap();
    }
    std::fs::write(dir.join("test_batch.bin"), records(100, 3)).unwrap();
    dir
}

#[test]
fn reads_the_binary_batches() {
    let dir = cifar_dir("ok");
    let train = CIFAR10::new(&dir, Split::Train).unwrap();
    let test = CIFAR10::new(&dir, Split::Test).unwrap();
    assert_eq!((train.len(), test.len()), (10, 3));
    assert_eq!(train.targets().to_vec::<i64>(), (0..10).collect::<Vec<i64>>());
    let (x, y) = train.get(7);
    assert_eq!((x.shape(), x.dtype(), y), (&[3usize, 32, 32][..], DType::F32, 7));
    // Channel-first: element [c, row, col] is byte 1 + c * 1024 + row * 32 + col of the record.
    let v = x.to_vec::<f32>();
    for (c, r, col) in [(0, 0, 0), (1, 5, 9), (2, 31, 31)] {
        let p = c * 1024 + r * 32 + col;
        assert_eq!(v[p], ((7 + 3 * p) % 256) as f32 / 255.0);
    }
    assert_eq!(test.get(2).1, 2); // record 102
                                  // The archive's folder name is found too.
    let nested = temp_dir("nested");
    std::fs::rename(&dir, nested.join("cifar-10-batches-bin")).unwrap();
    assert_eq!(CIFAR10::new(&nested, Split::Test).unwrap().len(), 3);
}

fn cifar_err(name: &str, edit: impl Fn(&Path)) -> kiln::Error {
    let dir = cifar_dir(name);
    edit(&dir);
    CIFAR10::new(&dir, Split::Train).err().unwrap_or_else(|| panic!("{name}: accepted"))
}

#[test]
fn corrupt_files_are_errors_naming_the_file() {
    let e = cifar_err("short", |d| std::fs::write(d.join("data_batch_3.bin"), &records(4, 2)[..5000]).unwrap());
    assert!(
        e.to_string().contains("data_batch_3.bin")
            && e.to_string().contains("1 whole records and 1927 bytes left over"),
        "{e}"
    );
    assert_eq!(e.kind, ErrorKind::Value);
    let e = cifar_err("label", |d| {
        let mut r = records(8, 2);
        r[3073] = 10;
        std::fs::write(d.join("data_batch_5.bin"), r).unwrap()
    });
    assert!(e.to_string().contains("data_batch_5.bin") && e.to_string().contains("label 10 of record 1"), "{e}");
    let e = cifar_err("missing", |d| std::fs::remove_file(d.join("data_batch_2.bin")).unwrap());
    assert!(e.to_string().contains("cannot find data_batch_2.bin"), "{e}");
    assert_eq!(e.kind, ErrorKind::Io);
    let e = cifar_err("empty", |d| std::fs::write(d.join("data_batch_1.bin"), b"").unwrap());
    assert!(e.to_string().contains("data_batch_1.bin") && e.to_string().contains("empty"), "{e}");
    let e = cifar_err("gz", |d| std::fs::write(d.join("data_batch_4.bin"), [0x1f, 0x8b, 8, 0, 1, 2, 3]).unwrap());
    assert!(e.to_string().contains("data_batch_4.bin") && e.to_string().contains("gzip"), "{e}");
}

/// A 3x4x5 image whose byte at (c, y, x) is `c * 100 + y * 10 + x`.
fn pixels() -> Pixels {
    let data =
        (0..3).flat_map(|c| (0..4).flat_map(move |y| (0..5).map(move |x| (c * 100 + y * 10 + x) as u8))).collect();
    Pixels::new(data, 3, 4, 5).unwrap()
}

fn tensor(image: Image) -> Tensor {
    match image {
        Image::Tensor(t) => t,
        Image::Pixels(_) => panic!("expected a tensor"),
    }
}

#[test]
fn to_tensor_and_normalize() {
    let p = pixels();
    let t = tensor(ToTensor.apply(Image::Pixels(p.clone())).unwrap());
    assert_eq!((t.shape(), t.dtype()), (&[3usize, 4, 5][..], DType::F32));
    let want: Vec<f32> = p.data().iter().map(|&b| b as f32 / 255.0).collect();
    assert_eq!(t.to_vec::<f32>(), want);
    // A u8 tensor converts like pixels.
    assert_eq!(tensor(ToTensor.apply(Image::Tensor(p.to_u8_tensor())).unwrap()).to_vec::<f32>(), want);

    let (mean, std) = ([0.5, 0.25, 0.125], [0.2, 0.3, 0.4]);
    let norm = Normalize::new(&mean, &std);
    let expect: Vec<f32> = p
        .data()
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            let c = i / 20;
            (b as f32 / 255.0 - mean[c] as f32) / std[c] as f32
        })
        .collect();
    // Separate steps on a tensor, and the fused path on pixels, give the same f32 values.
    let separate = tensor(norm.apply(Image::Tensor(t.clone())).unwrap()).to_vec::<f32>();
    let fused = tensor(Compose::new((ToTensor, norm.clone())).apply(Image::Pixels(p.clone())).unwrap()).to_vec::<f32>();
    for (i, ((a, b), e)) in separate.iter().zip(&fused).zip(&expect).enumerate() {
        assert!((a - e).abs() <= 1e-6 * e.abs().max(1.0), "element {i}: {a} vs {e}");
        assert_eq!(b.to_bits(), e.to_bits(), "fused element {i}");
    }
    // Two Normalizes in a row fuse too.
    let twice = Compose::new((ToTensor, Normalize::new(&[0.5], &[0.5]), Normalize::new(&[1.0], &[2.0])));
    let v = tensor(twice.apply(Image::Pixels(p.clone())).unwrap()).to_vec::<f32>();
    assert_eq!(v[7], ((p.data()[7] as f32 / 255.0 - 0.5) / 0.5 - 1.0) / 2.0);

    // Errors.
    assert!(Normalize::try_new(&[0.5], &[0.0]).is_err());
    assert!(Normalize::try_new(&[0.5, 0.5], &[1.0]).is_err());
    let e = Normalize::new(&[0.5, 0.5], &[1.0, 1.0]).apply(Image::Tensor(t.clone())).err().unwrap();
    assert!(e.to_string().contains("3 channels"), "{e}");
    assert!(norm.apply(Image::Pixels(p.clone())).is_err(), "Normalize needs ToTensor first");
    assert!(Compose::new((ToTensor, Normalize::new(&[0.5, 0.5], &[1.0, 1.0]))).apply(Image::Pixels(p)).is_err());
}

/// Every 5x5 window (top, left) of `image` (c, h, w) padded by `pad` zeros, as bytes.
fn window(p: &Pixels, pad: usize, size: usize, top: usize, left: usize) -> Vec<u8> {
    let (h, w) = (p.height(), p.width());
    let mut out = vec![];
    for c in 0..p.channels() {
        for y in top..top + size {
            for x in left..left + size {
                let inside = y >= pad && x >= pad && y - pad < h && x - pad < w;
                out.push(if inside { p.data()[c * h * w + (y - pad) * w + (x - pad)] } else { 0 });
            }
        }
    }
    out
}

#[test]
fn random_crop_is_a_padded_window_and_seeded() {
    let p = pixels();
    let crop = RandomCrop::new(5).padding(2);
    let mut seen = std::collections::HashSet::new();
    for seed in 0..60 {
        seed_item_generator(Some(seed));
        let out = match crop.apply(Image::Pixels(p.clone())).unwrap() {
            Image::Pixels(o) => o,
            Image::Tensor(_) => panic!("pixels stay pixels"),
        };
        assert_eq!(out.shape(), [3, 5, 5]);
        // It is one of the (4 + 4 - 5 + 1) x (5 + 4 - 5 + 1) windows of the padded image.
        let pos = (0..4).flat_map(|t| (0..5).map(move |l| (t, l))).find(|&(t, l)| window(&p, 2, 5, t, l) == out.data());
        let pos = pos.expect("the crop is a window of the padded image");
        seen.insert(pos);
        // The same seed crops the same window, and on a float tensor the same values.
        seed_item_generator(Some(seed));
        let t = tensor(crop.apply(Image::Tensor(p.to_u8_tensor().to_dtype(DType::F32))).unwrap());
        assert_eq!(t.to_vec::<f32>(), out.data().iter().map(|&b| b as f32).collect::<Vec<f32>>());
    }
    assert!(seen.len() >= 12, "positions vary with the seed: {seen:?}");
    seed_item_generator(Some(1));
    assert!(RandomCrop::new(9).apply(Image::Pixels(p.clone())).is_err(), "crop larger than the image");
    let same = RandomCrop::with_size(4, 5).apply(Image::Pixels(p.clone())).unwrap();
    assert!(matches!(same, Image::Pixels(ref o) if o == &p), "a full-size crop without padding is the image");
    seed_item_generator(None);
}

#[test]
fn random_horizontal_flip() {
    let p = pixels();
    let mirrored: Vec<u8> = p.data().chunks(5).flat_map(|row| row.iter().rev().copied()).collect();
    let flip = |f: RandomHorizontalFlip, img: Image| f.apply(img).unwrap();
    match flip(RandomHorizontalFlip::new(1.0), Image::Pixels(p.clone())) {
        Image::Pixels(o) => assert_eq!(o.data(), &mirrored[..]),
        Image::Tensor(_) => panic!(),
    }
    match flip(RandomHorizontalFlip::new(0.0), Image::Pixels(p.clone())) {
        Image::Pixels(o) => assert_eq!(o, p),
        Image::Tensor(_) => panic!(),
    }
    let t = tensor(flip(RandomHorizontalFlip::new(1.0), Image::Tensor(p.to_tensor())));
    assert_eq!(t.to_vec::<f32>(), mirrored.iter().map(|&b| b as f32 / 255.0).collect::<Vec<f32>>());

    seed_item_generator(Some(9));
    let draws: Vec<bool> = (0..400)
        .map(|_| matches!(flip(RandomHorizontalFlip::default(), Image::Pixels(p.clone())), Image::Pixels(o) if o != p))
        .collect();
    let flipped = draws.iter().filter(|&&f| f).count();
    assert!((150..250).contains(&flipped), "p = 0.5 flipped {flipped} of 400");
    seed_item_generator(Some(9));
    let again: Vec<bool> = (0..400)
        .map(|_| matches!(flip(RandomHorizontalFlip::default(), Image::Pixels(p.clone())), Image::Pixels(o) if o != p))
        .collect();
    assert_eq!(draws, again, "deterministic per seed");
    assert!(RandomHorizontalFlip::try_new(1.5).is_err());
    seed_item_generator(None);
}

#[test]
fn augmented_loader_is_reproducible_across_workers() {
    let dir = cifar_dir("loader");
    let train = CIFAR10::new(&dir, Split::Train).unwrap().transform(Compose::new((
        RandomCrop::new(32).padding(4),
        RandomHorizontalFlip::new(0.5),
        ToTensor,
        Normalize::new(&[0.4914, 0.4822, 0.4465], &[0.2470, 0.2435, 0.2616]),
    )));
    let run = |workers| {
        let loader = DataLoader::new(train.clone()).batch_size(4).shuffle(true).seed(5).num_workers(workers);
        (0..2)
            .map(|_| loader.iter().map(|(x, y)| (x.to_vec::<f32>(), y.to_vec::<i64>())).collect::<Vec<_>>())
            .collect::<Vec<_>>()
    };
    let serial = run(0);
    assert_eq!(serial[0].len(), 3);
    assert_eq!(serial[0][0].0.len(), 4 * 3 * 32 * 32);
    assert!(serial == run(3), "augmentation does not depend on num_workers");
    assert!(serial[0] != serial[1], "each epoch augments anew");

    // A Lambda that fails makes the dataset panic, naming the item.
    let failing = CIFAR10::new(&dir, Split::Test)
        .unwrap()
        .transform(Lambda::new(|_| Err(kiln::Error::new("mine", ErrorKind::Value, "nope"))));
    let payload = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| failing.get(1))).unwrap_err();
    let message = payload.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("CIFAR10: the transform failed on item 1") && message.contains("nope"), "{message}");
    // Pixels left by a transform get ToTensor.
    let flipped_only = CIFAR10::new(&dir, Split::Test).unwrap().transform(RandomHorizontalFlip::new(0.0));
    assert_eq!(flipped_only.get(0).0.dtype(), DType::F32);
}

/// The blitz example (`examples/cifar10_blitz.rs`) end to end on a folder of files in the
/// official binary format: it trains, saves its checkpoint and reports the test accuracy of
/// the 3 test images, eager and compiled. `cargo test` builds the examples beside the test
/// binaries; a run that did not build them (`--test vision_cifar` alone) says that it skips.
#[test]
fn blitz_example_trains_on_files_in_the_format() {
    let exe = std::env::current_exe().unwrap();
    let example = exe
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("examples")
        .join(format!("cifar10_blitz{}", std::env::consts::EXE_SUFFIX));
    if !example.exists() {
        println!("skipped: {} is not built (the README's `cargo test` command builds it)", example.display());
        return;
    }
    let dir = cifar_dir("example");
    for compile in [false, true] {
        let mut cmd = std::process::Command::new(&example);
        cmd.current_dir(&dir).args([
            "--data-dir",
            ".",
            "--epochs",
            "2",
            "--batch-size",
            "2",
            "--num-workers",
            "1",
            "--log-interval",
            "5",
        ]);
        if compile {
            cmd.arg("--compile");
        }
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "compile {compile}: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
        // 10 training images in batches of 2: one running-loss line per epoch.
        assert_eq!(stdout.lines().filter(|l| l.contains("] loss: ")).count(), 2, "{stdout}");
        assert!(stdout.contains("Finished Training"), "{stdout}");
        assert!(stdout.contains("Accuracy of the network on the 3 test images: "), "{stdout}");
        assert_eq!(stdout.lines().filter(|l| l.starts_with("Accuracy for class: ")).count(), 10, "{stdout}");
        let saved = kiln::load(dir.join("cifar_net.safetensors")).unwrap();
        assert_eq!(saved.get("conv1.weight").expect("conv1.weight saved").shape(), &[6, 3, 5, 5]);
    }
}
