//! Task filters shared by the tools (`-p PID`, `--tid TID`, `-c COMM`), checked up front so a
//! typo is a one-line error instead of a silent empty report, and handed to the kernel as one
//! rodata struct (`struct task_filter`, `src/bpf/lib/task_filter.bpf.h`).

use std::path::Path;

use anyhow::{bail, Result};

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
}

/// `struct task_filter` as the BPF side lays it out.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BpfTaskFilter {
    pub tgid: u32,
    pub tid: u32,
    pub has_comm: u32,
    pub comm: [u8; COMM_MAX + 1],
}

// SAFETY: integers and bytes; any bit pattern is valid.
unsafe impl plain::Plain for BpfTaskFilter {}

impl TaskFilter {
    pub fn new(pid: Option<u32>, tid: Option<u32>, comm: Option<&str>) -> Result<TaskFilter> {
        for (what, id) in [("process", pid), ("thread", tid)] {
            if let Some(id) = id {
                if id == 0 || !Path::new(&format!("/proc/{id}")).exists() {
                    bail!("no {what} with ID {id} is running (see `ps -eLf`)");
                }
            }
        }
        Ok(TaskFilter {
            tgid: pid.unwrap_or(0),
            tid: tid.unwrap_or(0),
            comm: comm.map(CommFilter::parse).transpose()?,
        })
    }

    pub fn to_bpf(&self) -> BpfTaskFilter {
        let mut f = BpfTaskFilter {
            tgid: self.tgid,
            tid: self.tid,
            has_comm: self.comm.is_some() as u32,
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
