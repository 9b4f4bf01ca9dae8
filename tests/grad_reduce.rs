//! Backward rules of the reductions (`sum mean prod max min amax amin max_dim min_dim var std
//! logsumexp cumsum`) and of `softmax`/`log_softmax`: gradcheck in f64 for every dims/keepdim
//! form, gradgradcheck for the common ones, node names, ties, zeros in `prod`, values against
//! PyTorch, and what must never record.

use kiln::autograd::{gradcheck, gradgradcheck, GradcheckOpts};
use kiln::{DType, Tensor};

/// A random f64 leaf that requires grad.
fn leaf(shape: &[usize]) -> Tensor {
    Tensor::randn(shape).to_dtype(DType::F64).requires_grad_(true)
}

/// An f64 leaf with these values.
fn leaf_of(values: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(values.to_vec(), shape).requires_grad_(true)
}

/// A non-contiguous f64 leaf of logical shape `[rows, cols]` (the transpose of a contiguous one).
fn transposed_leaf(rows: usize, cols: usize) -> Tensor {
    let x = Tensor::randn([cols, rows]).to_dtype(DType::F64).t();
    assert!(!x.is_contiguous());
    x.requires_grad_(true)
}

/// Checks first derivatives of `f` at `x`, naming the case on failure.
fn check(what: &str, x: &Tensor, f: impl Fn(&Tensor) -> Tensor) {
    if let Err(e) = gradcheck(|xs| f(&xs[0]), std::slice::from_ref(x), GradcheckOpts::default()) {
        panic!("{what}: {e}");
    }
}

/// Checks second derivatives of `f` at `x` (these need the elementwise and view rules, which
/// the rules of this file use).
fn check2(what: &str, x: &Tensor, f: impl Fn(&Tensor) -> Tensor) {
    if let Err(e) = gradgradcheck(|xs| f(&xs[0]), std::slice::from_ref(x), GradcheckOpts::default()) {
        panic!("{what}: {e}");
    }
}

/// The gradient of `y` (computed from the leaf `x`) with respect to `x` for the upstream
/// gradient `g` (ones when `None`).
fn grad_of(x: &Tensor, y: &Tensor, g: Option<&Tensor>) -> Vec<f64> {
    let ones = Tensor::ones_opts(y.shape(), DType::F64, kiln::Device::Cpu);
    x.zero_grad();
    y.backward_with(g.unwrap_or(&ones));
    x.grad().expect("x received a gradient").contiguous().to_vec::<f64>()
}

fn assert_close(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: {got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= 1e-12 + 1e-12 * w.abs(), "{what}: got {got:?}, want {want:?}");
    }
}

#[test]
fn sum_every_form() {
    let x = leaf(&[2, 3, 4]);
    check("sum()", &x, |x| x.sum());
    check("sum(1)", &x, |x| x.sum_dim(1));
    check("sum(-1, keepdim)", &x, |x| x.sum_dim_keepdim(-1));
    check("sum([0, 2])", &x, |x| x.sum_dim([0, 2]));
    check("sum([2, 0], keepdim)", &x, |x| x.sum_dim_keepdim([2, 0]));
    check("sum([])", &x, |x| x.sum_dim(Vec::<i64>::new()));
    check("sum() of 0-dim", &leaf(&[]), |x| x.sum_dim(0));
    check("sum of non-contiguous", &transposed_leaf(3, 4), |x| x.sum_dim(0));
    let y = x.sum_dim([0, 2]);
    assert_eq!(grad_of(&x, &y, Some(&Tensor::new(&[1.0f64, 2.0, 3.0])))[..5], [1.0, 1.0, 1.0, 1.0, 2.0]);
}

#[test]
fn mean_every_form() {
    let x = leaf(&[2, 3, 4]);
    check("mean()", &x, |x| x.mean());
    check("mean(1)", &x, |x| x.mean_dim(1));
    check("mean(-1, keepdim)", &x, |x| x.mean_dim_keepdim(-1));
    check("mean([0, 2])", &x, |x| x.mean_dim([0, 2]));
    check("mean of non-contiguous", &transposed_leaf(3, 4), |x| x.mean_dim_keepdim(1));
    assert_close("mean grad", &grad_of(&x, &x.mean(), None), &[1.0 / 24.0; 24]);
}

#[test]
fn sum_and_mean_second_derivatives() {
    let x = leaf(&[2, 3]);
    check2("sum()", &x, |x| x.sum());
    check2("sum(1)", &x, |x| x.sum_dim(1));
    check2("sum(0, keepdim)", &x, |x| x.sum_dim_keepdim(0));
    check2("mean()", &x, |x| x.mean());
    check2("mean(-1)", &x, |x| x.mean_dim(-1));
}

#[test]
fn prod_every_form() {
    let x = leaf(&[2, 3, 4]);
    check("prod()", &x, |x| x.prod());
    check("prod(1)", &x, |x| x.prod_dim(1));
    check("prod(-1, keepdim)", &x, |x| x.prod_dim_keepdim(-1));
    check("prod([0, 2])", &x, |x| x.prod_dim([0, 2]));
    check("prod of non-contiguous", &transposed_leaf(3, 4), |x| x.prod_dim(0));
    // Exactly at zeros: one zero in a row, two in another, none in the third.
    let z = leaf_of(&[2.0, 0.0, 3.0, 0.0, 0.0, 4.0, 1.5, -2.0, 0.5], &[3, 3]);
    check("prod(1) with zeros", &z, |x| x.prod_dim(1));
    check("prod() with two zeros", &z, |x| x.prod());
    check("prod(0) with zeros", &z, |x| x.prod_dim_keepdim(0));
}

#[test]
fn prod_with_zeros_matches_pytorch() {
    // torch.tensor([2., 0., 3., -1.5], dtype=torch.float64, requires_grad=True).prod().backward()
    let x = leaf_of(&[2.0, 0.0, 3.0, -1.5], &[4]);
    assert_close("one zero", &grad_of(&x, &x.prod(), None), &[0.0, -9.0, 0.0, 0.0]);
    // The same with [2., 0., 3., 0.]: two zeros, all gradients zero.
    let x = leaf_of(&[2.0, 0.0, 3.0, 0.0], &[4]);
    assert_close("two zeros", &grad_of(&x, &x.prod(), None), &[0.0; 4]);
    // x = [[2., 0., 3.], [0., 0., 4.], [1.5, -2., 0.5]]; x.prod(1).backward(torch.ones(3))
    let x = leaf_of(&[2.0, 0.0, 3.0, 0.0, 0.0, 4.0, 1.5, -2.0, 0.5], &[3, 3]);
    let want = [0.0, 6.0, 0.0, 0.0, 0.0, 0.0, -1.0, 0.75, -3.0];
    assert_close("rows", &grad_of(&x, &x.prod_dim(1), None), &want);
}

#[test]
fn prod_second_derivatives_with_and_without_zeros() {
    check2("prod(1)", &leaf(&[2, 3]), |x| x.prod_dim(1));
    let z = leaf_of(&[2.0, 0.0, 3.0, 0.0, 0.0, 4.0, 1.5, -2.0, 0.5, 0.0, 0.0, 0.0], &[4, 3]);
    check2("prod(1) with zeros", &z, |x| x.prod_dim(1));
    check2("prod() with zeros", &z, |x| x.prod());
}

#[test]
fn full_max_min_split_ties_evenly() {
    let x = leaf(&[3, 4]);
    check("max()", &x, |x| x.max());
    check("min()", &x, |x| x.min());
    check("max of non-contiguous", &transposed_leaf(2, 3), |x| x.max());
    // torch.tensor([1., 3., 3., 2.], dtype=torch.float64, requires_grad=True).max().backward()
    let x = leaf_of(&[1.0, 3.0, 3.0, 2.0], &[4]);
    assert_close("max ties", &grad_of(&x, &x.max(), None), &[0.0, 0.5, 0.5, 0.0]);
    // [1., -3., -3., -3.].min()
    let x = leaf_of(&[1.0, -3.0, -3.0, -3.0], &[4]);
    assert_close("min ties", &grad_of(&x, &x.min(), None), &[0.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0]);
    // [1., nan, nan, 2.].max(): the NaNs share it
    let x = leaf_of(&[1.0, f64::NAN, f64::NAN, 2.0], &[4]);
    assert_close("max NaN", &grad_of(&x, &x.max(), None), &[0.0, 0.5, 0.5, 0.0]);
}

#[test]
fn amax_amin_split_ties_evenly() {
    let x = leaf(&[2, 3, 4]);
    check("amax(1)", &x, |x| x.amax(1));
    check("amax(-1, keepdim)", &x, |x| x.amax_keepdim(-1));
    check("amax([0, 2])", &x, |x| x.amax([0, 2]));
    check("amin(0)", &x, |x| x.amin(0));
    check("amin([1, 2], keepdim)", &x, |x| x.amin_keepdim([1, 2]));
    check("amax of non-contiguous", &transposed_leaf(3, 4), |x| x.amax(0));
    // torch.tensor([[1., 3., 3.], [2., 2., 0.]], dtype=torch.float64, requires_grad=True).amax(1)
    let x = leaf_of(&[1.0, 3.0, 3.0, 2.0, 2.0, 0.0], &[2, 3]);
    assert_close("amax ties", &grad_of(&x, &x.amax(1), None), &[0.0, 0.5, 0.5, 0.5, 0.5, 0.0]);
    // [[1., 3., 3.], [2., 3., 0.]].amax((0, 1))
    let x = leaf_of(&[1.0, 3.0, 3.0, 2.0, 3.0, 0.0], &[2, 3]);
    let third = 1.0 / 3.0;
    assert_close("amax over both", &grad_of(&x, &x.amax([0, 1]), None), &[0.0, third, third, 0.0, third, 0.0]);
    // [[1., 3., 3.], [2., 2., 0.]].amin(0, keepdim=True)
    let x = leaf_of(&[1.0, 3.0, 3.0, 1.0, 2.0, 0.0], &[2, 3]);
    assert_close("amin ties", &grad_of(&x, &x.amin_keepdim(0), None), &[0.5, 0.0, 0.0, 0.5, 1.0, 1.0]);
}

#[test]
fn max_dim_min_dim_send_the_gradient_to_the_index() {
    let x = leaf(&[2, 3, 4]);
    for (dim, keepdim) in [(0, false), (1, true), (-1, false), (2, true)] {
        type DimOp = fn(&Tensor, i64) -> (Tensor, Tensor);
        let (max, min): (DimOp, DimOp) = if keepdim {
            (Tensor::max_dim_keepdim, Tensor::min_dim_keepdim)
        } else {
            (Tensor::max_dim, Tensor::min_dim)
        };
        check(&format!("max_dim({dim}, {keepdim})"), &x, |x| max(x, dim).0);
        check(&format!("min_dim({dim}, {keepdim})"), &x, |x| min(x, dim).0);
    }
    check("max_dim of non-contiguous", &transposed_leaf(3, 4), |x| x.max_dim(1).0);
    check("max_dim of 0-dim", &leaf(&[]), |x| x.max_dim(0).0);
    // torch.tensor([[1., 3., 3.], [2., 0., 2.]], dtype=torch.float64, requires_grad=True).max(1)
    // gives indices [1, 0] and the gradient [[0, 1, 0], [1, 0, 0]]: all of it to the index.
    let x = leaf_of(&[1.0, 3.0, 3.0, 2.0, 0.0, 2.0], &[2, 3]);
    let (values, indices) = x.max_dim(1);
    assert_eq!(indices.to_vec::<i64>(), vec![1, 0]);
    assert!(!indices.requires_grad() && indices.grad_fn().is_none());
    assert_close("max_dim ties", &grad_of(&x, &values, None), &[0.0, 1.0, 0.0, 1.0, 0.0, 0.0]);
    let (values, indices) = x.min_dim_keepdim(0);
    let mut want = vec![0.0; 6];
    for (col, &row) in indices.to_vec::<i64>().iter().enumerate() {
        want[row as usize * 3 + col] = 1.0;
    }
    assert_close("min_dim", &grad_of(&x, &values, None), &want);
}

#[test]
fn var_std_every_form() {
    let x = leaf(&[2, 3, 4]);
    check("var(unbiased)", &x, |x| x.var());
    check("var(biased)", &x, |x| x.var_correction([], 0, false));
    check("var(1)", &x, |x| x.var_dim(1));
    check("var([0, 2], c=0, keepdim)", &x, |x| x.var_correction([0, 2], 0, true));
    check("var(-1, c=2)", &x, |x| x.var_correction(-1, 2, false));
    check("std(unbiased)", &x, |x| x.std());
    check("std(1, c=0)", &x, |x| x.std_correction(1, 0, false));
    check("std([0, 2], keepdim)", &x, |x| x.std_dim_keepdim([0, 2]));
    check("var of non-contiguous", &transposed_leaf(3, 4), |x| x.var_dim(0));
    // x = torch.tensor([[0.5, -1.0, 2.0], [0.25, 3.0, -0.75]], dtype=torch.float64, requires_grad=True)
    // x.var(1).backward(torch.tensor([2., -1.], dtype=torch.float64))
    let x = leaf_of(&[0.5, -1.0, 2.0, 0.25, 3.0, -0.75], &[2, 3]);
    let want = [0.0, -3.0, 3.0, 0.583_333_333_333_333_4, -2.166_666_666_666_666_5, 1.583_333_333_333_333_5];
    assert_close("var", &grad_of(&x, &x.var_dim(1), Some(&Tensor::new(&[2.0f64, -1.0]))), &want);
    // torch.tensor([[1., 1., 1.], [1., 2., 4.]]).std(1): a zero std gets a zero gradient
    let x = leaf_of(&[1.0, 1.0, 1.0, 1.0, 2.0, 4.0], &[2, 3]);
    let want = [0.0, 0.0, 0.0, -0.436_435_780_471_984_84, -0.109_108_945_117_996_25, 0.545_544_725_589_980_9];
    assert_close("std", &grad_of(&x, &x.std_dim(1), None), &want);
}

#[test]
fn var_std_second_derivatives() {
    let x = leaf(&[2, 3]);
    check2("var()", &x, |x| x.var());
    check2("var(1, c=0)", &x, |x| x.var_correction(1, 0, false));
    check2("std(0, keepdim)", &x, |x| x.std_dim_keepdim(0));
}

#[test]
fn logsumexp_every_form() {
    let x = leaf(&[2, 3, 4]);
    check("logsumexp(1)", &x, |x| x.logsumexp(1));
    check("logsumexp(-1, keepdim)", &x, |x| x.logsumexp_keepdim(-1));
    check("logsumexp([0, 2])", &x, |x| x.logsumexp([0, 2]));
    check("logsumexp([])", &x, |x| x.logsumexp(Vec::<i64>::new()));
    check("logsumexp of non-contiguous", &transposed_leaf(3, 4), |x| x.logsumexp(0));
    // x.logsumexp(1).backward(torch.tensor([2., -1.], dtype=torch.float64)), x as in var
    let x = leaf_of(&[0.5, -1.0, 2.0, 0.25, 3.0, -0.75], &[2, 3]);
    let want = [
        0.350_580_784_280_073_33,
        0.078_225_146_541_374_9,
        1.571_194_069_178_551_5,
        -0.058_787_180_518_740_77,
        -0.919_586_224_363_980_1,
        -0.021_626_595_117_279_06,
    ];
    assert_close("logsumexp", &grad_of(&x, &x.logsumexp(1), Some(&Tensor::new(&[2.0f64, -1.0]))), &want);
}

#[test]
fn logsumexp_cumsum_second_derivatives() {
    let x = leaf(&[2, 3]);
    check2("logsumexp(1)", &x, |x| x.logsumexp(1));
    check2("logsumexp([0, 1], keepdim)", &x, |x| x.logsumexp_keepdim([0, 1]));
    check2("cumsum(1)", &x, |x| x.cumsum(1));
}

#[test]
fn cumsum_every_dim() {
    let x = leaf(&[2, 3, 4]);
    for dim in [0, 1, 2, -1] {
        check(&format!("cumsum({dim})"), &x, |x| x.cumsum(dim));
    }
    check("cumsum of non-contiguous", &transposed_leaf(3, 4), |x| x.cumsum(0));
    check("cumsum of 0-dim", &leaf(&[]), |x| x.cumsum(0));
    // (x.cumsum(1) * w).sum().backward(), x as in var, w = [[1., -2., .5], [3., .25, -1.]]
    let x = leaf_of(&[0.5, -1.0, 2.0, 0.25, 3.0, -0.75], &[2, 3]);
    let w = Tensor::new(&[[1.0f64, -2.0, 0.5], [3.0, 0.25, -1.0]]);
    assert_close("cumsum", &grad_of(&x, &x.cumsum(1), Some(&w)), &[-0.5, -1.5, 0.5, 2.25, -0.75, -1.0]);
}

#[test]
fn softmax_log_softmax_every_dim() {
    let x = leaf(&[2, 3, 4]);
    for dim in [0, 1, 2, -1] {
        check(&format!("softmax({dim})"), &x, |x| x.softmax(dim));
        check(&format!("log_softmax({dim})"), &x, |x| x.log_softmax(dim));
    }
    check("softmax of non-contiguous", &transposed_leaf(3, 4), |x| x.softmax(1));
    check("log_softmax of non-contiguous", &transposed_leaf(3, 4), |x| x.log_softmax(0));
    // x as in var, w = [[1., -2., .5], [3., .25, -1.]]: (x.softmax(1) * w).sum().backward()
    let x = leaf_of(&[0.5, -1.0, 2.0, 0.25, 3.0, -0.75], &[2, 3]);
    let w = Tensor::new(&[[1.0f64, -2.0, 0.5], [3.0, 0.25, -1.0]]);
    let want = [
        0.089_421_981_047_276_24,
        -0.097_384_978_860_193_77,
        0.007_962_997_812_917_54,
        0.153_750_139_983_800_33,
        -0.123_805_275_091_955_57,
        -0.029_944_864_891_844_72,
    ];
    assert_close("softmax", &grad_of(&x, &x.softmax(1), Some(&w)), &want);
    // (x.log_softmax(0) * w).sum().backward()
    let want = [
        -1.248_706_003_543_192_3,
        -1.968_524_132_566_339_8,
        0.969_956_674_912_996_2,
        1.248_706_003_543_192_5,
        1.968_524_132_566_339_8,
        -0.969_956_674_912_996_2,
    ];
    assert_close("log_softmax", &grad_of(&x, &x.log_softmax(0), Some(&w)), &want);
}

#[test]
fn softmax_log_softmax_second_derivatives() {
    let x = leaf(&[2, 3]);
    for dim in [0, -1] {
        check2(&format!("softmax({dim})"), &x, |x| x.softmax(dim));
        check2(&format!("log_softmax({dim})"), &x, |x| x.log_softmax(dim));
    }
}

#[test]
fn node_names_follow_pytorch() {
    let x = leaf(&[2, 3]);
    let name = |y: Tensor| y.grad_fn().expect("recorded").name().to_string();
    let cases = [
        (x.sum(), "SumBackward0"),
        (x.sum_dim(1), "SumBackward1"),
        (x.sum_dim(Vec::<i64>::new()), "SumBackward1"),
        (x.mean(), "MeanBackward0"),
        (x.mean_dim_keepdim(1), "MeanBackward1"),
        (x.prod(), "ProdBackward0"),
        (x.prod_dim(1), "ProdBackward1"),
        (x.max(), "MaxBackward1"),
        (x.min(), "MinBackward1"),
        (x.max_dim(1).0, "MaxBackward0"),
        (x.min_dim_keepdim(0).0, "MinBackward0"),
        (x.amax(1), "AmaxBackward0"),
        (x.amin(1), "AminBackward0"),
        (x.var(), "VarBackward0"),
        (x.var_correction(1, 0, false), "VarBackward0"),
        (x.std(), "StdBackward0"),
        (x.std_dim_keepdim(1), "StdBackward0"),
        (x.logsumexp(1), "LogsumexpBackward0"),
        (x.cumsum(1), "CumsumBackward0"),
        (x.softmax(1), "SoftmaxBackward0"),
        (x.log_softmax(1), "LogSoftmaxBackward0"),
    ];
    for (y, want) in cases {
        assert!(y.requires_grad(), "{want}");
        assert_eq!(name(y), want);
    }
}

#[test]
fn integer_and_bool_results_never_record() {
    let x = leaf(&[2, 3]);
    for y in [
        x.argmax(),
        x.argmin(),
        x.argmax_dim(1),
        x.argmin_dim_keepdim(0),
        x.all(),
        x.any(),
        x.all_dim(1),
        x.any_dim_keepdim(0),
        x.max_dim(1).1,
        x.min_dim_keepdim(1).1,
    ] {
        assert!(!y.requires_grad() && y.grad_fn().is_none(), "{:?} result recorded", y.dtype());
    }
}

#[test]
fn nothing_records_under_no_grad() {
    let x = leaf(&[2, 3]);
    let _guard = kiln::no_grad_guard();
    let results = [
        x.sum(),
        x.mean_dim(1),
        x.prod(),
        x.max(),
        x.amin(0),
        x.max_dim(1).0,
        x.var(),
        x.std_correction(1, 0, true),
        x.logsumexp(1),
        x.cumsum(0),
        x.softmax(1),
        x.log_softmax(0),
    ];
    for y in results {
        assert!(!y.requires_grad() && y.grad_fn().is_none());
    }
}

#[test]
fn gradients_keep_the_input_dtype() {
    let x = Tensor::new(&[[1.0f32, 2.0], [3.0, 4.0]]).requires_grad_(true);
    x.softmax(1).sum_dim(1).sum().backward();
    let g = x.grad().expect("gradient");
    assert_eq!(g.dtype(), DType::F32);
    // softmax rows sum to one: the gradient of their sum is zero.
    assert!(g.to_vec::<f32>().iter().all(|v| v.abs() < 1e-6), "{:?}", g.to_vec::<f32>());
    let h = Tensor::new(&[1.0f32, 2.0, 3.0]).to_dtype(DType::BF16).requires_grad_(true);
    h.mean().backward();
    let g = h.grad().expect("gradient");
    assert_eq!(g.dtype(), DType::BF16);
    let g = g.to_dtype(DType::F32).to_vec::<f32>();
    assert!(g.iter().all(|v| (v - 1.0 / 3.0).abs() < 4e-3), "{g:?}");
}

#[test]
fn chained_reductions_compose() {
    // Only this file's ops: d/dx of sum(logsumexp(softmax(x), 1) * 1) through three rules.
    let x = leaf(&[3, 4]);
    check("softmax -> logsumexp -> sum", &x, |x| x.softmax(0).logsumexp(1).sum());
    check("cumsum -> amax -> mean", &x, |x| x.cumsum(1).amax(0).mean());
}
