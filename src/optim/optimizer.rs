//! The `Optimizer` trait (what training loops and schedulers use), the `OptimizerConfig` trait
//! (one per algorithm: hyperparameters, state and update rule) and `Optim<C>`, the optimizer
//! that holds parameter groups and per-parameter state for any configuration.

use super::fused;
use super::param_group::ParamGroup;
use super::rule::Values;
use super::state::{StateStore, StateTensors};
use crate::capture::{Outcome, Transaction};
use crate::error::{bail, AtCaller, OrPanic, Result};
use crate::{StateDict, Tensor};
use smallvec::SmallVec;
use std::collections::BTreeMap;
use std::panic::Location;

/// What a training loop and a learning-rate scheduler need from an optimizer
/// (PyTorch's `torch.optim.Optimizer`).
pub trait Optimizer {
    /// Updates every parameter that has a gradient, in place (`opt.step()`). Inside
    /// `kiln::compile` the update's nodes carry the caller's line (`#[track_caller]`).
    #[track_caller]
    fn step(&mut self);
    /// Sets every parameter's gradient to `None` (`opt.zero_grad()`, `set_to_none=True`).
    fn zero_grad(&mut self);
    /// The number of parameter groups.
    fn num_param_groups(&self) -> usize;
    /// The learning rate of group `group` (`param_groups[group]["lr"]`).
    fn lr(&self, group: usize) -> f64;
    /// Sets the learning rate of group `group`.
    fn set_lr(&mut self, group: usize, lr: f64);
    /// The momentum of group `group` for schedulers that cycle it: `momentum` for SGD and
    /// RMSprop, `betas.0` for Adam and AdamW, `None` for optimizers without one.
    fn momentum(&self, group: usize) -> Option<f64> {
        let _ = group;
        None
    }
    /// Sets what [`Optimizer::momentum`] reads; does nothing for optimizers without a momentum.
    fn set_momentum(&mut self, group: usize, momentum: f64) {
        let _ = (group, momentum);
    }
    /// Every parameter of every group, in order.
    fn parameters(&self) -> Vec<Tensor>;
    /// The optimizer's state: per-parameter state tensors and group hyperparameters (the
    /// format is in the [module docs](crate::optim)).
    fn state_dict(&self) -> StateDict;
    /// Restores a state written by [`Optimizer::state_dict`]; an error naming what differs
    /// (group count, group sizes, tensor shapes, unknown names) leaves the optimizer unchanged
    /// and names the caller's line (`#[track_caller]` in every implementation).
    #[track_caller]
    fn load_state_dict(&mut self, sd: &StateDict) -> Result<()>;
}

/// An optimization algorithm's hyperparameters, per-parameter state and update rule: the
/// configuration type of [`Optim`] (`SGDConfig`, `AdamConfig`, …).
pub trait OptimizerConfig: Clone + std::fmt::Debug + Sync {
    /// The per-parameter state (momentum buffers, moment estimates, step counts). `Clone`
    /// (of the handles: the tensors' data is not copied) so that a step inside a compiled call
    /// that fails can be undone.
    type State: Clone;
    /// What one update of one parameter computes once from its state (bias corrections from
    /// the step count, whether a buffer is new).
    type Consts: Copy + Send + Sync;
    /// PyTorch's class name (`"SGD"`, `"Adam"`), used in messages.
    const NAME: &'static str;
    /// Whether state is created for every parameter when it is added (Adagrad) rather than at
    /// its first step.
    const EAGER_STATE: bool = false;

    /// An error for an invalid value (a negative learning rate, a beta outside `[0, 1)`, …).
    #[track_caller]
    fn validate(&self) -> Result<()>;
    /// The learning rate.
    fn lr(&self) -> f64;
    /// Sets the learning rate.
    fn set_lr(&mut self, lr: f64);
    /// The momentum a scheduler may cycle (see [`Optimizer::momentum`]).
    fn momentum(&self) -> Option<f64> {
        None
    }
    /// Sets the momentum a scheduler cycles.
    fn set_momentum(&mut self, momentum: f64) {
        let _ = momentum;
    }
    /// `(name, value)` of every hyperparameter, PyTorch's names, values as text.
    fn hyperparameters(&self) -> Vec<(&'static str, String)>;
    /// Sets one hyperparameter from its text; an error for unknown names or unreadable values.
    #[track_caller]
    fn set_hyperparameter(&mut self, key: &str, value: &str) -> Result<()>;
    /// The state of a parameter before its first update.
    fn init_state(&self, param: &Tensor) -> Self::State;
    /// PyTorch's `fused` and `foreach` arguments (see [`one_pass`]).
    fn fused_and_foreach(&self) -> (Option<bool>, Option<bool>);
    /// Readies `state` for one update of `param`: advances its step count, makes the buffers
    /// created lazily, and returns the update's constants and the state tensors
    /// [`OptimizerConfig::rule`] reads and replaces, in its order.
    fn prepare(&self, param: &Tensor, state: &mut Self::State) -> (Self::Consts, SmallVec<[Tensor; 3]>);
    /// The update rule, written once for whole tensors and for single numbers (see
    /// [`super::rule`]): from the parameter `p`, its gradient `g` and the state values `s`
    /// (replaced by their new values), the new parameter.
    fn rule<V: Values>(&self, k: &Self::Consts, p: &V, g: &V, s: &mut [V]) -> V;
    /// The state's tensors with PyTorch's names (`step` as a 0-dim f32 tensor).
    fn state_tensors(&self, state: &Self::State) -> Vec<(&'static str, Tensor)>;
    /// Rebuilds a state from saved tensors.
    #[track_caller]
    fn load_state(&self, saved: &mut StateTensors<'_>) -> Result<Self::State>;
    /// One `opt.step()` of `opt`, called at `at`. Generic code is compiled in the crate that
    /// instantiates it, at that crate's optimization level, so this default runs unoptimized
    /// in a dependent crate's debug build; kiln's configurations override it with a body
    /// compiled in kiln (its `step_compiled_in_kiln!` macro), and a configuration written
    /// elsewhere may keep it.
    fn run_step(opt: &mut Optim<Self>, at: &'static Location<'static>) {
        opt.step_at(at)
    }
}

/// [`OptimizerConfig::run_step`] for a configuration defined in kiln: a non-generic function,
/// so kiln compiles it (and the step, the update rule and the one-pass kernel it instantiates)
/// with kiln's own optimization level, and a crate calling `opt.step()` links to it.
macro_rules! step_compiled_in_kiln {
    () => {
        #[inline(never)]
        fn run_step(opt: &mut $crate::optim::Optim<Self>, at: &'static std::panic::Location<'static>) {
            opt.step_at(at)
        }
    };
}
pub(crate) use step_compiled_in_kiln;

/// An optimizer: parameter groups, each with a configuration `C`, and per-parameter state.
/// Use it through its aliases: [`super::SGD`], [`super::Adam`], [`super::AdamW`], …
pub struct Optim<C: OptimizerConfig> {
    groups: Vec<ParamGroup<C>>,
    state: StateStore<C::State>,
    /// The state as it was before the first step inside a compiled call, kept until the call's
    /// outcome is known: a failed call leaves the optimizer as it found it (the tensors' data
    /// is restored by the call's journal; step counts and new buffers by this copy).
    before_call: Option<(Transaction, StateStore<C::State>)>,
}

impl<C: OptimizerConfig> Optim<C> {
    /// An optimizer of `params` with hyperparameters `config` (one group). Panics on an invalid
    /// configuration, an empty parameter list, or a parameter that is not a float leaf.
    #[track_caller]
    pub fn new(params: impl IntoIterator<Item = Tensor>, config: C) -> Self {
        Self::try_new(params, config).or_panic()
    }

    /// [`Optim::new`] returning an error.
    #[track_caller]
    pub fn try_new(params: impl IntoIterator<Item = Tensor>, config: C) -> Result<Self> {
        Self::try_with_groups(vec![ParamGroup::new(params, config)])
    }

    /// An optimizer with several parameter groups (PyTorch's list of dicts).
    #[track_caller]
    pub fn with_groups(groups: Vec<ParamGroup<C>>) -> Self {
        Self::try_with_groups(groups).or_panic()
    }

    /// [`Optim::with_groups`] returning an error.
    #[track_caller]
    pub fn try_with_groups(groups: Vec<ParamGroup<C>>) -> Result<Self> {
        if groups.is_empty() {
            bail!(C::NAME, Value, "optimizer got an empty parameter list");
        }
        let mut opt = Optim { groups: Vec::new(), state: StateStore::default(), before_call: None };
        for g in groups {
            opt.try_add_param_group(g)?;
        }
        Ok(opt)
    }

    /// Adds a parameter group (`opt.add_param_group(...)`), e.g. layers unfrozen mid-training.
    #[track_caller]
    pub fn add_param_group(&mut self, group: ParamGroup<C>) {
        self.try_add_param_group(group).or_panic()
    }

    /// [`Optim::add_param_group`] returning an error: an invalid configuration, an empty group,
    /// a non-leaf or non-float parameter, or a parameter already in a group.
    #[track_caller]
    pub fn try_add_param_group(&mut self, group: ParamGroup<C>) -> Result<()> {
        group.config.validate().at_caller()?;
        if group.config.fused_and_foreach() == (Some(true), Some(true)) {
            bail!(C::NAME, Value, "`fused` and `foreach` cannot be `True` together.");
        }
        if group.params.is_empty() {
            bail!(C::NAME, Value, "optimizer got an empty parameter list");
        }
        for (i, p) in group.params.iter().enumerate() {
            if !p.dtype().is_float() {
                bail!(
                    C::NAME,
                    DType,
                    "can only optimize floating-point tensors, but parameter {i} of the group has dtype {}",
                    p.dtype()
                );
            }
            if !p.is_leaf() {
                bail!(
                    C::NAME,
                    Value,
                    "can't optimize a non-leaf Tensor (parameter {i} of the group, shape {:?})",
                    p.shape()
                );
            }
            let seen_here = group.params[..i].iter().any(|q| q.is_same(p));
            let seen_before = self.groups.iter().flat_map(|g| &g.params).any(|q| q.is_same(p));
            if seen_here || seen_before {
                bail!(
                    C::NAME,
                    Value,
                    "some parameters appear in more than one parameter group (parameter {i} of the group, shape {:?})",
                    p.shape()
                );
            }
        }
        self.settle();
        if C::EAGER_STATE {
            for p in &group.params {
                self.state.get_or_insert_with(p, || group.config.init_state(p));
            }
        }
        self.groups.push(group);
        Ok(())
    }

    /// The parameter groups.
    pub fn param_groups(&self) -> &[ParamGroup<C>] {
        &self.groups
    }

    /// The parameter groups, to change hyperparameters (`opt.param_groups[0]["lr"] = …`).
    pub fn param_groups_mut(&mut self) -> &mut [ParamGroup<C>] {
        &mut self.groups
    }

    /// The state of `param` (`opt.state[p]`); `None` before its first update.
    pub fn state(&self, param: &Tensor) -> Option<&C::State> {
        self.current_state().get(param)
    }

    /// The state as it stands: the copy kept before a compiled call that failed, else the
    /// live one.
    fn current_state(&self) -> &StateStore<C::State> {
        match &self.before_call {
            Some((call, saved)) if call.outcome() == Outcome::Aborted => saved,
            _ => &self.state,
        }
    }

    /// Resolves the copy kept before a compiled call whose outcome is now known: dropped when
    /// the call succeeded, put back when it failed.
    fn settle(&mut self) {
        let Some((call, _)) = &self.before_call else { return };
        match call.outcome() {
            Outcome::Open => {}
            Outcome::Committed => self.before_call = None,
            Outcome::Aborted => self.state = self.before_call.take().expect("matched above").1,
        }
    }

    /// Reads groups' hyperparameters and state from `sd` without changing `self`.
    #[track_caller]
    fn read_state_dict(&self, sd: &StateDict) -> Result<(Vec<C>, Vec<(Tensor, C::State)>)> {
        let meta = sd.metadata_entries();
        let saved_groups = (0..).take_while(|g| meta.contains_key(&format!("param_groups.{g}.params"))).count();
        if saved_groups != self.groups.len() {
            bail!(
                "load_state_dict",
                Value,
                "loaded state dict has {saved_groups} parameter groups, but {} has {}",
                C::NAME,
                self.groups.len()
            );
        }
        // Saved index -> (group, position) of the parameter it stands for.
        let mut owner: BTreeMap<usize, (usize, usize)> = BTreeMap::new();
        let mut configs = Vec::with_capacity(saved_groups);
        for (g, group) in self.groups.iter().enumerate() {
            let text = &meta[&format!("param_groups.{g}.params")];
            let Ok(ids) = text
                .split(',')
                .filter(|s| !s.trim().is_empty())
                .map(|s| s.trim().parse())
                .collect::<Result<Vec<usize>, _>>()
            else {
                bail!("load_state_dict", Value, "param_groups.{g}.params has the unreadable value {text:?}");
            };
            if ids.len() != group.params.len() {
                bail!(
                    "load_state_dict",
                    Value,
                    "parameter group {g} has {} parameters in the loaded state dict, but {} in the optimizer",
                    ids.len(),
                    group.params.len()
                );
            }
            for (pos, id) in ids.into_iter().enumerate() {
                if owner.insert(id, (g, pos)).is_some() {
                    bail!("load_state_dict", Value, "parameter index {id} appears twice in the loaded param_groups");
                }
            }
            let prefix = format!("param_groups.{g}.");
            let mut config = group.config.clone();
            for (key, value) in meta.range(prefix.clone()..) {
                let Some(name) = key.strip_prefix(&prefix) else { break };
                if name != "params" {
                    config.set_hyperparameter(name, value)?;
                }
            }
            config.validate()?;
            configs.push(config);
        }
        // Saved state tensors grouped by index.
        let mut saved: BTreeMap<usize, Vec<(String, Tensor)>> = BTreeMap::new();
        for (key, t) in sd.iter() {
            let parsed = key
                .strip_prefix("state.")
                .and_then(|r| r.split_once('.'))
                .and_then(|(i, n)| Some((i.parse::<usize>().ok()?, n)));
            let Some((id, name)) = parsed else {
                bail!(
                    "load_state_dict",
                    Value,
                    "unexpected key {key:?} in an optimizer state dict (expected state.<index>.<name>)"
                );
            };
            if !owner.contains_key(&id) {
                bail!("load_state_dict", Value, "state for parameter index {id} ({key}) belongs to no parameter group");
            }
            saved.entry(id).or_default().push((name.to_string(), t.clone()));
        }
        let mut states = Vec::with_capacity(saved.len());
        for (id, tensors) in saved {
            let (g, pos) = owner[&id];
            let param = &self.groups[g].params[pos];
            let mut st = StateTensors::new(id, param, tensors);
            let state = configs[g].load_state(&mut st)?;
            st.finish(C::NAME)?;
            states.push((param.clone(), state));
        }
        Ok((configs, states))
    }
}

impl<C: OptimizerConfig> Optim<C> {
    /// [`Optimizer::step`], called at `at`.
    pub(crate) fn step_at(&mut self, at: &'static Location<'static>) {
        let _at = crate::capture::optimizer_step_at(at);
        self.settle();
        if let Some(call) = crate::capture::transaction() {
            if !self.before_call.as_ref().is_some_and(|(c, _)| c.is_same(&call)) {
                self.before_call = Some((call, self.state.clone()));
            }
        }
        let _no_grad = crate::no_grad_guard();
        // Captured updates are fused by the compiler; eager ones go to the one-pass kernel.
        let capturing = crate::capture::is_active();
        let mut batch = fused::Batch::default();
        for group in &self.groups {
            let one_pass = !capturing && one_pass(group.config.fused_and_foreach());
            for p in &group.params {
                let Some(grad) = p.grad() else { continue };
                let state = self.state.get_or_insert_with(p, || group.config.init_state(p));
                let (k, slots) = group.config.prepare(p, state);
                let update = fused::Update { config: &group.config, k, param: p.clone(), grad, slots };
                if let Some(update) = if one_pass { batch.push(update) } else { Some(update) } {
                    update.op_by_op();
                }
            }
        }
        batch.run();
    }
}

impl<C: OptimizerConfig> Optimizer for Optim<C> {
    fn step(&mut self) {
        C::run_step(self, Location::caller())
    }

    fn zero_grad(&mut self) {
        for p in self.groups.iter().flat_map(|g| &g.params) {
            p.zero_grad();
        }
    }

    fn num_param_groups(&self) -> usize {
        self.groups.len()
    }

    #[track_caller]
    fn lr(&self, group: usize) -> f64 {
        self.group(group).config.lr()
    }

    #[track_caller]
    fn set_lr(&mut self, group: usize, lr: f64) {
        self.group(group);
        self.groups[group].config.set_lr(lr)
    }

    #[track_caller]
    fn momentum(&self, group: usize) -> Option<f64> {
        self.group(group).config.momentum()
    }

    #[track_caller]
    fn set_momentum(&mut self, group: usize, momentum: f64) {
        self.group(group);
        self.groups[group].config.set_momentum(momentum)
    }

    fn parameters(&self) -> Vec<Tensor> {
        self.groups.iter().flat_map(|g| g.params.iter().cloned()).collect()
    }

    fn state_dict(&self) -> StateDict {
        let _no_grad = crate::no_grad_guard();
        let mut sd = StateDict::new();
        let mut index = 0;
        for (g, group) in self.groups.iter().enumerate() {
            let mut ids = Vec::with_capacity(group.params.len());
            for p in &group.params {
                if let Some(state) = self.current_state().get(p) {
                    for (name, t) in group.config.state_tensors(state) {
                        sd.insert(format!("state.{index}.{name}"), t.deep_clone());
                    }
                }
                ids.push(index.to_string());
                index += 1;
            }
            for (key, value) in group.config.hyperparameters() {
                sd.set_metadata(format!("param_groups.{g}.{key}"), value);
            }
            sd.set_metadata(format!("param_groups.{g}.params"), ids.join(","));
        }
        sd
    }

    #[track_caller]
    fn load_state_dict(&mut self, sd: &StateDict) -> Result<()> {
        let (configs, states) = self.read_state_dict(sd).at_caller()?;
        self.settle();
        for (group, config) in self.groups.iter_mut().zip(configs) {
            group.config = config;
        }
        self.state = StateStore::from_entries(states);
        Ok(())
    }
}

impl<C: OptimizerConfig> Optim<C> {
    #[track_caller]
    fn group(&self, group: usize) -> &ParamGroup<C> {
        match self.groups.get(group) {
            Some(g) => g,
            None => panic!(
                "{}",
                crate::Error::new(
                    C::NAME,
                    crate::ErrorKind::Index,
                    format!("parameter group {group} out of range: the optimizer has {} groups", self.groups.len())
                )
            ),
        }
    }
}

impl<C: OptimizerConfig> std::fmt::Debug for Optim<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // PyTorch's repr: the class name, then each group's hyperparameters.
        writeln!(f, "{} (", C::NAME)?;
        for (g, group) in self.groups.iter().enumerate() {
            writeln!(f, "Parameter Group {g}")?;
            for (k, v) in group.config.hyperparameters() {
                writeln!(f, "    {k}: {v}")?;
            }
        }
        write!(f, ")")
    }
}

/// Whether an eager step runs the one-pass kernel of [`fused`] for PyTorch's `fused` and
/// `foreach` arguments: yes when either is `Some(true)` or both are `None` (kiln's default: the
/// kernel computes the single-tensor formula's bits in one pass over each parameter, so there
/// is nothing to lose), no when one is `Some(false)` and the other not `Some(true)`.
pub(crate) fn one_pass((fused, foreach): (Option<bool>, Option<bool>)) -> bool {
    fused.or(foreach).unwrap_or(true) || foreach == Some(true)
}

#[cfg(test)]
mod tests {
    use super::one_pass;

    #[test]
    fn fused_and_foreach_pick_the_one_pass_kernel_unless_one_says_no() {
        let cases = [
            ((None, None), true),
            ((Some(true), None), true),
            ((None, Some(true)), true),
            ((Some(false), Some(true)), true),
            ((Some(true), Some(false)), true),
            ((Some(false), None), false),
            ((None, Some(false)), false),
            ((Some(false), Some(false)), false),
        ];
        for (options, expected) in cases {
            assert_eq!(one_pass(options), expected, "fused, foreach = {options:?}");
        }
    }
}
