//! syslat: time applications wait in I/O system calls, per operation (read, write, sync, open),
//! as histograms with percentiles and a table of where the time went.

use std::mem::MaybeUninit;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Parser, ValueEnum};

use iostack::common::bpf::{init_libbpf_logging, load_planned, DropCounter, HistogramDrain};
use iostack::common::cli::{self, CommonArgs};
use iostack::common::error::{require_privileges, run_main};
use iostack::common::filter::{CommFilter, TaskFilter};
use iostack::common::hist::Unit;
use iostack::common::output::{announce, HistogramReport, LabeledHistogram, Out};
use iostack::common::probe::{raw_tracepoint_flavor, AttachPlan, Flavor, Prober};
use iostack::common::runloop::{run_intervals, StopSignal};
use iostack::common::syscalls::{self, TracedOp};

mod skel {
    include!(concat!(env!("OUT_DIR"), "/syslat.skel.rs"));
}
use skel::SyslatSkelBuilder;

/// Must match SYSLAT_MAX_NR and SYSLAT_MAX_SLOTS in src/bpf/syslat.h.
const MAX_NR: usize = 1024;
const MAX_SLOTS: u32 = 64;

const EXAMPLES: &str = "Examples:
  syslat                     read, write, sync and open latency, printed at Ctrl-C
  syslat 1 10                every second, ten times
  syslat -p 1234             only process 1234 (all its threads)
  syslat -c postgres -x      only failed calls of tasks named postgres
  syslat -s sync --per-syscall   fsync, fdatasync, sync, syncfs, sync_file_range apart
  syslat -s read,openat -j   the read group and openat alone, as JSON
  syslat --explain           which kernel hooks would be used, and why";

/// How syslat hooks system calls (default: the best this kernel allows).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Attach {
    Auto,
    TpBtf,
    RawTp,
    Tracepoint,
}

/// Summarize the latency of I/O system calls per operation.
#[derive(Parser, Debug)]
#[command(name = "syslat", version, after_help = EXAMPLES)]
struct Cli {
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

    #[command(flatten)]
    common: CommonArgs,
}

fn main() -> ExitCode {
    run_main("syslat", || run(cli::parse("syslat")))
}

fn run(cli: Cli) -> Result<()> {
    init_libbpf_logging(cli.common.verbose);
    let ops = syscalls::select(&cli.syscalls, cli.per_syscall)?;
    let tasks = TaskFilter::new(cli.pid, cli.tid)?;
    let comm = cli.comm.as_deref().map(CommFilter::parse).transpose()?;
    require_privileges("syslat")?;
    let prober = Prober::new()?;
    let mut plan = plan_syscall_hooks(&prober, cli.attach, &ops)?;
    let unit = Unit::from_millis_flag(cli.common.milliseconds);

    let config = Config {
        ops: &ops,
        tasks,
        comm: comm.as_ref(),
        failed: cli.failed,
        unit,
    };
    // Task-local storage where the kernel offers it to tracing programs, else a hash map.
    let (mut storage, mut fallback_storage) = (MaybeUninit::uninit(), MaybeUninit::uninit());
    let (mut skel, _links, starts) = match load(&mut storage, &plan, &config, true) {
        Ok((skel, links)) => (skel, links, "task-local storage (bpf_task_storage_get)"),
        Err(_) => {
            let (skel, links) = load(&mut fallback_storage, &plan, &config, false)?;
            (
                skel,
                links,
                "hash map by thread id (no task storage for tracing here)",
            )
        }
    };
    plan.decide("starts", starts);

    let mut out = Out::new();
    if cli.common.explain {
        return out.write(&plan.explain(&prober));
    }
    let stop = StopSignal::install()?;
    announce(
        &mut out,
        cli.common.json,
        "Tracing I/O system calls... Hit Ctrl-C to end.",
    )?;

    let mut drain = HistogramDrain::new();
    let mut drop_counter = DropCounter::default();
    run_intervals(&stop, cli.common.interval, cli.common.count, || {
        let bss = skel
            .maps
            .bss_data
            .as_deref_mut()
            .context("syslat's .bss is not mapped")?;
        let drained = drain.swap_and_drain_array(&mut bss.hist_gen, &skel.maps.hists, MAX_SLOTS)?;
        let drops = drop_counter.delta(&bss.drops);
        let histograms: Vec<LabeledHistogram> = drained
            .into_iter()
            .filter_map(|(slot, hist)| {
                let op = ops.get((slot as usize).checked_sub(1)?)?;
                Some(LabeledHistogram {
                    labels: vec![("op", op.label.clone())],
                    hist,
                })
            })
            .collect();
        let report = HistogramReport {
            tool: "syslat",
            unit,
            timestamp: cli.common.timestamp,
            histograms: &histograms,
            drops: &drops,
            accounted: None,
            totals: true,
        };
        out.write(&report.render(cli.common.json))
    })
}

/// What the BPF side is configured with.
struct Config<'a> {
    ops: &'a [TracedOp],
    tasks: TaskFilter,
    comm: Option<&'a CommFilter>,
    failed: bool,
    unit: Unit,
}

fn load<'obj>(
    storage: &'obj mut MaybeUninit<libbpf_rs::OpenObject>,
    plan: &AttachPlan,
    config: &Config,
    per_task: bool,
) -> Result<(skel::SyslatSkel<'obj>, Vec<libbpf_rs::Link>)> {
    load_planned(SyslatSkelBuilder::default(), storage, plan, |open| {
        // The map type of the path not taken must not even be created (5.10 has none).
        open.maps.task_starts.set_autocreate(per_task)?;
        if per_task {
            open.maps.starts.set_max_entries(1)?;
        }
        let rodata = open
            .maps
            .rodata_data
            .as_deref_mut()
            .context("syslat's .rodata is not mapped")?;
        rodata.unit_ns = config.unit.ns();
        rodata.unit_lg = config.unit.lg();
        rodata.per_task = per_task;
        for (i, op) in config.ops.iter().enumerate() {
            for s in &op.members {
                // Slot 0 means "not traced"; numbers beyond the table cannot be traced.
                let nr = usize::try_from(s.nr).ok().filter(|&nr| nr < MAX_NR);
                let nr = nr.with_context(|| format!("{} has number {}", s.name, s.nr))?;
                rodata.sys_slot[nr] = (i + 1) as u8;
            }
        }
        rodata.filter_tgid = config.tasks.tgid;
        rodata.filter_tid = config.tasks.tid;
        if let Some(c) = config.comm {
            rodata.filter_comm = true;
            for (dst, src) in rodata.comm.iter_mut().zip(c.bytes()) {
                *dst = src as _;
            }
        }
        rodata.failed_only = config.failed;
        Ok(())
    })
}

/// sys_enter/sys_exit through tp_btf or raw_tp (one program each for every syscall, which the
/// in-kernel table filters), else one perf tracepoint pair per traced syscall.
fn plan_syscall_hooks(prober: &Prober, attach: Attach, ops: &[TracedOp]) -> Result<AttachPlan> {
    let mut plan = AttachPlan::new("syslat");
    let only = match attach {
        Attach::Auto => None,
        Attach::TpBtf => Some(Flavor::TpBtf),
        Attach::RawTp => Some(Flavor::RawTp),
        Attach::Tracepoint => {
            return plan_per_syscall_tracepoints(prober, plan, ops, "forced by --attach".into())
        }
    };
    let (flavor, why) = match raw_tracepoint_flavor(prober, "sys_enter", only) {
        Ok(choice) => choice,
        Err(e) if attach == Attach::Auto => {
            return plan_per_syscall_tracepoints(prober, plan, ops, e);
        }
        Err(e) => {
            bail!("--attach {attach:?} is not possible on this kernel ({e}); try --attach auto")
        }
    };
    let (enter, exit, task_exit) = match flavor {
        Flavor::TpBtf => ("sys_enter_btf", "sys_exit_btf", "task_exit_btf"),
        _ => ("sys_enter_raw", "sys_exit_raw", "task_exit_raw"),
    };
    plan.add("enter", enter, flavor, "sys_enter", why.clone());
    plan.add("exit", exit, flavor, "sys_exit", why.clone());
    plan.add(
        "cleanup",
        task_exit,
        flavor,
        "sched_process_exit",
        "frees the start slot of an exiting thread",
    );
    plan.decide(
        "select",
        "syscall number -> histogram in one array load, in the kernel",
    );
    Ok(plan)
}

fn plan_per_syscall_tracepoints(
    prober: &Prober,
    mut plan: AttachPlan,
    ops: &[TracedOp],
    why: String,
) -> Result<AttachPlan> {
    if prober.tracefs().is_none() {
        bail!(
            "sys_enter/sys_exit cannot be hooked here ({why}) and the per-syscall tracepoints need tracefs: mount it with `mount -t tracefs nodev /sys/kernel/tracing`"
        );
    }
    let mut missing = Vec::new();
    for s in ops.iter().flat_map(|o| o.members.iter()) {
        if !prober.has_tracepoint("syscalls", &format!("sys_enter_{}", s.name)) {
            missing.push(s.name);
            continue;
        }
        let reason = format!("per-syscall tracepoints: {why}");
        let enter = format!("syscalls:sys_enter_{}", s.name);
        let exit = format!("syscalls:sys_exit_{}", s.name);
        plan.add(
            "enter",
            "sys_enter_tp",
            Flavor::Tracepoint,
            &enter,
            reason.clone(),
        );
        plan.add("exit", "sys_exit_tp", Flavor::Tracepoint, &exit, reason);
    }
    if plan.programs.is_empty() {
        bail!("this kernel has no syscall tracepoints (CONFIG_FTRACE_SYSCALLS is off) and sys_enter cannot be hooked ({why})");
    }
    if !missing.is_empty() {
        plan.decide(
            "missing",
            format!("no tracepoint, not traced: {}", missing.join(", ")),
        );
    }
    plan.add(
        "cleanup",
        "task_exit_tp",
        Flavor::Tracepoint,
        "sched:sched_process_exit",
        "frees the start slot of an exiting thread",
    );
    Ok(plan)
}
