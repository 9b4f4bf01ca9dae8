//! The one-pass optimizer kernel (`fused`/`foreach`, kiln's default for eager steps) against
//! the op-by-op formula: the same bits for every optimizer and option, in f32, f64, bf16 and
//! f16, over
//! parameters whose elements straddle the kernel's parallel work ranges, next to a parameter it
//! cannot take (a transposed view, updated op by op); and a fused step allocates nothing.
//! One test, so that the memory statistics it reads see no other test's tensors.

use kiln::optim::{
    AdadeltaConfig, AdagradConfig, AdamConfig, AdamWConfig, Optim, Optimizer, OptimizerConfig, RMSpropConfig, SGDConfig,
};
use kiln::{DType, Tensor};

#[path = "common/optim_fixture.rs"]
mod optim_fixture;
use optim_fixture::step_allocates;

/// Parameter shapes: 40,000 + 30,000 elements cross the kernel's 32,768-element work ranges
/// mid-parameter; the small ones share a range.
const SHAPES: [&[usize]; 4] = [&[40_000], &[30, 1000], &[5], &[3, 4]];

/// Three steps of an optimizer with `config` and `fused` set to `fused`, from the same
/// parameters and gradients every time; the final parameters and state, as f64 bits.
fn trajectory<C: OptimizerConfig>(config: &C, fused: &str, dtype: DType) -> Vec<Vec<u64>> {
    kiln::manual_seed(7);
    let mut params: Vec<Tensor> = SHAPES.iter().map(|s| Tensor::randn(s).to_dtype(dtype)).collect();
    // A transposed view: not contiguous, so the kernel leaves it to the op-by-op path.
    params.push(Tensor::randn([6, 4]).to_dtype(dtype).t());
    let params: Vec<Tensor> = params.into_iter().map(|p| p.requires_grad_(true)).collect();
    let mut c = config.clone();
    c.set_hyperparameter("fused", fused).unwrap();
    let mut opt = Optim::new(params.clone(), c);
    for _ in 0..3 {
        for p in &params {
            p.set_grad(Some(Tensor::randn(p.shape()).to_dtype(dtype)));
        }
        opt.step();
    }
    let bits = |t: &Tensor| t.to_dtype(DType::F64).to_vec::<f64>().iter().map(|v| v.to_bits()).collect();
    let mut out: Vec<Vec<u64>> = params.iter().map(bits).collect();
    out.extend(opt.state_dict().iter().map(|(_, t)| bits(t)));
    out
}

/// The one-pass and op-by-op trajectories of `config` agree bit for bit, in f32 and f64.
fn same_bits<C: OptimizerConfig>(what: &str, config: C) {
    for dtype in [DType::F32, DType::F64, DType::BF16, DType::F16] {
        let op_by_op = trajectory(&config, "false", dtype);
        let fused = trajectory(&config, "true", dtype);
        assert_eq!(op_by_op.len(), fused.len(), "{what} {dtype}: state tensors differ");
        for (i, (a, b)) in op_by_op.iter().zip(&fused).enumerate() {
            let differ = a.iter().zip(b).filter(|(x, y)| x != y).count();
            assert_eq!(differ, 0, "{what} {dtype}: tensor {i} differs in {differ} of {} elements", a.len());
        }
    }
}

#[test]
fn one_pass_steps_equal_op_by_op_steps_bit_for_bit() {
    let adam = AdamConfig { weight_decay: 0.1, ..Default::default() };
    same_bits("Adam", adam.clone());
    same_bits("Adam amsgrad maximize", AdamConfig { amsgrad: true, maximize: true, ..adam });
    same_bits("AdamW", AdamWConfig::default());
    same_bits("AdamW amsgrad", AdamWConfig { amsgrad: true, lr: 0.1, ..Default::default() });
    same_bits("SGD", SGDConfig { lr: 0.1, ..Default::default() });
    let sgd = SGDConfig { lr: 0.1, momentum: 0.9, dampening: 0.2, weight_decay: 0.01, ..Default::default() };
    same_bits("SGD momentum dampening", sgd.clone());
    same_bits("SGD nesterov maximize", SGDConfig { dampening: 0.0, nesterov: true, maximize: true, ..sgd });
    same_bits("RMSprop", RMSpropConfig::default());
    let rms = RMSpropConfig { centered: true, momentum: 0.5, weight_decay: 0.1, ..Default::default() };
    same_bits("RMSprop centered momentum", rms.clone());
    same_bits("RMSprop momentum", RMSpropConfig { centered: false, ..rms });
    same_bits("Adagrad", AdagradConfig { lr_decay: 0.1, weight_decay: 0.1, ..Default::default() });
    same_bits("Adadelta", AdadeltaConfig { weight_decay: 0.1, maximize: true, ..Default::default() });

    // A fused step writes in place: no tensor memory at all once the state exists; the
    // op-by-op step makes temporaries of the parameters' size.
    let params: Vec<Tensor> = SHAPES.iter().map(|s| Tensor::randn(s).requires_grad_(true)).collect();
    for p in &params {
        p.set_grad(Some(Tensor::randn(p.shape())));
    }
    let mut fused = Optim::new(params.clone(), AdamConfig::default());
    fused.step(); // creates the state
    assert_eq!(step_allocates(&mut fused), 0, "a fused Adam step allocated tensor memory");
    let mut op_by_op = Optim::new(params, AdamConfig { fused: Some(false), ..Default::default() });
    op_by_op.step();
    let bytes = step_allocates(&mut op_by_op);
    assert!(bytes >= 40_000 * 4, "the op-by-op step allocated only {bytes} bytes: was it fused?");
}
