//! System calls as users think of them: named groups (`read`, `write`, `sync`, `open`) of the
//! architecture's syscalls, with numbers from the `libc` crate (the target's ABI, not a table
//! of our own), and the `-s`/`--per-syscall` selection of what gets its own histogram.

use anyhow::{bail, Result};

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
