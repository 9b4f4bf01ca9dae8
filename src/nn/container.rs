//! `Sequential` and `ModuleList`: modules that hold other modules under index names.

use super::module::{FieldVisitor, FieldVisitorMut, Visit};
use crate::nn::Module;
use crate::Tensor;

/// Visits `modules` as children named `0`, `1`, ….
fn visit_indexed<'a>(modules: &'a [Box<dyn Module>], visitor: &mut dyn FieldVisitor<'a>) {
    for (i, m) in modules.iter().enumerate() {
        visitor.child(&i.to_string(), m.as_ref());
    }
}

fn visit_indexed_mut(modules: &mut [Box<dyn Module>], visitor: &mut dyn FieldVisitorMut) {
    for (i, m) in modules.iter_mut().enumerate() {
        visitor.child(&i.to_string(), m.as_mut());
    }
}

/// Modules applied one after another (`nn.Sequential(a, b, c)` is
/// `Sequential::new().add(a).add(b).add(c)`); children are named `0`, `1`, ….
pub struct Sequential {
    modules: Vec<Box<dyn Module>>,
    training: bool,
}

impl Sequential {
    /// An empty sequence (the identity).
    pub fn new() -> Sequential {
        Sequential::from(Vec::new())
    }

    /// The sequence with `module` appended (builder form).
    pub fn add(mut self, module: impl Module + 'static) -> Sequential {
        self.modules.push(Box::new(module));
        self
    }

    /// Appends `module` (`seq.append(m)`).
    pub fn push(&mut self, module: impl Module + 'static) {
        self.modules.push(Box::new(module));
    }

    /// The number of modules.
    pub fn len(&self) -> usize {
        self.modules.len()
    }

    /// Whether the sequence is empty.
    pub fn is_empty(&self) -> bool {
        self.modules.is_empty()
    }

    /// The `i`-th module (`seq[i]`).
    pub fn get(&self, i: usize) -> Option<&dyn Module> {
        self.modules.get(i).map(|m| m.as_ref())
    }
}

impl From<Vec<Box<dyn Module>>> for Sequential {
    fn from(modules: Vec<Box<dyn Module>>) -> Sequential {
        Sequential { modules, training: true }
    }
}

impl Visit for Sequential {
    fn type_name(&self) -> String {
        "Sequential".into()
    }
    fn own_training(&self) -> Option<bool> {
        Some(self.training)
    }
    fn set_own_training(&mut self, mode: bool) {
        self.training = mode;
    }
    fn visit_fields<'a>(&'a self, visitor: &mut dyn FieldVisitor<'a>) {
        visit_indexed(&self.modules, visitor)
    }
    fn visit_fields_mut(&mut self, visitor: &mut dyn FieldVisitorMut) {
        visit_indexed_mut(&mut self.modules, visitor)
    }
    fn as_dyn(&self) -> &dyn Module {
        self
    }
    fn as_dyn_mut(&mut self) -> &mut dyn Module {
        self
    }
}

impl Module for Sequential {
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        self.modules.iter().fold(input.clone(), |x, m| m.forward(&x))
    }
}

impl std::fmt::Display for Sequential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        super::fmt_module(self, f)
    }
}

/// A list of modules registered as children `0`, `1`, … (`nn.ModuleList`). Like PyTorch's, it
/// has no `forward` of its own: iterate over it in the owner's `forward`.
pub struct ModuleList {
    modules: Vec<Box<dyn Module>>,
    training: bool,
}

impl ModuleList {
    /// An empty list.
    pub fn new() -> ModuleList {
        ModuleList::from(Vec::new())
    }

    /// Appends `module`.
    pub fn push(&mut self, module: impl Module + 'static) {
        self.modules.push(Box::new(module));
    }

    /// The number of modules.
    pub fn len(&self) -> usize {
        self.modules.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.modules.is_empty()
    }

    /// The `i`-th module.
    pub fn get(&self, i: usize) -> Option<&dyn Module> {
        self.modules.get(i).map(|m| m.as_ref())
    }

    /// The modules in order.
    pub fn iter(&self) -> impl Iterator<Item = &dyn Module> {
        self.modules.iter().map(|m| m.as_ref())
    }
}

impl From<Vec<Box<dyn Module>>> for ModuleList {
    fn from(modules: Vec<Box<dyn Module>>) -> ModuleList {
        ModuleList { modules, training: true }
    }
}

impl Visit for ModuleList {
    fn type_name(&self) -> String {
        "ModuleList".into()
    }
    fn own_training(&self) -> Option<bool> {
        Some(self.training)
    }
    fn set_own_training(&mut self, mode: bool) {
        self.training = mode;
    }
    fn visit_fields<'a>(&'a self, visitor: &mut dyn FieldVisitor<'a>) {
        visit_indexed(&self.modules, visitor)
    }
    fn visit_fields_mut(&mut self, visitor: &mut dyn FieldVisitorMut) {
        visit_indexed_mut(&mut self.modules, visitor)
    }
    fn as_dyn(&self) -> &dyn Module {
        self
    }
    fn as_dyn_mut(&mut self) -> &mut dyn Module {
        self
    }
}

impl Module for ModuleList {
    /// Panics: a `ModuleList` is a container, not a layer (as in PyTorch).
    #[track_caller]
    fn forward(&self, _input: &Tensor) -> Tensor {
        panic!("ModuleList: a ModuleList has no forward; call its modules in the owner's forward")
    }
}

impl std::fmt::Display for ModuleList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        super::fmt_module(self, f)
    }
}

impl Default for Sequential {
    fn default() -> Sequential {
        Sequential::new()
    }
}

impl Default for ModuleList {
    fn default() -> ModuleList {
        ModuleList::new()
    }
}
