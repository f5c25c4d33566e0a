//! syslat: time applications wait in I/O system calls, per operation (read, write, sync, open),
//! as histograms with percentiles and a table of where the time went.

use anyhow::Result;

use crate::common::kernel::plan::AttachPlan;
use crate::common::kernel::prober::Prober;
use crate::common::kernel::syscalls::{fill_syscall_slots, plan_syscall_hooks, Attach, TracedOp};
use crate::common::load::maps::HistogramCollector;
use crate::common::load::{
    copy_struct, load_planned, load_with_thread_state, mapped, thread_state_maps, Loaded,
};
use crate::common::losses::{Loss, CALLS};
use crate::common::report::hist::Unit;
use crate::common::report::{HistogramReport, LabeledHistogram};
use crate::common::run::filter::TaskFilter;
use crate::common::run::{HistogramTool, Tool};

crate::bpf_skeleton!("syslat", task_filter);
use skel::{SyslatSkel, SyslatSkelBuilder};

/// Must match SYSLAT_MAX_SLOTS in src/bpf/syslat.h.
const MAX_SLOTS: u32 = 64;

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
        let mut plan = AttachPlan::new(Self::NAME);
        plan_syscall_hooks(prober, &mut plan, opts.attach, &opts.ops)?;
        Ok(plan)
    }

    fn open(_prober: &Prober, plan: &mut AttachPlan, opts: &SyslatOptions) -> Result<Syslat> {
        let (loaded, starts) = load_with_thread_state(|per_task| load(plan, opts, per_task))?;
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
        thread_state_maps(
            &mut open.maps.starts_by_task,
            &mut open.maps.starts_by_tid,
            per_task,
        )?;
        let rodata = mapped(open.maps.rodata_data.as_deref_mut(), "syslat's .rodata")?;
        rodata.unit_ns = opts.unit.ns();
        rodata.unit_lg = opts.unit.lg();
        rodata.per_task = per_task;
        fill_syscall_slots(&mut rodata.sys_slot, &opts.ops)?;
        copy_struct("task_filter", &mut rodata.task_filter, &opts.tasks.to_bpf())?;
        rodata.failed_only = opts.failed;
        Ok(())
    })
}
