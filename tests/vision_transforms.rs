//! `kiln::vision::transforms::functional` and the transforms built on it, against
//! torchvision: `tests/fixtures/transforms.safetensors` (written by
//! `scripts/fixtures_transforms.py`) holds two random images and what torchvision made of
//! them as PIL images (compared byte for byte: Pillow's integer arithmetic) and as float
//! tensors (compared within 2e-6, or 1e-5 for resizes, whose sums run in another order).
//! Then the random transforms: sizes, seeding, ranges and errors.

use kiln::data::{with_item_generator, Dataset};
use kiln::vision::transforms::functional::{self as F, Size};
use kiln::vision::transforms::{
    CenterCrop, ColorJitter, Compose, RandomCrop, RandomResizedCrop, Resize, ToTensor, Transform,
};
use kiln::vision::{Image, Pixels};
use kiln::{DType, StateDict, Tensor};

fn fixture() -> StateDict {
    kiln::load(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/transforms.safetensors")).unwrap()
}

/// The fixture's tensor `name`.
fn get(fx: &StateDict, name: &str) -> Tensor {
    fx.get(name).unwrap_or_else(|| panic!("the fixture has no {name}")).clone()
}

/// A `u8` tensor `[C, H, W]` as pixels.
fn pixels(t: &Tensor) -> Pixels {
    let s = t.shape();
    Pixels::new(t.to_vec::<u8>(), s[0], s[1], s[2]).unwrap()
}

/// Runs `f` on the three inputs (RGB and grey pixels, the RGB float tensor) and returns
/// every disagreement with torchvision's `{op}_{case}_{kind}`.
fn check(fx: &StateDict, op: &str, case: &str, tol: f32, f: impl Fn(Image) -> kiln::Result<Image>) -> Vec<String> {
    let mut bad = Vec::new();
    for kind in ["pil_rgb", "pil_grey", "t_rgb"] {
        let name = format!("{op}_{case}_{kind}");
        let want = get(fx, &name);
        let input = match kind {
            "pil_rgb" => Image::Pixels(pixels(&get(fx, "input_rgb"))),
            "pil_grey" => Image::Pixels(pixels(&get(fx, "input_grey"))),
            _ => Image::Tensor(get(fx, "input_t_rgb")),
        };
        let got = match f(input) {
            Ok(Image::Pixels(p)) => p.to_u8_tensor(),
            Ok(Image::Tensor(t)) => t,
            Err(e) => {
                bad.push(format!("{name}: {e}"));
                continue;
            }
        };
        if got.shape() != want.shape() {
            bad.push(format!("{name}: shape {:?}, torchvision {:?}", got.shape(), want.shape()));
        } else if want.dtype() == DType::U8 {
            let (g, w) = (got.to_vec::<u8>(), want.to_vec::<u8>());
            let diff = g.iter().zip(&w).filter(|(a, b)| a != b).count();
            if diff > 0 {
                let i = g.iter().zip(&w).position(|(a, b)| a != b).unwrap();
                bad.push(format!("{name}: {diff} of {} bytes differ, first at {i}: {} vs {}", g.len(), g[i], w[i]));
            }
        } else {
            let (g, w) = (got.to_vec::<f32>(), want.to_vec::<f32>());
            let worst = g.iter().zip(&w).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
            if worst > tol {
                bad.push(format!("{name}: largest difference {worst} > {tol}"));
            }
        }
    }
    bad
}

#[test]
fn resize_matches_torchvision_on_pixels_and_tensors() {
    let fx = fixture();
    let mut bad = Vec::new();
    let cases: [(&str, Size); 5] = [
        ("down", (7, 9).into()),
        ("up", (30, 40).into()),
        ("width", (13, 5).into()),
        ("height", (6, 17).into()),
        ("edge", 10.into()),
    ];
    for (case, size) in cases {
        bad.extend(check(&fx, "resize", case, 1e-5, |x| F::resize(x, size)));
    }
    bad.extend(check(&fx, "resize", "max", 1e-5, |x| Resize::new(8).max_size(11).apply(x)));
    bad.extend(check(&fx, "resized_crop", "a", 1e-5, |x| F::resized_crop(x, 2, 3, 8, 9, (5, 6))));
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn crops_match_torchvision() {
    let fx = fixture();
    let mut bad = Vec::new();
    for (case, (h, w)) in [("small", (5, 8)), ("tall", (20, 9)), ("same", (13, 17)), ("square", (4, 4))] {
        bad.extend(check(&fx, "center_crop", case, 0.0, |x| CenterCrop::with_size(h, w).apply(x)));
    }
    bad.extend(check(&fx, "crop", "outside", 0.0, |x| F::crop(x, -2, 3, 6, 20)));
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn colour_adjustments_match_torchvision() {
    let fx = fixture();
    let mut bad = Vec::new();
    for (case, f) in [("f0", 0.0), ("f03", 0.3), ("f1", 1.0), ("f17", 1.7)] {
        bad.extend(check(&fx, "brightness", case, 2e-6, |x| F::adjust_brightness(x, f)));
        bad.extend(check(&fx, "contrast", case, 2e-6, |x| F::adjust_contrast(x, f)));
        bad.extend(check(&fx, "saturation", case, 2e-6, |x| F::adjust_saturation(x, f)));
    }
    for (case, h) in [("m05", -0.5), ("m03", -0.3), ("m005", -0.05), ("p005", 0.05), ("p027", 0.27), ("p05", 0.5)] {
        bad.extend(check(&fx, "hue", case, 2e-6, |x| F::adjust_hue(x, h)));
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn resizing_a_float_tensor_is_differentiable_and_keeps_batch_dims() {
    let x = Tensor::rand([2, 3, 6, 8]).requires_grad_(true);
    let Image::Tensor(y) = F::resize(Image::Tensor(x.clone()), (3, 4)).unwrap() else {
        panic!("a tensor in, a tensor out")
    };
    assert_eq!(y.shape(), &[2, 3, 3, 4]);
    y.sum().backward();
    // Every output is a convex combination of inputs, so the gradient of the sum of the 12
    // outputs of each plane is spread over its 48 inputs and sums to 12.
    let g = x.grad().unwrap().sum_dim([2, 3]).to_vec::<f32>();
    assert!(g.iter().all(|s| (s - 12.0).abs() < 1e-4), "{g:?}");
}

#[test]
fn the_shorter_edge_rule_and_its_errors() {
    assert_eq!(Size::Shorter(10).output_size(13, 17, None).unwrap(), (10, 13));
    assert_eq!(Size::Shorter(10).output_size(17, 13, None).unwrap(), (13, 10));
    assert_eq!(Size::Shorter(8).output_size(13, 17, Some(9)).unwrap(), (7, 9), "capped at max_size: int(9 · 8 / 10)");
    let e = Size::Shorter(8).output_size(13, 17, Some(8)).unwrap_err().to_string();
    assert!(e.contains("max_size = 8 must be strictly greater"), "{e}");
    let e = Size::Exact(3, 3).output_size(13, 17, Some(9)).unwrap_err().to_string();
    assert!(e.contains("max_size is only allowed"), "{e}");
    let e = F::resize(Image::Tensor(Tensor::zeros([3, 0, 4])), (2, 2)).unwrap_err().to_string();
    assert!(e.starts_with("resize: cannot resize a 0x4 image to 2x2 (at tests/vision_transforms.rs:"), "{e}");
    let e = F::resize(Image::Tensor(Tensor::zeros([2, 4, 4]).to_dtype(DType::I64)), (2, 2)).unwrap_err().to_string();
    assert!(e.contains("expected pixels, a uint8 tensor [C, H, W] or a float tensor"), "{e}");
}

#[test]
fn colour_factor_errors_name_the_function() {
    let img = || Image::Tensor(Tensor::rand([3, 2, 2]));
    let e = F::adjust_hue(img(), 0.6).unwrap_err().to_string();
    assert!(e.starts_with("adjust_hue: the factor must be in [-0.5, 0.5], but got 0.6"), "{e}");
    let e = F::adjust_contrast(img(), -1.0).unwrap_err().to_string();
    assert!(e.starts_with("adjust_contrast: the factor must be non-negative"), "{e}");
    let e = F::adjust_saturation(Image::Tensor(Tensor::rand([2, 2, 2])), 0.5).unwrap_err().to_string();
    assert!(e.contains("with 1 or 3 channels, but got float32 of shape [2, 2, 2]"), "{e}");
}

#[test]
fn a_u8_tensor_is_treated_as_pixels() {
    let fx = fixture();
    let rgb = get(&fx, "input_rgb");
    let Image::Tensor(out) = F::adjust_hue(Image::Tensor(rgb), 0.27).unwrap() else {
        panic!("a tensor in, a tensor out")
    };
    assert_eq!(out.dtype(), DType::U8);
    assert_eq!(out.to_vec::<u8>(), get(&fx, "hue_p027_pil_rgb").to_vec::<u8>());
}

/// `t` applied to the fixture's RGB pixels `n` times with the item generator seeded by
/// `seed`, each result as bytes.
fn draws(t: &dyn Transform, seed: u64, n: usize) -> Vec<Vec<u8>> {
    let rgb = pixels(&get(&fixture(), "input_rgb"));
    with_item_generator(|g| {
        g.manual_seed(seed);
    });
    (0..n)
        .map(|_| match t.apply(Image::Pixels(rgb.clone())).unwrap() {
            Image::Pixels(p) => p.data().to_vec(),
            Image::Tensor(_) => panic!("pixels in, pixels out"),
        })
        .collect()
}

#[test]
fn random_resized_crop_gives_the_size_and_follows_the_generator() {
    let t = RandomResizedCrop::new(8);
    let a = draws(&t, 5, 6);
    assert!(a.iter().all(|p| p.len() == 3 * 8 * 8));
    assert_eq!(a, draws(&t, 5, 6), "the same seed, the same crops");
    assert_ne!(a, draws(&t, 6, 6), "another seed, other crops");
    assert!(a.windows(2).any(|w| w[0] != w[1]), "the crops vary from item to item");
    // Windows stay in the image, their area and ratio in range (or the central fallback).
    with_item_generator(|g| {
        g.manual_seed(1);
    });
    let t = RandomResizedCrop::new(4).scale(0.25, 0.5).ratio(0.5, 2.0);
    for _ in 0..200 {
        let (top, left, h, w) = t.params(13, 17).unwrap();
        assert!(top + h <= 13 && left + w <= 17 && h > 0 && w > 0);
        let area = (h * w) as f64 / (13.0 * 17.0);
        assert!((0.15..=0.6).contains(&area), "area fraction {area}");
    }
    // scale (1, 1) and ratio (1, 1) on a square image: the whole image, resized.
    let whole = RandomResizedCrop::with_size(5, 6).scale(1.0, 1.0).ratio(1.0, 1.0);
    assert_eq!(whole.params(9, 9).unwrap(), (0, 0, 9, 9));
    // No window can have ratio 4 in a tall image: the central crop with the ratio clamped.
    let wide = RandomResizedCrop::new(4).scale(0.9, 1.0).ratio(4.0, 4.0);
    assert_eq!(wide.params(20, 8).unwrap(), (9, 0, 2, 8));
    let e = RandomResizedCrop::new(4).scale(0.5, 0.1).params(9, 9).unwrap_err().to_string();
    assert!(e.starts_with("RandomResizedCrop: expected 0 <= scale.0 <= scale.1"), "{e}");
}

#[test]
fn colour_jitter_draws_factors_in_range_and_follows_the_generator() {
    let t = ColorJitter::new().brightness(0.4).contrast(0.4).saturation(0.4).hue(0.1);
    let a = draws(&t, 3, 5);
    assert_eq!(a, draws(&t, 3, 5));
    assert_ne!(a, draws(&t, 4, 5));
    // Brightness alone with range [0.5, 1.5]: each pixel is scaled by one factor in range.
    let rgb = pixels(&get(&fixture(), "input_rgb"));
    for img in draws(&ColorJitter::new().brightness(0.5), 9, 20) {
        // Pixels in 100..=160 never clip at 1.5, and truncation moves a ratio by < 1/100.
        let f = (0..img.len())
            .filter(|&i| (100..=160).contains(&rgb.data()[i]))
            .map(|i| img[i] as f64 / rgb.data()[i] as f64);
        let (lo, hi) = f.fold((f64::MAX, 0.0f64), |(lo, hi), r| (lo.min(r), hi.max(r)));
        assert!(lo > 0.49 && hi < 1.51 && hi - lo < 0.02, "ratios {lo}..{hi}");
    }
    // Nothing asked, nothing changed.
    assert!(draws(&ColorJitter::new(), 1, 3).iter().all(|p| p == rgb.data()));
}

#[test]
#[should_panic(expected = "ColorJitter: brightness must be non-negative, but got -0.1")]
fn a_negative_jitter_panics() {
    let _ = ColorJitter::new().brightness(-0.1);
}

#[test]
fn random_crop_pads_with_zeros_through_the_shared_crop() {
    with_item_generator(|g| {
        g.manual_seed(2);
    });
    let img = Image::Pixels(Pixels::new(vec![9; 3 * 2 * 2], 3, 2, 2).unwrap());
    let Image::Pixels(p) = RandomCrop::new(6).padding(2).apply(img).unwrap() else { panic!("pixels in, pixels out") };
    assert_eq!(p.shape(), [3, 6, 6]);
    assert_eq!(p.data().iter().filter(|&&v| v == 9).count(), 12, "the whole image, padded");
    let t = Compose::new((Resize::new((4, 4)), ToTensor));
    let Image::Tensor(x) = t.apply(Image::Pixels(Pixels::new(vec![255; 3 * 7 * 5], 3, 7, 5).unwrap())).unwrap() else {
        panic!("ToTensor makes a tensor")
    };
    assert_eq!(x.shape(), &[3, 4, 4]);
    assert!(x.to_vec::<f32>().iter().all(|&v| v == 1.0));
}

/// A folder tree `root/{class}/...` with PNG files of one colour each.
fn image_tree(root: &std::path::Path, files: &[(&str, [u8; 3])]) {
    for (path, rgb) in files {
        let full = root.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        let img = Tensor::from_vec(rgb.repeat(6), [2, 3, 3]).permute(&[2, 0, 1]).contiguous();
        kiln::vision::io::write_png(&img, &full).unwrap();
    }
}

#[test]
fn image_folder_lists_classes_and_files_as_torchvision() {
    let root = std::env::temp_dir().join(format!("kiln-image-folder-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    image_tree(
        &root,
        &[
            ("dog/b.png", [1, 2, 3]),
            ("dog/a.PNG", [4, 5, 6]),
            ("cat/z.png", [7, 8, 9]),
            ("cat/sub/y.png", [10, 11, 12]),
            ("cat/sub-x/w.png", [13, 14, 15]),
            ("cat/sub/deeper/v.png", [16, 17, 18]),
        ],
    );
    std::fs::write(root.join("dog/notes.txt"), "not an image").unwrap();
    std::fs::write(root.join("README"), "a file beside the classes").unwrap();
    let ds = kiln::vision::datasets::ImageFolder::new(&root).unwrap().transform(Resize::new((4, 5)));
    assert_eq!(ds.classes(), &["cat".to_string(), "dog".to_string()]);
    assert_eq!(ds.class_to_idx("dog"), Some(1));
    let names: Vec<String> =
        ds.samples().iter().map(|(p, c)| format!("{}:{c}", p.strip_prefix(&root).unwrap().display())).collect();
    // Folders in sorted path order, as torchvision's `sorted(os.walk(..))` ("cat/sub" <
    // "cat/sub-x" < "cat/sub/deeper", as '-' < '/'), files by name, extensions ignoring case.
    assert_eq!(
        names,
        ["cat/z.png:0", "cat/sub/y.png:0", "cat/sub-x/w.png:0", "cat/sub/deeper/v.png:0", "dog/a.PNG:1", "dog/b.png:1"]
    );
    assert_eq!(ds.targets().to_vec::<i64>(), vec![0, 0, 0, 0, 1, 1]);
    let (x, y) = ds.get(4);
    assert_eq!((x.shape(), y), (&[3usize, 4, 5][..], 1));
    assert_eq!(x.select(1, 0).select(1, 0).to_vec::<f32>(), vec![4.0 / 255.0, 5.0 / 255.0, 6.0 / 255.0]);
    let loader = kiln::data::DataLoader::new(ds).batch_size(6);
    let batch = (&loader).into_iter().next().unwrap();
    assert_eq!(batch.0.shape(), &[6, 3, 4, 5]);
    // Errors: an empty class, no class, no root.
    std::fs::create_dir_all(root.join("emu")).unwrap();
    let e = kiln::vision::datasets::ImageFolder::new(&root).err().unwrap().to_string();
    assert!(e.starts_with("ImageFolder: found no valid file for the classes emu in"), "{e}");
    assert!(e.contains("supported extensions are .jpg, .jpeg, .png (at tests/vision_transforms.rs:"), "{e}");
    let only_txt = kiln::vision::datasets::ImageFolder::with_extensions(&root, &[".txt"]).err().unwrap().to_string();
    assert!(only_txt.contains("for the classes cat, emu"), "{only_txt}");
    let e = kiln::vision::datasets::ImageFolder::new(root.join("emu")).err().unwrap().to_string();
    assert!(e.starts_with("ImageFolder: cannot find any class folder in"), "{e}");
    let e = kiln::vision::datasets::ImageFolder::new(root.join("nowhere")).err().unwrap().to_string();
    assert!(e.starts_with("ImageFolder: cannot read the folder"), "{e}");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
#[should_panic(expected = "ImageFolder: cannot load item 0: ImageFolder: cannot read")]
fn an_undecodable_file_panics_naming_it() {
    let root = std::env::temp_dir().join(format!("kiln-image-folder-bad-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("a")).unwrap();
    std::fs::write(root.join("a/broken.png"), b"not a png").unwrap();
    let ds = kiln::vision::datasets::ImageFolder::new(&root).unwrap();
    let _ = ds.get(0);
}

#[test]
fn augmentation_does_not_depend_on_the_number_of_workers() {
    let root = std::env::temp_dir().join(format!("kiln-image-folder-workers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let rgb = get(&fixture(), "input_rgb");
    for (i, class) in ["a", "a", "b", "b", "b"].iter().enumerate() {
        std::fs::create_dir_all(root.join(class)).unwrap();
        let img = rgb.roll(&[3 * i as i64], &[2]).contiguous();
        kiln::vision::io::write_png(&img, root.join(format!("{class}/{i}.png"))).unwrap();
    }
    let batches = |workers: usize| {
        let tf = Compose::new((RandomResizedCrop::new(6), ColorJitter::new().brightness(0.5).hue(0.2), ToTensor));
        let ds = kiln::vision::datasets::ImageFolder::new(&root).unwrap().transform(tf);
        let loader = kiln::data::DataLoader::new(ds).batch_size(2).shuffle(true).seed(11).num_workers(workers);
        (&loader).into_iter().map(|(x, y)| (x.to_vec::<f32>(), y.to_vec::<i64>())).collect::<Vec<_>>()
    };
    let serial = batches(0);
    assert_eq!(serial.len(), 3);
    assert_eq!(batches(2), serial, "the same crops and colours whatever num_workers");
    std::fs::remove_dir_all(&root).unwrap();
}
