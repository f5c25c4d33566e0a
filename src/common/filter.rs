//! Task filters shared by the tools (`-p PID`, `--tid TID`, `-c COMM`), checked up front so a
//! typo is a one-line error instead of a silent empty report.

use std::path::Path;

use anyhow::{bail, Result};

/// The kernel keeps 15 bytes of a task's name (TASK_COMM_LEN - 1).
pub const COMM_MAX: usize = 15;

/// Process and thread filter values as the BPF side wants them (0 = no filter).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskFilter {
    pub tgid: u32,
    pub tid: u32,
}

impl TaskFilter {
    pub fn new(pid: Option<u32>, tid: Option<u32>) -> Result<TaskFilter> {
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
        })
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
        assert_eq!(TaskFilter::new(Some(me), None).unwrap().tgid, me);
        let err = TaskFilter::new(Some(0), None).unwrap_err().to_string();
        assert!(err.contains("no process with ID 0"), "{err}");
        let err = TaskFilter::new(None, Some(u32::MAX))
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
}
