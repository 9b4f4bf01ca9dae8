//! An SGD training loop run eagerly and inside `kiln::compile`, and the comparison of the two:
//! the check every "compiled training equals eager" test makes.
//!
//! Use it from a test file with `#[path = "common/compiled_training.rs"] mod compiled_training;`.

use kiln::optim::{Optimizer, SGDConfig, SGD};
use kiln::Tensor;

/// What a run of training steps left: the losses, the parameters and their last gradients,
/// and per compiled call `(graph breaks, graphs, kernels launched)` (empty when eager).
pub struct Trained {
    /// The loss of each step.
    pub losses: Vec<f32>,
    /// The parameters after the last step (detached).
    pub params: Vec<Tensor>,
    /// Their gradients from the last step.
    pub grads: Vec<Tensor>,
    /// Per compiled call: graph breaks, graphs, kernels launched.
    pub stats: Vec<(usize, usize, usize)>,
}

impl Trained {
    /// `steps` SGD steps (lr 0.1, momentum 0.9) of `params` on the loss `loss()`, compiled or
    /// eager.
    pub fn sgd(params: Vec<Tensor>, mut loss: impl FnMut() -> Tensor, compiled: bool, steps: usize) -> Trained {
        let mut opt = SGD::new(params.clone(), SGDConfig { lr: 0.1, momentum: 0.9, ..Default::default() });
        let mut step = || {
            opt.zero_grad();
            let loss = loss();
            loss.backward();
            opt.step();
            loss
        };
        let (mut losses, mut stats) = (Vec::new(), Vec::new());
        if compiled {
            let mut compiled = kiln::compile(|(): ()| step());
            for _ in 0..steps {
                losses.push(compiled.call(()).item::<f32>());
                let s = compiled.stats();
                stats.push((s.graph_breaks, s.graphs, s.kernels_launched));
            }
        } else {
            for _ in 0..steps {
                losses.push(step().item::<f32>());
            }
        }
        let grads = params.iter().map(|p| p.grad().expect("a gradient")).collect();
        Trained { losses, params: params.iter().map(Tensor::detach).collect(), grads, stats }
    }

    /// Asserts this compiled run equals `eager` to `rtol` (fused kernels evaluate
    /// transcendentals and sums in another order than the eager kernels), the eager loss fell,
    /// and each compiled call was one graph, without a break, that launched generated kernels.
    pub fn assert_matches(&self, eager: &Trained, rtol: f32) {
        let (c, e) = (&self.losses, &eager.losses);
        for (a, b) in c.iter().zip(e) {
            assert!((a - b).abs() <= rtol * (1.0 + b.abs()), "losses: compiled {c:?} vs eager {e:?}");
        }
        for (what, c, e) in [("parameter", &self.params, &eager.params), ("gradient", &self.grads, &eager.grads)] {
            assert_eq!(c.len(), e.len());
            for (k, (c, e)) in c.iter().zip(e).enumerate() {
                for (x, y) in c.to_vec::<f32>().iter().zip(e.to_vec::<f32>()) {
                    assert!((x - y).abs() <= rtol * (1.0 + y.abs()), "{what} {k}: compiled {x} vs eager {y}");
                }
            }
        }
        assert!(e[e.len() - 1] < e[0], "training lowers the loss: {e:?}");
        let stats = &self.stats;
        assert!(
            stats.iter().all(|&(b, g, k)| b == 0 && g == 1 && k > 0),
            "(breaks, graphs, kernels) per step: {stats:?}"
        );
    }
}
