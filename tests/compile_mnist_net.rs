//! The PyTorch MNIST example's `Net` (conv, conv, max-pool, dropout, two linear layers,
//! log-softmax), scaled down, trains the same compiled and eager with Adadelta, with no graph
//! break: convolutions, pooling and dropout (and their backward ops) are captured.

use kiln::nn::{functional as F, Module};
use kiln::optim::{Adadelta, AdadeltaConfig, Optimizer};
use kiln::prelude::*;

#[path = "common/seeded.rs"]
mod seeded;
use seeded::seeded;

/// `examples/mnist`'s Net at a smaller size: input `1×12×12`, conv1 1→4 k3, conv2 4→8 k3,
/// max-pool 2 (→ 8×4×4), fc1 128→16, fc2 16→10.
#[path = "../examples/common/mnist.rs"]
#[allow(dead_code)]
mod mnist;
use mnist::Net;

fn small_net() -> Net {
    Net::with_sizes(4, 8, 8 * 4 * 4, 16)
}

const STEPS: usize = 4;

/// Losses of `STEPS` Adadelta steps (compiled or eager), the final parameters, and the graph
/// breaks of each compiled call.
fn train(compiled: bool) -> (Vec<f32>, Vec<Vec<f32>>, Vec<usize>) {
    kiln::manual_seed(11);
    let net = small_net();
    let mut opt = Adadelta::new(net.parameters(), AdadeltaConfig { lr: 1.0, ..Default::default() });
    let x = Tensor::randn([8, 1, 12, 12]);
    let y = Tensor::randint(0, 10, [8]);
    let mut losses = Vec::new();
    let mut breaks = Vec::new();
    let mut body = |(x, y): (&Tensor, &Tensor)| {
        opt.zero_grad();
        let loss = F::nll_loss(&net.forward(x), y);
        loss.backward();
        opt.step();
        loss
    };
    if compiled {
        let mut step = kiln::compile(&mut body);
        for _ in 0..STEPS {
            losses.push(step.call((&x, &y)).item::<f32>());
            breaks.push(step.stats().graph_breaks);
        }
    } else {
        for _ in 0..STEPS {
            losses.push(body((&x, &y)).item::<f32>());
        }
    }
    let params = net.parameters().iter().map(|p| p.detach().to_vec::<f32>()).collect();
    (losses, params, breaks)
}

#[test]
fn mnist_net_adadelta_compiled_matches_eager() {
    let _g = seeded();
    let (eager, p_eager, _) = train(false);
    let (compiled, p_compiled, breaks) = train(true);
    for (a, b) in compiled.iter().zip(&eager) {
        assert!((a - b).abs() <= 1e-5 * b.abs().max(1e-30), "losses: compiled {compiled:?} vs eager {eager:?}");
    }
    assert_eq!(p_compiled.len(), p_eager.len());
    for (i, (a, b)) in p_compiled.iter().zip(&p_eager).enumerate() {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 1e-5, "parameter {i}: {x} vs {y}");
        }
    }
    assert!(eager[STEPS - 1] < eager[0], "training lowers the loss: {eager:?}");
    assert_eq!(breaks, vec![0; STEPS], "graph breaks per step");
}

#[test]
fn mnist_net_eval_forward_compiled_matches_eager() {
    let _g = seeded();
    kiln::manual_seed(5);
    let mut net = small_net();
    net.eval();
    let x = Tensor::randn([8, 1, 12, 12]);
    let eager = net.forward(&x).to_vec::<f32>();
    let mut step = kiln::compile(|x: &Tensor| net.forward(x));
    for _ in 0..2 {
        let out = step.call(&x);
        assert_eq!(out.shape(), &[8, 10]);
        for (a, b) in out.to_vec::<f32>().iter().zip(&eager) {
            assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{a} vs {b}");
        }
        assert_eq!(step.stats().graph_breaks, 0);
    }
}

/// Gradients of `x` and `w` through conv1d, avg/adaptive pooling, dropout2d, cat/stack,
/// layer_norm and batch_norm, and the loss.
fn other_ops(x: &Tensor, w: &Tensor) -> Tensor {
    let y = F::conv2d(
        x,
        w,
        None,
        &F::Conv2dOpts { padding: F::Padding::Explicit([1, 1]), stride: [2, 1], ..Default::default() },
    );
    let a = F::avg_pool2d(&y, 2);
    let b = F::adaptive_avg_pool2d(&y, [3, 2]);
    let d = F::dropout2d(&y, 0.5, true);
    let l = F::conv1d(&x.flatten(2, -1), &w.flatten(2, -1).narrow(2, 0, 3), None, &Default::default());
    let flat = Tensor::cat(&[a.flatten(1, -1), b.flatten(1, -1), d.flatten(1, -1), l.flatten(1, -1)], 1);
    let s = Tensor::stack(&[&flat, &flat.tanh()], 1);
    let n = F::layer_norm(&s, &[flat.shape()[1]], None, None, 1e-5);
    let bn = F::batch_norm(&n, None, None, None, None, true, 0.1, 1e-5);
    let (mp, _) =
        F::max_pool2d_with_indices(&y, &F::MaxPool2dOpts { padding: [1, 1], ..F::MaxPool2dOpts::new([3, 3]) });
    (bn.sin().sum() + mp.square().mean()) * 1.0
}

#[test]
fn conv_pool_dropout_cat_norm_capture_without_breaks() {
    let _g = seeded();
    let run = |compiled: bool| {
        kiln::manual_seed(3);
        let x = Tensor::randn([2, 3, 6, 6]).requires_grad_(true);
        let w = Tensor::randn([4, 3, 3, 3]).requires_grad_(true);
        let mut body = |(x, w): (&Tensor, &Tensor)| {
            x.set_grad(None);
            w.set_grad(None);
            let loss = other_ops(x, w);
            loss.backward();
            loss
        };
        let mut out = Vec::new();
        let mut breaks = Vec::new();
        if compiled {
            let mut step = kiln::compile(&mut body);
            for _ in 0..2 {
                out.push(step.call((&x, &w)).item::<f32>());
                breaks.push(step.stats().graph_breaks);
            }
        } else {
            for _ in 0..2 {
                out.push(body((&x, &w)).item::<f32>());
            }
        }
        (out, x.grad().unwrap().to_vec::<f32>(), w.grad().unwrap().to_vec::<f32>(), breaks)
    };
    let (le, gxe, gwe, _) = run(false);
    let (lc, gxc, gwc, breaks) = run(true);
    for (a, b) in lc.iter().zip(&le) {
        assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "losses {lc:?} vs {le:?}");
    }
    for (a, b) in gxc.iter().zip(&gxe).chain(gwc.iter().zip(&gwe)) {
        assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{a} vs {b}");
    }
    assert_eq!(breaks, vec![0, 0], "graph breaks per call");
}
