//! syslat: time applications wait in I/O system calls, per operation. The tool is
//! `iostack::tools::syslat`.

use std::process::ExitCode;

use clap::Args;

use iostack::common::kernel::syscalls;
use iostack::common::kernel::syscalls::Attach;
use iostack::common::report::hist::Unit;
use iostack::common::run;
use iostack::common::run::filter::{PerCgroupArgs, TaskArgs};
use iostack::tools::syslat::{Syslat, SyslatOptions};

const ABOUT: &str = "Summarize the latency of I/O system calls per operation";

const EXAMPLES: &str = "Examples:
  syslat                     read, write, sync and open latency, printed at Ctrl-C
  syslat 1 10                every second, ten times
  syslat --heatmap sys.svg 1  every second, also a latency heat map per group in sys.svg
  syslat -p 1234             only process 1234 (all its threads)
  syslat -c postgres -x      only failed calls of tasks named postgres
  syslat --cgroup system.slice/nginx.service   only tasks of this cgroup (v2) and below
  syslat --per-cgroup        a histogram per service or container (cgroup v2, 2 levels down)
  syslat -s sync --per-syscall   fsync, fdatasync, sync, syncfs, sync_file_range apart
  syslat -s read,openat -j   the read group and openat alone, as JSON
  syslat --explain           which kernel hooks would be used, and why";

/// syslat's own arguments (the runner adds -T -m -j --explain -v --heatmap [interval [count]]).
#[derive(Args, Debug)]
struct SyslatArgs {
    #[command(flatten)]
    tasks: TaskArgs,

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

    #[command(flatten)]
    per_cgroup: PerCgroupArgs,
}

fn main() -> ExitCode {
    run::histogram_main::<Syslat, SyslatArgs>(ABOUT, EXAMPLES, |args, common| {
        Ok(SyslatOptions {
            ops: syscalls::select(&args.syscalls, args.per_syscall)?,
            tasks: args.tasks.filter()?,
            failed: args.failed,
            attach: args.attach,
            unit: Unit::from_millis_flag(common.milliseconds),
            per_cgroup: args.per_cgroup.per_cgroup_depth()?,
        })
    })
}
