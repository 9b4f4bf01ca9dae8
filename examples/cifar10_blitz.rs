//! The 60-minute blitz, part 4 ("Training a classifier"): the CIFAR-10 network and loop, line by
//! line in kiln.
//!
//! Run: `cargo run --release --example cifar10_blitz -- --data-dir DIR` where DIR holds the
//! binary CIFAR-10 files (`data_batch_1.bin` … `data_batch_5.bin`, `test_batch.bin`; the
//! `cifar-10-batches-bin` folder of https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz).
//! Nothing is downloaded. `--save-grid FILE` writes the first training batch as one image
//! (`make_grid`, as the blitz's `imshow`) and prints its labels.

use clap::Parser;
use kiln::data::DataLoader;
use kiln::nn::{self, functional as F, Module};
use kiln::optim::{Optimizer, SGDConfig, SGD};
use kiln::vision::datasets::{Split, CIFAR10};
use kiln::vision::io::save_image;
use kiln::vision::transforms::{Compose, Normalize, ToTensor};
use kiln::vision::utils::GridOpts;
use kiln::Tensor;
use std::path::PathBuf;

/// The blitz's CIFAR-10 classifier.
#[derive(Parser, Debug)]
struct Args {
    /// folder of the binary CIFAR-10 files
    #[arg(long, default_value = "data/cifar-10-batches-bin")]
    data_dir: PathBuf,
    /// epochs over the training set (the blitz uses 2)
    #[arg(long, default_value_t = 2)]
    epochs: usize,
    /// mini-batch size (the blitz uses 4)
    #[arg(long, default_value_t = 4)]
    batch_size: usize,
    /// background threads that prepare batches (the blitz uses 2)
    #[arg(long, default_value_t = 2)]
    num_workers: usize,
    /// print the running loss every this many mini-batches
    #[arg(long, default_value_t = 2000)]
    log_interval: usize,
    /// run each training step through kiln::compile (fused, JIT-compiled)
    #[arg(long)]
    compile: bool,
    /// write a grid of the first training batch to this PNG/JPEG file, and print its labels
    /// (the blitz's `imshow(torchvision.utils.make_grid(images))`)
    #[arg(long)]
    save_grid: Option<PathBuf>,
}

#[derive(Module)]
struct Net {
    conv1: nn::Conv2d,
    pool: nn::MaxPool2d,
    conv2: nn::Conv2d,
    fc1: nn::Linear,
    fc2: nn::Linear,
    fc3: nn::Linear,
}

impl Net {
    fn new() -> Net {
        Net {
            conv1: nn::Conv2d::new(3, 6, 5),
            pool: nn::MaxPool2d::new(2),
            conv2: nn::Conv2d::new(6, 16, 5),
            fc1: nn::Linear::new(16 * 5 * 5, 120),
            fc2: nn::Linear::new(120, 84),
            fc3: nn::Linear::new(84, 10),
        }
    }
}

impl Module for Net {
    fn forward(&self, x: &Tensor) -> Tensor {
        let x = self.pool.forward(&F::relu(&self.conv1.forward(x)));
        let x = self.pool.forward(&F::relu(&self.conv2.forward(&x)));
        let x = x.flatten(1, -1); // flatten all dimensions except batch
        let x = F::relu(&self.fc1.forward(&x));
        let x = F::relu(&self.fc2.forward(&x));
        self.fc3.forward(&x)
    }
}

fn main() -> kiln::Result<()> {
    let args = Args::parse();
    let transform = || Compose::new((ToTensor, Normalize::new(&[0.5, 0.5, 0.5], &[0.5, 0.5, 0.5])));
    let trainset = CIFAR10::new(&args.data_dir, Split::Train)?.transform(transform());
    let trainloader = DataLoader::new(trainset).batch_size(args.batch_size).shuffle(true).num_workers(args.num_workers);
    let testset = CIFAR10::new(&args.data_dir, Split::Test)?.transform(transform());
    let testloader = DataLoader::new(testset).batch_size(args.batch_size).num_workers(args.num_workers);
    let classes = CIFAR10::classes();

    // get some random training images, show them (unnormalized) and print their labels
    if let Some(path) = &args.save_grid {
        let (images, labels) = trainloader.iter().next().expect("the training set is not empty");
        save_image(&(&images / 2.0 + 0.5), path, &GridOpts::default())?;
        let names: Vec<String> = labels.to_vec::<i64>().iter().map(|&l| format!("{:5}", classes[l as usize])).collect();
        println!("{} (grid in {})", names.join(" "), path.display());
    }

    let net = Net::new();
    let criterion = nn::CrossEntropyLoss::new();
    let mut optimizer = SGD::new(net.parameters(), SGDConfig { lr: 0.001, momentum: 0.9, ..Default::default() });

    // one training step; with --compile it runs as a captured, fused graph
    let mut step = kiln::compile(|(inputs, labels): (&Tensor, &Tensor)| {
        // zero the parameter gradients
        optimizer.zero_grad();
        // forward + backward + optimize
        let outputs = net.forward(inputs);
        let loss = criterion.forward(&outputs, labels);
        loss.backward();
        optimizer.step();
        loss
    });
    for epoch in 0..args.epochs {
        // loop over the dataset multiple times
        let mut running_loss = 0.0;
        for (i, (inputs, labels)) in trainloader.iter().enumerate() {
            let loss = if args.compile { step.call((&inputs, &labels)) } else { step.call_eager((&inputs, &labels)) };
            // print statistics
            running_loss += loss.item::<f32>() as f64;
            if i % args.log_interval == args.log_interval - 1 {
                println!("[{}, {:5}] loss: {:.3}", epoch + 1, i + 1, running_loss / args.log_interval as f64);
                running_loss = 0.0;
            }
        }
    }
    drop(step);
    println!("Finished Training");
    kiln::save(&net.state_dict(), "cifar_net.safetensors")?;

    let (mut correct, mut total) = (0i64, 0usize);
    let mut correct_pred = [0usize; 10];
    let mut total_pred = [0usize; 10];
    // since we're not training, we don't need to calculate the gradients for our outputs
    let _guard = kiln::no_grad_guard();
    for (images, labels) in &testloader {
        // calculate outputs by running images through the network
        let outputs = net.forward(&images);
        // the class with the highest energy is what we choose as prediction
        let predicted = outputs.argmax_dim(1);
        total += labels.numel();
        correct += predicted.eq(&labels).sum().item::<i64>();
        for (label, prediction) in labels.to_vec::<i64>().into_iter().zip(predicted.to_vec::<i64>()) {
            total_pred[label as usize] += 1;
            correct_pred[label as usize] += usize::from(label == prediction);
        }
    }
    println!("Accuracy of the network on the {total} test images: {} %", 100 * correct / total.max(1) as i64);
    for (k, name) in classes.iter().enumerate() {
        let accuracy = 100.0 * correct_pred[k] as f64 / total_pred[k].max(1) as f64;
        println!("Accuracy for class: {name:5} is {accuracy:.1} %");
    }
    Ok(())
}
