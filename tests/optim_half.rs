//! Optimizers on f16 and bf16 parameters give PyTorch's numbers bit for bit: the single-tensor
//! trajectories of tests/fixtures/optim_half.txt (written by scripts/fixtures_optim_half.py,
//! whose header describes the format) replayed through kiln's one-pass kernel (the eager
//! default), its op-by-op path (`fused: Some(false)`) and `kiln::compile` (a closure that sets
//! the gradients and calls `opt.step()`). Then a one-pass half step allocates nothing (so the
//! kernel, not the op-by-op fallback, ran it; tests/optim_fused.rs holds the kernel equal to
//! the op-by-op path in every dtype). One test, so that the memory statistics it reads see no
//! other test's tensors.

use kiln::optim::{AdamConfig, Optim, Optimizer};
use kiln::{DType, Tensor};

#[path = "common/optim_fixture.rs"]
mod optim_fixture;
use optim_fixture::{build_optimizer, key_values, load_fixture_cases, step_allocates, Case};

/// How a replay runs each step.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Path {
    /// Eager, default options: the one-pass kernel.
    OnePass,
    /// Eager with `fused: Some(false)`: the rule op by op.
    OpByOp,
    /// Inside `kiln::compile`.
    Compiled,
}

/// Each fixture parameter is repeated this many times (32 elements become 96), so that the
/// one-pass kernel runs both its blocks of 64 elements and its element-by-element tail; every
/// copy must end equal to PyTorch's (whose results the script checked do not depend on an
/// element's position).
const COPIES: usize = 3;

/// Steps in every fixture case.
const STEPS: usize = 5;

/// The bits of a half tensor's elements.
fn bits(t: &Tensor) -> Vec<u16> {
    match t.dtype() {
        DType::BF16 => t.to_vec::<half::bf16>().iter().map(|x| x.to_bits()).collect(),
        DType::F16 => t.to_vec::<half::f16>().iter().map(|x| x.to_bits()).collect(),
        d => panic!("bits of {d}"),
    }
}

/// Fixture values (exact half values) repeated [`COPIES`] times, as a flat tensor of `dtype`.
fn repeated(values: &[f64], dtype: DType) -> Tensor {
    let all: Vec<f64> = (0..COPIES).flat_map(|_| values.iter().copied()).collect();
    let t = Tensor::from_vec(all, [values.len() * COPIES]).to_dtype(dtype);
    assert_eq!(t.to_dtype(DType::F64).to_vec::<f64>()[..values.len()], *values, "not half values");
    t
}

/// Replays `case` along `path`; one message per parameter and step that differs from PyTorch.
fn replay(case: &Case, path: Path) -> Vec<String> {
    let line = |tag: &'static str| case.lines.iter().filter(move |l| l.tag == tag);
    let kind = &line("opt").next().unwrap().args[0];
    let dtype = match line("dtype").next().unwrap().args[0].as_str() {
        "bf16" => DType::BF16,
        "f16" => DType::F16,
        d => panic!("dtype {d}"),
    };
    let groups: Vec<_> = line("group").map(|l| key_values(&l.args)).collect();
    let params: Vec<Tensor> = line("param").map(|l| repeated(&l.values, dtype).requires_grad_(true)).collect();
    let grad = |k: usize, i: usize| {
        line("grad").find(|l| l.args == [k.to_string(), i.to_string()]).map(|l| repeated(&l.values, dtype))
    };
    let mut opt = build_optimizer(kind, &groups, &params, (path == Path::OpByOp).then_some("false"));
    let mut body = |grads: &[Option<Tensor>]| {
        for (p, g) in params.iter().zip(grads) {
            p.set_grad(g.clone());
        }
        opt.step();
    };
    let grads: Vec<Vec<Option<Tensor>>> =
        (1..=STEPS).map(|k| (0..params.len()).map(|i| grad(k, i)).collect()).collect();
    // The parameters' bits after each step.
    let mut after: Vec<Vec<Vec<u16>>> = Vec::new();
    let mut failures = Vec::new();
    if path == Path::Compiled {
        let mut step = kiln::compile(&mut body);
        for (k, g) in grads.iter().enumerate() {
            step.call(&g[..]);
            if step.stats().kernels_launched == 0 {
                failures.push(format!("{} {path:?} step {}: no generated kernel ran", case.name, k + 1));
            }
            after.push(params.iter().map(|p| bits(&p.detach())).collect());
        }
    } else {
        for g in &grads {
            body(&g[..]);
            after.push(params.iter().map(|p| bits(&p.detach())).collect());
        }
    }
    for k in 1..=STEPS {
        for l in line("after").filter(|l| l.args[0] == k.to_string()) {
            let i: usize = l.args[1].parse().unwrap();
            let expected = bits(&Tensor::from_vec(l.values.clone(), [l.values.len()]).to_dtype(dtype));
            for (copy, got) in after[k - 1][i].chunks(expected.len()).enumerate() {
                let differ: Vec<usize> = (0..expected.len()).filter(|&j| got[j] != expected[j]).collect();
                if let Some(&j) = differ.first() {
                    failures.push(format!(
                        "{} {path:?} step {k} param {i} copy {copy}: {} of {} elements differ; first [{j}] kiln {:#06x}, PyTorch {:#06x}",
                        case.name,
                        differ.len(),
                        expected.len(),
                        got[j],
                        expected[j]
                    ));
                }
            }
        }
    }
    failures
}

/// Every fixture case along `path`: the messages of those that differ from PyTorch.
fn replay_all(path: Path) -> Vec<String> {
    let cases = load_fixture_cases("optim_half.txt", "opt");
    assert!(cases.len() >= 50, "{} cases in the fixture", cases.len());
    cases.iter().flat_map(|c| replay(c, path)).collect()
}

/// Parameter shapes for the one-pass-against-op-by-op check: 40,000 + 30,000 elements cross
/// the kernel's 32,768-element work ranges mid-parameter; the small ones share a range.
const SHAPES: [&[usize]; 4] = [&[40_000], &[30, 1000], &[5], &[3, 4]];

#[test]
fn half_optimizers_match_pytorch_bit_for_bit_on_every_path() {
    let mut failures = Vec::new();
    for path in [Path::OnePass, Path::OpByOp, Path::Compiled] {
        failures.extend(replay_all(path));
    }

    // A one-pass step writes in place: no tensor memory once the state exists (the op-by-op
    // path makes temporaries of the parameters' size).
    for dtype in [DType::BF16, DType::F16] {
        let params: Vec<Tensor> =
            SHAPES.iter().map(|s| Tensor::randn(s).to_dtype(dtype).requires_grad_(true)).collect();
        for p in &params {
            p.set_grad(Some(Tensor::randn(p.shape()).to_dtype(dtype)));
        }
        let mut one_pass = Optim::new(params.clone(), AdamConfig::default());
        one_pass.step(); // creates the state
        let bytes = step_allocates(&mut one_pass);
        if bytes != 0 {
            failures.push(format!("a one-pass {dtype} Adam step allocated {bytes} bytes: did it run op by op?"));
        }
        let mut op_by_op = Optim::new(params, AdamConfig { fused: Some(false), ..Default::default() });
        op_by_op.step();
        let bytes = step_allocates(&mut op_by_op);
        assert!(bytes >= 40_000 * 2, "the op-by-op {dtype} step allocated only {bytes} bytes");
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures[..failures.len().min(40)].join("\n"));
}
