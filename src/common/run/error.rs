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

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

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

/// Tracing needs root, or CAP_BPF with CAP_PERFMON (or CAP_SYS_ADMIN).
pub fn require_privileges(tool: &str) -> Result<()> {
    let caps = effective_caps();
    let has = |cap: u32| caps & (1u64 << cap) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return Ok(());
    }
    Err(anyhow!(
        "tracing needs root (or CAP_BPF and CAP_PERFMON): run it as `sudo {tool}`"
    ))
}
