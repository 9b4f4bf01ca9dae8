//! `StateDict`: PyTorch's `state_dict()` — named tensors in insertion order, plus string
//! metadata for the non-tensor parts (an optimizer's hyperparameters, a scheduler's counters,
//! a checkpoint's epoch). It is what `kiln::save` writes as safetensors and `kiln::load` reads.

use crate::Tensor;
use std::collections::BTreeMap;

/// Named tensors in insertion order (PyTorch's `OrderedDict`) and string metadata.
#[derive(Clone, Default)]
pub struct StateDict {
    entries: Vec<(String, Tensor)>,
    metadata: BTreeMap<String, String>,
}

impl StateDict {
    /// An empty state dict.
    pub fn new() -> StateDict {
        StateDict::default()
    }

    /// Adds `tensor` under `name`, replacing (in place, keeping its position) any tensor that
    /// already has that name.
    pub fn insert(&mut self, name: impl Into<String>, tensor: Tensor) {
        let name = name.into();
        match self.entries.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = tensor,
            None => self.entries.push((name, tensor)),
        }
    }

    /// The tensor named `name`.
    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.entries.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }

    /// Removes and returns the tensor named `name`.
    pub fn remove(&mut self, name: &str) -> Option<Tensor> {
        let at = self.entries.iter().position(|(n, _)| n == name)?;
        Some(self.entries.remove(at).1)
    }

    /// Whether a tensor is named `name`.
    pub fn contains_key(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// The tensor names in insertion order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(n, _)| n.as_str())
    }

    /// `(name, tensor)` pairs in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Tensor)> {
        self.entries.iter().map(|(n, t)| (n.as_str(), t))
    }

    /// The number of tensors.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no tensors.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Sets the metadata entry `key` to `value`.
    pub fn set_metadata(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.metadata.insert(key.into(), value.into());
    }

    /// The metadata entry `key`.
    pub fn metadata(&self, key: &str) -> Option<&str> {
        self.metadata.get(key).map(String::as_str)
    }

    /// Every metadata entry, sorted by key.
    pub fn metadata_entries(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    /// Adds every tensor and metadata entry of `other` with `prefix` in front of its name
    /// (`"conv1."` + `"weight"`), the way a module nests its children's state.
    pub fn extend_prefixed(&mut self, prefix: &str, other: StateDict) {
        for (name, tensor) in other.entries {
            self.insert(format!("{prefix}{name}"), tensor);
        }
        for (key, value) in other.metadata {
            self.set_metadata(format!("{prefix}{key}"), value);
        }
    }
}

impl std::fmt::Debug for StateDict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut map = f.debug_map();
        for (name, t) in &self.entries {
            map.entry(name, &format_args!("{:?} {:?}", t.shape(), t.dtype()));
        }
        map.finish()?;
        if !self.metadata.is_empty() {
            write!(f, " metadata {:?}", self.metadata)?;
        }
        Ok(())
    }
}

impl<S: Into<String>> FromIterator<(S, Tensor)> for StateDict {
    fn from_iter<I: IntoIterator<Item = (S, Tensor)>>(iter: I) -> StateDict {
        let mut sd = StateDict::new();
        for (name, t) in iter {
            sd.insert(name, t);
        }
        sd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_insertion_order_and_replaces_in_place() {
        let mut sd = StateDict::new();
        sd.insert("b", Tensor::zeros([1]));
        sd.insert("a", Tensor::zeros([2]));
        sd.insert("b", Tensor::zeros([3]));
        assert_eq!(sd.keys().collect::<Vec<_>>(), ["b", "a"]);
        assert_eq!(sd.get("b").unwrap().shape(), &[3]);
        assert!(sd.remove("b").is_some());
        assert_eq!(sd.len(), 1);
    }

    #[test]
    fn prefixes_nested_state() {
        let mut child = StateDict::new();
        child.insert("weight", Tensor::zeros([1]));
        child.set_metadata("step", "3");
        let mut sd = StateDict::new();
        sd.extend_prefixed("fc1.", child);
        assert!(sd.contains_key("fc1.weight"));
        assert_eq!(sd.metadata("fc1.step"), Some("3"));
    }
}
