//! The shared library every tool stands on: one module per concern.
pub mod blk;
pub mod bpf;
pub mod cli;
pub mod disk;
pub mod error;
pub mod events;
pub mod filter;
pub mod hist;
pub mod ioevent;
pub mod output;
pub mod probe;
pub mod reqflags;
pub mod runloop;
pub mod stacks;
pub mod syscalls;
pub mod threshold;
pub mod unseen;
