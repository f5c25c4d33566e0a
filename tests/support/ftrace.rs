//! The kernel's own trace of a process's system calls (ftrace's syscalls events, in a trace
//! instance of the test's own): a ground truth the tools' tests did not write.

use std::fs;
use std::path::PathBuf;
use std::process::Command;

/// Mounts tracefs for the duration of a test if it is not mounted (the per-syscall
/// tracepoints need it), and unmounts it again.
pub struct Tracefs {
    mounted_by_us: bool,
}

const TRACEFS: &str = "/sys/kernel/tracing";

impl Tracefs {
    pub fn ensure() -> Tracefs {
        if std::path::Path::new(TRACEFS).join("events").is_dir() {
            return Tracefs {
                mounted_by_us: false,
            };
        }
        let ok = Command::new("mount")
            .args(["-t", "tracefs", "nodev", TRACEFS])
            .status()
            .expect("run mount")
            .success();
        assert!(ok, "mounting tracefs on {TRACEFS} failed");
        Tracefs {
            mounted_by_us: true,
        }
    }
}

impl Drop for Tracefs {
    fn drop(&mut self) {
        if self.mounted_by_us {
            let _ = Command::new("umount").arg(TRACEFS).status();
        }
    }
}

/// One thread's calls of one system call, as the kernel traces them: entry and exit stamped by
/// the same raw syscall tracepoints the tools hook, on CLOCK_MONOTONIC, printed to the
/// microsecond.
pub struct SyscallTrace {
    instance: PathBuf,
    syscall: String,
    _tracefs: Tracefs,
}

impl SyscallTrace {
    /// Starts tracing `syscall` (e.g. "read") of thread `tid`.
    pub fn start(tid: u32, syscall: &str) -> SyscallTrace {
        let tracefs = Tracefs::ensure();
        let instance = PathBuf::from(TRACEFS).join(format!("instances/iostack-test-{tid}"));
        fs::create_dir(&instance).unwrap_or_else(|e| panic!("{}: {e}", instance.display()));
        // Made first, so that a failed write below still removes the instance (Drop).
        let trace = SyscallTrace {
            instance,
            syscall: syscall.to_string(),
            _tracefs: tracefs,
        };
        // A new instance copies the top level's options: the lines' shape is set here.
        for (option, on) in [
            ("context-info", "1"),
            ("latency-format", "0"),
            ("raw", "0"),
            ("hex", "0"),
            ("bin", "0"),
        ] {
            trace.write(&format!("options/{option}"), on);
        }
        trace.write("trace_clock", "mono");
        trace.write("set_event_pid", &tid.to_string());
        trace.write(&format!("events/syscalls/sys_enter_{syscall}/enable"), "1");
        trace.write(&format!("events/syscalls/sys_exit_{syscall}/enable"), "1");
        trace.write("tracing_on", "1");
        trace
    }

    fn write(&self, file: &str, value: &str) {
        fs::write(self.instance.join(file), value)
            .unwrap_or_else(|e| panic!("{}/{file}: {e}", self.instance.display()))
    }

    /// Each traced call's time from entry to exit, in microseconds, in order.
    pub fn durations_us(&self) -> Vec<u64> {
        let trace = fs::read_to_string(self.instance.join("trace")).expect("read the trace");
        let (enter, exit) = (
            format!(": sys_{}(", self.syscall),
            format!(": sys_{} -> ", self.syscall),
        );
        // "comm-tid [cpu] flags secs.usecs: sys_read(fd: 3, ...)" and "...: sys_read -> 0x1".
        let stamp = |line: &str, at: usize| -> u64 {
            let secs = line[..at].rsplit(' ').next().unwrap();
            let (s, us) = secs.split_once('.').unwrap();
            s.parse::<u64>().unwrap() * 1_000_000 + us.parse::<u64>().unwrap()
        };
        assert!(
            !trace.contains("LOST"),
            "the kernel's trace lost events: {trace}"
        );
        let mut started = None;
        let mut out = Vec::new();
        for line in trace.lines().filter(|l| !l.starts_with('#')) {
            if let Some(at) = line.find(&enter) {
                assert!(started.is_none(), "two entries in a row: {trace}");
                started = Some(stamp(line, at));
            } else if let Some(at) = line.find(&exit) {
                let begun = started
                    .take()
                    .unwrap_or_else(|| panic!("an exit without entry: {trace}"));
                out.push(stamp(line, at) - begun);
            }
        }
        out
    }
}

impl Drop for SyscallTrace {
    fn drop(&mut self) {
        let _ = fs::write(self.instance.join("tracing_on"), "0");
        for end in ["enter", "exit"] {
            let _ = fs::write(
                self.instance
                    .join(format!("events/syscalls/sys_{end}_{}/enable", self.syscall)),
                "0",
            );
        }
        let _ = fs::remove_dir(&self.instance);
    }
}
