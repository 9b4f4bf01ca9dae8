//! `F::interpolate`, `F::pixel_shuffle`/`pixel_unshuffle` and their modules
//! (`src/nn/functional/interpolate.rs`, `src/nn/upsampling.rs`): values and gradients against
//! PyTorch's (nearest, nearest-exact, linear, bilinear, trilinear; sizes and scale factors,
//! up and down; `align_corners` both ways; f64 and f32), f64 finite-difference gradients of
//! first and second order, `kiln::compile` equal to eager with no graph break, PyTorch's module
//! reprs, and errors that name the op, the shapes and the caller's line.

#[path = "common/pad_fixture.rs"]
mod pad_fixture;

use kiln::autograd::{gradcheck, gradgradcheck, GradcheckOpts};
use kiln::nn::functional::{InterpolateMode, InterpolateOpts, Resize};
use kiln::nn::{self, Module};
use kiln::prelude::*;
use kiln::{DType, ErrorKind};

const HERE: &str = "tests/nn_interpolate.rs";

fn opts_of(case: &pad_fixture::Case) -> InterpolateOpts {
    let mode = match case.arg("mode") {
        "nearest" => InterpolateMode::Nearest,
        "nearest-exact" => InterpolateMode::NearestExact,
        "linear" => InterpolateMode::Linear,
        "bilinear" => InterpolateMode::Bilinear,
        "trilinear" => InterpolateMode::Trilinear,
        m => panic!("{}: unknown mode {m}", case.name),
    };
    let resize = if case.args.contains_key("size") {
        Resize::Size(case.list("size"))
    } else {
        Resize::ScaleFactor(case.list("scale"))
    };
    let flag = |key: &str| match case.arg(key) {
        "none" => None,
        v => Some(v == "true"),
    };
    InterpolateOpts { resize, mode, align_corners: flag("align"), recompute_scale_factor: flag("recompute") }
}

#[test]
fn interpolate_matches_pytorch() {
    let cases = pad_fixture::cases(&["interpolate"]);
    assert!(cases.len() >= 40, "only {} interpolate cases", cases.len());
    let mut bad = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for case in &cases {
        let opts = opts_of(case);
        seen.insert((opts.mode.name(), opts.align_corners));
        bad.extend(case.check(|x| F::interpolate_opts(x, &opts)));
    }
    assert!(seen.len() >= 8, "modes and align_corners covered: {seen:?}");
    assert!(bad.is_empty(), "{} disagreements with PyTorch:\n{}", bad.len(), bad.join("\n"));
}

#[test]
fn pixel_shuffles_match_pytorch() {
    let cases = pad_fixture::cases(&["pixel_shuffle", "pixel_unshuffle"]);
    assert_eq!(cases.len(), 5);
    let mut bad = Vec::new();
    for case in &cases {
        let r: usize = case.arg("r").parse().unwrap();
        if case.arg("op") == "pixel_shuffle" {
            bad.extend(case.check(|x| F::pixel_shuffle(x, r)));
        } else {
            bad.extend(case.check(|x| F::pixel_unshuffle(x, r)));
        }
    }
    assert!(bad.is_empty(), "{} disagreements with PyTorch:\n{}", bad.len(), bad.join("\n"));
}

#[test]
fn small_cases_by_hand() {
    // F.interpolate(torch.arange(6.).view(1, 1, 6), size=4): nearest [0, 1, 3, 4],
    // nearest-exact [0, 2, 3, 5]; scale_factor=0.5: [0, 2, 4].
    let x = Tensor::arange(6).to_dtype(DType::F32).view([1, 1, 6]);
    assert_eq!(F::interpolate(&x, 4, InterpolateMode::Nearest, None).to_vec::<f32>(), [0.0, 1.0, 3.0, 4.0]);
    assert_eq!(F::interpolate(&x, 4, InterpolateMode::NearestExact, None).to_vec::<f32>(), [0.0, 2.0, 3.0, 5.0]);
    assert_eq!(F::interpolate(&x, 0.5, InterpolateMode::Nearest, None).to_vec::<f32>(), [0.0, 2.0, 4.0]);
    // linear 2 → 4: align_corners=False [0, 0.25, 0.75, 1], True [0, 1/3, 2/3, 1].
    let t = Tensor::from_vec(vec![0.0f64, 1.0], [1, 1, 2]);
    assert_eq!(F::interpolate(&t, 4, InterpolateMode::Linear, false).to_vec::<f64>(), [0.0, 0.25, 0.75, 1.0]);
    let a = F::interpolate(&t, 4, InterpolateMode::Linear, true).to_vec::<f64>();
    assert!(a.iter().zip([0.0, 1.0 / 3.0, 2.0 / 3.0, 1.0]).all(|(g, w)| (g - w).abs() < 1e-15), "{a:?}");
    // Nearest takes integer tensors (index_select keeps the dtype).
    let i = Tensor::from_vec(vec![1i64, 2, 3, 4], [1, 1, 2, 2]);
    let up = F::interpolate(&i, 2.0, InterpolateMode::Nearest, None);
    assert_eq!((up.dtype(), up.shape()), (DType::I64, &[1, 1, 4, 4][..]));
    assert_eq!(up.to_vec::<i64>()[..8], [1, 1, 2, 2, 1, 1, 2, 2]);
    // pixel_unshuffle undoes pixel_shuffle.
    let y = Tensor::randn([2, 3, 4, 6]);
    let back = F::pixel_shuffle(&F::pixel_unshuffle(&y, 2), 2);
    assert_eq!(back.to_vec::<f32>(), y.to_vec::<f32>());
}

#[test]
fn gradients_match_finite_differences() {
    kiln::manual_seed(11);
    let leaf = |shape: &[usize]| Tensor::randn(shape).to_dtype(DType::F64).requires_grad_(true);
    let opts = GradcheckOpts::default();
    let o = |resize: Resize, mode, align: Option<bool>| InterpolateOpts {
        resize,
        mode,
        align_corners: align,
        recompute_scale_factor: None,
    };
    let cases = [
        ("nearest 1-D up", o(Resize::Size(vec![7]), InterpolateMode::Nearest, None), vec![1, 2, 3]),
        ("nearest 2-D down", o(Resize::ScaleFactor(vec![0.6]), InterpolateMode::Nearest, None), vec![1, 1, 5, 4]),
        ("nearest-exact 3-D", o(Resize::Size(vec![3, 2, 4]), InterpolateMode::NearestExact, None), vec![1, 1, 2, 3, 2]),
        ("linear", o(Resize::Size(vec![7]), InterpolateMode::Linear, Some(false)), vec![1, 2, 4]),
        ("linear align", o(Resize::Size(vec![3]), InterpolateMode::Linear, Some(true)), vec![2, 1, 5]),
        ("bilinear", o(Resize::ScaleFactor(vec![1.5, 0.7]), InterpolateMode::Bilinear, None), vec![1, 2, 3, 4]),
        ("bilinear align", o(Resize::Size(vec![4, 5]), InterpolateMode::Bilinear, Some(true)), vec![1, 1, 3, 3]),
        ("trilinear", o(Resize::Size(vec![3, 3, 2]), InterpolateMode::Trilinear, Some(false)), vec![1, 1, 2, 2, 3]),
    ];
    for (name, opts_i, shape) in cases {
        let f = |t: &[Tensor]| F::interpolate_opts(&t[0], &opts_i);
        let inputs = [leaf(&shape)];
        gradcheck(f, &inputs, opts).unwrap_or_else(|e| panic!("{name}: {e}"));
        gradgradcheck(f, &inputs, opts).unwrap_or_else(|e| panic!("{name} (second order): {e}"));
    }
    let inputs = [leaf(&[1, 8, 2, 3])];
    let f = |t: &[Tensor]| F::pixel_unshuffle(&F::pixel_shuffle(&t[0], 2), 1) * 2.0;
    gradcheck(f, &inputs, opts).expect("pixel_shuffle");
    gradgradcheck(f, &inputs, opts).expect("pixel_shuffle (second order)");
    let f = |t: &[Tensor]| F::pixel_unshuffle(&t[0], 2).sin();
    let inputs = [leaf(&[2, 1, 4, 2])];
    gradcheck(f, &inputs, opts).expect("pixel_unshuffle");
    gradgradcheck(f, &inputs, opts).expect("pixel_unshuffle (second order)");
}

#[test]
fn compiled_equals_eager_with_no_graph_break() {
    kiln::manual_seed(12);
    let x = Tensor::randn([2, 4, 3, 5]).requires_grad_(true);
    let w = Tensor::randn([2, 1, 12, 20]);
    let body = |(x, w): (&Tensor, &Tensor)| {
        x.set_grad(None);
        let a = F::interpolate(x, 4.0, InterpolateMode::Nearest, None);
        let b = F::interpolate(x, [12, 20], InterpolateMode::Bilinear, false);
        let c = F::interpolate(x, [12, 20], InterpolateMode::Bilinear, true);
        let d = F::interpolate(&F::pixel_shuffle(x, 2), [12, 20], InterpolateMode::NearestExact, None);
        let y = (&a + &b * 0.5 - &c * &d).sum_dim_keepdim(1);
        let z = F::pixel_unshuffle(&y, 2);
        (&y * w).sum().backward();
        (z, x.grad().expect("grad"))
    };
    let mut step = kiln::compile(body);
    let eager = step.call_eager((&x, &w));
    let compiled = step.call((&x, &w));
    assert_eq!(step.stats().graph_breaks, 0);
    for (what, c, e) in [("output", &compiled.0, &eager.0), ("gradient", &compiled.1, &eager.1)] {
        assert_eq!(c.shape(), e.shape(), "{what}");
        for (c, e) in c.to_vec::<f32>().iter().zip(e.to_vec::<f32>()) {
            assert!((c - e).abs() <= 1e-5 * (1.0 + e.abs()), "{what}: compiled {c}, eager {e}");
        }
    }
}

#[test]
fn modules_print_like_pytorch_and_resample_as_f_interpolate() {
    // print(nn.Upsample(scale_factor=2)), … in PyTorch 2.
    assert_eq!(
        nn::Upsample::new(2.0, InterpolateMode::Nearest).to_string(),
        "Upsample(scale_factor=2.0, mode='nearest')"
    );
    let mut o = InterpolateOpts::new([4, 5], InterpolateMode::Bilinear);
    o.align_corners = Some(true);
    assert_eq!(nn::Upsample::with_opts(o).to_string(), "Upsample(size=(4, 5), mode='bilinear')");
    assert_eq!(
        nn::Upsample::new([2.0, 1.5], InterpolateMode::Bilinear).to_string(),
        "Upsample(scale_factor=(2.0, 1.5), mode='bilinear')"
    );
    assert_eq!(
        nn::Upsample::new(3, InterpolateMode::NearestExact).to_string(),
        "Upsample(size=3, mode='nearest-exact')"
    );
    assert_eq!(nn::UpsamplingNearest2d::new(2.0).to_string(), "UpsamplingNearest2d(scale_factor=2.0, mode='nearest')");
    assert_eq!(nn::UpsamplingBilinear2d::new(4).to_string(), "UpsamplingBilinear2d(size=4, mode='bilinear')");
    assert_eq!(nn::PixelShuffle::new(3).to_string(), "PixelShuffle(upscale_factor=3)");
    assert_eq!(nn::PixelUnshuffle::new(2).to_string(), "PixelUnshuffle(downscale_factor=2)");

    kiln::manual_seed(13);
    let x = Tensor::randn([1, 4, 3, 4]);
    let same = |got: Tensor, want: Tensor| {
        assert_eq!(got.shape(), want.shape());
        assert_eq!(got.to_vec::<f32>(), want.to_vec::<f32>());
    };
    same(
        nn::Upsample::new(2.0, InterpolateMode::Nearest).forward(&x),
        F::interpolate(&x, 2.0, InterpolateMode::Nearest, None),
    );
    same(
        nn::UpsamplingBilinear2d::new([5, 7]).forward(&x),
        F::interpolate(&x, [5, 7], InterpolateMode::Bilinear, true),
    );
    same(nn::UpsamplingNearest2d::new(6).forward(&x), F::interpolate(&x, 6, InterpolateMode::Nearest, None));
    same(nn::PixelShuffle::new(2).forward(&x), F::pixel_shuffle(&x, 2));
    let t = Tensor::randn([1, 2, 4, 6]).transpose(2, 3);
    same(nn::PixelUnshuffle::new(2).forward(&t), F::pixel_unshuffle(&t, 2));
}

/// The error of `r`, checked to name `op`, the caller's line in this file, and each of `words`.
#[track_caller]
fn assert_error(r: kiln::Result<Tensor>, op: &str, kind: ErrorKind, words: &[&str]) {
    let e = r.expect_err("expected an error");
    let text = e.to_string();
    assert_eq!((e.op, e.kind), (op, kind), "{text}");
    assert_eq!(e.location.file(), HERE, "{text}");
    for w in words {
        assert!(text.contains(w), "{text} does not say {w:?}");
    }
}

#[test]
fn bad_arguments_are_errors_naming_the_op_shapes_and_line() {
    let x = Tensor::zeros([1, 1, 5]);
    let i = "interpolate";
    assert_error(
        F::try_interpolate(&x, 2.0, InterpolateMode::Nearest, true),
        i,
        ErrorKind::Value,
        &["align_corners", "nearest"],
    );
    assert_error(
        F::try_interpolate(&x, 2.0, InterpolateMode::Bilinear, None),
        i,
        ErrorKind::Shape,
        &["3-D input of shape [1, 1, 5]", "bilinear mode needs 4-D input"],
    );
    assert_error(
        F::try_interpolate(&Tensor::zeros([5]), 2, InterpolateMode::Nearest, None),
        i,
        ErrorKind::Shape,
        &["1-D input of shape [5]"],
    );
    assert_error(
        F::try_interpolate(&x, [3, 3], InterpolateMode::Nearest, None),
        i,
        ErrorKind::Shape,
        &["same number of spatial dimensions", "[1, 1, 5]", "[3, 3]"],
    );
    assert_error(
        F::try_interpolate(&x, 0, InterpolateMode::Linear, None),
        i,
        ErrorKind::Shape,
        &["greater than 0", "[1, 1, 5]"],
    );
    assert_error(
        F::try_interpolate(&x, 0.1, InterpolateMode::Nearest, None),
        i,
        ErrorKind::Shape,
        &["greater than 0", "[0]"],
    );
    assert_error(
        F::try_interpolate(&Tensor::zeros([1, 0, 4]), 3, InterpolateMode::Nearest, None),
        i,
        ErrorKind::Shape,
        &["non-empty", "[1, 0, 4]"],
    );
    assert_error(
        F::try_interpolate(&Tensor::zeros([1, 1, 4]).to_dtype(DType::I64), 3, InterpolateMode::Linear, None),
        i,
        ErrorKind::DType,
        &["linear", "int64", "[1, 1, 4]"],
    );
    let mut o = InterpolateOpts::new(4, InterpolateMode::Linear);
    o.recompute_scale_factor = Some(true);
    assert_error(F::try_interpolate_opts(&x, &o), i, ErrorKind::Value, &["recompute_scale_factor"]);
    // A batch of 0 is fine, as in PyTorch.
    assert_eq!(F::interpolate(&Tensor::zeros([0, 1, 4]), 3, InterpolateMode::Nearest, None).shape(), &[0, 1, 3]);

    let p = "pixel_shuffle";
    assert_error(
        F::try_pixel_shuffle(&Tensor::zeros([1, 3, 2, 2]), 2),
        p,
        ErrorKind::Shape,
        &["divisible", "[1, 3, 2, 2]"],
    );
    assert_error(
        F::try_pixel_shuffle(&Tensor::zeros([3, 2]), 2),
        p,
        ErrorKind::Shape,
        &["at least 3 dimensions", "[3, 2]"],
    );
    assert_error(F::try_pixel_shuffle(&Tensor::zeros([4, 2, 2]), 0), p, ErrorKind::Value, &["positive upscale_factor"]);
    assert_error(
        F::try_pixel_unshuffle(&Tensor::zeros([1, 3, 3, 2]), 2),
        "pixel_unshuffle",
        ErrorKind::Shape,
        &["divisible by downscale_factor 2", "[1, 3, 3, 2]"],
    );
    // The panicking form reports the caller's line too.
    let text = std::panic::catch_unwind(|| F::interpolate(&Tensor::zeros([1, 5]), 2.0, InterpolateMode::Nearest, None))
        .expect_err("a panic")
        .downcast::<String>()
        .expect("a message");
    assert!(text.starts_with("interpolate: ") && text.contains(&format!("(at {HERE}:")), "{text}");
}
