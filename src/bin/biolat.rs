//! biolat: block device I/O latency as histograms (bcc's biolatency, with percentiles, JSON,
//! a correct `-Q` on every scheduler, and `--explain`).

use std::mem::MaybeUninit;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;

use iostack::common::blk::{plan_block_hooks, request_map_entries, AccountedRequests};
use iostack::common::bpf::{
    init_libbpf_logging, load_planned, per_cpu_counts, DropCounter, HistogramDrain,
};
use iostack::common::cli::{self, CommonArgs};
use iostack::common::disk::{DiskFilter, DiskNames};
use iostack::common::error::{require_privileges, run_main};
use iostack::common::hist::Unit;
use iostack::common::output::{announce, HistogramReport, LabeledHistogram, Out};
use iostack::common::probe::Prober;
use iostack::common::reqflags::RequestFlags;
use iostack::common::runloop::{run_intervals, StopSignal};
use iostack::common::unseen::{DiskTally, UnseenIos};

mod skel {
    include!(concat!(env!("OUT_DIR"), "/biolat.skel.rs"));
}
use skel::{types, BiolatSkelBuilder};

// SAFETY: a repr(C) struct of u32s; any bit pattern is valid.
unsafe impl plain::Plain for types::biolat_key {}

const EXAMPLES: &str = "Examples:
  biolat                 one histogram of all block I/O, printed at Ctrl-C
  biolat 1 10            a histogram every second, ten times
  biolat -mT 1           milliseconds, with timestamps
  biolat -Q              include OS queue time (from when the request is first accounted)
  biolat -D -F           a histogram per disk and per operation/flags
  biolat -d nvme0n1      only this disk
  biolat -j 5            one JSON object every 5 seconds
  biolat --explain -Q    which kernel hooks would be used, and why";

/// Summarize block device I/O latency as histograms.
#[derive(Parser, Debug)]
#[command(name = "biolat", version, after_help = EXAMPLES)]
struct Cli {
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

    #[command(flatten)]
    common: CommonArgs,
}

fn main() -> ExitCode {
    run_main("biolat", || run(cli::parse("biolat")))
}

fn run(cli: Cli) -> Result<()> {
    init_libbpf_logging(cli.common.verbose);
    let filter = cli.disk.as_deref().map(DiskFilter::parse).transpose()?;
    require_privileges("biolat")?;
    let prober = Prober::new()?;
    let mut hooks = plan_block_hooks(&prober, "biolat", cli.queued, cli.common.explain)?;
    let accounted = AccountedRequests::from_btf(&prober);
    hooks.plan.decide("counted", accounted.describe());
    let flags = match cli.flags {
        true => Some(
            RequestFlags::from_btf(&prober)
                .context("this kernel's BTF has no req_op/req_flag_bits enums, needed by -F")?,
        ),
        false => None,
    };
    let unit = Unit::from_millis_flag(cli.common.milliseconds);

    let mut storage = MaybeUninit::uninit();
    let (mut skel, _links) = load_planned(
        BiolatSkelBuilder::default(),
        &mut storage,
        &hooks.plan,
        |open| {
            let rodata = open
                .maps
                .rodata_data
                .as_deref_mut()
                .context("biolat's .rodata is not mapped")?;
            rodata.unit_ns = unit.ns();
            rodata.unit_lg = unit.lg();
            rodata.rq_tp_single_arg = hooks.single_arg;
            rodata.q_start = hooks.queue_start as u32;
            rodata.filter_disk = filter.is_some();
            rodata.filter_dev = filter.as_ref().map_or(0, |f| f.dev);
            rodata.per_disk = cli.disks;
            rodata.flags_mask = flags.as_ref().map_or(0, |f| f.mask());
            rodata.seen_io_stat = accounted.io_stat;
            rodata.seen_flush_seq = accounted.flush_seq;
            rodata.seen_flush_op = accounted.flush_op;
            rodata.seen_skip_passthrough = accounted.skip_passthrough;
            open.maps.starts.set_max_entries(request_map_entries())?;
            Ok(())
        },
    )?;

    let mut out = Out::new();
    if cli.common.explain {
        return out.write(&hooks.plan.explain(&prober));
    }
    let stop = StopSignal::install()?;
    let mut unseen = UnseenIos::start(filter.as_ref().map(|f| f.dev))?;
    announce(
        &mut out,
        cli.common.json,
        "Tracing block device I/O... Hit Ctrl-C to end.",
    )?;

    let mut disk_names = DiskNames::load();
    let mut drain = HistogramDrain::new();
    let mut drop_counter = DropCounter::default();
    run_intervals(&stop, cli.common.interval, cli.common.count, || {
        let bss = skel
            .maps
            .bss_data
            .as_deref_mut()
            .context("biolat's .bss is not mapped")?;
        let drained = drain.swap_and_drain(&mut bss.hist_gen, &skel.maps.hists)?;
        let mut drops = drop_counter.delta(&bss.drops);
        let accounted: Vec<(String, DiskTally)> = unseen
            .update(|| per_cpu_counts(&skel.maps.io_seen))?
            .into_iter()
            .map(|t| (disk_names.name_or_reload(t.dev), t))
            .collect();
        drops.push(("unseen", accounted.iter().map(|(_, t)| t.unseen).sum()));
        let mut histograms = Vec::with_capacity(drained.len());
        for (key_bytes, hist) in drained {
            let mut key = types::biolat_key::default();
            plain::copy_from_bytes(&mut key, &key_bytes)
                .map_err(|e| anyhow::anyhow!("bad histogram key: {e:?}"))?;
            let mut labels = Vec::new();
            if cli.disks {
                labels.push(("disk", disk_names.name(key.dev)));
            }
            if let Some(flags) = &flags {
                labels.push(("flags", flags.describe(key.flags)));
            }
            histograms.push(LabeledHistogram { labels, hist });
        }
        histograms.sort_by(|a, b| a.labels.cmp(&b.labels));
        let report = HistogramReport {
            tool: "biolat",
            unit,
            timestamp: cli.common.timestamp,
            histograms: &histograms,
            drops: &drops,
            accounted: Some(&accounted),
            totals: false,
        };
        out.write(&report.render(cli.common.json))
    })
}
