//! Autograd of the indexing family: `index_select`, `gather`, the `scatter` family, `index_fill`,
//! advanced indexing (`index`, `index_put`), `masked_select`, `sort`/`topk`, `cat`/`stack`,
//! `where_cond` and `masked_fill`: gradients against finite differences (`gradcheck`, f64), second
//! derivatives (`gradgradcheck`), node names, in-place forms, repeated indices (values computed
//! with PyTorch), and the ops that never record.

use kiln::autograd::{grad, gradcheck, gradgradcheck, GradOpts, GradcheckOpts};
use kiln::{DType, Tensor};

/// A random f64 leaf that requires grad.
fn leaf(shape: &[usize]) -> Tensor {
    Tensor::randn(shape).to_dtype(DType::F64).requires_grad_(true)
}

/// A random f64 leaf that requires grad, transposed (so not contiguous), of shape `[m, n]`.
fn leaf_t(m: usize, n: usize) -> Tensor {
    let x = Tensor::randn([n, m]).to_dtype(DType::F64).t();
    assert!(!x.is_contiguous());
    x.requires_grad_(true)
}

/// An int64 vector.
fn idx(v: &[i64]) -> Tensor {
    Tensor::from_slice(v)
}

/// An int64 tensor of `shape`.
fn idx2(v: &[i64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape)
}

/// An f64 tensor of `shape`.
fn f64s(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape)
}

/// `arange(n)` as f64 of `shape`, a leaf that requires grad.
fn arange_leaf(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    f64s(&(0..n).map(|v| v as f64).collect::<Vec<_>>(), shape).requires_grad_(true)
}

#[track_caller]
fn check(f: impl Fn(&[Tensor]) -> Tensor, inputs: &[Tensor]) {
    if let Err(e) = gradcheck(f, inputs, GradcheckOpts::default()) {
        panic!("{e}");
    }
}

#[track_caller]
fn check2(f: impl Fn(&[Tensor]) -> Tensor, inputs: &[Tensor]) {
    if let Err(e) = gradgradcheck(f, inputs, GradcheckOpts::default()) {
        panic!("{e}");
    }
}

/// The gradients of `y` with respect to `xs` for the output gradient `v`, as flat vectors.
#[track_caller]
fn grads_of(y: &Tensor, xs: &[&Tensor], v: &Tensor) -> Vec<Vec<f64>> {
    let opts = GradOpts { retain_graph: true, ..Default::default() };
    grad(&[y], xs, Some(&[v]), opts).unwrap().into_iter().map(|g| g.unwrap().contiguous().to_vec::<f64>()).collect()
}

#[track_caller]
fn name(t: &Tensor) -> String {
    t.grad_fn().expect("the result has a grad_fn").name().to_string()
}

#[test]
fn index_select_gradients() {
    let x = leaf(&[4, 3]);
    for dim in [0, 1, -1, -2] {
        check(|xs| xs[0].index_select(dim, &idx(&[2, 0, 2])), &[x.clone()]);
    }
    check(|xs| xs[0].index_select(1, &Tensor::scalar(1i64)), &[x.clone()]);
    check(|xs| xs[0].index_select(0, &idx(&[3, 1])), &[leaf_t(4, 3)]);
    check(|xs| xs[0].index_select(1, &idx(&[0, 0, 3, 1])), &[leaf(&[2, 4, 2])]);
    check(|xs| xs[0].index_select(0, &idx(&[0])), &[leaf(&[])]);
    // a non-contiguous index
    let index = idx2(&[0, 1, 2, 3, 2, 0], &[2, 3]).t().select(0, 2);
    check(|xs| xs[0].index_select(0, &index), &[x.clone()]);
    check2(|xs| xs[0].index_select(1, &idx(&[2, 0, 2])), &[x.clone()]);
    assert_eq!(name(&x.index_select(0, &idx(&[1]))), "IndexSelectBackward0");
}

#[test]
fn index_select_repeated_indices_accumulate() {
    // x = torch.arange(6.).view(3, 2).double().requires_grad_()
    // x.index_select(0, torch.tensor([2, 0, 2])).backward(torch.arange(1., 7.).view(3, 2))
    // x.grad.tolist() == [[3.0, 4.0], [0.0, 0.0], [6.0, 8.0]]
    let x = arange_leaf(&[3, 2]);
    let y = x.index_select(0, &idx(&[2, 0, 2]));
    let g = grads_of(&y, &[&x], &f64s(&[1., 2., 3., 4., 5., 6.], &[3, 2]));
    assert_eq!(g[0], vec![3., 4., 0., 0., 6., 8.]);
}

#[test]
fn gather_gradients() {
    let x = leaf(&[3, 4]);
    let index = idx2(&[0, 2, 2, 1, 1, 0], &[2, 3]);
    for dim in [0, 1, -1] {
        check(|xs| xs[0].gather(dim, &index), &[x.clone()]);
    }
    check(|xs| xs[0].gather(1, &idx2(&[3, 0, 3, 3, 1, 2], &[3, 2])), &[leaf_t(3, 4)]);
    check(|xs| xs[0].gather(2, &idx2(&[1, 0, 1, 1], &[2, 1, 2])), &[leaf(&[2, 3, 2])]);
    check(|xs| xs[0].gather(0, &Tensor::scalar(0i64)), &[leaf(&[])]);
    check2(|xs| xs[0].gather(1, &index), &[x.clone()]);
    assert_eq!(name(&x.gather(0, &index)), "GatherBackward0");
}

#[test]
fn gather_repeated_indices_accumulate() {
    // x = torch.arange(6.).view(2, 3).double().requires_grad_()
    // x.gather(1, torch.tensor([[0, 0, 2], [1, 1, 1]])).backward(torch.arange(1., 7.).view(2, 3))
    // x.grad.tolist() == [[3.0, 0.0, 3.0], [0.0, 15.0, 0.0]]
    let x = arange_leaf(&[2, 3]);
    let y = x.gather(1, &idx2(&[0, 0, 2, 1, 1, 1], &[2, 3]));
    let g = grads_of(&y, &[&x], &f64s(&[1., 2., 3., 4., 5., 6.], &[2, 3]));
    assert_eq!(g[0], vec![3., 0., 3., 0., 15., 0.]);
}

#[test]
fn scatter_gradients() {
    // unique positions along dim 1 in each row (a plain write with repeats has no gradient)
    let index = idx2(&[2, 0, 1, 3, 0, 2], &[2, 3]);
    let (x, src) = (leaf(&[2, 4]), leaf(&[2, 3]));
    check(|xs| xs[0].scatter(1, &index, &xs[1]), &[x.clone(), src.clone()]);
    check(|xs| xs[0].scatter(-1, &index, &xs[1]), &[x.clone(), src.clone()]);
    // a source larger than the index: its other elements get zero gradient
    check(|xs| xs[0].scatter(1, &idx2(&[1, 3], &[2, 1]), &xs[1]), &[x.clone(), leaf(&[3, 3])]);
    // only the source requires grad, and a non-contiguous source
    check(|xs| Tensor::zeros([2, 4]).to_dtype(DType::F64).scatter(1, &index, &xs[0]), &[leaf_t(2, 3)]);
    check(|xs| xs[0].scatter_value(0, &idx2(&[1, 0, 1], &[1, 3]), 2.5), &[leaf(&[2, 3])]);
    check(|xs| xs[0].scatter_value(0, &Tensor::scalar(0i64), 2.5), &[leaf(&[])]);
    check2(|xs| xs[0].scatter(1, &index, &xs[1]), &[x.clone(), src.clone()]);
    assert_eq!(name(&x.scatter(1, &index, &src)), "ScatterBackward0");
    assert_eq!(name(&x.scatter_value(1, &index, 1.0)), "ScatterBackward1");
    assert_eq!(name(&Tensor::zeros([2, 4]).to_dtype(DType::F64).scatter(1, &index, &src)), "ScatterBackward0");

    // x = torch.arange(6.).view(2, 3).double().requires_grad_()
    // s = torch.arange(10., 14.).view(2, 2).double().requires_grad_()
    // x.scatter(1, torch.tensor([[2, 0], [1, 2]]), s).backward(torch.arange(1., 7.).view(2, 3))
    // x.grad.tolist() == [[0.0, 2.0, 0.0], [4.0, 0.0, 0.0]]; s.grad.tolist() == [[3.0, 1.0], [5.0, 6.0]]
    let (x, s) = (arange_leaf(&[2, 3]), arange_leaf(&[2, 2]));
    let y = x.scatter(1, &idx2(&[2, 0, 1, 2], &[2, 2]), &s);
    let g = grads_of(&y, &[&x, &s], &f64s(&[1., 2., 3., 4., 5., 6.], &[2, 3]));
    assert_eq!(g, vec![vec![0., 2., 0., 4., 0., 0.], vec![3., 1., 5., 6.]]);
}

#[test]
fn scatter_add_gradients() {
    // repeated positions are fine: they add up
    let index = idx2(&[2, 2, 1, 3, 0, 3], &[2, 3]);
    let (x, src) = (leaf(&[2, 4]), leaf(&[2, 3]));
    check(|xs| xs[0].scatter_add(1, &index, &xs[1]), &[x.clone(), src.clone()]);
    check(|xs| xs[0].scatter_add(0, &idx2(&[1, 1, 0], &[1, 3]), &xs[1]), &[leaf(&[2, 3]), leaf(&[2, 4])]);
    check2(|xs| xs[0].scatter_add(1, &index, &xs[1]), &[x.clone(), src.clone()]);
    assert_eq!(name(&x.scatter_add(1, &index, &src)), "ScatterAddBackward0");

    // x = torch.arange(6.).view(2, 3).double().requires_grad_()
    // s = torch.arange(10., 14.).view(2, 2).double().requires_grad_()
    // x.scatter_add(1, torch.tensor([[2, 2], [1, 2]]), s).backward(torch.arange(1., 7.).view(2, 3))
    // x.grad.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]; s.grad.tolist() == [[3.0, 3.0], [5.0, 6.0]]
    let (x, s) = (arange_leaf(&[2, 3]), arange_leaf(&[2, 2]));
    let y = x.scatter_add(1, &idx2(&[2, 2, 1, 2], &[2, 2]), &s);
    let g = grads_of(&y, &[&x, &s], &f64s(&[1., 2., 3., 4., 5., 6.], &[2, 3]));
    assert_eq!(g, vec![vec![1., 2., 3., 4., 5., 6.], vec![3., 3., 5., 6.]]);
}

#[test]
fn index_fill_gradients() {
    let x = leaf(&[3, 4]);
    for dim in [0, 1, -1] {
        check(|xs| xs[0].index_fill(dim, &idx(&[0, -1, 0]), 7.0), &[x.clone()]);
    }
    check(|xs| xs[0].index_fill(1, &Tensor::scalar(2i64), 7.0), &[leaf_t(3, 4)]);
    check2(|xs| xs[0].index_fill(0, &idx(&[1]), 7.0), &[x.clone()]);
    assert_eq!(name(&x.index_fill(0, &idx(&[1]), 0.5)), "IndexFillBackward0");
}

#[test]
fn advanced_index_gradients() {
    let x = leaf(&[3, 4]);
    let (i, j) = (idx(&[0, 2, 0, -1]), idx2(&[1, 3], &[2, 1]));
    check(|xs| xs[0].index(&i), &[x.clone()]);
    check(|xs| xs[0].index(&[&i, &idx(&[3, 3, 1, 0])]), &[x.clone()]);
    check(|xs| xs[0].index(&[None, Some(&j)]), &[x.clone()]);
    // separated index dims move to the front
    check(|xs| xs[0].index(&[Some(&idx(&[1, 0])), None, Some(&idx(&[1, 1]))]), &[leaf(&[2, 3, 2])]);
    // a bool mask, an int32 index, a non-contiguous input
    let mask = Tensor::new(&[[true, false, true, true], [false, false, true, false], [true, true, false, false]]);
    check(|xs| xs[0].index(&mask), &[x.clone()]);
    check(|xs| xs[0].index(&[None, Some(&Tensor::new(&[2i32, 0]))]), &[leaf_t(3, 4)]);
    check2(|xs| xs[0].index(&[&i, &idx(&[3, 3, 1, 0])]), &[x.clone()]);
    assert_eq!(name(&x.index(&i)), "IndexBackward0");
}

#[test]
fn advanced_index_repeated_indices_accumulate() {
    // x = torch.arange(12.).view(3, 4).double().requires_grad_()
    // x[torch.tensor([0, 2, 0]), torch.tensor([1, 1, 1])].backward(torch.tensor([1., 2., 3.]).double())
    // x.grad[:, 1].tolist() == [4.0, 0.0, 2.0] (zero elsewhere)
    let x = arange_leaf(&[3, 4]);
    let y = x.index(&[&idx(&[0, 2, 0]), &idx(&[1, 1, 1])]);
    let g = grads_of(&y, &[&x], &f64s(&[1., 2., 3.], &[3]));
    assert_eq!(g[0], vec![0., 4., 0., 0., 0., 0., 0., 0., 0., 2., 0., 0.]);
    // x[:, torch.tensor([3, -1, 0])].backward(torch.arange(9.).view(3, 3).double())
    // x.grad.tolist() == [[2.0, 0.0, 0.0, 1.0], [5.0, 0.0, 0.0, 7.0], [8.0, 0.0, 0.0, 13.0]]
    let x = arange_leaf(&[3, 4]);
    let y = x.index(&[None, Some(&idx(&[3, -1, 0]))]);
    let g = grads_of(&y, &[&x], &f64s(&[0., 1., 2., 3., 4., 5., 6., 7., 8.], &[3, 3]));
    assert_eq!(g[0], vec![2., 0., 0., 1., 5., 0., 0., 7., 8., 0., 0., 13.]);
}

#[test]
fn index_put_gradients() {
    let (x, values) = (leaf(&[3, 4]), leaf(&[3]));
    let (i, j) = (idx(&[2, 0, 1]), idx(&[1, 1, 3]));
    for accumulate in [false, true] {
        check(|xs| xs[0].index_put(&[&i, &j], &xs[1], accumulate), &[x.clone(), values.clone()]);
        // values broadcast to the indexing result: their gradient is summed back
        check(|xs| xs[0].index_put(&[None, Some(&idx(&[0, 3]))], &xs[1], accumulate), &[x.clone(), leaf(&[1, 2])]);
    }
    // repeated positions with accumulate
    check(|xs| xs[0].index_put(&[&idx(&[1, 1, 0])], &xs[1], true), &[x.clone(), leaf(&[4])]);
    // a bool mask, a non-contiguous input
    let mask = Tensor::new(&[[true, false, false, true], [false, false, false, false], [false, true, false, false]]);
    check(|xs| xs[0].index_put(&mask, &xs[1], false), &[leaf_t(3, 4), values.clone()]);
    check2(|xs| xs[0].index_put(&[&i, &j], &xs[1], false), &[x.clone(), values.clone()]);
    assert_eq!(name(&x.index_put(&[&i, &j], &values, true)), "IndexPutBackward0");

    // x = torch.arange(6.).view(2, 3).double().requires_grad_()
    // w = torch.tensor([7., 8., 9.]).double().requires_grad_()
    // x.index_put((torch.tensor([1, 0, 1]), torch.tensor([0, 2, 0])), w, accumulate=acc)
    //     .backward(torch.arange(1., 7.).view(2, 3))
    // acc=False: x.grad == [[1, 2, 0], [0, 5, 6]], w.grad == [4, 3, 4]
    // acc=True:  x.grad == [[1, 2, 3], [4, 5, 6]], w.grad == [4, 3, 4]
    let v = f64s(&[1., 2., 3., 4., 5., 6.], &[2, 3]);
    for (accumulate, want_x) in [(false, vec![1., 2., 0., 0., 5., 6.]), (true, vec![1., 2., 3., 4., 5., 6.])] {
        let (x, w) = (arange_leaf(&[2, 3]), f64s(&[7., 8., 9.], &[3]).requires_grad_(true));
        let y = x.index_put(&[&idx(&[1, 0, 1]), &idx(&[0, 2, 0])], &w, accumulate);
        assert_eq!(grads_of(&y, &[&x, &w], &v), vec![want_x, vec![4., 3., 4.]]);
    }
}

#[test]
fn masked_select_gradients() {
    let mask = Tensor::new(&[[true, false, true], [false, true, true]]);
    check(|xs| xs[0].masked_select(&mask), &[leaf(&[2, 3])]);
    check(|xs| xs[0].masked_select(&mask), &[leaf_t(2, 3)]);
    // the input broadcasts against a larger mask: its gradient is summed back
    check(|xs| xs[0].masked_select(&mask), &[leaf(&[3])]);
    check(|xs| xs[0].masked_select(&mask), &[leaf(&[])]);
    check(|xs| xs[0].masked_select(&Tensor::scalar(true)), &[leaf(&[])]);
    check2(|xs| xs[0].masked_select(&mask), &[leaf(&[2, 3])]);
    assert_eq!(name(&leaf(&[2, 3]).masked_select(&mask)), "MaskedSelectBackward0");

    // x = torch.arange(3.).double().requires_grad_()
    // x.masked_select(torch.tensor([[True, False, True], [True, True, False]]))
    //     .backward(torch.tensor([1., 2., 3., 4.]).double())
    // x.grad.tolist() == [4.0, 4.0, 2.0]
    let x = arange_leaf(&[3]);
    let y = x.masked_select(&Tensor::new(&[[true, false, true], [true, true, false]]));
    assert_eq!(grads_of(&y, &[&x], &f64s(&[1., 2., 3., 4.], &[4]))[0], vec![4., 4., 2.]);
}

#[test]
fn sort_and_topk_gradients() {
    let x = leaf(&[3, 4]);
    for (dim, descending) in [(0, false), (1, true), (-1, false)] {
        check(|xs| xs[0].sort(dim, descending).0, &[x.clone()]);
    }
    check(|xs| xs[0].sort(1, false).0, &[leaf_t(3, 4)]);
    check(|xs| xs[0].sort(0, false).0, &[leaf(&[])]);
    for (k, dim, largest, sorted) in [(2, 1, true, true), (1, 0, false, true), (3, -1, true, false), (0, 1, true, true)]
    {
        check(|xs| xs[0].topk(k, dim, largest, sorted).0, &[x.clone()]);
    }
    check2(|xs| xs[0].sort(1, true).0, &[x.clone()]);
    check2(|xs| xs[0].topk(2, 0, true, true).0, &[x.clone()]);
    let (values, indices) = x.sort(0, false);
    assert_eq!(name(&values), "SortBackward0");
    assert!(!indices.requires_grad());
    let (values, indices) = x.topk(2, 1, true, true);
    assert_eq!(name(&values), "TopkBackward0");
    assert!(!indices.requires_grad());
    assert!(!x.argsort(1, false).requires_grad());

    // x = torch.tensor([[3., 1., 2.], [0., 5., 4.]]).double().requires_grad_()
    // x.sort(1, descending=True)[0].backward(torch.tensor([[10., 20., 30.], [1., 2., 3.]]).double())
    // x.grad.tolist() == [[10.0, 30.0, 20.0], [3.0, 1.0, 2.0]]
    let v = f64s(&[10., 20., 30., 1., 2., 3.], &[2, 3]);
    let x = f64s(&[3., 1., 2., 0., 5., 4.], &[2, 3]).requires_grad_(true);
    assert_eq!(grads_of(&x.sort(1, true).0, &[&x], &v)[0], vec![10., 30., 20., 3., 1., 2.]);
    // x.topk(2, 0, largest=False)[0].backward(same gradient): x.grad == [[1, 20, 30], [10, 2, 3]]
    assert_eq!(grads_of(&x.topk(2, 0, false, true).0, &[&x], &v)[0], vec![1., 20., 30., 10., 2., 3.]);
}

#[test]
fn cat_and_stack_gradients() {
    let (a, b, c) = (leaf(&[2, 3]), leaf(&[1, 3]), leaf(&[2, 3]));
    check(|xs| Tensor::cat(&[&xs[0], &xs[1], &xs[2]], 0), &[a.clone(), b.clone(), c.clone()]);
    check(|xs| Tensor::cat(&[&xs[0], &xs[1]], -1), &[a.clone(), c.clone()]);
    check(|xs| Tensor::cat(&[&xs[0], &xs[1]], 1), &[leaf_t(2, 3), leaf(&[2, 2])]);
    // a 1-D empty input is skipped; an input that doesn't require grad; another dtype
    let empty = Tensor::from_vec(Vec::<f64>::new(), [0]).requires_grad_(true);
    check(|xs| Tensor::cat(&[&xs[0], &xs[1], &xs[2]], 0), &[a.clone(), empty, b.clone()]);
    let f32_const = Tensor::randn([2, 3]);
    check(|xs| Tensor::cat(&[&f32_const, &xs[0]], 1), &[a.clone()]);
    for dim in [0, 1, 2, -1, -3] {
        check(|xs| Tensor::stack(&[&xs[0], &xs[1]], dim), &[a.clone(), c.clone()]);
    }
    check(|xs| Tensor::stack(&[&xs[0], &xs[0]], 0), &[leaf(&[3])]);
    check2(|xs| Tensor::cat(&[&xs[0], &xs[1]], 0), &[a.clone(), b.clone()]);
    check2(|xs| Tensor::stack(&[&xs[0], &xs[1]], 1), &[a.clone(), c.clone()]);
    assert_eq!(name(&Tensor::cat(&[&a, &b], 0)), "CatBackward0");
    assert_eq!(name(&Tensor::stack(&[&a, &c], 0)), "StackBackward0");
    assert_eq!(name(&Tensor::cat(&[&f32_const, &a], 0)), "CatBackward0");
}

#[test]
fn cat_gradients_take_each_inputs_dtype() {
    let a = Tensor::randn([2]).requires_grad_(true);
    let b = leaf(&[3]);
    let y = Tensor::cat(&[&a, &b], 0);
    assert_eq!(y.dtype(), DType::F64);
    y.backward_with(&f64s(&[1., 2., 3., 4., 5.], &[5]));
    let (ga, gb) = (a.grad().unwrap(), b.grad().unwrap());
    assert_eq!(ga.dtype(), DType::F32);
    assert_eq!(ga.to_vec::<f32>(), vec![1., 2.]);
    assert_eq!(gb.to_vec::<f64>(), vec![3., 4., 5.]);
    let s = Tensor::stack(&[&a, &a], 1);
    s.backward_with(&Tensor::ones([2, 2]));
    assert_eq!(a.grad().unwrap().to_vec::<f32>(), vec![3., 4.]);
}

#[test]
fn where_gradients() {
    let cond = Tensor::new(&[[true, false, true, false], [false, false, true, true], [true, true, true, false]]);
    let (x, y) = (leaf(&[3, 4]), leaf(&[3, 4]));
    check(|xs| Tensor::where_cond(&cond, &xs[0], &xs[1]), &[x.clone(), y.clone()]);
    // scalar operands, operands that don't require grad, broadcasting in every operand
    check(|xs| Tensor::where_cond(&cond, &xs[0], 0.5), &[x.clone()]);
    check(|xs| Tensor::where_cond(&cond, -2, &xs[0]), &[y.clone()]);
    let f32_row = Tensor::randn([4]);
    check(|xs| Tensor::where_cond(&cond, &xs[0], &f32_row), &[x.clone()]);
    check(|xs| Tensor::where_cond(&cond, &xs[0], &xs[1]), &[leaf(&[3, 1]), leaf(&[4])]);
    check(|xs| Tensor::where_cond(&cond.narrow(0, 0, 1), &xs[0], &xs[1]), &[leaf_t(3, 4), leaf(&[])]);
    check2(|xs| Tensor::where_cond(&cond, &xs[0], &xs[1]), &[x.clone(), y.clone()]);
    check2(|xs| Tensor::where_cond(&cond, &xs[0], &xs[1]), &[leaf(&[3, 1]), leaf(&[4])]);
    assert_eq!(name(&Tensor::where_cond(&cond, &x, 0.0)), "WhereBackward0");
    // an integer result never records
    assert!(!Tensor::where_cond(&cond, 1i64, 2i64).requires_grad());

    // a = torch.tensor([[1.], [2.]]).double().requires_grad_(); b = torch.tensor([3., 4., 5.]).double().requires_grad_()
    // c = torch.tensor([[True, False, True], [True, True, False]])
    // torch.where(c, a, b).backward(torch.arange(1., 7.).view(2, 3).double())
    // a.grad.tolist() == [[4.0], [9.0]]; b.grad.tolist() == [0.0, 2.0, 6.0]
    let (a, b) = (f64s(&[1., 2.], &[2, 1]).requires_grad_(true), f64s(&[3., 4., 5.], &[3]).requires_grad_(true));
    let c = Tensor::new(&[[true, false, true], [true, true, false]]);
    let g = grads_of(&Tensor::where_cond(&c, &a, &b), &[&a, &b], &f64s(&[1., 2., 3., 4., 5., 6.], &[2, 3]));
    assert_eq!(g, vec![vec![4., 9.], vec![0., 2., 6.]]);
}

#[test]
fn masked_fill_gradients() {
    let mask = Tensor::new(&[[true, false, true], [false, false, true]]);
    check(|xs| xs[0].masked_fill(&mask, 3.0), &[leaf(&[2, 3])]);
    check(|xs| xs[0].masked_fill(&mask, 3.0), &[leaf_t(2, 3)]);
    // the out-of-place form broadcasts against the mask
    check(|xs| xs[0].masked_fill(&mask, -1.0), &[leaf(&[3])]);
    check2(|xs| xs[0].masked_fill(&mask, 3.0), &[leaf(&[2, 3])]);
    let x = leaf(&[2, 3]);
    assert_eq!(name(&x.masked_fill(&mask, 1.0)), "MaskedFillBackward0");
    let g = grads_of(&x.masked_fill(&mask, 1.0), &[&x], &Tensor::ones([2, 3]).to_dtype(DType::F64));
    assert_eq!(g[0], vec![0., 1., 0., 1., 1., 0.]);
}

/// A copy of `x` computed by a recorded op (`x * 1`), so that in-place ops may write to it.
fn non_leaf(x: &Tensor) -> Tensor {
    let y = x * 1.0;
    assert!(!y.is_leaf());
    y
}

/// Asserts that the in-place and out-of-place forms agree in value, `grad_fn` name and
/// gradients with respect to every input.
#[track_caller]
fn same_as_out_of_place(in_place: &Tensor, out_of_place: &Tensor, inputs: &[&Tensor]) {
    assert_eq!(in_place.to_vec::<f64>(), out_of_place.to_vec::<f64>());
    assert_eq!(name(in_place), name(out_of_place));
    let v = Tensor::randn(in_place.shape()).to_dtype(DType::F64);
    assert_eq!(grads_of(in_place, inputs, &v), grads_of(out_of_place, inputs, &v));
}

#[test]
fn in_place_forms_reuse_the_out_of_place_rules() {
    let (x, src) = (leaf(&[2, 4]), leaf(&[2, 3]));
    let index = idx2(&[2, 0, 1, 3, 0, 2], &[2, 3]);

    let y = non_leaf(&x);
    y.scatter_(1, &index, &src);
    same_as_out_of_place(&y, &x.scatter(1, &index, &src), &[&x, &src]);
    let y = non_leaf(&x);
    y.scatter_value_(1, &index, 2.0);
    same_as_out_of_place(&y, &x.scatter_value(1, &index, 2.0), &[&x]);
    let y = non_leaf(&x);
    y.scatter_add_(1, &index, &src);
    same_as_out_of_place(&y, &x.scatter_add(1, &index, &src), &[&x, &src]);
    let y = non_leaf(&x);
    y.index_fill_(1, &idx(&[3, 0]), -1.0);
    same_as_out_of_place(&y, &x.index_fill(1, &idx(&[3, 0]), -1.0), &[&x]);
    let (i, values) = ([Some(&idx(&[1, 0])), Some(&idx(&[2, 2]))], leaf(&[2]));
    for accumulate in [false, true] {
        let y = non_leaf(&x);
        y.index_put_(&i, &values, accumulate);
        same_as_out_of_place(&y, &x.index_put(&i, &values, accumulate), &[&x, &values]);
    }
    let mask = Tensor::new(&[[true, false, false, true], [false, true, false, false]]);
    let y = non_leaf(&x);
    y.masked_fill_(&mask, 4.0);
    same_as_out_of_place(&y, &x.masked_fill(&mask, 4.0), &[&x]);

    // a leaf that doesn't require grad written with a source that does: the write records
    let y = Tensor::zeros([2, 4]).to_dtype(DType::F64);
    y.scatter_(1, &index, &src);
    assert_eq!(name(&y), "ScatterBackward0");

    // the in-place form is differentiable as a whole
    check(
        |xs| {
            let y = non_leaf(&xs[0]);
            y.scatter_add_(1, &index, &xs[1]);
            y.index_fill_(0, &idx(&[1]), 0.0);
            y
        },
        &[x.clone(), src.clone()],
    );
}

#[test]
fn in_place_on_a_leaf_that_requires_grad_is_refused() {
    let x = leaf(&[2, 3]);
    let e = x.try_scatter_(1, &idx2(&[0], &[1, 1]), &leaf(&[1, 1])).unwrap_err().to_string();
    assert!(e.starts_with("scatter_: a leaf tensor that requires grad"), "{e}");
    let e = x.try_index_fill_(0, &idx(&[0]), 1.0).unwrap_err().to_string();
    assert!(e.starts_with("index_fill_: a leaf tensor that requires grad"), "{e}");
    let e = x.try_index_put_(&[&idx(&[0])], &Tensor::scalar_opts(1.0, DType::F64), false).unwrap_err().to_string();
    assert!(e.starts_with("index_put_: a leaf tensor that requires grad"), "{e}");
    let fill = std::panic::AssertUnwindSafe(|| {
        x.masked_fill_(&Tensor::scalar(true), 1.0);
    });
    assert!(std::panic::catch_unwind(fill).is_err());
    // inside no_grad the write happens, untracked
    let _off = kiln::no_grad_guard();
    x.scatter_value_(1, &idx2(&[2], &[1, 1]), 5.0);
    assert_eq!(x.to_vec::<f64>()[2], 5.0);
    assert!(x.is_leaf());
}

#[test]
fn nothing_records_under_no_grad() {
    let (x, src) = (leaf(&[2, 4]), leaf(&[2, 3]));
    let index = idx2(&[2, 0, 1, 3, 0, 2], &[2, 3]);
    let mask = x.gt(0.0);
    let _off = kiln::no_grad_guard();
    let outs = [
        x.index_select(1, &idx(&[0, 0])),
        x.gather(1, &index),
        x.scatter(1, &index, &src),
        x.scatter_value(1, &index, 1.0),
        x.scatter_add(1, &index, &src),
        x.index_fill(0, &idx(&[1]), 1.0),
        x.index(&idx(&[1])),
        x.index_put(&idx(&[1]), &Tensor::scalar_opts(1.0, DType::F64), true),
        x.masked_select(&mask),
        x.sort(1, false).0,
        x.topk(2, 1, true, true).0,
        Tensor::cat(&[&x, &x], 0),
        Tensor::stack(&[&x, &x], 0),
        Tensor::where_cond(&mask, &x, &x),
        x.masked_fill(&mask, 0.0),
    ];
    for (i, y) in outs.iter().enumerate() {
        assert!(!y.requires_grad() && y.grad_fn().is_none(), "output {i} recorded under no_grad");
    }
}

#[test]
fn integer_and_bool_results_never_record() {
    let x = leaf(&[2, 3]);
    let outs = [
        x.nonzero(),
        x.gt(0.0),
        x.eq(&x),
        x.gt(0.0).logical_and(x.lt(1.0)),
        x.gt(0.0).logical_not(),
        x.argsort(1, true),
        x.sort(0, false).1,
        x.topk(1, 1, true, true).1,
        idx(&[0, 2]).one_hot(3),
        Tensor::cat(&[&idx(&[1]), &idx(&[2])], 0),
        idx(&[0, 1]).index_select(0, &idx(&[1])),
    ];
    for (i, y) in outs.iter().enumerate() {
        assert!(!y.dtype().is_float(), "output {i} is {}", y.dtype());
        assert!(!y.requires_grad(), "output {i} requires grad");
    }
}
