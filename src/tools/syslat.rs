//! syslat: time applications wait in I/O system calls, per operation (read, write, sync, open),
//! as histograms with percentiles and a table of where the time went.

use anyhow::{bail, Context, Result};
use clap::ValueEnum;

use crate::common::kernel::hooks::raw_tracepoint_flavor;
use crate::common::kernel::plan::{AttachPlan, Flavor};
use crate::common::kernel::prober::Prober;
use crate::common::kernel::syscalls::TracedOp;
use crate::common::load::maps::HistogramCollector;
use crate::common::load::{copy_struct, load_planned, mapped, Loaded};
use crate::common::losses::{Loss, CALLS};
use crate::common::report::hist::Unit;
use crate::common::report::{HistogramReport, LabeledHistogram};
use crate::common::run::filter::TaskFilter;
use crate::common::run::{HistogramTool, Tool};

mod skel {
    include!(concat!(env!("OUT_DIR"), "/syslat.skel.rs"));
}
use skel::{types, SyslatSkel, SyslatSkelBuilder};

// SAFETY: a repr(C) struct of integers and bytes; any bit pattern is valid.
unsafe impl plain::Plain for types::task_filter {}

/// Must match SYSLAT_MAX_NR and SYSLAT_MAX_SLOTS in src/bpf/syslat.h.
const MAX_NR: usize = 1024;
const MAX_SLOTS: u32 = 64;

/// How syslat hooks system calls (default: the best this kernel allows).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Attach {
    #[default]
    Auto,
    TpBtf,
    RawTp,
    Tracepoint,
}

/// What syslat is asked for.
#[derive(Clone, Debug, Default)]
pub struct SyslatOptions {
    /// The operations to time: groups or single syscalls (`common::syscalls::select`).
    pub ops: Vec<TracedOp>,
    pub tasks: TaskFilter,
    /// `-x`: only calls that returned an error.
    pub failed: bool,
    pub attach: Attach,
    pub unit: Unit,
}

/// Every kind of loss syslat can report.
const LOSSES: [Loss; 4] = [Loss::NoStart, Loss::StartFull, Loss::HistFull, Loss::Clock];

/// syslat, loaded and attached.
pub struct Syslat {
    loaded: Loaded<SyslatSkel<'static>>,
    opts: SyslatOptions,
    collector: HistogramCollector,
}

impl Tool for Syslat {
    const NAME: &'static str = "syslat";
    type Options = SyslatOptions;
    type Plan = AttachPlan;

    fn plan(prober: &Prober, opts: &SyslatOptions) -> Result<AttachPlan> {
        plan_syscall_hooks(prober, opts.attach, &opts.ops)
    }

    fn open(_prober: &Prober, plan: &mut AttachPlan, opts: &SyslatOptions) -> Result<Syslat> {
        // Task-local storage where the kernel offers it to tracing programs, else a hash map.
        let (loaded, starts) = match load(plan, opts, true) {
            Ok(loaded) => (loaded, "task-local storage (bpf_task_storage_get)"),
            Err(_) => (
                load(plan, opts, false)?,
                "hash map by thread id (no task storage for tracing here)",
            ),
        };
        plan.decide("starts", starts);
        Ok(Syslat {
            loaded,
            opts: opts.clone(),
            collector: HistogramCollector::default(),
        })
    }
}

impl HistogramTool for Syslat {
    const BANNER: &'static str = "Tracing I/O system calls... Hit Ctrl-C to end.";

    fn collect(&mut self) -> Result<HistogramReport> {
        let bss = mapped(
            self.loaded.skel.maps.bss_data.as_deref_mut(),
            "syslat's .bss",
        )?;
        let hists = &self.loaded.skel.maps.hists;
        let drained = self
            .collector
            .drain_array(&mut bss.hist_gen, hists, MAX_SLOTS)?;
        let losses = self.collector.losses(&bss.losses, &LOSSES);
        let histograms = drained
            .into_iter()
            .filter_map(|(slot, hist)| {
                let op = self.opts.ops.get((slot as usize).checked_sub(1)?)?;
                Some(LabeledHistogram {
                    labels: vec![("op", op.label.clone())],
                    hist,
                })
            })
            .collect();
        Ok(HistogramReport {
            tool: Self::NAME,
            unit: self.opts.unit,
            noun: CALLS,
            histograms,
            losses,
            accounted: None,
            async_calls: None,
            totals: true,
        })
    }
}

fn load(
    plan: &AttachPlan,
    opts: &SyslatOptions,
    per_task: bool,
) -> Result<Loaded<SyslatSkel<'static>>> {
    load_planned(SyslatSkelBuilder::default(), plan, |open| {
        // The map type of the path not taken must not even be created (5.10 has none).
        open.maps.task_starts.set_autocreate(per_task)?;
        if per_task {
            open.maps.starts.set_max_entries(1)?;
        }
        let rodata = mapped(open.maps.rodata_data.as_deref_mut(), "syslat's .rodata")?;
        rodata.unit_ns = opts.unit.ns();
        rodata.unit_lg = opts.unit.lg();
        rodata.per_task = per_task;
        for (i, op) in opts.ops.iter().enumerate() {
            for s in &op.members {
                // Slot 0 means "not traced"; numbers beyond the table cannot be traced.
                let nr = usize::try_from(s.nr).ok().filter(|&nr| nr < MAX_NR);
                let nr = nr.with_context(|| format!("{} has number {}", s.name, s.nr))?;
                rodata.sys_slot[nr] = (i + 1) as u8;
            }
        }
        copy_struct("task_filter", &mut rodata.task_filter, &opts.tasks.to_bpf())?;
        rodata.failed_only = opts.failed;
        Ok(())
    })
}

/// sys_enter/sys_exit through tp_btf or raw_tp (one program each for every syscall, which the
/// in-kernel table filters), else one perf tracepoint pair per traced syscall.
fn plan_syscall_hooks(prober: &Prober, attach: Attach, ops: &[TracedOp]) -> Result<AttachPlan> {
    let mut plan = AttachPlan::new(Syslat::NAME);
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
