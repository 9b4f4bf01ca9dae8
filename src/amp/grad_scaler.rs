//! `GradScaler`: dynamic loss scaling for mixed-precision training (`torch.amp.GradScaler`);
//! the [module docs](crate::amp) show the training loop and the differences from PyTorch.

use crate::error::{bail, OrPanic, Result};
use crate::optim::Optimizer;
use crate::{DType, Device, StateDict, Tensor};

/// The name errors of [`GradScaler`]'s constructor carry.
const NAME: &str = "GradScaler";

/// PyTorch's hint when the scaler is used before [`GradScaler::scale`].
const NOT_STARTED: &str =
    "This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration.";

/// [`GradScaler`]'s options (`torch.amp.GradScaler`'s arguments and defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct GradScalerConfig {
    /// The scale factor the first [`GradScaler::scale`] starts from (default 2¹⁶ = 65536); kept
    /// as an f32.
    pub init_scale: f64,
    /// What [`GradScaler::update`] multiplies the scale by after `growth_interval` steps in a
    /// row without inf/NaN gradients (default 2; must be > 1).
    pub growth_factor: f64,
    /// What [`GradScaler::update`] multiplies the scale by after a step whose gradients had an
    /// inf or NaN (default 0.5; must be < 1).
    pub backoff_factor: f64,
    /// How many steps in a row without inf/NaN gradients grow the scale (default 2000).
    pub growth_interval: usize,
    /// `false` makes the scaler do nothing: [`GradScaler::scale`] returns its input, `step`
    /// just steps the optimizer, the other methods return at once (default `true`).
    pub enabled: bool,
}

impl Default for GradScalerConfig {
    fn default() -> Self {
        GradScalerConfig {
            init_scale: 65536.0,
            growth_factor: 2.0,
            backoff_factor: 0.5,
            growth_interval: 2000,
            enabled: true,
        }
    }
}

/// Where one optimizer is in the current iteration (PyTorch's `OptState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Neither unscaled nor stepped since the last update.
    Ready,
    /// Its gradients were unscaled.
    Unscaled,
    /// It was stepped (or its step skipped).
    Stepped,
}

/// The state of one optimizer since the last [`GradScaler::update`] (PyTorch's
/// `_per_optimizer_states[id(optimizer)]`).
#[derive(Clone, Debug)]
struct OptimizerState {
    /// The optimizer's first parameter, which stands for the optimizer (`None`: one without
    /// parameters).
    key: Option<Tensor>,
    stage: Stage,
    /// Per device that held gradients: a 0-dim bool tensor, true when one of them had an inf or
    /// NaN (PyTorch's `found_inf_per_device`). Empty until unscaled, and when no parameter had
    /// a gradient.
    found_inf: Vec<(Device, Tensor)>,
}

impl OptimizerState {
    /// Whether any gradient had an inf or NaN (reads the flags on the host).
    fn any_inf(&self) -> bool {
        self.found_inf.iter().any(|(_, flag)| flag.to(&Device::Cpu).item::<bool>())
    }
}

/// The scale and growth tracker, which PyTorch creates lazily at the first `scale()`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Running {
    /// The current scale (PyTorch's 0-dim f32 `_scale`).
    scale: f32,
    /// Steps in a row without inf/NaN gradients since the last growth or backoff (PyTorch's
    /// `_growth_tracker`).
    growth_tracker: usize,
}

/// Dynamic loss scaling (`torch.amp.GradScaler`): [`scale`](GradScaler::scale) the loss
/// before backward, [`step`](GradScaler::step) each optimizer through the scaler (it unscales
/// the gradients and skips the step when one is inf or NaN), then
/// [`update`](GradScaler::update) the scale once per iteration. See the
/// [module docs](crate::amp) for the loop and how it differs from PyTorch.
#[derive(Clone, Debug)]
pub struct GradScaler {
    enabled: bool,
    /// The scale to start from (PyTorch's `_init_scale`: what `get_scale` reports until the
    /// first `scale`).
    init_scale: f64,
    growth_factor: f64,
    backoff_factor: f64,
    growth_interval: usize,
    /// The growth tracker to start from (PyTorch's `_init_growth_tracker`).
    init_growth_tracker: usize,
    /// The scale and growth tracker from the first `scale` on.
    running: Option<Running>,
    /// One entry per optimizer unscaled or stepped since the last update.
    optimizers: Vec<OptimizerState>,
}

impl Default for GradScaler {
    fn default() -> Self {
        GradScaler::new()
    }
}

/// An error unless `value` converts to f32 without overflow (PyTorch's check when it fills its
/// f32 scale tensor: infinities and NaN convert, finite values beyond `f32::MAX` do not).
#[track_caller]
fn check_fits_f32(op: &'static str, what: &str, value: f64) -> Result<()> {
    if value.is_finite() && value.abs() > f32::MAX as f64 {
        bail!(op, Value, "{what} {value:?}: value cannot be converted to type float without overflow");
    }
    Ok(())
}

/// The metadata entry `key` of a scaler's state dict, parsed.
#[track_caller]
fn entry<T: std::str::FromStr>(sd: &StateDict, key: &str) -> Result<T> {
    let Some(text) = sd.metadata(key) else {
        bail!("GradScaler.load_state_dict", Value, "GradScaler state dict has no entry {key:?}");
    };
    match text.trim().parse() {
        Ok(v) => Ok(v),
        Err(_) => bail!(
            "GradScaler.load_state_dict",
            Value,
            "GradScaler state dict entry {key:?} has the unreadable value {text:?}"
        ),
    }
}

/// Multiplies every gradient of `params` by `inv_scale` in place and flags, per device,
/// whether any of them had an inf or NaN before (PyTorch's `_unscale_grads_` with
/// `allow_fp16=False`). Nothing changes when a gradient is f16 or not a float.
#[track_caller]
fn unscale_grads(params: &[Tensor], inv_scale: f32) -> Result<Vec<(Device, Tensor)>> {
    let grads: Vec<Tensor> = params.iter().filter_map(Tensor::grad).collect();
    for g in &grads {
        match g.dtype() {
            DType::F16 => bail!("GradScaler.unscale_", DType, "Attempting to unscale FP16 gradients."),
            d if !d.is_float() => {
                bail!("GradScaler.unscale_", DType, "cannot unscale a gradient of dtype {d} (shape {:?})", g.shape())
            }
            _ => {}
        }
    }
    let _no_grad = crate::no_grad_guard();
    let mut found_inf: Vec<(Device, Tensor)> = Vec::new();
    for g in &grads {
        // Checked before the multiply, as PyTorch's kernel does.
        let bad = g.isfinite().all().logical_not();
        match found_inf.iter_mut().find(|(d, _)| *d == g.device()) {
            Some((_, flag)) => *flag = flag.logical_or(&bad),
            None => found_inf.push((g.device(), bad)),
        }
        if inv_scale != 1.0 {
            match g.dtype() {
                // The product of two f32 values (or of an f64 and an f32) rounds once in the
                // gradient's dtype, as PyTorch's does.
                DType::F32 | DType::F64 => {
                    g.mul_(inv_scale);
                }
                // PyTorch multiplies reduced-precision values in f32 and rounds the product.
                _ => {
                    g.copy_(&g.to_dtype(DType::F32).mul(inv_scale));
                }
            }
        }
    }
    Ok(found_inf)
}

impl GradScaler {
    /// A scaler with PyTorch's defaults: scale 65536, growth ×2 every 2000 clean steps,
    /// backoff ×0.5.
    pub fn new() -> GradScaler {
        GradScaler::try_with_config(GradScalerConfig::default()).or_panic()
    }

    /// A scaler with the options `config`; panics on invalid options (see
    /// [`GradScaler::try_with_config`]).
    #[track_caller]
    pub fn with_config(config: GradScalerConfig) -> GradScaler {
        GradScaler::try_with_config(config).or_panic()
    }

    /// [`GradScaler::with_config`] returning an error: when enabled, a `growth_factor` that is
    /// not above 1 or a `backoff_factor` that is not below 1, NaN included (PyTorch's "The
    /// growth factor must be > 1.0." and "The backoff factor must be < 1.0."), or an
    /// `init_scale` that f32 cannot hold. A disabled scaler takes any options, as in PyTorch.
    #[track_caller]
    pub fn try_with_config(config: GradScalerConfig) -> Result<GradScaler> {
        if config.enabled {
            if config.growth_factor.is_nan() || config.growth_factor <= 1.0 {
                bail!(NAME, Value, "The growth factor must be > 1.0 (got {:?}).", config.growth_factor);
            }
            if config.backoff_factor.is_nan() || config.backoff_factor >= 1.0 {
                bail!(NAME, Value, "The backoff factor must be < 1.0 (got {:?}).", config.backoff_factor);
            }
            check_fits_f32(NAME, "init_scale", config.init_scale)?;
        }
        Ok(GradScaler {
            enabled: config.enabled,
            init_scale: config.init_scale,
            growth_factor: config.growth_factor,
            backoff_factor: config.backoff_factor,
            growth_interval: config.growth_interval,
            init_growth_tracker: 0,
            running: None,
            optimizers: Vec::new(),
        })
    }

    /// The scale and growth tracker; an error when `scale` was never called (PyTorch's
    /// "Attempted {funcname} but _scale is None.").
    #[track_caller]
    fn running(&self, op: &'static str, funcname: &str) -> Result<Running> {
        match self.running {
            Some(r) => Ok(r),
            None => bail!(op, Value, "Attempted {funcname} but _scale is None.  {NOT_STARTED}"),
        }
    }

    /// The index of `optimizer`'s state, created (ready) if it has none.
    fn state_index(&mut self, params: &[Tensor]) -> usize {
        let key = params.first();
        let found = self.optimizers.iter().position(|s| match (&s.key, key) {
            (Some(a), Some(b)) => a.is_same(b),
            (None, None) => true,
            _ => false,
        });
        found.unwrap_or_else(|| {
            self.optimizers.push(OptimizerState { key: key.cloned(), stage: Stage::Ready, found_inf: Vec::new() });
            self.optimizers.len() - 1
        })
    }

    /// `outputs` multiplied by the current scale (`scaler.scale(loss)`), as a tensor op, so
    /// that backward through the result gives gradients times the scale. The first call starts
    /// the scale at `init_scale`. A disabled scaler returns `outputs` itself (a handle to it).
    /// The result has `outputs`' dtype (f32 for an integer tensor); f16 and bf16 values are
    /// multiplied in f32 and rounded, as PyTorch's f32 scale tensor does.
    #[track_caller]
    pub fn scale(&mut self, outputs: &Tensor) -> Tensor {
        if !self.enabled {
            return outputs.clone();
        }
        let running = *self
            .running
            .get_or_insert(Running { scale: self.init_scale as f32, growth_tracker: self.init_growth_tracker });
        let s = running.scale;
        let exact_in = |d: DType| match d {
            DType::F16 => half::f16::from_f32(s).to_f32() == s,
            DType::BF16 => half::bf16::from_f32(s).to_f32() == s,
            _ => true,
        };
        if exact_in(outputs.dtype()) {
            outputs.mul(s)
        } else {
            outputs.to_dtype(DType::F32).mul(s).to_dtype(outputs.dtype())
        }
    }

    /// Divides the gradients of `optimizer`'s parameters by the scale, in place
    /// (`scaler.unscale_(optimizer)`), and notes whether any was inf or NaN; for clipping or
    /// inspecting real gradients before [`GradScaler::step`]. Panics where
    /// [`GradScaler::try_unscale_`] returns an error.
    #[track_caller]
    pub fn unscale_<O: Optimizer + ?Sized>(&mut self, optimizer: &mut O) {
        self.try_unscale_(optimizer).or_panic()
    }

    /// [`GradScaler::unscale_`] returning an error, with PyTorch's messages, and changing no
    /// gradient: when called twice for one optimizer before [`GradScaler::update`] ("unscale_()
    /// has already been called on this optimizer since the last update()."), after
    /// [`GradScaler::step`] ("unscale_() is being called after step()."), before any
    /// [`GradScaler::scale`], or when a gradient is f16 ("Attempting to unscale FP16
    /// gradients."). Does nothing when the scaler is disabled.
    #[track_caller]
    pub fn try_unscale_<O: Optimizer + ?Sized>(&mut self, optimizer: &mut O) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        let running = self.running("GradScaler.unscale_", "unscale_")?;
        let params = optimizer.parameters();
        let i = self.state_index(&params);
        match self.optimizers[i].stage {
            Stage::Unscaled => bail!(
                "GradScaler.unscale_",
                Value,
                "unscale_() has already been called on this optimizer since the last update()."
            ),
            Stage::Stepped => bail!("GradScaler.unscale_", Value, "unscale_() is being called after step()."),
            Stage::Ready => {}
        }
        // PyTorch takes the reciprocal in f64 and rounds it to f32.
        let inv_scale = (1.0 / running.scale as f64) as f32;
        let found_inf = unscale_grads(&params, inv_scale)?;
        let state = &mut self.optimizers[i];
        state.found_inf = found_inf;
        state.stage = Stage::Unscaled;
        Ok(())
    }

    /// Unscales `optimizer`'s gradients (unless [`GradScaler::unscale_`] did already) and
    /// runs `optimizer.step()` unless one of them is inf or NaN (`scaler.step(optimizer)`);
    /// returns whether the optimizer stepped. A disabled scaler just steps (and returns
    /// `true`). Panics where [`GradScaler::try_step`] returns an error.
    #[track_caller]
    pub fn step<O: Optimizer + ?Sized>(&mut self, optimizer: &mut O) -> bool {
        self.try_step(optimizer).or_panic()
    }

    /// [`GradScaler::step`] returning an error, with PyTorch's messages: when called twice for
    /// one optimizer before [`GradScaler::update`] ("step() has already been called since the
    /// last update()."), before any [`GradScaler::scale`], when no parameter of the optimizer
    /// has a gradient ("No inf checks were recorded for this optimizer."), or where
    /// [`GradScaler::try_unscale_`] fails.
    #[track_caller]
    pub fn try_step<O: Optimizer + ?Sized>(&mut self, optimizer: &mut O) -> Result<bool> {
        if !self.enabled {
            optimizer.step();
            return Ok(true);
        }
        self.running("GradScaler.step", "step")?;
        let i = self.state_index(&optimizer.parameters());
        match self.optimizers[i].stage {
            Stage::Stepped => {
                bail!("GradScaler.step", Value, "step() has already been called since the last update().")
            }
            Stage::Ready => self.try_unscale_(optimizer)?,
            Stage::Unscaled => {}
        }
        let state = &self.optimizers[i];
        if state.found_inf.is_empty() {
            bail!("GradScaler.step", Value, "No inf checks were recorded for this optimizer.");
        }
        let found_inf = state.any_inf();
        if !found_inf {
            optimizer.step();
        }
        self.optimizers[i].stage = Stage::Stepped;
        Ok(!found_inf)
    }

    /// Updates the scale at the end of an iteration (`scaler.update()`), as PyTorch's
    /// `_amp_update_scale_`: when a gradient of any optimizer stepped since the last update
    /// was inf or NaN, the scale is multiplied by `backoff_factor` and the growth tracker reset;
    /// otherwise the tracker counts one more clean step, and when it reaches `growth_interval`
    /// the scale is multiplied by `growth_factor` (unless that overflows f32) and the tracker
    /// reset. Then every optimizer's state is forgotten. Does nothing when disabled. Panics
    /// where [`GradScaler::try_update`] returns an error.
    #[track_caller]
    pub fn update(&mut self) {
        self.try_update().or_panic()
    }

    /// [`GradScaler::update`] returning an error, with PyTorch's messages: before any
    /// [`GradScaler::scale`], or when no optimizer was unscaled or stepped since the last
    /// update ("No inf checks were recorded prior to update.").
    #[track_caller]
    pub fn try_update(&mut self) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        let Running { scale, growth_tracker } = self.running("GradScaler.update", "update")?;
        if self.optimizers.iter().all(|s| s.found_inf.is_empty()) {
            bail!("GradScaler.update", Value, "No inf checks were recorded prior to update.");
        }
        let found_inf = self.optimizers.iter().any(OptimizerState::any_inf);
        let next = if found_inf {
            Running { scale: (scale as f64 * self.backoff_factor) as f32, growth_tracker: 0 }
        } else {
            let successful = growth_tracker + 1;
            if successful == self.growth_interval {
                let grown = (scale as f64 * self.growth_factor) as f32;
                Running { scale: if grown.is_finite() { grown } else { scale }, growth_tracker: 0 }
            } else {
                Running { scale, growth_tracker: successful }
            }
        };
        self.running = Some(next);
        self.optimizers.clear();
        Ok(())
    }

    /// Sets the scale to `new_scale` instead of updating it (`scaler.update(new_scale)`); the
    /// growth tracker is kept, every optimizer's state forgotten. Does nothing when disabled.
    /// Panics where [`GradScaler::try_update_with`] returns an error.
    #[track_caller]
    pub fn update_with(&mut self, new_scale: f64) {
        self.try_update_with(new_scale).or_panic()
    }

    /// [`GradScaler::update_with`] returning an error: before any [`GradScaler::scale`], or
    /// when f32 cannot hold `new_scale`.
    #[track_caller]
    pub fn try_update_with(&mut self, new_scale: f64) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        let running = self.running("GradScaler.update", "update")?;
        check_fits_f32("GradScaler.update", "new_scale", new_scale)?;
        self.running = Some(Running { scale: new_scale as f32, ..running });
        self.optimizers.clear();
        Ok(())
    }

    /// The current scale (`scaler.get_scale()`): `init_scale` until the first
    /// [`GradScaler::scale`], then the f32 scale; 1.0 when disabled.
    pub fn get_scale(&self) -> f64 {
        match (self.enabled, self.running) {
            (false, _) => 1.0,
            (true, Some(r)) => r.scale as f64,
            (true, None) => self.init_scale,
        }
    }

    /// The number of steps in a row without inf/NaN gradients since the scale last changed
    /// (PyTorch's `scaler._get_growth_tracker()`); 0 when disabled.
    pub fn get_growth_tracker(&self) -> usize {
        match (self.enabled, self.running) {
            (false, _) => 0,
            (true, Some(r)) => r.growth_tracker,
            (true, None) => self.init_growth_tracker,
        }
    }

    /// The growth factor (`scaler.get_growth_factor()`).
    pub fn get_growth_factor(&self) -> f64 {
        self.growth_factor
    }

    /// Sets the growth factor (`scaler.set_growth_factor(f)`; not checked, as in PyTorch).
    pub fn set_growth_factor(&mut self, new_factor: f64) {
        self.growth_factor = new_factor;
    }

    /// The backoff factor (`scaler.get_backoff_factor()`).
    pub fn get_backoff_factor(&self) -> f64 {
        self.backoff_factor
    }

    /// Sets the backoff factor (`scaler.set_backoff_factor(f)`; not checked, as in PyTorch).
    pub fn set_backoff_factor(&mut self, new_factor: f64) {
        self.backoff_factor = new_factor;
    }

    /// The growth interval (`scaler.get_growth_interval()`).
    pub fn get_growth_interval(&self) -> usize {
        self.growth_interval
    }

    /// Sets the growth interval (`scaler.set_growth_interval(n)`; 0 never grows the scale).
    pub fn set_growth_interval(&mut self, new_interval: usize) {
        self.growth_interval = new_interval;
    }

    /// Whether the scaler is enabled (`scaler.is_enabled()`).
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// The scaler's state (`scaler.state_dict()`): PyTorch's keys `scale`, `growth_factor`,
    /// `backoff_factor`, `growth_interval` and `_growth_tracker` as metadata (floats as text
    /// that parses back to the same bits); empty when disabled. Take it after
    /// [`GradScaler::update`]: the per-optimizer state of an unfinished iteration is not saved.
    pub fn state_dict(&self) -> StateDict {
        let mut sd = StateDict::new();
        if self.enabled {
            sd.set_metadata("scale", format!("{:?}", self.get_scale()));
            sd.set_metadata("growth_factor", format!("{:?}", self.growth_factor));
            sd.set_metadata("backoff_factor", format!("{:?}", self.backoff_factor));
            sd.set_metadata("growth_interval", self.growth_interval.to_string());
            sd.set_metadata("_growth_tracker", self.get_growth_tracker().to_string());
        }
        sd
    }

    /// Restores a state written by [`GradScaler::state_dict`] (or PyTorch's, with its keys;
    /// `scaler.load_state_dict(sd)`). Does nothing when disabled. An error, changing nothing,
    /// for an empty state dict (PyTorch's "The source state dict is empty, possibly because it
    /// was saved from a disabled instance of GradScaler."), a missing or unreadable entry, or a
    /// scale that f32 cannot hold; the factors are not checked, as in PyTorch.
    #[track_caller]
    pub fn load_state_dict(&mut self, sd: &StateDict) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        if sd.is_empty() && sd.metadata_entries().is_empty() {
            bail!(
                "GradScaler.load_state_dict",
                Value,
                "The source state dict is empty, possibly because it was saved from a disabled instance of GradScaler."
            );
        }
        let scale: f64 = entry(sd, "scale")?;
        let growth_factor: f64 = entry(sd, "growth_factor")?;
        let backoff_factor: f64 = entry(sd, "backoff_factor")?;
        let growth_interval: usize = entry(sd, "growth_interval")?;
        let growth_tracker: usize = entry(sd, "_growth_tracker")?;
        check_fits_f32("GradScaler.load_state_dict", "scale", scale)?;
        self.init_scale = scale;
        self.growth_factor = growth_factor;
        self.backoff_factor = backoff_factor;
        self.growth_interval = growth_interval;
        self.init_growth_tracker = growth_tracker;
        if self.running.is_some() {
            self.running = Some(Running { scale: scale as f32, growth_tracker });
        }
        Ok(())
    }
}
