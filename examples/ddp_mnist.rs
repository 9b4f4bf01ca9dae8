//! The MNIST example (`examples/mnist.rs`: same network, data and optimizer) trained
//! data-parallel with `DistributedDataParallel` over MPI: every process trains on its shard of
//! each epoch (`DistributedSampler`), gradients are averaged across processes during backward.
//!
//! Run on CPU with two processes (see docs/distributed.md):
//!
//!     cargo build --release --features mpi --example ddp_mnist
//!     mpirun -np 2 target/release/examples/ddp_mnist
//!
//! `--compile` runs each step through `kiln::compile`. `--batch-size` is per process (the global batch is `world size × batch size`). Rank 0 prints
//! the progress and evaluates on the test set after each epoch.

mod common;

use clap::Parser;
use common::mnist::{datasets, evaluate, report, Net, TrainArgs};
use kiln::data::{DataLoader, Dataset, DistributedSampler};
use kiln::distributed::{self as dist, Backend, InitOptions, ReduceOp};
use kiln::nn::parallel::{DdpOptions, DistributedDataParallel};
use kiln::nn::{functional as F, Module};
use kiln::optim::lr_scheduler::{LRScheduler, StepLR};
use kiln::optim::{Adadelta, AdadeltaConfig, Optimizer};
use kiln::{Device, Tensor};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// PyTorch MNIST example, data-parallel
#[derive(Parser, Debug)]
struct Args {
    #[command(flatten)]
    train: TrainArgs,
    /// seconds a collective may wait for the other processes
    #[arg(long, default_value_t = 300)]
    timeout: u64,
    /// run each training step through kiln::compile (the all-reduce runs right after backward,
    /// at one graph break)
    #[arg(long)]
    compile: bool,
}

fn main() -> kiln::Result<()> {
    let args = Args::parse();
    dist::init_process_group(Backend::Mpi, InitOptions::with_timeout(Duration::from_secs(args.timeout)))?;
    let (rank, world_size) = (dist::rank()?, dist::world_size()?);
    share_cores();
    kiln::manual_seed(args.train.seed);
    kiln::set_flush_denormal(true);

    let (train_set, test_set, root) = datasets(args.train.data_dir.as_deref())?;
    if rank == 0 {
        println!(
            "{world_size} processes, {} threads each; {} training and {} test images from {}",
            kiln::get_num_threads(),
            train_set.len(),
            test_set.len(),
            root.display()
        );
    }
    let sampler = Arc::new(DistributedSampler::for_process_group(train_set.len())?.seed(args.train.seed));
    let train_loader =
        DataLoader::new(train_set).batch_size(args.train.batch_size).sampler(sampler.clone()).seed(args.train.seed);
    let test_loader = DataLoader::new(test_set).batch_size(args.train.test_batch_size);

    let model = DistributedDataParallel::new(Net::new(), DdpOptions::default())?;
    let mut optimizer = Adadelta::new(model.parameters(), AdadeltaConfig { lr: args.train.lr, ..Default::default() });
    let mut scheduler = StepLR::new(&mut optimizer, 1, args.train.gamma);

    for epoch in 1..=args.train.epochs {
        let start = Instant::now();
        sampler.set_epoch(epoch as u64);
        model_train(&args, &model, &train_loader, &mut optimizer, epoch, rank)?;
        if rank == 0 {
            println!("epoch {epoch}: {:.1} s training", start.elapsed().as_secs_f64());
            let net = model.module();
            let (loss, correct, seen) = evaluate(&test_loader, &Device::Cpu, |x| net.forward(x));
            report(loss, correct, seen);
        }
        dist::barrier()?;
        scheduler.step(&mut optimizer);
        if args.train.dry_run {
            break;
        }
    }
    dist::destroy_process_group()
}

/// One epoch of data-parallel training; rank 0 logs the loss averaged over the processes.
fn model_train(
    args: &Args,
    model: &DistributedDataParallel<Net>,
    loader: &DataLoader<kiln::vision::datasets::MNIST>,
    optimizer: &mut Adadelta,
    epoch: usize,
    rank: usize,
) -> kiln::Result<()> {
    let batches = loader.len();
    let mut step = kiln::compile(|(data, target): (&Tensor, &Tensor)| {
        optimizer.zero_grad();
        let loss = F::nll_loss(&model.forward(data), target);
        loss.backward(); // gradients are averaged over the processes before this returns
        optimizer.step();
        loss
    });
    for (batch_idx, (data, target)) in loader.into_iter().enumerate() {
        let loss = if args.compile { step.call((&data, &target)) } else { step.call_eager((&data, &target)) };
        if batch_idx % args.train.log_interval == 0 || args.train.dry_run {
            let mean = Tensor::full([1], loss.item::<f32>() as f64);
            dist::all_reduce(&mean, ReduceOp::Avg)?;
            if rank == 0 {
                println!("Train Epoch: {epoch} [{batch_idx}/{batches}]\tLoss: {:.6}", mean.item::<f32>());
            }
        }
        if args.train.dry_run {
            break;
        }
    }
    Ok(())
}

/// Splits the machine's cores between the processes mpirun started on it, unless
/// `KILN_NUM_THREADS` says otherwise (two processes each using every core would fight).
fn share_cores() {
    if std::env::var_os("KILN_NUM_THREADS").is_some() {
        return;
    }
    let local = std::env::var("OMPI_COMM_WORLD_LOCAL_SIZE").ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(1);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    kiln::set_num_threads((cores / local.max(1)).max(1));
}
