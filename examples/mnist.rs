//! PyTorch's official MNIST example (pytorch/examples, mnist/main.py), line by line in kiln.
//!
//! Run: `cargo run --release --example mnist` (trains on the 8,000/2,000 real MNIST digits
//! embedded in `data/mnist/`; `--data-dir DIR` uses any directory of the official IDX files).
//! Writes `mnist_cnn.safetensors` with `--save-model`, and the loss/accuracy curve as
//! `mnist_curve.svg`.

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use kiln::data::{DataLoader, Dataset};
use kiln::nn::{self, functional as F, Module};
use kiln::optim::lr_scheduler::{LrScheduler, StepLr};
use kiln::optim::{Adadelta, AdadeltaConfig, Optimizer};
use kiln::vision::datasets::{Mnist, Split};
use kiln::vision::transforms::{Compose, Normalize, ToTensor};
use kiln::{Device, Tensor};
use std::path::PathBuf;
use std::time::Instant;

/// PyTorch MNIST Example
#[derive(Parser, Debug)]
struct Args {
    /// input batch size for training
    #[arg(long, default_value_t = 64)]
    batch_size: usize,
    /// input batch size for testing
    #[arg(long, default_value_t = 1000)]
    test_batch_size: usize,
    /// number of epochs to train
    #[arg(long, default_value_t = 14)]
    epochs: usize,
    /// learning rate
    #[arg(long, default_value_t = 1.0)]
    lr: f64,
    /// Learning rate step gamma
    #[arg(long, default_value_t = 0.7)]
    gamma: f64,
    /// disables CUDA training
    #[arg(long)]
    no_cuda: bool,
    /// quickly check a single pass
    #[arg(long)]
    dry_run: bool,
    /// random seed
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// how many batches to wait before logging training status
    #[arg(long, default_value_t = 10)]
    log_interval: usize,
    /// For Saving the current Model
    #[arg(long)]
    save_model: bool,
    /// directory of the MNIST IDX files (default: the embedded 8,000/2,000 subset)
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// background threads that prepare batches
    #[arg(long, default_value_t = 0)]
    num_workers: usize,
    /// run each training step and test batch through kiln::compile (fused, JIT-compiled)
    #[arg(long)]
    compile: bool,
}

#[derive(Module)]
struct Net {
    conv1: nn::Conv2d,
    conv2: nn::Conv2d,
    dropout1: nn::Dropout,
    dropout2: nn::Dropout,
    fc1: nn::Linear,
    fc2: nn::Linear,
}

impl Net {
    fn new() -> Net {
        Net {
            conv1: nn::Conv2d::new(1, 32, 3),
            conv2: nn::Conv2d::new(32, 64, 3),
            dropout1: nn::Dropout::new(0.25),
            dropout2: nn::Dropout::new(0.5),
            fc1: nn::Linear::new(9216, 128),
            fc2: nn::Linear::new(128, 10),
        }
    }
}

impl Module for Net {
    fn forward(&self, x: &Tensor) -> Tensor {
        let x = self.conv1.forward(x).relu();
        let x = self.conv2.forward(&x).relu();
        let x = F::max_pool2d(&x, 2);
        let x = self.dropout1.forward(&x);
        let x = x.flatten(1, -1);
        let x = self.fc1.forward(&x).relu();
        let x = self.dropout2.forward(&x);
        let x = self.fc2.forward(&x);
        x.log_softmax(1)
    }
}

/// One epoch of training; returns the mean training loss.
fn train(args: &Args, model: &mut Net, device: &Device, loader: &DataLoader<Mnist>, optimizer: &mut Adadelta, epoch: usize) -> f64 {
    model.train();
    let bar = ProgressBar::new(loader.len() as u64);
    bar.set_style(ProgressStyle::with_template("epoch {prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed})").expect("template"));
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
        if batch_idx % args.log_interval == 0 {
            bar.set_message(format!("loss {loss:.6}"));
        }
        bar.inc(1);
        if args.dry_run {
            break;
        }
    }
    bar.finish();
    sum / batches.max(1) as f64
}

/// Evaluates on the test set; returns (mean loss, accuracy in %).
fn test(args: &Args, model: &mut Net, device: &Device, loader: &DataLoader<Mnist>) -> (f64, f64) {
    model.eval();
    let (mut test_loss, mut correct, mut seen) = (0.0, 0i64, 0usize);
    let _guard = kiln::no_grad();
    let mut forward = kiln::compile(|data: &Tensor| model.forward(data));
    for (data, target) in loader {
        let (data, target) = (data.to(device), target.to(device));
        let output = if args.compile { forward.call(&data) } else { forward.call_eager(&data) };
        test_loss += F::nll_loss_opts(&output, &target, &F::NllLossOpts { reduction: F::Reduction::Sum, ..Default::default() }).item::<f32>() as f64;
        let pred = output.argmax_dim(1, true);
        correct += pred.eq(&target.view(&[-1, 1])).sum().item::<i64>();
        seen += target.numel();
    }
    test_loss /= seen as f64;
    let accuracy = 100.0 * correct as f64 / seen as f64;
    println!("\nTest set: Average loss: {test_loss:.4}, Accuracy: {correct}/{seen} ({accuracy:.0}%)\n");
    (test_loss, accuracy)
}

fn main() -> kiln::Result<()> {
    let args = Args::parse();
    let device = if args.no_cuda { Device::Cpu } else { Device::cuda_if_available(0) };
    kiln::manual_seed(args.seed);
    // Adadelta's running averages decay into the denormal range late in training, where x86
    // arithmetic is many times slower; flushing them to zero kept epochs 9–14 at the speed of
    // the first ones (PyTorch has the same switch: torch.set_flush_denormal).
    kiln::set_flush_denormal(true);

    let root = args.data_dir.clone().unwrap_or_else(kiln::vision::datasets::mnist::default_root);
    let transform = || Compose::new((ToTensor, Normalize::new(&[0.1307], &[0.3081])));
    let train_set = Mnist::new(&root, Split::Train)?.transform(transform());
    let test_set = Mnist::new(&root, Split::Test)?.transform(transform());
    println!("{} training and {} test images from {}, on {device}", train_set.len(), test_set.len(), root.display());
    let train_loader = DataLoader::new(train_set).batch_size(args.batch_size).shuffle(true).seed(args.seed).num_workers(args.num_workers);
    let test_loader = DataLoader::new(test_set).batch_size(args.test_batch_size).num_workers(args.num_workers);

    let mut model = Net::new();
    model.to(&device);
    println!("{model}");
    let mut optimizer = Adadelta::new(model.parameters(), AdadeltaConfig { lr: args.lr, ..Default::default() });
    let mut scheduler = StepLr::new(&mut optimizer, 1, args.gamma);

    let mut curve = Vec::new();
    for epoch in 1..=args.epochs {
        let start = Instant::now();
        let train_loss = train(&args, &mut model, &device, &train_loader, &mut optimizer, epoch);
        let train_secs = start.elapsed().as_secs_f64();
        let (test_loss, accuracy) = test(&args, &mut model, &device, &test_loader);
        println!("epoch {epoch}: {train_secs:.1} s training, {:.1} s in all", start.elapsed().as_secs_f64());
        curve.push((epoch, train_loss, test_loss, accuracy));
        scheduler.step(&mut optimizer);
        if args.dry_run {
            break;
        }
    }

    if args.save_model {
        kiln::save(&model.state_dict(), "mnist_cnn.safetensors")?;
        println!("saved mnist_cnn.safetensors");
    }
    write_curve("mnist_curve.svg", &curve).map_err(|e| kiln::Error::new("mnist", kiln::ErrorKind::Io, e.to_string()))?;
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
    losses.draw_series(LineSeries::new(curve.iter().map(|c| (c.0 as f64, c.1)), &BLUE))?.label("train").legend(|(x, y)| PathElement::new([(x, y), (x + 15, y)], BLUE));
    losses.draw_series(LineSeries::new(curve.iter().map(|c| (c.0 as f64, c.2)), &RED))?.label("test").legend(|(x, y)| PathElement::new([(x, y), (x + 15, y)], RED));
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
