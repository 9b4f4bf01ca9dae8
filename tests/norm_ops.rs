//! Vector norms (`src/ops/norm.rs`), `F::normalize`, `F::cosine_similarity` and
//! `nn::CosineSimilarity`: values and gradients against PyTorch's (gradients at zero
//! included, where PyTorch's conventions differ from a plain decomposition), f64
//! finite-difference gradients, errors, and compiled equal to eager with no graph break.

use kiln::nn::functional as F;
use kiln::prelude::*;
use kiln::DType;

#[path = "common/op_checks.rs"]
mod op_checks;
use op_checks::{check_gradients, compiled_equals_eager, leaf, GradCase};

const INF: f64 = f64::INFINITY;

/// x = torch.arange(24, dtype=torch.float64).view(2, 3, 4) - 11.5
fn x() -> Tensor {
    (Tensor::arange(24).to_dtype(DType::F64) - 11.5).view([2, 3, 4])
}

fn f64s(v: &[f64]) -> Tensor {
    Tensor::new(&v.to_vec())
}

/// Panics unless `got` holds `want` (what PyTorch printed) to within 1e-14 relative.
fn assert_values(what: &str, got: &Tensor, want: &[f64]) {
    let got = got.to_vec::<f64>();
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-14 * (1.0 + w.abs()), "{what}: element {i}: {g} vs {w}");
    }
}

#[test]
fn norms_match_pytorch() {
    // (p, torch.norm(x, p), torch.norm(x, p, dim=[0, 2]))
    let cases: [(f64, f64, [f64; 3]); 8] = [
        (2.0, 33.91164991562634, [20.639767440550294, 17.26267650163207, 20.639767440550294]),
        (1.0, 144.0, [48.0, 48.0, 48.0]),
        (INF, 11.5, [11.5, 7.5, 11.5]),
        (-INF, 0.5, [0.5, 4.5, 0.5]),
        (0.0, 24.0, [8.0, 8.0, 8.0]),
        (3.0, 21.78018006109565, [16.14963783626185, 12.402982286497261, 16.14963783626185]),
        (0.5, 3084.1780393350996, [324.4695187415406, 380.6128464064635, 324.4695187415404]),
        (-1.5, 0.2420255351947058, [0.40305444985098055, 1.4335267317615459, 0.40305444985098055]),
    ];
    for (p, all, over) in cases {
        let n = x().norm(p);
        assert_eq!((n.shape(), n.dtype()), (&[][..], DType::F64), "p = {p}");
        assert_values(&format!("norm(x, {p})"), &n, &[all]);
        let d = x().norm_dim_keepdim(p, [0, 2]);
        assert_eq!(d.shape(), [1, 3, 1], "p = {p}");
        assert_values(&format!("norm(x, {p}, dim=[0, 2])"), &d, &over);
    }
    assert_eq!(x().to_dtype(DType::F16).norm(2.0).dtype(), DType::F16);
}

#[test]
fn gradients_at_zero_are_pytorchs() {
    // (p, the gradient of torch.norm(y, p) at y = [0, 1, -2, 0.5]); at y = 0 it is zero for all.
    let cases: [(f64, [f64; 4]); 6] = [
        (2.0, [0.0, 0.4364357804719848, -0.8728715609439696, 0.2182178902359924]),
        (1.0, [0.0, 1.0, -1.0, 1.0]),
        (INF, [0.0, 0.0, -1.0, 0.0]),
        (3.0, [0.0, 0.2290048874729442, -0.9160195498917768, 0.05725122186823605]),
        (0.5, [0.0, 3.1213203435596424, -2.207106781186547, 4.414213562373094]),
        (-1.5, [0.0, 0.0, 0.0, 0.0]),
    ];
    for (p, want) in cases {
        let y = f64s(&[0.0, 1.0, -2.0, 0.5]).requires_grad_(true);
        y.norm(p).backward();
        assert_values(&format!("grad of norm(y, {p})"), &y.grad().unwrap(), &want);
        let z = Tensor::zeros([3]).to_dtype(DType::F64).requires_grad_(true);
        z.norm(p).backward();
        assert_values(&format!("grad of norm(0, {p})"), &z.grad().unwrap(), &[0.0; 3]);
    }
}

#[test]
fn normalize_and_cosine_similarity_match_pytorch() {
    let a = f64s(&[3.0, 4.0, 0.0, 0.01, 0.0, 0.0, 0.0, 0.0, 0.0]).view([3, 3]).requires_grad_(true);
    let b = f64s(&[1.0, 2.0, 2.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0]).view([3, 3]).requires_grad_(true);
    let n = F::normalize(&a, 2.0, 1, 0.1);
    assert_values("normalize", &n, &[0.6, 0.8, 0.0, 0.09999999999999999, 0.0, 0.0, 0.0, 0.0, 0.0]);
    (&n * Tensor::arange(9).to_dtype(DType::F64).view([3, 3])).sum().backward();
    let want = [-0.096, 0.07200000000000001, 0.4, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0];
    assert_values("normalize's gradient", &a.grad().unwrap(), &want);

    let a = a.detach().requires_grad_(true);
    let c = F::cosine_similarity(&a, &b, 1, 0.1);
    assert_values("cosine_similarity", &c, &[0.7333333333333333, 0.09999999999999999, 0.0]);
    (&c * f64s(&[1.0, 2.0, 3.0])).sum().backward();
    // Where a norm is below eps, PyTorch divides by eps but differentiates the norm unclamped.
    #[rustfmt::skip]
    let ga = [-0.02133333333333333, 0.015999999999999986, 0.13333333333333333, 18.0, 0.0, 0.0,
        17.320508075688775, 17.320508075688775, 17.320508075688775];
    assert_values("cosine_similarity's gradient (x1)", &a.grad().unwrap(), &ga);
    let gb = [0.1185185185185185, 0.10370370370370369, -0.16296296296296298, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
    assert_values("cosine_similarity's gradient (x2)", &b.grad().unwrap(), &gb);
    // Broadcasting, and the module with PyTorch's defaults.
    let m = nn::CosineSimilarity::default().forward(&Tensor::new(&[[1.0f32, 2.0]]), &Tensor::new(&[3.0f32, 4.0]));
    assert!((m.to_vec::<f32>()[0] - 0.983_869_9).abs() < 1e-7, "{m}");
}

#[test]
fn bad_inputs_are_errors_naming_the_op() {
    let e = Tensor::arange(3).try_norm(2.0).unwrap_err();
    assert!(e.op == "norm" && e.to_string().contains("Expected a floating point tensor as input. Got Long"), "{e}");
    let e = Tensor::zeros([0, 3]).try_norm(INF).unwrap_err();
    assert!(e.op == "norm" && e.to_string().contains("empty"), "{e}");
    assert!(e.to_string().contains("tests/norm_ops.rs"), "{e}");
    let e = x().try_norm_dim(2.0, 3).unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");
    // An empty reduction has a value for finite p: the sum of nothing.
    assert_eq!(Tensor::zeros([0, 3]).norm(2.0).item::<f32>(), 0.0);
    assert_eq!(Tensor::zeros([0, 3]).norm_dim(INF, 1).shape(), [0], "no output reduces nothing");
    assert!(Tensor::zeros([0, 3]).try_norm_dim(INF, 0).is_err(), "each output would reduce nothing");
}

#[test]
fn gradients_match_finite_differences() {
    kiln::manual_seed(12);
    let cases: [GradCase; 7] = [
        ("norm 2", |t| t[0].norm_dim(2.0, 1), vec![leaf(&[3, 4])]),
        ("norm 3", |t| t[0].norm(3.0), vec![leaf(&[5])]),
        ("norm 0.5", |t| t[0].norm_dim_keepdim(0.5, [0, 2]), vec![leaf(&[2, 2, 3])]),
        ("norm -1.5", |t| t[0].norm(-1.5), vec![leaf(&[4])]),
        ("norm inf", |t| t[0].norm_dim(INF, 0), vec![leaf(&[3, 2])]),
        ("normalize", |t| F::normalize(&t[0], 2.0, 1, 1e-12), vec![leaf(&[2, 3])]),
        ("cosine_similarity", |t| F::cosine_similarity(&t[0], &t[1], 1, 1e-8), vec![leaf(&[2, 3]), leaf(&[2, 3])]),
    ];
    check_gradients(cases);
}

#[test]
fn compiled_step_equals_eager() {
    kiln::manual_seed(13);
    let inputs = [Tensor::randn([4, 6]), Tensor::randn([4, 6])];
    compiled_equals_eager(&inputs, |t| {
        let (x, y) = (&t[0], &t[1]);
        let loss = x.norm(2.0) + x.norm_dim(3.0, 1).sum() + F::normalize(x, 2.0, 1, 1e-12).sum() * 0.5
            - F::cosine_similarity(x, y, 1, 1e-8).sum();
        loss.backward();
        loss
    });
}
