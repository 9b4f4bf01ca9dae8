//! `conv1d` / `conv2d`: forward and gradients against PyTorch (tests/fixtures/conv.txt, made by
//! scripts/fixtures_conv.py), gradcheck and gradgradcheck in f64, and errors.

mod common;

use common::{Arg, Case, Outcome};
use kiln::autograd::{gradcheck, gradgradcheck, GradcheckOpts};
use kiln::nn::functional::{self as F, Conv1dOpts, Conv2dOpts, ConvOpts, Padding};
use kiln::{DType, Tensor};

/// Attribute `key` as `N` values (one value repeats, as PyTorch's int arguments do).
fn ints<const N: usize>(case: &Case, key: &str) -> [usize; N] {
    let v = case.attr_i64s(key);
    std::array::from_fn(|i| if v.len() == 1 { v[0] } else { v[i] } as usize)
}

fn opts<const N: usize>(case: &Case) -> ConvOpts<N> {
    let padding = match case.attr("padding") {
        Some("same") => Padding::Same,
        Some("valid") => Padding::Valid,
        _ => Padding::Explicit(ints(case, "padding")),
    };
    ConvOpts { stride: ints(case, "stride"), padding, dilation: ints(case, "dilation"), groups: case.attr_as("groups") }
}

/// The argument named `name`, if the case has one.
fn arg(case: &Case, args: &[Arg], name: &str) -> Option<Tensor> {
    case.args.iter().position(|(n, _)| n == name).map(|i| args[i].tensor().clone())
}

/// Runs a conv case: the forward, then (when the case has `gy`) the backward, returning the
/// output and the gradients of input, weight and bias.
fn run(case: &Case, args: &[Arg]) -> Outcome {
    let leaf = |t: Tensor| t.detach().requires_grad_(true);
    let x = leaf(arg(case, args, "x")?);
    let w = leaf(arg(case, args, "weight")?);
    let b = arg(case, args, "bias").map(leaf);
    let y = match case.op.as_str() {
        "conv2d" => F::try_conv2d(&x, &w, b.as_ref(), &opts::<2>(case)),
        "conv1d" => F::try_conv1d(&x, &w, b.as_ref(), &opts::<1>(case)),
        _ => return None,
    };
    let y = match y {
        Ok(y) => y,
        Err(e) => return Some(Err(e.to_string())),
    };
    let Some(gy) = arg(case, args, "gy") else { return Some(Ok(vec![y])) };
    y.backward_with(&gy);
    let mut outs = vec![y.detach(), x.grad().expect("input grad"), w.grad().expect("weight grad")];
    outs.extend(b.map(|b| b.grad().expect("bias grad")));
    Some(Ok(outs))
}

fn conv_cases() -> Vec<Case> {
    common::load("conv.txt").into_iter().filter(|c| c.op.starts_with("conv")).collect()
}

#[test]
fn forward_and_gradients_match_pytorch() {
    common::assert_cases_match(
        "conv",
        &conv_cases(),
        &run,
        &[
            "stride_pad",
            "dilation",
            "groups",
            "same_odd",
            "valid",
            "unbatched",
            "noncontig",
            "no_bias",
            "large_batch",
            "large_single",
            "conv1d/f64/basic_bias",
            "bf16",
        ],
    );
}

#[test]
fn errors_name_the_op_and_the_caller() {
    common::assert_error_cases(&conv_cases(), &run, 8, file!());
}

fn f64_leaf(shape: &[usize]) -> Tensor {
    Tensor::randn(shape).to_dtype(DType::F64).requires_grad_(true)
}

#[test]
fn gradcheck_conv2d_every_option() {
    kiln::manual_seed(1);
    let cases: [(&[usize], &[usize], Conv2dOpts); 4] = [
        (
            &[2, 2, 5, 4],
            &[3, 2, 2, 3],
            Conv2dOpts { stride: [2, 1], padding: Padding::Explicit([1, 2]), dilation: [1, 2], groups: 1 },
        ),
        (&[1, 4, 4, 4], &[2, 2, 3, 3], Conv2dOpts { padding: Padding::Same, groups: 2, ..Default::default() }),
        (&[3, 4, 4], &[2, 3, 2, 2], Conv2dOpts { stride: [2, 2], ..Default::default() }),
        (&[1, 2, 4, 5], &[2, 2, 2, 2], Conv2dOpts { padding: Padding::Same, dilation: [1, 1], ..Default::default() }),
    ];
    for (xs, ws, o) in cases {
        let (x, w, b) = (f64_leaf(xs), f64_leaf(ws), f64_leaf(&[ws[0]]));
        let f = |t: &[Tensor]| F::conv2d(&t[0], &t[1], Some(&t[2]), &o);
        gradcheck(f, &[x, w, b], GradcheckOpts::default()).unwrap_or_else(|e| panic!("{xs:?} {ws:?} {o:?}: {e}"));
    }
}

#[test]
fn gradcheck_conv1d() {
    kiln::manual_seed(2);
    let o = Conv1dOpts { stride: [2], padding: Padding::Explicit([1]), dilation: [2], groups: 1 };
    let f = |t: &[Tensor]| F::conv1d(&t[0], &t[1], Some(&t[2]), &o);
    gradcheck(f, &[f64_leaf(&[2, 2, 7]), f64_leaf(&[3, 2, 2]), f64_leaf(&[3])], GradcheckOpts::default()).unwrap();
}

#[test]
fn gradgradcheck_conv2d() {
    kiln::manual_seed(3);
    let plain = Conv2dOpts { stride: [2, 1], padding: Padding::Explicit([1, 0]), dilation: [1, 2], groups: 1 };
    let grouped = Conv2dOpts { groups: 2, padding: Padding::Explicit([1, 1]), ..Default::default() };
    for (xs, ws, o) in [([1usize, 2, 4, 5], [2usize, 2, 2, 2], plain), ([1, 2, 3, 3], [2, 1, 2, 2], grouped)] {
        let f = |t: &[Tensor]| F::conv2d(&t[0], &t[1], Some(&t[2]), &o);
        gradgradcheck(f, &[f64_leaf(&xs), f64_leaf(&ws), f64_leaf(&[ws[0]])], GradcheckOpts::default())
            .unwrap_or_else(|e| panic!("{o:?}: {e}"));
    }
}

#[test]
fn grad_fn_names_follow_pytorch() {
    let x = Tensor::randn([1, 1, 4, 4]).requires_grad_(true);
    let w = Tensor::randn([1, 1, 3, 3]).requires_grad_(true);
    let y = F::conv2d(&x, &w, None, &Default::default());
    assert_eq!(y.grad_fn().unwrap().name(), "ConvolutionBackward0");
    let w1 = Tensor::randn([2, 1, 3]).requires_grad_(true);
    let y1 = F::conv1d(&x.view([1, 1, 16]), &w1, None, &Default::default());
    assert_eq!(y1.grad_fn().unwrap().name(), "ConvolutionBackward0");
    let gx = kiln::autograd::grad(
        &[&y.sum()],
        &[&x],
        None,
        kiln::autograd::GradOpts { create_graph: true, ..Default::default() },
    )
    .unwrap();
    assert_eq!(gx[0].as_ref().unwrap().grad_fn().unwrap().name(), "ConvolutionBackwardBackward0");
}

#[test]
fn input_and_weight_may_share_storage() {
    // conv of x by itself (one storage read twice) equals conv by a copy.
    let x = Tensor::randn([1, 1, 3, 3]);
    let same = F::conv2d(&x, &x, None, &Default::default());
    let copy = F::conv2d(&x, &x.deep_clone(), None, &Default::default());
    assert_eq!(same.to_vec::<f32>(), copy.to_vec::<f32>());
}

#[test]
fn dtype_errors_name_both_dtypes() {
    let e = |r: kiln::Result<Tensor>| r.unwrap_err().to_string();
    let x = Tensor::zeros([1, 1, 4, 4]);
    let w64 = Tensor::zeros([1, 1, 3, 3]).to_dtype(DType::F64);
    let m = e(F::try_conv2d(&x, &w64, None, &Default::default()));
    assert!(m.starts_with("conv2d: input type (float32) and weight type (float64) should be the same"), "{m}");
    assert!(m.contains(file!()), "{m}");
    let xi = x.to_dtype(DType::I64);
    let m = e(F::try_conv2d(&xi, &w64.to_dtype(DType::I64), None, &Default::default()));
    assert!(m.starts_with("conv2d: not implemented for dtype int64"), "{m}");
    let m = e(F::try_conv2d(&x, &Tensor::zeros([1, 1, 3, 3]), None, &Conv2dOpts { groups: 0, ..Default::default() }));
    assert!(m.starts_with("conv2d: non-positive groups"), "{m}");
    let m =
        e(F::try_conv2d(&x, &Tensor::zeros([1, 1, 3, 3]), None, &Conv2dOpts { stride: [0, 1], ..Default::default() }));
    assert!(m.starts_with("conv2d: non-positive stride"), "{m}");
}

#[test]
fn the_panicking_form_reports_the_callers_line() {
    let r = common::catch_quietly(|| {
        F::conv2d(&Tensor::zeros([1, 2, 4, 4]), &Tensor::zeros([1, 1, 3, 3]), None, &Default::default())
    });
    let m = common::panic_message(&*r.unwrap_err());
    assert!(m.starts_with("conv2d: given groups=1, weight of size [1, 1, 3, 3], expected input [1, 2, 4, 4] to have 1 channels, but got 2"), "{m}");
    assert!(m.contains(&format!("(at {}:", file!())), "{m}");
}
