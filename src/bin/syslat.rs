//! syslat: time applications wait in I/O system calls, per operation. The tool is
//! `iostack::tools::syslat`.

use std::process::ExitCode;

use clap::Args;

use iostack::common::kernel::syscalls;
use iostack::common::kernel::syscalls::Attach;
use iostack::common::report::hist::Unit;
use iostack::common::run;
use iostack::common::run::filter::TaskFilter;
use iostack::tools::syslat::{Syslat, SyslatOptions};

const ABOUT: &str = "Summarize the latency of I/O system calls per operation";

const EXAMPLES: &str = "Examples:
  syslat                     read, write, sync and open latency, printed at Ctrl-C
  syslat 1 10                every second, ten times
  syslat -p 1234             only process 1234 (all its threads)
  syslat -c postgres -x      only failed calls of tasks named postgres
  syslat -s sync --per-syscall   fsync, fdatasync, sync, syncfs, sync_file_range apart
  syslat -s read,openat -j   the read group and openat alone, as JSON
  syslat --explain           which kernel hooks would be used, and why";

/// syslat's own arguments (the runner adds -T -m -j --explain -v [interval [count]]).
#[derive(Args, Debug)]
struct SyslatArgs {
    /// Trace only this process (all its threads)
    #[arg(short = 'p', long, value_name = "PID")]
    pid: Option<u32>,

    /// Trace only this thread
    #[arg(long, value_name = "TID")]
    tid: Option<u32>,

    /// Trace only tasks with this name (as in /proc/PID/comm)
    #[arg(short = 'c', long, value_name = "COMM")]
    comm: Option<String>,

    /// Only calls that returned an error
    #[arg(short = 'x', long)]
    failed: bool,

    /// Groups (read, write, sync, open) or single syscalls to trace, comma-separated
    #[arg(short = 's', long, value_name = "NAMES", value_delimiter = ',')]
    syscalls: Vec<String>,

    /// A histogram per syscall instead of per group
    #[arg(long)]
    per_syscall: bool,

    /// Hook flavour: tp_btf/raw_tp on sys_enter/sys_exit, or the per-syscall tracepoints
    #[arg(long, value_enum, default_value_t = Attach::Auto)]
    attach: Attach,
}

fn main() -> ExitCode {
    run::histogram_main::<Syslat, SyslatArgs>(ABOUT, EXAMPLES, |args, common| {
        Ok(SyslatOptions {
            ops: syscalls::select(&args.syscalls, args.per_syscall)?,
            tasks: TaskFilter::new(args.pid, args.tid, args.comm.as_deref())?,
            failed: args.failed,
            attach: args.attach,
            unit: Unit::from_millis_flag(common.milliseconds),
        })
    })
}
