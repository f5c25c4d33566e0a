//! How a tool ends: one line of advice on stderr and a non-zero status, or quietly when the
//! reader of stdout went away (`| head`). Never a panic message or a backtrace.

use std::fmt;
use std::fs;
use std::process::ExitCode;

use anyhow::{anyhow, Result};

/// stdout was closed by its reader: not an error for a command-line tool.
#[derive(Debug)]
pub struct StdoutClosed;

impl fmt::Display for StdoutClosed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("standard output was closed")
    }
}

impl std::error::Error for StdoutClosed {}

/// Runs a tool's main body and turns its outcome into an exit status.
pub fn run_main(tool: &'static str, body: impl FnOnce() -> Result<()>) -> ExitCode {
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".into());
        eprintln!("{tool}: internal error: {msg} (please report this as a bug)");
    }));
    match body() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if is_stdout_closed(&err) => ExitCode::SUCCESS,
        Err(err) => {
            let line = format!("{err:#}").replace('\n', " ");
            eprintln!("{tool}: {line}");
            ExitCode::FAILURE
        }
    }
}

fn is_stdout_closed(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.is::<StdoutClosed>()
            || e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

const CAP_SYS_RESOURCE: u32 = 24;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// How to give a tool what it needs, said once for every refusal.
const HOW: &str = "run it as root, or give it CAP_BPF and CAP_PERFMON (a systemd unit's \
                   AmbientCapabilities=CAP_BPF CAP_PERFMON, or `setpriv --inh-caps=+bpf,+perfmon \
                   --ambient-caps=+bpf,+perfmon TOOL`)";

fn effective_caps() -> u64 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        })
        .unwrap_or(0)
}

fn has(caps: u64, cap: u32) -> bool {
    caps & (1u64 << cap) != 0
}

/// Tracing needs CAP_BPF with CAP_PERFMON (or CAP_SYS_ADMIN, which root has): the refusal
/// names the capability that is missing.
pub fn require_privileges(tool: &str) -> Result<()> {
    match privileges_refusal(effective_caps()) {
        None => Ok(()),
        Some(why) => Err(anyhow!("{}", why.replace("TOOL", tool))),
    }
}

fn privileges_refusal(caps: u64) -> Option<String> {
    if has(caps, CAP_SYS_ADMIN) || (has(caps, CAP_BPF) && has(caps, CAP_PERFMON)) {
        return None;
    }
    let missing: Vec<&str> = [(CAP_BPF, "CAP_BPF"), (CAP_PERFMON, "CAP_PERFMON")]
        .into_iter()
        .filter(|&(cap, _)| !has(caps, cap))
        .map(|(_, name)| name)
        .collect();
    Some(format!(
        "tracing needs CAP_BPF and CAP_PERFMON, and this process lacks {}: {HOW}",
        missing.join(" and ")
    ))
}

/// Hooking the functions of a kernel module needs CAP_SYS_ADMIN: fentry attaches by the
/// module's BTF, which the kernel hands out (BPF_BTF_GET_FD_BY_ID, and the walk of BTF objects
/// libbpf makes to find it) only to CAP_SYS_ADMIN; and as nobody with CAP_BPF and CAP_PERFMON,
/// the kprobe fallback on xfs's functions failed to attach too, on 5.10 (no module BTF: kprobes
/// only), 6.1 and 6.12 (the kernel matrix, 2026-11-25).
pub fn require_module_access(tool: &str, module: &str) -> Result<()> {
    if has(effective_caps(), CAP_SYS_ADMIN) {
        return Ok(());
    }
    Err(anyhow!(
        "{tool}'s functions live in the kernel module {module}, which the kernel lets only CAP_SYS_ADMIN hook, and this process lacks CAP_SYS_ADMIN: run it as root, or add CAP_SYS_ADMIN (which covers CAP_BPF and CAP_PERFMON too)"
    ))
}

/// Before 5.11 the kernel charges BPF maps to RLIMIT_MEMLOCK instead of the memory cgroup, and
/// libbpf raises that limit only with CAP_SYS_RESOURCE (or when it is already unlimited). Such a
/// kernel lacks bpf_ktime_get_coarse_ns, which came with the change (libbpf's own test for it).
pub fn require_memlock(charged_to_memcg: impl FnOnce() -> bool) -> Result<()> {
    if has(effective_caps(), CAP_SYS_RESOURCE) || charged_to_memcg() {
        return Ok(());
    }
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) };
    if limit.rlim_max == libc::RLIM_INFINITY {
        return Ok(());
    }
    Err(anyhow!(
        "this kernel (before 5.11) counts BPF maps against the locked-memory limit, which is {} KiB here, and this process lacks CAP_SYS_RESOURCE to raise it: add CAP_SYS_RESOURCE, or run it with no limit (ulimit -l unlimited; systemd LimitMEMLOCK=infinity)",
        limit.rlim_max / 1024
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(list: &[u32]) -> u64 {
        list.iter().map(|&c| 1u64 << c).sum()
    }

    #[test]
    fn the_refusal_names_the_missing_capability() {
        assert_eq!(privileges_refusal(caps(&[CAP_BPF, CAP_PERFMON])), None);
        assert_eq!(privileges_refusal(caps(&[CAP_SYS_ADMIN])), None);
        let only_bpf = privileges_refusal(caps(&[CAP_BPF])).unwrap();
        assert!(only_bpf.contains("lacks CAP_PERFMON:"), "{only_bpf}");
        let none = privileges_refusal(0).unwrap();
        assert!(none.contains("lacks CAP_BPF and CAP_PERFMON:"), "{none}");
        assert!(!none.contains('\n'));
    }
}
