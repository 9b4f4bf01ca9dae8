//! Code the examples share (`mod common;` in an example): not an example itself.

// Each example compiles this module on its own and uses part of it.
#![allow(dead_code)]

pub mod lm;
pub mod mnist;
