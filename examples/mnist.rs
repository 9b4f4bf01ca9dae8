//! PyTorch's official MNIST example (pytorch/examples, mnist/main.py), line by line in kiln.
//!
//! Run: `cargo run --release --example mnist` (trains on the 8,000/2,000 real MNIST digits
//! embedded in `data/mnist/`; `--data-dir DIR` uses any directory of the official IDX files).
//! Writes `mnist_cnn.safetensors` with `--save-model`, and the loss/accuracy curve as
//! `mnist_curve.svg`.

mod common;

use clap::Parser;
use common::mnist::{datasets, evaluate, report, Net, TrainArgs};
use indicatif::{ProgressBar, ProgressStyle};
use kiln::data::{DataLoader, Dataset};
use kiln::nn::{functional as F, Module};
use kiln::optim::lr_scheduler::{LrScheduler, StepLr};
use kiln::optim::{Adadelta, AdadeltaConfig, Optimizer};
use kiln::vision::datasets::Mnist;
use kiln::{Device, Tensor};
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
}

/// One epoch of training; returns the mean training loss.
fn train(
    args: &Args,
    model: &mut Net,
    device: &Device,
    loader: &DataLoader<Mnist>,
    optimizer: &mut Adadelta,
    epoch: usize,
) -> f64 {
    model.train();
    let bar = ProgressBar::new(loader.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("epoch {prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed})").expect("template"),
    );
    bar.set_prefix(epoch.to_string());
    let (mut sum, mut batches) = (0.0, 0);
    let mut step = kiln::compile(|(data, target): (&Tensor, &Tensor)| {
        optimizer.zero_grad();
        let output = model.forward(data);
        let loss = F::nll_loss(&output, target);
        loss.backward();
        optimizer.step();
        loss
    });
    for (batch_idx, (data, target)) in loader.into_iter().enumerate() {
        let (data, target) = (data.to(device), target.to(device));
        let loss = if args.compile { step.call((&data, &target)) } else { step.call_eager((&data, &target)) };
        if args.compile && batch_idx == 1 {
            let s = step.stats();
            bar.println(format!(
                "compiled step: {} kernels, {} eager ops, {} graph breaks, plan cache {}, trace {:.1?} run {:.1?}",
                s.kernels_launched,
                s.eager_ops,
                s.graph_breaks,
                if s.plan_cache_hits == s.graphs { "hit" } else { "miss" },
                s.trace_time,
                s.run_time
            ));
        }
        let loss = loss.item::<f32>() as f64;
        sum += loss;
        batches += 1;
        if batch_idx % args.train.log_interval == 0 {
            bar.set_message(format!("loss {loss:.6}"));
        }
        bar.inc(1);
        if args.train.dry_run {
            break;
        }
    }
    bar.finish();
    sum / batches.max(1) as f64
}

/// Evaluates on the test set; returns (mean loss, accuracy in %).
fn test(args: &Args, model: &mut Net, device: &Device, loader: &DataLoader<Mnist>) -> (f64, f64) {
    model.eval();
    let mut forward = kiln::compile(|data: &Tensor| model.forward(data));
    let (loss, correct, seen) =
        evaluate(loader, device, |data| if args.compile { forward.call(data) } else { forward.call_eager(data) });
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
    let mut scheduler = StepLr::new(&mut optimizer, 1, args.train.gamma);

    let mut curve = Vec::new();
    for epoch in 1..=args.train.epochs {
        let start = Instant::now();
        let train_loss = train(&args, &mut model, &device, &train_loader, &mut optimizer, epoch);
        let train_secs = start.elapsed().as_secs_f64();
        let (test_loss, accuracy) = test(&args, &mut model, &device, &test_loader);
        println!("epoch {epoch}: {train_secs:.1} s training, {:.1} s in all", start.elapsed().as_secs_f64());
        curve.push((epoch, train_loss, test_loss, accuracy));
        scheduler.step(&mut optimizer);
        if args.train.dry_run {
            break;
        }
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
