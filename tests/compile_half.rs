//! Compiled f16/bf16 training steps run generated kernels (each op computed in f32 and rounded
//! back, as eager kernels do) and give eager's numbers bit for bit.

use kiln::nn::{self, functional as F, Module};
use kiln::optim::{Optimizer, SGDConfig, SGD};
use kiln::prelude::*;

/// The bits of a half tensor's elements.
fn bits(t: &Tensor) -> Vec<u16> {
    match t.dtype() {
        DType::BF16 => t.to_vec::<half::bf16>().iter().map(|x| x.to_bits()).collect(),
        DType::F16 => t.to_vec::<half::f16>().iter().map(|x| x.to_bits()).collect(),
        d => panic!("bits of {d}"),
    }
}

/// Losses and final weights of `steps` SGD-momentum steps (MSE) of an MLP converted to
/// `dtype`, compiled or eager, and the kernels the last compiled call launched.
fn train(dtype: DType, compiled: bool, steps: usize) -> (Vec<Vec<u16>>, Vec<Vec<u16>>, usize) {
    kiln::manual_seed(3);
    let mut net = nn::Sequential::new().add(nn::Linear::new(12, 24)).add(nn::GELU::new()).add(nn::Linear::new(24, 4));
    net.to_dtype(dtype);
    let mut opt = SGD::new(net.parameters(), SGDConfig { lr: 0.1, momentum: 0.9, ..Default::default() });
    let x = Tensor::randn([8, 12]).to_dtype(dtype);
    let y = Tensor::randn([8, 4]).to_dtype(dtype);
    let mut body = |(x, y): (&Tensor, &Tensor)| {
        opt.zero_grad();
        let loss = F::mse_loss(&net.forward(x), y);
        loss.backward();
        opt.step();
        loss
    };
    let mut losses = Vec::new();
    let mut kernels = 0;
    if compiled {
        let mut step = kiln::compile(&mut body);
        for _ in 0..steps {
            losses.push(bits(&step.call((&x, &y))));
            kernels = step.stats().kernels_launched;
        }
    } else {
        for _ in 0..steps {
            losses.push(bits(&body((&x, &y))));
        }
    }
    let weights = net.parameters().iter().map(|p| bits(&p.detach())).collect();
    (losses, weights, kernels)
}

#[test]
fn half_mlp_steps_equal_eager_bit_for_bit_with_generated_kernels() {
    for dtype in [DType::BF16, DType::F16] {
        let (eager_losses, eager_weights, _) = train(dtype, false, 4);
        let (losses, weights, kernels) = train(dtype, true, 4);
        assert_eq!(losses, eager_losses, "{dtype}: losses");
        assert_eq!(weights, eager_weights, "{dtype}: parameters");
        assert!(kernels >= 3, "{dtype}: {kernels} generated kernels in a step");
    }
}
