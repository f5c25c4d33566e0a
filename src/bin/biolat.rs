//! biolat: block device I/O latency as histograms. The tool is `iostack::tools::biolat`.

use std::process::ExitCode;

use clap::Args;

use iostack::common::block::disk::DiskFilter;
use iostack::common::block::StampChoice;
use iostack::common::report::hist::Unit;
use iostack::common::run;
use iostack::common::run::filter::{cgroup_options, CgroupArgs, PerCgroupArgs};
use iostack::tools::biolat::{Biolat, BiolatOptions};

const ABOUT: &str = "Summarize block device I/O latency as histograms";

const EXAMPLES: &str = "Examples:
  biolat                 one histogram of all block I/O, printed at Ctrl-C
  biolat 1 10            a histogram every second, ten times
  biolat -mT 1           milliseconds, with timestamps
  biolat -Q              include OS queue time (from when the request is first accounted)
  biolat -D -F           a histogram per disk and per operation/flags
  biolat -D --heatmap io.svg 1   every second, also a latency heat map per disk in io.svg
  biolat -d nvme0n1      only this disk
  biolat --cgroup system.slice/postgresql.service   only I/O charged to this cgroup
  biolat --per-cgroup    a histogram per service or container the I/O is charged to
  biolat -j 5            one JSON object every 5 seconds
  biolat --explain -Q    which kernel hooks would be used, and why";

/// biolat's own arguments (the runner adds -T -m -j --explain -v --heatmap [interval [count]]).
#[derive(Args, Debug)]
struct BiolatArgs {
    /// Include OS queued time: measure from when the OS starts accounting the request (what
    /// iostat's await covers), not from issue to the device
    #[arg(short = 'Q', long)]
    queued: bool,

    /// A histogram per disk
    #[arg(short = 'D', long)]
    disks: bool,

    /// A histogram per I/O operation and flags (e.g. Sync-Write)
    #[arg(short = 'F', long)]
    flags: bool,

    /// Trace only this disk (a whole disk: sda, nvme0n1, vda, loop0)
    #[arg(short = 'd', long, value_name = "DISK")]
    disk: Option<String>,

    /// Where request starts come from (auto: the kernel's own stamps where the traced queues
    /// keep them, one program per I/O)
    #[arg(long, value_enum, default_value_t = StampChoice::Auto)]
    stamps: StampChoice,

    #[command(flatten)]
    cgroup: CgroupArgs,

    #[command(flatten)]
    per_cgroup: PerCgroupArgs,
}

fn main() -> ExitCode {
    run::histogram_main::<Biolat, BiolatArgs>(ABOUT, EXAMPLES, |args, common| {
        Ok(BiolatOptions {
            queued: args.queued,
            per_disk: args.disks,
            per_flags: args.flags,
            per_op: false,
            also_queued: false,
            disk: args.disk.as_deref().map(DiskFilter::parse).transpose()?,
            unit: Unit::from_millis_flag(common.milliseconds),
            explain: common.explain,
            stamps: args.stamps,
            cgroups: cgroup_options(&args.cgroup, &args.per_cgroup)?,
        })
    })
}
