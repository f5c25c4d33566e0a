//! iostack: every layer of the same I/O calls in one run, and where each call's time went. The
//! tool is `iostack::tools::iostack`.

use std::process::ExitCode;

use clap::Args;

use iostack::common::block::disk::DiskFilter;
use iostack::common::report::hist::Unit;
use iostack::common::run::filter::{PerCgroupArgs, TaskArgs};
use iostack::common::run::threshold::parse_threshold;
use iostack::common::run::{self, cli, error, Style};
use iostack::tools::iostack::{Iostack, IostackOptions, NAME};

const ABOUT: &str =
    "Follow I/O calls through every layer (syscall, VFS, filesystem, block) and split each call's time into where it went";

const EXAMPLES: &str = "Examples:
  iostack                    per operation: each layer's latency, and where the time went, at Ctrl-C
  iostack 5 3                every 5 seconds, three times
  iostack -p 1234            only process 1234 (its calls, its io_uring and native AIO requests)
  iostack -d nvme0n1         only calls on files of nvme0n1, and its I/O
  iostack --fs ext4 -m       only calls on ext4 files, in milliseconds
  iostack -P 1               every second, the 10 processes with the most time in I/O calls
  iostack --per-cgroup 5     every 5 seconds, a row per service or container (cgroup v2) and operation
  iostack --slow 10          each call slower than 10 ms as it ends: its layers, its time, its I/O;
                             each io_uring or AIO request as slow as its completion is posted
  iostack --slow 10 -j       the same as one JSON object per call or request
  iostack --svg io.svg 1     every second, also draw the breakdown and the latency heat map into io.svg
  iostack --explain          which kernel hooks would be used, which layers cannot be, and why";

/// iostack's own arguments (the runner adds -T -m -j --explain -v --heatmap [interval [count]]).
#[derive(Args, Debug)]
struct IostackArgs {
    #[command(flatten)]
    tasks: TaskArgs,

    /// Only calls on files of this disk (a whole disk: sda, nvme0n1, vda, loop0, dm-0) or of a
    /// device stacked on it (an LVM volume on sda), and its I/O
    #[arg(short = 'd', long, value_name = "DISK")]
    disk: Option<String>,

    /// Only calls on files of this filesystem type (ext4, xfs, btrfs, nfs, f2fs)
    #[arg(long, value_name = "FS")]
    fs: Option<String>,

    /// Per process: the 10 processes with the most time in I/O calls, then the io_uring and AIO
    /// requests per submitting process
    #[arg(short = 'P', long)]
    per_process: bool,

    #[command(flatten)]
    per_cgroup: PerCgroupArgs,

    /// Print each call slower than this as it ends, and each io_uring or native AIO request
    /// as its completion is posted, instead of reports: milliseconds (10, 0.5) or with a unit
    /// (500us, 2s); 0 prints every one
    #[arg(long, value_name = "MS", value_parser = parse_threshold, conflicts_with = "heatmap")]
    slow: Option<u64>,

    /// Also draw, per operation, each interval's breakdown as a stacked column beside the
    /// heat map of the calls' latency into FILE.svg, rewritten after every interval; needs an
    /// interval
    #[arg(long, value_name = "FILE.svg", conflicts_with = "slow")]
    svg: Option<std::path::PathBuf>,

    /// The tests' validator: split the calls' time from every context switch and wakeup of the
    /// machine, as iostack did before it read the scheduler's own accounting
    #[arg(long, hide = true)]
    shadow_switches: bool,

    /// The tests' knob: how long after a completion a wakeup on its CPU may still be its doing
    /// (default 10 ms); 0 sees no wakeup as a completion's, so that a test can show the split
    /// holds without the marks (the mutant OWN_VIA_WAKER)
    #[arg(long, hide = true, value_name = "NS")]
    mark_ttl_ns: Option<u64>,
}

fn main() -> ExitCode {
    let command = cli::histogram_command::<IostackArgs>(NAME, ABOUT, EXAMPLES);
    let cli: cli::HistogramCommand<IostackArgs> = cli::parse_command(NAME, command);
    error::run_main(NAME, || {
        let (a, common) = (&cli.tool, &cli.common);
        let opts = IostackOptions::new(
            a.tasks.filter()?,
            a.disk.as_deref().map(DiskFilter::parse).transpose()?,
            a.fs.clone(),
            a.per_process,
            a.per_cgroup.per_cgroup_depth()?,
            a.slow,
            Unit::from_millis_flag(common.milliseconds),
        )?
        .with_svg(a.svg.clone(), common)?;
        let opts = IostackOptions {
            shadow_switches: a.shadow_switches,
            mark_ttl_ns: a.mark_ttl_ns,
            ..opts
        };
        if opts.slow_ns.is_some() {
            let style = Style {
                json: common.json,
                explain: common.explain,
                verbose: common.verbose,
            };
            return run::events::<Iostack>(NAME, style, opts);
        }
        run::intervals::<Iostack>(NAME, common, opts)
    })
}
