//! Bad inputs around training: autograd, optimizers, data loading and `kiln::compile`.

use super::{either, panics, refused, Cases, Net, Outcome, Ragged};
use kiln::data::{random_split, DataLoader, Subset, TensorDataset};
use kiln::nn::{self, Module};
use kiln::optim::{Adam, AdamConfig, Optimizer, SGDConfig, SGD};
use kiln::prelude::*;
use kiln::StateDict;
use std::panic::{catch_unwind, AssertUnwindSafe};

pub fn add(c: &mut Cases) {
    autograd(c);
    optimizers(c);
    data(c);
    compiled(c);
}

fn autograd(c: &mut Cases) {
    let leaf = || Tensor::ones([3]).requires_grad_(true);
    c.add("backward/non-scalar", move || refused((leaf() * 2.0).try_backward_with_opts(None, Default::default())));
    c.add("backward/no-grad", || refused(Tensor::ones([1]).try_backward_with_opts(None, Default::default())));
    c.add("backward/twice", move || {
        let x = leaf();
        let y = (&x * &x).sum();
        y.backward();
        refused(y.try_backward_with_opts(None, Default::default()))
    });
    c.add("backward/gradient-shape", move || {
        refused((leaf() * 2.0).try_backward_with_opts(Some(&Tensor::ones([4])), Default::default()))
    });
    c.add("backward/panicking-form", move || panics(|| (leaf() * 2.0).backward()));
    c.add("grad/unused-input", move || {
        refused(kiln::autograd::grad(&[&(leaf() * 2.0).sum()], &[&leaf()], None, Default::default()))
    });
    c.add("grad/input-without-grad", move || {
        refused(kiln::autograd::grad(&[&(leaf() * 2.0).sum()], &[&Tensor::ones([3])], None, Default::default()))
    });
    c.add("in-place/leaf-requiring-grad", move || panics(|| drop(leaf().add_(1.0).clone())));
    c.add("in-place/saved-tensor-changed", move || {
        let x = leaf();
        let y = &x * 2.0;
        let z = (&y * &y).sum();
        {
            let _off = kiln::no_grad_guard();
            y.add_(1.0);
        }
        refused(z.try_backward_with_opts(None, Default::default()))
    });
    c.add("set-grad/shape", move || panics(|| leaf().set_grad(Some(Tensor::ones([4])))));
    c.add("register-hook/no-grad", || panics(|| drop(Tensor::ones([2]).register_hook(|g| Some(g.clone())))));
    c.add("retain-grad/no-grad", || panics(|| Tensor::ones([2]).retain_grad()));
}

fn optimizers(c: &mut Cases) {
    let params = || vec![Tensor::ones([2]).requires_grad_(true)];
    c.add("sgd/negative-lr", move || refused(SGD::try_new(params(), SGDConfig { lr: -1.0, ..Default::default() })));
    c.add("sgd/nan-lr", move || refused(SGD::try_new(params(), SGDConfig { lr: f64::NAN, ..Default::default() })));
    c.add("sgd/negative-momentum", move || {
        refused(SGD::try_new(params(), SGDConfig { lr: 0.1, momentum: -0.5, ..Default::default() }))
    });
    c.add("sgd/nesterov-without-momentum", move || {
        refused(SGD::try_new(params(), SGDConfig { lr: 0.1, nesterov: true, ..Default::default() }))
    });
    c.add("sgd/empty-parameters", || refused(SGD::try_new(Vec::new(), SGDConfig::default())));
    c.add("sgd/integer-parameter", || refused(SGD::try_new(vec![Tensor::arange(2)], SGDConfig::default())));
    c.add("sgd/non-leaf-parameter", move || {
        refused(SGD::try_new(vec![params()[0].clone() * 2.0], SGDConfig::default()))
    });
    c.add("sgd/duplicate-parameter", || {
        let p = Tensor::ones([2]).requires_grad_(true);
        refused(SGD::try_new(vec![p.clone(), p], SGDConfig::default()))
    });
    c.add("adam/beta-one", move || {
        refused(Adam::try_new(params(), AdamConfig { betas: (1.0, 0.999), ..Default::default() }))
    });
    c.add("adam/negative-eps", move || {
        refused(Adam::try_new(params(), AdamConfig { eps: -1e-8, ..Default::default() }))
    });
    c.add("adam/panicking-form", move || {
        panics(|| drop(Adam::new(params(), AdamConfig { lr: -0.1, ..Default::default() })))
    });
    c.add("optimizer/state-dict-wrong-groups", move || {
        let mut opt = SGD::new(params(), SGDConfig::default());
        let mut sd = StateDict::new();
        sd.set_metadata("param_groups.0.params", "0");
        sd.set_metadata("param_groups.1.params", "1");
        refused(opt.load_state_dict(&sd))
    });
    c.add("optimizer/state-dict-bad-key", move || {
        let mut opt = SGD::new(params(), SGDConfig { lr: 0.1, momentum: 0.9, ..Default::default() });
        let mut sd = opt.state_dict();
        sd.insert("momentum_buffer", Tensor::ones([2]));
        refused(opt.load_state_dict(&sd))
    });
    c.add("optimizer/state-dict-wrong-shape", move || {
        let mut opt = SGD::new(params(), SGDConfig { lr: 0.1, momentum: 0.9, ..Default::default() });
        let mut sd = opt.state_dict();
        sd.insert("state.0.momentum_buffer", Tensor::ones([5]));
        refused(opt.load_state_dict(&sd))
    });
    c.add("optimizer/lr-of-missing-group", move || {
        panics(|| {
            let _ = SGD::new(params(), SGDConfig::default()).lr(3);
        })
    });
}

fn data(c: &mut Cases) {
    c.add("tensor-dataset/lengths-differ", || refused(TensorDataset::new((Tensor::zeros([2]), Tensor::zeros([3])))));
    c.add("tensor-dataset/0-dim", || refused(TensorDataset::new((Tensor::zeros(()),))));
    c.add("subset/index-out-of-range", || refused(Subset::new(Ragged, vec![0, 9])));
    c.add("random-split/lengths-sum", || refused(random_split(Ragged, &[1usize, 1][..], 0)));
    c.add("random-split/fractions-sum", || refused(random_split(Ragged, &[0.5f64, 0.6][..], 0)));
    c.add("random-split/negative-fraction", || refused(random_split(Ragged, &[1.5f64, -0.5][..], 0)));
    for workers in [0usize, 2] {
        c.add(format!("data-loader/ragged-batch-{workers}-workers"), move || {
            panics(|| {
                for batch in &DataLoader::new(Ragged).batch_size(2).num_workers(workers) {
                    drop(batch);
                }
            })
        });
    }
    for workers in [0usize, 2] {
        c.add(format!("data-loader/failing-transform-{workers}-workers"), move || {
            // Normalize needs a tensor image: on pixels (no ToTensor first) it fails per item.
            let mnist = kiln::vision::datasets::MNIST::embedded(kiln::vision::datasets::Split::Test)
                .expect("the embedded digits");
            let bad = mnist.transform(kiln::vision::transforms::Normalize::new(&[0.5], &[0.5]));
            panics(|| {
                let loader = DataLoader::new(bad).batch_size(2).num_workers(workers);
                drop((&loader).into_iter().next());
            })
        });
    }
    c.add("data-loader/batch-size-zero", || panics(|| drop(DataLoader::new(Ragged).batch_size(0))));
}

/// Runs a compiled training step that panics as the user's code does, then checks that the
/// parameters are readable and unchanged and that the next call works.
fn user_panic_then_recover(fail_after_step: bool) -> Outcome {
    let net = Net { fc: nn::Linear::new(3, 2) };
    let mut opt = Adam::new(net.parameters(), AdamConfig::default());
    let x = Tensor::ones([4, 3]);
    let before = net.fc.weight.to_vec::<f32>();
    let mut step = kiln::compile(|(fail, opt): (bool, &mut Adam)| {
        opt.zero_grad();
        let loss = net.forward(&x).sum();
        loss.backward();
        if fail && !fail_after_step {
            panic!("user failure before the step");
        }
        opt.step();
        if fail {
            panic!("user failure after the step");
        }
        loss
    });
    assert!(catch_unwind(AssertUnwindSafe(|| step.call((true, &mut opt)))).is_err());
    assert_eq!(net.fc.weight.to_vec::<f32>(), before, "the failed call changed the parameters");
    step.call((false, &mut opt));
    assert_ne!(net.fc.weight.to_vec::<f32>(), before, "the next call trains");
    None
}

fn compiled(c: &mut Cases) {
    let x = || Tensor::ones([4, 3]);
    c.add("compile/index-select-out-of-range", move || {
        let bad = Tensor::from_slice(&[0i64, 9]);
        let mut step = kiln::compile(|x: &Tensor| x.index_select(0, &bad) * 2.0);
        panics(|| drop(step.call(&x())))
    });
    c.add("compile/gather-out-of-range", move || {
        let index = Tensor::full_opts([4, 1], 5, DType::I64, Device::Cpu);
        let mut step = kiln::compile(|x: &Tensor| x.gather(1, &index).exp());
        panics(|| drop(step.call(&x())))
    });
    c.add("compile/cross-entropy-target-out-of-range", move || {
        let target = Tensor::from_slice(&[0i64, 1, 7, 0]);
        let mut step = kiln::compile(|x: &Tensor| nn::CrossEntropyLoss::new().forward(x, &target));
        panics(|| drop(step.call(&x())))
    });
    c.add("compile/scatter-out-of-range", move || {
        let index = Tensor::full_opts([4, 1], 9, DType::I64, Device::Cpu);
        let mut step = kiln::compile(|x: &Tensor| x.scatter(1, &index, &Tensor::ones([4, 1])) * 2.0);
        panics(|| drop(step.call(&x())))
    });
    c.add("compile/scatter-add-out-of-range", move || {
        let index = Tensor::full_opts([1, 3], -7, DType::I64, Device::Cpu);
        let mut step = kiln::compile(|x: &Tensor| x.scatter_add(0, &index, &Tensor::ones([1, 3])).sum());
        panics(|| drop(step.call(&x())))
    });
    c.add("compile/shape-mismatch", move || {
        let mut step = kiln::compile(|x: &Tensor| x + Tensor::ones([5]));
        panics(|| drop(step.call(&x())))
    });
    c.add("compile/matmul-mismatch", move || {
        let mut step = kiln::compile(|x: &Tensor| x.matmul(x));
        panics(|| drop(step.call(&x())))
    });
    c.add("compile/huge-expand", move || {
        let mut step = kiln::compile(|x: &Tensor| x.sum().expand([i64::MAX, 2]) * 2.0);
        panics(|| drop(step.call(&x())))
    });
    c.add("compile/user-panic-before-step", || user_panic_then_recover(false));
    c.add("compile/user-panic-after-step", || user_panic_then_recover(true));
    c.add("compile/reading-a-tensor-of-a-failed-call", move || {
        let kept = std::sync::Mutex::new(None);
        let mut step = kiln::compile(|x: &Tensor| {
            *kept.lock().unwrap() = Some(x * 3.0);
            panic!("user failure");
        });
        assert!(catch_unwind(AssertUnwindSafe(|| step.call(&x()))).is_err());
        let orphan = kept.lock().unwrap().take().expect("kept");
        panics(|| {
            let _ = orphan.sum().item::<f32>();
        })
    });
    c.add("compile/bad-index-after-an-update-then-recover", || {
        let w = Tensor::ones([3]);
        let bad = Tensor::from_slice(&[3i64]);
        let mut step = kiln::compile(|fail: bool| {
            w.mul_(2.0);
            if fail {
                Some(w.index_select(0, &bad))
            } else {
                None
            }
        });
        assert!(catch_unwind(AssertUnwindSafe(|| step.call(true))).is_err());
        assert_eq!(w.to_vec::<f32>(), [1.0; 3], "the failed call changed w");
        step.call(false);
        assert_eq!(w.to_vec::<f32>(), [2.0; 3]);
        None
    });
    c.add("compile/empty-softmax-is-fine", || {
        let mut step = kiln::compile(|x: &Tensor| x.softmax(1));
        either(Ok::<_, kiln::Error>(step.call(&Tensor::zeros([2, 0]))))
    });
}
