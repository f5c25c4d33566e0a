//! What the kernel has and what we attach: small named predicates over BTF, tracefs, kallsyms
//! and trial loads (`prober`); every hook choice as data with a reason (`plan`); the planners
//! that turn one into the other (`hooks`); the system calls as users group them (`syscalls`).
pub mod hooks;
pub mod plan;
pub mod prober;
pub mod syscalls;
