//! Checkpoints: PyTorch's blitz `Net` weights loaded from safetensors reproduce PyTorch's output;
//! a training run resumed from a checkpoint continues bit for bit.

use kiln::nn::{self, Module};
use kiln::optim::lr_scheduler::{LRScheduler, StepLR};
use kiln::optim::{Optimizer, SGDConfig, SGD};
use kiln::{StateDict, Tensor};
use std::path::PathBuf;

#[path = "common/blitz_net.rs"]
mod blitz_net;
use blitz_net::Net;
#[path = "common/seeded.rs"]
mod seeded;
use seeded::seeded;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

#[test]
fn pytorch_blitz_weights_reproduce_pytorch_output() {
    let _seeded = seeded();
    let mut net = Net::new();
    net.load_state_dict(&kiln::load(fixture("blitz_net.safetensors")).unwrap()).unwrap();
    let io = kiln::load(fixture("blitz_net_io.safetensors")).unwrap();
    let got: Vec<f32> = net.forward(io.get("input").unwrap()).to_vec();
    let want: Vec<f32> = io.get("output").unwrap().to_vec();
    assert_eq!(got.len(), 20);
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-5, "kiln {g} vs PyTorch {w}");
    }
}

#[test]
fn prints_like_pytorch() {
    let _seeded = seeded();
    // print(net) in scripts/fixtures_blitz_net.py
    let want = "Net(
  (conv1): Conv2d(3, 6, kernel_size=(5, 5), stride=(1, 1))
  (pool): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
  (conv2): Conv2d(6, 16, kernel_size=(5, 5), stride=(1, 1))
  (fc1): Linear(in_features=400, out_features=120, bias=True)
  (fc2): Linear(in_features=120, out_features=84, bias=True)
  (fc3): Linear(in_features=84, out_features=10, bias=True)
)";
    assert_eq!(Net::new().to_string(), want);
}

/// Runs `steps` SGD-momentum steps of the blitz net on fixed random batches, returning the losses.
fn run(net: &Net, opt: &mut SGD, sched: &mut StepLR, first_step: usize, steps: usize) -> Vec<f32> {
    let criterion = nn::CrossEntropyLoss::new();
    let mut losses = Vec::new();
    for step in first_step..first_step + steps {
        kiln::manual_seed(1000 + step as u64);
        let x = Tensor::randn([4, 3, 32, 32]);
        let y = Tensor::randint(0, 10, [4]);
        opt.zero_grad();
        let loss = criterion.forward(&net.forward(&x), &y);
        loss.backward();
        opt.step();
        sched.step(opt);
        losses.push(loss.item::<f32>());
    }
    losses
}

/// Everything a resumable checkpoint holds, in one state dict.
fn checkpoint(net: &Net, opt: &SGD, sched: &StepLR, epoch: usize) -> StateDict {
    let mut sd = StateDict::new();
    sd.extend_prefixed("model.", net.state_dict());
    sd.extend_prefixed("optimizer.", opt.state_dict());
    sd.extend_prefixed("scheduler.", sched.state_dict());
    sd.set_metadata("epoch", epoch.to_string());
    sd
}

/// The entries of `sd` under `prefix`, with the prefix removed.
fn strip(sd: &StateDict, prefix: &str) -> StateDict {
    let mut out: StateDict =
        sd.iter().filter_map(|(k, t)| k.strip_prefix(prefix).map(|k| (k.to_string(), t.clone()))).collect();
    for (k, v) in sd.metadata_entries() {
        if let Some(k) = k.strip_prefix(prefix) {
            out.set_metadata(k, v.clone());
        }
    }
    out
}

#[test]
fn resuming_from_a_checkpoint_continues_bit_for_bit() {
    let _seeded = seeded();
    let config = SGDConfig { lr: 0.01, momentum: 0.9, ..Default::default() };
    kiln::manual_seed(7);
    let net = Net::new();
    let mut opt = SGD::new(net.parameters(), config.clone());
    let mut sched = StepLR::new(&mut opt, 2, 0.5);
    let mut straight = run(&net, &mut opt, &mut sched, 0, 3);

    // The same start, stopped after 3 steps, saved, restored into fresh objects, continued.
    kiln::manual_seed(7);
    let net_a = Net::new();
    let mut opt_a = SGD::new(net_a.parameters(), config.clone());
    let mut sched_a = StepLR::new(&mut opt_a, 2, 0.5);
    let first = run(&net_a, &mut opt_a, &mut sched_a, 0, 3);
    assert_eq!(first, straight);
    let path = std::env::temp_dir().join(format!("kiln-resume-{}.safetensors", std::process::id()));
    kiln::save(&checkpoint(&net_a, &opt_a, &sched_a, 3), &path).unwrap();
    straight.extend(run(&net, &mut opt, &mut sched, 3, 4));

    let saved = kiln::load(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(saved.metadata("epoch"), Some("3"));
    kiln::manual_seed(99);
    let mut net_b = Net::new();
    net_b.load_state_dict(&strip(&saved, "model.")).unwrap();
    let mut opt_b = SGD::new(net_b.parameters(), config);
    opt_b.load_state_dict(&strip(&saved, "optimizer.")).unwrap();
    let mut sched_b = StepLR::new(&mut opt_b, 2, 0.5);
    sched_b.load_state_dict(&strip(&saved, "scheduler.")).unwrap();
    let resumed = run(&net_b, &mut opt_b, &mut sched_b, 3, 4);
    assert_eq!(resumed, straight[3..], "losses after resuming must equal the uninterrupted run's, bit for bit");
}
