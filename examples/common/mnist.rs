//! The MNIST example's network, data and evaluation, shared by `mnist.rs` and `ddp_mnist.rs`.

use kiln::data::DataLoader;
use kiln::nn::{self, functional as F, Module};
use kiln::vision::datasets::{Split, MNIST};
use kiln::vision::transforms::{Compose, Normalize, ToTensor};
use kiln::{Device, Tensor};
use std::path::{Path, PathBuf};

/// The command-line flags `mnist` and `ddp_mnist` share (PyTorch's example's).
#[derive(clap::Args, Debug)]
pub struct TrainArgs {
    /// input batch size for training (per process under ddp_mnist)
    #[arg(long, default_value_t = 64)]
    pub batch_size: usize,
    /// input batch size for testing
    #[arg(long, default_value_t = 1000)]
    pub test_batch_size: usize,
    /// number of epochs to train
    #[arg(long, default_value_t = 14)]
    pub epochs: usize,
    /// learning rate
    #[arg(long, default_value_t = 1.0)]
    pub lr: f64,
    /// Learning rate step gamma
    #[arg(long, default_value_t = 0.7)]
    pub gamma: f64,
    /// quickly check a single pass
    #[arg(long)]
    pub dry_run: bool,
    /// random seed
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// how many batches to wait before logging training status
    #[arg(long, default_value_t = 10)]
    pub log_interval: usize,
    /// directory of the MNIST IDX files (default: the embedded 8,000/2,000 subset)
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
}

/// PyTorch's MNIST example network (conv, conv, max-pool, dropout, two linear layers,
/// log-softmax).
#[derive(Module)]
pub struct Net {
    conv1: nn::Conv2d,
    conv2: nn::Conv2d,
    dropout1: nn::Dropout,
    dropout2: nn::Dropout,
    fc1: nn::Linear,
    fc2: nn::Linear,
}

impl Net {
    /// The example's network for 28×28 digits (draws from the global generator).
    pub fn new() -> Net {
        Net::with_sizes(32, 64, 9216, 128)
    }

    /// The same layers at other sizes: `conv1` 1→`c1` and `conv2` `c1`→`c2` (3×3), `fc1`
    /// `flat`→`hidden` (`flat` = `c2` × the pooled height × width), `fc2` `hidden`→10.
    pub fn with_sizes(c1: usize, c2: usize, flat: usize, hidden: usize) -> Net {
        Net {
            conv1: nn::Conv2d::new(1, c1, 3),
            conv2: nn::Conv2d::new(c1, c2, 3),
            dropout1: nn::Dropout::new(0.25),
            dropout2: nn::Dropout::new(0.5),
            fc1: nn::Linear::new(flat, hidden),
            fc2: nn::Linear::new(hidden, 10),
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

/// The MNIST images of `dir` (default: the embedded 8,000/2,000 subset), normalized as the
/// PyTorch example does: `(train, test, the directory read)`.
pub fn datasets(dir: Option<&Path>) -> kiln::Result<(MNIST, MNIST, PathBuf)> {
    let root = dir.map(Path::to_path_buf).unwrap_or_else(kiln::vision::datasets::mnist::default_root);
    let transform = || Compose::new((ToTensor, Normalize::new(&[0.1307], &[0.3081])));
    let train = MNIST::new(&root, Split::Train)?.transform(transform());
    let test = MNIST::new(&root, Split::Test)?.transform(transform());
    Ok((train, test, root))
}

/// Summed loss, correct predictions and images seen over `loader`, with `forward` computing
/// the log-probabilities of a batch (eager or compiled).
pub fn evaluate(
    loader: &DataLoader<MNIST>,
    device: &Device,
    mut forward: impl FnMut(&Tensor) -> Tensor,
) -> (f64, i64, usize) {
    let _guard = kiln::no_grad_guard();
    let (mut loss, mut correct, mut seen) = (0.0, 0i64, 0usize);
    for (data, target) in loader {
        let (data, target) = (data.to(device), target.to(device));
        let output = forward(&data);
        loss +=
            F::nll_loss_opts(&output, &target, &F::NllLossOpts { reduction: F::Reduction::Sum, ..Default::default() })
                .item::<f32>() as f64;
        correct += output.argmax_dim_keepdim(1).eq(target.view([-1, 1])).sum().item::<i64>();
        seen += target.numel();
    }
    (loss, correct, seen)
}

/// Prints PyTorch's test-set line and returns (mean loss, accuracy in %).
pub fn report(loss: f64, correct: i64, seen: usize) -> (f64, f64) {
    let (loss, accuracy) = (loss / seen.max(1) as f64, 100.0 * correct as f64 / seen.max(1) as f64);
    println!("\nTest set: Average loss: {loss:.4}, Accuracy: {correct}/{seen} ({accuracy:.0}%)\n");
    (loss, accuracy)
}
