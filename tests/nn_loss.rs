//! The losses of `kiln::nn::functional` and their modules in `kiln::nn`: values and gradients
//! against PyTorch (tests/fixtures/loss.txt, made by scripts/fixtures_loss.py) for every loss,
//! reduction and option; gradcheck in f64 for each loss and gradgradcheck for mse_loss and
//! cross_entropy; errors that name the op, the shapes and the caller's line.

mod common;

use common::{
    assert_covers, assert_errors_named, catch_quietly, panic_message, run_fixture, Arg, Case, Expect, Outcome,
};
use kiln::autograd::{gradcheck, gradgradcheck, GradcheckOpts};
use kiln::nn;
use kiln::nn::functional as F;
use kiln::nn::functional::{
    BinaryCrossEntropyOpts, BinaryCrossEntropyWithLogitsOpts, CrossEntropyOpts, KlDivReduction, NllLossOpts, Reduction,
};
use kiln::{DType, Tensor};

const OPS: &[&str] = &[
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "cross_entropy",
    "nll_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "kl_div",
];

fn reduction(case: &Case) -> Reduction {
    match case.attr("reduction").unwrap_or("mean") {
        "none" => Reduction::None,
        "mean" => Reduction::Mean,
        "sum" => Reduction::Sum,
        "batchmean" => Reduction::Mean, // kl_div only: mapped to KlDivReduction::BatchMean there
        other => panic!("{}: reduction {other}", case.name),
    }
}

/// The fixture's cotangent `((i % 5) + 1) / 4` over the flat index of `out`.
fn cot(out: &Tensor) -> Tensor {
    let v: Vec<f64> = (0..out.numel()).map(|i| ((i % 5) + 1) as f64 / 4.0).collect();
    Tensor::from_vec(v, out.shape()).to_dtype(out.dtype())
}

/// The named tensor argument of a case, if present.
fn arg<'a>(case: &Case, args: &'a [Arg], name: &str) -> Option<&'a Tensor> {
    case.args.iter().position(|(n, _)| n == name).map(|i| args[i].tensor())
}

/// Runs a loss case through kiln (this file's line is the caller of every loss).
fn run_loss(case: &Case, args: &[Arg]) -> kiln::Result<Tensor> {
    let input = arg(case, args, "input").expect("input");
    let target = arg(case, args, "target").expect("target");
    let weight = arg(case, args, "weight").cloned();
    let pos_weight = arg(case, args, "pos_weight").cloned();
    let r = reduction(case);
    match case.op.as_str() {
        "mse_loss" => F::try_mse_loss_opts(input, target, r),
        "l1_loss" => F::try_l1_loss_opts(input, target, r),
        "smooth_l1_loss" => F::try_smooth_l1_loss(input, target, r, case.attr_opt("beta").unwrap_or(1.0)),
        "cross_entropy" => {
            let opts = CrossEntropyOpts {
                weight,
                ignore_index: case.attr_opt("ignore_index").unwrap_or(-100),
                reduction: r,
                label_smoothing: case.attr_opt("label_smoothing").unwrap_or(0.0),
            };
            F::try_cross_entropy_opts(input, target, &opts)
        }
        "nll_loss" => {
            let opts =
                NllLossOpts { weight, ignore_index: case.attr_opt("ignore_index").unwrap_or(-100), reduction: r };
            F::try_nll_loss_opts(input, target, &opts)
        }
        "binary_cross_entropy" => {
            F::try_binary_cross_entropy_opts(input, target, &BinaryCrossEntropyOpts { weight, reduction: r })
        }
        "binary_cross_entropy_with_logits" => F::try_binary_cross_entropy_with_logits_opts(
            input,
            target,
            &BinaryCrossEntropyWithLogitsOpts { weight, pos_weight, reduction: r },
        ),
        "kl_div" => {
            let kr = match case.attr("reduction").unwrap_or("mean") {
                "batchmean" => KlDivReduction::BatchMean,
                _ => r.into(),
            };
            F::try_kl_div(input, target, kr, case.attr_flag("log_target"))
        }
        other => panic!("unmapped op {other}"),
    }
}

/// The loss, then the gradients the case records: of the input (a second output), of the
/// target (a third).
fn run(case: &Case, args: &[Arg]) -> Outcome {
    let n_out = match &case.expect {
        Expect::Outputs(o) => o.len(),
        Expect::Error(_) => 1,
    };
    if !OPS.contains(&case.op.as_str()) {
        return None;
    }
    let input = arg(case, args, "input").unwrap();
    let target = arg(case, args, "target").unwrap();
    if n_out >= 2 {
        input.requires_grad_(true);
    }
    if n_out >= 3 {
        target.requires_grad_(true);
    }
    let loss = match run_loss(case, args) {
        Ok(l) => l,
        Err(e) => return Some(Err(e.to_string())),
    };
    let mut outs = vec![loss.detach()];
    if n_out >= 2 {
        (&loss * cot(&loss)).sum().backward();
        outs.push(input.grad().expect("input grad"));
        if n_out >= 3 {
            outs.push(target.grad().expect("target grad"));
        }
    }
    Some(Ok(outs))
}

#[test]
fn losses_match_pytorch() {
    let cases = run_fixture("loss.txt", run);
    assert_covers(&cases, OPS);
    assert!(cases.len() > 200, "{} cases", cases.len());
}

#[test]
fn errors_name_the_op_and_the_callers_line() {
    let n = assert_errors_named("loss.txt", file!(), run, |c| c.op.clone());
    assert!(n >= 10, "{n} error cases");
}

#[test]
fn kiln_specific_errors() {
    let x = Tensor::zeros([3, 4]);
    let e = F::try_mse_loss_opts(&x, &Tensor::zeros([4]), Reduction::Mean).unwrap_err().to_string();
    assert!(
        e.starts_with("mse_loss: ") && e.contains("[4]") && e.contains("[3, 4]") && e.contains("nn_loss.rs"),
        "{e}"
    );
    let e = F::try_cross_entropy(&x, &Tensor::new(&[0i64, 9, 1])).unwrap_err().to_string();
    assert!(e.starts_with("cross_entropy: target 9 is out of bounds"), "{e}");
    let e = F::try_cross_entropy(&Tensor::zeros([3, 4]).to_dtype(DType::I64), &Tensor::new(&[0i64, 1, 1]))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("cross_entropy: ") && e.contains("int64"), "{e}");
    let e = F::try_kl_div(&x, &Tensor::zeros([3, 1]), Reduction::Sum, false).unwrap_err().to_string();
    assert!(e.starts_with("kl_div: ") && e.contains("[3, 1]"), "{e}");
    // The panicking form reports the caller's line.
    let line = line!() + 1;
    let p = catch_quietly(|| F::nll_loss(&x, &Tensor::new(&[0i64, 1, 4])));
    let msg = panic_message(&*p.unwrap_err());
    assert!(
        msg.starts_with("nll_loss: target 4 is out of bounds") && msg.contains(&format!("nn_loss.rs:{line}")),
        "{msg}"
    );
}

#[test]
fn cross_entropy_is_stable_and_matches_log_softmax() {
    // Logits of 1e4 overflow exp() in f32; log_softmax + gather does not.
    let x = Tensor::new(&[[1e4f32, 0.0, -1e4], [3.0, 2.0, 1.0]]);
    let t = Tensor::new(&[1i64, 0]);
    let loss = F::cross_entropy_opts(&x, &t, &CrossEntropyOpts { reduction: Reduction::None, ..Default::default() });
    let v = loss.to_vec::<f32>();
    assert_eq!(v[0], 1e4);
    let lse = (3f64.exp() + 2f64.exp() + 1f64.exp()).ln();
    assert!((v[1] as f64 - (lse - 3.0)).abs() < 1e-6, "{v:?}");
    // the free softmax functions are the methods
    assert!(F::log_softmax(&x, 1).allclose(&x.log_softmax(1), 0.0, 0.0));
    assert!(F::softmax(&x, 0).allclose(&x.softmax(0), 0.0, 0.0));
}

fn leaf(shape: &[usize]) -> Tensor {
    Tensor::randn(shape).to_dtype(DType::F64).requires_grad_(true)
}

fn probs(shape: &[usize]) -> Tensor {
    (Tensor::rand(shape).to_dtype(DType::F64) * 0.8 + 0.1).requires_grad_(true)
}

fn check(what: &str, inputs: &[Tensor], f: impl Fn(&[Tensor]) -> Tensor) {
    if let Err(e) = gradcheck(&f, inputs, GradcheckOpts::default()) {
        panic!("{what}: {e}");
    }
}

fn check2(what: &str, inputs: &[Tensor], f: impl Fn(&[Tensor]) -> Tensor) {
    if let Err(e) = gradgradcheck(&f, inputs, GradcheckOpts::default()) {
        panic!("{what}: {e}");
    }
}

#[test]
fn gradcheck_every_loss() {
    kiln::manual_seed(1);
    let (x, t) = (leaf(&[3, 4]), leaf(&[3, 4]));
    for r in [Reduction::None, Reduction::Mean, Reduction::Sum] {
        check("mse_loss", &[x.clone(), t.clone()], |v| F::mse_loss_opts(&v[0], &v[1], r));
        check("l1_loss", &[x.clone(), t.clone()], |v| F::l1_loss_opts(&v[0], &v[1], r));
        check("smooth_l1_loss", &[x.clone(), t.clone()], |v| F::smooth_l1_loss(&v[0], &v[1], r, 0.7));
    }
    let classes = Tensor::new(&[1i64, -100, 3]);
    let w = Tensor::new(&[0.5f64, 1.0, 2.0, 1.5]);
    let opts = CrossEntropyOpts { weight: Some(w.clone()), label_smoothing: 0.2, ..Default::default() };
    check("cross_entropy", std::slice::from_ref(&x), |v| F::cross_entropy_opts(&v[0], &classes, &opts));
    let kd = leaf(&[2, 3, 2, 2]);
    let kt = Tensor::new(&[[[0i64, 2], [1, 1]], [[2, 0], [-100, 1]]]);
    check("cross_entropy (N,C,d1,d2)", std::slice::from_ref(&kd), |v| F::cross_entropy(&v[0], &kt));
    let p = probs(&[3, 4]);
    check("cross_entropy probs", &[x.clone(), p.clone()], |v| F::cross_entropy(&v[0], &v[1]));
    let nopts = NllLossOpts { weight: Some(w.clone()), ..Default::default() };
    check("nll_loss", std::slice::from_ref(&x), |v| F::nll_loss_opts(&v[0], &classes, &nopts));
    let bopts = BinaryCrossEntropyOpts { weight: Some(w.clone()), reduction: Reduction::Sum };
    check("binary_cross_entropy", &[probs(&[3, 4]), p.clone()], |v| F::binary_cross_entropy_opts(&v[0], &v[1], &bopts));
    let lopts =
        BinaryCrossEntropyWithLogitsOpts { weight: None, pos_weight: Some(w.clone()), reduction: Reduction::Mean };
    check("binary_cross_entropy_with_logits", &[x.clone(), p.clone()], |v| {
        F::binary_cross_entropy_with_logits_opts(&v[0], &v[1], &lopts)
    });
    check("kl_div", &[x.clone(), p.clone()], |v| F::kl_div(&v[0], &v[1], KlDivReduction::BatchMean, false));
    check("kl_div log_target", &[x.clone(), t.clone()], |v| F::kl_div(&v[0], &v[1], Reduction::Sum, true));
}

#[test]
fn gradgradcheck_mse_and_cross_entropy() {
    kiln::manual_seed(2);
    let (x, t) = (leaf(&[2, 3]), leaf(&[2, 3]));
    check2("mse_loss", &[x.clone(), t], |v| F::mse_loss(&v[0], &v[1]));
    let classes = Tensor::new(&[2i64, 0]);
    let opts =
        CrossEntropyOpts { weight: Some(Tensor::new(&[1.0f64, 2.0, 0.5])), label_smoothing: 0.1, ..Default::default() };
    check2("cross_entropy", std::slice::from_ref(&x), |v| F::cross_entropy_opts(&v[0], &classes, &opts));
}

#[test]
fn modules_apply_their_options() {
    kiln::manual_seed(3);
    let x = Tensor::randn([4, 3]);
    let t = Tensor::randn([4, 3]);
    let c = Tensor::new(&[0i64, 2, 1, 2]);
    let w = Tensor::new(&[1.0f32, 0.5, 2.0]);
    let p = Tensor::rand([4, 3]) * 0.8 + 0.1;
    let same = |a: Tensor, b: Tensor| assert!(a.allclose(&b, 0.0, 0.0), "{a} vs {b}");
    same(nn::MSELoss::new().reduction(Reduction::Sum).forward(&x, &t), F::mse_loss_opts(&x, &t, Reduction::Sum));
    same(nn::L1Loss::new().forward(&x, &t), F::l1_loss(&x, &t));
    same(
        nn::SmoothL1Loss::new().beta(0.5).reduction(Reduction::None).forward(&x, &t),
        F::smooth_l1_loss(&x, &t, Reduction::None, 0.5),
    );
    same(nn::SmoothL1Loss::new().forward(&x, &t), F::smooth_l1_loss(&x, &t, Reduction::Mean, 1.0));
    let ce =
        nn::CrossEntropyLoss::new().weight(w.clone()).ignore_index(1).label_smoothing(0.1).reduction(Reduction::Sum);
    let opts =
        CrossEntropyOpts { weight: Some(w.clone()), ignore_index: 1, reduction: Reduction::Sum, label_smoothing: 0.1 };
    same(ce.forward(&x, &c), F::cross_entropy_opts(&x, &c, &opts));
    same(nn::CrossEntropyLoss::new().forward(&x, &c), F::cross_entropy(&x, &c));
    let lp = x.log_softmax(1);
    let nll = nn::NLLLoss::new().weight(w.clone()).ignore_index(0);
    same(
        nll.forward(&lp, &c),
        F::nll_loss_opts(
            &lp,
            &c,
            &NllLossOpts { weight: Some(w.clone()), ignore_index: 0, reduction: Reduction::Mean },
        ),
    );
    same(
        nn::BCELoss::new().weight(w.clone()).forward(&p, &p.sigmoid()),
        F::binary_cross_entropy_opts(
            &p,
            &p.sigmoid(),
            &BinaryCrossEntropyOpts { weight: Some(w.clone()), reduction: Reduction::Mean },
        ),
    );
    let bl = nn::BCEWithLogitsLoss::new().pos_weight(w.clone()).reduction(Reduction::None);
    let blo =
        BinaryCrossEntropyWithLogitsOpts { weight: None, pos_weight: Some(w.clone()), reduction: Reduction::None };
    same(bl.forward(&x, &p), F::binary_cross_entropy_with_logits_opts(&x, &p, &blo));
    same(
        nn::KLDivLoss::new().reduction(KlDivReduction::BatchMean).log_target(true).forward(&lp, &t),
        F::kl_div(&lp, &t, KlDivReduction::BatchMean, true),
    );
    // the module form names the functional op in its errors
    let e = nn::CrossEntropyLoss::new().try_forward(&x, &Tensor::new(&[0i64, 3, 1, 2])).unwrap_err();
    assert_eq!(e.op, "cross_entropy");
    // a loss trains: one SGD-like step lowers the loss
    let logits = Tensor::randn([4, 3]).requires_grad_(true);
    let ce = nn::CrossEntropyLoss::new();
    let before = ce.forward(&logits, &c);
    before.backward();
    let stepped = (&logits - logits.grad().unwrap() * 0.5).detach();
    assert!(ce.forward(&stepped, &c).item::<f32>() < before.item::<f32>());
}
