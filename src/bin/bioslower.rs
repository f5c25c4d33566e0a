//! bioslower: every block I/O slower than a threshold, as it completes (bcc's biosnoop columns,
//! with the threshold compared in the kernel), or every slow bio submission (`--stage submit`),
//! with the kernel stack where it waited (`-K`).

use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, ValueEnum};
use libbpf_rs::RingBufferBuilder;

use iostack::common::blk::{
    plan_bio_owner, plan_block_hooks, plan_submit_hooks, AccountedRequests, QueueStart,
};
use iostack::common::bpf::{init_libbpf_logging, load_planned, per_cpu_counts};
use iostack::common::cli::{self, usage_error};
use iostack::common::disk::{DiskFilter, DiskNames};
use iostack::common::error::{require_privileges, run_main};
use iostack::common::events::{drain_until_stopped, EventOutput, LossKind, Losses};
use iostack::common::filter::{CommFilter, TaskFilter};
use iostack::common::ioevent::{ns_to_ms, text_header, IoEvent};
use iostack::common::output::{announce, Out};
use iostack::common::probe::{AttachPlan, Prober};
use iostack::common::reqflags::RequestFlags;
use iostack::common::runloop::StopSignal;
use iostack::common::stacks::KernelStacks;
use iostack::common::threshold::{describe_threshold, parse_threshold};
use iostack::common::unseen::{describe_unseen, UnseenIos};

mod skel {
    include!(concat!(env!("OUT_DIR"), "/bioslower.skel.rs"));
}
use skel::{types, BioslowerSkelBuilder};

// SAFETY: a repr(C) struct of integers and bytes; any bit pattern is valid.
unsafe impl plain::Plain for types::slow_event {}

/// The kernel side's `enum slow_drop`, in order (src/bpf/bioslower.h).
const LOSSES: &[LossKind] = &[
    LossKind {
        name: "ring_buffer_full",
        text: "events: the ring buffer was full (output could not keep up)",
    },
    LossKind {
        name: "missed_start",
        text: "I/Os completed without a recorded start (in flight when tracing began, or evicted)",
    },
    LossKind {
        name: "start_map_full",
        text: "I/Os whose start could not be stored (map full)",
    },
    LossKind {
        name: "clock",
        text: "I/Os with a start time after their end",
    },
    // Found in user space (common::unseen), reported per disk.
    LossKind {
        name: "unseen",
        text: "I/Os completed (per /proc/diskstats) that never reached the BPF programs",
    },
];

/// Ring buffer for slow events: 8 MiB holds ~100k events, a second of slack at 100k/s.
const RINGBUF_BYTES: u32 = 8 << 20;
const STACK_ENTRIES: u32 = 4096;

const EXAMPLES: &str = "Examples:
  bioslower                 block I/O slower than 10 ms, as it completes
  bioslower 1.5ms           slower than 1.5 ms (units: ns, us, ms, s; a bare number is ms)
  bioslower 0 -d nvme0n1    every I/O of one disk
  bioslower -Q 20           include OS queue time; shows the QUE(ms) column
  bioslower -p 1234 5       I/O submitted by process 1234, slower than 5 ms
  bioslower -j 0 | head     one JSON object per I/O
  bioslower --stage submit -K 10   bio submissions slower than 10 ms, with where they waited
  bioslower --explain -Q    which kernel hooks would be used, and why";

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Stage {
    /// A request's latency: issue (or OS accounting start, with -Q) to completion
    Block,
    /// A bio's submission: the time submit_bio_noacct takes, before the request exists
    Submit,
}

/// Print every block I/O slower than a threshold, as it completes.
#[derive(Parser, Debug)]
#[command(name = "bioslower", version, after_help = EXAMPLES)]
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

    /// What to time: block requests, or bio submission
    #[arg(long, value_enum, default_value_t = Stage::Block)]
    stage: Stage,

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
    run_main("bioslower", || run(cli))
}

/// What the kernel side is told besides the plan.
struct Settings {
    plan: AttachPlan,
    queue_start: QueueStart,
    rq_single_arg: bool,
    bio_with_queue: bool,
}

fn plan(prober: &Prober, cli: &Cli, accounted: &AccountedRequests) -> Result<Settings> {
    match cli.stage {
        Stage::Block => {
            let mut hooks = plan_block_hooks(prober, "bioslower", cli.queued, cli.explain)?;
            let bio_with_queue = plan_bio_owner(prober, &mut hooks.plan)?;
            hooks.plan.decide("counted", accounted.describe());
            Ok(Settings {
                plan: hooks.plan,
                queue_start: hooks.queue_start,
                rq_single_arg: hooks.single_arg,
                bio_with_queue,
            })
        }
        Stage::Submit => Ok(Settings {
            plan: plan_submit_hooks(prober, "bioslower", cli.kernel_stack)?.plan,
            queue_start: QueueStart::Off,
            rq_single_arg: true,
            bio_with_queue: false,
        }),
    }
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn run(cli: Cli) -> Result<()> {
    init_libbpf_logging(cli.verbose);
    let disk = cli.disk.as_deref().map(DiskFilter::parse).transpose()?;
    let tasks = TaskFilter::new(cli.pid, None)?;
    let comm = cli.comm.as_deref().map(CommFilter::parse).transpose()?;
    require_privileges("bioslower")?;
    let prober = Prober::new()?;
    let accounted = AccountedRequests::from_btf(&prober);
    let settings = plan(&prober, &cli, &accounted)?;
    let flags = RequestFlags::from_btf(&prober).context(
        "this kernel's BTF has no req_op/req_flag_bits enums, needed to decode the T column",
    )?;

    let mut storage = MaybeUninit::uninit();
    let (skel, _links) = load_planned(
        BioslowerSkelBuilder::default(),
        &mut storage,
        &settings.plan,
        |open| {
            let rodata = open
                .maps
                .rodata_data
                .as_deref_mut()
                .context("bioslower's .rodata is not mapped")?;
            rodata.min_ns = cli.min;
            rodata.q_start = settings.queue_start as u32;
            rodata.rq_tp_single_arg = settings.rq_single_arg;
            rodata.bio_tp_with_queue = settings.bio_with_queue;
            rodata.filter_disk = disk.is_some();
            rodata.filter_dev = disk.as_ref().map_or(0, |d| d.dev);
            rodata.filter_tgid = tasks.tgid;
            if let Some(c) = &comm {
                rodata.filter_comm = true;
                for (dst, src) in rodata.comm_filter.iter_mut().zip(c.bytes()) {
                    *dst = src as _;
                }
            }
            rodata.want_stack = cli.kernel_stack;
            rodata.seen_io_stat = accounted.io_stat;
            rodata.seen_flush_seq = accounted.flush_seq;
            rodata.seen_flush_op = accounted.flush_op;
            rodata.seen_skip_passthrough = accounted.skip_passthrough;
            open.maps.events.set_max_entries(RINGBUF_BYTES)?;
            open.maps
                .stacks
                .set_max_entries(if cli.kernel_stack { STACK_ENTRIES } else { 1 })?;
            Ok(())
        },
    )?;

    let mut out = Out::new();
    if cli.explain {
        return out.write(&settings.plan.explain(&prober));
    }

    let stop = StopSignal::install()?;
    // Block requests are what /proc/diskstats counts; bio submissions are not.
    let mut unseen = match cli.stage {
        Stage::Block => Some(UnseenIos::start(disk.as_ref().map(|d| d.dev))?),
        Stage::Submit => None,
    };
    let start_ns = monotonic_ns();
    let what = match cli.stage {
        Stage::Block => "block device I/O",
        Stage::Submit => "bio submissions",
    };
    let tracing = match cli.min {
        0 => format!("Tracing all {what}... Hit Ctrl-C to end."),
        ns => format!(
            "Tracing {what} slower than {}... Hit Ctrl-C to end.",
            describe_threshold(ns)
        ),
    };
    announce(&mut out, cli.json, &tracing)?;

    let sink = RefCell::new(EventOutput::new());
    if !cli.json {
        sink.borrow_mut().line(&text_header(cli.queued))?;
        sink.borrow_mut().flush()?;
    }
    let disks = RefCell::new(DiskNames::load());
    let stacks = cli.kernel_stack.then(KernelStacks::new);
    let stage = match cli.stage {
        Stage::Block => "block",
        Stage::Submit => "submit",
    };
    let decode = |raw: &types::slow_event| -> IoEvent {
        let stack = stacks.as_ref().map(|s| {
            match KernelStacks::addresses(&skel.maps.stacks, raw.stack_id) {
                Ok(Some(addrs)) => s
                    .symbolize(&addrs)
                    .unwrap_or_else(|e| vec![format!("(not symbolized: {e:#})")]),
                Ok(None) => vec![format!("(not captured: error {})", raw.stack_id)],
                Err(e) => vec![format!("(not readable: {e:#})")],
            }
        });
        let comm_len = raw
            .comm
            .iter()
            .position(|&c| c == 0)
            .unwrap_or(raw.comm.len());
        let comm: Vec<u8> = raw.comm[..comm_len].iter().map(|&c| c as u8).collect();
        IoEvent {
            time_s: (raw.ts_ns as i64 - start_ns as i64) as f64 / 1e9,
            stage,
            comm: String::from_utf8_lossy(&comm).into_owned(),
            pid: raw.pid,
            tid: raw.tid,
            disk: disks.borrow_mut().name_or_reload(raw.dev),
            rwbs: flags.rwbs(raw.cmd_flags),
            flags: flags.describe(raw.cmd_flags),
            sector: raw.sector,
            bytes: raw.bytes,
            queue_ms: cli.queued.then(|| ns_to_ms(raw.queue_ns)),
            queue_ns: cli.queued.then_some(raw.queue_ns),
            lat_ms: ns_to_ms(raw.lat_ns),
            lat_ns: raw.lat_ns,
            slept_ms: cli.kernel_stack.then(|| ns_to_ms(raw.slept_ns)),
            stack,
        }
    };

    let mut builder = RingBufferBuilder::new();
    builder.add(&skel.maps.events, |data: &[u8]| {
        let mut raw = types::slow_event::default();
        if plain::copy_from_bytes(&mut raw, data).is_err() {
            return 0; // a short record cannot come from our program; never seen
        }
        let event = decode(&raw);
        let text = if cli.json { event.json() } else { event.text() };
        sink.borrow_mut().event(&text)
    })?;
    let ring = builder.build().context("setting up the ring buffer")?;

    let bss = skel
        .maps
        .bss_data
        .as_deref()
        .context("bioslower's .bss is not mapped")?;
    let mut losses = Losses::new(LOSSES);
    let mut report_losses = |sink: &mut EventOutput| -> Result<()> {
        // SAFETY: .bss is mapped for the skeleton's life; the kernel updates it concurrently.
        let now: Vec<u64> = bss
            .drops
            .iter()
            .map(|d| unsafe { std::ptr::read_volatile(d) })
            .collect();
        for line in losses.new_lines(&now, cli.json) {
            sink.line(&line)?;
        }
        if let Some(unseen) = unseen.as_mut() {
            let found = unseen.update(|| per_cpu_counts(&skel.maps.io_seen))?;
            for (dev, n) in found
                .iter()
                .filter(|t| t.unseen > 0)
                .map(|t| (t.dev, t.unseen))
            {
                let name = disks.borrow_mut().name_or_reload(dev);
                losses.add("unseen", n);
                sink.line(&if cli.json {
                    serde_json::json!({"lost": n, "reason": "unseen", "disk": name}).to_string()
                } else {
                    format!("lost {}", describe_unseen(n, &name))
                })?;
            }
        }
        sink.flush()
    };
    drain_until_stopped(&stop, &ring, || report_losses(&mut sink.borrow_mut()))?;
    let mut sink = sink.borrow_mut();
    report_losses(&mut sink)?;
    let summary = losses.summary(sink.events, cli.json);
    sink.line(&summary)?;
    sink.flush()
}
