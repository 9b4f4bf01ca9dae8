//! `kiln::vision::utils::make_grid` against torchvision's rules: the layout (nrow per row,
//! padding around every image, the empty cells left at `pad_value`), one channel repeated
//! into three, a batch of one returned as its image, and the three ways of normalizing.

use kiln::prelude::*;
use kiln::vision::utils::{make_grid, try_make_grid, GridOpts};

/// Three one-channel 2x2 images whose pixels are all `k + 1` (image `k`).
fn batch() -> Tensor {
    Tensor::cat(&[Tensor::full([1, 1, 2, 2], 1.0), Tensor::full([1, 1, 2, 2], 2.0), Tensor::full([1, 1, 2, 2], 3.0)], 0)
}

/// The grid's channel 0 as rows.
fn rows(grid: &Tensor) -> Vec<Vec<f32>> {
    grid.select(0, 0).to_vec2::<f32>()
}

#[test]
fn images_are_laid_out_in_rows_with_padding() {
    let opts = GridOpts { nrow: 2, padding: 1, pad_value: 0.5, ..Default::default() };
    let grid = make_grid(&batch(), &opts);
    // 2 columns, 2 rows of 2x2 cells, 1 pixel around each: 1 + 2·3 = 7.
    assert_eq!(grid.shape(), &[3, 7, 7]);
    let p = 0.5;
    let want = vec![
        vec![p, p, p, p, p, p, p],
        vec![p, 1.0, 1.0, p, 2.0, 2.0, p],
        vec![p, 1.0, 1.0, p, 2.0, 2.0, p],
        vec![p, p, p, p, p, p, p],
        vec![p, 3.0, 3.0, p, p, p, p],
        vec![p, 3.0, 3.0, p, p, p, p],
        vec![p, p, p, p, p, p, p],
    ];
    assert_eq!(rows(&grid), want);
    for c in 1..3 {
        assert_eq!(grid.select(0, c).to_vec2::<f32>(), want, "the one channel is repeated into channel {c}");
    }
    // The defaults: nrow 8 (all three in one row), padding 2, pad value 0.
    let grid = make_grid(&batch(), &GridOpts::default());
    assert_eq!(grid.shape(), &[3, 2 + 4, 2 + 3 * 4]);
    assert_eq!(rows(&grid)[2], vec![0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 2.0, 2.0, 0.0, 0.0, 3.0, 3.0, 0.0, 0.0]);
}

#[test]
fn one_image_comes_back_without_padding() {
    let img = Tensor::arange_step(0.0, 6.0, 1.0).view([2, 3]);
    let grid = make_grid(&img, &GridOpts::default());
    assert_eq!(grid.shape(), &[3, 2, 3]);
    assert_eq!(rows(&grid), vec![vec![0.0, 1.0, 2.0], vec![3.0, 4.0, 5.0]]);
    let rgb = Tensor::arange_step(0.0, 12.0, 1.0).view([3, 2, 2]);
    assert_eq!(make_grid(&rgb, &GridOpts::default()).to_vec::<f32>(), rgb.to_vec::<f32>());
}

#[test]
fn normalize_by_the_batch_each_image_or_a_range() {
    let cell = |grid: &Tensor, k: usize| rows(grid)[1][1 + 3 * k];
    let opts = GridOpts { padding: 1, normalize: true, ..Default::default() };
    // The batch's range 1..3: 0, 0.5, 1.
    let grid = make_grid(&batch(), &opts);
    assert_eq!((0..3).map(|k| cell(&grid, k)).collect::<Vec<_>>(), vec![0.0, 0.5, 1.0]);
    // Each image by its own (empty) range: (x - x) / 1e-5 = 0.
    let grid = make_grid(&batch(), &GridOpts { scale_each: true, ..opts.clone() });
    assert_eq!((0..3).map(|k| cell(&grid, k)).collect::<Vec<_>>(), vec![0.0, 0.0, 0.0]);
    // A given range 0..2: clamped, then (x - 0) / 2.
    let grid = make_grid(&batch(), &GridOpts { value_range: Some((0.0, 2.0)), ..opts.clone() });
    assert_eq!((0..3).map(|k| cell(&grid, k)).collect::<Vec<_>>(), vec![0.5, 1.0, 1.0]);
    // The input is not changed.
    assert_eq!(batch().to_vec::<f32>(), [vec![1.0; 4], vec![2.0; 4], vec![3.0; 4]].concat());
}

#[test]
fn bad_input_is_a_clear_error() {
    let e = try_make_grid(&Tensor::zeros([1, 1, 1, 2, 2]), &GridOpts::default()).unwrap_err().to_string();
    assert!(e.contains("make_grid") && e.contains("[1, 1, 1, 2, 2]") && e.contains("tests/vision_grid.rs"), "{e}");
    let e = try_make_grid(&batch(), &GridOpts { nrow: 0, ..Default::default() }).unwrap_err().to_string();
    assert!(e.contains("nrow"), "{e}");
    let ints = Tensor::zeros([2, 1, 2, 2]).to_dtype(DType::U8);
    let e = try_make_grid(&ints, &GridOpts { normalize: true, ..Default::default() }).unwrap_err().to_string();
    assert!(e.contains("floating-point"), "{e}");
    assert_eq!(make_grid(&ints, &GridOpts::default()).dtype(), DType::U8, "without normalize any dtype is laid out");
}
