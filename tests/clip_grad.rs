//! `kiln::nn::utils::clip_grad_norm_` / `clip_grad_value_` against PyTorch, from
//! tests/fixtures/optim.txt (format: the header of scripts/fixtures_optim.py), and their errors.

use kiln::nn::utils::{clip_grad_norm_, clip_grad_value_, get_total_norm, try_clip_grad_norm_, try_clip_grad_value_};
use kiln::{DType, Tensor};
use std::collections::BTreeMap;

#[path = "common/optim_fixture.rs"]
mod optim_fixture;
use optim_fixture::load_cases;

fn key_values(args: &[String]) -> BTreeMap<String, f64> {
    args.iter()
        .map(|a| a.split_once('=').map(|(k, v)| (k.to_string(), v.parse().unwrap())).expect("key=value"))
        .collect()
}

#[test]
fn clipping_matches_pytorch() {
    let mut failures = Vec::new();
    for case in &load_cases("clip") {
        let mut params = Vec::new();
        let mut dtype = DType::F64;
        for l in case.lines.iter().filter(|l| l.tag == "grad") {
            dtype = if l.args[1] == "f32" { DType::F32 } else { DType::F64 };
            let dims: Vec<usize> = l.args[2].split('x').map(|d| d.parse().unwrap()).collect();
            let p = Tensor::zeros(&dims).to_dtype(dtype).requires_grad_(true);
            if l.args.get(3).map(String::as_str) != Some("none") {
                p.set_grad(Some(Tensor::from_vec(l.values.clone(), &dims).to_dtype(dtype)));
            }
            params.push(p);
        }
        let tol = if dtype == DType::F32 { 1e-6 } else { 1e-12 };
        let close = |a: f64, b: f64| (a - b).abs() <= tol * b.abs() + tol * 1e-3;
        let how = case.lines.iter().find(|l| l.tag == "clip").unwrap();
        let kv = key_values(&how.args[1..]);
        if how.args[0] == "norm" {
            let total = clip_grad_norm_(&params, kv["max_norm"], kv["norm_type"]);
            assert_eq!((total.dtype(), total.shape()), (dtype, &[][..]), "{}", case.name);
            let want = case.lines.iter().find(|l| l.tag == "total").unwrap().values[0];
            let got = total.to_dtype(DType::F64).item::<f64>();
            if !close(got, want) {
                failures.push(format!("{}: total norm kiln {got:?}, PyTorch {want:?}", case.name));
            }
        } else {
            clip_grad_value_(&params, kv["clip_value"]);
        }
        for (i, p) in params.iter().enumerate() {
            let want = case.lines.iter().find(|l| l.tag == "clipped" && l.args[0] == i.to_string());
            match (p.grad(), want) {
                (None, None) => {}
                (Some(g), Some(w)) => {
                    let got = g.to_dtype(DType::F64).to_vec::<f64>();
                    if !got.iter().zip(&w.values).all(|(a, b)| close(*a, *b)) {
                        failures.push(format!("{}: grad {i} kiln {got:?}, PyTorch {:?}", case.name, w.values));
                    }
                }
                (g, w) => failures.push(format!(
                    "{}: grad {i} present {} in kiln, {} in PyTorch",
                    case.name,
                    g.is_some(),
                    w.is_some()
                )),
            }
        }
    }
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

fn with_grads(grads: &[&[f64]]) -> Vec<Tensor> {
    grads
        .iter()
        .map(|g| {
            let p = Tensor::zeros_opts([g.len()], DType::F64, kiln::Device::Cpu).requires_grad_(true);
            p.set_grad(Some(Tensor::from_slice(g)));
            p
        })
        .collect()
}

#[test]
fn non_finite_norms() {
    let params = with_grads(&[&[1.0, f64::INFINITY], &[2.0]]);
    let err = try_clip_grad_norm_(&params, 1.0, 2.0).unwrap_err().to_string();
    assert!(err.contains("non-finite"), "{err}");
    assert_eq!(params[1].grad().unwrap().to_vec::<f64>(), vec![2.0], "no clipping after the error");
    // Without the check, PyTorch scales by max_norm / inf = 0 (and inf * 0 = NaN).
    let total = clip_grad_norm_(&params, 1.0, 2.0);
    assert_eq!(total.item::<f64>(), f64::INFINITY);
    assert_eq!(params[1].grad().unwrap().to_vec::<f64>(), vec![0.0]);
    assert!(params[0].grad().unwrap().to_vec::<f64>()[1].is_nan());
}

#[test]
fn clipping_edits_grads_in_place_without_history() {
    let params = with_grads(&[&[3.0, 4.0]]);
    let g = params[0].grad().unwrap();
    let total = clip_grad_norm_(&params, 1.0, 2.0);
    assert_eq!(total.item::<f64>(), 5.0);
    let scaled = g.to_vec::<f64>();
    let coef = 1.0 / (5.0 + 1e-6);
    assert_eq!(scaled, vec![3.0 * coef, 4.0 * coef], "the handle taken before clipping sees the change");
    assert!(g.grad_fn().is_none() && total.grad_fn().is_none());
    assert_eq!(get_total_norm(&[], 2.0).item::<f32>(), 0.0);
    assert!(try_clip_grad_value_(&params, -1.0).is_err());
}
