//! The autograd part of PyTorch's "Deep Learning with PyTorch: A 60 Minute Blitz", line by line.
//!
//! Run: `cargo run --release --example blitz_autograd`

use kiln::prelude::*;

fn main() {
    kiln::manual_seed(0);

    // Create a tensor and set requires_grad=True to track computation with it:
    let x = Tensor::ones([2, 2]).requires_grad_(true);
    println!("{x}");

    // Do a tensor operation; y was created as a result of an operation, so it has a grad_fn:
    let y = &x + 2.0;
    println!("{y}");
    println!("{:?}", y.grad_fn().expect("y has history"));

    // More operations on y:
    let z = &y * &y * 3.0;
    let out = z.mean();
    println!("{z} {out}");

    // requires_grad_(...) changes an existing tensor's flag in place (default: false):
    let a = Tensor::randn([2, 2]);
    let a = (&a * 3.0) / (&a - 1.0);
    println!("{}", a.requires_grad());
    a.requires_grad_(true);
    println!("{}", a.requires_grad());
    let b = (&a * &a).sum();
    println!("{:?}", b.grad_fn().expect("b has history"));

    // Backprop: out contains a single scalar, so out.backward() is out.backward(torch.tensor(1.)):
    out.backward();
    // d(out)/dx: 4.5 everywhere, since out = mean(3(x+2)²) and d/dx_i = 3(x_i+2)/2 = 4.5 at x = 1.
    let grad = x.grad().expect("x is a leaf that requires grad");
    println!("{grad}");
    assert!(grad.to_vec::<f32>().iter().all(|&g| g == 4.5));

    // The vector-Jacobian product: y is not a scalar, so pass the vector to backward:
    let x = Tensor::randn([3]).requires_grad_(true);
    let mut y = &x * 2.0;
    while y.detach().square().sum().sqrt().item::<f32>() < 1000.0 {
        y = &y * 2.0;
    }
    println!("{y}");
    let v = Tensor::new(&[0.1f32, 1.0, 0.0001]);
    y.backward_with(&v);
    let grad = x.grad().expect("x is a leaf that requires grad");
    println!("{grad}");
    // y = x · 2^k, so x.grad = v · 2^k.
    let scale = (&y / &x).detach().to_vec::<f32>()[0];
    for (g, v) in grad.to_vec::<f32>().iter().zip([0.1f32, 1.0, 0.0001]) {
        assert!((g - v * scale).abs() <= 1e-6 * (v * scale).abs());
    }

    // Stop tracking history by running code inside kiln::no_grad (`with torch.no_grad():`):
    println!("{}", x.requires_grad());
    println!("{}", x.pow(2.0).requires_grad());
    kiln::no_grad(|| println!("{}", x.pow(2.0).requires_grad()));

    // Or get a new tensor with the same content that does not require gradients, with detach():
    println!("{}", x.requires_grad());
    let y = x.detach();
    println!("{}", y.requires_grad());
    println!("{}", x.eq(&y).all());
}
