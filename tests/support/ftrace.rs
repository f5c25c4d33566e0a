//! tracefs for the tests that need it (the per-syscall tracepoints).

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
