//! Custom autograd functions (`kiln::autograd::Function`, PyTorch's `torch.autograd.Function`):
//! apply and node names, gradients, saved tensors and their version checks,
//! `mark_non_differentiable`, `needs_input_grad`, and double backward through a backward
//! written with tensor ops.

use kiln::autograd::{grad, gradcheck, Function, FunctionCtx, GradOpts, GradcheckOpts};
use kiln::{DType, Device, Tensor};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// `y = x @ w` written as a custom function: saves both inputs and records which inputs needed a
/// gradient each time backward ran.
struct MyMatmul {
    seen_needs: Arc<Mutex<Vec<(bool, bool)>>>,
}

impl Function for MyMatmul {
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Tensor {
        assert!(!kiln::is_grad_enabled(), "forward runs under no_grad");
        ctx.save_for_backward(&[&inputs[0], &inputs[1]]);
        inputs[0].mm(&inputs[1])
    }

    fn backward(&self, ctx: &FunctionCtx, g: &Tensor) -> Vec<Option<Tensor>> {
        let saved = ctx.saved_tensors();
        let (x, w) = (&saved[0], &saved[1]);
        self.seen_needs.lock().unwrap().push((ctx.needs_input_grad(0), ctx.needs_input_grad(1)));
        vec![ctx.needs_input_grad(0).then(|| g.mm(&w.t())), ctx.needs_input_grad(1).then(|| x.t().mm(g))]
    }
}

fn my_matmul(x: &Tensor, w: &Tensor) -> (Tensor, Arc<Mutex<Vec<(bool, bool)>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    (MyMatmul { seen_needs: seen.clone() }.apply(&[x.clone(), w.clone()]), seen)
}

fn leaf(shape: &[usize]) -> Tensor {
    Tensor::randn_opts(shape, DType::F64, Device::Cpu).requires_grad_(true)
}

#[test]
fn apply_records_a_named_node_and_gradients_check() {
    let (x, w) = (leaf(&[2, 3]), leaf(&[3, 4]));
    let (y, _) = my_matmul(&x, &w);
    let node = y.grad_fn().unwrap();
    assert_eq!(node.name(), "MyMatmulBackward");
    assert_eq!(node.next_functions().len(), 2);
    assert!(!y.is_leaf() && y.requires_grad());
    // The values are the forward's.
    let want = {
        let _off = kiln::no_grad_guard();
        x.mm(&w).to_vec::<f64>()
    };
    assert_eq!(y.to_vec::<f64>(), want);
    gradcheck(|xs| my_matmul(&xs[0], &xs[1]).0, &[x, w], GradcheckOpts::default()).unwrap();
}

#[test]
fn needs_input_grad_is_false_for_an_input_without_grad() {
    let x = Tensor::randn_opts([2, 3], DType::F64, Device::Cpu);
    let w = leaf(&[3, 4]);
    let (y, seen) = my_matmul(&x, &w);
    y.backward_with(&Tensor::ones_opts([2, 4], DType::F64, Device::Cpu));
    assert_eq!(*seen.lock().unwrap(), vec![(false, true)]);
    assert!(x.grad().is_none());
    // d(Σ x@w)/dw[k, j] = Σ_i x[i, k]
    let xs = x.to_vec2::<f64>();
    for (k, row) in w.grad().unwrap().to_vec2::<f64>().iter().enumerate() {
        for g in row {
            assert!((g - (xs[0][k] + xs[1][k])).abs() < 1e-12);
        }
    }
}

#[test]
fn no_node_without_grad_mode_or_inputs_that_require_grad() {
    let (x, w) = (leaf(&[2, 3]), leaf(&[3, 4]));
    {
        let _off = kiln::no_grad_guard();
        let (y, _) = my_matmul(&x, &w);
        assert!(!y.requires_grad() && y.grad_fn().is_none());
    }
    let plain = Tensor::randn_opts([2, 3], DType::F64, Device::Cpu);
    let (y, _) = my_matmul(&plain, &w.detach());
    assert!(!y.requires_grad());
}

#[test]
fn in_place_write_to_a_saved_input_fails_backward() {
    let x = Tensor::randn_opts([2, 3], DType::F64, Device::Cpu);
    let w = leaf(&[3, 4]);
    let (y, seen) = my_matmul(&x, &w);
    x.fill_(0.5);
    let err = y
        .try_backward_with_opts(Some(&Tensor::ones_opts([2, 4], DType::F64, Device::Cpu)), Default::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("modified by an inplace operation"), "{err}");
    assert!(err.contains("saved tensor 0 of MyMatmulBackward"), "{err}");
    assert!(seen.lock().unwrap().is_empty(), "backward must not run on stale tensors");
}

/// `y = exp(x)`, saving its output (the gradient is `g * y`), counting backward calls.
struct Exp {
    calls: Arc<AtomicUsize>,
}

impl Function for Exp {
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Tensor {
        let y = inputs[0].exp();
        ctx.save_for_backward(&[&y]);
        y
    }

    fn backward(&self, ctx: &FunctionCtx, g: &Tensor) -> Vec<Option<Tensor>> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        vec![Some(g * &ctx.saved_tensors()[0])]
    }
}

#[test]
fn saved_output_and_freed_graph() {
    let calls = Arc::new(AtomicUsize::new(0));
    let x = Tensor::new(&[0.0f64, 1.0, -1.0]).requires_grad_(true);
    let y = Exp { calls: calls.clone() }.apply(&[x.clone()]);
    assert_eq!(y.grad_fn().unwrap().name(), "ExpBackward");
    y.backward_with(&Tensor::ones_opts([3], DType::F64, Device::Cpu));
    let want: Vec<f64> = [0.0f64, 1.0, -1.0].iter().map(|v| v.exp()).collect();
    assert_eq!(x.grad().unwrap().to_vec::<f64>(), want);
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    // The saved tensors were freed with the graph.
    let err = y
        .try_backward_with_opts(Some(&Tensor::ones_opts([3], DType::F64, Device::Cpu)), Default::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("backward through the graph a second time") && err.contains("ExpBackward"), "{err}");
    // Writing into the output it saved breaks the backward too.
    let y = Exp { calls: calls.clone() }.apply(&[x.clone()]);
    {
        let _off = kiln::no_grad_guard();
        y.fill_(2.0);
    }
    let err = y
        .try_backward_with_opts(Some(&Tensor::ones_opts([3], DType::F64, Device::Cpu)), Default::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("modified by an inplace operation"), "{err}");
    assert_eq!(calls.load(Ordering::Relaxed), 1);
}

/// `argmax`-like output: the indices of the row maxima as float, marked non-differentiable.
struct RowArgmax;

impl Function for RowArgmax {
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Tensor {
        let idx = inputs[0].argmax_dim(1).to_dtype(inputs[0].dtype());
        ctx.mark_non_differentiable(&idx);
        idx
    }

    fn backward(&self, _ctx: &FunctionCtx, _g: &Tensor) -> Vec<Option<Tensor>> {
        unreachable!("a non-differentiable output has no backward")
    }
}

#[test]
fn mark_non_differentiable_output_does_not_require_grad() {
    let x = Tensor::new(&[[1.0f64, 3.0, 2.0], [5.0, 4.0, 0.0]]).requires_grad_(true);
    let i = RowArgmax.apply(&[x.clone()]);
    assert!(!i.requires_grad() && i.grad_fn().is_none());
    assert_eq!(i.to_vec::<f64>(), vec![1.0, 0.0]);
}

/// Returns its input unchanged (an identity with a gradient that doubles).
struct PassThrough;

impl Function for PassThrough {
    fn forward(&self, _ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Tensor {
        inputs[0].clone()
    }

    fn backward(&self, _ctx: &FunctionCtx, g: &Tensor) -> Vec<Option<Tensor>> {
        vec![Some(g * 2.0)]
    }
}

#[test]
fn returning_an_input_leaves_the_input_a_leaf() {
    let x = Tensor::new(&[1.0f64, 2.0]).requires_grad_(true);
    let y = PassThrough.apply(&[x.clone()]);
    assert!(x.is_leaf() && !y.is_leaf());
    assert_eq!(y.grad_fn().unwrap().name(), "PassThroughBackward");
    y.backward_with(&Tensor::ones_opts([2], DType::F64, Device::Cpu));
    assert_eq!(x.grad().unwrap().to_vec::<f64>(), vec![2.0, 2.0]);
}

/// Returns one gradient too many.
struct WrongCount;

impl Function for WrongCount {
    fn forward(&self, _ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Tensor {
        inputs[0].exp()
    }

    fn backward(&self, _ctx: &FunctionCtx, g: &Tensor) -> Vec<Option<Tensor>> {
        vec![Some(g.clone()), Some(g.clone())]
    }
}

#[test]
fn wrong_number_of_gradients_is_an_error() {
    let x = Tensor::new(&[1.0f64]).requires_grad_(true);
    let err = WrongCount.apply(&[x]).try_backward_with_opts(None, Default::default()).unwrap_err().to_string();
    assert!(err.contains("function WrongCountBackward returned 2 gradients, but it has 1 inputs"), "{err}");
}

/// `y = x³` with a backward made of differentiable ops (`3 x² g`), so `create_graph` gives the
/// second derivative `6 x`.
struct Cube;

impl Function for Cube {
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Tensor {
        let x = &inputs[0];
        ctx.save_for_backward(&[x]);
        &(x * x) * x
    }

    fn backward(&self, ctx: &FunctionCtx, g: &Tensor) -> Vec<Option<Tensor>> {
        let x = &ctx.saved_tensors()[0];
        vec![Some(&(g * &(x * x)) * 3.0)]
    }
}

#[test]
fn double_backward_through_a_custom_backward() {
    let x = Tensor::new(&[2.0f64, -1.0]).requires_grad_(true);
    let y = Cube.apply(&[x.clone()]);
    let opts = GradOpts { create_graph: true, ..Default::default() };
    let ones = Tensor::ones_opts([2], DType::F64, Device::Cpu);
    let dy = grad(&[&y], &[&x], Some(&[&ones]), opts).unwrap()[0].clone().unwrap();
    assert_eq!(dy.to_vec::<f64>(), vec![12.0, 3.0]); // 3x²
    assert!(dy.requires_grad());
    let d2y = grad(&[&dy], &[&x], Some(&[&ones]), GradOpts::default()).unwrap()[0].clone().unwrap();
    assert_eq!(d2y.to_vec::<f64>(), vec![12.0, -6.0]); // 6x
    kiln::autograd::gradgradcheck(|xs| Cube.apply(&[xs[0].clone()]), &[leaf(&[3])], GradcheckOpts::default()).unwrap();
}

/// `y = Σ_ij x_i A_ij x_j` (a quadratic form with a constant matrix held in a field), whose
/// backward is made of products only (`g (A + Aᵀ) x`, written `A x g + Aᵀ x g`): its second
/// derivative is `(A + Aᵀ) g`.
struct Quadratic {
    a: Tensor,
}

impl Function for Quadratic {
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Tensor {
        let x = &inputs[0];
        ctx.save_for_backward(&[x]);
        x.dot(&self.a.mv(x))
    }

    fn backward(&self, ctx: &FunctionCtx, g: &Tensor) -> Vec<Option<Tensor>> {
        let x = &ctx.saved_tensors()[0];
        let sym = &self.a + &self.a.t();
        // (A + Aᵀ) x g with products only: [1] @ (g as [1] ⊗ (A + Aᵀ) x), a [1, n] matrix.
        let one = Tensor::ones_opts([1], g.dtype(), g.device());
        vec![Some(one.matmul(&g.reshape([1]).outer(&sym.mv(x))))]
    }
}

#[test]
fn hessian_vector_product_of_a_product_only_backward() {
    let a = Tensor::randn_opts([3, 3], DType::F64, Device::Cpu);
    let f = |xs: &[Tensor]| Quadratic { a: a.clone() }.apply(&[xs[0].clone()]);
    gradcheck(f, &[leaf(&[3])], GradcheckOpts::default()).unwrap();
    // The Hessian-vector product d<∇y, v>/dx is (A + Aᵀ) v.
    let x = leaf(&[3]);
    let y = f(&[x.clone()]);
    let gx =
        grad(&[&y], &[&x], None, GradOpts { create_graph: true, ..Default::default() }).unwrap()[0].clone().unwrap();
    let v = Tensor::new(&[1.0f64, -2.0, 0.5]);
    let hv = grad(&[&gx], &[&x], Some(&[&v]), GradOpts::default()).unwrap()[0].clone().unwrap();
    let want = (&a + &a.t()).mv(&v).to_vec::<f64>();
    for (h, w) in hv.to_vec::<f64>().iter().zip(&want) {
        assert!((h - w).abs() < 1e-12, "{h} vs {w}");
    }
    kiln::autograd::gradgradcheck(f, &[leaf(&[3])], GradcheckOpts::default()).unwrap();
}
