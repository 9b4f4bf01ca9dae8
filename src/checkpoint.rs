//! `kiln::save_checkpoint` / `kiln::load_checkpoint`: one file for everything training needs
//! to resume, the PyTorch guides' `torch.save({'epoch': …, 'model_state_dict': …,
//! 'optimizer_state_dict': …}, PATH)` as one safetensors file written atomically by
//! [`crate::save`].
//!
//! Each named part (a model's, optimizer's, scheduler's or GradScaler's state dict, or any
//! other) is stored with its name and a dot in front of its tensors and metadata
//! (`model.fc1.weight`, `optimizer.state.0.exp_avg`); the file's metadata also holds the part
//! names (`checkpoint.parts`), the epoch (`checkpoint.epoch`) and the global generator's state
//! (`checkpoint.rng_seed`, `checkpoint.rng_offset`), so draws after a resumed run's restore
//! continue the saved run's sequence.

use crate::error::{Error, ErrorKind, Result};
use crate::random::{default_generator, GeneratorState};
use crate::StateDict;
use std::panic::Location;
use std::path::Path;

/// Metadata keys of the checkpoint itself (no part may be named `checkpoint`).
const PARTS: &str = "checkpoint.parts";
const EPOCH: &str = "checkpoint.epoch";
const RNG_SEED: &str = "checkpoint.rng_seed";
const RNG_OFFSET: &str = "checkpoint.rng_offset";

/// A checkpoint read by [`load_checkpoint`]: its parts, the epoch and the generator state it
/// was saved with.
#[derive(Clone, Debug)]
pub struct Checkpoint {
    state: StateDict,
    parts: Vec<String>,
    epoch: u64,
    rng: GeneratorState,
}

impl Checkpoint {
    /// The epoch it was saved at.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The names of its parts, in the order they were saved.
    pub fn parts(&self) -> &[String] {
        &self.parts
    }

    /// Part `name`'s state dict, as it was given to [`save_checkpoint`] (for
    /// `net.load_state_dict(&ck.part("model")?)`); an error names the parts there are.
    #[track_caller]
    pub fn part(&self, name: &str) -> Result<StateDict> {
        if !self.parts.iter().any(|p| p == name) {
            return Err(Error::at(
                "load_checkpoint",
                ErrorKind::Value,
                format!("the checkpoint has no part {name:?}; its parts are {:?}", self.parts),
                Location::caller(),
            ));
        }
        let prefix = format!("{name}.");
        let mut part = StateDict::new();
        for (key, t) in self.state.iter() {
            if let Some(rest) = key.strip_prefix(&prefix) {
                part.insert(rest, t.clone());
            }
        }
        for (key, value) in self.state.metadata_entries() {
            if let Some(rest) = key.strip_prefix(&prefix) {
                part.set_metadata(rest, value.clone());
            }
        }
        Ok(part)
    }

    /// The global generator's state when it was saved.
    pub fn rng_state(&self) -> GeneratorState {
        self.rng
    }

    /// Sets the global generator back to the saved state (`torch.set_rng_state`), so the
    /// resumed run draws what the saved one would have drawn next.
    pub fn restore_rng_state(&self) -> Result<()> {
        default_generator().try_set_state(self.rng)?;
        Ok(())
    }
}

/// Writes `parts` (name, state dict), `epoch` and the global generator's state to `path` as
/// one safetensors file, atomically ([`crate::save`]). Part names are non-empty, unique, free
/// of dots and not `checkpoint`; parts are on the CPU.
///
/// ```no_run
/// # use kiln::{nn::Module, optim::{Optimizer, SGD, SGDConfig}};
/// # let net = kiln::nn::Linear::new(2, 2);
/// # let opt = SGD::new(net.parameters(), SGDConfig::default());
/// kiln::save_checkpoint("run.safetensors", 3, &[("model", net.state_dict()), ("optimizer", opt.state_dict())])?;
/// # Ok::<(), kiln::Error>(())
/// ```
#[track_caller]
pub fn save_checkpoint(path: impl AsRef<Path>, epoch: u64, parts: &[(&str, StateDict)]) -> Result<()> {
    let at = Location::caller();
    let mut state = StateDict::new();
    let mut names: Vec<&str> = Vec::with_capacity(parts.len());
    for (name, part) in parts {
        if name.is_empty() || name.contains('.') || *name == "checkpoint" || names.contains(name) {
            return Err(Error::at(
                "save_checkpoint",
                ErrorKind::Value,
                format!("part name {name:?} must be non-empty, unique, without dots and not \"checkpoint\""),
                at,
            ));
        }
        names.push(name);
        state.extend_prefixed(&format!("{name}."), part.clone());
    }
    let rng = default_generator().get_state();
    state.set_metadata(PARTS, names.join(","));
    state.set_metadata(EPOCH, epoch.to_string());
    state.set_metadata(RNG_SEED, rng.seed.to_string());
    state.set_metadata(RNG_OFFSET, rng.offset.to_string());
    crate::serialize::save_at(&state, path.as_ref(), at)
}

/// Reads a checkpoint written by [`save_checkpoint`]; its parts are then restored one by one
/// (`net.load_state_dict(&ck.part("model")?)?`), the generator by
/// [`Checkpoint::restore_rng_state`]. Errors name a file that cannot be read or is not a
/// checkpoint (a plain state dict from [`crate::save`]: use [`crate::load`]).
#[track_caller]
pub fn load_checkpoint(path: impl AsRef<Path>) -> Result<Checkpoint> {
    let at = Location::caller();
    let path = path.as_ref();
    let state = crate::serialize::load_at(path, at)?;
    let bad = |what: String| {
        Error::at(
            "load_checkpoint",
            ErrorKind::Value,
            format!("{} is not a kiln checkpoint: {what}", path.display()),
            at,
        )
    };
    let get = |key: &str| {
        state
            .metadata(key)
            .ok_or_else(|| bad(format!("no {key} entry (a state dict saved by kiln::save? read it with kiln::load)")))
    };
    let number = |key: &str| get(key)?.parse::<u64>().map_err(|e| bad(format!("{key}: {e}")));
    let parts = get(PARTS)?.split(',').filter(|p| !p.is_empty()).map(str::to_string).collect();
    let (epoch, seed, offset) = (number(EPOCH)?, number(RNG_SEED)?, number(RNG_OFFSET)?);
    Ok(Checkpoint { parts, epoch, rng: GeneratorState { seed, offset }, state })
}
