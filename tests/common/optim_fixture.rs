//! The reader of tests/fixtures/optim.txt (written by scripts/fixtures_optim.py, whose header
//! describes the format), shared by the optimizer, scheduler, gradient-clipping and grad-scaler
//! tests (tests/fixtures/grad_scaler.txt has the same format):
//! `#[path = "common/optim_fixture.rs"] mod optim_fixture;`.
#![allow(dead_code)]

use kiln::optim::{
    AdadeltaConfig, AdagradConfig, AdamConfig, AdamWConfig, Optim, Optimizer, OptimizerConfig, ParamGroup,
    RMSpropConfig, SGDConfig,
};
use kiln::Tensor;
use std::collections::BTreeMap;

/// One line of a fixture case: a tag, its words, and the values after ` = `.
pub struct Line {
    pub tag: String,
    pub args: Vec<String>,
    pub values: Vec<f64>,
}

/// A fixture case: kind (`opt`, `sched`, `clip`), name and lines.
pub struct Case {
    pub kind: String,
    pub name: String,
    pub lines: Vec<Line>,
}

/// The fixture's cases of kind `kind` (panics when there are none).
pub fn load_cases(kind: &str) -> Vec<Case> {
    load_fixture_cases("optim.txt", kind)
}

/// The cases of kind `kind` in `tests/fixtures/<file>`, a fixture in this format (panics when
/// there are none).
pub fn load_fixture_cases(file: &str, kind: &str) -> Vec<Case> {
    let path = format!("{}/tests/fixtures/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut cases: Vec<Case> = Vec::new();
    for raw in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (head, values) = match raw.split_once(" = ") {
            Some((h, v)) => (
                h,
                v.split_whitespace().map(|x| x.parse::<f64>().unwrap_or_else(|_| panic!("bad number {x:?}"))).collect(),
            ),
            None => (raw, Vec::new()),
        };
        let mut words = head.split_whitespace().map(String::from);
        let tag = words.next().unwrap();
        let args: Vec<String> = words.collect();
        match tag.as_str() {
            "case" => cases.push(Case { kind: args[0].clone(), name: args[1].clone(), lines: Vec::new() }),
            "end" => {}
            _ => cases.last_mut().expect("a line outside a case").lines.push(Line { tag, args, values }),
        }
    }
    cases.retain(|c| c.kind == kind);
    assert!(!cases.is_empty(), "no {kind} cases in the fixture");
    cases
}

/// `key=value` words as a map (quotes around values removed).
pub fn key_values(args: &[String]) -> BTreeMap<String, String> {
    args.iter()
        .map(|a| a.split_once('=').map(|(k, v)| (k.to_string(), v.trim_matches('\'').to_string())).expect("key=value"))
        .collect()
}

/// An optimizer of kind `C` with the fixture's groups over `params`, `fused` set unless `None`.
fn make<C: OptimizerConfig + Default + 'static>(
    groups: &[BTreeMap<String, String>],
    params: &[Tensor],
    fused: Option<&str>,
) -> Box<dyn Optimizer> {
    let groups = groups
        .iter()
        .map(|kv| {
            let mut config = C::default();
            for (k, v) in kv.iter().filter(|(k, _)| *k != "params") {
                config.set_hyperparameter(k, v).unwrap();
            }
            if let Some(fused) = fused {
                config.set_hyperparameter("fused", fused).unwrap();
            }
            let ids = kv["params"].split(',').map(|i| params[i.parse::<usize>().unwrap()].clone());
            ParamGroup::new(ids, config)
        })
        .collect();
    Box::new(Optim::<C>::with_groups(groups))
}

/// The fixture's optimizer `kind` (PyTorch's class name) with its groups over `params`, and
/// the hyperparameter `fused` set to the value given, if any.
pub fn build_optimizer(
    kind: &str,
    groups: &[BTreeMap<String, String>],
    params: &[Tensor],
    fused: Option<&str>,
) -> Box<dyn Optimizer> {
    match kind {
        "SGD" => make::<SGDConfig>(groups, params, fused),
        "Adam" => make::<AdamConfig>(groups, params, fused),
        "AdamW" => make::<AdamWConfig>(groups, params, fused),
        "Adadelta" => make::<AdadeltaConfig>(groups, params, fused),
        "Adagrad" => make::<AdagradConfig>(groups, params, fused),
        "RMSprop" => make::<RMSpropConfig>(groups, params, fused),
        _ => panic!("unknown optimizer {kind}"),
    }
}

/// Bytes a step of `opt` allocates beyond what was live before it.
pub fn step_allocates(opt: &mut dyn Optimizer) -> usize {
    let before = kiln::memory::memory_allocated();
    kiln::memory::reset_peak_memory_stats();
    opt.step();
    kiln::memory::max_memory_allocated() - before
}
