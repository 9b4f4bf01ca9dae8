//! `kiln::save_checkpoint` / `load_checkpoint`: a run stopped after two epochs and resumed
//! from its checkpoint (model, Adam, StepLR, GradScaler, epoch, generator state) reaches the
//! uninterrupted run's weights bit for bit, dropout draws included; bad part names, a missing
//! part and a plain state dict are clear errors.

use kiln::amp::GradScaler;
use kiln::nn::{self, Module};
use kiln::optim::lr_scheduler::{LRScheduler, StepLR};
use kiln::optim::{Adam, AdamConfig, Optimizer};
use kiln::prelude::*;

#[path = "common/seeded.rs"]
mod seeded;
use seeded::seeded;

/// A network whose forward draws (dropout), so the generator state matters.
fn net() -> nn::Sequential {
    nn::Sequential::new().add(nn::Linear::new(4, 8)).add(nn::Dropout::new(0.5)).add(nn::ReLU).add(nn::Linear::new(8, 2))
}

/// One epoch: an Adam step on a fixed batch, then the scheduler's step.
fn epoch(net: &nn::Sequential, opt: &mut Adam, sched: &mut StepLR) {
    let (x, y) = (Tensor::linspace(-1.0, 1.0, 12).view([3, 4]), Tensor::ones([3, 2]));
    opt.zero_grad();
    (net.forward(&x) - y).square().mean().backward();
    opt.step();
    sched.step(opt);
}

fn weights(net: &nn::Sequential) -> Vec<Vec<u32>> {
    net.parameters().iter().map(|p| p.detach().to_vec::<f32>().iter().map(|v| v.to_bits()).collect()).collect()
}

fn path(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("kiln-checkpoint-{}-{name}.safetensors", std::process::id()))
}

#[test]
fn a_resumed_run_equals_the_uninterrupted_one() {
    let _seeded = seeded();
    let file = path("resume");
    kiln::manual_seed(11);
    let net_a = net();
    let mut opt = Adam::new(net_a.parameters(), AdamConfig { lr: 0.01, ..Default::default() });
    let mut sched = StepLR::new(&mut opt, 1, 0.5);
    let mut scaler = GradScaler::new();
    scaler.set_growth_factor(3.0); // a state other than the default, to see it restored
    for _ in 0..2 {
        epoch(&net_a, &mut opt, &mut sched);
    }
    let parts = [
        ("model", net_a.state_dict()),
        ("optimizer", opt.state_dict()),
        ("scheduler", sched.state_dict()),
        ("scaler", scaler.state_dict()),
    ];
    kiln::save_checkpoint(&file, 2, &parts).unwrap();
    for _ in 0..2 {
        epoch(&net_a, &mut opt, &mut sched);
    }
    let (want, want_lr) = (weights(&net_a), sched.get_last_lr());

    // A fresh process would start from other weights and another generator state.
    kiln::manual_seed(99);
    let mut net_b = net();
    let mut opt_b = Adam::new(net_b.parameters(), AdamConfig { lr: 0.01, ..Default::default() });
    let mut sched_b = StepLR::new(&mut opt_b, 1, 0.5);
    let mut scaler_b = GradScaler::new();
    let ck = kiln::load_checkpoint(&file).unwrap();
    assert_eq!(ck.epoch(), 2);
    assert_eq!(ck.parts(), ["model", "optimizer", "scheduler", "scaler"]);
    net_b.load_state_dict(&ck.part("model").unwrap()).unwrap();
    opt_b.load_state_dict(&ck.part("optimizer").unwrap()).unwrap();
    sched_b.load_state_dict(&ck.part("scheduler").unwrap()).unwrap();
    scaler_b.load_state_dict(&ck.part("scaler").unwrap()).unwrap();
    ck.restore_rng_state().unwrap();
    assert_eq!(scaler_b.get_growth_factor(), 3.0);
    for _ in 0..2 {
        epoch(&net_b, &mut opt_b, &mut sched_b);
    }
    assert_eq!(weights(&net_b), want, "resumed weights");
    assert_eq!(sched_b.get_last_lr(), want_lr, "resumed learning rate");

    // Without the generator's state, dropout draws differently and the weights differ.
    let mut net_c = net();
    let mut opt_c = Adam::new(net_c.parameters(), AdamConfig { lr: 0.01, ..Default::default() });
    let mut sched_c = StepLR::new(&mut opt_c, 1, 0.5);
    net_c.load_state_dict(&ck.part("model").unwrap()).unwrap();
    opt_c.load_state_dict(&ck.part("optimizer").unwrap()).unwrap();
    sched_c.load_state_dict(&ck.part("scheduler").unwrap()).unwrap();
    for _ in 0..2 {
        epoch(&net_c, &mut opt_c, &mut sched_c);
    }
    assert_ne!(weights(&net_c), want, "the generator state matters to this run");
    std::fs::remove_file(&file).unwrap();
}

#[test]
fn bad_parts_and_plain_state_dicts_are_clear_errors() {
    let file = path("errors");
    let sd = nn::Linear::new(2, 2).state_dict();
    for bad in ["", "a.b", "checkpoint"] {
        let e = kiln::save_checkpoint(&file, 0, &[(bad, sd.clone())]).unwrap_err().to_string();
        assert!(e.contains("part name") && e.contains("tests/checkpoint.rs"), "{bad:?}: {e}");
    }
    let e = kiln::save_checkpoint(&file, 0, &[("m", sd.clone()), ("m", sd.clone())]).unwrap_err();
    assert!(e.to_string().contains("unique"), "{e}");
    kiln::save_checkpoint(&file, 7, &[("model", sd.clone())]).unwrap();
    let e = kiln::load_checkpoint(&file).unwrap().part("optimizer").unwrap_err().to_string();
    assert!(e.contains("no part \"optimizer\"") && e.contains("[\"model\"]"), "{e}");
    kiln::save(&sd, &file).unwrap();
    let e = kiln::load_checkpoint(&file).unwrap_err().to_string();
    assert!(e.contains("not a kiln checkpoint") && e.contains("kiln::load"), "{e}");
    std::fs::remove_file(&file).unwrap();
}
