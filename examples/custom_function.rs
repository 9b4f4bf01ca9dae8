//! A custom autograd function: the binary activation of XNOR-Net, `sign(x)` forward with the
//! straight-through estimator backward (the gradient passes where `|x| <= 1`, zero elsewhere),
//! as PyTorch's `torch.autograd.Function` tutorial pattern.
//!
//! Run: `cargo run --example custom_function`

use kiln::autograd::{Function, FunctionCtx};
use kiln::Tensor;

/// `sign(x)`, differentiated as the identity clipped to `|x| <= 1`.
struct BinaryActive;

impl Function for BinaryActive {
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Tensor {
        let x = &inputs[0];
        ctx.save_for_backward(&[x]);
        x.sign()
    }

    fn backward(&self, ctx: &FunctionCtx, grad_output: &Tensor) -> Vec<Option<Tensor>> {
        let x = &ctx.saved_tensors()[0];
        let pass = x.abs().le(1.0);
        vec![Some(Tensor::where_cond(&pass, grad_output, 0.0))]
    }
}

fn main() {
    let x = Tensor::new(&[-2.0f32, -1.0, -0.5, 0.0, 0.25, 1.0, 1.5, 3.0]).requires_grad_(true);
    let y = BinaryActive.apply(&[x.clone()]);
    println!("input:\n{x}\n");
    println!("output ({}):\n{y}\n", y.grad_fn().expect("recorded").name());

    // A tiny computation on top: a weighted sum of the binary activations.
    let weights = Tensor::new(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    let loss = y.dot(&weights);
    loss.backward();
    let grad = x.grad().expect("x is a leaf that requires grad");
    println!("loss: {}\ngradient:\n{grad}", loss.item::<f32>());

    assert_eq!(y.to_vec::<f32>(), vec![-1.0, -1.0, -1.0, 0.0, 1.0, 1.0, 1.0, 1.0]);
    // The weight of each element where |x| <= 1, zero elsewhere.
    assert_eq!(grad.to_vec::<f32>(), vec![0.0, 2.0, 3.0, 4.0, 5.0, 6.0, 0.0, 0.0]);
}
