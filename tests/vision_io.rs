//! `kiln::vision::io`: PNG files in L, RGB and RGBA mode and a JPEG written by Pillow
//! (`scripts/fixtures_images.py`) decode to Pillow's pixels (the PNGs exactly, the JPEG
//! within 2 levels: decoders' inverse DCTs round differently); `write_png` and `read_image`
//! round-trip every channel count; `save_image` writes torchvision's bytes for a float batch;
//! bad input and unreadable files are clear errors.

use kiln::prelude::*;
use kiln::vision::io::{decode_image, read_image, save_image, write_png};
use kiln::vision::utils::{make_grid, GridOpts};
use std::path::PathBuf;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/images")
}

/// `(name, [C, H, W], values)` of every fixture, from `expected.txt`.
fn expected() -> Vec<(String, [usize; 3], Vec<u8>)> {
    let text = std::fs::read_to_string(fixtures().join("expected.txt")).expect("the fixture list");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let mut f = l.split_whitespace();
            let name = f.next().expect("a name").to_string();
            let mut n = || f.next().expect("a size").parse::<usize>().expect("a number");
            let shape = [n(), n(), n()];
            let values = f.map(|v| v.parse::<u8>().expect("a byte")).collect();
            (name, shape, values)
        })
        .collect()
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("kiln-vision-io-{}-{name}", std::process::id()))
}

#[test]
fn pillows_files_decode_to_its_pixels() {
    let cases = expected();
    assert_eq!(cases.len(), 4);
    for (name, shape, want) in cases {
        let img = read_image(fixtures().join(&name)).unwrap();
        assert_eq!((img.dtype(), img.shape()), (DType::U8, &shape[..]), "{name}");
        let got = img.to_vec::<u8>();
        let tolerance = if name.ends_with(".jpg") { 2 } else { 0 };
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(g.abs_diff(*w) <= tolerance, "{name} value {k}: {g}, Pillow {w}");
        }
        let bytes = std::fs::read(fixtures().join(&name)).unwrap();
        assert_eq!(decode_image(&bytes).unwrap().to_vec::<u8>(), got, "{name}: decode_image == read_image");
    }
}

#[test]
fn write_png_round_trips_every_channel_count() {
    for c in 1..=4usize {
        let values: Vec<u8> = (0..c * 3 * 5).map(|k| (k * 41 % 256) as u8).collect();
        let img = Tensor::from_vec(values, [c, 3, 5]);
        let path = temp(&format!("c{c}.png"));
        write_png(&img, &path).unwrap();
        assert_eq!(read_image(&path).unwrap().to_vec::<u8>(), img.to_vec::<u8>(), "{c} channels");
        std::fs::remove_file(&path).unwrap();
    }
    // A strided view is written as its values.
    let img = Tensor::from_vec((0..24u8).collect::<Vec<_>>(), [2, 4, 3]).permute(&[2, 0, 1]);
    let path = temp("view.png");
    write_png(&img, &path).unwrap();
    assert_eq!(read_image(&path).unwrap().to_vec::<u8>(), img.contiguous().to_vec::<u8>());
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn save_image_writes_torchvisions_bytes() {
    // Two 1-channel 2x2 images in [0, 1] (one value outside), laid out by make_grid.
    let batch = Tensor::from_vec(vec![0.0f32, 0.25, 0.5, 1.0, 0.999, 0.001, 1.5, -0.2], [2, 1, 2, 2]);
    let opts = GridOpts { padding: 1, ..Default::default() };
    let path = temp("grid.png");
    save_image(&batch, &path, &opts).unwrap();
    let got = read_image(&path).unwrap();
    // x·255 + 0.5, clamped, truncated: torchvision's rule.
    let want: Vec<u8> =
        make_grid(&batch, &opts).to_vec::<f32>().iter().map(|x| (x * 255.0 + 0.5).clamp(0.0, 255.0) as u8).collect();
    assert_eq!(got.shape(), &[3, 4, 7]);
    assert_eq!(got.to_vec::<u8>(), want);
    assert_eq!(&want[8..12], &[0, 64, 0, 255], "row 1: 0.0 → 0, 0.25 → 64, padding, 0.999 → 255");
    std::fs::remove_file(&path).unwrap();
    // JPEG by the extension.
    let path = temp("grid.jpg");
    save_image(&batch, &path, &opts).unwrap();
    assert_eq!(read_image(&path).unwrap().shape(), &[3, 4, 7]);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn bad_input_is_a_clear_error() {
    let e = write_png(&Tensor::zeros([3, 2, 2]), temp("f32.png")).unwrap_err().to_string();
    assert!(e.contains("write_png") && e.contains("uint8") && e.contains("tests/vision_io.rs"), "{e}");
    let e = write_png(&Tensor::zeros([5, 2, 2]).to_dtype(DType::U8), temp("c5.png")).unwrap_err().to_string();
    assert!(e.contains("[5, 2, 2]"), "{e}");
    let e = read_image(temp("missing.png")).unwrap_err().to_string();
    assert!(e.contains("read_image") && e.contains("cannot read") && e.contains("missing.png"), "{e}");
    let e = decode_image(b"not an image").unwrap_err().to_string();
    assert!(e.contains("decode_image") && e.contains("cannot decode"), "{e}");
    let e = save_image(&Tensor::zeros([2, 1, 2, 2]), temp("grid.unknown"), &GridOpts::default()).unwrap_err();
    assert!(e.to_string().contains("extension"), "{e}");
}
