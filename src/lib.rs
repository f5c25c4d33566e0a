//! iostack: the shared library behind every tool (`common`).
pub mod common;
