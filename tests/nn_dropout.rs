//! `dropout`, `dropout1d/2d/3d` of `kiln::nn::functional`: the fraction zeroed is close to `p`,
//! kept elements are scaled exactly by `1/(1-p)`, evaluation is the identity, the same seed
//! gives the same mask, the gradient is `mask * scale`, whole channels drop together, and bad
//! arguments are errors naming the op.

mod common;

use common::{catch_quietly, panic_message};
use kiln::nn::functional as F;
use kiln::{DType, Tensor};
#[path = "common/seeded.rs"]
mod seeded;
use seeded::seeded;

/// Non-zero values whose products with 1.25 are exact in f32.
fn input(n: usize) -> Tensor {
    let v: Vec<f32> = (0..n).map(|i| ((i % 13) as f32 - 6.5) / 4.0).collect();
    Tensor::from_vec(v, [n])
}

#[test]
fn fraction_zeroed_is_close_to_p_and_scaling_is_exact() {
    let _seeded = seeded();
    kiln::manual_seed(7);
    for p in [0.1, 0.3, 0.75] {
        let n = 100_000;
        let y = F::dropout(&Tensor::ones([n]), p, true).to_vec::<f32>();
        let zeroed = y.iter().filter(|&&v| v == 0.0).count() as f64 / n as f64;
        // the standard deviation of the fraction is sqrt(p(1-p)/n) < 0.0016: 0.01 is > 6 sigma
        assert!((zeroed - p).abs() < 0.01, "p = {p}: {zeroed} zeroed");
        let scale = 1.0f32 / (1.0 - p) as f32;
        assert!(y.iter().all(|&v| v == 0.0 || v == scale), "p = {p}: values other than 0 and {scale}");
    }
    // p = 0.2: the scale 1.25 is exact, so every kept element is exactly x * 1.25
    let x = input(1000);
    let y = F::dropout(&x, 0.2, true);
    let (xv, yv) = (x.to_vec::<f32>(), y.to_vec::<f32>());
    assert!(xv.iter().zip(&yv).all(|(a, b)| *b == 0.0 || *b == a * 1.25));
    assert!(yv.contains(&0.0) && yv.iter().any(|&b| b != 0.0));
}

#[test]
fn eval_and_p_zero_are_the_identity_and_p_one_gives_zeros() {
    let _seeded = seeded();
    let x = input(64).requires_grad_(true);
    for (p, training) in [(0.5, false), (0.0, true)] {
        let y = F::dropout(&x, p, training);
        assert!(y.shares_storage_with(&x) && y.equal(&x));
        let y2 = F::dropout2d(&x.view([2, 2, 4, 4]), p, training);
        assert!(y2.equal(&x.view([2, 2, 4, 4])));
    }
    let z = F::dropout(&x, 1.0, true);
    assert!(z.equal(&x.zeros_like()));
    z.sum().backward();
    assert!(x.grad().unwrap().equal(&x.zeros_like()));
}

#[test]
fn same_seed_same_mask() {
    let _seeded = seeded();
    let x = input(500);
    kiln::manual_seed(11);
    let a = F::dropout(&x, 0.4, true);
    let b = F::dropout(&x, 0.4, true);
    kiln::manual_seed(11);
    let c = F::dropout(&x, 0.4, true);
    assert!(a.equal(&c));
    assert!(!a.equal(&b), "the generator advanced between calls");
}

#[test]
fn gradient_is_mask_times_scale() {
    let _seeded = seeded();
    kiln::manual_seed(3);
    let x = input(400).to_dtype(DType::F64).requires_grad_(true);
    let y = F::dropout(&x, 0.2, true);
    let w = Tensor::arange(400).to_dtype(DType::F64);
    (&y * &w).sum().backward();
    let g = x.grad().unwrap().to_vec::<f64>();
    let yv = y.to_vec::<f64>();
    for i in 0..400 {
        let want = if yv[i] == 0.0 { 0.0 } else { 1.25 * i as f64 };
        assert_eq!(g[i], want, "element {i}");
    }
}

#[test]
fn channel_dropout_drops_whole_channels() {
    let _seeded = seeded();
    kiln::manual_seed(5);
    let (n, c) = (40, 50);
    let x = Tensor::ones([n, c, 3, 2]);
    let y = F::dropout2d(&x, 0.3, true).to_vec::<f32>();
    let mut dropped = 0;
    for ch in y.chunks(6) {
        assert!(ch.iter().all(|&v| v == ch[0]), "a channel is partly dropped: {ch:?}");
        assert!(ch[0] == 0.0 || ch[0] == 1.0f32 / 0.7f32);
        dropped += (ch[0] == 0.0) as usize;
    }
    // 2000 channels: sigma of the fraction ≈ 0.01, so 0.06 is 6 sigma
    let frac = dropped as f64 / (n * c) as f64;
    assert!((frac - 0.3).abs() < 0.06, "{frac}");
    // a 3-D input is (N, C, L) for dropout2d and dropout1d; dropout3d takes (C, D, H, W) too
    for (y, len) in [
        (F::dropout2d(&Tensor::ones([8, 16, 5]), 0.5, true), 5),
        (F::dropout1d(&Tensor::ones([8, 16, 5]), 0.5, true), 5),
        (F::dropout1d(&Tensor::ones([16, 5]), 0.5, true), 5),
        (F::dropout3d(&Tensor::ones([16, 2, 2, 2]), 0.5, true), 8),
        (F::dropout3d(&Tensor::ones([2, 8, 2, 2, 2]), 0.5, true), 8),
    ] {
        let v = y.to_vec::<f32>();
        assert!(v.chunks(len).all(|ch| ch.iter().all(|&e| e == ch[0])));
        assert!(v.contains(&0.0) && v.contains(&2.0));
    }
}

#[test]
fn bad_arguments_are_errors_naming_the_op() {
    let _seeded = seeded();
    let x = Tensor::ones([2, 3]);
    let e = F::try_dropout(&x, 1.5, true).unwrap_err().to_string();
    assert!(e.starts_with("dropout: dropout probability has to be between 0 and 1, but got 1.5"), "{e}");
    let e = F::try_dropout(&x, -0.1, false).unwrap_err().to_string();
    assert!(e.starts_with("dropout: "), "{e}");
    let e = F::try_dropout(&x.to_dtype(DType::I64), 0.5, true).unwrap_err().to_string();
    assert!(e.starts_with("dropout: ") && e.contains("int64"), "{e}");
    let e = F::try_dropout2d(&x, 0.5, true).unwrap_err().to_string();
    assert!(e.starts_with("dropout2d: ") && e.contains("[2, 3]"), "{e}");
    let line = line!() + 1;
    let p = catch_quietly(|| F::dropout3d(&x, 0.5, true));
    let msg = panic_message(&*p.unwrap_err());
    assert!(msg.starts_with("dropout3d: ") && msg.contains(&format!("nn_dropout.rs:{line}")), "{msg}");
}
