//! Learning-rate schedulers against PyTorch's `get_last_lr()` (and the cycled momentum) over
//! 30 steps, from tests/fixtures/optim.txt (format: the header of scripts/fixtures_optim.py);
//! state-dict round trips and errors.

use kiln::optim::lr_scheduler::{
    AnnealStrategy, CosineAnnealingLR, ExponentialLR, LRScheduler, LinearLR, MultiStepLR, OneCycleLR, OneCycleLRConfig,
    PlateauMode, ReduceLROnPlateau, ReduceLROnPlateauConfig, StepLR, ThresholdMode,
};
use kiln::optim::{Adagrad, AdagradConfig, Adam, AdamConfig, Optimizer, ParamGroup, SGDConfig, SGD};
use kiln::{StateDict, Tensor};

#[path = "common/optim_fixture.rs"]
mod optim_fixture;
use optim_fixture::{key_values, load_cases, Case};

fn floats(s: &str) -> Vec<f64> {
    s.split(',').map(|x| x.parse().unwrap()).collect()
}

/// A scheduler stepped by epochs or by a metric.
enum Sched {
    Epoch(Box<dyn LRScheduler>),
    Plateau(ReduceLROnPlateau),
}

impl Sched {
    fn step(&mut self, opt: &mut dyn Optimizer, metric: Option<f64>) {
        match self {
            Sched::Epoch(s) => s.step(opt),
            Sched::Plateau(s) => s.step_with_metric(opt, metric.expect("a metric")),
        }
    }
    fn last_lr(&self) -> Vec<f64> {
        match self {
            Sched::Epoch(s) => s.get_last_lr(),
            Sched::Plateau(s) => s.get_last_lr(),
        }
    }
    fn state_dict(&self) -> StateDict {
        match self {
            Sched::Epoch(s) => s.state_dict(),
            Sched::Plateau(s) => s.state_dict(),
        }
    }
    fn load_state_dict(&mut self, sd: &StateDict) -> kiln::Result<()> {
        match self {
            Sched::Epoch(s) => s.load_state_dict(sd),
            Sched::Plateau(s) => s.load_state_dict(sd),
        }
    }
}

/// The case's optimizer (two groups, momentum 0.9 for SGD) over fresh parameters.
fn build_opt(case: &Case) -> Box<dyn Optimizer> {
    let kind = &case.lines.iter().find(|l| l.tag == "opt").unwrap().args[0];
    let groups: Vec<_> = case.lines.iter().filter(|l| l.tag == "group").map(|l| key_values(&l.args)).collect();
    let lr = |g: usize| groups[g]["lr"].parse::<f64>().unwrap();
    let p = || Tensor::zeros([2]).requires_grad_(true);
    match kind.as_str() {
        "SGD" => Box::new(SGD::with_groups(
            (0..2)
                .map(|g| ParamGroup::new([p()], SGDConfig { lr: lr(g), momentum: 0.9, ..Default::default() }))
                .collect(),
        )),
        "Adam" => Box::new(Adam::with_groups(
            (0..2).map(|g| ParamGroup::new([p()], AdamConfig { lr: lr(g), ..Default::default() })).collect(),
        )),
        _ => panic!("unknown optimizer {kind}"),
    }
}

fn build_sched(case: &Case, opt: &mut dyn Optimizer) -> Sched {
    let line = case.lines.iter().find(|l| l.tag == "sched").unwrap();
    let kv = key_values(&line.args[1..]);
    let f = |k: &str| kv[k].parse::<f64>().unwrap();
    let u = |k: &str| kv[k].parse::<usize>().unwrap();
    let epoch: Box<dyn LRScheduler> = match line.args[0].as_str() {
        "StepLR" => Box::new(StepLR::new(opt, u("step_size"), f("gamma"))),
        "MultiStepLR" => {
            Box::new(MultiStepLR::new(opt, kv["milestones"].split(',').map(|m| m.parse().unwrap()), f("gamma")))
        }
        "ExponentialLR" => Box::new(ExponentialLR::new(opt, f("gamma"))),
        "CosineAnnealingLR" => {
            Box::new(CosineAnnealingLR::new(opt, u("T_max"), kv.get("eta_min").map_or(0.0, |v| v.parse().unwrap())))
        }
        "LinearLR" => Box::new(LinearLR::new(opt, f("start_factor"), f("end_factor"), u("total_iters"))),
        "OneCycleLR" => {
            let mut c = OneCycleLRConfig::new(0.0, u("total_steps"));
            c.max_lr = floats(&kv["max_lr"]);
            for (k, v) in &kv {
                match k.as_str() {
                    "pct_start" => c.pct_start = v.parse().unwrap(),
                    "anneal_strategy" => {
                        c.anneal_strategy = if v == "linear" { AnnealStrategy::Linear } else { AnnealStrategy::Cos }
                    }
                    "div_factor" => c.div_factor = v.parse().unwrap(),
                    "final_div_factor" => c.final_div_factor = v.parse().unwrap(),
                    "three_phase" => c.three_phase = v == "True",
                    "cycle_momentum" => c.cycle_momentum = v == "True",
                    "max_lr" | "total_steps" => {}
                    _ => panic!("unknown OneCycleLR option {k}"),
                }
            }
            Box::new(OneCycleLR::new(opt, c))
        }
        "ReduceLROnPlateau" => {
            let mut c = ReduceLROnPlateauConfig::default();
            for (k, v) in &kv {
                match k.as_str() {
                    "mode" => c.mode = if v == "max" { PlateauMode::Max } else { PlateauMode::Min },
                    "threshold_mode" => {
                        c.threshold_mode = if v == "abs" { ThresholdMode::Abs } else { ThresholdMode::Rel }
                    }
                    "factor" => c.factor = v.parse().unwrap(),
                    "patience" => c.patience = v.parse().unwrap(),
                    "cooldown" => c.cooldown = v.parse().unwrap(),
                    "threshold" => c.threshold = v.parse().unwrap(),
                    "min_lr" => c.min_lr = floats(v),
                    _ => panic!("unknown ReduceLROnPlateau option {k}"),
                }
            }
            return Sched::Plateau(ReduceLROnPlateau::new(opt, c));
        }
        other => panic!("unknown scheduler {other}"),
    };
    Sched::Epoch(epoch)
}

fn values_at<'a>(case: &'a Case, tag: &str, k: usize) -> Option<&'a [f64]> {
    case.lines.iter().find(|l| l.tag == tag && l.args[0] == k.to_string()).map(|l| &l.values[..])
}

fn steps(case: &Case) -> usize {
    case.lines.iter().filter(|l| l.tag == "lr").count() - 1
}

fn momenta(opt: &dyn Optimizer) -> Vec<f64> {
    (0..opt.num_param_groups()).map(|g| opt.momentum(g).unwrap()).collect()
}

#[test]
fn schedules_match_pytorch() {
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs().max(1e-300) + 1e-15;
    let mut failures = Vec::new();
    let cases = load_cases("sched");
    for case in &cases {
        let mut opt = build_opt(case);
        let mut sched = build_sched(case, opt.as_mut());
        for k in 0..=steps(case) {
            if k > 0 {
                opt.step();
                sched.step(opt.as_mut(), values_at(case, "metric", k).map(|m| m[0]));
            }
            let (want_lr, want_m) = (values_at(case, "lr", k).unwrap(), values_at(case, "momentum", k).unwrap());
            let (got_lr, got_m) = (sched.last_lr(), momenta(opt.as_ref()));
            let opt_lr: Vec<f64> = (0..2).map(|g| opt.lr(g)).collect();
            if got_lr != opt_lr {
                failures
                    .push(format!("{} step {k}: get_last_lr {got_lr:?} but the optimizer has {opt_lr:?}", case.name));
            }
            if got_lr.len() != want_lr.len() || !got_lr.iter().zip(want_lr).all(|(a, b)| close(*a, *b)) {
                failures.push(format!("{} step {k}: lr kiln {got_lr:?}, PyTorch {want_lr:?}", case.name));
            }
            if !got_m.iter().zip(want_m).all(|(a, b)| close(*a, *b)) {
                failures.push(format!("{} step {k}: momentum kiln {got_m:?}, PyTorch {want_m:?}", case.name));
            }
        }
    }
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures[..failures.len().min(20)].join("\n"));
}

#[test]
fn resume_from_state_dicts_equals_never_stopping() {
    for case in &load_cases("sched") {
        let n = steps(case);
        let metric = |k: usize| values_at(case, "metric", k).map(|m| m[0]);
        let mut opt = build_opt(case);
        let mut sched = build_sched(case, opt.as_mut());
        let mut continuous = Vec::new();
        for k in 1..=n {
            sched.step(opt.as_mut(), metric(k));
            continuous.push((sched.last_lr(), momenta(opt.as_ref())));
        }

        let mut opt = build_opt(case);
        let mut sched = build_sched(case, opt.as_mut());
        let half = n / 2;
        for k in 1..=half {
            sched.step(opt.as_mut(), metric(k));
        }
        let (opt_sd, sched_sd) = (opt.state_dict(), sched.state_dict());
        // As in PyTorch: build the scheduler first, then load both.
        let mut opt = build_opt(case);
        let mut sched = build_sched(case, opt.as_mut());
        opt.load_state_dict(&opt_sd).unwrap();
        sched.load_state_dict(&sched_sd).unwrap();
        for k in half + 1..=n {
            sched.step(opt.as_mut(), metric(k));
            assert_eq!(
                (sched.last_lr(), momenta(opt.as_ref())),
                continuous[k - 1],
                "{} step {k}: resumed differs from continuous",
                case.name
            );
        }
    }
}

fn sgd(lrs: &[f64]) -> SGD {
    SGD::with_groups(
        lrs.iter()
            .map(|&lr| {
                ParamGroup::new(
                    [Tensor::zeros([1]).requires_grad_(true)],
                    SGDConfig { lr, momentum: 0.9, ..Default::default() },
                )
            })
            .collect(),
    )
}

#[test]
fn constructors_set_the_initial_lr() {
    let mut opt = sgd(&[0.1, 0.2]);
    let s = LinearLR::new(&mut opt, 0.5, 1.0, 4);
    assert_eq!(s.get_last_lr(), vec![0.05, 0.1]);
    assert_eq!((opt.lr(0), opt.lr(1)), (0.05, 0.1));
    let mut opt = sgd(&[0.1]);
    let s = OneCycleLR::new(&mut opt, OneCycleLRConfig::new(2.5, 10));
    assert!((s.get_last_lr()[0] - 0.1).abs() < 1e-15, "{:?}", s.get_last_lr());
    assert_eq!(opt.momentum(0), Some(0.95));
    let mut opt = sgd(&[0.1]);
    let s = StepLR::new(&mut opt, 3, 0.1);
    assert_eq!(s.get_last_lr(), vec![0.1]);
    let sd = s.state_dict();
    assert_eq!(
        (sd.metadata("last_epoch"), sd.metadata("_step_count"), sd.metadata("step_size")),
        (Some("0"), Some("1"), Some("3"))
    );
}

#[test]
fn errors() {
    let mut opt = sgd(&[0.1]);
    let mut s = OneCycleLR::new(&mut opt, OneCycleLRConfig::new(1.0, 3));
    for _ in 0..3 {
        s.try_step(&mut opt).unwrap();
    }
    let err = s.try_step(&mut opt).unwrap_err().to_string();
    assert!(err.contains("Tried to step 4 times"), "{err}");

    let mut ada = Adagrad::new([Tensor::zeros([1]).requires_grad_(true)], AdagradConfig::default());
    let err = OneCycleLR::try_new(&mut ada, OneCycleLRConfig::new(1.0, 3)).unwrap_err().to_string();
    assert!(err.contains("momentum or beta1"), "{err}");
    assert!(OneCycleLR::try_new(&mut ada, OneCycleLRConfig { cycle_momentum: false, ..OneCycleLRConfig::new(1.0, 3) })
        .is_ok());
    assert!(OneCycleLR::try_new(
        &mut opt,
        OneCycleLRConfig { max_lr: vec![1.0, 2.0], ..OneCycleLRConfig::new(1.0, 3) }
    )
    .is_err());
    assert!(
        OneCycleLR::try_new(&mut opt, OneCycleLRConfig { pct_start: 1.5, ..OneCycleLRConfig::new(1.0, 3) }).is_err()
    );
    assert!(LinearLR::try_new(&mut opt, 0.0, 1.0, 5).is_err());
    assert!(LinearLR::try_new(&mut opt, 0.5, 1.5, 5).is_err());
    assert!(
        ReduceLROnPlateau::try_new(&mut opt, ReduceLROnPlateauConfig { factor: 1.0, ..Default::default() }).is_err()
    );
    assert!(ReduceLROnPlateau::try_new(
        &mut opt,
        ReduceLROnPlateauConfig { min_lr: vec![0.0, 0.1, 0.2], ..Default::default() }
    )
    .is_err());

    let mut s = StepLR::new(&mut opt, 2, 0.5);
    let mut sd = s.state_dict();
    sd.set_metadata("gamma", "half");
    let err = s.load_state_dict(&sd).unwrap_err().to_string();
    assert!(err.contains("gamma"), "{err}");
    let mut two = sgd(&[0.1, 0.2]);
    let mut s2 = StepLR::new(&mut two, 2, 0.5);
    assert!(s2.load_state_dict(&s.state_dict()).unwrap_err().to_string().contains("parameter groups"));

    let mut adam = Adam::new([Tensor::zeros([1]).requires_grad_(true)], AdamConfig::default());
    let mut m = MultiStepLR::new(&mut adam, [4, 2], 0.1);
    for _ in 0..4 {
        m.step(&mut adam);
    }
    assert!((adam.lr(0) - 1e-5).abs() < 1e-18, "{}", adam.lr(0));
}
