//! The shared library every tool stands on, one folder per concept:
//!
//! - `kernel`: what this kernel has (`prober`) and what we attach there (`plan`, the `hooks`
//!   planners, the `syscalls` table);
//! - `load`: loading a plan's BPF object, reading its maps and ring buffers, libbpf's messages;
//! - `cgroup`: cgroup v2, which to trace (`--cgroup`) and whose a histogram is (`--per-cgroup`);
//! - `block`: the block layer (hooks and stamps, disks, request flags, `unseen` I/Os);
//! - `report`: what a person sees (histograms, reports, per-event lines, kernel stacks);
//! - `run`: running a tool from its command line to its exit status (the runner, flags, man
//!   pages, errors, task filters, thresholds);
//! - `losses`: the one vocabulary of what a tool could not account.
pub mod block;
pub mod cgroup;
pub mod kernel;
pub mod load;
pub mod losses;
pub mod report;
pub mod run;
