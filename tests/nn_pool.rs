//! `max_pool2d`, `avg_pool2d`, `adaptive_avg_pool2d`: forward, indices and gradients against
//! PyTorch (tests/fixtures/conv.txt, made by scripts/fixtures_conv.py), gradcheck and
//! gradgradcheck in f64, and errors.

mod common;

use common::{Arg, Case, Outcome};
use kiln::autograd::{gradcheck, gradgradcheck, GradcheckOpts};
use kiln::nn::functional::{self as F, AvgPool2dOpts, MaxPool2dOpts};
use kiln::{DType, Tensor};

/// Attribute `key` as 2 values (one value repeats), `None` when absent.
fn pair(case: &Case, key: &str) -> Option<[usize; 2]> {
    let v = case.attr_opt_i64s(key)?;
    Some(if v.len() == 1 { [v[0] as usize; 2] } else { [v[0] as usize, v[1] as usize] })
}

/// The argument named `name`, if the case has one.
fn arg(case: &Case, args: &[Arg], name: &str) -> Option<Tensor> {
    case.args.iter().position(|(n, _)| n == name).map(|i| args[i].tensor().clone())
}

/// Runs a pooling case: the forward (values, and indices for max pooling), then (when the case
/// has `gy`) the gradient of the input.
fn run(case: &Case, args: &[Arg]) -> Outcome {
    let x = arg(case, args, "x")?.detach().requires_grad_(true);
    let outs = match case.op.as_str() {
        "max_pool2d" => {
            let o = MaxPool2dOpts {
                kernel_size: pair(case, "kernel")?,
                stride: pair(case, "stride"),
                padding: pair(case, "padding").unwrap_or([0, 0]),
                dilation: pair(case, "dilation").unwrap_or([1, 1]),
                ceil_mode: case.attr_flag("ceil_mode"),
            };
            F::try_max_pool2d_with_indices(&x, &o).map(|(v, i)| vec![v, i])
        }
        "avg_pool2d" => {
            let o = AvgPool2dOpts {
                kernel_size: pair(case, "kernel")?,
                stride: pair(case, "stride"),
                padding: pair(case, "padding").unwrap_or([0, 0]),
                ceil_mode: case.attr_flag("ceil_mode"),
                count_include_pad: case.attr("count_include_pad") != Some("0"),
                divisor_override: case.attr_opt("divisor_override"),
            };
            F::try_avg_pool2d_opts(&x, &o).map(|y| vec![y])
        }
        "adaptive_avg_pool2d" => F::try_adaptive_avg_pool2d(&x, pair(case, "output_size")?).map(|y| vec![y]),
        _ => return None,
    };
    let mut outs = match outs {
        Ok(o) => o,
        Err(e) => return Some(Err(e.to_string())),
    };
    if let Some(gy) = arg(case, args, "gy") {
        outs[0].backward_with(&gy);
        outs[0] = outs[0].detach();
        outs.push(x.grad().expect("input grad"));
    }
    Some(Ok(outs))
}

fn pool_cases() -> Vec<Case> {
    common::load("conv.txt").into_iter().filter(|c| c.op.contains("pool")).collect()
}

#[test]
fn forward_indices_and_gradients_match_pytorch() {
    common::assert_cases_match(
        "pooling",
        &pool_cases(),
        &run,
        &[
            "ceil_pad",
            "rect_ceil",
            "dilation",
            "pad_exclude",
            "ceil_include",
            "divisor",
            "non_divisible",
            "upsample",
            "unbatched",
            "noncontig",
            "large",
            "bf16",
        ],
    );
}

#[test]
fn errors_name_the_op_and_the_caller() {
    common::assert_error_cases(&pool_cases(), &run, 6, file!());
}

/// An f64 leaf of distinct values (no ties in a max-pool window, even after a ±eps step).
fn distinct(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|i| ((i * 37) % n) as f64 * 0.1 - 1.0).collect();
    Tensor::from_vec(v, shape).requires_grad_(true)
}

#[test]
fn gradcheck_and_gradgradcheck_every_pooling() {
    let max = MaxPool2dOpts {
        stride: Some([2, 1]),
        padding: [1, 1],
        dilation: [1, 2],
        ceil_mode: true,
        ..MaxPool2dOpts::new([3, 2])
    };
    let avg = AvgPool2dOpts {
        stride: Some([2, 2]),
        padding: [1, 1],
        ceil_mode: true,
        count_include_pad: false,
        ..AvgPool2dOpts::new([3, 2])
    };
    let avg_div = AvgPool2dOpts { divisor_override: Some(3), ..AvgPool2dOpts::new([2, 2]) };
    let fs: [(&str, Box<dyn Fn(&[Tensor]) -> Tensor>); 5] = [
        ("max", Box::new(move |t: &[Tensor]| F::max_pool2d_opts(&t[0], &max))),
        ("max2", Box::new(|t: &[Tensor]| F::max_pool2d(&t[0], 2))),
        ("avg", Box::new(move |t: &[Tensor]| F::avg_pool2d_opts(&t[0], &avg))),
        ("avg_div", Box::new(move |t: &[Tensor]| F::avg_pool2d_opts(&t[0], &avg_div))),
        ("adaptive", Box::new(|t: &[Tensor]| F::adaptive_avg_pool2d(&t[0], [3, 2]))),
    ];
    for (name, f) in &fs {
        let x = distinct(&[2, 1, 5, 4]);
        gradcheck(f, &[x.clone()], GradcheckOpts::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        gradgradcheck(f, &[x], GradcheckOpts::default()).unwrap_or_else(|e| panic!("{name} (second order): {e}"));
    }
}

#[test]
fn grad_fn_names_and_index_dtype_follow_pytorch() {
    let x = Tensor::randn([1, 2, 4, 4]).requires_grad_(true);
    let (v, i) = F::max_pool2d_with_indices(&x, &MaxPool2dOpts::new([2, 2]));
    assert_eq!(v.grad_fn().unwrap().name(), "MaxPool2DWithIndicesBackward0");
    assert_eq!(i.dtype(), DType::I64);
    assert!(i.grad_fn().is_none());
    assert_eq!(F::max_pool2d(&x, 2).grad_fn().unwrap().name(), "MaxPool2DWithIndicesBackward0");
    assert_eq!(F::avg_pool2d(&x, 2).grad_fn().unwrap().name(), "AvgPool2DBackward0");
    assert_eq!(F::adaptive_avg_pool2d(&x, [1, 1]).grad_fn().unwrap().name(), "AdaptiveAvgPool2DBackward0");
}

#[test]
fn integer_input_is_refused() {
    let x = Tensor::zeros([1, 1, 4, 4]).to_dtype(DType::I64);
    let m = F::try_max_pool2d_opts(&x, &MaxPool2dOpts::new([2, 2])).unwrap_err().to_string();
    assert!(m.starts_with("max_pool2d: not implemented for dtype int64") && m.contains(file!()), "{m}");
    let m = F::try_avg_pool2d_opts(&x, &AvgPool2dOpts::new([2, 2])).unwrap_err().to_string();
    assert!(m.starts_with("avg_pool2d: not implemented for dtype int64"), "{m}");
    let m = F::try_adaptive_avg_pool2d(&x, [2, 2]).unwrap_err().to_string();
    assert!(m.starts_with("adaptive_avg_pool2d: not implemented for dtype int64"), "{m}");
}

#[test]
fn the_panicking_form_reports_the_callers_line() {
    let r = common::catch_quietly(|| F::max_pool2d(&Tensor::zeros([1, 1, 2, 2]), 3));
    let m = common::panic_message(&*r.unwrap_err());
    assert!(m.starts_with("max_pool2d: ") && m.contains("output size is too small"), "{m}");
    assert!(m.contains(&format!("(at {}:", file!())), "{m}");
}
