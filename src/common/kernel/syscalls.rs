//! System calls as users think of them: named groups (`read`, `write`, `sync`, `open`) of the
//! architecture's syscalls, with numbers from the `libc` crate (the target's ABI, not a table
//! of our own), the `-s`/`--per-syscall` selection of what gets its own histogram, and where to
//! hook them on this kernel (`plan_syscall_hooks`, for the programs of
//! `src/bpf/lib/syscalls.bpf.h`).

use anyhow::{bail, Context, Result};
use clap::ValueEnum;

use crate::common::kernel::hooks::raw_tracepoint_flavor;
use crate::common::kernel::plan::{AttachPlan, Flavor};
use crate::common::kernel::prober::Prober;

/// One syscall: its name and its number on this architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Syscall {
    pub name: &'static str,
    pub nr: i64,
}

const fn sys(name: &'static str, nr: i64) -> Syscall {
    Syscall { name, nr }
}

/// A group of syscalls reported together.
#[derive(Debug)]
pub struct SyscallGroup {
    pub name: &'static str,
    pub members: &'static [Syscall],
}

/// The operations syslat knows, in display order.
pub const GROUPS: &[SyscallGroup] = &[
    SyscallGroup {
        name: "read",
        members: &[
            sys("read", libc::SYS_read),
            sys("pread64", libc::SYS_pread64),
            sys("readv", libc::SYS_readv),
            sys("preadv", libc::SYS_preadv),
            sys("preadv2", libc::SYS_preadv2),
        ],
    },
    SyscallGroup {
        name: "write",
        members: &[
            sys("write", libc::SYS_write),
            sys("pwrite64", libc::SYS_pwrite64),
            sys("writev", libc::SYS_writev),
            sys("pwritev", libc::SYS_pwritev),
            sys("pwritev2", libc::SYS_pwritev2),
        ],
    },
    SyscallGroup {
        name: "sync",
        members: &[
            sys("fsync", libc::SYS_fsync),
            sys("fdatasync", libc::SYS_fdatasync),
            sys("sync", libc::SYS_sync),
            sys("syncfs", libc::SYS_syncfs),
            sys("sync_file_range", libc::SYS_sync_file_range),
        ],
    },
    SyscallGroup {
        name: "open",
        members: &[
            sys("open", libc::SYS_open),
            sys("openat", libc::SYS_openat),
            sys("openat2", libc::SYS_openat2),
        ],
    },
];

/// What one histogram covers: a label and the syscalls counted in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TracedOp {
    pub label: String,
    pub members: Vec<Syscall>,
}

fn find_syscall(name: &str) -> Option<Syscall> {
    GROUPS
        .iter()
        .flat_map(|g| g.members.iter())
        .find(|s| s.name == name)
        .copied()
}

/// Every name `-s` accepts, for the error message.
pub fn valid_names() -> String {
    let mut names: Vec<&str> = GROUPS.iter().map(|g| g.name).collect();
    names.extend(
        GROUPS
            .iter()
            .flat_map(|g| g.members.iter())
            .map(|s| s.name)
            .filter(|n| GROUPS.iter().all(|g| g.name != *n)),
    );
    names.join(", ")
}

/// Turns `-s read,fsync` (groups or single syscalls; all groups when empty) into the histograms
/// to keep. `per_syscall` splits each group into its members.
pub fn select(names: &[String], per_syscall: bool) -> Result<Vec<TracedOp>> {
    let wanted: Vec<&str> = if names.is_empty() {
        GROUPS.iter().map(|g| g.name).collect()
    } else {
        names.iter().map(|s| s.trim()).collect()
    };
    let mut ops: Vec<TracedOp> = Vec::new();
    for name in wanted {
        let members: Vec<Syscall> = match GROUPS.iter().find(|g| g.name == name) {
            // `read` names both a group and a syscall: the group wins, as users mean it.
            Some(g) => g.members.to_vec(),
            None => match find_syscall(name) {
                Some(s) => vec![s],
                None => bail!(
                    "unknown syscall or group '{name}': choose from {}",
                    valid_names()
                ),
            },
        };
        for s in &members {
            if let Some(other) = ops.iter().find(|o| o.members.contains(s)) {
                bail!(
                    "{} is selected twice (in '{}' and '{name}'): name it once",
                    s.name,
                    other.label
                );
            }
        }
        if per_syscall {
            ops.extend(members.into_iter().map(|s| TracedOp {
                label: s.name.to_string(),
                members: vec![s],
            }));
        } else {
            ops.push(TracedOp {
                label: name.to_string(),
                members,
            });
        }
    }
    Ok(ops)
}

/// sys_enter/sys_exit through tp_btf/// Must match SYSCALLS_MAX_NR in src/bpf/lib/syscalls.bpf.h.
pub const MAX_NR: usize = 1024;

/// How a tool hooks system calls (default: the best this kernel allows).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Attach {
    #[default]
    Auto,
    TpBtf,
    RawTp,
    Tracepoint,
}

/// Fills the BPF side's `sys_slot` table: syscall number -> 1 + index of its op in `ops` (0 means
/// "not traced").
pub fn fill_syscall_slots(table: &mut [u8; MAX_NR], ops: &[TracedOp]) -> Result<()> {
    for (i, op) in ops.iter().enumerate() {
        for s in &op.members {
            // Numbers beyond the table cannot be traced.
            let nr = usize::try_from(s.nr).ok().filter(|&nr| nr < MAX_NR);
            let nr = nr.with_context(|| format!("{} has number {}", s.name, s.nr))?;
            table[nr] = u8::try_from(i + 1).context("more than 255 traced operations")?;
        }
    }
    Ok(())
}

/// Where the I/O syscalls are hooked, added to `plan`: by default one perf tracepoint pair per
/// traced syscall (syscalls:sys_enter_read...), so that no program runs on the machine's other
/// syscalls (a getpid, a futex); where tracefs or those tracepoints are missing, sys_enter and
/// sys_exit through tp_btf or raw_tp (one program each for every syscall of the machine, which
/// the in-kernel table filters).
pub fn plan_syscall_hooks(
    prober: &Prober,
    plan: &mut AttachPlan,
    attach: Attach,
    ops: &[TracedOp],
) -> Result<()> {
    // Why there are no per-syscall tracepoints here, for the explanation of the choice made
    // instead (asked once: it reads tracefs for each traced syscall).
    let mut missing = None;
    let only = match attach {
        Attach::Auto => match per_syscall_tracepoints(prober, ops) {
            Ok(()) => {
                return plan_per_syscall_tracepoints(
                    prober,
                    plan,
                    ops,
                    "no program runs on the machine's other syscalls (fentry on the syscalls would take an enter and an exit program per syscall, each verified at start-up)".into(),
                )
            }
            Err(e) => {
                missing = Some(e);
                None
            }
        },
        Attach::TpBtf => Some(Flavor::TpBtf),
        Attach::RawTp => Some(Flavor::RawTp),
        Attach::Tracepoint => {
            return plan_per_syscall_tracepoints(prober, plan, ops, "forced by --attach".into())
        }
    };
    let (flavor, why) = match raw_tracepoint_flavor(prober, "sys_enter", only) {
        Ok(choice) => choice,
        Err(e) if attach == Attach::Auto => {
            return plan_per_syscall_tracepoints(prober, plan, ops, e);
        }
        Err(e) => {
            bail!("--attach {attach:?} is not possible on this kernel ({e}); try --attach auto")
        }
    };
    let why = match missing {
        Some(e) => format!("{why}; one program on every syscall: {e}"),
        None => why,
    };
    let (enter, exit, task_exit) = match flavor {
        Flavor::TpBtf => ("sys_enter_btf", "sys_exit_btf", "task_exit_btf"),
        _ => ("sys_enter_raw", "sys_exit_raw", "task_exit_raw"),
    };
    plan.add("enter", enter, flavor, "sys_enter", why.clone());
    plan.add("exit", exit, flavor, "sys_exit", why.clone());
    plan.add(
        crate::common::kernel::plan::CLEANUP,
        task_exit,
        flavor,
        "sched_process_exit",
        "frees the per-thread state of an exiting thread",
    );
    plan.decide(
        "select",
        "syscall number -> operation in one array load, in the kernel",
    );
    Ok(())
}

/// Whether every traced syscall has its own tracepoints here (they are found through tracefs).
fn per_syscall_tracepoints(prober: &Prober, ops: &[TracedOp]) -> Result<(), String> {
    if prober.tracefs().is_none() {
        return Err("the per-syscall tracepoints need tracefs, which is not mounted (mount -t tracefs nodev /sys/kernel/tracing)".into());
    }
    let missing: Vec<&str> = ops
        .iter()
        .flat_map(|o| o.members.iter())
        .filter(|s| !prober.has_tracepoint("syscalls", &format!("sys_enter_{}", s.name)))
        .map(|s| s.name)
        .collect();
    match missing.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "no per-syscall tracepoint for {}",
            missing.join(", ")
        )),
    }
}

/// The traced syscalls that take no argument: their tracepoint's record has no args[0] to read.
const NO_ARGUMENTS: &[&str] = &["sync"];

fn plan_per_syscall_tracepoints(
    prober: &Prober,
    plan: &mut AttachPlan,
    ops: &[TracedOp],
    why: String,
) -> Result<()> {
    if prober.tracefs().is_none() {
        bail!(
            "sys_enter/sys_exit cannot be hooked here ({why}) and the per-syscall tracepoints need tracefs: mount it with `mount -t tracefs nodev /sys/kernel/tracing`"
        );
    }
    let mut missing = Vec::new();
    let planned = plan.programs.len();
    for s in ops.iter().flat_map(|o| o.members.iter()) {
        if !prober.has_tracepoint("syscalls", &format!("sys_enter_{}", s.name)) {
            missing.push(s.name);
            continue;
        }
        let reason = format!("per-syscall tracepoints: {why}");
        let enter = format!("syscalls:sys_enter_{}", s.name);
        let exit = format!("syscalls:sys_exit_{}", s.name);
        let program = match NO_ARGUMENTS.contains(&s.name) {
            true => "sys_enter_tp_noargs",
            false => "sys_enter_tp",
        };
        plan.add("enter", program, Flavor::Tracepoint, &enter, reason.clone());
        plan.add("exit", "sys_exit_tp", Flavor::Tracepoint, &exit, reason);
    }
    if plan.programs.len() == planned {
        bail!("this kernel has no syscall tracepoints (CONFIG_FTRACE_SYSCALLS is off) and sys_enter cannot be hooked ({why})");
    }
    if !missing.is_empty() {
        plan.decide(
            "missing",
            format!("no tracepoint, not traced: {}", missing.join(", ")),
        );
    }
    // A thread's exit is hooked where no other program running on its CPU can make the kernel
    // skip it: -p's memory of other processes' threads (lib/other_processes.bpf.h) must forget
    // each one before its stack is reused.
    match raw_tracepoint_flavor(prober, "sched_process_exit", None) {
        Ok((flavor, why)) => {
            let program = match flavor {
                Flavor::TpBtf => "task_exit_btf",
                _ => "task_exit_raw",
            };
            plan.add(
                crate::common::kernel::plan::CLEANUP,
                program,
                flavor,
                "sched_process_exit",
                format!("frees the per-thread state of an exiting thread, never skipped ({why})"),
            );
        }
        Err(e) => plan.add(
            crate::common::kernel::plan::CLEANUP,
            "task_exit_tp",
            Flavor::Tracepoint,
            "sched:sched_process_exit",
            format!("frees the per-thread state of an exiting thread (no raw tracepoint: {e}; a perf tracepoint program may be skipped, so -p does not remember other processes' threads)"),
        ),
    }
    Ok(())
}

/// Whether the syscall programs remember the threads of processes -p leaves out, so that they
/// leave without a helper call (lib/other_processes.bpf.h): with -p, where the current task is
/// typed (5.11+, as task storage) and a thread's exit cannot be skipped (its program is not a
/// perf tracepoint's).
pub fn remember_other_processes(plan: &AttachPlan, tgid: u32, typed_current: bool) -> bool {
    tgid != 0 && typed_current && !plan.uses("task_exit_tp")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_come_from_the_abi() {
        assert_eq!(find_syscall("read").unwrap().nr, libc::SYS_read);
        assert_eq!(find_syscall("openat2").unwrap().nr, libc::SYS_openat2);
        let all: Vec<i64> = GROUPS
            .iter()
            .flat_map(|g| g.members)
            .map(|s| s.nr)
            .collect();
        let mut dedup = all.clone();
        dedup.sort();
        dedup.dedup();
        assert_eq!(all.len(), dedup.len(), "no syscall in two groups");
    }

    #[test]
    fn default_is_the_four_groups() {
        let ops = select(&[], false).unwrap();
        let labels: Vec<&str> = ops.iter().map(|o| o.label.as_str()).collect();
        assert_eq!(labels, ["read", "write", "sync", "open"]);
        assert_eq!(ops[0].members.len(), 5);
    }

    #[test]
    fn groups_and_single_syscalls_mix() {
        let ops = select(&["write".into(), "fsync".into()], false).unwrap();
        assert_eq!(ops.len(), 2);
        assert_eq!(ops[1].members, vec![find_syscall("fsync").unwrap()]);
        let split = select(&["sync".into()], true).unwrap();
        let labels: Vec<&str> = split.iter().map(|o| o.label.as_str()).collect();
        assert_eq!(
            labels,
            ["fsync", "fdatasync", "sync", "syncfs", "sync_file_range"]
        );
    }

    #[test]
    fn unknown_and_duplicate_names_are_refused() {
        let err = select(&["frobnicate".into()], false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown syscall or group 'frobnicate'"),
            "{err}"
        );
        assert!(err.contains("pread64") && err.contains("open"), "{err}");
        let err = select(&["read".into(), "pread64".into()], false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("selected twice"), "{err}");
    }
}
