//! `Sequential` and `ModuleList`: modules that hold other modules under index names.

use super::module::{FieldVisitor, FieldVisitorMut, Visit};
use crate::nn::Module;
use crate::Tensor;

/// Defines a container of boxed modules, children named `0`, `1`, …, with its own train flag,
/// and everything the two containers share (construction, access, the field walk, printing).
macro_rules! module_container {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        pub struct $name {
            modules: Vec<Box<dyn Module>>,
            training: bool,
        }

        impl $name {
            /// An empty container.
            pub fn new() -> $name {
                $name::from(Vec::new())
            }

            /// Appends `module` (`append(m)`).
            pub fn push(&mut self, module: impl Module + 'static) {
                self.modules.push(Box::new(module));
            }

            /// The number of modules.
            pub fn len(&self) -> usize {
                self.modules.len()
            }

            /// Whether there are no modules.
            pub fn is_empty(&self) -> bool {
                self.modules.is_empty()
            }

            /// The `i`-th module (`container[i]`).
            pub fn get(&self, i: usize) -> Option<&dyn Module> {
                self.modules.get(i).map(|m| m.as_ref())
            }

            /// The modules in order.
            pub fn iter(&self) -> impl Iterator<Item = &dyn Module> {
                self.modules.iter().map(|m| m.as_ref())
            }
        }

        impl Default for $name {
            fn default() -> $name {
                $name::new()
            }
        }

        impl From<Vec<Box<dyn Module>>> for $name {
            fn from(modules: Vec<Box<dyn Module>>) -> $name {
                $name { modules, training: true }
            }
        }

        impl Visit for $name {
            fn type_name(&self) -> String {
                stringify!($name).into()
            }
            fn visit_fields<'a>(&'a self, visitor: &mut dyn FieldVisitor<'a>) {
                for (i, m) in self.modules.iter().enumerate() {
                    visitor.child(&i.to_string(), m.as_ref());
                }
            }
            fn visit_fields_mut(&mut self, visitor: &mut dyn FieldVisitorMut) {
                for (i, m) in self.modules.iter_mut().enumerate() {
                    visitor.child(&i.to_string(), m.as_mut());
                }
            }
            fn own_training(&self) -> Option<bool> {
                Some(self.training)
            }
            fn set_own_training(&mut self, mode: bool) {
                self.training = mode;
            }
            fn as_dyn(&self) -> &dyn Module {
                self
            }
            fn as_dyn_mut(&mut self) -> &mut dyn Module {
                self
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                super::fmt_module(self, f)
            }
        }
    };
}

module_container!(
    /// Modules applied one after another (`nn.Sequential(a, b, c)` is
    /// `Sequential::new().add(a).add(b).add(c)`); children are named `0`, `1`, ….
    Sequential
);

module_container!(
    /// A list of modules registered as children `0`, `1`, … (`nn.ModuleList`). Like PyTorch's,
    /// it has no `forward` of its own: iterate over it in the owner's `forward`.
    ModuleList
);

impl Sequential {
    /// The sequence with `module` appended (builder form).
    #[allow(clippy::should_implement_trait)] // PyTorch's `add_module`, not arithmetic
    pub fn add(mut self, module: impl Module + 'static) -> Sequential {
        self.push(module);
        self
    }
}

impl Module for Sequential {
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        let layer = crate::nn::summary::enter(self);
        layer.exit(self.modules.iter().fold(input.clone(), |x, m| m.forward(&x)))
    }
}

impl Module for ModuleList {
    /// Panics: a `ModuleList` is a container, not a layer (as in PyTorch).
    #[track_caller]
    fn forward(&self, _input: &Tensor) -> Tensor {
        panic!("ModuleList: a ModuleList has no forward; call its modules in the owner's forward")
    }
}
