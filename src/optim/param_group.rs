//! `ParamGroup`: a set of parameters that share hyperparameters (PyTorch's `param_groups[i]`).

use crate::Tensor;

/// Parameters and the hyperparameters they are optimized with. Build one per group to give
/// parts of a model different learning rates:
/// `SGD::with_groups(vec![ParamGroup::new(base, cfg.clone()), ParamGroup::new(head, SGDConfig { lr: 1e-3, ..cfg })])`.
#[derive(Clone, Debug)]
pub struct ParamGroup<C> {
    /// The parameters (handles sharing storage with the model's).
    pub params: Vec<Tensor>,
    /// The group's hyperparameters.
    pub config: C,
}

impl<C> ParamGroup<C> {
    /// A group of `params` optimized with `config`.
    pub fn new(params: impl IntoIterator<Item = Tensor>, config: C) -> Self {
        ParamGroup { params: params.into_iter().collect(), config }
    }
}
