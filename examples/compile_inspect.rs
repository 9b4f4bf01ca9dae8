//! What `kiln::compile` makes of a small MLP training step: the kernels it generated, what
//! each fuses, the largest one's listing and CLIF, the cache behaviour over three calls, and
//! where the time went.
//!
//! Run: `cargo run --release --example compile_inspect`; add `KILN_DEBUG=all` to see every
//! decision as it happens (graph, fusion refusals, kernel listings and CLIF, cache, recompiles,
//! breaks; `KILN_DEBUG=help` lists the topics), and `KILN_DUMP_DIR=dump` to get
//! `dump/step-N.dot` (the DAG, each fused node labelled with its kernel, forward / backward /
//! update clusters, a legend; `step-N.svg` too when Graphviz is installed) and a `.txt`
//! listing and a `.clif` file per kernel.

use kiln::nn::{self, functional as F, Module};
use kiln::optim::{Optimizer, SGDConfig, SGD};
use kiln::Tensor;

#[derive(Module)]
struct Mlp {
    fc1: nn::Linear,
    fc2: nn::Linear,
}

impl Module for Mlp {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.fc2.forward(&F::gelu(&self.fc1.forward(x)))
    }
}

fn main() {
    kiln::manual_seed(0);
    let net = Mlp { fc1: nn::Linear::new(64, 128), fc2: nn::Linear::new(128, 10) };
    let mut opt = SGD::new(net.parameters(), SGDConfig { lr: 0.1, momentum: 0.9, ..Default::default() });
    let criterion = nn::CrossEntropyLoss::new();
    let x = Tensor::randn([32, 64]);
    let y = Tensor::randint(0, 10, [32]);
    let mut step = kiln::compile(|(x, y): (&Tensor, &Tensor)| {
        opt.zero_grad();
        let loss = criterion.forward(&net.forward(x), y);
        loss.backward();
        opt.step();
        loss
    });
    for call in 1..=3 {
        let loss = step.call((&x, &y)).item::<f32>();
        let s = step.stats();
        println!(
            "call {call}: loss {loss:.4} | {} nodes, {} kernels + {} eager ops, {} graph breaks, plan cache {} | trace {:.2?}, hash {:.2?}, compile {:.2?}, run {:.2?} | {} bytes moved by kernels, intermediates peak {} bytes",
            s.nodes,
            s.kernels_launched,
            s.eager_ops,
            s.graph_breaks,
            if s.plan_cache_hits == s.graphs { "hit" } else { "miss" },
            s.trace_time,
            s.hash_time,
            s.compile_time,
            s.run_time,
            s.bytes_moved,
            s.peak_bytes
        );
        if call == 1 || call == 2 {
            // Call 1 creates the momentum buffers (a different graph); call 2 is the steady step.
            println!("kernels of call {call}:");
            for k in step.kernels() {
                println!(
                    "  {} [{}] {:>8.2?} {}: {}",
                    k.name,
                    k.backend,
                    k.compile_time,
                    if k.cache_hit { "cached  " } else { "compiled" },
                    k.ops
                );
            }
        }
    }
    if let Some(k) = step.kernels().into_iter().max_by_key(|k| k.ops.len()) {
        println!("\nthe largest kernel, as KILN_DEBUG=kernels lists it:\n{}", k.listing);
        let head: Vec<&str> = k.source.lines().take(12).collect();
        println!("its first lines of CLIF (all of it under KILN_DEBUG=clif):\n{}\n  …", head.join("\n"));
    }
}
