//! PyTorch's official MNIST example (pytorch/examples, mnist/main.py), line by line in kiln.
//!
//! Run: `cargo run --release --example mnist` (trains on the 8,000/2,000 real MNIST digits
//! embedded in `data/mnist/`; `--data-dir DIR` uses any directory of the official IDX files).
//! Writes `mnist_cnn.safetensors` with `--save-model`, and the loss/accuracy curve as
//! `mnist_curve.svg`. `--tensorboard DIR` also logs a TensorBoard run there (`tensorboard
//! --logdir DIR`): the training loss every `--log-interval` batches, per epoch the train and
//! test loss, test accuracy, learning rate and a histogram of each parameter, a grid of test
//! digits, the compiled step's graph with `--compile`, and the hyperparameters with the final
//! results.

mod common;

use clap::Parser;
use common::mnist::{datasets, evaluate, report, Net, TrainArgs};
use common::progress;
use kiln::amp::GradScaler;
use kiln::data::{DataLoader, Dataset};
use kiln::nn::{functional as F, Module};
use kiln::optim::lr_scheduler::{LRScheduler, StepLR};
use kiln::optim::{Adadelta, AdadeltaConfig, Optimizer};
use kiln::tensorboard::SummaryWriter;
use kiln::vision::datasets::MNIST;
use kiln::{CompiledStep, DType, Device, Tensor};
use std::path::PathBuf;
use std::time::Instant;

/// PyTorch MNIST Example
#[derive(Parser, Debug)]
struct Args {
    #[command(flatten)]
    train: TrainArgs,
    /// disables CUDA training
    #[arg(long)]
    no_cuda: bool,
    /// For Saving the current Model
    #[arg(long)]
    save_model: bool,
    /// background threads that prepare batches
    #[arg(long, default_value_t = 0)]
    num_workers: usize,
    /// run each training step and test batch through kiln::compile (fused, JIT-compiled)
    #[arg(long)]
    compile: bool,
    /// mixed precision: forward and loss under autocast (bf16 on the CPU; f16 with a
    /// GradScaler on CUDA), as PyTorch's AMP recipe
    #[arg(long)]
    amp: bool,
    /// log a TensorBoard run (losses, accuracy, lr, weight histograms, test digits) in DIR
    #[arg(long, value_name = "DIR")]
    tensorboard: Option<PathBuf>,
}

/// Mixed precision (`--amp`): the autocast region's device type and dtype, and on CUDA the
/// loss scaler that keeps f16 gradients from underflowing.
struct Amp {
    device_type: &'static str,
    dtype: DType,
    scaler: Option<GradScaler>,
}

/// One training step (PyTorch's loop body), compiled once in `main` and called with the model
/// and the optimizer as arguments: the step borrows them only during a call, so `main` can
/// switch the model between train and eval and step the scheduler between calls
/// (docs/compile.md).
fn train_step(
    (model, optimizer, data, target, amp): (&Net, &mut Adadelta, &Tensor, &Tensor, Option<&mut Amp>),
) -> Tensor {
    optimizer.zero_grad();
    let Some(amp) = amp else {
        let output = model.forward(data);
        let loss = F::nll_loss(&output, target);
        loss.backward();
        optimizer.step();
        return loss;
    };
    // The recipe of PyTorch's AMP examples: forward and loss inside the region, backward and
    // the step outside it.
    let loss = kiln::autocast(amp.device_type, amp.dtype, || F::nll_loss(&model.forward(data), target));
    match &mut amp.scaler {
        Some(scaler) => {
            scaler.scale(&loss).backward();
            scaler.step(optimizer);
            scaler.update();
        }
        None => {
            loss.backward();
            optimizer.step();
        }
    }
    loss
}

/// One epoch of training through `step` (compiled, or eager without `--compile`); returns the
/// mean training loss. Logs PyTorch's `Train Epoch:` line every `--log-interval` batches when
/// standard error is not a terminal, and a progress bar when it is; with `tb`, the loss of
/// those batches as `loss/train_batch` at the global batch number.
fn train<S>(
    args: &Args,
    step: &mut CompiledStep<S>,
    model: &mut Net,
    device: &Device,
    loader: &DataLoader<MNIST>,
    optimizer: &mut Adadelta,
    mut amp: Option<&mut Amp>,
    epoch: usize,
    mut tb: Option<&mut SummaryWriter>,
) -> kiln::Result<f64>
where
    S: for<'a> FnMut((&'a Net, &'a mut Adadelta, &'a Tensor, &'a Tensor, Option<&'a mut Amp>)) -> Tensor,
{
    model.train();
    let (bar, plain_log) = progress(loader.len(), &format!("epoch {epoch}"));
    let dataset_len = loader.dataset().len();
    let (mut sum, mut batches) = (0.0, 0);
    for (batch_idx, (data, target)) in loader.into_iter().enumerate() {
        let (data, target) = (data.to(device), target.to(device));
        let args_of_step = (&*model, &mut *optimizer, &data, &target, amp.as_deref_mut());
        let loss = if args.compile { step.call(args_of_step) } else { step.call_eager(args_of_step) };
        if args.compile && (batch_idx == 1 || args.train.dry_run) {
            let s = step.stats();
            let line = format!(
                "compiled step: {} kernels, {} eager ops, {} graph breaks, plan cache {}, trace {:.1?} run {:.1?}",
                s.kernels_launched,
                s.eager_ops,
                s.graph_breaks,
                if s.plan_cache_hits == s.graphs { "hit" } else { "miss" },
                s.trace_time,
                s.run_time
            );
            if plain_log {
                println!("{line}")
            } else {
                bar.println(line)
            }
        }
        let loss = loss.item::<f32>() as f64;
        sum += loss;
        batches += 1;
        if batch_idx % args.train.log_interval == 0 {
            if plain_log {
                println!(
                    "Train Epoch: {epoch} [{}/{dataset_len} ({:.0}%)]\tLoss: {loss:.6}",
                    batch_idx * args.train.batch_size,
                    100.0 * batch_idx as f64 / loader.len() as f64
                );
            }
            bar.set_message(format!("loss {loss:.6}"));
            if let Some(tb) = tb.as_deref_mut() {
                tb.add_scalar("loss/train_batch", loss, ((epoch - 1) * loader.len() + batch_idx) as i64)?;
            }
        }
        bar.inc(1);
        if args.train.dry_run {
            break;
        }
    }
    bar.finish();
    Ok(sum / batches.max(1) as f64)
}

/// Evaluates on the test set (under `amp`'s autocast region when given); returns (mean loss,
/// accuracy in %).
fn test<S>(
    args: &Args,
    forward: &mut CompiledStep<S>,
    model: &mut Net,
    device: &Device,
    loader: &DataLoader<MNIST>,
    amp: Option<&Amp>,
) -> (f64, f64)
where
    S: for<'a> FnMut((&'a Net, &'a Tensor)) -> Tensor,
{
    model.eval();
    let model = &*model;
    let (loss, correct, seen) = evaluate(loader, device, |data| {
        let _region = amp.map(|a| kiln::autocast_guard(a.device_type, a.dtype));
        let output = if args.compile { forward.call((model, data)) } else { forward.call_eager((model, data)) };
        output.to_dtype(DType::F32)
    });
    report(loss, correct, seen)
}

fn main() -> kiln::Result<()> {
    let args = Args::parse();
    let device = if args.no_cuda { Device::Cpu } else { Device::cuda_if_available(0) };
    kiln::manual_seed(args.train.seed);
    // Adadelta's running averages decay into the denormal range late in training, where x86
    // arithmetic is many times slower; flushing them to zero kept epochs 9–14 at the speed of
    // the first ones (PyTorch has the same switch: torch.set_flush_denormal).
    kiln::set_flush_denormal(true);

    let (train_set, test_set, root) = datasets(args.train.data_dir.as_deref())?;
    println!("{} training and {} test images from {}, on {device}", train_set.len(), test_set.len(), root.display());
    let train_loader = DataLoader::new(train_set)
        .batch_size(args.train.batch_size)
        .shuffle(true)
        .seed(args.train.seed)
        .num_workers(args.num_workers);
    let test_loader = DataLoader::new(test_set).batch_size(args.train.test_batch_size).num_workers(args.num_workers);

    let mut model = Net::new();
    model.to(&device);
    println!("{model}");
    let mut optimizer = Adadelta::new(model.parameters(), AdadeltaConfig { lr: args.train.lr, ..Default::default() });
    let mut scheduler = StepLR::new(&mut optimizer, 1, args.train.gamma);

    let mut amp = args.amp.then(|| match device {
        Device::Cpu => Amp { device_type: "cpu", dtype: DType::BF16, scaler: None },
        Device::Cuda(_) => Amp { device_type: "cuda", dtype: DType::F16, scaler: Some(GradScaler::new()) },
    });
    // Compiled once: each call passes the model and optimizer, and the plan cache keeps hitting.
    let mut step = kiln::compile(train_step);
    let mut forward = kiln::compile(|(model, data): (&Net, &Tensor)| model.forward(data));
    let mut tb = match &args.tensorboard {
        Some(dir) => Some(start_tensorboard(dir, &test_loader)?),
        None => None,
    };
    let mut curve = Vec::new();
    for epoch in 1..=args.train.epochs {
        let start = Instant::now();
        let train_loss = train(
            &args,
            &mut step,
            &mut model,
            &device,
            &train_loader,
            &mut optimizer,
            amp.as_mut(),
            epoch,
            tb.as_mut(),
        )?;
        let train_secs = start.elapsed().as_secs_f64();
        let (test_loss, accuracy) = test(&args, &mut forward, &mut model, &device, &test_loader, amp.as_ref());
        println!("epoch {epoch}: {train_secs:.1} s training, {:.1} s in all", start.elapsed().as_secs_f64());
        curve.push((epoch, train_loss, test_loss, accuracy));
        if let Some(tb) = tb.as_mut() {
            log_epoch(tb, epoch, &curve[curve.len() - 1], optimizer.lr(0), &model)?;
            if args.compile && epoch == 1 {
                tb.add_graph(&step)?;
            }
        }
        scheduler.step(&mut optimizer);
        if args.train.dry_run {
            break;
        }
    }
    if let (Some(mut tb), Some(&(_, train_loss, test_loss, accuracy))) = (tb, curve.last()) {
        let hparams = [
            ("lr", args.train.lr.into()),
            ("gamma", args.train.gamma.into()),
            ("batch_size", args.train.batch_size.into()),
            ("compile", args.compile.into()),
        ];
        let metrics =
            [("hparam/train_loss", train_loss), ("hparam/test_loss", test_loss), ("hparam/accuracy", accuracy)];
        tb.add_hparams(&hparams, &metrics, Some("hparams"))?;
        tb.close()?;
        println!("wrote the TensorBoard run {}", tb.get_logdir().display());
    }

    if args.save_model {
        kiln::save(&model.state_dict(), "mnist_cnn.safetensors")?;
        println!("saved mnist_cnn.safetensors");
    }
    write_curve("mnist_curve.svg", &curve)
        .map_err(|e| kiln::Error::new("mnist", kiln::ErrorKind::Io, e.to_string()))?;
    println!("wrote mnist_curve.svg");
    Ok(())
}

/// Opens the TensorBoard run in `dir` and logs a grid of the first 64 test digits (the
/// normalization undone, so the digits show white on black).
fn start_tensorboard(dir: &std::path::Path, test_loader: &DataLoader<MNIST>) -> kiln::Result<SummaryWriter> {
    let mut tb = SummaryWriter::new(dir)?;
    if let Some((images, _)) = test_loader.into_iter().next() {
        let digits = images.narrow(0, 0, images.shape()[0].min(64)) * 0.3081 + 0.1307;
        tb.add_images("test digits", &digits, 0, "NCHW")?;
    }
    Ok(tb)
}

/// Logs one epoch's results (`(epoch, train loss, test loss, accuracy)`), the learning rate it
/// trained with and a histogram of each parameter, at step `epoch`.
fn log_epoch(
    tb: &mut SummaryWriter,
    epoch: usize,
    &(_, train_loss, test_loss, accuracy): &(usize, f64, f64, f64),
    lr: f64,
    model: &Net,
) -> kiln::Result<()> {
    let step = epoch as i64;
    tb.add_scalar("loss/train", train_loss, step)?;
    tb.add_scalar("loss/test", test_loss, step)?;
    tb.add_scalar("accuracy/test", accuracy, step)?;
    tb.add_scalar("lr", lr, step)?;
    for (name, p) in model.named_parameters() {
        tb.add_histogram(&name, &p, step)?;
    }
    tb.flush()
}

/// Plots training loss, test loss and test accuracy per epoch as an SVG.
fn write_curve(path: &str, curve: &[(usize, f64, f64, f64)]) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (800, 400)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(400);
    let epochs = curve.len().max(2) as f64;
    let max_loss = curve.iter().map(|c| c.1.max(c.2)).fold(0.1, f64::max);
    let mut losses = ChartBuilder::on(&left)
        .caption("loss", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(40)
        .build_cartesian_2d(1f64..epochs, 0f64..max_loss * 1.05)?;
    losses.configure_mesh().x_desc("epoch").draw()?;
    losses
        .draw_series(LineSeries::new(curve.iter().map(|c| (c.0 as f64, c.1)), &BLUE))?
        .label("train")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 15, y)], BLUE));
    losses
        .draw_series(LineSeries::new(curve.iter().map(|c| (c.0 as f64, c.2)), &RED))?
        .label("test")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 15, y)], RED));
    losses.configure_series_labels().border_style(BLACK).draw()?;
    let low = curve.iter().map(|c| c.3).fold(100.0, f64::min).min(90.0);
    let mut acc = ChartBuilder::on(&right)
        .caption("test accuracy (%)", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(40)
        .build_cartesian_2d(1f64..epochs, low..100f64)?;
    acc.configure_mesh().x_desc("epoch").draw()?;
    acc.draw_series(LineSeries::new(curve.iter().map(|c| (c.0 as f64, c.3)), &BLUE))?;
    root.present()?;
    Ok(())
}
