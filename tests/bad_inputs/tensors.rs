//! Bad inputs to tensor creation, views, elementwise ops, reductions, indexing, matmul, cat and
//! sort.

use super::{either, panics, refused, Cases};
use kiln::prelude::*;

/// Shape pairs that cannot broadcast.
const MISMATCHED: [(&[usize], &[usize]); 4] = [(&[2, 3], &[4]), (&[2, 3], &[3, 2]), (&[5], &[2]), (&[2, 0], &[3])];

/// Shapes whose element count or byte size no tensor can have.
const HUGE: [&[usize]; 6] =
    [&[usize::MAX, 2], &[(1 << 63) + 1, 2], &[1 << 62, 4], &[1 << 40, 1 << 40], &[1 << 32, 1 << 32, 2], &[usize::MAX]];

pub fn add(c: &mut Cases) {
    binary(c);
    creation(c);
    views(c);
    reductions(c);
    indexing(c);
    products_and_joins(c);
    in_place(c);
}

fn binary(c: &mut Cases) {
    macro_rules! ops {
        ($($name:ident),*) => {$(
            for (i, (a, b)) in MISMATCHED.iter().enumerate() {
                c.add(format!("binary/{}/mismatched-{i}", stringify!($name)), move || refused(Tensor::zeros(a).$name(&Tensor::ones(b))));
            }
        )*};
    }
    ops!(
        try_add,
        try_sub,
        try_mul,
        try_div,
        try_remainder,
        try_pow,
        try_maximum,
        try_minimum,
        try_atan2,
        try_eq,
        try_lt
    );
    c.add("binary/panicking-add", || panics(|| drop(Tensor::zeros([2, 3]) + Tensor::zeros([4]))));
    c.add("binary/panicking-mul-ref", || panics(|| drop(&Tensor::zeros([3]) * &Tensor::zeros([4]))));
    c.add("bitwise/float", || refused(Tensor::ones([3]).try_bitwise_and(Tensor::ones([3]))));
    c.add("bitwise/float-scalar", || refused(Tensor::ones([3]).try_bitwise_and(1)));
    c.add("where/cond-not-bool", || refused(Tensor::try_where(&Tensor::ones([3]), 1.0, 2.0)));
    c.add("where/mismatched", || refused(Tensor::try_where(&Tensor::ones([3]).gt(0.0), Tensor::ones([4]), 0.0)));
    c.add("clamp/min-above-max-int", || either(Tensor::arange(5).try_clamp(3, 1)));
    c.add("clamp/bool-with-integer-bounds-is-an-i64-clamp", || either(Tensor::ones([2]).gt(0.0).try_clamp(0, 1)));
    c.add("eq/bool-int-mismatched", || refused(Tensor::ones([2]).gt(0.0).try_eq(Tensor::arange(3))));
}

fn creation(c: &mut Cases) {
    for (i, shape) in HUGE.iter().enumerate() {
        c.add(format!("create/zeros-huge-{i}"), move || refused(Tensor::try_zeros(shape)));
        c.add(format!("create/full-huge-{i}"), move || refused(Tensor::try_full(shape, 1.5)));
        c.add(format!("create/empty-huge-{i}"), move || refused(Tensor::try_empty(shape)));
        c.add(format!("create/randn-huge-{i}"), move || {
            refused(Tensor::try_randn_opts(shape, DType::F32, Device::Cpu))
        });
    }
    // Sizes the system refuses: 2^50 bytes in every dtype width.
    for dtype in [DType::F32, DType::F64, DType::F16, DType::U8, DType::Bool, DType::I64] {
        let n = (1usize << 50) / dtype.size_in_bytes();
        c.add(format!("create/refused-allocation-{dtype}"), move || {
            refused(Tensor::try_zeros_opts([n], dtype, Device::Cpu))
        });
    }
    c.add("create/panicking-zeros-huge", || panics(|| drop(Tensor::zeros([usize::MAX, 3]))));
    c.add("create/panicking-refused-allocation", || panics(|| drop(Tensor::ones([1i64 << 48]))));
    c.add("create/zeros-negative-size", || refused(Tensor::try_zeros([-1, 3])));
    c.add("create/randn-negative-size", || refused(Tensor::try_randn_opts((2, -4), DType::F32, Device::Cpu)));
    c.add("create/repeat-negative-size", || refused(Tensor::ones([2]).try_repeat([-2])));
    c.add("create/panicking-layer-norm-negative-size", || panics(|| drop(kiln::nn::LayerNorm::new(-3))));
    c.add("create/from-vec-too-short", || refused(Tensor::try_from_vec(vec![1.0f32; 5], [2, 3])));
    c.add("create/from-vec-too-long", || refused(Tensor::try_from_vec(vec![1i64; 7], [2, 3])));
    c.add("create/from-vec-overflowing-shape", || refused(Tensor::try_from_vec(vec![1u8; 2], [(1usize << 63) + 1, 2])));
    c.add("create/ragged", || refused(Tensor::try_new(&vec![vec![1.0f32, 2.0], vec![3.0]])));
    c.add("create/arange-zero-step", || refused(Tensor::try_arange_step(0, 10, 0)));
    c.add("create/arange-wrong-direction", || refused(Tensor::try_arange_step(0, 10, -1)));
    c.add("create/arange-nan", || refused(Tensor::try_arange_step(0.0, f64::NAN, 1.0)));
    c.add("create/arange-inf", || refused(Tensor::try_arange_step(0.0, f64::INFINITY, 1.0)));
    c.add("create/arange-full-i64-range", || refused(Tensor::try_arange_step(i64::MIN, i64::MAX, 1)));
    c.add("create/linspace-huge", || refused(Tensor::try_linspace(0.0, 1.0, usize::MAX)));
    c.add("create/eye-huge", || refused(Tensor::try_eye_rect(1 << 40, 1 << 40)));
    c.add("create/randint-empty-range", || refused(Tensor::try_randint_opts(5, 5, [3], DType::I64, Device::Cpu)));
    c.add("create/randint-reversed", || refused(Tensor::try_randint_opts(5, 1, [3], DType::I64, Device::Cpu)));
    c.add("create/randint-u8-out-of-range", || refused(Tensor::try_randint_opts(0, 1000, [3], DType::U8, Device::Cpu)));
    c.add("create/full-u8-overflow", || refused(Tensor::try_full_opts([2], 300, DType::U8, Device::Cpu)));
    c.add("create/full-i32-overflow", || refused(Tensor::try_full_opts([2], 1i64 << 40, DType::I32, Device::Cpu)));
    c.add("create/rand-int-dtype", || refused(Tensor::try_rand_opts([2], DType::I64, Device::Cpu)));
    c.add("create/cuda-without-gpu", || either(Tensor::try_zeros_opts([2], DType::F32, Device::Cuda(0))));
    c.add("create/cuda-ordinal-99", || refused(Tensor::try_zeros_opts([2], DType::F32, Device::Cuda(99))));
    c.add("create/to-cuda-without-gpu", || either(Tensor::ones([2]).try_to(&Device::Cuda(7))));
    c.add("create/empty-shapes-are-fine", || either(Tensor::try_zeros([0, 1i64 << 62]).map(|t| t.sum())));
}

fn views(c: &mut Cases) {
    let t = || Tensor::arange(24).reshape([2, 3, 4]);
    c.add("view/wrong-count", move || refused(t().try_view([5, 5])));
    c.add("view/two-inferred", move || refused(t().try_view([-1, -1])));
    c.add("view/negative", move || refused(t().try_view([-2, 12])));
    c.add("view/non-contiguous", move || refused(t().transpose(0, 2).try_view([24])));
    c.add("view/overflowing", move || refused(Tensor::zeros([0]).try_view([i64::MAX, 4])));
    c.add("reshape/wrong-count", move || refused(t().try_reshape([7])));
    c.add("reshape/inferred-does-not-divide", move || refused(t().try_reshape([5, -1])));
    c.add("reshape/zero-and-inferred", move || refused(Tensor::zeros([0, 4]).try_reshape([0, -1])));
    c.add("expand/incompatible", move || refused(t().try_expand([2, 5, 4])));
    c.add("expand/fewer-dims", move || refused(t().try_expand([3, 4])));
    c.add("expand/huge", move || refused(Tensor::ones([1, 1]).try_expand([i64::MAX, i64::MAX])));
    c.add("expand/count-past-limit", move || refused(Tensor::ones([1, 1, 1]).try_expand([1 << 30, 1 << 30, 1 << 30])));
    c.add("broadcast-to/incompatible", move || refused(t().try_broadcast_to([4, 4])));
    c.add("narrow/past-end", move || refused(t().try_narrow(1, 2, 5)));
    c.add("narrow/bad-dim", move || refused(t().try_narrow(3, 0, 1)));
    c.add("narrow/negative-start", move || refused(t().try_narrow(0, -5, 1)));
    c.add("select/index-out-of-range", move || refused(t().try_select(0, 2)));
    c.add("select/negative-out-of-range", move || refused(t().try_select(2, -5)));
    c.add("select/dim-out-of-range", move || refused(t().try_select(-4, 0)));
    c.add("permute/repeated", move || refused(t().try_permute(&[0, 0, 1])));
    c.add("permute/too-few", move || refused(t().try_permute(&[0, 1])));
    c.add("permute/out-of-range", move || refused(t().try_permute(&[0, 1, 3])));
    c.add("transpose/bad-dim", move || panics(|| drop(t().transpose(0, 3))));
    c.add("unsqueeze/bad-dim", move || panics(|| drop(t().unsqueeze(5))));
    c.add("squeeze-dim/bad-dim", move || panics(|| drop(t().squeeze_dim(-4))));
    c.add("split/zero-size", move || panics(|| drop(t().split(0, 0))));
    c.add("chunk/zero", move || panics(|| drop(t().chunk(0, 1))));
    c.add("flatten/bad-dims", move || panics(|| drop(t().flatten(2, 1))));
    c.add("index/too-many", move || refused(t().try_i((0, 0, 0, 0))));
    c.add("index/out-of-range", move || refused(t().try_i((5, ..))));
    c.add("size/bad-dim", move || {
        panics(|| {
            let _ = t().size(3);
        })
    });
}

fn reductions(c: &mut Cases) {
    let t = || Tensor::ones([2, 3]);
    c.add("sum-dim/out-of-range", move || refused(t().try_sum_dim(2)));
    c.add("sum-dim/negative-out-of-range", move || refused(t().try_sum_dim(-3)));
    c.add("sum-dim/repeated", move || refused(t().try_sum_dim(vec![0, 0])));
    c.add("mean/integer", || refused(Tensor::arange(4).try_mean()));
    c.add("mean-dim/out-of-range", move || refused(t().try_mean_dim_keepdim(5)));
    c.add("prod-dim/out-of-range", move || refused(t().try_prod_dim(9)));
    c.add("var-dim/out-of-range", move || refused(t().try_var_dim(4)));
    c.add("std/integer", || refused(Tensor::arange(4).try_std()));
    c.add("amax/empty-dim", || refused(Tensor::zeros([3, 0]).try_amax(1)));
    c.add("amax/out-of-range", move || refused(t().try_amax(3)));
    c.add("max/empty", || refused(Tensor::zeros([0]).try_max()));
    c.add("min/empty", || refused(Tensor::zeros([2, 0]).try_min()));
    c.add("max-dim/empty-dim", || refused(Tensor::zeros([2, 0]).try_max_dim(1)));
    c.add("argmax/empty", || refused(Tensor::zeros([0]).try_argmax()));
    c.add("argmax-dim/out-of-range", move || refused(t().try_argmax_dim(2)));
    c.add("cumsum/out-of-range", move || refused(t().try_cumsum(2)));
    c.add("logsumexp/out-of-range", move || refused(t().try_logsumexp(7)));
    c.add("softmax/integer", || refused(Tensor::arange(3).try_softmax(0)));
    c.add("softmax/out-of-range", move || refused(t().try_softmax(2)));
    c.add("log-softmax/out-of-range", move || refused(t().try_log_softmax(-3)));
    c.add("softmax/empty-is-fine", || either(Tensor::zeros([3, 0]).try_softmax(1)));
    c.add("sum/empty-is-fine", || either(Tensor::zeros([0, 5]).try_sum_dim(0)));
    c.add("all-dim/out-of-range", move || refused(t().gt(0.0).try_all_dim(2)));
}

fn indexing(c: &mut Cases) {
    let t = || Tensor::arange(12).reshape([3, 4]).to_dtype(DType::F32);
    let idx = |v: &[i64]| Tensor::from_slice(v);
    c.add("index-select/out-of-range", move || refused(t().try_index_select(0, &idx(&[0, 3]))));
    c.add("index-select/negative", move || refused(t().try_index_select(0, &idx(&[-1]))));
    c.add("index-select/huge", move || refused(t().try_index_select(1, &idx(&[i64::MAX]))));
    c.add("index-select/min", move || refused(t().try_index_select(1, &idx(&[i64::MIN]))));
    c.add("index-select/float-index", move || refused(t().try_index_select(0, &Tensor::zeros([1]))));
    c.add("index-select/2d-index", move || {
        refused(t().try_index_select(0, &Tensor::zeros([1, 1]).to_dtype(DType::I64)))
    });
    c.add("index-select/bad-dim", move || refused(t().try_index_select(2, &idx(&[0]))));
    c.add("gather/out-of-range", move || {
        refused(t().try_gather(1, &Tensor::full_opts([3, 1], 4, DType::I64, Device::Cpu)))
    });
    c.add("gather/negative", move || {
        refused(t().try_gather(0, &Tensor::full_opts([1, 4], -1, DType::I64, Device::Cpu)))
    });
    c.add("gather/rank-mismatch", move || refused(t().try_gather(0, &idx(&[0]))));
    c.add("gather/too-big-index-shape", move || {
        refused(t().try_gather(1, &Tensor::zeros_opts([4, 4], DType::I64, Device::Cpu)))
    });
    c.add("scatter/out-of-range", move || {
        refused(t().try_scatter(1, &Tensor::full_opts([3, 1], 9, DType::I64, Device::Cpu), &Tensor::ones([3, 1])))
    });
    c.add("scatter-add/out-of-range", move || {
        refused(t().try_scatter_add(0, &Tensor::full_opts([1, 4], 3, DType::I64, Device::Cpu), &Tensor::ones([1, 4])))
    });
    c.add("scatter-value/dtype-overflow", || {
        refused(Tensor::zeros_opts([3], DType::U8, Device::Cpu).try_scatter_value(0, &Tensor::from_slice(&[0i64]), 999))
    });
    c.add("index-fill/out-of-range", move || refused(t().try_index_fill(0, &idx(&[7]), 1.0)));
    c.add("index-put/out-of-range", move || {
        refused(t().try_index_put(&[Some(&idx(&[5]))][..], &Tensor::ones([4]), false))
    });
    c.add("index-put/shape", move || refused(t().try_index_put(&[Some(&idx(&[0, 1]))][..], &Tensor::ones([3]), false)));
    c.add("masked-fill/mask-shape", move || panics(|| drop(t().masked_fill(&Tensor::ones([5]).gt(0.0), 0.0))));
    c.add("masked-fill/mask-not-bool", move || panics(|| drop(t().masked_fill(&Tensor::ones([3, 4]), 0.0))));
    c.add("masked-select/mask-shape", move || refused(t().try_masked_select(&Tensor::ones([2]).gt(0.0))));
    c.add("one-hot/out-of-range", || refused(Tensor::from_slice(&[0i64, 5]).try_one_hot(3)));
    c.add("one-hot/negative", || refused(Tensor::from_slice(&[-1i64]).try_one_hot(3)));
    c.add("one-hot/huge-classes", || refused(Tensor::from_slice(&[0i64, 1]).try_one_hot(i64::MAX)));
    c.add("one-hot/float", || refused(Tensor::ones([2]).try_one_hot(3)));
    c.add("advanced-index/out-of-range", move || refused(t().try_index(&[Some(&idx(&[0, 8]))][..])));
    c.add("item/many-elements", move || refused(t().try_item::<f32>()));
    c.add("as-slice/wrong-type", move || refused(t().try_as_slice::<i64>().map(|s| s.len())));
    c.add("as-slice/non-contiguous", move || refused(t().t().try_as_slice::<f32>().map(|s| s.len())));
}

fn products_and_joins(c: &mut Cases) {
    c.add("matmul/inner-mismatch", || refused(Tensor::ones([2, 3]).try_matmul(&Tensor::ones([4, 2]))));
    c.add("matmul/0-dim", || refused(Tensor::ones(()).try_matmul(&Tensor::ones([2]))));
    c.add("matmul/batch-mismatch", || refused(Tensor::ones([2, 2, 3]).try_matmul(&Tensor::ones([3, 3, 2]))));
    c.add("matmul/dtype-mismatch", || {
        refused(Tensor::ones([2, 2]).try_matmul(&Tensor::ones_opts([2, 2], DType::F64, Device::Cpu)))
    });
    c.add("matmul/bool", || refused(Tensor::ones([2, 2]).gt(0.0).try_matmul(&Tensor::ones([2, 2]).gt(0.0))));
    c.add("mm/not-2d", || refused(Tensor::ones([2, 2, 2]).try_mm(&Tensor::ones([2, 2]))));
    c.add("bmm/not-3d", || refused(Tensor::ones([2, 2]).try_bmm(&Tensor::ones([2, 2]))));
    c.add("mv/mismatch", || refused(Tensor::ones([2, 3]).try_mv(&Tensor::ones([2]))));
    c.add("dot/mismatch", || refused(Tensor::ones([3]).try_dot(&Tensor::ones([4]))));
    c.add("outer/not-1d", || refused(Tensor::ones([3, 1]).try_outer(&Tensor::ones([4]))));
    c.add("cat/empty-list", || refused(Tensor::try_cat(&[] as &[&Tensor], 0)));
    c.add("cat/mismatched", || refused(Tensor::try_cat(&[&Tensor::ones([2, 3]), &Tensor::ones([2, 4])], 0)));
    c.add("cat/rank-mismatch", || refused(Tensor::try_cat(&[&Tensor::ones([2, 3]), &Tensor::ones([3])], 0)));
    c.add("cat/bad-dim", || refused(Tensor::try_cat(&[&Tensor::ones([2]), &Tensor::ones([2])], 1)));
    c.add("stack/mismatched", || refused(Tensor::try_stack(&[&Tensor::ones([2]), &Tensor::ones([3])], 0)));
    c.add("stack/bad-dim", || refused(Tensor::try_stack(&[&Tensor::ones([2]), &Tensor::ones([2])], 3)));
    c.add("sort/bad-dim", || refused(Tensor::ones([3]).try_sort(1, false)));
    c.add("topk/k-too-large", || refused(Tensor::ones([3]).try_topk(4, 0, true, true)));
    c.add("topk/bad-dim", || refused(Tensor::ones([3]).try_topk(1, 2, true, true)));
    c.add("argsort/bad-dim", || refused(Tensor::ones([3, 2]).try_argsort(-3, false)));
}

fn in_place(c: &mut Cases) {
    c.add("copy/shape", || refused(Tensor::zeros([3]).try_copy_(&Tensor::ones([4])).map(drop)));
    c.add("copy/into-expanded", || refused(Tensor::zeros([1]).expand([3]).try_copy_(&Tensor::ones([3])).map(drop)));
    c.add("fill/u8-overflow", || refused(Tensor::zeros_opts([3], DType::U8, Device::Cpu).try_fill_(256).map(drop)));
    c.add("fill/bool-from-float", || {
        either(Tensor::zeros_opts([3], DType::Bool, Device::Cpu).try_fill_(0.5).map(drop))
    });
    c.add("add-in-place/grows", || panics(|| drop(Tensor::zeros([3]).add_(Tensor::ones([2, 3])).clone())));
    c.add("mul-in-place/float-into-int", || panics(|| drop(Tensor::arange(3).mul_(0.5).clone())));
    c.add("mul-in-place/expanded", || panics(|| drop(Tensor::zeros([1, 3]).expand([4, 3]).mul_(2.0).clone())));
    c.add("clamp-in-place/int-float-bounds", || refused(Tensor::arange(3).try_clamp_(0.5, 1.5).map(drop)));
    c.add("index-fill-in-place/out-of-range", || {
        refused(Tensor::zeros([3]).try_index_fill_(0, &Tensor::from_slice(&[3i64]), 1.0).map(drop))
    });
    c.add("uniform/integer", || refused(Tensor::arange(3).try_uniform_(0.0, 1.0).map(drop)));
    c.add("normal/integer", || refused(Tensor::arange(3).try_normal_(0.0, 1.0).map(drop)));
    c.add("bernoulli/probability-above-one", || refused(Tensor::full([3], 1.5).try_bernoulli()));
    c.add("bernoulli/nan-probability", || refused(Tensor::full([3], f32::NAN).try_bernoulli()));
    c.add("requires-grad/integer", || refused(Tensor::arange(3).try_requires_grad_(true).map(drop)));
    c.add("to-dtype/huge-view", || refused(Tensor::ones([1]).expand([1i64 << 48]).try_to_dtype(DType::F64)));
    c.add("contiguous/huge-view", || panics(|| drop(Tensor::ones([1]).expand([1i64 << 48]).contiguous())));
}
