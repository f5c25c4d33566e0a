//! Task filters shared by the tools (`-p PID`, `--tid TID`, `-c COMM`, `--cgroup PATH`), checked
//! up front so a typo is a one-line error instead of a silent empty report, and handed to the
//! kernel as one rodata struct (`struct task_filter`, `src/bpf/lib/task_filter.bpf.h`).

use std::path::Path;

use anyhow::{bail, Result};

use crate::common::cgroup::CgroupFilter;

/// `--cgroup PATH`, which every tool takes (the block tools for the cgroup an I/O is charged to).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct CgroupArgs {
    /// Trace only this cgroup v2 and its descendants: a path under the cgroup2 mount, or
    /// relative to it (system.slice/nginx.service)
    #[arg(long, value_name = "PATH")]
    pub cgroup: Option<String>,
}

impl CgroupArgs {
    pub fn resolve(&self) -> Result<Option<CgroupFilter>> {
        self.cgroup
            .as_deref()
            .map(CgroupFilter::resolve)
            .transpose()
    }
}

/// `--per-cgroup[=DEPTH]`, which the histogram tools that split by cgroup take.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct PerCgroupArgs {
    /// Split by cgroup v2 (a histogram each; in event output, a CGROUP column), cut at DEPTH
    /// levels below the root (default 2: a systemd service or a container's scope); room for
    /// 64 cgroups' histograms a report (2048 at most), the rest under `other`
    #[arg(long, value_name = "DEPTH", num_args = 0..=1, require_equals = true,
          default_missing_value = "2", value_parser = parse_depth)]
    pub per_cgroup: Option<u32>,
}

/// The deepest --per-cgroup split (systemd's deepest cgroups are about 6 levels down).
pub const MAX_CGROUP_DEPTH: u32 = 32;

fn parse_depth(s: &str) -> std::result::Result<u32, String> {
    match s.parse::<u32>() {
        Ok(d) if (1..=MAX_CGROUP_DEPTH).contains(&d) => Ok(d),
        _ => Err(format!(
            "DEPTH is how many levels below the root cgroup to split at, 1 to {MAX_CGROUP_DEPTH}; got '{s}'"
        )),
    }
}

/// `--cgroup` and `--per-cgroup` together, as the block tools take them.
pub fn cgroup_options(
    cgroup: &CgroupArgs,
    per_cgroup: &PerCgroupArgs,
) -> Result<crate::common::cgroup::CgroupOptions> {
    Ok(crate::common::cgroup::CgroupOptions {
        filter: cgroup.resolve()?,
        per_cgroup: per_cgroup.per_cgroup_depth()?,
    })
}

impl PerCgroupArgs {
    /// `--per-cgroup`: its depth, once the cgroup v2 hierarchy is known to be there.
    pub fn per_cgroup_depth(&self) -> Result<Option<u32>> {
        if self.per_cgroup.is_some() && crate::common::cgroup::Cgroup2Mount::find().is_none() {
            bail!("--per-cgroup needs the cgroup v2 hierarchy, and none is mounted here (a cgroup v1-only host): mount it (`mount -t cgroup2 none /sys/fs/cgroup/unified`)");
        }
        Ok(self.per_cgroup)
    }
}

/// `-p PID`, `--tid TID`, `-c COMM`, `--cgroup PATH`: the tools that trace tasks' calls.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TaskArgs {
    /// Trace only this process (all its threads)
    #[arg(short = 'p', long, value_name = "PID")]
    pub pid: Option<u32>,

    /// Trace only this thread
    #[arg(long, value_name = "TID")]
    pub tid: Option<u32>,

    /// Trace only tasks with this name (as in /proc/PID/comm)
    #[arg(short = 'c', long, value_name = "COMM")]
    pub comm: Option<String>,

    #[command(flatten)]
    pub cgroup: CgroupArgs,
}

impl TaskArgs {
    /// The filter, every part checked now (a missing pid or cgroup is a one-line error).
    pub fn filter(&self) -> Result<TaskFilter> {
        Ok(TaskFilter::new(self.pid, self.tid, self.comm.as_deref())?
            .in_cgroup(self.cgroup.resolve()?))
    }
}

/// The kernel keeps 15 bytes of a task's name (TASK_COMM_LEN - 1).
pub const COMM_MAX: usize = 15;

/// Which tasks to trace: a process, a thread, a task name (each optional).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskFilter {
    /// 0: any process.
    pub tgid: u32,
    /// 0: any thread.
    pub tid: u32,
    pub comm: Option<CommFilter>,
    /// A cgroup v2 and its descendants.
    pub cgroup: Option<CgroupFilter>,
    /// The tool's own pid namespace (dev, inode of /proc/self/ns/pid) where it is not the
    /// initial one: pids given and shown are that namespace's.
    pub pid_namespace: Option<(u64, u64)>,
}

/// The initial pid namespace's inode (PROC_PID_INIT_INO in include/linux/proc_ns.h).
const INITIAL_PID_NS: u64 = 0xEFFF_FFFC;

/// This process's pid namespace, where it is not the initial one (a container's, or
/// `unshare --pid`): (dev, inode) of /proc/self/ns/pid, as bpf_get_ns_current_pid_tgid takes.
pub fn own_pid_namespace() -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let ns = std::fs::metadata("/proc/self/ns/pid").ok()?;
    (ns.ino() != INITIAL_PID_NS).then(|| (ns.dev(), ns.ino()))
}

/// `struct task_filter` as the BPF side lays it out.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BpfTaskFilter {
    pub tgid: u32,
    pub tid: u32,
    pub has_comm: u32,
    pub comm: [u8; COMM_MAX + 1],
    pub cgroup_level: u32,
    pub cgroup_id: u64,
    pub pidns_dev: u64,
    pub pidns_ino: u64,
}

// SAFETY: integers and bytes; any bit pattern is valid.
unsafe impl plain::Plain for BpfTaskFilter {}

/// Whether a process or thread of that id exists now, in this tool's pid namespace.
pub fn process_exists(id: u32) -> bool {
    Path::new(&format!("/proc/{id}")).exists()
}

impl TaskFilter {
    pub fn new(pid: Option<u32>, tid: Option<u32>, comm: Option<&str>) -> Result<TaskFilter> {
        for (what, id) in [("process", pid), ("thread", tid)] {
            if let Some(id) = id {
                if id == 0 || !process_exists(id) {
                    bail!("no {what} with ID {id} is running (see `ps -eLf`)");
                }
            }
        }
        Ok(TaskFilter {
            tgid: pid.unwrap_or(0),
            tid: tid.unwrap_or(0),
            comm: comm.map(CommFilter::parse).transpose()?,
            cgroup: None,
            pid_namespace: own_pid_namespace(),
        })
    }

    /// The same, limited to a cgroup (`--cgroup`).
    pub fn in_cgroup(mut self, cgroup: Option<CgroupFilter>) -> TaskFilter {
        self.cgroup = cgroup;
        self
    }

    pub fn to_bpf(&self) -> BpfTaskFilter {
        let mut f = BpfTaskFilter {
            tgid: self.tgid,
            tid: self.tid,
            has_comm: self.comm.is_some() as u32,
            cgroup_level: self.cgroup.as_ref().map_or(0, |c| c.level),
            cgroup_id: self.cgroup.as_ref().map_or(0, |c| c.id),
            pidns_dev: self.pid_namespace.map_or(0, |(dev, _)| dev),
            pidns_ino: self.pid_namespace.map_or(0, |(_, ino)| ino),
            ..Default::default()
        };
        if let Some(c) = &self.comm {
            for (dst, src) in f.comm.iter_mut().zip(c.bytes()) {
                *dst = src;
            }
        }
        f
    }
}

/// A task name to match exactly, as the kernel stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommFilter(String);

impl CommFilter {
    pub fn parse(name: &str) -> Result<CommFilter> {
        if name.is_empty() || name.len() > COMM_MAX {
            bail!(
                "a task name is 1 to {COMM_MAX} bytes as the kernel keeps it, got '{name}' (see /proc/PID/comm)"
            );
        }
        Ok(CommFilter(name.to_string()))
    }

    pub fn bytes(&self) -> impl Iterator<Item = u8> + '_ {
        self.0.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_must_exist() {
        let me = std::process::id();
        assert_eq!(TaskFilter::new(Some(me), None, None).unwrap().tgid, me);
        let err = TaskFilter::new(Some(0), None, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no process with ID 0"), "{err}");
        let err = TaskFilter::new(None, Some(u32::MAX), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no thread with ID"), "{err}");
    }

    #[test]
    fn comm_length_is_the_kernels() {
        assert!(CommFilter::parse("postgres").is_ok());
        assert!(CommFilter::parse("exactly15bytes_").is_ok());
        assert!(CommFilter::parse("sixteen_bytes_xx").is_err());
        assert!(CommFilter::parse("").is_err());
    }

    #[test]
    fn the_bpf_struct_carries_the_name_nul_terminated() {
        let f = TaskFilter::new(None, None, Some("dd")).unwrap().to_bpf();
        assert_eq!((f.tgid, f.tid, f.has_comm), (0, 0, 1));
        assert_eq!(&f.comm[..3], b"dd\0");
    }
}
