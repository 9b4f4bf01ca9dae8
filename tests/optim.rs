//! Optimizers against PyTorch: f64 trajectories from tests/fixtures/optim.txt (written by
//! scripts/fixtures_optim.py, whose header describes the format), then state-dict round trips,
//! resume-equals-continuous, and the constructors' and loaders' errors.

use kiln::optim::{
    Adadelta, AdadeltaConfig, Adagrad, AdagradConfig, Adam, AdamConfig, AdamW, AdamWConfig, Optimizer, ParamGroup,
    RMSprop, RMSpropConfig, SGDConfig, SGD,
};
use kiln::{DType, StateDict, Tensor};

#[path = "common/optim_fixture.rs"]
mod optim_fixture;
use optim_fixture::{build_optimizer, key_values, load_cases};

/// `sum(c * p * p) + 0.1 * sum(p * p * p)` over the parameters, backpropagated.
fn backward(params: &[Tensor], coefs: &[Tensor]) {
    let mut loss = Tensor::scalar(0.0f64);
    for (p, c) in params.iter().zip(coefs) {
        loss = loss + (&(c * p) * p).sum() + (&(p * p) * p).sum() * 0.1;
    }
    loss.backward();
}

fn tensor(values: &[f64], shape: &str) -> Tensor {
    let dims: Vec<usize> = shape.split('x').map(|d| d.parse().unwrap()).collect();
    Tensor::from_vec(values.to_vec(), &dims)
}

#[test]
fn trajectories_match_pytorch() {
    let (rtol, atol) = (1e-12, 1e-14);
    let mut failures = Vec::new();
    let mut worst: f64 = 0.0;
    let cases = load_cases("opt");
    for case in &cases {
        let line = |tag: &'static str| case.lines.iter().filter(move |l| l.tag == tag);
        let kind = &line("opt").next().unwrap().args[0];
        let groups: Vec<_> = line("group").map(|l| key_values(&l.args)).collect();
        let params: Vec<Tensor> = line("param").map(|l| tensor(&l.values, &l.args[1]).requires_grad_(true)).collect();
        let coefs: Vec<Tensor> = line("coef")
            .map(|l| Tensor::from_vec(l.values.clone(), params[l.args[0].parse::<usize>().unwrap()].shape()))
            .collect();
        let skips: Vec<(usize, usize)> =
            line("skip").map(|l| (l.args[0].parse().unwrap(), l.args[1].parse().unwrap())).collect();
        let mut opt = build_optimizer(kind, &groups, &params, None);
        for k in 1..=5 {
            opt.zero_grad();
            backward(&params, &coefs);
            for &(_, i) in skips.iter().filter(|s| s.0 == k) {
                params[i].set_grad(None);
            }
            opt.step();
            for l in line("after").filter(|l| l.args[0] == k.to_string()) {
                let i: usize = l.args[1].parse().unwrap();
                let got = params[i].to_vec::<f64>();
                for (j, (g, e)) in got.iter().zip(&l.values).enumerate() {
                    worst = worst.max((g - e).abs() / e.abs().max(1e-3));
                    let close = (g - e).abs() <= atol + rtol * e.abs(); // false for NaN
                    if !close {
                        failures.push(format!("{}: step {k} param {i}[{j}]: kiln {g:?}, PyTorch {e:?}", case.name));
                    }
                }
            }
        }
    }
    eprintln!("{} optimizer cases; worst relative difference from PyTorch {worst:e}", cases.len());
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures[..failures.len().min(20)].join("\n"));
}

/// Deterministic f64 parameters and loss coefficients for the round-trip tests.
fn problem() -> (Vec<Tensor>, Vec<Tensor>) {
    let p = vec![
        Tensor::from_vec(vec![0.3, -0.7, 0.9, -0.2, 0.5, 0.1], [2, 3]),
        Tensor::from_vec(vec![-0.4, 0.8, 0.6, -0.9], [4]),
    ];
    let c = vec![
        Tensor::from_vec(vec![1.0, 0.6, 1.3, 0.9, 0.7, 1.1], [2, 3]),
        Tensor::from_vec(vec![0.8, 1.2, 0.5, 1.4], [4]),
    ];
    (p, c)
}

fn fresh(values: &[Tensor]) -> Vec<Tensor> {
    values.iter().map(|t| t.deep_clone().requires_grad_(true)).collect()
}

fn run(opt: &mut dyn Optimizer, params: &[Tensor], coefs: &[Tensor], steps: usize) {
    for _ in 0..steps {
        opt.zero_grad();
        backward(params, coefs);
        opt.step();
    }
}

/// Every optimizer with the options that add state, built fresh over `params`.
fn stateful(params: &[Tensor]) -> Vec<(&'static str, Box<dyn Optimizer>)> {
    let p = || params.to_vec();
    vec![
        (
            "sgd",
            Box::new(SGD::new(p(), SGDConfig { lr: 0.1, momentum: 0.9, nesterov: true, ..Default::default() }))
                as Box<dyn Optimizer>,
        ),
        (
            "adam",
            Box::new(Adam::new(p(), AdamConfig { lr: 0.1, amsgrad: true, weight_decay: 0.1, ..Default::default() })),
        ),
        ("adamw", Box::new(AdamW::new(p(), AdamWConfig { lr: 0.1, ..Default::default() }))),
        ("adadelta", Box::new(Adadelta::new(p(), AdadeltaConfig::default()))),
        ("adagrad", Box::new(Adagrad::new(p(), AdagradConfig { lr: 0.1, lr_decay: 0.05, ..Default::default() }))),
        ("rmsprop", Box::new(RMSprop::new(p(), RMSpropConfig { momentum: 0.5, centered: true, ..Default::default() }))),
    ]
}

#[test]
fn resume_from_state_dict_equals_never_stopping() {
    let (init, coefs) = problem();
    let n = stateful(&init).len();
    for which in 0..n {
        let cp = fresh(&init);
        let (name, mut continuous) = stateful(&cp).swap_remove(which);
        run(continuous.as_mut(), &cp, &coefs, 7);

        let rp = fresh(&init);
        let (_, mut first) = stateful(&rp).swap_remove(which);
        run(first.as_mut(), &rp, &coefs, 3);
        let sd = first.state_dict();
        drop(first);
        // A new optimizer with other hyperparameters: loading restores them too.
        let (_, mut second) = stateful(&rp).swap_remove(which);
        second.set_lr(0, 123.0);
        second.load_state_dict(&sd).unwrap();
        run(second.as_mut(), &rp, &coefs, 4);
        for (a, b) in cp.iter().zip(&rp) {
            assert_eq!(a.to_vec::<f64>(), b.to_vec::<f64>(), "{name}: resumed run differs from the continuous one");
        }
    }
}

#[test]
fn state_dict_uses_pytorch_names() {
    let (init, coefs) = problem();
    let params = fresh(&init);
    let mut opt = Adam::new(params.clone(), AdamConfig { lr: 0.01, amsgrad: true, ..Default::default() });
    run(&mut opt, &params, &coefs, 3);
    let sd = opt.state_dict();
    let keys: Vec<&str> = sd.keys().collect();
    assert_eq!(
        keys,
        [
            "state.0.step",
            "state.0.exp_avg",
            "state.0.exp_avg_sq",
            "state.0.max_exp_avg_sq",
            "state.1.step",
            "state.1.exp_avg",
            "state.1.exp_avg_sq",
            "state.1.max_exp_avg_sq"
        ]
    );
    let step = sd.get("state.1.step").unwrap();
    assert_eq!((step.dtype(), step.shape()), (DType::F32, &[][..]));
    assert_eq!(step.item::<f32>(), 3.0);
    assert_eq!(sd.get("state.0.exp_avg").unwrap().shape(), &[2, 3]);
    assert_eq!(sd.metadata("param_groups.0.lr"), Some("0.01"));
    assert_eq!(sd.metadata("param_groups.0.betas"), Some("0.9,0.999"));
    assert_eq!(sd.metadata("param_groups.0.amsgrad"), Some("true"));
    assert_eq!(sd.metadata("param_groups.0.params"), Some("0,1"));

    // The saved state is a snapshot: later steps don't change it.
    let before = sd.get("state.0.exp_avg").unwrap().to_vec::<f64>();
    run(&mut opt, &params, &coefs, 1);
    assert_eq!(sd.get("state.0.exp_avg").unwrap().to_vec::<f64>(), before);

    // Indices count across groups; a group's own parameters are listed in it.
    let p = fresh(&init);
    let mut sgd = SGD::with_groups(vec![
        ParamGroup::new([p[1].clone()], SGDConfig { lr: 0.1, momentum: 0.9, ..Default::default() }),
        ParamGroup::new([p[0].clone()], SGDConfig { lr: 0.2, ..Default::default() }),
    ]);
    run(&mut sgd, &p, &coefs, 1);
    let sd = sgd.state_dict();
    assert_eq!(sd.keys().collect::<Vec<_>>(), ["state.0.momentum_buffer"]);
    assert_eq!(sd.get("state.0.momentum_buffer").unwrap().shape(), &[4]);
    assert_eq!(sd.metadata("param_groups.1.params"), Some("1"));
    assert_eq!(sd.metadata("param_groups.1.lr"), Some("0.2"));
}

#[test]
fn adagrad_creates_state_at_construction() {
    let (init, _) = problem();
    let opt = Adagrad::new(fresh(&init), AdagradConfig { initial_accumulator_value: 0.25, ..Default::default() });
    let sd = opt.state_dict();
    assert_eq!(sd.get("state.1.sum").unwrap().to_vec::<f64>(), vec![0.25; 4]);
    assert_eq!(sd.get("state.0.step").unwrap().item::<f32>(), 0.0);
}

#[test]
fn load_state_dict_errors_name_the_difference_and_change_nothing() {
    let (init, coefs) = problem();
    let params = fresh(&init);
    let mut opt = Adam::new(params.clone(), AdamConfig { lr: 0.01, ..Default::default() });
    run(&mut opt, &params, &coefs, 2);
    let good = opt.state_dict();

    let mut other = Adam::new(fresh(&init), AdamConfig { lr: 0.5, ..Default::default() });
    let check = |other: &mut Adam, sd: &StateDict, needle: &str| {
        let err = other.load_state_dict(sd).expect_err("must fail").to_string();
        assert!(err.contains(needle), "{err:?} should mention {needle:?}");
        assert_eq!(other.lr(0), 0.5, "a failed load must change nothing");
        assert!(other.state_dict().is_empty());
    };

    let mut sd = good.clone();
    sd.set_metadata("param_groups.1.params", "2");
    check(&mut other, &sd, "2 parameter groups");

    let mut sd = good.clone();
    sd.set_metadata("param_groups.0.params", "0");
    check(&mut other, &sd, "parameter group 0 has 1 parameters");

    let mut sd = good.clone();
    sd.insert("state.1.exp_avg", Tensor::zeros_opts([5], DType::F64, kiln::Device::Cpu));
    check(&mut other, &sd, "state.1.exp_avg has shape [5]");

    let mut sd = good.clone();
    sd.remove("state.0.exp_avg_sq");
    check(&mut other, &sd, "state.0.exp_avg_sq is missing");

    let mut sd = good.clone();
    sd.insert("state.0.momentum_buffer", Tensor::zeros_opts([2, 3], DType::F64, kiln::Device::Cpu));
    check(&mut other, &sd, "unexpected state tensor state.0.momentum_buffer");

    let mut sd = good.clone();
    sd.set_metadata("param_groups.0.momentum", "0.9");
    check(&mut other, &sd, "unknown hyperparameter \"momentum\"");

    let mut sd = good.clone();
    sd.set_metadata("param_groups.0.betas", "0.9");
    check(&mut other, &sd, "betas");

    let mut sd = good.clone();
    sd.insert("state.7.step", Tensor::scalar(1.0f32));
    check(&mut other, &sd, "parameter index 7");

    other.load_state_dict(&good).unwrap();
    assert_eq!(other.lr(0), 0.01);
}

#[test]
fn constructors_validate_like_pytorch() {
    let (init, _) = problem();
    let p = fresh(&init);
    let err =
        SGD::try_new(p.clone(), SGDConfig { lr: 0.1, nesterov: true, ..Default::default() }).err().unwrap().to_string();
    assert!(err.contains("Nesterov momentum requires a momentum and zero dampening"), "{err}");
    let err = SGD::try_new(
        p.clone(),
        SGDConfig { lr: 0.1, momentum: 0.9, dampening: 0.1, nesterov: true, ..Default::default() },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("Nesterov"), "{err}");
    assert!(Adam::try_new(p.clone(), AdamConfig { betas: (1.0, 0.999), ..Default::default() })
        .err()
        .unwrap()
        .to_string()
        .contains("Invalid beta parameter at index 0"));
    assert!(Adam::try_new(p.clone(), AdamConfig { lr: -1.0, ..Default::default() })
        .err()
        .unwrap()
        .to_string()
        .contains("Invalid learning rate"));
    assert!(Adadelta::try_new(p.clone(), AdadeltaConfig { rho: 1.5, ..Default::default() }).is_err());
    assert!(Adagrad::try_new(p.clone(), AdagradConfig { lr_decay: -0.1, ..Default::default() }).is_err());
    assert!(RMSprop::try_new(p.clone(), RMSpropConfig { alpha: -0.1, ..Default::default() }).is_err());
    let both = AdamConfig { fused: Some(true), foreach: Some(true), ..Default::default() };
    let err = Adam::try_new(p.clone(), both).err().unwrap().to_string();
    assert!(err.starts_with("Adam: `fused` and `foreach` cannot be `True` together."), "{err}");
    assert!(SGD::try_new(Vec::new(), SGDConfig::default()).err().unwrap().to_string().contains("empty parameter list"));
    let dup = SGD::try_with_groups(vec![
        ParamGroup::new([p[0].clone()], SGDConfig::default()),
        ParamGroup::new([p[0].clone()], SGDConfig::default()),
    ]);
    assert!(dup.err().unwrap().to_string().contains("more than one parameter group"));
    let non_leaf = &p[0] * 2.0;
    assert!(SGD::try_new([non_leaf], SGDConfig::default()).err().unwrap().to_string().contains("non-leaf"));
    let mut opt = SGD::new([p[0].clone()], SGDConfig::default());
    assert!(opt.try_add_param_group(ParamGroup::new([p[0].clone()], SGDConfig::default())).is_err());
    opt.add_param_group(ParamGroup::new([p[1].clone()], SGDConfig { lr: 0.5, ..Default::default() }));
    assert_eq!((opt.num_param_groups(), opt.lr(1)), (2, 0.5));
}

#[test]
fn step_updates_shared_parameters_in_place_without_history() {
    let (init, coefs) = problem();
    let params = fresh(&init);
    let model_view = params[0].clone();
    let version = model_view.version();
    let mut opt = SGD::new(params.clone(), SGDConfig { lr: 0.1, ..Default::default() });
    backward(&params, &coefs);
    let g = params[0].grad().unwrap().to_vec::<f64>();
    opt.step();
    let expected: Vec<f64> = init[0].to_vec::<f64>().iter().zip(&g).map(|(p, g)| p - 0.1 * g).collect();
    assert_eq!(model_view.to_vec::<f64>(), expected, "the module's handle sees the update");
    assert!(model_view.version() > version);
    assert!(model_view.is_leaf() && model_view.grad_fn().is_none() && model_view.requires_grad());
    opt.zero_grad();
    assert!(params.iter().all(|p| p.grad().is_none()));
    // Nothing has a gradient: step changes nothing.
    let before = params[1].to_vec::<f64>();
    opt.step();
    assert_eq!(params[1].to_vec::<f64>(), before);
}

#[test]
fn hyperparameters_are_reachable_for_schedulers() {
    let (init, _) = problem();
    let mut adam = Adam::new(fresh(&init), AdamConfig::default());
    assert_eq!(adam.momentum(0), Some(0.9));
    adam.set_momentum(0, 0.8);
    assert_eq!(adam.param_groups()[0].config.betas, (0.8, 0.999));
    adam.param_groups_mut()[0].config.lr = 0.25;
    assert_eq!(Optimizer::lr(&adam, 0), 0.25);
    let mut ada = Adadelta::new(fresh(&init), AdadeltaConfig::default());
    assert_eq!(ada.momentum(0), None);
    ada.set_lr(0, 0.5);
    assert_eq!(ada.param_groups()[0].config.lr, 0.5);
    assert_eq!(ada.parameters().len(), 2);
}
