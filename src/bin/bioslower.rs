//! bioslower: every block I/O (or bio submission) slower than a threshold, as it completes. The
//! tool is `iostack::tools::bioslower`.

use std::process::ExitCode;

use clap::Parser;

use iostack::common::block::disk::DiskFilter;
use iostack::common::block::StampChoice;
use iostack::common::run::cli::{self, usage_error};
use iostack::common::run::error::run_main;
use iostack::common::run::filter::{cgroup_options, CgroupArgs, PerCgroupArgs, TaskFilter};
use iostack::common::run::threshold::parse_threshold;
use iostack::common::run::{self, Style};
use iostack::tools::bioslower::{Bioslower, BioslowerOptions, Stage};

const EXAMPLES: &str = "Examples:
  bioslower                 block I/O slower than 10 ms, as it completes
  bioslower 1.5ms           slower than 1.5 ms (units: ns, us, ms, s; a bare number is ms)
  bioslower 0 -d nvme0n1    every I/O of one disk
  bioslower -Q 20           include OS queue time; shows the QUE(ms) column
  bioslower -p 1234 5       I/O submitted by process 1234, slower than 5 ms
  bioslower --cgroup system.slice/mysql.service 5   I/O charged to this cgroup (v2)
  bioslower --per-cgroup 20   a CGROUP column: the service or container charged
  bioslower -j 0 | head     one JSON object per I/O
  bioslower --stage submit -K 10   bio submissions slower than 10 ms, with where they waited
  bioslower --explain -Q    which kernel hooks would be used, and why";

/// Print every block I/O slower than a threshold, as it completes.
#[derive(Parser, Debug)]
#[command(name = "bioslower", after_help = EXAMPLES)]
struct Cli {
    /// Show I/O slower than this: milliseconds (10, 0.5) or with a unit (500us, 1.5ms, 2s);
    /// 0 shows every I/O
    #[arg(value_name = "MIN", default_value = "10", value_parser = parse_threshold)]
    min: u64,
    /// Include OS queued time (as biolat -Q) and show it in a QUE(ms) column
    #[arg(short = 'Q', long)]
    queued: bool,
    /// Trace only this disk (a whole disk: sda, nvme0n1, vda, loop0)
    #[arg(short = 'd', long, value_name = "DISK")]
    disk: Option<String>,
    /// Trace only I/O submitted by this process
    #[arg(short = 'p', long, value_name = "PID")]
    pid: Option<u32>,
    /// Trace only I/O submitted by tasks with this name (as in /proc/PID/comm)
    #[arg(short = 'c', long, value_name = "COMM")]
    comm: Option<String>,
    #[command(flatten)]
    cgroup: CgroupArgs,
    #[command(flatten)]
    per_cgroup: PerCgroupArgs,
    /// What to time: block requests, or bio submission
    #[arg(long, value_enum, default_value_t = Stage::Block)]
    stage: Stage,
    /// Where request starts come from (auto: the kernel's own stamps where the traced queues
    /// keep them)
    #[arg(long, value_enum, default_value_t = StampChoice::Auto)]
    stamps: StampChoice,
    /// With --stage submit: print the kernel stack where each slow submission waited longest
    #[arg(short = 'K', long = "kernel-stack")]
    kernel_stack: bool,
    /// One JSON object per I/O instead of text (fields: see the README)
    #[arg(short = 'j', long)]
    json: bool,
    /// Show which kernel hooks were chosen and why, prove they load and attach, then exit
    #[arg(long)]
    explain: bool,
    /// Print libbpf's debug messages
    #[arg(short = 'v', long)]
    verbose: bool,
}

fn main() -> ExitCode {
    let cli: Cli = cli::parse("bioslower");
    if cli.queued && cli.stage == Stage::Submit {
        usage_error(
            "bioslower",
            "-Q applies to --stage block, not to submission",
        );
    }
    if cli.kernel_stack && cli.stage != Stage::Submit {
        usage_error("bioslower", "-K needs --stage submit");
    }
    run_main("bioslower", || {
        // Resolved once: the submit stage filters tasks by it, the block stage I/O's owners.
        let cgroups = cgroup_options(&cli.cgroup, &cli.per_cgroup)?;
        let opts = BioslowerOptions {
            min_ns: cli.min,
            queued: cli.queued,
            disk: cli.disk.as_deref().map(DiskFilter::parse).transpose()?,
            tasks: TaskFilter::new(cli.pid, None, cli.comm.as_deref())?
                .in_cgroup(cgroups.filter.clone()),
            cgroups,
            stage: cli.stage,
            stacks: cli.kernel_stack,
            explain: cli.explain,
            stamps: cli.stamps,
        };
        let (json, explain, verbose) = (cli.json, cli.explain, cli.verbose);
        run::events::<Bioslower>(
            "bioslower",
            Style {
                json,
                explain,
                verbose,
            },
            opts,
        )
    })
}
