//! `kiln::amp::GradScaler` against PyTorch: step-by-step replays of tests/fixtures/grad_scaler.txt
//! (written by scripts/fixtures_grad_scaler.py, whose header describes the format) comparing the
//! scale, the growth tracker, which steps ran, the unscaled gradients and the SGD parameters
//! with `torch.amp.GradScaler("cpu")`; then the state dict, the errors, and a disabled scaler.

use kiln::amp::{GradScaler, GradScalerConfig};
use kiln::optim::{Optimizer, SGDConfig, SGD};
use kiln::{DType, Error, StateDict, Tensor};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

#[path = "common/optim_fixture.rs"]
mod optim_fixture;
use optim_fixture::{key_values, load_fixture_cases, Case};

/// The fixture's cases, in replay order (at least the four the script writes).
fn load_cases() -> Vec<Case> {
    let cases = load_fixture_cases("grad_scaler.txt", "scaler");
    assert!(cases.len() >= 4, "the fixture has {} cases", cases.len());
    cases
}

fn dtype(name: &str) -> DType {
    match name {
        "f32" => DType::F32,
        "f64" => DType::F64,
        "bf16" => DType::BF16,
        _ => panic!("unknown dtype {name}"),
    }
}

/// The relative tolerance of a parameter of `dtype` after SGD steps on gradients from
/// backward (which sums in another order than PyTorch's; bf16: one unit in the last place).
fn param_rtol(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 1e-12,
        DType::F32 => 1e-6,
        _ => 2f64.powi(-8),
    }
}

/// Whether `got` matches `want` within `rtol` (NaN matches NaN only, infinities their sign).
fn close(got: f64, want: f64, rtol: f64) -> bool {
    if want.is_nan() || got.is_nan() {
        return want.is_nan() && got.is_nan();
    }
    if want.is_infinite() || got.is_infinite() {
        return got == want;
    }
    (got - want).abs() <= rtol * want.abs().max(1e-6)
}

/// Appends a message for each element of `got` that is not close to `want`.
fn compare(failures: &mut Vec<String>, what: &str, got: &Tensor, want: &[f64], rtol: f64) {
    let got = got.to_dtype(DType::F64).to_vec::<f64>();
    if got.len() != want.len() {
        failures.push(format!("{what}: {} values, PyTorch {}", got.len(), want.len()));
        return;
    }
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        if !close(*g, *w, rtol) {
            failures.push(format!("{what}[{k}]: kiln {g:?}, PyTorch {w:?}"));
        }
    }
}

/// A tensor of `values` with `like`'s shape and dtype (the values are exact in that dtype).
fn tensor_like(values: &[f64], like: &Tensor) -> Tensor {
    Tensor::from_vec(values.to_vec(), like.shape()).to_dtype(like.dtype())
}

/// Replays one case, appending every disagreement with PyTorch to `failures`.
fn replay(case: &Case, failures: &mut Vec<String>) {
    let mut scaler = None::<GradScaler>;
    let (mut params, mut coefs, mut opts) = (Vec::<Tensor>::new(), Vec::<Tensor>::new(), Vec::<SGD>::new());
    // Gradients from backward are compared to rounding; gradients set from the fixture must
    // be unscaled exactly as PyTorch's kernel does.
    let mut grad_rtol = 0.0;
    let mut iteration = 0;
    for l in &case.lines {
        let at = format!("{} iteration {iteration}", case.name);
        let index = || l.args[0].parse::<usize>().unwrap();
        match l.tag.as_str() {
            "scaler" => {
                let kv = key_values(&l.args);
                let num = |k: &str, default: f64| kv.get(k).map_or(default, |v| v.parse().unwrap());
                let defaults = GradScalerConfig::default();
                scaler = Some(GradScaler::with_config(GradScalerConfig {
                    init_scale: num("init_scale", defaults.init_scale),
                    growth_factor: num("growth_factor", defaults.growth_factor),
                    backoff_factor: num("backoff_factor", defaults.backoff_factor),
                    growth_interval: kv.get("growth_interval").map_or(defaults.growth_interval, |v| v.parse().unwrap()),
                    enabled: true,
                }));
            }
            "param" if l.args.len() == 3 => {
                let dims: Vec<usize> = l.args[2].split('x').map(|d| d.parse().unwrap()).collect();
                let p = Tensor::from_vec(l.values.clone(), dims).to_dtype(dtype(&l.args[1]));
                params.push(p.requires_grad_(true));
            }
            "coef" => coefs.push(tensor_like(&l.values, &params[index()])),
            "optim" => {
                assert_eq!(index(), opts.len(), "optimizers in order");
                let kv = key_values(&l.args[1..]);
                let ids = kv["params"].split(',').map(|i| params[i.parse::<usize>().unwrap()].clone());
                let config = SGDConfig {
                    lr: kv["lr"].parse().unwrap(),
                    momentum: kv["momentum"].parse().unwrap(),
                    ..Default::default()
                };
                opts.push(SGD::new(ids, config));
            }
            "zero_grad" => {
                iteration += 1;
                opts.iter_mut().for_each(|o| o.zero_grad());
            }
            "scale_value" => {
                let x: f32 = l.args[0].parse().unwrap();
                let got = scaler.as_mut().unwrap().scale(&Tensor::scalar(x));
                assert_eq!(got.dtype(), DType::F32);
                compare(failures, &format!("{at}: scale({x})"), &got, &l.values, 0.0);
            }
            "backward" => {
                grad_rtol = 1e-6;
                let mut loss = Tensor::scalar(0.0f32);
                for (p, c) in params.iter().zip(&coefs) {
                    loss = loss + (&(c * p) * p).sum() + (&(p * p) * p).sum() * 0.1;
                }
                let scaled = scaler.as_mut().unwrap().scale(&loss);
                compare(failures, &format!("{at}: scaled loss"), &scaled, &l.values, 1e-6);
                scaled.backward();
            }
            "set_grad" => {
                let p = &params[index()];
                p.set_grad(Some(tensor_like(&l.values, p)));
            }
            "inject" => {
                let (p, k) = (&params[index()], l.args[1].parse::<usize>().unwrap());
                let mut g = p.grad().unwrap().to_dtype(DType::F64).to_vec::<f64>();
                g[k] = l.values[0];
                p.set_grad(Some(tensor_like(&g, p)));
            }
            "unscale" => scaler.as_mut().unwrap().unscale_(&mut opts[index()]),
            "step" => {
                let stepped = scaler.as_mut().unwrap().step(&mut opts[index()]);
                if stepped != (l.values[0] == 1.0) {
                    failures.push(format!("{at}: optimizer {} stepped: kiln {stepped}, PyTorch {}", index(), !stepped));
                }
            }
            "update" => scaler.as_mut().unwrap().update(),
            "update_with" => scaler.as_mut().unwrap().update_with(l.values[0]),
            "scale" => {
                let got = scaler.as_ref().unwrap().get_scale();
                if got.to_bits() != l.values[0].to_bits() {
                    failures.push(format!("{at}: scale: kiln {got:?}, PyTorch {:?}", l.values[0]));
                }
            }
            "tracker" => {
                let got = scaler.as_ref().unwrap().get_growth_tracker();
                if got as f64 != l.values[0] {
                    failures.push(format!("{at}: growth tracker: kiln {got}, PyTorch {}", l.values[0]));
                }
            }
            "grad" => {
                let i = index();
                match params[i].grad() {
                    Some(g) => compare(failures, &format!("{at}: grad {i}"), &g, &l.values, grad_rtol),
                    None => failures.push(format!("{at}: grad {i}: kiln has none")),
                }
            }
            "param" => {
                let p = &params[index()];
                // After exactly unscaled gradients, SGD's update rounds as PyTorch's does.
                let rtol = if grad_rtol == 0.0 { 0.0 } else { param_rtol(p.dtype()) };
                compare(failures, &format!("{at}: param {}", index()), p, &l.values, rtol);
            }
            "state" => {
                let sd = scaler.as_ref().unwrap().state_dict();
                let want = key_values(&l.args);
                let got = sd.metadata_entries();
                let keys = |m: &BTreeMap<String, String>| m.keys().cloned().collect::<Vec<_>>();
                if keys(got) != keys(&want) || !sd.is_empty() {
                    failures.push(format!("{at}: state dict keys: kiln {:?}, PyTorch {:?}", keys(got), keys(&want)));
                    continue;
                }
                for (k, w) in &want {
                    let (g, w) = (got[k].parse::<f64>().unwrap(), w.parse::<f64>().unwrap());
                    if g.to_bits() != w.to_bits() {
                        failures.push(format!("{at}: state dict {k}: kiln {g:?}, PyTorch {w:?}"));
                    }
                }
            }
            other => panic!("{}: unknown fixture line {other:?}", case.name),
        }
    }
}

#[test]
fn trajectories_match_pytorch() {
    let cases = load_cases();
    let mut failures = Vec::new();
    for case in &cases {
        replay(case, &mut failures);
    }
    // The fixture exercises what it is meant to: skipped steps, growth and backoff.
    let lines = || cases.iter().flat_map(|c| &c.lines);
    assert!(lines().filter(|l| l.tag == "step" && l.values[0] == 0.0).count() >= 5);
    assert!(lines().filter(|l| l.tag == "inject").count() >= 5);
    eprintln!("{} GradScaler cases replayed", cases.len());
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures[..failures.len().min(30)].join("\n"));
}

/// A scaler with init_scale 4 and growth every 2 steps, and an SGD (lr 0.5) over two f32
/// parameters, after `scale` was called once.
fn setup() -> (GradScaler, SGD, Vec<Tensor>) {
    let params = vec![
        Tensor::from_vec(vec![0.5f32, -1.0, 2.0], [3]).requires_grad_(true),
        Tensor::from_vec(vec![1.5f32, 0.25], [2]).requires_grad_(true),
    ];
    let opt = SGD::new(params.clone(), SGDConfig { lr: 0.5, ..Default::default() });
    let mut scaler =
        GradScaler::with_config(GradScalerConfig { init_scale: 4.0, growth_interval: 2, ..Default::default() });
    scaler.scale(&Tensor::scalar(1.0f32));
    (scaler, opt, params)
}

/// Sets each parameter's gradient to `grads[i]`.
fn set_grads(params: &[Tensor], grads: &[Vec<f32>]) {
    for (p, g) in params.iter().zip(grads) {
        p.set_grad(Some(Tensor::from_vec(g.clone(), p.shape())));
    }
}

fn values(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>()
}

/// Asserts `r` failed with `message` located in this file.
#[track_caller]
fn assert_error<T: std::fmt::Debug>(r: kiln::Result<T>, message: &str) -> Error {
    let e = r.expect_err(message);
    assert_eq!(e.message, message, "{e}");
    assert!(e.location.file().ends_with("grad_scaler.rs"), "error located at {}", e.location);
    assert!(!e.location.file().contains("src/amp"), "error located inside kiln: {}", e.location);
    e
}

#[test]
fn unscale_twice_is_an_error_and_unscales_once() {
    let (mut scaler, mut opt, params) = setup();
    let grads = vec![vec![4.0f32, -8.0, 12.0], vec![2.0, 6.0]];
    set_grads(&params, &grads);
    scaler.try_unscale_(&mut opt).unwrap();
    let once: Vec<Vec<f32>> = params.iter().map(|p| values(&p.grad().unwrap())).collect();
    for (g, o) in grads.iter().zip(&once) {
        assert_eq!(g.iter().map(|v| v / 4.0).collect::<Vec<_>>(), *o);
    }
    let e = assert_error(
        scaler.try_unscale_(&mut opt),
        "unscale_() has already been called on this optimizer since the last update().",
    );
    assert_eq!(e.op, "GradScaler.unscale_");
    // The refused call changed nothing, and step does not unscale again.
    let before: Vec<Vec<f32>> = params.iter().map(|p| values(&p.detach())).collect();
    assert!(scaler.try_step(&mut opt).unwrap());
    for ((p, b), o) in params.iter().zip(&before).zip(&once) {
        assert_eq!(values(&p.grad().unwrap()), *o);
        let want: Vec<f32> = b.iter().zip(o).map(|(b, g)| b - 0.5 * g).collect();
        assert_eq!(values(&p.detach()), want);
    }
    assert_error(scaler.try_unscale_(&mut opt), "unscale_() is being called after step().");
    assert_error(scaler.try_step(&mut opt), "step() has already been called since the last update().");
    let panicked = catch_unwind(AssertUnwindSafe(|| scaler.unscale_(&mut opt))).expect_err("unscale_ panics");
    let text = panicked.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(text.contains("unscale_() is being called after step()."), "{text}");
    // After update the next iteration may unscale again.
    scaler.update();
    set_grads(&params, &grads);
    scaler.try_unscale_(&mut opt).unwrap();
    assert_eq!(values(&params[0].grad().unwrap()), once[0]);
}

#[test]
fn the_optimizer_state_follows_the_optimizer_when_it_moves() {
    let (mut scaler, opt, params) = setup();
    let grads = vec![vec![4.0f32, -8.0, 12.0], vec![2.0, 6.0]];
    set_grads(&params, &grads);
    let mut boxed: Box<dyn Optimizer> = Box::new(opt);
    scaler.unscale_(&mut *boxed);
    let mut moved = [boxed];
    assert!(scaler.step(&mut *moved[0]));
    // Unscaled once only: the update used grad / 4.
    assert_eq!(values(&params[1].detach()), vec![1.5 - 0.5 * 0.5, 0.25 - 0.5 * 1.5]);
    // A second optimizer over other parameters has its own state.
    let other = Tensor::from_vec(vec![1.0f32], [1]).requires_grad_(true);
    let mut opt2 = SGD::new([other.clone()], SGDConfig { lr: 1.0, ..Default::default() });
    other.set_grad(Some(Tensor::from_vec(vec![f32::INFINITY], [1])));
    assert!(!scaler.step(&mut opt2));
    assert_eq!(values(&other.detach()), vec![1.0]);
    scaler.update();
    assert_eq!(scaler.get_scale(), 4.0 * 0.5);
    assert_eq!(scaler.get_growth_tracker(), 0);
}

#[test]
fn using_the_scaler_before_scale_is_an_error() {
    let params = vec![Tensor::from_vec(vec![1.0f32], [1]).requires_grad_(true)];
    let mut opt = SGD::new(params.clone(), SGDConfig::default());
    params[0].set_grad(Some(Tensor::from_vec(vec![2.0f32], [1])));
    let mut scaler = GradScaler::new();
    let hint = "This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration.";
    assert_error(scaler.try_unscale_(&mut opt), &format!("Attempted unscale_ but _scale is None.  {hint}"));
    assert_error(scaler.try_step(&mut opt), &format!("Attempted step but _scale is None.  {hint}"));
    assert_error(scaler.try_update(), &format!("Attempted update but _scale is None.  {hint}"));
    assert_eq!(values(&params[0].grad().unwrap()), vec![2.0]);
    // Until then the scale is init_scale as given (f64), afterwards its f32 value.
    let mut odd = GradScaler::with_config(GradScalerConfig { init_scale: 0.1, ..Default::default() });
    assert_eq!(odd.get_scale(), 0.1);
    odd.scale(&Tensor::scalar(1.0f32));
    assert_eq!(odd.get_scale(), 0.1f32 as f64);
}

#[test]
fn stepping_without_gradients_is_an_error() {
    let (mut scaler, mut opt, _params) = setup();
    assert_error(scaler.try_update(), "No inf checks were recorded prior to update.");
    assert_error(scaler.try_step(&mut opt), "No inf checks were recorded for this optimizer.");
}

#[test]
fn fp16_gradients_are_refused_unchanged() {
    let p = Tensor::from_vec(vec![1.0f32, 2.0], [2]).to_dtype(DType::F16).requires_grad_(true);
    let q = Tensor::from_vec(vec![1.0f32], [1]).requires_grad_(true);
    let mut opt = SGD::new([q.clone(), p.clone()], SGDConfig::default());
    q.set_grad(Some(Tensor::from_vec(vec![8.0f32], [1])));
    p.set_grad(Some(Tensor::from_vec(vec![8.0f32, 16.0], [2]).to_dtype(DType::F16)));
    let mut scaler = GradScaler::with_config(GradScalerConfig { init_scale: 8.0, ..Default::default() });
    scaler.scale(&Tensor::scalar(1.0f32));
    let e = assert_error(scaler.try_unscale_(&mut opt), "Attempting to unscale FP16 gradients.");
    assert_eq!(e.kind, kiln::ErrorKind::DType);
    assert_eq!(values(&q.grad().unwrap()), vec![8.0]);
    assert_eq!(p.grad().unwrap().to_dtype(DType::F32).to_vec::<f32>(), vec![8.0, 16.0]);
}

#[test]
fn scale_multiplies_through_autograd() {
    let x = Tensor::from_vec(vec![0.5f32, -1.25, 3.0], [3]).requires_grad_(true);
    let mut scaler = GradScaler::with_config(GradScalerConfig { init_scale: 8.0, ..Default::default() });
    let loss = (&x * &x).sum();
    let scaled = scaler.scale(&loss);
    assert_eq!(scaled.item::<f32>(), loss.item::<f32>() * 8.0);
    assert!(scaled.grad_fn().is_some());
    scaled.backward();
    let scaled_grad = values(&x.grad().unwrap());
    x.set_grad(None);
    (&x * &x).sum().backward();
    let plain: Vec<f32> = values(&x.grad().unwrap()).iter().map(|g| g * 8.0).collect();
    assert_eq!(scaled_grad, plain);
    // The result keeps the input's dtype; bf16 is multiplied in f32 and rounded once.
    let wide = Tensor::from_vec(vec![0.1f64, 3.0], [2]);
    assert_eq!(scaler.scale(&wide).dtype(), DType::F64);
    assert_eq!(scaler.scale(&wide).to_vec::<f64>(), vec![0.1 * 8.0, 24.0]);
    let mut three = GradScaler::with_config(GradScalerConfig { init_scale: 3.0, ..Default::default() });
    let b = Tensor::from_vec(vec![1.0f32, 1.5, 1.0078125, -2.3], [4]).to_dtype(DType::BF16);
    let got = three.scale(&b);
    assert_eq!(got.dtype(), DType::BF16);
    let want = b.to_dtype(DType::F32).mul(3.0f32).to_dtype(DType::BF16);
    assert_eq!(got.to_dtype(DType::F32).to_vec::<f32>(), want.to_dtype(DType::F32).to_vec::<f32>());
}

#[test]
fn state_dict_has_pytorchs_keys_and_round_trips() {
    let (mut scaler, mut opt, params) = setup();
    let grads = [vec![vec![4.0f32, 1.0, 2.0], vec![2.0, 6.0]], vec![vec![f32::NAN, 1.0, 2.0], vec![2.0, 6.0]]];
    for g in [&grads[0], &grads[0], &grads[1], &grads[0]] {
        set_grads(&params, g);
        scaler.step(&mut opt);
        scaler.update();
    }
    let sd = scaler.state_dict();
    let keys: Vec<&str> = sd.metadata_entries().keys().map(String::as_str).collect();
    assert_eq!(keys, ["_growth_tracker", "backoff_factor", "growth_factor", "growth_interval", "scale"]);
    assert!(sd.is_empty(), "no tensors");
    assert_eq!(sd.metadata("scale"), Some("4.0"));
    assert_eq!(sd.metadata("_growth_tracker"), Some("1"));
    // Through a file, into a scaler with other settings that has not started yet.
    let path = std::env::temp_dir().join(format!("kiln_grad_scaler_{}.safetensors", std::process::id()));
    kiln::save(&sd, &path).unwrap();
    let loaded = kiln::load(&path).unwrap();
    std::fs::remove_file(&path).ok();
    let mut resumed = GradScaler::new();
    resumed.load_state_dict(&loaded).unwrap();
    for s in [&scaler, &resumed] {
        assert_eq!(s.get_scale(), 4.0);
        assert_eq!(s.get_growth_tracker(), 1);
        assert_eq!(s.get_growth_interval(), 2);
        assert_eq!(s.get_growth_factor(), 2.0);
        assert_eq!(s.get_backoff_factor(), 0.5);
    }
    // Both continue alike: the loaded tracker makes the next clean step grow the scale.
    let p2: Vec<Tensor> = params.iter().map(|p| p.detach().deep_clone().requires_grad_(true)).collect();
    let mut opt2 = SGD::new(p2.clone(), SGDConfig { lr: 0.5, ..Default::default() });
    assert_eq!(resumed.scale(&Tensor::scalar(1.0f32)).item::<f32>(), 4.0);
    for (s, o, p) in [(&mut scaler, &mut opt, &params), (&mut resumed, &mut opt2, &p2)] {
        set_grads(p, &grads[0]);
        s.step(o);
        s.update();
    }
    assert_eq!(scaler.get_scale(), 8.0);
    assert_eq!(scaler.state_dict().metadata_entries(), resumed.state_dict().metadata_entries());
    // Loading into a running scaler replaces its scale and tracker too.
    scaler.load_state_dict(&sd).unwrap();
    assert_eq!((scaler.get_scale(), scaler.get_growth_tracker()), (4.0, 1));
}

#[test]
fn pytorchs_state_dict_loads() {
    // The last case's final state, as PyTorch's scaler.state_dict() wrote it.
    let cases = load_cases();
    for case in &cases {
        let line = case.lines.iter().rfind(|l| l.tag == "state").expect("a state line");
        let mut sd = StateDict::new();
        for (k, v) in key_values(&line.args) {
            sd.set_metadata(k, v);
        }
        let mut scaler = GradScaler::new();
        scaler.load_state_dict(&sd).unwrap();
        let back = scaler.state_dict();
        for (k, v) in sd.metadata_entries() {
            let (got, want) = (back.metadata(k).unwrap().parse::<f64>().unwrap(), v.parse::<f64>().unwrap());
            assert_eq!(got.to_bits(), want.to_bits(), "{}: {k}", case.name);
        }
    }
}

#[test]
fn bad_state_dicts_are_errors_that_change_nothing() {
    let (mut scaler, _opt, _params) = setup();
    let good = scaler.state_dict();
    assert_error(
        scaler.load_state_dict(&StateDict::new()),
        "The source state dict is empty, possibly because it was saved from a disabled instance of GradScaler.",
    );
    let mut partial = StateDict::new();
    for (k, v) in good.metadata_entries().iter().filter(|(k, _)| *k != "_growth_tracker") {
        partial.set_metadata(k.clone(), if k == "scale" { "1024.0" } else { v.as_str() });
    }
    assert_error(scaler.load_state_dict(&partial), "GradScaler state dict has no entry \"_growth_tracker\"");
    let mut unreadable = good.clone();
    unreadable.set_metadata("scale", "2048.0");
    unreadable.set_metadata("growth_interval", "-3");
    assert_error(
        scaler.load_state_dict(&unreadable),
        "GradScaler state dict entry \"growth_interval\" has the unreadable value \"-3\"",
    );
    let mut huge = good.clone();
    huge.set_metadata("scale", "1e39");
    assert_error(scaler.load_state_dict(&huge), "scale 1e39: value cannot be converted to type float without overflow");
    assert_eq!(scaler.state_dict().metadata_entries(), good.metadata_entries());
    assert_eq!(scaler.get_scale(), 4.0);
}

#[test]
fn a_disabled_scaler_does_nothing() {
    // Options a disabled scaler would refuse when enabled are accepted, as in PyTorch.
    let config = GradScalerConfig { enabled: false, growth_factor: 0.5, backoff_factor: 2.0, ..Default::default() };
    let mut scaler = GradScaler::with_config(config);
    assert!(!scaler.is_enabled());
    let x = Tensor::from_vec(vec![1.5f32, -2.0], [2]).requires_grad_(true);
    let out = scaler.scale(&x);
    assert_eq!(values(&out), values(&x));
    assert!(out.grad_fn().is_none(), "scale returns its input, not a product");
    let p = Tensor::from_vec(vec![1.0f32, 2.0], [2]).requires_grad_(true);
    let mut opt = SGD::new([p.clone()], SGDConfig { lr: 0.5, ..Default::default() });
    p.set_grad(Some(Tensor::from_vec(vec![4.0f32, f32::INFINITY], [2])));
    scaler.try_unscale_(&mut opt).unwrap();
    assert_eq!(values(&p.grad().unwrap()), vec![4.0, f32::INFINITY], "unscale_ changes nothing");
    // step steps, inf or not, and may be called again; update does nothing.
    assert!(scaler.step(&mut opt));
    assert_eq!(values(&p.detach()), vec![1.0 - 0.5 * 4.0, f32::NEG_INFINITY]);
    assert!(scaler.try_step(&mut opt).unwrap());
    scaler.update();
    scaler.update_with(1e39);
    assert_eq!(scaler.get_scale(), 1.0);
    assert_eq!(scaler.get_growth_tracker(), 0);
    assert!(scaler.state_dict().metadata_entries().is_empty() && scaler.state_dict().is_empty());
    let mut sd = StateDict::new();
    sd.set_metadata("scale", "not a number");
    scaler.load_state_dict(&sd).unwrap();
    scaler.load_state_dict(&StateDict::new()).unwrap();
    assert_eq!(scaler.get_scale(), 1.0);
}

#[test]
fn bad_options_are_errors() {
    let with = |growth_factor: f64, backoff_factor: f64, init_scale: f64| {
        GradScaler::try_with_config(GradScalerConfig {
            growth_factor,
            backoff_factor,
            init_scale,
            ..Default::default()
        })
    };
    assert_error(with(1.0, 0.5, 1.0), "The growth factor must be > 1.0 (got 1.0).");
    assert_error(with(0.5, 0.5, 1.0), "The growth factor must be > 1.0 (got 0.5).");
    assert_error(with(f64::NAN, 0.5, 1.0), "The growth factor must be > 1.0 (got NaN).");
    assert_error(with(2.0, 1.0, 1.0), "The backoff factor must be < 1.0 (got 1.0).");
    assert_error(with(2.0, f64::NAN, 1.0), "The backoff factor must be < 1.0 (got NaN).");
    let e =
        assert_error(with(2.0, 0.5, 1e39), "init_scale 1e39: value cannot be converted to type float without overflow");
    assert_eq!((e.op, e.kind), ("GradScaler", kiln::ErrorKind::Value));
    assert!(with(1.0 + f64::EPSILON, 0.999, 1.0).is_ok());
    let defaults = GradScaler::new();
    assert_eq!(
        (
            defaults.get_scale(),
            defaults.get_growth_factor(),
            defaults.get_backoff_factor(),
            defaults.get_growth_interval()
        ),
        (65536.0, 2.0, 0.5, 2000)
    );
    let panicked = catch_unwind(|| {
        GradScaler::with_config(GradScalerConfig { growth_factor: 1.0, ..Default::default() });
    })
    .expect_err("with_config panics");
    let text = panicked.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        text.starts_with("GradScaler: The growth factor must be > 1.0") && text.contains("grad_scaler.rs"),
        "{text}"
    );
    // update_with checks the new scale the same way.
    let (mut scaler, _opt, _params) = setup();
    assert_error(
        scaler.try_update_with(1e39),
        "new_scale 1e39: value cannot be converted to type float without overflow",
    );
    scaler.update_with(f64::INFINITY);
    assert_eq!(scaler.get_scale(), f64::INFINITY);
}
