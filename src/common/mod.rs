//! The shared library every tool stands on: one module per concern.
//!
//! What the kernel has (`prober`), what we attach (`plan`, chosen by `hooks` and `blk`), loading
//! it (`load`, `libbpf`), reading what the programs gathered (`maps`, `events`, `unseen`), naming
//! what was lost (`losses`), showing it (`report`, `hist`, `ioevent`), and running a tool from
//! its options to its exit status (`runner`, `cli`, `error`).
pub mod blk;
pub mod cli;
pub mod disk;
pub mod docs;
pub mod error;
pub mod events;
pub mod filter;
pub mod hist;
pub mod hooks;
pub mod ioevent;
pub mod libbpf;
pub mod load;
pub mod losses;
pub mod maps;
pub mod plan;
pub mod prober;
pub mod report;
pub mod reqflags;
pub mod runner;
pub mod stacks;
pub mod syscalls;
pub mod threshold;
pub mod unseen;
