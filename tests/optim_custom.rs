//! An optimizer defined outside kiln: a crate implements `OptimizerConfig` (keeping the trait's
//! default `run_step`, the generic step compiled in the calling crate) and gets `Optim`'s step,
//! both the one-pass kernel and op by op, with the same numbers as the formula by hand.

use kiln::optim::rule::Values;
use kiln::optim::{Optim, Optimizer, OptimizerConfig, StateTensors};
use kiln::{Result, Tensor};
use smallvec::SmallVec;

/// Heavy-ball momentum with a fixed decay of one half: `v = v/2 + g`, `p = p - lr * v`.
#[derive(Clone, Debug)]
struct HalfMomentum {
    lr: f64,
    fused: Option<bool>,
}

impl OptimizerConfig for HalfMomentum {
    type State = Option<Tensor>;
    type Consts = ();
    const NAME: &'static str = "HalfMomentum";

    fn validate(&self) -> Result<()> {
        Ok(())
    }
    fn lr(&self) -> f64 {
        self.lr
    }
    fn set_lr(&mut self, lr: f64) {
        self.lr = lr;
    }
    fn hyperparameters(&self) -> Vec<(&'static str, String)> {
        vec![("lr", self.lr.to_string())]
    }
    fn set_hyperparameter(&mut self, key: &str, value: &str) -> Result<()> {
        assert_eq!(key, "lr");
        self.lr = value.parse().unwrap();
        Ok(())
    }
    fn init_state(&self, _param: &Tensor) -> Option<Tensor> {
        None
    }
    fn fused_and_foreach(&self) -> (Option<bool>, Option<bool>) {
        (self.fused, None)
    }
    fn prepare(&self, param: &Tensor, state: &mut Option<Tensor>) -> ((), SmallVec<[Tensor; 3]>) {
        ((), SmallVec::from_iter([state.get_or_insert_with(|| param.zeros_like()).clone()]))
    }
    fn rule<V: Values>(&self, _k: &(), p: &V, g: &V, s: &mut [V]) -> V {
        s[0] = s[0].mul_s(0.5).add(g);
        p.sub(&s[0].mul_s(self.lr))
    }
    fn state_tensors(&self, state: &Option<Tensor>) -> Vec<(&'static str, Tensor)> {
        state.iter().map(|v| ("velocity", v.clone())).collect()
    }
    fn load_state(&self, saved: &mut StateTensors<'_>) -> Result<Option<Tensor>> {
        saved.optional("velocity")
    }
}

#[test]
fn a_configuration_written_outside_kiln_steps_both_ways_like_its_formula() {
    // 1000 elements: whole blocks of the one-pass kernel and a tail.
    let start: Vec<f32> = (0..1000).map(|i| (i as f32 * 0.37).sin()).collect();
    let grad: Vec<f32> = (0..1000).map(|i| (i as f32 * 0.11).cos()).collect();
    let lr = 0.1;
    // By hand, in f32 as the kernel computes: three steps with the same gradient.
    let (mut p, mut v) = (start.clone(), vec![0f32; 1000]);
    for _ in 0..3 {
        for i in 0..1000 {
            v[i] = v[i] * 0.5 + grad[i];
            p[i] -= v[i] * lr as f32;
        }
    }
    for fused in [None, Some(false)] {
        let param = Tensor::from_vec(start.clone(), [1000]).requires_grad_(true);
        let mut opt = Optim::new(vec![param.clone()], HalfMomentum { lr, fused });
        for _ in 0..3 {
            param.set_grad(Some(Tensor::from_vec(grad.clone(), [1000])));
            opt.step();
        }
        assert_eq!(param.to_vec::<f32>(), p, "fused = {fused:?}: parameter");
        let state = opt.state(&param).unwrap().as_ref().unwrap();
        assert_eq!(state.to_vec::<f32>(), v, "fused = {fused:?}: velocity");
    }
}
