//! The tensor part of PyTorch's "Deep Learning with PyTorch: A 60 Minute Blitz", line by line.
//!
//! Run: `cargo run --release --example blitz_tensors`

use kiln::prelude::*;

fn main() {
    kiln::manual_seed(0);

    // Construct a 5x3 matrix, uninitialized:
    let x = Tensor::empty([5, 3]);
    println!("empty:\n{x}\n");

    // Construct a randomly initialized matrix:
    let x = Tensor::rand([5, 3]);
    println!("rand:\n{x}\n");

    // Construct a matrix filled zeros and of dtype long:
    let x = Tensor::zeros_opts([5, 3], DType::I64, Device::Cpu);
    println!("zeros, long:\n{x}\n");

    // Construct a tensor directly from data:
    let x = Tensor::new(&[5.5f32, 3.0]);
    println!("from data:\n{x}\n");

    // Create a tensor based on an existing tensor; new_* keep dtype and device unless told:
    let x = x.to_dtype(DType::F64).new_ones([5, 3]);
    println!("new_ones, double:\n{x}\n");
    let x = x.randn_like().to_dtype(DType::F32);
    println!("randn_like, float:\n{x}\n");

    // Get its size:
    println!("size: {:?}\n", x.shape());

    // Operations: addition, three ways, and in place.
    let y = Tensor::rand([5, 3]);
    println!("x + y:\n{}\n", &x + &y);
    println!("add(x, y):\n{}\n", x.add(&y));
    let result = Tensor::empty([5, 3]);
    result.copy_(&x.add(&y)); // torch.add(x, y, out=result)
    println!("out=result:\n{result}\n");
    y.add_(&x); // adds x to y in place
    println!("y.add_(x):\n{y}\n");

    // NumPy-like indexing: the second column.
    println!("x[:, 1]:\n{}\n", x.i((.., 1)));

    // Resizing: view.
    let x = Tensor::randn([4, 4]);
    let y = x.view([16]);
    let z = x.view([-1, 8]); // the size -1 is inferred from other dimensions
    println!("sizes: {:?} {:?} {:?}\n", x.shape(), y.shape(), z.shape());

    // A one-element tensor's value as a Rust number:
    let x = Tensor::randn([1]);
    println!("{x}\n{}\n", x.item::<f32>());

    // Views share memory, as the NumPy bridge does in PyTorch: change one, see the other.
    let a = Tensor::ones([5]);
    let b = a.view([5]);
    a.add_(1.0);
    println!("a: {a}\nb (a view of a): {b}\n");

    // Tensors can be moved onto any device with `to`.
    let device = Device::cuda_if_available(0);
    if device.is_cuda() {
        let y = Tensor::ones_like(&x).to(&device);
        let z = &x.to(&device) + &y;
        println!("{z}\n{}", z.to(&Device::Cpu).to_dtype(DType::F64));
    } else {
        println!("no CUDA device: the CUDA part of the blitz is skipped (device = {device})");
    }

    // A taste of what comes next in the blitz: matrix products and reductions.
    let w = Tensor::randn([3, 2]);
    let h = Tensor::randn([4, 3]).matmul(&w).relu();
    println!("relu(x @ w):\n{h}\nsum = {:.4}", h.sum().item::<f32>());
}
