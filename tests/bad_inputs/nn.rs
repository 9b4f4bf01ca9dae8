//! Bad inputs to `nn`: layers, functional ops and losses.

use super::{either, panics, refused, Cases};
use kiln::nn::{self, functional as F, Module};
use kiln::prelude::*;

pub fn add(c: &mut Cases) {
    let image = || Tensor::ones([2, 3, 8, 8]);
    let conv_w = |cin: usize| Tensor::ones([4, cin, 3, 3]);
    let opts = F::Conv2dOpts::default();
    c.add("conv2d/channels", move || refused(F::try_conv2d(&image(), &conv_w(2), None, &opts)));
    c.add("conv2d/kernel-larger-than-input", move || {
        refused(F::try_conv2d(&Tensor::ones([1, 3, 2, 2]), &conv_w(3), None, &opts))
    });
    c.add("conv2d/stride-zero", move || {
        refused(F::try_conv2d(&image(), &conv_w(3), None, &F::Conv2dOpts { stride: [0, 1], ..opts }))
    });
    c.add("conv2d/dilation-zero", move || {
        refused(F::try_conv2d(&image(), &conv_w(3), None, &F::Conv2dOpts { dilation: [1, 0], ..opts }))
    });
    c.add("conv2d/groups-zero", move || {
        refused(F::try_conv2d(&image(), &conv_w(3), None, &F::Conv2dOpts { groups: 0, ..opts }))
    });
    c.add("conv2d/groups-not-dividing", move || {
        refused(F::try_conv2d(&image(), &conv_w(1), None, &F::Conv2dOpts { groups: 2, ..opts }))
    });
    c.add("conv2d/bias-shape", move || refused(F::try_conv2d(&image(), &conv_w(3), Some(&Tensor::ones([5])), &opts)));
    c.add("conv2d/rank", move || refused(F::try_conv2d(&Tensor::ones([8, 8]), &conv_w(3), None, &opts)));
    c.add("conv2d/huge-padding", move || {
        refused(F::try_conv2d(
            &image(),
            &conv_w(3),
            None,
            &F::Conv2dOpts { padding: F::Padding::Explicit([usize::MAX / 2, 0]), ..opts },
        ))
    });
    c.add("conv2d/dtype-mismatch", move || {
        refused(F::try_conv2d(&image(), &conv_w(3).to_dtype(DType::F64), None, &opts))
    });
    c.add("conv2d/integer", move || {
        refused(F::try_conv2d(&image().to_dtype(DType::I64), &conv_w(3).to_dtype(DType::I64), None, &opts))
    });
    c.add("conv2d-module/channels", move || panics(|| drop(nn::Conv2d::new(5, 2, 3).forward(&image()))));
    c.add("max-pool2d/kernel-larger", move || {
        refused(F::try_max_pool2d_opts(&image(), &F::MaxPool2dOpts::new([9, 9])))
    });
    c.add("max-pool2d/kernel-zero", move || refused(F::try_max_pool2d_opts(&image(), &F::MaxPool2dOpts::new([0, 2]))));
    c.add("max-pool2d/stride-zero", move || {
        refused(F::try_max_pool2d_opts(
            &image(),
            &F::MaxPool2dOpts { stride: Some([0, 1]), ..F::MaxPool2dOpts::new([2, 2]) },
        ))
    });
    c.add("max-pool2d/padding-too-big", move || {
        refused(F::try_max_pool2d_opts(
            &image(),
            &F::MaxPool2dOpts { padding: [2, 2], ..F::MaxPool2dOpts::new([2, 2]) },
        ))
    });
    c.add("max-pool2d/huge-dilation", move || {
        refused(F::try_max_pool2d_opts(
            &image(),
            &F::MaxPool2dOpts { dilation: [usize::MAX, 1], ..F::MaxPool2dOpts::new([2, 2]) },
        ))
    });
    c.add("max-pool2d/rank", move || {
        refused(F::try_max_pool2d_opts(&Tensor::ones([8]), &F::MaxPool2dOpts::new([2, 2])))
    });
    c.add("adaptive-avg-pool2d/zero-output", move || either(F::try_adaptive_avg_pool2d(&image(), [0, 2])));
    c.add("adaptive-avg-pool2d/rank", move || refused(F::try_adaptive_avg_pool2d(&Tensor::ones([3]), [1, 1])));
    c.add("linear/in-features", || refused(F::try_linear(&Tensor::ones([2, 3]), &Tensor::ones([4, 5]), None)));
    c.add("linear/bias", || {
        refused(F::try_linear(&Tensor::ones([2, 3]), &Tensor::ones([4, 3]), Some(&Tensor::ones([3]))))
    });
    c.add("linear-module/in-features", || panics(|| drop(nn::Linear::new(3, 2).forward(&Tensor::ones([2, 4])))));
    c.add("embedding/out-of-range", || {
        refused(F::try_embedding(&Tensor::from_slice(&[0i64, 10]), &Tensor::ones([10, 3]), None))
    });
    c.add("embedding/negative", || {
        refused(F::try_embedding(&Tensor::from_slice(&[-1i64]), &Tensor::ones([10, 3]), None))
    });
    c.add("embedding/float-indices", || refused(F::try_embedding(&Tensor::ones([2]), &Tensor::ones([10, 3]), None)));
    c.add("embedding/padding-out-of-range", || {
        refused(F::try_embedding(&Tensor::from_slice(&[0i64]), &Tensor::ones([10, 3]), Some(10)))
    });
    c.add("embedding-module/out-of-range", || {
        panics(|| drop(nn::Embedding::new(4, 2).forward(&Tensor::from_slice(&[4i64]))))
    });
    c.add("dropout/p-above-one", || refused(F::try_dropout(&Tensor::ones([3]), 1.5, true)));
    c.add("dropout/p-negative", || refused(F::try_dropout(&Tensor::ones([3]), -0.1, true)));
    c.add("dropout/p-nan", || refused(F::try_dropout(&Tensor::ones([3]), f64::NAN, true)));
    c.add("dropout-module/p-above-one", || {
        panics(|| {
            let _ = nn::Dropout::new(2.0);
        })
    });
    c.add("layer-norm/shape", || refused(F::try_layer_norm(&Tensor::ones([2, 3]), &[4], None, None, 1e-5)));
    c.add("layer-norm/weight", || {
        refused(F::try_layer_norm(&Tensor::ones([2, 3]), &[3], Some(&Tensor::ones([2])), None, 1e-5))
    });
    c.add("batch-norm/channels", || {
        refused(F::try_batch_norm(
            &Tensor::ones([4, 3]),
            Some(&Tensor::zeros([2])),
            Some(&Tensor::ones([2])),
            None,
            None,
            true,
            0.1,
            1e-5,
        ))
    });
    c.add("batch-norm/one-value-per-channel", || {
        refused(F::try_batch_norm(&Tensor::ones([1, 3]), None, None, None, None, true, 0.1, 1e-5))
    });
    c.add("batch-norm/eval-without-stats", || {
        refused(F::try_batch_norm(&Tensor::ones([4, 3]), None, None, None, None, false, 0.1, 1e-5))
    });
    c.add("batch-norm/empty-batch-is-fine", || {
        either(F::try_batch_norm(&Tensor::ones([0, 3]), None, None, None, None, true, 0.1, 1e-5))
    });
    c.add("batch-norm-module/channels", || {
        panics(|| drop(nn::BatchNorm2d::new(5).forward(&Tensor::ones([2, 3, 4, 4]))))
    });
    c.add("group-norm/groups", || refused(F::try_group_norm(&Tensor::ones([2, 6, 4]), 4, None, None, 1e-5)));
    c.add("group-norm/zero-groups", || refused(F::try_group_norm(&Tensor::ones([2, 6, 4]), 0, None, None, 1e-5)));
    let logits = || Tensor::ones([4, 3]);
    c.add("cross-entropy/target-out-of-range", move || {
        refused(F::try_cross_entropy(&logits(), &Tensor::from_slice(&[0i64, 1, 2, 3])))
    });
    c.add("cross-entropy/target-negative", move || {
        refused(F::try_cross_entropy(&logits(), &Tensor::from_slice(&[0i64, -5, 2, 1])))
    });
    c.add("cross-entropy/target-length", move || {
        refused(F::try_cross_entropy(&logits(), &Tensor::from_slice(&[0i64, 1])))
    });
    c.add("cross-entropy/float-target-shape", move || refused(F::try_cross_entropy(&logits(), &Tensor::ones([4, 2]))));
    c.add("cross-entropy/integer-logits", move || {
        refused(F::try_cross_entropy(&Tensor::arange(12).reshape([4, 3]), &Tensor::from_slice(&[0i64, 1, 2, 1])))
    });
    c.add("cross-entropy/0-dim-logits", || {
        refused(F::try_cross_entropy(&Tensor::ones(()), &Tensor::from_slice(&[0i64])))
    });
    c.add("cross-entropy/empty-batch-is-fine", || {
        either(F::try_cross_entropy(&Tensor::ones([0, 3]), &Tensor::zeros_opts([0], DType::I64, Device::Cpu)))
    });
    c.add("nll-loss/weight-shape", move || {
        refused(F::try_nll_loss_opts(
            &logits(),
            &Tensor::from_slice(&[0i64, 1, 2, 1]),
            &F::NllLossOpts { weight: Some(Tensor::ones([5])), ..Default::default() },
        ))
    });
    c.add("nll-loss/target-out-of-range", move || {
        refused(F::try_nll_loss_opts(&logits(), &Tensor::from_slice(&[0i64, 1, 2, 9]), &Default::default()))
    });
    c.add("mse-loss/shape", || {
        refused(F::try_mse_loss_opts(&Tensor::ones([3]), &Tensor::ones([2]), F::Reduction::Mean))
    });
    c.add("l1-loss/shape", || {
        refused(F::try_l1_loss_opts(&Tensor::ones([3, 2]), &Tensor::ones([3, 3]), F::Reduction::Sum))
    });
    c.add("bce/out-of-range-input", || {
        refused(F::try_binary_cross_entropy_opts(&Tensor::full([3], 1.5), &Tensor::ones([3]), &Default::default()))
    });
    c.add("bce/shape", || {
        refused(F::try_binary_cross_entropy_opts(&Tensor::full([3], 0.5), &Tensor::ones([4]), &Default::default()))
    });
    c.add("bce-with-logits/shape", || {
        refused(F::try_binary_cross_entropy_with_logits_opts(
            &Tensor::ones([3]),
            &Tensor::ones([2]),
            &Default::default(),
        ))
    });
    c.add("kl-div/shape", || refused(F::try_kl_div(&Tensor::ones([3]), &Tensor::ones([2]), F::Reduction::Mean, false)));
    c.add("smooth-l1/negative-beta", || {
        refused(F::try_smooth_l1_loss(&Tensor::ones([3]), &Tensor::ones([3]), F::Reduction::Mean, -1.0))
    });
    c.add("loss-module/shape", || panics(|| drop(nn::MSELoss::new().forward(&Tensor::ones([3]), &Tensor::ones([4])))));
    c.add("clip-grad-norm/negative-norm-type", || {
        either(nn::utils::try_clip_grad_norm_(&[Tensor::ones([2]).requires_grad_(true)], 1.0, -3.0))
    });
    c.add("clip-grad-norm/nan-max", || {
        either(nn::utils::try_clip_grad_norm_(&[Tensor::ones([2]).requires_grad_(true)], f64::NAN, 2.0))
    });
}
