//! syslat: time applications wait in I/O system calls, per operation (read, write, sync, open),
//! as histograms with percentiles and a table of where the time went.

use anyhow::Result;

use crate::common::cgroup::{fill_task_cgroup_map, names::OTHER, per_cgroup_entries, CgroupNames};
use crate::common::kernel::plan::AttachPlan;
use crate::common::kernel::prober::Prober;
use crate::common::kernel::syscalls::{
    fill_syscall_slots, plan_syscall_hooks, remember_other_processes, Attach, TracedOp,
};
use crate::common::load::maps::{drain_array_generation, drain_generation, HistogramCollector};
use crate::common::load::{
    copy_struct, load_planned, load_with_thread_state, mapped, thread_state_maps, Loaded,
};
use crate::common::losses::{Loss, CALLS};
use crate::common::report::hist::Unit;
use crate::common::report::{HistogramReport, LabeledHistogram};
use crate::common::run::filter::TaskFilter;
use crate::common::run::{HistogramTool, Tool};

crate::bpf_skeleton!("syslat", task_filter, syslat_cgroup_key);
use skel::{types, SyslatSkel, SyslatSkelBuilder};

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
    /// `--per-cgroup DEPTH`: a histogram per cgroup v2 at that depth.
    pub per_cgroup: Option<u32>,
}

/// Every kind of loss syslat can report.
const LOSSES: [Loss; 4] = [Loss::NoStart, Loss::StartFull, Loss::HistFull, Loss::Clock];

/// syslat, loaded and attached.
pub struct Syslat {
    loaded: Loaded<SyslatSkel<'static>>,
    opts: SyslatOptions,
    collector: HistogramCollector,
    cgroups: Option<CgroupNames>,
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
            cgroups: opts.per_cgroup.map(CgroupNames::new),
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
        let gen = self.collector.flip(&mut bss.hist_gen);
        let losses = self.collector.losses(&bss.losses, &LOSSES);
        let maps = &self.loaded.skel.maps;
        let ops = &self.opts.ops;
        let op_of = |slot: u32| ops.get((slot as usize).checked_sub(1)?);
        let mut histograms = Vec::new();
        // With --per-cgroup, the plain histograms are the events no cgroup's had room for.
        for (slot, hist) in drain_array_generation(&maps.hists, gen, MAX_SLOTS)? {
            let Some(op) = op_of(slot) else { continue };
            let mut labels = vec![("op", op.label.clone())];
            if self.cgroups.is_some() {
                labels.insert(0, ("cgroup", OTHER.to_string()));
            }
            histograms.push(LabeledHistogram { labels, hist });
        }
        if let Some(names) = &mut self.cgroups {
            for (key_bytes, hist) in drain_generation(&maps.cgroup_hists, gen)? {
                let mut key = types::syslat_cgroup_key::default();
                plain::copy_from_bytes(&mut key, &key_bytes)
                    .map_err(|e| anyhow::anyhow!("bad histogram key: {e:?}"))?;
                let Some(op) = op_of(key.slot) else { continue };
                let labels = vec![("cgroup", names.name(key.cgroup)), ("op", op.label.clone())];
                histograms.push(LabeledHistogram { labels, hist });
            }
            histograms.sort_by(|a, b| a.labels.cmp(&b.labels));
        }
        Ok(HistogramReport {
            tool: Self::NAME,
            time: crate::common::report::local_hms(),
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
        rodata.remember_others = remember_other_processes(plan, opts.tasks.tgid, per_task);
        copy_struct("task_filter", &mut rodata.task_filter, &opts.tasks.to_bpf())?;
        fill_task_cgroup_map(&mut open.maps.task_cgroup, opts.tasks.cgroup.as_ref())?;
        rodata.failed_only = opts.failed;
        rodata.per_cgroup_depth = opts.per_cgroup.unwrap_or(0);
        if opts.per_cgroup.is_some() {
            open.maps
                .cgroup_hists
                .set_max_entries(per_cgroup_entries(opts.ops.len() as u32))?;
        }
        Ok(())
    })
}
