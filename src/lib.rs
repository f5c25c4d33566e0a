//! iostack: the shared library (`common`) and the tools built on it (`tools`).
pub mod common;
pub mod tools;
