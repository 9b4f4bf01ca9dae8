//! Autograd semantics: flags, grad_fn names, backward variants, accumulation, retain/create
//! graph, detach and grad mode, in-place safety, hooks, engine depth and memory.

use kiln::autograd::{self, BackwardOpts, GradOpts};
use kiln::{DType, Tensor};
use std::panic::{catch_unwind, AssertUnwindSafe};

fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).contiguous().to_vec::<f64>()
}

fn panic_message(f: impl FnOnce()) -> String {
    let e = catch_unwind(AssertUnwindSafe(f)).expect_err("expected a panic");
    e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

#[test]
fn blitz_mean_of_three_x_plus_two_squared() {
    let x = Tensor::ones([2, 2]).requires_grad_(true);
    let y = &x + 2.0;
    assert_eq!(y.grad_fn().unwrap().name(), "AddBackward0");
    let z = &y * &y * 3.0;
    let out = z.mean();
    assert_eq!(out.item::<f32>(), 27.0);
    out.backward();
    assert_eq!(x.grad().unwrap().to_vec::<f32>(), vec![4.5; 4]);
    assert!(x.is_leaf() && !y.is_leaf());
    assert!(y.grad().is_none(), "non-leaf without retain_grad keeps no grad");
}

#[test]
fn flags_and_dtype_rules() {
    let x = Tensor::randn([3]);
    assert!(!x.requires_grad() && x.is_leaf() && x.grad_fn().is_none());
    let e = Tensor::new(&[1i64, 2]).try_requires_grad_(true).unwrap_err().to_string();
    assert!(e.contains("only tensors of floating point dtype"), "{e}");
    assert!(Tensor::new(&[true]).try_requires_grad_(true).is_err());
    let w = x.requires_grad_(true);
    let y = w.exp();
    assert!(y.requires_grad());
    assert!(y.try_requires_grad_(false).is_err());
    assert!(!w.argmax().requires_grad(), "integer results never require grad");
    assert!(!w.gt(0.0).requires_grad());
}

#[test]
fn next_functions_walk_the_graph() {
    let a = Tensor::randn([2, 3]).requires_grad_(true);
    let b = Tensor::randn([3, 4]).requires_grad_(true);
    let loss = a.mm(&b).relu().sum();
    let f = loss.grad_fn().unwrap();
    assert_eq!(f.name(), "SumBackward0");
    let relu = f.next_functions()[0].clone().unwrap();
    assert_eq!(relu.name(), "ReluBackward0");
    let mm = relu.next_functions()[0].clone().unwrap();
    assert_eq!(mm.name(), "MmBackward0");
    let leaves = mm.next_functions();
    assert_eq!(leaves[0].as_ref().unwrap().name(), "AccumulateGrad");
    assert!(leaves[0].as_ref().unwrap().variable().unwrap().shape() == a.shape());
    let c = Tensor::randn([3]);
    let g = (&a * &c).sum().grad_fn().unwrap().next_functions()[0].clone().unwrap();
    assert_eq!(g.next_functions().len(), 2);
    assert!(g.next_functions()[1].is_none(), "an input without grad has no edge");
}

#[test]
fn vector_jacobian_product_and_scalar_check() {
    let x = Tensor::new(&[1.0f64, 2.0, 3.0]).requires_grad_(true);
    let y = &x * 2.0;
    let msg = y.try_backward_with_opts(None, BackwardOpts::default()).unwrap_err().to_string();
    assert!(msg.contains("only for scalar outputs") && msg.contains("[3]"), "{msg}");
    let v = Tensor::new(&[0.1f64, 1.0, 0.0001]);
    y.backward_with(&v);
    assert_eq!(f64s(&x.grad().unwrap()), vec![0.2, 2.0, 0.0002]);
    let wrong = Tensor::new(&[1.0f64, 2.0]);
    let z = &x * 2.0;
    assert!(z
        .try_backward_with_opts(Some(&wrong), BackwardOpts::default())
        .unwrap_err()
        .to_string()
        .contains("mismatch in shape"));
}

#[test]
fn gradients_accumulate_and_zero_grad_sets_none() {
    let x = Tensor::new(&[1.0f32, 2.0]).requires_grad_(true);
    for _ in 0..3 {
        (&x * &x).sum().backward();
    }
    assert_eq!(x.grad().unwrap().to_vec::<f32>(), vec![6.0, 12.0]);
    x.zero_grad();
    assert!(x.grad().is_none());
    // The gradient given to backward_with is not aliased by .grad: changing it later is harmless.
    let v = Tensor::new(&[1.0f32, 1.0]);
    (&x + 0.0).backward_with(&v);
    v.fill_(5.0);
    assert_eq!(x.grad().unwrap().to_vec::<f32>(), vec![1.0, 1.0]);
}

#[test]
fn retain_grad_on_non_leaf() {
    let x = Tensor::new(&[1.0f32, 2.0]).requires_grad_(true);
    let y = &x * 3.0;
    y.retain_grad();
    assert!(y.retains_grad());
    (&y * &y).sum().backward();
    assert_eq!(y.grad().unwrap().to_vec::<f32>(), vec![6.0, 12.0]);
    assert_eq!(x.grad().unwrap().to_vec::<f32>(), vec![18.0, 36.0]);
}

#[test]
fn second_backward_needs_retain_graph() {
    let x = Tensor::new(&[2.0f64]).requires_grad_(true);
    let y = x.exp().sum();
    y.backward_opts(BackwardOpts { retain_graph: true, ..Default::default() });
    y.backward();
    assert!((f64s(&x.grad().unwrap())[0] - 2.0 * 2f64.exp()).abs() < 1e-12);
    let msg = y.try_backward_with_opts(None, BackwardOpts::default()).unwrap_err().to_string();
    assert!(msg.contains("second time") && msg.contains("retain_graph: true"), "{msg}");
    // A graph with no saved tensors can be walked again, as in PyTorch.
    let s = (&x + 1.0).sum();
    s.backward();
    s.backward();
}

#[test]
fn create_graph_gives_second_derivatives() {
    let x = Tensor::new(&[0.5f64, -1.0]).requires_grad_(true);
    let y = (x.pow(3.0) + x.sin()).sum();
    let g = autograd::grad(&[&y], &[&x], None, GradOpts { create_graph: true, ..Default::default() }).unwrap()[0]
        .clone()
        .unwrap();
    assert!(g.requires_grad());
    let xs = [0.5f64, -1.0];
    for (gv, xv) in f64s(&g).iter().zip(xs) {
        assert!((gv - (3.0 * xv * xv + xv.cos())).abs() < 1e-12);
    }
    g.sum().backward();
    for (hv, xv) in f64s(&x.grad().unwrap()).iter().zip(xs) {
        assert!((hv - (6.0 * xv - xv.sin())).abs() < 1e-12);
    }
    // Hessian-vector product through backward(create_graph) on .grad itself.
    let w = Tensor::new(&[1.0f64, 2.0]).requires_grad_(true);
    let f = (&w * &w * &w).sum();
    f.backward_opts(BackwardOpts { create_graph: true, ..Default::default() });
    let gw = w.grad().unwrap();
    assert!(gw.requires_grad());
    let v = Tensor::new(&[1.0f64, 1.0]);
    let hv = autograd::grad(&[&gw], &[&w], Some(&[&v]), GradOpts::default()).unwrap()[0].clone().unwrap();
    assert_eq!(f64s(&hv), vec![6.0, 12.0]);
}

#[test]
fn gradient_penalty_through_create_graph() {
    // d/dw of |d(w·x)/dx|² = d/dw |w|² = 2w
    let w = Tensor::new(&[1.0f64, -2.0, 3.0]).requires_grad_(true);
    let x = Tensor::new(&[0.3f64, 0.1, 0.2]).requires_grad_(true);
    let out = (&w * &x).sum();
    let gx = autograd::grad(&[&out], &[&x], None, GradOpts { create_graph: true, ..Default::default() }).unwrap()[0]
        .clone()
        .unwrap();
    gx.square().sum().backward();
    assert_eq!(f64s(&w.grad().unwrap()), vec![2.0, -4.0, 6.0]);
}

#[test]
fn detach_no_grad_and_frozen_parameters() {
    let x = Tensor::ones([2]).requires_grad_(true);
    let d = x.detach();
    assert!(!d.requires_grad() && d.shares_storage_with(&x));
    {
        let _g = kiln::no_grad_guard();
        assert!(!kiln::is_grad_enabled());
        let y = &x * 2.0;
        assert!(!y.requires_grad());
        let _e = kiln::enable_grad_guard();
        assert!((&x * 2.0).requires_grad());
    }
    kiln::set_grad_enabled(false);
    assert!(!(&x * 2.0).requires_grad());
    kiln::set_grad_enabled(true);
    let y = &x * 2.0;
    y.detach_();
    assert!(!y.requires_grad() && y.is_leaf());

    // A frozen first layer: no grad for it, the later one still gets one.
    let w1 = Tensor::randn([3, 3]).requires_grad_(true);
    let w2 = Tensor::randn([3, 1]).requires_grad_(true);
    w1.requires_grad_(false);
    let inp = Tensor::randn([4, 3]);
    inp.mm(&w1).relu().mm(&w2).sum().backward();
    assert!(w1.grad().is_none());
    assert_eq!(w2.grad().unwrap().shape(), &[3, 1]);
}

#[test]
fn in_place_modification_of_saved_tensor_fails_backward() {
    let a = Tensor::new(&[1.0f32, 2.0]).requires_grad_(true);
    let b = a.sigmoid(); // saves its output
    let c = &b * 2.0;
    b.mul_(3.0);
    let msg = c.sum().try_backward_with_opts(None, BackwardOpts::default()).unwrap_err().to_string();
    assert!(msg.contains("modified by an inplace operation") && msg.contains("SigmoidBackward0"), "{msg}");
    assert!(msg.contains("expected version 0"), "{msg}");
}

#[test]
fn in_place_on_leaf_requiring_grad_is_refused_outside_no_grad() {
    let w = Tensor::ones([2]).requires_grad_(true);
    let msg = panic_message(|| {
        w.add_(1.0);
    });
    assert!(msg.contains("leaf tensor that requires grad") && msg.contains("in-place"), "{msg}");
    {
        let _g = kiln::no_grad_guard();
        w.add_(1.0); // optimizer-style updates are fine
    }
    assert_eq!(w.to_vec::<f32>(), vec![2.0, 2.0]);
}

#[test]
fn in_place_on_non_leaf_rebases_history() {
    let x = Tensor::new(&[1.0f64, 2.0]).requires_grad_(true);
    let y = &x * 2.0;
    y.mul_(&x); // y = 2x·x
    assert_eq!(y.grad_fn().unwrap().name(), "MulBackward0");
    y.exp_();
    y.sum().backward();
    let xs = [1.0f64, 2.0];
    for (g, xv) in f64s(&x.grad().unwrap()).iter().zip(xs) {
        let expect = (2.0 * xv * xv).exp() * 4.0 * xv;
        assert!((g - expect).abs() < 1e-9 * expect, "{g} vs {expect}");
    }
    // copy_ from a tensor that requires grad gives the destination history.
    let dst = Tensor::zeros([2]).to_dtype(DType::F64);
    let src = Tensor::new(&[3.0f64]).requires_grad_(true);
    dst.copy_(&src);
    assert!(dst.requires_grad());
    dst.sum().backward();
    assert_eq!(f64s(&src.grad().unwrap()), vec![2.0]);
}

#[test]
fn in_place_through_tracked_views_is_refused() {
    let x = Tensor::ones([2, 2]).requires_grad_(true);
    let y = &x * 1.0;
    let row = y.select(0, 0);
    let msg = panic_message(|| {
        row.mul_(2.0);
    });
    assert!(msg.contains("view"), "{msg}");
    let msg = panic_message(|| {
        y.mul_(2.0);
    });
    assert!(msg.contains("views are tracked"), "{msg}");
}

#[test]
fn hooks_see_and_replace_gradients() {
    use std::sync::{Arc, Mutex};
    let x = Tensor::new(&[1.0f32, 2.0]).requires_grad_(true);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let h = x.register_hook(move |g| {
        s2.lock().unwrap().push(g.to_vec::<f32>());
        None
    });
    let y = &x * 3.0;
    let _h2 = y.register_hook(|g| Some(g * 10.0));
    y.sum().backward();
    assert_eq!(seen.lock().unwrap().clone(), vec![vec![30.0, 30.0]]);
    assert_eq!(x.grad().unwrap().to_vec::<f32>(), vec![30.0, 30.0]);
    h.remove();
    x.zero_grad();
    (&x * 3.0).sum().backward();
    assert_eq!(seen.lock().unwrap().len(), 1, "removed hook no longer runs");
    assert_eq!(x.grad().unwrap().to_vec::<f32>(), vec![3.0, 3.0]);
    let msg = panic_message(|| {
        let _ = Tensor::ones([1]).register_hook(|_| None);
    });
    assert!(msg.contains("doesn't require gradient"), "{msg}");
}

#[test]
fn grad_of_unused_input() {
    let x = Tensor::new(&[1.0f64]).requires_grad_(true);
    let z = Tensor::new(&[1.0f64]).requires_grad_(true);
    let y = &x * 2.0;
    assert!(autograd::grad(&[&y], &[&z], None, GradOpts::default())
        .unwrap_err()
        .to_string()
        .contains("not have been used"));
    let y = &x * 2.0; // the failed call ran backward and freed the graph, as in PyTorch
    let r = autograd::grad(&[&y], &[&x, &z], None, GradOpts { allow_unused: true, ..Default::default() }).unwrap();
    assert_eq!(f64s(r[0].as_ref().unwrap()), vec![2.0]);
    assert!(r[1].is_none());
    assert!(x.grad().is_none(), "autograd::grad leaves .grad alone");
}

#[test]
fn mixed_dtypes_and_broadcasting_get_input_shaped_gradients() {
    let a = Tensor::randn([3, 1]).requires_grad_(true); // f32
    let b = Tensor::randn([4]).to_dtype(DType::F64).requires_grad_(true);
    let y = &a * &b; // [3, 4] f64
    assert_eq!(y.dtype(), DType::F64);
    y.sum().backward();
    let ga = a.grad().unwrap();
    assert_eq!((ga.shape(), ga.dtype()), (&[3usize, 1][..], DType::F32));
    let bsum: f64 = f64s(&b).iter().sum();
    for v in f64s(&ga) {
        assert!((v - bsum).abs() < 1e-5);
    }
    assert_eq!(b.grad().unwrap().shape(), &[4]);
}

#[test]
fn deep_chain_backpropagates_iteratively() {
    let x = Tensor::new(&[1.0f64]).requires_grad_(true);
    let mut y = x.clone();
    for _ in 0..100_000 {
        y = &y * 1.0;
    }
    y.backward();
    assert_eq!(f64s(&x.grad().unwrap()), vec![1.0]);
    drop(y); // dropping a 100k-deep graph must not overflow the stack either
}

#[test]
fn post_accumulate_grad_hooks_see_the_accumulated_grad() {
    use std::sync::{Arc, Mutex};
    let x = Tensor::ones([2]).requires_grad_(true);
    let seen: Arc<Mutex<Vec<Vec<f32>>>> = Arc::default();
    let s = seen.clone();
    let handle =
        x.register_post_accumulate_grad_hook(move |t| s.lock().unwrap().push(t.grad().unwrap().to_vec::<f32>()));
    (&x * 3.0).sum().backward();
    (&x * 2.0).sum().backward();
    assert_eq!(*seen.lock().unwrap(), vec![vec![3.0, 3.0], vec![5.0, 5.0]]);
    handle.remove();
    (&x * 1.0).sum().backward();
    assert_eq!(seen.lock().unwrap().len(), 2, "a removed hook ran");
    let y = &x * 2.0;
    let refused = catch_unwind(AssertUnwindSafe(|| y.register_post_accumulate_grad_hook(|_| {})));
    assert!(refused.is_err(), "a post-accumulate hook on a non-leaf was accepted");
}

#[test]
fn queued_callbacks_run_when_backward_ends_and_their_errors_fail_it() {
    use std::sync::{Arc, Mutex};
    let y = Tensor::ones([1]).requires_grad_(true);
    let order: Arc<Mutex<Vec<&'static str>>> = Arc::default();
    let o = order.clone();
    y.register_post_accumulate_grad_hook(move |_| {
        o.lock().unwrap().push("hook");
        let o = o.clone();
        kiln::autograd::queue_callback(move || {
            o.lock().unwrap().push("callback");
            Ok(())
        });
    });
    (&y * 2.0).sum().backward();
    assert_eq!(*order.lock().unwrap(), vec!["hook", "callback"]);
    kiln::autograd::queue_callback(|| Err(kiln::Error::new("callback", kiln::ErrorKind::Value, "boom")));
    let e = (&y * 2.0).sum().try_backward_with_opts(None, Default::default()).unwrap_err();
    assert!(e.message.contains("boom"), "{e}");
    // The hook ran; its callback, queued after the failing one, was dropped with the queue.
    assert_eq!(*order.lock().unwrap(), vec!["hook", "callback", "hook"]);
    (&y * 2.0).sum().backward();
    assert_eq!(order.lock().unwrap().len(), 5, "the next backward runs only its own callback");
}

#[test]
fn concurrent_backward_passes_accumulate_every_gradient() {
    // Eight threads each run 200 backward passes into one shared leaf: every gradient lands.
    let w = Tensor::zeros([3]).requires_grad_(true);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..200 {
                    (&w * 2.0).sum().backward();
                }
            });
        }
    });
    assert_eq!(w.grad().expect("accumulated").to_vec::<f32>(), [3200.0; 3]);
}
