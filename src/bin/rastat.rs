//! rastat: is readahead helping or wasting? The tool is `iostack::tools::rastat`.

use std::process::ExitCode;

use clap::Args;

use iostack::common::block::disk::DiskFilter;
use iostack::common::report::hist::Unit;
use iostack::common::run::filter::{PerCgroupArgs, TaskArgs};
use iostack::common::run::{self, cli, error};
use iostack::tools::rastat::{Rastat, RastatOptions, NAME};

const ABOUT: &str =
    "Show whether readahead helps or wastes: windows, pages brought in, used, evicted unused";

const LONG_ABOUT: &str = "Show whether readahead helps or wastes.

A readahead window is a read of more pages than asked, started by the kernel: sync when a read \
missed the page cache, async when a read reached the lookahead mark of the last window, around \
when a page fault read the pages around it (mmap), hint when the application asked \
(POSIX_FADV_WILLNEED, MADV_WILLNEED, readahead(2)). A read of only the pages asked for \
(POSIX_FADV_RANDOM, MADV_RANDOM, a small random read) is not a window.

Each page a window adds to the page cache is brought in. It is used when a read copies it or a \
fault maps it (fault-around included); its age at first use is histogrammed. A page evicted \
never used is waste; resident unused are the pages brought in and still waiting, at the end of \
each interval. Large folios count as the pages they hold. Per process: the process whose window \
brought the pages in; per cgroup (--per-cgroup), that process's cgroup.";

const EXAMPLES: &str = "Examples:
  rastat                 readahead windows and pages brought in, used and wasted, at Ctrl-C
  rastat 5 3             every 5 seconds, three times
  rastat -p 1234         only readahead process 1234 caused
  rastat -c postgres     only processes named postgres
  rastat -d nvme0n1      only files on nvme0n1 (and its partitions)
  rastat --per-file      also the 10 files with the most waste, by path
  rastat --per-file 3 -T 10   every 10 seconds, with the time, the 3 most wasteful files
  rastat --per-cgroup    also per cgroup v2 (a service or a container) of the readers
  rastat -j 1            one JSON object every second
  rastat --explain       which kernel hooks would be used, and why";

/// rastat's own arguments (the runner adds -T -m -j --explain -v --heatmap [interval [count]]).
#[derive(Args, Debug)]
struct RastatArgs {
    #[command(flatten)]
    tasks: TaskArgs,

    /// Only files on this disk (a whole disk: sda, nvme0n1, vda, loop0; its partitions included)
    #[arg(short = 'd', long, value_name = "DISK")]
    disk: Option<String>,

    /// Also the N files with the most waste (default 10), by path
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "10",
          value_parser = clap::value_parser!(u16).range(1..))]
    per_file: Option<u16>,

    #[command(flatten)]
    per_cgroup: PerCgroupArgs,
}

fn main() -> ExitCode {
    let command =
        cli::histogram_command::<RastatArgs>(NAME, ABOUT, EXAMPLES).long_about(LONG_ABOUT);
    let cli: cli::HistogramCommand<RastatArgs> = cli::parse_command(NAME, command);
    error::run_main(NAME, || {
        let (a, common) = (&cli.tool, &cli.common);
        let opts = RastatOptions {
            tasks: a.tasks.filter()?,
            disk: a.disk.as_deref().map(DiskFilter::parse).transpose()?,
            per_file: a.per_file.map(usize::from),
            per_cgroup: a.per_cgroup.per_cgroup_depth()?,
            unit: Unit::from_millis_flag(common.milliseconds),
        };
        run::intervals::<Rastat>(NAME, common, opts)
    })
}
